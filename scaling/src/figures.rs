//! The benchmarks' machine-readable output: one line per headline figure,
//! `FIGURE <series> <x> <value> <unit>`, among their human-readable lines.

use std::collections::BTreeMap;

use crate::catalogue;

/// The line prefix that marks a figure; every other line is the bench's own output.
pub const PREFIX: &str = "FIGURE";

/// One measured point.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub series: String,
    /// The member or node count the figure was measured at.
    pub x: u64,
    pub value: f64,
    pub unit: String,
}

/// Everything measured for one series, by member or node count.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub unit: String,
    pub points: BTreeMap<u64, f64>,
}

impl Series {
    /// The value at the largest size measured.
    pub fn largest(&self) -> Option<(u64, f64)> {
        self.points.last_key_value().map(|(x, v)| (*x, *v))
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ParseError {
    #[error(
        "line {line}: {reason}: {text:?} (a figure line is `FIGURE <series> <x> <value> <unit>`, x an integer)"
    )]
    Malformed {
        line: usize,
        reason: &'static str,
        text: String,
    },
    #[error(
        "line {line}: series {series} was given in {first} before and now in {second}: a series keeps one unit (rename one of them in its bench)"
    )]
    UnitChanged {
        line: usize,
        series: String,
        first: String,
        second: String,
    },
}

/// Reads one line: `None` for a line that is not a figure, the figure or what is wrong with it.
pub fn parse_line(text: &str, line: usize) -> Option<Result<Figure, ParseError>> {
    let mut words = text.split_whitespace();
    if words.next() != Some(PREFIX) {
        return None;
    }
    let malformed = |reason| ParseError::Malformed {
        line,
        reason,
        text: text.to_owned(),
    };
    let fields: Vec<&str> = words.collect();
    let [series, x, value, unit] = fields.as_slice() else {
        return Some(Err(malformed("expected four fields after FIGURE")));
    };
    let Ok(x) = x.parse::<u64>() else {
        return Some(Err(malformed("x is not a member or node count")));
    };
    let value = match value.parse::<f64>() {
        Ok(v) if v.is_finite() => v,
        _ => return Some(Err(malformed("value is not a finite number"))),
    };
    Some(Ok(Figure {
        series: (*series).to_owned(),
        x,
        value,
        unit: (*unit).to_owned(),
    }))
}

/// Collects every figure in a bench's output into series, in the catalogue's order (series it
/// does not know follow, by name). A size measured twice keeps the later figure: a re-run
/// appended to the same file replaces what it re-measured.
pub fn collect(text: &str) -> Result<Vec<Series>, ParseError> {
    let mut by_name: BTreeMap<String, Series> = BTreeMap::new();
    for (index, raw) in text.lines().enumerate() {
        let Some(figure) = parse_line(raw, index + 1) else {
            continue;
        };
        let figure = figure?;
        let series = by_name
            .entry(figure.series.clone())
            .or_insert_with(|| Series {
                name: figure.series.clone(),
                unit: figure.unit.clone(),
                points: BTreeMap::new(),
            });
        if series.unit != figure.unit {
            return Err(ParseError::UnitChanged {
                line: index + 1,
                series: figure.series,
                first: series.unit.clone(),
                second: figure.unit,
            });
        }
        series.points.insert(figure.x, figure.value);
    }
    let mut all: Vec<Series> = by_name.into_values().collect();
    all.sort_by_key(|s| (catalogue::rank(&s.name), s.name.clone()));
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_figures_among_other_output() {
        let out = "run nodes round\nudp10 10 1000\nFIGURE agent_rss_mib 100 15.5 MiB\n  \
                   FIGURE agent_rss_mib 1000 20.0 MiB\nFIGURES are not this\n";
        let all = collect(out).expect("valid");
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].name, "agent_rss_mib");
        assert_eq!(all[0].unit, "MiB");
        assert_eq!(
            all[0]
                .points
                .iter()
                .map(|(x, v)| (*x, *v))
                .collect::<Vec<_>>(),
            vec![(100, 15.5), (1000, 20.0)]
        );
        assert_eq!(all[0].largest(), Some((1000, 20.0)));
    }

    #[test]
    fn a_re_measured_size_keeps_the_later_figure() {
        let all = collect("FIGURE x_s 10 1 s\nFIGURE x_s 10 2 s\n").expect("valid");
        assert_eq!(all[0].points.get(&10), Some(&2.0));
    }

    #[test]
    fn catalogue_order_first_then_unknown_by_name() {
        let all = collect(
            "FIGURE zz_new 10 1 s\nFIGURE extender_filter_p99_us 100 40 us\n\
             FIGURE aa_new 10 1 s\nFIGURE agent_rss_mib 10 14 MiB\n",
        )
        .expect("valid");
        let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "agent_rss_mib",
                "extender_filter_p99_us",
                "aa_new",
                "zz_new"
            ]
        );
    }

    #[test]
    fn malformed_lines_say_which_and_why() {
        for (text, reason) in [
            (
                "FIGURE agent_rss_mib 1000 20.0",
                "expected four fields after FIGURE",
            ),
            (
                "FIGURE agent_rss_mib 1e3 20.0 MiB",
                "x is not a member or node count",
            ),
            (
                "FIGURE agent_rss_mib 1000 NaN MiB",
                "value is not a finite number",
            ),
            (
                "FIGURE agent_rss_mib 1000 lots MiB",
                "value is not a finite number",
            ),
        ] {
            let err = collect(&format!("ok\n{text}\n")).expect_err(text);
            assert_eq!(
                err,
                ParseError::Malformed {
                    line: 2,
                    reason,
                    text: text.to_owned()
                }
            );
        }
    }

    #[test]
    fn a_series_keeps_its_unit() {
        let err = collect("FIGURE lat 10 1 ms\nFIGURE lat 100 900 us\n").expect_err("units");
        assert!(
            err.to_string()
                .contains("series lat was given in ms before and now in us"),
            "{err}"
        );
    }
}
