//! The metric reference (docs/metrics.md) checked against what the binaries export: its tables
//! parsed into (binary, metric, type, labels), compared with a binary's scraped `/metrics`
//! ([`Exposition`]) in both directions.

use std::collections::BTreeSet;

use crate::dashboard::{Exposition, Kind};

/// The reference, relative to the workspace root.
pub const REFERENCE: &str = "docs/metrics.md";

/// The binary a reference section is about: its heading names it in backquotes, or says
/// "every binary" for what all of them export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exporter {
    /// One binary, e.g. `telemesh-agent`.
    Binary(String),
    /// Every binary.
    Every,
}

/// One row of the reference.
#[derive(Debug, Clone)]
pub struct Documented {
    /// Which binary exports it.
    pub exporter: Exporter,
    /// The name as queried: counters with `_total`, histograms without their suffixes.
    pub name: String,
    /// `counter`, `gauge` or `histogram`.
    pub kind: String,
    /// Label names (never `le`).
    pub labels: BTreeSet<String>,
}

/// Parses the reference's tables: under each `## ` heading naming a binary (`` `telemesh-agent` ``)
/// or "every binary", rows `` | `name` | type | `label`, ... | meaning | `` (labels `—` when none).
pub fn parse(markdown: &str) -> Result<Vec<Documented>, String> {
    let mut exporter = None;
    let mut out = Vec::new();
    for line in markdown.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            exporter = if heading.to_lowercase().contains("every binary") {
                Some(Exporter::Every)
            } else {
                heading
                    .split('`')
                    .nth(1)
                    .filter(|b| b.starts_with("telemesh-"))
                    .map(|b| Exporter::Binary(b.to_owned()))
            };
            continue;
        }
        let Some(row) = line.strip_prefix("| `") else {
            continue;
        };
        let Some(exporter) = &exporter else {
            return Err(format!("a metric row outside a binary's section: {line:?}"));
        };
        let cells: Vec<&str> = row.split(" | ").collect();
        let [name, kind, labels, ..] = cells[..] else {
            return Err(format!("a row without name, type and labels: {line:?}"));
        };
        out.push(Documented {
            exporter: exporter.clone(),
            name: name.trim_end_matches('`').to_owned(),
            kind: kind.trim().to_owned(),
            labels: labels
                .split(',')
                .map(|l| l.trim().trim_matches('`').to_owned())
                .filter(|l| !l.is_empty() && l != "—")
                .collect(),
        });
    }
    Ok(out)
}

/// The name a family is queried by and the sample whose series carry its labels.
fn queried(family: &str, kind: &Kind) -> (String, String, &'static str) {
    match kind {
        Kind::Counter => (
            format!("{family}_total"),
            format!("{family}_total"),
            "counter",
        ),
        Kind::Histogram => (family.to_owned(), format!("{family}_bucket"), "histogram"),
        Kind::Gauge => (family.to_owned(), family.to_owned(), "gauge"),
        Kind::Other(_) => (family.to_owned(), family.to_owned(), "other"),
    }
}

/// Returns what differs between the reference's rows for `binary` (its own and every binary's)
/// and what `binary` exports: a family the reference does not list, a listed metric it does not
/// export, another type, or labels on its series other than the documented ones. Labels are
/// compared only for families with series (a labelled family has none before its first event).
pub fn compare(binary: &str, reference: &[Documented], exported: &Exposition) -> Vec<String> {
    let mine: Vec<&Documented> = reference
        .iter()
        .filter(|d| match &d.exporter {
            Exporter::Every => true,
            Exporter::Binary(b) => b == binary,
        })
        .collect();
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for (family, kind) in exported.families() {
        let (name, sample, kind) = queried(family, kind);
        seen.insert(name.clone());
        let Some(doc) = mine.iter().find(|d| d.name == name) else {
            problems.push(format!(
                "{binary} exports {name} ({kind}), which {REFERENCE} does not list"
            ));
            continue;
        };
        if doc.kind != kind {
            problems.push(format!(
                "{binary} exports {name} as a {kind}, {REFERENCE} says {}",
                doc.kind
            ));
        }
        if let Some(labels) = exported.label_names(&sample) {
            let labels: BTreeSet<String> = labels
                .into_iter()
                .filter(|l| *l != "le")
                .map(str::to_owned)
                .collect();
            if labels != doc.labels {
                problems.push(format!(
                    "{binary}'s {name} has labels {labels:?}, {REFERENCE} says {:?}",
                    doc.labels
                ));
            }
        }
    }
    for doc in mine {
        if !seen.contains(&doc.name) {
            problems.push(format!(
                "{REFERENCE} lists {} for {binary}, which does not export it",
                doc.name
            ));
        }
    }
    problems
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const REFERENCE_TEXT: &str = "\
## Every binary\n\
| `up_total` | counter | — | x |\n\
## `telemesh-agent`\n\
| `a_seconds` | histogram | `verb` | x |\n\
| `a_gauge` | gauge | `state`, `kind` | x |\n";

    fn exposition(text: &str) -> Exposition {
        let mut e = Exposition::default();
        e.add(text).unwrap();
        e
    }

    #[test]
    fn parses_rows_per_section() {
        let rows = parse(REFERENCE_TEXT).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].exporter, Exporter::Every);
        assert_eq!(rows[2].exporter, Exporter::Binary("telemesh-agent".into()));
        assert_eq!(
            rows[2].labels,
            BTreeSet::from(["state".to_owned(), "kind".to_owned()])
        );
    }

    #[test]
    fn finds_every_kind_of_difference() {
        let rows = parse(REFERENCE_TEXT).unwrap();
        let good = "# TYPE up counter\nup_total 1\n# TYPE a_seconds histogram\n\
            a_seconds_bucket{verb=\"f\",le=\"1\"} 1\n# TYPE a_gauge gauge\n\
            a_gauge{state=\"x\",kind=\"y\"} 1\n";
        assert_eq!(
            compare("telemesh-agent", &rows, &exposition(good)),
            Vec::<String>::new()
        );
        // Another binary exports neither of the agent's rows but must export up_total.
        assert_eq!(
            compare("telemesh-coordinator", &rows, &exposition(good)).len(),
            2
        );
        let renamed = good.replace("a_gauge", "b_gauge");
        let found = compare("telemesh-agent", &rows, &exposition(&renamed));
        assert!(found.iter().any(|p| p.contains("b_gauge")), "{found:?}");
        assert!(found.iter().any(|p| p.contains("a_gauge")), "{found:?}");
        let relabelled = good.replace("kind=", "sort=");
        assert_eq!(
            compare("telemesh-agent", &rows, &exposition(&relabelled)).len(),
            1
        );
        let retyped = good.replace("a_gauge gauge", "a_gauge counter");
        assert!(!compare("telemesh-agent", &rows, &exposition(&retyped)).is_empty());
    }
}
