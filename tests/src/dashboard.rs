//! The Grafana dashboard's PromQL checked against what the binaries really export: its queries
//! (every panel's targets), an exposition model built from scraped `/metrics` texts (metric
//! families with their types, the series and labels seen), and a checker that walks each
//! query's syntax tree (GreptimeDB's `promql-parser`) for names, types and labels.

use std::collections::{BTreeMap, BTreeSet};

use promql_parser::label::MatchOp;
use promql_parser::parser::{self, Expr, LabelModifier, VectorMatchCardinality, VectorSelector};

/// The dashboard, relative to the workspace root.
pub const DASHBOARD: &str = "deploy/grafana/telemesh.json";

/// Labels every scraped series carries beyond its own: Prometheus adds them at scrape time.
pub const TARGET_LABELS: [&str; 2] = ["job", "instance"];

/// Functions whose argument is a counter's (or a histogram part's) range.
const COUNTER_FUNCTIONS: [&str; 4] = ["rate", "irate", "increase", "resets"];

/// One query of the dashboard.
#[derive(Debug, Clone)]
pub struct Query {
    /// The panel's title.
    pub panel: String,
    /// The target's `expr`, as Grafana stores it.
    pub expr: String,
}

/// Returns every target's query of the dashboard JSON, rows' nested panels included.
pub fn queries(dashboard: &serde_json::Value) -> Vec<Query> {
    fn walk(panels: &serde_json::Value, out: &mut Vec<Query>) {
        for p in panels.as_array().into_iter().flatten() {
            for t in p["targets"].as_array().into_iter().flatten() {
                if let Some(expr) = t["expr"].as_str() {
                    out.push(Query {
                        panel: p["title"].as_str().unwrap_or_default().to_owned(),
                        expr: expr.to_owned(),
                    });
                }
            }
            walk(&p["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    out
}

/// Replaces Grafana's interval macros with `range` (e.g. `1m`): Prometheus and the parser know
/// only concrete durations.
pub fn expand(expr: &str, range: &str) -> String {
    ["$__rate_interval", "$__interval", "$__range"]
        .iter()
        .fold(expr.to_owned(), |e, m| e.replace(m, range))
}

/// A metric family's type, as its `# TYPE` line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// `counter`: samples `<name>_total`.
    Counter,
    /// `gauge`: samples `<name>`.
    Gauge,
    /// `histogram`: samples `<name>_bucket` (with `le`), `<name>_sum`, `<name>_count`.
    Histogram,
    /// Anything else (`info`, `unknown`, ...).
    Other(String),
}

/// What the scraped binaries export: families by name, and for each sample name the labels and
/// label values seen on its series.
#[derive(Debug, Default, Clone)]
pub struct Exposition {
    families: BTreeMap<String, Kind>,
    series: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
}

impl Exposition {
    /// Adds one `/metrics` text (OpenMetrics or Prometheus text format) to the model.
    pub fn add(&mut self, text: &str) -> Result<(), String> {
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let mut parts = rest.split_whitespace();
                let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
                    return Err(format!("bad TYPE line {line:?}"));
                };
                let kind = match kind {
                    "counter" => Kind::Counter,
                    "gauge" => Kind::Gauge,
                    "histogram" => Kind::Histogram,
                    other => Kind::Other(other.to_owned()),
                };
                self.families.insert(name.to_owned(), kind);
            } else if line.starts_with('#') || line.trim().is_empty() {
                continue;
            } else {
                let (name, labels) = parse_sample(line)?;
                let seen = self.series.entry(name).or_default();
                for (k, v) in labels {
                    seen.entry(k).or_default().insert(v);
                }
            }
        }
        Ok(())
    }

    /// The family a sample name belongs to, with its type: `x` for a gauge, `x_total` for a
    /// counter `x`, `x_bucket`/`x_sum`/`x_count` for a histogram `x`.
    pub fn family_of(&self, sample: &str) -> Option<(&str, &Kind)> {
        if let Some((name, kind)) = self.families.get_key_value(sample)
            && !matches!(kind, Kind::Counter | Kind::Histogram)
        {
            return Some((name, kind));
        }
        let suffixes = [
            ("_total", Kind::Counter),
            ("_bucket", Kind::Histogram),
            ("_sum", Kind::Histogram),
            ("_count", Kind::Histogram),
        ];
        suffixes.iter().find_map(|(suffix, wanted)| {
            let base = sample.strip_suffix(suffix)?;
            let (name, kind) = self.families.get_key_value(base)?;
            (kind == wanted).then_some((name.as_str(), kind))
        })
    }

    /// Every sample name with at least one series.
    pub fn sample_names(&self) -> impl Iterator<Item = &str> {
        self.series.keys().map(String::as_str)
    }

    /// Every metric family with its type, as the `# TYPE` lines say.
    pub fn families(&self) -> impl Iterator<Item = (&str, &Kind)> {
        self.families.iter().map(|(n, k)| (n.as_str(), k))
    }

    /// The label names seen on the series of one sample name (`None`: no series).
    pub fn label_names(&self, sample: &str) -> Option<BTreeSet<&str>> {
        self.series
            .get(sample)
            .map(|labels| labels.keys().map(String::as_str).collect())
    }
}

