//! Per-pod cgroup v2 figures (`Documentation/admin-guide/cgroup-v2.rst`) under
//! `/sys/fs/cgroup`, for pods placed by either kubelet cgroup driver
//! (`pkg/kubelet/cm/cgroup_manager_linux.go`):
//!
//! | QoS class | systemd driver | cgroupfs driver |
//! | --- | --- | --- |
//! | Guaranteed | `kubepods.slice/kubepods-pod<uid_>.slice` | `kubepods/pod<uid>` |
//! | Burstable | `kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice` | `kubepods/burstable/pod<uid>` |
//! | BestEffort | `kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid_>.slice` | `kubepods/besteffort/pod<uid>` |
//!
//! (`<uid_>` is the uid with `-` replaced by `_`.) A pod's directory is looked up once, among
//! the drivers whose top directory exists, then remembered until it disappears.
//!
//! Read per pod: `cpu.stat` (`usage_usec`, `nr_periods`, `nr_throttled`, `throttled_usec`),
//! `memory.current`, `memory.events` (`oom_kill`), and `some avg10` of `cpu.pressure`,
//! `memory.pressure`, `io.pressure` (percent, as the kernel writes it).
//!
//! Decisions: the result has one [`PodFigures`] per pod passed in, in the same order; a pod whose
//! cgroup is not found (not started yet, or on another node) keeps every figure `None`, and so
//! does a field whose file is absent (controller not enabled, PSI off). A host without cgroup v2
//! at `/sys/fs/cgroup` (no `cgroup.controllers` there: cgroup v1 or hybrid) gives no figures at
//! all and one log line.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use telemesh_core::pod::PodFigures;

use super::files::{Fetched, parse_error, read};
use super::psi::parse_pressure;
use super::{Out, ParseError, Source};

/// A pod on this node, as the agent knows it from the API server.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodRef {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `metadata.uid`, with dashes (`6f1e2d3c-4b5a-…`).
    pub uid: String,
}

/// The kubelet's cgroup driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    /// `--cgroup-driver=systemd`: slices.
    Systemd,
    /// `--cgroup-driver=cgroupfs`: plain directories.
    Cgroupfs,
}

impl Driver {
    /// The driver's top directory under the cgroup root.
    pub fn top_dir(self) -> &'static str {
        match self {
            Self::Systemd => "kubepods.slice",
            Self::Cgroupfs => "kubepods",
        }
    }
}

/// A pod's QoS class, which picks its parent cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QosClass {
    /// Requests equal limits for every container: directly under kubepods.
    Guaranteed,
    /// Some requests: under `burstable`.
    Burstable,
    /// No requests: under `besteffort`.
    BestEffort,
}

/// The path of a pod's cgroup relative to the cgroup root, as the kubelet names it.
pub fn pod_cgroup_path(driver: Driver, qos: QosClass, uid: &str) -> String {
    match driver {
        Driver::Systemd => {
            let u = uid.replace('-', "_");
            match qos {
                QosClass::Guaranteed => format!("kubepods.slice/kubepods-pod{u}.slice"),
                QosClass::Burstable => format!(
                    "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{u}.slice"
                ),
                QosClass::BestEffort => format!(
                    "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{u}.slice"
                ),
            }
        }
        Driver::Cgroupfs => match qos {
            QosClass::Guaranteed => format!("kubepods/pod{uid}"),
            QosClass::Burstable => format!("kubepods/burstable/pod{uid}"),
            QosClass::BestEffort => format!("kubepods/besteffort/pod{uid}"),
        },
    }
}

/// Finds a pod's cgroup directory under `cgroup_root` among `drivers`, trying the QoS classes
/// in order of how common they are (Burstable, BestEffort, Guaranteed).
pub fn find_pod_cgroup(cgroup_root: &Path, drivers: &[Driver], uid: &str) -> Option<PathBuf> {
    for &driver in drivers {
        for qos in [
            QosClass::Burstable,
            QosClass::BestEffort,
            QosClass::Guaranteed,
        ] {
            let dir = cgroup_root.join(pod_cgroup_path(driver, qos, uid));
            if dir.is_dir() {
                return Some(dir);
            }
        }
    }
    None
}

/// The `cpu.stat` fields kept. `nr_*` and `throttled_usec` appear only with the cpu controller.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuStat {
    /// `usage_usec`.
    pub usage_usec: Option<u64>,
    /// `nr_periods`.
    pub nr_periods: Option<u64>,
    /// `nr_throttled`.
    pub nr_throttled: Option<u64>,
    /// `throttled_usec`.
    pub throttled_usec: Option<u64>,
}

