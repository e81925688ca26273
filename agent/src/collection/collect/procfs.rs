//! `/proc` node figures: CPU utilisation (`/proc/stat`), load averages (`/proc/loadavg`), memory
//! (`/proc/meminfo`), disk throughput and IOPS (`/proc/diskstats`) and network throughput
//! (`/proc/net/dev`).
//!
//! Parsed by hand rather than with the `procfs` crate. procfs 0.18's `FromRead` types would take
//! paths under a custom root, but they allocate per line or per call (`Meminfo` builds a map of
//! every field, `DiskStat` a `String` per device, `InterfaceDeviceStatus` a map of `String`s, and
//! `KernelStats` parses every line of `/proc/stat`), and this runs every second. The parsers here
//! read only the fields published and stop early where they can; the tests check them against
//! procfs's own parsers on this repository's real fixture files.
//!
//! Rates and the CPU ratio come from the difference between two readings; counters that go
//! backwards (a device removed, a counter reset) give no value for that sample.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::files::{field_u64, load, parse_error};
use super::{Out, ParseError, Source, rate};

/// Sector size used by `/proc/diskstats`, whatever the device's real sector size.
const DISKSTATS_SECTOR_BYTES: u64 = 512;

// === CPU ===

/// Cumulative CPU time of one `cpu` line of `/proc/stat`, in clock ticks (`USER_HZ`).
///
/// `guest` and `guest_nice` are not kept: the kernel already counts them in `user` and `nice`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// Normal processes in user mode.
    pub user: u64,
    /// Niced processes in user mode.
    pub nice: u64,
    /// Kernel mode.
    pub system: u64,
    /// Idle.
    pub idle: u64,
    /// Idle while waiting for I/O.
    pub iowait: u64,
    /// Servicing interrupts.
    pub irq: u64,
    /// Servicing softirqs.
    pub softirq: u64,
    /// Stolen by the hypervisor.
    pub steal: u64,
}

impl CpuTimes {
    /// All time accounted, guests excluded (they are inside `user` and `nice`).
    pub fn total(&self) -> u64 {
        [
            self.user,
            self.nice,
            self.system,
            self.idle,
            self.iowait,
            self.irq,
            self.softirq,
            self.steal,
        ]
        .iter()
        .fold(0u64, |a, b| a.saturating_add(*b))
    }

    /// Time not spent working: `idle + iowait`.
    pub fn idle_total(&self) -> u64 {
        self.idle.saturating_add(self.iowait)
    }
}

/// Parses the numbers after a `cpu`/`cpuN` label. Kernels before 2.6.11 lack `steal` and later
/// fields; at least `user nice system idle` are required.
pub fn parse_cpu_fields(fields: &str) -> Result<CpuTimes, ParseError> {
    let mut v = [0u64; 8];
    let mut n = 0;
    for (slot, field) in v.iter_mut().zip(fields.split_ascii_whitespace()) {
        *slot = field
            .parse()
            .map_err(|_| ParseError::new(format!("cpu field {field:?} is not a number")))?;
        n += 1;
    }
    if n < 4 {
        return Err(ParseError::new(
            "a cpu line has fewer than 4 fields (user nice system idle)",
        ));
    }
    let [user, nice, system, idle, iowait, irq, softirq, steal] = v;
    Ok(CpuTimes {
        user,
        nice,
        system,
        idle,
        iowait,
        irq,
        softirq,
        steal,
    })
}

/// Parses the `cpu` lines at the top of `/proc/stat` into `total` and, when `per_cpu`, `cpus`
/// (cleared first; `(cpu number, times)` in file order, which is ascending). Stops at the first
/// line that is not a `cpu` line, so the long `intr` line is never split.
pub fn parse_stat(
    text: &str,
    per_cpu: bool,
    total: &mut CpuTimes,
    cpus: &mut Vec<(u32, CpuTimes)>,
) -> Result<(), ParseError> {
    cpus.clear();
    let mut found_total = false;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("cpu") else {
            break;
        };
        let (label, fields) = rest.split_once(' ').unwrap_or((rest, ""));
        if label.is_empty() {
            *total = parse_cpu_fields(fields)?;
            found_total = true;
            if !per_cpu {
                break;
            }
        } else if per_cpu {
            let id = label
                .parse()
                .map_err(|_| ParseError::new(format!("cpu label cpu{label:?} has no number")))?;
            cpus.push((id, parse_cpu_fields(fields)?));
        }
    }
    if found_total {
        Ok(())
    } else {
        Err(ParseError::new("no aggregate \"cpu \" line"))
    }
}

