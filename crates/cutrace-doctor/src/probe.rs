//! `--probe`: ask CUPTI itself. Placeholder until the Range Profiler session is wired.

use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct ProbeReport {
    pub error: Option<String>,
    pub devices: Vec<DeviceProbe>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DeviceProbe {
    pub ordinal: i32,
    pub counters_ok: bool,
}

impl ProbeReport {
    pub fn counters_available(&self) -> Option<bool> {
        if self.devices.is_empty() {
            None
        } else {
            Some(self.devices.iter().all(|d| d.counters_ok))
        }
    }
    pub fn tracing_available(&self) -> Option<bool> {
        None
    }
}

impl ProbeReport {
    pub fn render_text(&self) -> String {
        format!("probe: {:?}\n", self.error)
    }
}

pub fn run(_root: &crate::Root) -> ProbeReport {
    ProbeReport {
        error: Some("probe not implemented yet".into()),
        devices: vec![],
    }
}