/// Splits a sample line into its name and labels (`name{a="b",...} value [timestamp]`).
fn parse_sample(line: &str) -> Result<(String, Vec<(String, String)>), String> {
    let end = line
        .find(['{', ' '])
        .ok_or_else(|| format!("bad sample line {line:?}"))?;
    let name = line[..end].to_owned();
    let mut labels = Vec::new();
    if line[end..].starts_with('{') {
        let mut chars = line[end + 1..].chars();
        loop {
            let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
            let key = key.trim_start_matches(',').trim().to_owned();
            if key.is_empty() || key.starts_with('}') {
                break;
            }
            if chars.next() != Some('"') {
                return Err(format!("bad label {key:?} in {line:?}"));
            }
            let mut value = String::new();
            loop {
                match chars.next() {
                    Some('\\') => match chars.next() {
                        Some('n') => value.push('\n'),
                        Some(c) => value.push(c),
                        None => return Err(format!("unterminated value in {line:?}")),
                    },
                    Some('"') => break,
                    Some(c) => value.push(c),
                    None => return Err(format!("unterminated value in {line:?}")),
                }
            }
            labels.push((key, value));
            // After a value: `,` then the next label, or `}`.
            match chars.clone().next() {
                Some(',') => {
                    chars.next();
                }
                Some('}') => break,
                _ => return Err(format!("bad label list in {line:?}")),
            }
        }
    }
    Ok((name, labels))
}

/// What an expression yields, for checking the labels its parents use.
#[derive(Debug, Default)]
struct Yield {
    /// Labels its series may carry.
    labels: BTreeSet<String>,
    /// A scalar (number literal or scalar function): no labels to check.
    scalar: bool,
}

/// Returns what is wrong with `expr` (Grafana macros already expanded) against `exposition`:
/// unknown metrics, a type used against its kind (a counter or histogram part outside
/// `rate`/`increase`, a gauge inside), label matchers, groupings and vector matchings on labels
/// the metric does not have, and equality matchers on values no series has. Empty when fine.
pub fn check(expr: &str, exposition: &Exposition) -> Vec<String> {
    match parser::parse(expr) {
        Ok(ast) => {
            let mut problems = Vec::new();
            walk(&ast, exposition, false, &mut problems);
            problems
        }
        Err(e) => vec![format!("does not parse: {e}")],
    }
}