/// Busy share of CPU time between two readings: `(Δtotal − Δ(idle + iowait)) / Δtotal`, in
/// 0..=1. `None` when no tick passed or a counter went backwards.
pub fn cpu_utilization(prev: &CpuTimes, cur: &CpuTimes) -> Option<f64> {
    let d_total = cur.total().checked_sub(prev.total())?;
    let d_idle = cur.idle_total().checked_sub(prev.idle_total())?;
    let busy = d_total.checked_sub(d_idle)?;
    (d_total > 0).then(|| busy as f64 / d_total as f64)
}

// === Load and memory ===

/// `/proc/loadavg`'s three load averages.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadAvg {
    /// Over 1 minute.
    pub one: f64,
    /// Over 5 minutes.
    pub five: f64,
    /// Over 15 minutes.
    pub fifteen: f64,
}

/// Parses `/proc/loadavg` (`0.87 1.47 1.58 1/99 29390`).
pub fn parse_loadavg(text: &str) -> Result<LoadAvg, ParseError> {
    let mut it = text.split_ascii_whitespace().map(str::parse::<f64>);
    match (it.next(), it.next(), it.next()) {
        (Some(Ok(one)), Some(Ok(five)), Some(Ok(fifteen))) => Ok(LoadAvg { one, five, fifteen }),
        _ => Err(ParseError::new("expected three load averages")),
    }
}

/// The `/proc/meminfo` fields the agent publishes, in bytes; `None` when the line is missing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemInfo {
    /// `MemTotal`.
    pub total: Option<u64>,
    /// `MemAvailable` (kernel 3.14+).
    pub available: Option<u64>,
    /// `MemFree`.
    pub free: Option<u64>,
    /// `Buffers`.
    pub buffers: Option<u64>,
    /// `Cached`.
    pub cached: Option<u64>,
    /// `SwapTotal`.
    pub swap_total: Option<u64>,
    /// `SwapFree`.
    pub swap_free: Option<u64>,
}

impl MemInfo {
    /// `1 − MemAvailable / MemTotal`; `None` without both or with `MemTotal` 0.
    pub fn utilization(&self) -> Option<f64> {
        let (total, avail) = (self.total?, self.available?);
        (total > 0).then(|| 1.0 - avail as f64 / total as f64)
    }
}

/// Parses `/proc/meminfo` (`MemTotal:       24684096 kB`), converting kB to bytes. Stops once
/// every wanted field is found. Lines it does not want are skipped without parsing.
pub fn parse_meminfo(text: &str) -> Result<MemInfo, ParseError> {
    let mut m = MemInfo::default();
    let mut found = 0;
    for line in text.lines() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let slot = match key {
            "MemTotal" => &mut m.total,
            "MemAvailable" => &mut m.available,
            "MemFree" => &mut m.free,
            "Buffers" => &mut m.buffers,
            "Cached" => &mut m.cached,
            "SwapTotal" => &mut m.swap_total,
            "SwapFree" => &mut m.swap_free,
            _ => continue,
        };
        let mut parts = rest.split_ascii_whitespace();
        let value: u64 = parts
            .next()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| ParseError::new(format!("{key} has no number")))?;
        let bytes = match parts.next() {
            Some("kB") => value.saturating_mul(1024),
            None => value,
            Some(unit) => return Err(ParseError::new(format!("{key} has unit {unit:?}, not kB"))),
        };
        *slot = Some(bytes);
        found += 1;
        if found == 7 {
            break;
        }
    }
    if m.total.is_none() {
        return Err(ParseError::new("no MemTotal line"));
    }
    Ok(m)
}

// === Disks and network ===

/// Node totals of `/proc/diskstats` over whole physical disks (see [`is_counted_disk`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskTotals {
    /// Reads completed.
    pub reads: u64,
    /// Bytes read (sectors × 512).
    pub read_bytes: u64,
    /// Writes completed.
    pub writes: u64,
    /// Bytes written (sectors × 512).
    pub write_bytes: u64,
}

