//! The standard Prometheus process metrics and a build-info gauge, for the agent and the
//! coordinator alike: read from `/proc/self` at scrape time, so they cost nothing between
//! scrapes.
//!
//! The names, types and meanings are client_golang's (what every Prometheus dashboard expects):
//! `process_resident_memory_bytes`, `process_virtual_memory_bytes`, `process_cpu_seconds_total`,
//! `process_open_fds`, `process_max_fds`, `process_start_time_seconds`. The one collector made
//! for prometheus-client, `kubert-prometheus-process` (0.2.3), is built on prometheus-client
//! 0.23, whose registry is not our 0.25's (and `prometheus` and `metrics-process` serve other
//! registries), so this small one reads `/proc` through `procfs`. A figure that cannot be read
//! (no `/proc`, say) is left out of the scrape rather than reported as zero.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric as _};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

/// The revision the binary was built from: `TELEMESH_REVISION` in the build's environment
/// (scripts/images.sh passes `git rev-parse HEAD` to the image build), else `unknown`. Read at
/// compile time, so it costs nothing at run time and is true of the code that runs.
pub const REVISION: &str = match option_env!("TELEMESH_REVISION") {
    Some(r) => r,
    None => "unknown",
};

/// The families the collector exports and their types, as their `# TYPE` lines name them (a
/// counter's samples add `_total`).
pub const FAMILIES: [(&str, &str); 7] = [
    ("process_resident_memory_bytes", "gauge"),
    ("process_virtual_memory_bytes", "gauge"),
    ("process_cpu_seconds", "counter"),
    ("process_open_fds", "gauge"),
    ("process_max_fds", "gauge"),
    ("process_start_time_seconds", "gauge"),
    ("telemesh_build_info", "gauge"),
];

/// Labels of `telemesh_build_info`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    /// The binary (`telemesh-agent`, `telemesh-coordinator`): both export the same gauge, and
    /// dashboards pick one binary's instances by it.
    pub binary: String,
    /// The workspace version (`CARGO_PKG_VERSION`).
    pub version: String,
    /// [`REVISION`].
    pub revision: String,
}

/// Collects the process metrics of this process and the build-info gauge at each scrape.
#[derive(Debug)]
pub struct ProcessCollector {
    build: BuildLabels,
    /// Unix time the process started, seconds: fixed for the process's life, so read once.
    start_time: Option<f64>,
}

// === impl ProcessCollector ===

impl ProcessCollector {
    /// Returns a collector for this process, which reports itself as `binary`.
    pub fn new(binary: &str) -> Self {
        Self {
            build: BuildLabels {
                binary: binary.to_owned(),
                version: env!("CARGO_PKG_VERSION").to_owned(),
                revision: REVISION.to_owned(),
            },
            start_time: start_time_seconds(),
        }
    }

    /// Reads this process's figures now; `None` for each one `/proc` does not give.
    pub fn sample(&self) -> Sample {
        let me = procfs::process::Process::myself().ok();
        let stat = me.as_ref().and_then(|p| p.stat().ok());
        let ticks = procfs::ticks_per_second() as f64;
        Sample {
            resident_memory_bytes: stat
                .as_ref()
                .map(|s| s.rss.saturating_mul(procfs::page_size())),
            virtual_memory_bytes: stat.as_ref().map(|s| s.vsize),
            cpu_seconds: stat.as_ref().map(|s| (s.utime + s.stime) as f64 / ticks),
            open_fds: me
                .as_ref()
                .and_then(|p| p.fd_count().ok())
                .map(|n| n as u64),
            max_fds: me.as_ref().and_then(|p| p.limits().ok()).and_then(|l| {
                match l.max_open_files.soft_limit {
                    procfs::process::LimitValue::Value(v) => Some(v),
                    procfs::process::LimitValue::Unlimited => None,
                }
            }),
            start_time_seconds: self.start_time,
        }
    }
}

/// One reading of the process's figures.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sample {
    /// Resident set size, bytes.
    pub resident_memory_bytes: Option<u64>,
    /// Virtual memory size, bytes.
    pub virtual_memory_bytes: Option<u64>,
    /// User and system CPU time, seconds.
    pub cpu_seconds: Option<f64>,
    /// Open file descriptors.
    pub open_fds: Option<u64>,
    /// The soft limit of open file descriptors (`None` when unlimited).
    pub max_fds: Option<u64>,
    /// Unix time the process started, seconds.
    pub start_time_seconds: Option<f64>,
}

