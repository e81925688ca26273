//! What an agent measures of each pod on its node (from cgroup v2), for per-pod telemetry over
//! QUIC and, later, rewards.

/// Cumulative cgroup v2 figures of one pod, read at `at_unix_ms`. Counters are as the kernel
/// reports them (cumulative); rates are derived by whoever holds two readings.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct PodFigures {
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub name: String,
    /// Pod uid (the cgroup is found by it).
    pub uid: String,
    /// Milliseconds since the Unix epoch when the figures were read.
    pub at_unix_ms: u64,
    /// `cpu.stat usage_usec`.
    pub cpu_usage_usec: Option<u64>,
    /// `cpu.stat nr_periods`.
    pub cpu_periods: Option<u64>,
    /// `cpu.stat nr_throttled`.
    pub cpu_throttled_periods: Option<u64>,
    /// `cpu.stat throttled_usec`.
    pub cpu_throttled_usec: Option<u64>,
    /// `memory.current`, bytes.
    pub memory_bytes: Option<u64>,
    /// `memory.events oom_kill`.
    pub oom_kills: Option<u64>,
    /// `cpu.pressure` some avg10, percent.
    pub cpu_pressure_some_avg10: Option<f64>,
    /// `memory.pressure` some avg10, percent.
    pub memory_pressure_some_avg10: Option<f64>,
    /// `io.pressure` some avg10, percent.
    pub io_pressure_some_avg10: Option<f64>,
}
