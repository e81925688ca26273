//! Prometheus text exposition (format 0.0.4, and the OpenMetrics text it resembles) from local
//! exporters on the node: node-exporter, its textfile collector, any other exporter. The HTTP
//! fetch is the caller's; this module parses the body and decides which series to publish.
//!
//! Hand-written rather than `prometheus-parse` 0.2.5: that crate splits labels with a regex
//! (`[^}]+`, so a `}` inside a label value breaks it), wants an iterator of owned `String` lines,
//! builds `HashMap`s per sample and pulls in chrono, itertools and regex for it; its last release
//! only bumped a dependency. The parser here borrows from the text and allocates only for label
//! values with escapes.
//!
//! # Import rule ([`ImportRule`])
//! 1. Exporters' own instrumentation is skipped: names starting with `go_`, `process_`,
//!    `promhttp_`, `node_scrape_collector_`, `node_textfile_`, or equal to
//!    `node_exporter_build_info`.
//! 2. Target-identity labels (`instance`, `job`) are dropped.
//! 3. A series left without labels keeps its name (`node_health_metric`), so TAS policies
//!    address it as `node_health_metric` or `health_metric`.
//! 4. A series with labels is skipped, unless its family is listed in [`ImportRule::fold`]: then
//!    each label, sorted by label name, is folded into the name as `_<label>_<value>` (through
//!    [`super::name_part`]): `node_rack_power_watts{outlet="A 3"}` →
//!    `node_rack_power_watts_outlet_a_3`. Skipping by default keeps gossip small: node-exporter
//!    alone exposes hundreds of labelled series per node.
//! 5. NaN and infinite values are skipped; of two series that end up with one name the first
//!    wins; at most [`ImportRule::max_series`] samples are kept.
//!
//! Built-in metrics win over imported ones of the same name ([`merge_imported`]): node-exporter's
//! `node_load1` and the agent's are the same figure.

use std::borrow::Cow;
use std::collections::HashSet;

use telemesh_core::metric::{MetricName, Sample};

use super::{ParseError, fold_labels};

/// One label of a parsed series; the value is borrowed unless it had escapes.
pub type Label<'a> = (&'a str, Cow<'a, str>);

/// Which series of an exposition become samples, and under which names (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportRule {
    /// Label names dropped before anything else: they name the scrape target, not the series.
    pub drop_labels: Vec<String>,
    /// Name prefixes never imported (exporters' self-instrumentation).
    pub skip_prefixes: Vec<String>,
    /// Exact names never imported.
    pub skip_names: Vec<String>,
    /// Families whose labelled series are imported with their labels folded into the name.
    pub fold: Vec<String>,
    /// Most samples kept from one exposition.
    pub max_series: usize,
}

impl Default for ImportRule {
    fn default() -> Self {
        let strings = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect();
        Self {
            drop_labels: strings(&["instance", "job"]),
            skip_prefixes: strings(&[
                "go_",
                "process_",
                "promhttp_",
                "node_scrape_collector_",
                "node_textfile_",
            ]),
            skip_names: strings(&["node_exporter_build_info"]),
            fold: Vec::new(),
            max_series: 512,
        }
    }
}

impl ImportRule {
    /// The import rule: the name a series is published under, or `None` if it is not imported.
    pub fn import(&self, name: &str, labels: &[Label<'_>]) -> Option<MetricName> {
        if self.skip_names.iter().any(|s| s == name)
            || self
                .skip_prefixes
                .iter()
                .any(|p| name.starts_with(p.as_str()))
        {
            return None;
        }
        let mut kept: Vec<(&str, &str)> = labels
            .iter()
            .filter(|(k, _)| !self.drop_labels.iter().any(|d| d == k))
            .map(|(k, v)| (*k, v.as_ref()))
            .collect();
        if kept.is_empty() {
            return MetricName::new(name).ok();
        }
        if !self.fold.iter().any(|f| f == name) {
            return None;
        }
        kept.sort_unstable_by_key(|(k, _)| *k);
        MetricName::new(fold_labels(name, &kept)).ok()
    }
}

/// What [`parse_exposition`] found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exposition {
    /// Samples to publish.
    pub samples: Vec<Sample>,
    /// Series the rule did not import (labelled, self-instrumentation, NaN, duplicate name).
    pub not_imported: usize,
    /// Series dropped past [`ImportRule::max_series`].
    pub over_limit: usize,
    /// Lines that are not valid exposition text.
    pub malformed: usize,
    /// The first malformed line's problem, with its line number (1-based).
    pub first_error: Option<String>,
}

