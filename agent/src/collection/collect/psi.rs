//! Pressure stall information (`Documentation/accounting/psi.rst`): `/proc/pressure/{cpu,memory,io}`
//! at node level, and the same format in each cgroup's `*.pressure` files.
//!
//! ```text
//! some avg10=2.59 avg60=4.71 avg300=8.08 total=692570449
//! full avg10=0.00 avg60=0.00 avg300=0.00 total=0
//! ```
//!
//! The kernel's `avg*` are percentages; node metrics publish them as ratios (0..=1, the
//! Prometheus convention, `_ratio` in the name). `total` is cumulative stalled microseconds; its
//! rate is published as seconds stalled per second (`_stall_seconds_per_second`, also 0..=1 per
//! resource). Per-pod figures ([`telemesh_core::pod::PodFigures`]) keep the kernel's percent.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::files::{load, parse_error};
use super::{Out, ParseError, Source};

/// One line (`some` or `full`) of a pressure file.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PressureLine {
    /// Percent of the last 10 s.
    pub avg10: f64,
    /// Percent of the last 60 s.
    pub avg60: f64,
    /// Percent of the last 300 s.
    pub avg300: f64,
    /// Cumulative stall time, µs.
    pub total_usec: u64,
}

/// A pressure file: `some` always, `full` where the kernel writes it (memory and io; cpu since
/// 5.13, zero at node level).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Pressure {
    /// Some tasks stalled.
    pub some: Option<PressureLine>,
    /// All non-idle tasks stalled.
    pub full: Option<PressureLine>,
}

/// Parses a pressure file. Unknown keys on a line are ignored; unknown lines too.
pub fn parse_pressure(text: &str) -> Result<Pressure, ParseError> {
    let mut p = Pressure::default();
    for line in text.lines() {
        let mut parts = line.split_ascii_whitespace();
        let slot = match parts.next() {
            Some("some") => &mut p.some,
            Some("full") => &mut p.full,
            _ => continue,
        };
        let mut l = PressureLine::default();
        let mut seen = 0u8;
        for kv in parts {
            let Some((k, v)) = kv.split_once('=') else {
                return Err(ParseError::new(format!("{kv:?} is not key=value")));
            };
            let bad = || ParseError::new(format!("{k}={v:?} is not a number"));
            match k {
                "avg10" => (l.avg10, seen) = (v.parse().map_err(|_| bad())?, seen | 1),
                "avg60" => (l.avg60, seen) = (v.parse().map_err(|_| bad())?, seen | 2),
                "avg300" => (l.avg300, seen) = (v.parse().map_err(|_| bad())?, seen | 4),
                "total" => (l.total_usec, seen) = (v.parse().map_err(|_| bad())?, seen | 8),
                _ => {}
            }
        }
        if seen != 15 {
            return Err(ParseError::new(
                "a pressure line lacks one of avg10, avg60, avg300, total",
            ));
        }
        *slot = Some(l);
    }
    if p.some.is_none() && p.full.is_none() {
        return Err(ParseError::new("no \"some\" or \"full\" line"));
    }
    Ok(p)
}

/// Seconds stalled per second between two `total` readings `dt` apart:
/// `Δtotal_usec / (dt_seconds × 10⁶)`. `None` if `total` went backwards or no time passed.
pub fn stall_rate(prev_usec: u64, cur_usec: u64, dt: std::time::Duration) -> Option<f64> {
    let delta = cur_usec.checked_sub(prev_usec)?;
    let usec = dt.as_secs_f64() * 1e6;
    (usec > 0.0).then(|| delta as f64 / usec)
}

/// The node's pressure resources and their metric-name stems.
const RESOURCES: [(&str, &str); 3] = [
    ("cpu", "node_pressure_cpu"),
    ("memory", "node_pressure_memory"),
    ("io", "node_pressure_io"),
];

/// Reads `/proc/pressure/*` and keeps the previous totals.
#[derive(Debug)]
pub(crate) struct PsiReader {
    paths: [PathBuf; 3],
    prev: [Option<(Instant, Pressure)>; 3],
}

impl PsiReader {
    pub(crate) fn new(root: &Path) -> Self {
        let dir = root.join("proc/pressure");
        Self {
            paths: RESOURCES.map(|(r, _)| dir.join(r)),
            prev: [None; 3],
        }
    }

    pub(crate) fn read(&mut self, now: Instant, buf: &mut String, out: &mut Out) {
        for (i, (_, stem)) in RESOURCES.iter().enumerate() {
            let path = &self.paths[i];
            if !load(path, buf, out, Source::Pressure) {
                continue;
            }
            let cur = match parse_pressure(buf) {
                Ok(p) => p,
                Err(e) => {
                    out.error(Source::Pressure, parse_error(path, e));
                    continue;
                }
            };
            let prev = self.prev[i].replace((now, cur));
            for (kind, line, prev_line) in [
                ("some", cur.some, prev.and_then(|(_, p)| p.some)),
                ("full", cur.full, prev.and_then(|(_, p)| p.full)),
            ] {
                let Some(line) = line else { continue };
                let name = |suffix: &str| format!("{stem}_{kind}_{suffix}");
                out.push(&name("avg10_ratio"), line.avg10 / 100.0);
                out.push(&name("avg60_ratio"), line.avg60 / 100.0);
                out.push(&name("avg300_ratio"), line.avg300 / 100.0);
                if let (Some((then, _)), Some(p)) = (prev, prev_line)
                    && let Some(r) = stall_rate(
                        p.total_usec,
                        line.total_usec,
                        now.saturating_duration_since(then),
                    )
                {
                    out.push(&name("stall_seconds_per_second"), r);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::time::Duration;

    #[test]
    fn parses_some_and_full() {
        let p = parse_pressure(
            "some avg10=3.18 avg60=26.95 avg300=30.23 total=188661639\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
        )
        .unwrap();
        let some = p.some.unwrap();
        assert_eq!((some.avg10, some.avg60, some.avg300), (3.18, 26.95, 30.23));
        assert_eq!(some.total_usec, 188_661_639);
        assert_eq!(p.full.unwrap().total_usec, 0);
    }

    #[test]
    fn some_only_files_are_fine_and_broken_ones_are_not() {
        // Kernels before 5.13 write no "full" line in /proc/pressure/cpu.
        let p = parse_pressure("some avg10=1.00 avg60=2.00 avg300=3.00 total=4\n").unwrap();
        assert!(p.full.is_none());
        assert!(parse_pressure("").is_err());
        assert!(parse_pressure("some avg10=1.00 avg60=2.00 total=4\n").is_err());
        assert!(parse_pressure("some avg10=x avg60=2.00 avg300=3.00 total=4\n").is_err());
        assert!(parse_pressure("some avg10\n").is_err());
    }

    #[test]
    fn stall_rate_is_seconds_per_second() {
        // 500 000 µs stalled over 2 s = 0.5 s / 2 s = 0.25.
        assert_eq!(
            stall_rate(1_000, 501_000, Duration::from_secs(2)),
            Some(0.25)
        );
        assert_eq!(stall_rate(5, 4, Duration::from_secs(1)), None);
        assert_eq!(stall_rate(4, 5, Duration::ZERO), None);
    }
}