fn walk(expr: &Expr, exp: &Exposition, in_counter_fn: bool, problems: &mut Vec<String>) -> Yield {
    match expr {
        Expr::VectorSelector(vs) => selector(vs, exp, in_counter_fn, problems),
        Expr::MatrixSelector(ms) => selector(&ms.vs, exp, in_counter_fn, problems),
        Expr::Call(call) => {
            let counter_fn = COUNTER_FUNCTIONS.contains(&call.func.name);
            let mut out = Yield {
                scalar: call.args.args.is_empty(),
                ..Yield::default()
            };
            for arg in &call.args.args {
                let y = walk(arg, exp, counter_fn, problems);
                if !y.scalar {
                    out.labels.extend(y.labels);
                }
            }
            if call.func.name == "histogram_quantile" && !out.labels.remove("le") {
                problems.push(
                    "histogram_quantile over series without an `le` label (sum by (le, ...) over a _bucket)"
                        .into(),
                );
            }
            if call.func.name == "scalar" {
                out.scalar = true;
            }
            out
        }
        Expr::Aggregate(agg) => {
            let inner = walk(&agg.expr, exp, false, problems);
            if let Some(param) = &agg.param {
                walk(param, exp, false, problems);
            }
            let mut out = Yield::default();
            match &agg.modifier {
                Some(LabelModifier::Include(by)) => {
                    for l in &by.labels {
                        need_label(l, &inner, "grouped by", problems);
                    }
                    out.labels = by.labels.iter().cloned().collect();
                }
                Some(LabelModifier::Exclude(without)) => {
                    for l in &without.labels {
                        need_label(l, &inner, "grouped without", problems);
                    }
                    out.labels = &inner.labels - &without.labels.iter().cloned().collect();
                }
                None => {}
            }
            out
        }
        Expr::Binary(bin) => {
            let lhs = walk(&bin.lhs, exp, false, problems);
            let rhs = walk(&bin.rhs, exp, false, problems);
            let mut out = Yield {
                scalar: lhs.scalar && rhs.scalar,
                labels: if lhs.scalar {
                    rhs.labels.clone()
                } else {
                    lhs.labels.clone()
                },
            };
            if let Some(m) = &bin.modifier {
                if let Some(matching) = &m.matching {
                    for l in &matching.labels().labels {
                        match matching {
                            LabelModifier::Include(_) => {
                                need_label(l, &lhs, "matched on", problems);
                                need_label(l, &rhs, "matched on", problems);
                            }
                            LabelModifier::Exclude(_) => {
                                if !lhs.labels.contains(l) && !rhs.labels.contains(l) {
                                    problems.push(format!(
                                        "ignores label {l:?}, which neither side has"
                                    ));
                                }
                            }
                        }
                    }
                }
                match &m.card {
                    VectorMatchCardinality::ManyToOne(extra) => {
                        for l in &extra.labels {
                            need_label(l, &rhs, "copied by group_left", problems);
                            out.labels.insert(l.clone());
                        }
                    }
                    VectorMatchCardinality::OneToMany(extra) => {
                        for l in &extra.labels {
                            need_label(l, &lhs, "copied by group_right", problems);
                        }
                        out.labels = rhs.labels.clone();
                        out.labels.extend(extra.labels.iter().cloned());
                    }
                    _ => {}
                }
            }
            out
        }
        Expr::Paren(p) => walk(&p.expr, exp, in_counter_fn, problems),
        Expr::Unary(u) => walk(&u.expr, exp, in_counter_fn, problems),
        Expr::Subquery(s) => walk(&s.expr, exp, in_counter_fn, problems),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) => Yield {
            scalar: true,
            ..Yield::default()
        },
        Expr::Extension(_) => Yield::default(),
    }
}

fn need_label(label: &str, from: &Yield, how: &str, problems: &mut Vec<String>) {
    if !from.scalar && !from.labels.contains(label) {
        problems.push(format!(
            "{how} label {label:?}, which its series do not have (they have {:?})",
            from.labels
        ));
    }
}

