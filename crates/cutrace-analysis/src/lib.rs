//! cutrace-analysis: pure functions over records. Nothing here depends on record order.