/// Whether a `/proc/diskstats` device counts towards node totals: whole disks only. Skipped:
/// `loop*`, `ram*`, `zram*`, `fd*`; stacked devices `dm-*` and `md*` (their I/O is already
/// counted on the disks below them); and partitions, recognised by name:
/// `sda1`/`hda1`/`vda1`/`xvda1` and `<…digit>p<N>` (`nvme0n1p1`, `mmcblk0p1`, `nbd0p1`).
pub fn is_counted_disk(name: &str) -> bool {
    const SKIP: [&str; 6] = ["loop", "ram", "zram", "fd", "dm-", "md"];
    if SKIP.iter().any(|p| name.starts_with(p)) {
        return false;
    }
    let stem = name.trim_end_matches(|c: char| c.is_ascii_digit());
    if stem.len() == name.len() {
        return true; // no trailing number: sda, vdb, xvdc
    }
    // `<…digit>p<N>`: a partition of a device whose name ends in a number.
    if let Some(before_p) = stem.strip_suffix('p')
        && before_p.ends_with(|c: char| c.is_ascii_digit())
    {
        return false;
    }
    // `sd<letters><N>` and its kin: a partition of a lettered disk.
    let lettered = ["sd", "hd", "vd", "xvd"].iter().any(|p| {
        stem.strip_prefix(p)
            .is_some_and(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_lowercase()))
    });
    !lettered
}

/// Sums `/proc/diskstats` over counted disks.
pub fn parse_diskstats(text: &str) -> Result<DiskTotals, ParseError> {
    let mut t = DiskTotals::default();
    for line in text.lines() {
        let mut f = line.split_ascii_whitespace();
        let (Some(_major), Some(_minor), Some(name)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if !is_counted_disk(name) {
            continue;
        }
        // After the name: reads merged sectors ms, writes merged sectors ms, ...
        let mut num = [0u64; 7];
        for slot in &mut num {
            *slot = f.next().and_then(|v| v.parse().ok()).ok_or_else(|| {
                ParseError::new(format!("device {name} has fewer than 7 numeric fields"))
            })?;
        }
        t.reads = t.reads.saturating_add(num[0]);
        t.read_bytes = t
            .read_bytes
            .saturating_add(num[2].saturating_mul(DISKSTATS_SECTOR_BYTES));
        t.writes = t.writes.saturating_add(num[4]);
        t.write_bytes = t
            .write_bytes
            .saturating_add(num[6].saturating_mul(DISKSTATS_SECTOR_BYTES));
    }
    Ok(t)
}

/// Node totals of `/proc/net/dev` over every interface but `lo`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetTotals {
    /// Bytes received.
    pub rx_bytes: u64,
    /// Bytes transmitted.
    pub tx_bytes: u64,
}

/// Sums `/proc/net/dev` over every interface except `lo`. Virtual interfaces (veth, bridges)
/// count, as in node-exporter's totals.
pub fn parse_net_dev(text: &str) -> Result<NetTotals, ParseError> {
    let mut t = NetTotals::default();
    for line in text.lines().skip(2) {
        let Some((iface, rest)) = line.split_once(':') else {
            continue;
        };
        if iface.trim() == "lo" {
            continue;
        }
        let (Some(rx), Some(tx)) = (field_u64(rest, 0), field_u64(rest, 8)) else {
            return Err(ParseError::new(format!(
                "interface {} lacks receive or transmit bytes",
                iface.trim()
            )));
        };
        t.rx_bytes = t.rx_bytes.saturating_add(rx);
        t.tx_bytes = t.tx_bytes.saturating_add(tx);
    }
    Ok(t)
}

// === Reader ===

/// Reads the `/proc` files and keeps the previous counters.
#[derive(Debug)]
pub(crate) struct ProcReader {
    stat: PathBuf,
    meminfo: PathBuf,
    loadavg: PathBuf,
    diskstats: PathBuf,
    net_dev: PathBuf,
    per_cpu: bool,
    cpu: Option<CpuTimes>,
    cpus: Vec<(u32, CpuTimes)>,
    cpus_scratch: Vec<(u32, CpuTimes)>,
    disk: Option<(Instant, DiskTotals)>,
    net: Option<(Instant, NetTotals)>,
}

impl ProcReader {
    pub(crate) fn new(root: &Path, per_cpu: bool) -> Self {
        let proc = root.join("proc");
        Self {
            stat: proc.join("stat"),
            meminfo: proc.join("meminfo"),
            loadavg: proc.join("loadavg"),
            diskstats: proc.join("diskstats"),
            net_dev: proc.join("net/dev"),
            per_cpu,
            cpu: None,
            cpus: Vec::new(),
            cpus_scratch: Vec::new(),
            disk: None,
            net: None,
        }
    }