/// Parses an exposition body and applies `rule`. Malformed lines are counted and skipped, so one
/// bad line in a textfile does not hide the rest.
pub fn parse_exposition(text: &str, rule: &ImportRule) -> Exposition {
    let mut e = Exposition::default();
    let mut labels = Vec::new();
    let mut seen: HashSet<MetricName> = HashSet::new();
    for (n, line) in text.lines().enumerate() {
        let (name, value) = match parse_line(line, &mut labels) {
            Ok(Some(s)) => s,
            Ok(None) => continue,
            Err(err) => {
                e.malformed += 1;
                if e.first_error.is_none() {
                    e.first_error = Some(format!("line {}: {err}", n + 1));
                }
                continue;
            }
        };
        let Some(metric) = rule.import(name, &labels).filter(|_| value.is_finite()) else {
            e.not_imported += 1;
            continue;
        };
        if seen.contains(&metric) {
            e.not_imported += 1;
        } else if e.samples.len() >= rule.max_series {
            e.over_limit += 1;
        } else {
            seen.insert(metric.clone());
            e.samples.push(Sample {
                name: metric,
                value,
            });
        }
    }
    e
}

/// Appends `imported` to `samples`, skipping names `samples` already has (built-ins win).
/// Returns how many were skipped.
pub fn merge_imported(samples: &mut Vec<Sample>, imported: Vec<Sample>) -> usize {
    let taken: HashSet<MetricName> = samples.iter().map(|s| s.name.clone()).collect();
    let (offered, before) = (imported.len(), samples.len());
    samples.extend(imported.into_iter().filter(|s| !taken.contains(&s.name)));
    offered - (samples.len() - before)
}

/// Parses one line: `Ok(None)` for blank lines and comments (`# HELP`, `# TYPE`, `# EOF`),
/// else the series name and value with `labels` refilled. Timestamps and OpenMetrics exemplars
/// are ignored.
pub fn parse_line<'a>(
    line: &'a str,
    labels: &mut Vec<Label<'a>>,
) -> Result<Option<(&'a str, f64)>, ParseError> {
    labels.clear();
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(ParseError::new("line does not start with a metric name"));
    }
    let mut rest = line[name_end..].trim_start();
    if let Some(after) = rest.strip_prefix('{') {
        rest = parse_labels(after, labels)?;
    }
    let value = rest
        .split_ascii_whitespace()
        .next()
        .ok_or_else(|| ParseError::new(format!("{name} has no value")))?;
    let value = value
        .parse::<f64>()
        .map_err(|_| ParseError::new(format!("{name} value {value:?} is not a number")))?;
    Ok(Some((name, value)))
}

/// Parses `name="value",…}` (after the `{`); returns what follows the `}`.
fn parse_labels<'a>(mut s: &'a str, labels: &mut Vec<Label<'a>>) -> Result<&'a str, ParseError> {
    loop {
        s = s.trim_start();
        if let Some(after) = s.strip_prefix('}') {
            return Ok(after);
        }
        let key_end = s
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .ok_or_else(|| ParseError::new("unterminated label set"))?;
        let key = &s[..key_end];
        if key.is_empty() {
            return Err(ParseError::new(format!("expected a label name at {s:?}")));
        }
        s = s[key_end..].trim_start();
        s = s
            .strip_prefix('=')
            .ok_or_else(|| ParseError::new(format!("label {key} lacks '='")))?
            .trim_start();
        s = s
            .strip_prefix('"')
            .ok_or_else(|| ParseError::new(format!("label {key} value is not quoted")))?;
        let (value, after) = parse_quoted(s)
            .ok_or_else(|| ParseError::new(format!("label {key} value is not terminated")))?;
        labels.push((key, value));
        s = after.trim_start();
        if let Some(after) = s.strip_prefix(',') {
            s = after;
        } else if !s.starts_with('}') {
            return Err(ParseError::new(format!(
                "expected ',' or '}}' after label {key}"
            )));
        }
    }
}

