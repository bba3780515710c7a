//! cutrace-monitor: always-on GPU busy for Prometheus, from the summaries injected processes
//! send instead of writing a trace (docs/MONITOR.md).
//!
//! Data flows one way: the injected library folds each CUPTI buffer into a [`fold::Fold`] and
//! sends it as a [`wire`] message over a Unix socket ([`socket`]); the monitor checks the
//! sender, applies the message to its [`state::State`] (per process and per GPU, busy as a
//! [`union::WatermarkUnion`]: never a sum), and [`prom`] renders the state as Prometheus text,
//! which [`http`] serves on `GET /metrics`. Nothing here reads the environment or prints: the
//! binary (`cutrace monitor`) and the injected library decide that.

pub mod deadline;
pub mod fold;
pub mod http;
pub mod peer;
pub mod prom;
pub mod socket;
pub mod state;
pub mod union;
pub mod wire;

pub use state::State;