    pub(crate) fn read(&mut self, now: Instant, buf: &mut String, out: &mut Out) {
        self.read_stat(buf, out);
        self.read_loadavg(buf, out);
        self.read_meminfo(buf, out);
        self.read_diskstats(now, buf, out);
        self.read_net_dev(now, buf, out);
    }

    fn read_stat(&mut self, buf: &mut String, out: &mut Out) {
        if !load(&self.stat, buf, out, Source::Stat) {
            return;
        }
        let mut cur = CpuTimes::default();
        if let Err(e) = parse_stat(buf, self.per_cpu, &mut cur, &mut self.cpus_scratch) {
            out.error(Source::Stat, parse_error(&self.stat, e));
            return;
        }
        if let Some(prev) = self.cpu
            && let Some(u) = cpu_utilization(&prev, &cur)
        {
            out.push("node_cpu_utilization_ratio", u);
        }
        self.cpu = Some(cur);
        if self.per_cpu {
            for (id, times) in &self.cpus_scratch {
                let prev = self
                    .cpus
                    .binary_search_by_key(id, |(i, _)| *i)
                    .ok()
                    .map(|i| self.cpus[i].1);
                if let Some(u) = prev.and_then(|p| cpu_utilization(&p, times)) {
                    let id = id.to_string();
                    out.push_folded("node_cpu_utilization_ratio", &[("cpu", &id)], u);
                }
            }
            std::mem::swap(&mut self.cpus, &mut self.cpus_scratch);
        }
    }

    fn read_loadavg(&mut self, buf: &mut String, out: &mut Out) {
        if !load(&self.loadavg, buf, out, Source::Loadavg) {
            return;
        }
        match parse_loadavg(buf) {
            Ok(l) => {
                out.push("node_load1", l.one);
                out.push("node_load5", l.five);
                out.push("node_load15", l.fifteen);
            }
            Err(e) => out.error(Source::Loadavg, parse_error(&self.loadavg, e)),
        }
    }

    fn read_meminfo(&mut self, buf: &mut String, out: &mut Out) {
        if !load(&self.meminfo, buf, out, Source::Meminfo) {
            return;
        }
        let m = match parse_meminfo(buf) {
            Ok(m) => m,
            Err(e) => return out.error(Source::Meminfo, parse_error(&self.meminfo, e)),
        };
        let fields = [
            ("node_memory_MemTotal_bytes", m.total),
            ("node_memory_MemAvailable_bytes", m.available),
            ("node_memory_MemFree_bytes", m.free),
            ("node_memory_Buffers_bytes", m.buffers),
            ("node_memory_Cached_bytes", m.cached),
            ("node_memory_SwapTotal_bytes", m.swap_total),
            ("node_memory_SwapFree_bytes", m.swap_free),
        ];
        for (name, v) in fields {
            if let Some(v) = v {
                out.push(name, v as f64);
            }
        }
        if let Some(u) = m.utilization() {
            out.push("node_memory_utilization_ratio", u);
        }
    }

    fn read_diskstats(&mut self, now: Instant, buf: &mut String, out: &mut Out) {
        if !load(&self.diskstats, buf, out, Source::Diskstats) {
            return;
        }
        let cur = match parse_diskstats(buf) {
            Ok(t) => t,
            Err(e) => return out.error(Source::Diskstats, parse_error(&self.diskstats, e)),
        };
        if let Some((then, prev)) = self.disk {
            let dt = now.saturating_duration_since(then);
            let rates = [
                (
                    "node_disk_read_bytes_per_second",
                    prev.read_bytes,
                    cur.read_bytes,
                ),
                (
                    "node_disk_write_bytes_per_second",
                    prev.write_bytes,
                    cur.write_bytes,
                ),
                ("node_disk_reads_per_second", prev.reads, cur.reads),
                ("node_disk_writes_per_second", prev.writes, cur.writes),
            ];
            for (name, p, c) in rates {
                if let Some(r) = rate(p, c, dt) {
                    out.push(name, r);
                }
            }
        }
        self.disk = Some((now, cur));
    }