/// The process's start as Unix time: boot time plus the start tick in `/proc/self/stat`.
fn start_time_seconds() -> Option<f64> {
    let stat = procfs::process::Process::myself().ok()?.stat().ok()?;
    let boot = procfs::boot_time_secs().ok()?;
    Some(boot as f64 + stat.starttime as f64 / procfs::ticks_per_second() as f64)
}

fn gauge<N: prometheus_client::encoding::EncodeGaugeValue + std::fmt::Debug>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: Option<N>,
) -> Result<(), std::fmt::Error> {
    let Some(value) = value else { return Ok(()) };
    let g = ConstGauge::new(value);
    g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = self.sample();
        gauge(
            &mut encoder,
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            s.resident_memory_bytes.map(|v| v as i64),
        )?;
        gauge(
            &mut encoder,
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes.",
            s.virtual_memory_bytes.map(|v| v as i64),
        )?;
        if let Some(cpu) = s.cpu_seconds {
            // A counter: the encoder adds `_total`.
            let c = ConstCounter::new(cpu);
            c.encode(encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds.",
                None,
                c.metric_type(),
            )?)?;
        }
        gauge(
            &mut encoder,
            "process_open_fds",
            "Number of open file descriptors.",
            s.open_fds.map(|v| v as i64),
        )?;
        gauge(
            &mut encoder,
            "process_max_fds",
            "Maximum number of open file descriptors.",
            s.max_fds.map(|v| v as i64),
        )?;
        gauge(
            &mut encoder,
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
            s.start_time_seconds,
        )?;
        let info = ConstGauge::new(1i64);
        let mut family = encoder.encode_descriptor(
            "telemesh_build_info",
            "1, labelled with the binary, its version and the revision it was built from",
            None,
            info.metric_type(),
        )?;
        info.encode(family.encode_family(&self.build)?)
    }
}

/// Registers the process metrics and `telemesh_build_info` for `binary` in `registry`, which
/// must be the unprefixed root registry (the standard names have no prefix).
pub fn register(registry: &mut Registry, binary: &str) {
    registry.register_collector(Box::new(ProcessCollector::new(binary)));
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn scrape(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
        text
    }

    fn value(text: &str, series: &str) -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
            .parse()
            .unwrap()
    }

    #[test]
    fn exports_the_standard_names_and_types_unprefixed() {
        let mut root = Registry::default();
        root.sub_registry_with_prefix("telemesh_agent");
        register(&mut root, "telemesh-agent");
        let text = scrape(&root);
        for (name, kind) in FAMILIES {
            assert!(
                text.contains(&format!("# TYPE {name} {kind}\n")),
                "{name} {kind}:\n{text}"
            );
        }
        assert!(value(&text, "process_resident_memory_bytes") > 0.0);
        assert!(
            value(&text, "process_virtual_memory_bytes")
                >= value(&text, "process_resident_memory_bytes")
        );
        assert!(value(&text, "process_open_fds") >= 3.0, "{text}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let start = value(&text, "process_start_time_seconds");
        assert!(
            start <= now + 1.0 && start > now - 86_400.0 * 365.0,
            "{start}"
        );
        let build = format!(
            "telemesh_build_info{{binary=\"telemesh-agent\",version=\"{}\",revision=\"{REVISION}\"}}",
            env!("CARGO_PKG_VERSION")
        );
        assert_eq!(value(&text, &build), 1.0, "{text}");
    }

    #[test]
    fn cpu_time_grows_with_work() {
        let collector = ProcessCollector::new("test");
        let before = collector.sample().cpu_seconds.unwrap();
        // Burn CPU until the kernel's tick-granular counter moves.
        let mut x = 0u64;
        let after = loop {
            for i in 0..1_000_000u64 {
                x = x.wrapping_mul(31).wrapping_add(i);
            }
            std::hint::black_box(x);
            let now = collector.sample().cpu_seconds.unwrap();
            if now > before {
                break now;
            }
        };
        assert!(after > before);
    }
}
