//! The README's table: one row per series, one column per cluster size measured.

use std::collections::BTreeSet;
use std::fmt::Write;

use crate::catalogue;
use crate::figures::Series;

/// The README lines between which the table is kept (each alone on its line).
pub const BEGIN: &str = "<!-- scaling:begin (scripts/scaling.sh writes this table) -->";
pub const END: &str = "<!-- scaling:end -->";

/// A figure to three significant digits at most, thousands grouped: a table for reading.
pub fn format_value(value: f64) -> String {
    let magnitude = value.abs();
    let decimals = if magnitude >= 100.0 || magnitude == 0.0 {
        0
    } else if magnitude >= 10.0 {
        1
    } else if magnitude >= 1.0 {
        2
    } else {
        3
    };
    group_thousands(&format!("{value:.decimals$}"))
}

fn group_thousands(number: &str) -> String {
    let (sign, rest) = match number.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", number),
    };
    let (whole, fraction) = match rest.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (rest, None),
    };
    if whole.len() <= 4 {
        return number.to_owned();
    }
    let mut grouped = String::new();
    for (i, digit) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    match fraction {
        Some(f) => format!("{sign}{grouped}.{f}"),
        None => format!("{sign}{grouped}"),
    }
}

/// The Markdown table of every series: sizes as columns, the target and whether the figure at
/// the target's size meets it.
pub fn markdown(all: &[Series]) -> String {
    let sizes: BTreeSet<u64> = all.iter().flat_map(|s| s.points.keys().copied()).collect();
    let mut out = String::from("| cost | unit |");
    for size in &sizes {
        let _ = write!(out, " {} |", group_thousands(&size.to_string()));
    }
    out.push_str(" target | met? |\n| --- | --- |");
    for _ in &sizes {
        out.push_str(" ---: |");
    }
    out.push_str(" --- | --- |\n");
    for series in all {
        let known = catalogue::lookup(&series.name);
        let title = known.map_or(series.name.as_str(), |k| k.title);
        let _ = write!(out, "| {title} (`{}`) | {} |", series.name, series.unit);
        for size in &sizes {
            match series.points.get(size) {
                Some(v) => {
                    let _ = write!(out, " {} |", format_value(*v));
                }
                None => out.push_str(" |"),
            }
        }
        match known.and_then(|k| k.target.map(|t| (k, t))) {
            Some((k, target)) => {
                let verdict = match series.points.get(&target.at_size) {
                    Some(v) if target.met(target.at_size, *v) == Some(true) => "yes",
                    Some(_) => "no",
                    None => "not measured",
                };
                let _ = writeln!(
                    out,
                    " ≤ {} at {} {} | {verdict} |",
                    format_value(target.at_most),
                    group_thousands(&target.at_size.to_string()),
                    k.counts
                );
            }
            None => out.push_str(" | |\n"),
        }
    }
    out
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SpliceError {
    #[error("the README has no line `{0}`: add the begin and end markers where the table belongs")]
    MissingMarker(&'static str),
    #[error("the README's end marker comes before its begin marker")]
    OutOfOrder,
}

/// The README with the table between its markers replaced; everything else kept byte for byte.
pub fn splice(readme: &str, table: &str) -> Result<String, SpliceError> {
    let begin = find_line(readme, BEGIN).ok_or(SpliceError::MissingMarker(BEGIN))?;
    let end = find_line(readme, END).ok_or(SpliceError::MissingMarker(END))?;
    if end < begin {
        return Err(SpliceError::OutOfOrder);
    }
    let after_begin = begin + BEGIN.len() + 1;
    Ok(format!(
        "{}{}{}",
        &readme[..after_begin.min(readme.len())],
        table,
        &readme[end..]
    ))
}

/// The byte offset of a line that is exactly `marker`.
fn find_line(text: &str, marker: &str) -> Option<usize> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.trim_end_matches(['\n', '\r']) == marker {
            return Some(offset);
        }
        offset += line.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::collect;

    #[test]
    fn values_read_easily() {
        assert_eq!(format_value(0.0), "0");
        assert_eq!(format_value(0.7412), "0.741");
        assert_eq!(format_value(1.594), "1.59");
        assert_eq!(format_value(43.21), "43.2");
        assert_eq!(format_value(1652.4), "1652");
        assert_eq!(format_value(49909.0), "49,909");
        assert_eq!(format_value(-12345.0), "-12,345");
    }

    #[test]
    fn one_row_per_series_one_column_per_size_and_the_verdict() {
        let all = collect(
            "FIGURE agent_rss_mib 100 15.5 MiB\nFIGURE agent_rss_mib 5000 20.0 MiB\n\
             FIGURE agent_cpu_percent 1000 0.41 %\nFIGURE agent_cpu_percent 5000 0.38 %\n\
             FIGURE extender_filter_p99_us 5000 420 us\n\
             FIGURE custom_thing 10 3 s\n",
        )
        .expect("valid");
        let table = markdown(&all);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines[0],
            "| cost | unit | 10 | 100 | 1000 | 5000 | target | met? |"
        );
        assert_eq!(
            lines[2],
            "| Agent RSS (`agent_rss_mib`) | MiB | | 15.5 | | 20.0 | ≤ 12.0 at 5000 nodes | no |"
        );
        assert_eq!(
            lines[3],
            "| Agent CPU (% of a core) (`agent_cpu_percent`) | % | | | 0.410 | 0.380 | ≤ 0.500 at 5000 nodes | yes |"
        );
        assert_eq!(
            lines[4],
            "| Extender filter p99 (`extender_filter_p99_us`) | us | | | | 420 | ≤ 500 at 5000 nodes | yes |"
        );
        assert_eq!(
            lines[5],
            "| custom_thing (`custom_thing`) | s | 3.00 | | | | | |"
        );
    }

    #[test]
    fn a_target_size_not_measured_says_so() {
        let all = collect("FIGURE agent_rss_mib 100 15.5 MiB\n").expect("valid");
        assert!(markdown(&all).contains("| not measured |"));
    }

    #[test]
    fn splice_replaces_only_between_the_markers() {
        let readme = format!("# T\n\nbefore\n{BEGIN}\nold table\nmore\n{END}\nafter\n");
        let spliced = splice(&readme, "| new |\n").expect("markers");
        assert_eq!(
            spliced,
            format!("# T\n\nbefore\n{BEGIN}\n| new |\n{END}\nafter\n")
        );
        // Splicing again gives the same README: the script can run any number of times.
        assert_eq!(splice(&spliced, "| new |\n").expect("markers"), spliced);
    }

    #[test]
    fn splice_needs_both_markers_in_order() {
        assert_eq!(
            splice("no markers\n", "x"),
            Err(SpliceError::MissingMarker(BEGIN))
        );
        assert_eq!(
            splice(&format!("{BEGIN}\n"), "x"),
            Err(SpliceError::MissingMarker(END))
        );
        assert_eq!(
            splice(&format!("{END}\n{BEGIN}\n"), "x"),
            Err(SpliceError::OutOfOrder)
        );
    }
}
