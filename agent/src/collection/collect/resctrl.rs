//! Intel RDT (and AMD PQoS) monitoring through the resctrl filesystem
//! (`Documentation/filesystems/resctrl.rst`), mounted at `/sys/fs/resctrl`.
//!
//! Node level per L3 domain: each `mon_data/mon_L3_<id>/` holds `llc_occupancy` (bytes now in
//! the cache) and `mbm_total_bytes`/`mbm_local_bytes` (cumulative bytes, so bandwidth is their
//! rate). A CTRL_MON group's figures already include its MON groups (`mon_groups/*`), but not
//! other CTRL_MON groups, so the node figure of a domain is the sum over the root (default) group
//! and every top-level CTRL_MON group; on a host with no extra groups that is the root group
//! alone. Groups are rescanned every [`super::CollectorConfig::rescan_every`] samples; when the
//! set changes, bandwidth skips one sample rather than report a jump.
//!
//! A counter reading `Unavailable` (or `Unassigned`, `Error`) makes that domain's figure absent
//! for that sample, and node totals are published only when every domain was read: a partial sum
//! would be a made-up number. Only the features listed in `info/L3_MON/mon_features` are read. No
//! resctrl mount, or no monitoring (`info/L3_MON` missing), gives absent metrics and one log line.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::files::{Fetched, parse_error, read};
use super::{Out, ParseError, Source, rate};

/// One counter file's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counter {
    /// Bytes.
    Bytes(u64),
    /// The kernel could not give a value (`Unavailable`, `Unassigned`, `Error`).
    Unavailable,
}

/// Parses a `mon_data` counter file.
pub fn parse_counter(text: &str) -> Result<Counter, ParseError> {
    let t = text.trim();
    match t {
        "Unavailable" | "Unassigned" | "Error" => Ok(Counter::Unavailable),
        _ => t
            .parse()
            .map(Counter::Bytes)
            .map_err(|_| ParseError::new(format!("{t:?} is neither a byte count nor Unavailable"))),
    }
}

/// Which monitoring events `info/L3_MON/mon_features` lists.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Features {
    /// Cache monitoring (CMT).
    pub llc_occupancy: bool,
    /// Memory bandwidth monitoring, all traffic.
    pub mbm_total: bool,
    /// Memory bandwidth monitoring, local NUMA node traffic.
    pub mbm_local: bool,
}

/// Parses `info/L3_MON/mon_features` (one event name a line; `*_config` lines ignored).
pub fn parse_mon_features(text: &str) -> Features {
    let mut f = Features::default();
    for line in text.lines() {
        match line.trim() {
            "llc_occupancy" => f.llc_occupancy = true,
            "mbm_total_bytes" => f.mbm_total = true,
            "mbm_local_bytes" => f.mbm_local = true,
            _ => {}
        }
    }
    f
}

/// One L3 domain's counter files across the CTRL_MON groups.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Domain {
    /// The `<id>` of `mon_L3_<id>`, as written (`00`).
    id: String,
    occupancy: Vec<PathBuf>,
    mbm_total: Vec<PathBuf>,
    mbm_local: Vec<PathBuf>,
}

/// What a scan found.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Layout {
    /// resctrl not mounted, or no L3 monitoring.
    Absent,
    /// The domains to read.
    Present(Vec<Domain>),
}

