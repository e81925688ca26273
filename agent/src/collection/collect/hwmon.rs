//! Temperatures from the kernel's hwmon sysfs interface (`Documentation/hwmon/sysfs-interface.rst`):
//! `/sys/class/hwmon/hwmon<N>/{name, temp<K>_input, temp<K>_label}`, inputs in millidegrees
//! Celsius.
//!
//! Read under the host root rather than through `sysinfo::Components`, which always reads the
//! real `/sys` and so could not be pointed at a fixture or a simulated node. Publishes the
//! hottest sensor as `node_hwmon_temp_max_celsius` and, when enabled, every sensor as
//! `node_hwmon_temp_celsius_chip_<chip>_sensor_<sensor>` (chip: the `name` file, suffixed
//! `_<N>` when two chips share a name; sensor: the `temp<K>_label` file, else `temp<K>`; both
//! through [`super::name_part`]). The sensor list is rescanned every
//! [`super::CollectorConfig::rescan_every`] samples. A sensor whose input cannot be read (a
//! disconnected probe gives `ENODATA` or `EIO` on every read) is left out of that sample and
//! logged at debug level, not reported as an error each second.

use std::path::{Path, PathBuf};

use super::files::{Fetched, read};
use super::{Out, Source, fold_labels, name_part};

/// One temperature input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sensor {
    /// `.../hwmon<N>/temp<K>_input`.
    pub input: PathBuf,
    /// The per-sensor metric name.
    pub metric: String,
}

/// Parses a `temp<K>_input` file (millidegrees Celsius) into degrees Celsius.
pub fn parse_millidegrees(text: &str) -> Option<f64> {
    text.trim().parse::<i64>().ok().map(|m| m as f64 / 1000.0)
}

/// Lists the temperature sensors under `hwmon_dir` (`/sys/class/hwmon`), in hwmon then input
/// order. Files it cannot read are skipped. An absent directory gives an empty list.
pub fn scan(hwmon_dir: &Path, buf: &mut String) -> Vec<Sensor> {
    let Ok(entries) = std::fs::read_dir(hwmon_dir) else {
        return Vec::new();
    };
    let mut chips: Vec<(u32, PathBuf, String)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let n = e
                .file_name()
                .to_str()?
                .strip_prefix("hwmon")?
                .parse()
                .ok()?;
            let dir = e.path();
            let name = match read(&dir.join("name"), buf) {
                Fetched::Ok => name_part(buf.trim()),
                _ => format!("hwmon{n}"),
            };
            Some((n, dir, name))
        })
        .collect();
    chips.sort_by_key(|(n, _, _)| *n);
    let mut sensors = Vec::new();
    for (n, dir, name) in &chips {
        let shared = chips.iter().filter(|(_, _, other)| other == name).count() > 1;
        let chip = if shared {
            format!("{name}_{n}")
        } else {
            name.clone()
        };
        let Ok(files) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut inputs: Vec<(u32, PathBuf)> = files
            .filter_map(Result::ok)
            .filter_map(|f| {
                let k = f
                    .file_name()
                    .to_str()?
                    .strip_prefix("temp")?
                    .strip_suffix("_input")?
                    .parse()
                    .ok()?;
                Some((k, f.path()))
            })
            .collect();
        inputs.sort_by_key(|(k, _)| *k);
        for (k, input) in inputs {
            let sensor = match read(&dir.join(format!("temp{k}_label")), buf) {
                Fetched::Ok if !buf.trim().is_empty() => buf.trim().to_owned(),
                _ => format!("temp{k}"),
            };
            let metric = fold_labels(
                "node_hwmon_temp_celsius",
                &[("chip", &chip), ("sensor", &sensor)],
            );
            sensors.push(Sensor { input, metric });
        }
    }
    sensors
}

/// Reads the hwmon temperatures.
#[derive(Debug)]
pub(crate) struct HwmonReader {
    dir: PathBuf,
    per_sensor: bool,
    sensors: Vec<Sensor>,
    rescan_next: bool,
}

impl HwmonReader {
    pub(crate) fn new(root: &Path, per_sensor: bool) -> Self {
        Self {
            dir: root.join("sys/class/hwmon"),
            per_sensor,
            sensors: Vec::new(),
            rescan_next: true,
        }
    }

    pub(crate) fn read(&mut self, rescan: bool, buf: &mut String, out: &mut Out) {
        if rescan || self.rescan_next {
            self.sensors = scan(&self.dir, buf);
            self.rescan_next = false;
        }
        if self.sensors.is_empty() {
            out.absent(Source::Hwmon, &self.dir, "no temperature sensor");
            return;
        }
        let mut max: Option<f64> = None;
        for s in &self.sensors {
            let value = match read(&s.input, buf) {
                Fetched::Ok => parse_millidegrees(buf),
                Fetched::Absent => {
                    self.rescan_next = true;
                    None
                }
                Fetched::Failed(e) => {
                    tracing::debug!(error = %e, "hwmon sensor unreadable; skipped");
                    None
                }
            };
            let Some(celsius) = value else { continue };
            max = Some(max.map_or(celsius, |m| m.max(celsius)));
            if self.per_sensor {
                out.push(&s.metric, celsius);
            }
        }
        if let Some(m) = max {
            out.push("node_hwmon_temp_max_celsius", m);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn millidegrees_become_degrees() {
        assert_eq!(parse_millidegrees("45000\n"), Some(45.0));
        assert_eq!(parse_millidegrees("-1500\n"), Some(-1.5));
        assert_eq!(parse_millidegrees("n/a\n"), None);
    }
}