fn selector(
    vs: &VectorSelector,
    exp: &Exposition,
    in_counter_fn: bool,
    problems: &mut Vec<String>,
) -> Yield {
    let Some(name) = &vs.name else {
        problems.push(format!("selector {vs} names no metric"));
        return Yield::default();
    };
    let mut out = Yield {
        labels: TARGET_LABELS.iter().map(|l| (*l).to_owned()).collect(),
        scalar: false,
    };
    let Some((family, kind)) = exp.family_of(name) else {
        problems.push(format!(
            "names {name}, which no binary exports as a gauge, a counter's _total or a histogram's _bucket/_sum/_count"
        ));
        return out;
    };
    let counter_like = matches!(kind, Kind::Counter | Kind::Histogram);
    if counter_like && !in_counter_fn {
        problems.push(format!(
            "uses {name} (part of {kind:?} {family}) outside rate/irate/increase"
        ));
    }
    if !counter_like && in_counter_fn {
        problems.push(format!("applies rate/irate/increase to {name}, a {kind:?}"));
    }
    let Some(seen) = exp.series.get(name) else {
        problems.push(format!(
            "names {name}: its family {family} is declared but has no series yet"
        ));
        return out;
    };
    out.labels.extend(seen.keys().cloned());
    for m in &vs.matchers.matchers {
        if m.name == "__name__" || TARGET_LABELS.contains(&m.name.as_str()) {
            continue;
        }
        match seen.get(&m.name) {
            None => problems.push(format!(
                "filters {name} by label {:?}, which it does not have (it has {:?})",
                m.name,
                seen.keys().collect::<Vec<_>>()
            )),
            Some(values) if matches!(m.op, MatchOp::Equal) && !values.contains(&m.value) => {
                problems.push(format!(
                    "filters {name} by {}={:?}, a value no series has (seen: {values:?})",
                    m.name, m.value
                ));
            }
            Some(_) => {}
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const TEXT: &str = "# HELP a_requests Requests.\n# TYPE a_requests counter\n\
        a_requests_total{verb=\"Filter\",outcome=\"Evaluated\"} 3\n\
        # TYPE a_latency_seconds histogram\n\
        a_latency_seconds_sum{verb=\"Filter\"} 0.1\na_latency_seconds_count{verb=\"Filter\"} 3\n\
        a_latency_seconds_bucket{le=\"0.5\",verb=\"Filter\"} 3\n\
        # TYPE a_nodes gauge\na_nodes{liveness=\"Live\",note=\"a \\\"b\\\", c\"} 4\n\
        # TYPE a_empty gauge\n# EOF\n";

    fn exposition() -> Exposition {
        let mut e = Exposition::default();
        e.add(TEXT).unwrap();
        e
    }

    #[test]
    fn well_formed_queries_pass() {
        let e = exposition();
        for q in [
            "sum by (verb, outcome) (rate(a_requests_total[1m]))",
            "histogram_quantile(0.99, sum by (le, verb) (rate(a_latency_seconds_bucket[1m])))",
            "max by (liveness) (a_nodes{liveness=\"Live\"})",
            "a_nodes * on (job, instance) group_left (verb) sum by (job, instance, verb) (rate(a_requests_total[5m]))",
        ] {
            assert_eq!(check(q, &e), Vec::<String>::new(), "{q}");
        }
    }

    #[test]
    fn a_renamed_metric_a_wrong_type_or_label_is_reported() {
        let e = exposition();
        let cases = [
            ("rate(a_request_total[1m])", "which no binary exports"),
            ("a_requests_total", "outside rate"),
            ("rate(a_nodes[1m])", "applies rate"),
            ("sum by (node) (a_nodes)", "grouped by label \"node\""),
            ("a_nodes{verb=\"Filter\"}", "by label \"verb\""),
            ("a_nodes{liveness=\"live\"}", "a value no series has"),
            ("a_empty", "no series yet"),
            (
                "histogram_quantile(0.9, sum by (verb) (rate(a_latency_seconds_bucket[1m])))",
                "`le`",
            ),
            ("a_nodes * on (verb) a_nodes", "matched on label \"verb\""),
            ("sum(rate(a_requests_total[1m]", "does not parse"),
        ];
        for (q, want) in cases {
            let problems = check(q, &e);
            assert!(
                problems.iter().any(|p| p.contains(want)),
                "{q}: want a problem with {want:?}, got {problems:?}"
            );
        }
    }

    #[test]
    fn grafana_macros_expand() {
        assert_eq!(
            expand("rate(x_total[$__rate_interval])", "2m"),
            "rate(x_total[2m])"
        );
    }
}