/// Scans `dir` (`/sys/fs/resctrl`): features, CTRL_MON groups, L3 domains.
fn scan(dir: &Path, buf: &mut String, out: &mut Out) -> Layout {
    let features_path = dir.join("info/L3_MON/mon_features");
    let features = match read(&features_path, buf) {
        Fetched::Ok => parse_mon_features(buf),
        Fetched::Absent => {
            let why = if dir.join("info").is_dir() {
                "resctrl is mounted but has no L3 monitoring (info/L3_MON missing)"
            } else {
                "resctrl is not mounted"
            };
            out.absent(Source::Resctrl, dir, why);
            return Layout::Absent;
        }
        Fetched::Failed(e) => {
            out.error(Source::Resctrl, e);
            return Layout::Absent;
        }
    };
    let mut groups = vec![dir.to_path_buf()];
    if let Ok(entries) = std::fs::read_dir(dir) {
        let mut extra: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .filter(|e| {
                !matches!(
                    e.file_name().to_str(),
                    Some("info" | "mon_groups" | "mon_data")
                )
            })
            .map(|e| e.path())
            .filter(|p| p.join("mon_data").is_dir())
            .collect();
        extra.sort();
        groups.extend(extra);
    }
    let mut ids: Vec<String> = std::fs::read_dir(dir.join("mon_data"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| Some(e.file_name().to_str()?.strip_prefix("mon_L3_")?.to_owned()))
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    if ids.is_empty() {
        out.absent(
            Source::Resctrl,
            dir,
            "resctrl has no mon_data/mon_L3_* domain",
        );
        return Layout::Absent;
    }
    let files = |id: &str, file: &str, on: bool| -> Vec<PathBuf> {
        if !on {
            return Vec::new();
        }
        groups
            .iter()
            .map(|g| g.join("mon_data").join(format!("mon_L3_{id}")).join(file))
            .collect()
    };
    Layout::Present(
        ids.into_iter()
            .map(|id| Domain {
                occupancy: files(&id, "llc_occupancy", features.llc_occupancy),
                mbm_total: files(&id, "mbm_total_bytes", features.mbm_total),
                mbm_local: files(&id, "mbm_local_bytes", features.mbm_local),
                id,
            })
            .collect(),
    )
}

/// Previous bandwidth counters of one domain.
#[derive(Debug, Clone, Copy)]
struct Prev {
    at: Instant,
    total: Option<u64>,
    local: Option<u64>,
}

/// Reads resctrl's node-level monitoring data.
#[derive(Debug)]
pub(crate) struct ResctrlReader {
    dir: PathBuf,
    layout: Option<Layout>,
    prev: Vec<Option<Prev>>,
    rescan_next: bool,
}

impl ResctrlReader {
    pub(crate) fn new(root: &Path) -> Self {
        Self {
            dir: root.join("sys/fs/resctrl"),
            layout: None,
            prev: Vec::new(),
            rescan_next: true,
        }
    }

    pub(crate) fn read(&mut self, now: Instant, rescan: bool, buf: &mut String, out: &mut Out) {
        if rescan || self.rescan_next || self.layout.is_none() {
            let layout = scan(&self.dir, buf, out);
            if self.layout.as_ref() != Some(&layout) {
                // A new set of groups or domains: old sums are not comparable.
                self.prev.clear();
                if let Layout::Present(d) = &layout {
                    self.prev.resize(d.len(), None);
                }
            }
            self.layout = Some(layout);
            self.rescan_next = false;
        }
        let Some(Layout::Present(domains)) = &self.layout else {
            return;
        };
        // Node totals: `Some` while every domain so far had a value.
        let mut occ_total = Some(0u64);
        let mut bw_total = Some(0f64);
        let mut bw_local = Some(0f64);
        let mut rescan_next = false;
        for (domain, prev) in domains.iter().zip(self.prev.iter_mut()) {
            let mut sum = |files: &[PathBuf]| {
                if files.is_empty() {
                    None
                } else {
                    sum_counters(files, buf, out, &mut rescan_next)
                }
            };
            let occ = sum(&domain.occupancy);
            let total = sum(&domain.mbm_total);
            let local = sum(&domain.mbm_local);
            let label = [("l3", domain.id.as_str())];
            if let Some(o) = occ {
                out.push_folded("node_rdt_llc_occupancy_bytes", &label, o as f64);
            }
            occ_total = occ_total.zip(occ).map(|(a, b)| a.saturating_add(b));
            let (mut r_total, mut r_local) = (None, None);
            if let Some(p) = prev {
                let dt = now.saturating_duration_since(p.at);
                r_total = p.total.zip(total).and_then(|(a, b)| rate(a, b, dt));
                r_local = p.local.zip(local).and_then(|(a, b)| rate(a, b, dt));
            }
            if let Some(r) = r_total {
                out.push_folded(
                    "node_rdt_memory_bandwidth_total_bytes_per_second",
                    &label,
                    r,
                );
            }
            if let Some(r) = r_local {
                out.push_folded(
                    "node_rdt_memory_bandwidth_local_bytes_per_second",
                    &label,
                    r,
                );
            }
            bw_total = bw_total.zip(r_total).map(|(a, b)| a + b);
            bw_local = bw_local.zip(r_local).map(|(a, b)| a + b);
            *prev = Some(Prev {
                at: now,
                total,
                local,
            });
        }
        // A feature not monitored has no files, so its domain values and sums are `None`.
        if let Some(o) = occ_total {
            out.push("node_rdt_llc_occupancy_bytes", o as f64);
        }
        if let Some(r) = bw_total {
            out.push("node_rdt_memory_bandwidth_total_bytes_per_second", r);
        }
        if let Some(r) = bw_local {
            out.push("node_rdt_memory_bandwidth_local_bytes_per_second", r);
        }
        self.rescan_next = rescan_next;
    }
}

/// Sums one counter over the groups' files; `None` if any is unavailable or unreadable. A file
/// gone (group removed) asks for a rescan.
fn sum_counters(
    files: &[PathBuf],
    buf: &mut String,
    out: &mut Out,
    rescan_next: &mut bool,
) -> Option<u64> {
    let mut sum = 0u64;
    for f in files {
        match read(f, buf) {
            Fetched::Ok => match parse_counter(buf) {
                Ok(Counter::Bytes(b)) => sum = sum.saturating_add(b),
                Ok(Counter::Unavailable) => return None,
                Err(e) => {
                    out.error(Source::Resctrl, parse_error(f, e));
                    return None;
                }
            },
            Fetched::Absent => {
                *rescan_next = true;
                return None;
            }
            Fetched::Failed(e) => {
                out.error(Source::Resctrl, e);
                return None;
            }
        }
    }
    Some(sum)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn counters_and_unavailable() {
        assert_eq!(
            parse_counter("12582912\n").unwrap(),
            Counter::Bytes(12_582_912)
        );
        for t in ["Unavailable\n", "Unassigned\n", "Error\n"] {
            assert_eq!(parse_counter(t).unwrap(), Counter::Unavailable);
        }
        assert!(parse_counter("12 MB\n").is_err());
    }

    #[test]
    fn features_ignore_config_lines() {
        let f = parse_mon_features("llc_occupancy\nmbm_total_bytes\nmbm_total_bytes_config\n");
        assert_eq!(
            f,
            Features {
                llc_occupancy: true,
                mbm_total: true,
                mbm_local: false
            }
        );
    }
}
