//! cutrace-inject: InitializeInjection, buffer callbacks, hand-off to a writer thread.