    fn read_net_dev(&mut self, now: Instant, buf: &mut String, out: &mut Out) {
        if !load(&self.net_dev, buf, out, Source::NetDev) {
            return;
        }
        let cur = match parse_net_dev(buf) {
            Ok(t) => t,
            Err(e) => return out.error(Source::NetDev, parse_error(&self.net_dev, e)),
        };
        if let Some((then, prev)) = self.net {
            let dt = now.saturating_duration_since(then);
            if let Some(r) = rate(prev.rx_bytes, cur.rx_bytes, dt) {
                out.push("node_network_receive_bytes_per_second", r);
            }
            if let Some(r) = rate(prev.tx_bytes, cur.tx_bytes, dt) {
                out.push("node_network_transmit_bytes_per_second", r);
            }
        }
        self.net = Some((now, cur));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn whole_disks_are_counted_and_partitions_loops_and_stacks_are_not() {
        for d in [
            "sda", "vda", "xvdb", "hdc", "nvme0n1", "mmcblk0", "nbd0", "sr0", "sdaa",
        ] {
            assert!(is_counted_disk(d), "{d} should count");
        }
        for d in [
            "sda1",
            "vda15",
            "xvdb2",
            "sdaa3",
            "nvme0n1p1",
            "nvme10n2p12",
            "mmcblk0p2",
            "loop0",
            "loop12",
            "ram0",
            "zram0",
            "dm-0",
            "md127",
            "fd0",
        ] {
            assert!(!is_counted_disk(d), "{d} should not count");
        }
    }

    #[test]
    fn diskstats_sums_whole_disks_only() {
        // A typical kernel-format excerpt: two disks with partitions, LVM and a loop device.
        let text = "\
   8       0 sda 100 5 2000 30 40 6 800 70 0 90 100 0 0 0 0 0 0
   8       1 sda1 99 5 1990 30 40 6 800 70 0 90 100 0 0 0 0 0 0
 259       0 nvme0n1 10 0 160 1 20 0 320 2 0 3 3 0 0 0 0 0 0
 259       1 nvme0n1p1 10 0 160 1 20 0 320 2 0 3 3 0 0 0 0 0 0
 253       0 dm-0 500 0 9000 9 600 0 9900 9 0 9 9 0 0 0 0 0 0
   7       0 loop0 7 0 56 0 0 0 0 0 0 0 0 0 0 0 0 0 0
";
        let t = parse_diskstats(text).unwrap();
        // reads 100 + 10; sectors read (2000 + 160) * 512; writes 40 + 20; sectors written (800 + 320) * 512.
        assert_eq!(
            t,
            DiskTotals {
                reads: 110,
                read_bytes: 2160 * 512,
                writes: 60,
                write_bytes: 1120 * 512,
            }
        );
    }

    #[test]
    fn short_diskstats_line_is_an_error() {
        assert!(parse_diskstats("   8 0 sda 1 2 3\n").is_err());
    }

    #[test]
    fn cpu_ratio_counts_iowait_as_idle_and_ignores_guest() {
        let prev = parse_cpu_fields("100 0 50 800 50 0 0 0 0 0").unwrap();
        // +150 user (of which guest 10, not added again), +30 system, +16 idle, +4 iowait:
        // Δtotal = 200, Δidle = 20, busy 180 / 200 = 0.9.
        let cur = parse_cpu_fields("250 0 80 816 54 0 0 0 10 0").unwrap();
        assert_eq!(cpu_utilization(&prev, &cur), Some(0.9));
        assert_eq!(cpu_utilization(&cur, &cur), None, "no tick passed");
        assert_eq!(cpu_utilization(&cur, &prev), None, "went backwards");
    }

    #[test]
    fn old_kernels_stat_lines_and_bad_ones() {
        let t = parse_cpu_fields("1 2 3 4").unwrap();
        assert_eq!(t.total(), 10);
        assert!(parse_cpu_fields("1 2 3").is_err());
        assert!(parse_cpu_fields("1 2 x 4").is_err());
        let mut total = CpuTimes::default();
        let mut cpus = Vec::new();
        assert!(parse_stat("intr 1 2 3\n", false, &mut total, &mut cpus).is_err());
    }

    #[test]
    fn meminfo_without_kb_unit_is_bytes_and_other_units_are_refused() {
        let m = parse_meminfo("MemTotal: 2048\nHugePages_Total: 0\n").unwrap();
        assert_eq!(m.total, Some(2048));
        assert!(parse_meminfo("MemTotal: 1 MB\n").is_err());
        assert!(
            parse_meminfo("MemFree: 1 kB\n").is_err(),
            "MemTotal missing"
        );
        assert_eq!(
            parse_meminfo("MemTotal: 0 kB\n").unwrap().utilization(),
            None
        );
    }

    #[test]
    fn loadavg_needs_three_numbers() {
        assert!(parse_loadavg("0.5 0.4\n").is_err());
        assert!(parse_loadavg("a b c\n").is_err());
    }
}
