//! The agent's collectors: read a node's telemetry files under a host root and turn them into
//! [`Sample`]s (node-level series) and [`PodFigures`] (per-pod cgroup v2 figures).
//!
//! Every path is taken under [`CollectorConfig::host_root`] (`--host-root`, default `/`), so tests
//! and the simulator point a collector at a directory of scripted files. A [`Collector`] owns the
//! previous readings of every counter, so rates come from two readings and the `now` passed in;
//! the first [`Collector::sample`] gives gauges only.
//!
//! Sources and their modules, each a set of pure parsers plus a small reader that owns its state:
//! [`procfs`] (`/proc/stat`, `meminfo`, `loadavg`, `diskstats`, `net/dev`), [`psi`]
//! (`/proc/pressure/*`), [`hwmon`] (`/sys/class/hwmon`), [`resctrl`] (`/sys/fs/resctrl`, Intel
//! RDT), [`cgroup`] (kubepods under `/sys/fs/cgroup`, both kubelet drivers) and [`prom`]
//! (Prometheus text from local exporters; the HTTP fetch is the caller's).
//!
//! Rules every source follows: an absent source (no resctrl, cgroup v1, no hwmon, a file that does
//! not exist) gives absent metrics and one `info` log line per collector, never zeros and never an
//! entry in [`Collection::errors`]; a file that exists but cannot be read or parsed gives an error
//! entry and no metrics from that file. Metric names, units and sources are listed in
//! `agent/METRICS.md`.
//!
//! Cost: this runs every second on every node. One reusable buffer holds each file while it is
//! parsed, parsers work on `&str` slices without allocating per line, directory scans (hwmon,
//! resctrl groups) are redone only every [`CollectorConfig::rescan_every`] samples, and each pod's
//! cgroup directory is remembered once found.

pub mod cgroup;
pub mod hwmon;
pub mod procfs;
pub mod prom;
pub mod psi;
pub mod resctrl;
mod textfile;

mod files;

#[cfg(test)]
mod tests;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use telemesh_core::metric::{MetricName, Sample};
use telemesh_core::pod::PodFigures;

pub use cgroup::PodRef;

/// Where a sample or an error came from; bounded, so usable as a metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// `/proc/stat`.
    Stat,
    /// `/proc/meminfo`.
    Meminfo,
    /// `/proc/loadavg`.
    Loadavg,
    /// `/proc/diskstats`.
    Diskstats,
    /// `/proc/net/dev`.
    NetDev,
    /// `/proc/pressure/*`.
    Pressure,
    /// `/sys/class/hwmon`.
    Hwmon,
    /// `/sys/fs/resctrl`.
    Resctrl,
    /// `/sys/fs/cgroup` (per-pod figures).
    Cgroup,
    /// A local Prometheus endpoint.
    Prometheus,
    /// `*.prom` files in the textfile directory.
    Textfile,
}

impl Source {
    /// A short lowercase name, for logs and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stat => "stat",
            Self::Meminfo => "meminfo",
            Self::Loadavg => "loadavg",
            Self::Diskstats => "diskstats",
            Self::NetDev => "net_dev",
            Self::Pressure => "pressure",
            Self::Hwmon => "hwmon",
            Self::Resctrl => "resctrl",
            Self::Cgroup => "cgroup",
            Self::Prometheus => "prometheus",
            Self::Textfile => "textfile",
        }
    }

    fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A file that exists but could not be read or understood.
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    /// Reading failed for a reason other than the file not existing.
    #[error(
        "cannot read {path}: {source}; check that --host-root points at the host's / with /proc and /sys mounted readable"
    )]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file's text is not in the kernel format this collector expects.
    #[error(
        "cannot parse {path}: {what}; the file is not in the kernel format agent/METRICS.md describes (a scripted host root must copy it exactly)"
    )]
    Parse {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        what: String,
    },
}