/// Reads a quoted label value (after its opening `"`), undoing `\\`, `\"` and `\n`.
fn parse_quoted(s: &str) -> Option<(Cow<'_, str>, &str)> {
    let bytes = s.as_bytes();
    let mut owned: Option<String> = None;
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let value = match owned {
                    Some(mut o) => {
                        o.push_str(&s[start..i]);
                        Cow::Owned(o)
                    }
                    None => Cow::Borrowed(&s[..i]),
                };
                return Some((value, &s[i + 1..]));
            }
            b'\\' => {
                let o = owned.get_or_insert_with(String::new);
                o.push_str(&s[start..i]);
                match bytes.get(i + 1)? {
                    b'n' => o.push('\n'),
                    b'\\' => o.push('\\'),
                    b'"' => o.push('"'),
                    _ => o.push('\\'),
                }
                i += 2;
                start = i;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn names(e: &Exposition) -> Vec<&str> {
        e.samples.iter().map(|s| s.name.as_str()).collect()
    }

    #[test]
    fn lines_with_labels_escapes_timestamps_and_special_values() {
        let mut l = Vec::new();
        let (n, v) = parse_line(
            r#"http_requests_total{method="post",path="/a}b\"c\\d\n",} 1027 1395066363000"#,
            &mut l,
        )
        .unwrap()
        .unwrap();
        assert_eq!((n, v), ("http_requests_total", 1027.0));
        assert_eq!(l[0], ("method", Cow::Borrowed("post")));
        assert_eq!(l[1].0, "path");
        assert_eq!(l[1].1, "/a}b\"c\\d\n");
        assert_eq!(
            parse_line("x +Inf", &mut l).unwrap().unwrap().1,
            f64::INFINITY
        );
        assert!(parse_line("x NaN", &mut l).unwrap().unwrap().1.is_nan());
        assert_eq!(parse_line("x 1.5e+06", &mut l).unwrap().unwrap().1, 1.5e6);
        assert_eq!(parse_line("# TYPE x gauge", &mut l).unwrap(), None);
        assert_eq!(parse_line("# EOF", &mut l).unwrap(), None);
        assert_eq!(parse_line("   ", &mut l).unwrap(), None);
    }

    #[test]
    fn malformed_lines() {
        let mut l = Vec::new();
        for bad in [
            "x",
            "x{a=\"1\"",
            "x{a=1} 2",
            "x{a=\"1\" b=\"2\"} 3",
            "x{=\"1\"} 2",
            "x abc",
            "1x 2",
            "{a=\"1\"} 2",
        ] {
            assert!(parse_line(bad, &mut l).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn rule_keeps_unlabelled_drops_identity_labels_and_folds_on_request() {
        let text = "\
node_health_metric{instance=\"10.0.0.1:9100\",job=\"node\"} 1
node_rack_power_watts{outlet=\"A 3\",pdu=\"east\"} 412.5
go_goroutines 8
node_temp NaN
node_health_metric 2
broken{ 1
";
        let rule = ImportRule::default();
        let e = parse_exposition(text, &rule);
        assert_eq!(names(&e), ["node_health_metric"]);
        assert_eq!(
            e.samples[0].value, 1.0,
            "the first of two same-named series wins"
        );
        // rack power (labelled), go_goroutines (self), NaN, second health metric.
        assert_eq!(e.not_imported, 4);
        assert_eq!(e.malformed, 1);
        assert!(e.first_error.as_deref().unwrap().starts_with("line 6:"));

        let rule = ImportRule {
            fold: vec!["node_rack_power_watts".into()],
            max_series: 1,
            ..ImportRule::default()
        };
        let e = parse_exposition(text, &rule);
        assert_eq!(names(&e), ["node_health_metric"]);
        assert_eq!(e.over_limit, 1);
        let rule = ImportRule {
            fold: vec!["node_rack_power_watts".into()],
            ..ImportRule::default()
        };
        let e = parse_exposition(text, &rule);
        assert_eq!(
            names(&e),
            [
                "node_health_metric",
                "node_rack_power_watts_outlet_a_3_pdu_east"
            ]
        );
    }

    #[test]
    fn builtins_win_over_imports() {
        let s = |n: &str, v| Sample {
            name: MetricName::new(n).unwrap(),
            value: v,
        };
        let mut samples = vec![s("node_load1", 1.0)];
        let skipped = merge_imported(&mut samples, vec![s("node_load1", 9.0), s("node_x", 2.0)]);
        assert_eq!(skipped, 1);
        assert_eq!(samples, vec![s("node_load1", 1.0), s("node_x", 2.0)]);
    }

    /// node-exporter 1.5.0's real output on this repository's build machine, with a textfile
    /// directory holding `textfile-health.prom`.
    #[test]
    fn real_node_exporter_output() {
        let text = include_str!("../../../tests/fixtures/prom/node-exporter-1.5.0.txt");
        let e = parse_exposition(text, &ImportRule::default());
        assert_eq!(e.malformed, 0, "{:?}", e.first_error);
        let get = |n: &str| {
            e.samples
                .iter()
                .find(|s| s.name.as_str() == n)
                .map(|s| s.value)
        };
        // Values as printed in the fixture.
        assert_eq!(get("node_health_metric"), Some(0.0));
        assert_eq!(get("node_load1"), Some(2.7));
        assert_eq!(get("node_load15"), Some(1.71));
        assert_eq!(get("node_nf_conntrack_entries_limit"), Some(262_144.0));
        assert_eq!(get("node_textfile_scrape_error"), None, "exporter metadata");
        assert_eq!(
            get("go_memstats_gc_sys_bytes"),
            None,
            "self-instrumentation"
        );
        assert_eq!(
            get("node_rack_power_watts_outlet_a_3"),
            None,
            "labelled, not folded"
        );
        assert!(
            e.samples
                .iter()
                .all(|s| s.name.as_str().starts_with("node_"))
        );
        let rule = ImportRule {
            fold: vec!["node_rack_power_watts".into()],
            ..ImportRule::default()
        };
        let e = parse_exposition(text, &rule);
        let power = e
            .samples
            .iter()
            .find(|s| s.name.as_str() == "node_rack_power_watts_outlet_a_3");
        assert_eq!(power.map(|s| s.value), Some(412.5));
    }
}