/// Parses `cpu.stat` (`key value` lines).
pub fn parse_cpu_stat(text: &str) -> Result<CpuStat, ParseError> {
    let mut s = CpuStat::default();
    for line in text.lines() {
        let Some((k, v)) = line.split_once(' ') else {
            continue;
        };
        let slot = match k {
            "usage_usec" => &mut s.usage_usec,
            "nr_periods" => &mut s.nr_periods,
            "nr_throttled" => &mut s.nr_throttled,
            "throttled_usec" => &mut s.throttled_usec,
            _ => continue,
        };
        *slot = Some(
            v.trim()
                .parse()
                .map_err(|_| ParseError::new(format!("{k} {v:?} is not a number")))?,
        );
    }
    if s.usage_usec.is_none() {
        return Err(ParseError::new("no usage_usec line"));
    }
    Ok(s)
}

/// Parses a single-number file such as `memory.current`.
pub fn parse_u64(text: &str) -> Result<u64, ParseError> {
    let t = text.trim();
    t.parse()
        .map_err(|_| ParseError::new(format!("{t:?} is not a number")))
}

/// Parses `oom_kill` out of `memory.events`; `None` when the line is missing.
pub fn parse_oom_kill(text: &str) -> Result<Option<u64>, ParseError> {
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("oom_kill ") {
            return parse_u64(v).map(Some);
        }
    }
    Ok(None)
}

/// Reads pods' cgroup files; remembers where each pod's directory is.
#[derive(Debug)]
pub(crate) struct CgroupReader {
    root: PathBuf,
    controllers: PathBuf,
    /// uid → (directory, sample number it was last used in).
    found: HashMap<String, (PathBuf, u64)>,
    tick: u64,
    scratch: PathBuf,
}

impl CgroupReader {
    pub(crate) fn new(root: &Path) -> Self {
        let root = root.join("sys/fs/cgroup");
        Self {
            controllers: root.join("cgroup.controllers"),
            root,
            found: HashMap::new(),
            tick: 0,
            scratch: PathBuf::new(),
        }
    }

    pub(crate) fn read(
        &mut self,
        pods: &[PodRef],
        at_unix_ms: u64,
        buf: &mut String,
        out: &mut Out,
    ) -> Vec<PodFigures> {
        if pods.is_empty() {
            return Vec::new();
        }
        if !self.controllers.is_file() {
            out.absent(
                Source::Cgroup,
                &self.controllers,
                "no cgroup v2 at /sys/fs/cgroup (cgroup v1 or hybrid host); per-pod figures need cgroup v2",
            );
            return Vec::new();
        }
        self.tick += 1;
        let mut drivers: Option<Vec<Driver>> = None;
        let mut figures = Vec::with_capacity(pods.len());
        for pod in pods {
            let mut f = PodFigures {
                namespace: pod.namespace.clone(),
                name: pod.name.clone(),
                uid: pod.uid.clone(),
                at_unix_ms,
                ..PodFigures::default()
            };
            // Twice at most: a remembered directory that vanished is looked up again.
            for _ in 0..2 {
                let dir = match self.found.get_mut(pod.uid.as_str()) {
                    Some((dir, seen)) => {
                        *seen = self.tick;
                        dir.clone()
                    }
                    None => {
                        let drivers = drivers.get_or_insert_with(|| {
                            [Driver::Systemd, Driver::Cgroupfs]
                                .into_iter()
                                .filter(|d| self.root.join(d.top_dir()).is_dir())
                                .collect()
                        });
                        let Some(dir) = find_pod_cgroup(&self.root, drivers, &pod.uid) else {
                            break;
                        };
                        self.found.insert(pod.uid.clone(), (dir.clone(), self.tick));
                        dir
                    }
                };
                if self.read_pod(&dir, &mut f, buf, out) {
                    break;
                }
                self.found.remove(pod.uid.as_str());
            }
            figures.push(f);
        }
        let tick = self.tick;
        self.found.retain(|_, (_, seen)| *seen == tick);
        figures
    }