impl CollectError {
    /// A bounded label for metrics: `read` or `parse`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Read { .. } => "read",
            Self::Parse { .. } => "parse",
        }
    }
}

/// What a parser found wrong with a file's text; the reader adds the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(pub String);

impl ParseError {
    pub(crate) fn new(what: impl Into<String>) -> Self {
        Self(what.into())
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The result of one [`Collector::sample`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Collection {
    /// Node-level series. A metric that could not be measured is absent, never zero.
    pub samples: Vec<Sample>,
    /// One entry per pod passed in, in the same order (see [`cgroup`] for fields left `None`);
    /// empty on a host without cgroup v2.
    pub pods: Vec<PodFigures>,
    /// Files that exist but could not be read or parsed. Absent sources are not errors.
    pub errors: Vec<(Source, String)>,
}

impl Collection {
    /// Returns the value of the sample named `name`, if present.
    pub fn get(&self, name: &str) -> Option<f64> {
        self.samples
            .iter()
            .find(|s| s.name.as_str() == name)
            .map(|s| s.value)
    }
}

/// How a [`Collector`] reads its host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectorConfig {
    /// Directory that stands for the host's `/` (`--host-root`).
    pub host_root: PathBuf,
    /// Also publish `node_cpu_utilization_ratio_cpu_<n>` for every CPU (one series per CPU).
    pub per_cpu: bool,
    /// Also publish one `node_hwmon_temp_celsius_chip_<chip>_sensor_<sensor>` per sensor.
    pub per_sensor: bool,
    /// Rescan directories (hwmon sensors, resctrl groups) every this many samples; at least 1.
    pub rescan_every: u32,
    /// node-exporter textfile directory (a host path, read under `host_root`), if any.
    pub textfile_dir: Option<PathBuf>,
}

impl Default for CollectorConfig {
    fn default() -> Self {
        Self {
            host_root: PathBuf::from("/"),
            per_cpu: false,
            per_sensor: true,
            rescan_every: 60,
            textfile_dir: None,
        }
    }
}

impl CollectorConfig {
    /// The default configuration with another host root.
    pub fn with_root(host_root: impl Into<PathBuf>) -> Self {
        Self {
            host_root: host_root.into(),
            ..Self::default()
        }
    }
}

/// Reads every source of one node; owns previous readings so that counters become rates.
///
/// Blocking file I/O: an async caller runs [`Collector::sample`] in `spawn_blocking`.
#[derive(Debug)]
pub struct Collector {
    config: CollectorConfig,
    buf: String,
    out: Out,
    procfs: procfs::ProcReader,
    psi: psi::PsiReader,
    hwmon: hwmon::HwmonReader,
    resctrl: resctrl::ResctrlReader,
    cgroup: cgroup::CgroupReader,
    textfile: textfile::TextfileReader,
    ticks: u64,
}

impl Collector {
    /// A collector with no previous readings.
    pub fn new(config: CollectorConfig) -> Self {
        let root = config.host_root.clone();
        Self {
            buf: String::with_capacity(8192),
            out: Out::default(),
            procfs: procfs::ProcReader::new(&root, config.per_cpu),
            psi: psi::PsiReader::new(&root),
            hwmon: hwmon::HwmonReader::new(&root, config.per_sensor),
            resctrl: resctrl::ResctrlReader::new(&root),
            cgroup: cgroup::CgroupReader::new(&root),
            textfile: textfile::TextfileReader::new(&root, config.textfile_dir.as_deref()),
            ticks: 0,
            config,
        }
    }

    /// The configuration this collector was built with.
    pub fn config(&self) -> &CollectorConfig {
        &self.config
    }

    /// Reads every source once, at `now` (for rates), for the pods on this node, stamping pod
    /// figures with the wall clock.
    pub fn sample(&mut self, now: Instant, pods: &[PodRef]) -> Collection {
        self.sample_at(now, SystemTime::now(), pods)
    }

    /// [`Collector::sample`] with the wall-clock time given, for tests.
    pub fn sample_at(&mut self, now: Instant, wall: SystemTime, pods: &[PodRef]) -> Collection {
        let rescan = self
            .ticks
            .is_multiple_of(u64::from(self.config.rescan_every.max(1)));
        self.ticks += 1;
        let at_unix_ms = wall
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_millis()
            .try_into()
            .unwrap_or(u64::MAX);
        let buf = &mut self.buf;
        let out = &mut self.out;
        out.samples = Vec::with_capacity(out.last_len.max(64));
        self.procfs.read(now, buf, out);
        self.psi.read(now, buf, out);
        self.hwmon.read(rescan, buf, out);
        self.resctrl.read(now, rescan, buf, out);
        let pods = self.cgroup.read(pods, at_unix_ms, buf, out);
        // After the built-ins, which win a name clash.
        self.textfile.read(buf, out);
        out.last_len = out.samples.len();
        Collection {
            samples: std::mem::take(&mut out.samples),
            pods,
            errors: std::mem::take(&mut out.errors),
        }
    }
}

/// Where readers put what they find; also remembers which absent sources were already logged.
#[derive(Debug, Default)]
pub(crate) struct Out {
    pub(crate) samples: Vec<Sample>,
    pub(crate) errors: Vec<(Source, String)>,
    absent_logged: u16,
    last_len: usize,
}

impl Out {
    /// Publishes `value` as `name` unless it is not finite. `name` must be a valid metric name.
    pub(crate) fn push(&mut self, name: &str, value: f64) {
        if !value.is_finite() {
            return;
        }
        match MetricName::new(name) {
            Ok(name) => self.samples.push(Sample { name, value }),
            Err(e) => tracing::debug!(error = %e, "collector built an invalid metric name"),
        }
    }

    /// Publishes `<base>_<key>_<value>` (a label folded into the name; see [`name_part`]).
    pub(crate) fn push_folded(&mut self, base: &str, labels: &[(&str, &str)], value: f64) {
        self.push(&fold_labels(base, labels), value);
    }

    /// Records a file that exists but failed.
    pub(crate) fn error(&mut self, source: Source, err: CollectError) {
        tracing::debug!(source = %source, error = %err, "collection error");
        self.errors.push((source, err.to_string()));
    }

    /// Logs once per collector that `source` is absent on this host (`path` is what was
    /// missing).
    pub(crate) fn absent(&mut self, source: Source, path: &Path, why: &str) {
        if self.absent_logged & source.bit() == 0 {
            self.absent_logged |= source.bit();
            tracing::info!(
                source = %source,
                path = %path.display(),
                reason = why,
                "telemetry source absent; its metrics are not published"
            );
        }
    }
}

/// Turns a label value (a sensor label, an L3 domain id, a Prometheus label) into a metric-name
/// part: ASCII letters lowercased, digits and `_` kept, every other character becomes `_`.
pub fn name_part(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// Folds labels into a name: `base` then `_<key>_<value>` for each label, in the order given,
/// both parts passed through [`name_part`]. `node_x{chip="a",sensor="b"}` → `node_x_chip_a_sensor_b`.
pub fn fold_labels(base: &str, labels: &[(&str, &str)]) -> String {
    let mut name = String::with_capacity(base.len() + 16 * labels.len());
    name.push_str(base);
    for (k, v) in labels {
        name.push('_');
        name.push_str(&name_part(k));
        name.push('_');
        name.push_str(&name_part(v));
    }
    name
}

/// Rate of a cumulative counter between two readings `dt` apart, in units per second; `None`
/// when the counter went backwards (reset, device gone) or no time passed.
pub(crate) fn rate(prev: u64, cur: u64, dt: Duration) -> Option<f64> {
    let delta = cur.checked_sub(prev)?;
    let secs = dt.as_secs_f64();
    (secs > 0.0).then(|| delta as f64 / secs)
}