    /// Fills `f` from `dir`; returns false when `dir` is gone.
    fn read_pod(
        &mut self,
        dir: &Path,
        f: &mut PodFigures,
        buf: &mut String,
        out: &mut Out,
    ) -> bool {
        match self.file(dir, "cpu.stat", buf, out) {
            Some(true) => match parse_cpu_stat(buf) {
                Ok(s) => {
                    f.cpu_usage_usec = s.usage_usec;
                    f.cpu_periods = s.nr_periods;
                    f.cpu_throttled_periods = s.nr_throttled;
                    f.cpu_throttled_usec = s.throttled_usec;
                }
                Err(e) => out.error(Source::Cgroup, parse_error(&self.scratch, e)),
            },
            Some(false) => {}
            None => return dir.is_dir(),
        }
        if self.file(dir, "memory.current", buf, out) == Some(true) {
            match parse_u64(buf) {
                Ok(v) => f.memory_bytes = Some(v),
                Err(e) => out.error(Source::Cgroup, parse_error(&self.scratch, e)),
            }
        }
        if self.file(dir, "memory.events", buf, out) == Some(true) {
            match parse_oom_kill(buf) {
                Ok(v) => f.oom_kills = v,
                Err(e) => out.error(Source::Cgroup, parse_error(&self.scratch, e)),
            }
        }
        for (file, slot) in [
            ("cpu.pressure", &mut f.cpu_pressure_some_avg10),
            ("memory.pressure", &mut f.memory_pressure_some_avg10),
            ("io.pressure", &mut f.io_pressure_some_avg10),
        ] {
            if self.file(dir, file, buf, out) == Some(true) {
                match parse_pressure(buf) {
                    Ok(p) => *slot = p.some.map(|s| s.avg10),
                    Err(e) => out.error(Source::Cgroup, parse_error(&self.scratch, e)),
                }
            }
        }
        true
    }

    /// Reads `dir/name` into `buf`: `Some(true)` read, `Some(false)` failed (reported), `None`
    /// absent. The path stays in `self.scratch` for error messages.
    fn file(&mut self, dir: &Path, name: &str, buf: &mut String, out: &mut Out) -> Option<bool> {
        self.scratch.as_mut_os_string().clear();
        self.scratch.push(dir);
        self.scratch.push(name);
        match read(&self.scratch, buf) {
            Fetched::Ok => Some(true),
            Fetched::Absent => None,
            Fetched::Failed(e) => {
                out.error(Source::Cgroup, e);
                Some(false)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const UID: &str = "6f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a0b";

    #[test]
    fn kubelet_paths_for_both_drivers() {
        assert_eq!(
            pod_cgroup_path(Driver::Systemd, QosClass::Burstable, UID),
            "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6f1e2d3c_4b5a_4978_8a6b_5c4d3e2f1a0b.slice"
        );
        assert_eq!(
            pod_cgroup_path(Driver::Systemd, QosClass::Guaranteed, UID),
            "kubepods.slice/kubepods-pod6f1e2d3c_4b5a_4978_8a6b_5c4d3e2f1a0b.slice"
        );
        assert_eq!(
            pod_cgroup_path(Driver::Systemd, QosClass::BestEffort, UID),
            "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod6f1e2d3c_4b5a_4978_8a6b_5c4d3e2f1a0b.slice"
        );
        assert_eq!(
            pod_cgroup_path(Driver::Cgroupfs, QosClass::Burstable, UID),
            format!("kubepods/burstable/pod{UID}")
        );
        assert_eq!(
            pod_cgroup_path(Driver::Cgroupfs, QosClass::Guaranteed, UID),
            format!("kubepods/pod{UID}")
        );
        assert_eq!(
            pod_cgroup_path(Driver::Cgroupfs, QosClass::BestEffort, UID),
            format!("kubepods/besteffort/pod{UID}")
        );
    }

    #[test]
    fn cpu_stat_without_cpu_controller_has_usage_only() {
        // The root cgroup of a host whose cpu controller is bound to v1 (this machine's own).
        let s = parse_cpu_stat(
            "usage_usec 3993939501\nuser_usec 3453941147\nsystem_usec 539998354\nnice_usec 0\n",
        )
        .unwrap();
        assert_eq!(s.usage_usec, Some(3_993_939_501));
        assert_eq!(s.nr_periods, None);
        assert!(parse_cpu_stat("user_usec 1\n").is_err());
        assert!(parse_cpu_stat("usage_usec x\n").is_err());
    }

    #[test]
    fn memory_events_oom_kill() {
        assert_eq!(
            parse_oom_kill("low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\noom_group_kill 0\n").unwrap(),
            Some(2)
        );
        assert_eq!(parse_oom_kill("low 0\n").unwrap(), None);
        assert!(parse_oom_kill("oom_kill many\n").is_err());
    }
}
