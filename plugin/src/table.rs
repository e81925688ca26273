//! Tables as kubectl prints them: upper-case headers, left-aligned columns three spaces apart,
//! and the formatting of the cells (ages, bytes, percentages) shared by every subcommand.

use jiff::Timestamp;

/// The cell kubectl prints for a value it does not have.
pub const UNKNOWN: &str = "<unknown>";
/// The cell kubectl prints for an absent optional field.
pub const NONE: &str = "<none>";

/// Headers and rows of strings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

// === impl Table ===

impl Table {
    /// An empty table with these headers.
    pub fn new<S: AsRef<str>>(headers: &[S]) -> Self {
        Self {
            headers: headers.iter().map(|h| h.as_ref().to_uppercase()).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row (as many cells as headers).
    pub fn push(&mut self, row: Vec<String>) {
        debug_assert_eq!(row.len(), self.headers.len(), "{row:?}");
        self.rows.push(row);
    }

    /// Whether there is no row.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The rows.
    pub fn rows(&self) -> &[Vec<String>] {
        &self.rows
    }

    /// Each column's width: its widest cell, header included.
    pub fn widths(&self) -> Vec<usize> {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        widths
    }

    /// The header line and every row, aligned, each line ending in a newline.
    pub fn render(&self) -> String {
        let widths = self.widths();
        std::iter::once(&self.headers)
            .chain(&self.rows)
            .map(|row| line(row, &widths))
            .collect()
    }

    /// The header line alone, with `widths` (for a watch printing rows as they come).
    pub fn header_line(&self, widths: &[usize]) -> String {
        line(&self.headers, widths)
    }
}

/// One line of cells padded to `widths` (a longer cell pushes the rest right, as kubectl's
/// watch output does), three spaces apart, no trailing blanks.
pub fn line(cells: &[String], widths: &[usize]) -> String {
    let mut out = String::new();
    for (i, cell) in cells.iter().enumerate() {
        out.push_str(cell);
        if i + 1 < cells.len() {
            let width = widths.get(i).copied().unwrap_or(0);
            let pad = width.saturating_sub(cell.chars().count()) + 3;
            out.extend(std::iter::repeat_n(' ', pad));
        }
    }
    out.push('\n');
    out
}

/// An age as kubectl prints it (`5s`, `3m20s`, `4h`), from seconds.
pub fn age_seconds(seconds: f64) -> String {
    // Whole seconds as apimachinery counts them; the cast saturates for absurd inputs.
    telemesh_core::go::human_duration(seconds.floor() as i64)
}

/// The age at `now` of an RFC 3339 time, `<unknown>` when absent or unreadable.
pub fn age_since(time: Option<Timestamp>, now: Timestamp) -> String {
    match time {
        Some(t) => age_seconds(now.duration_since(t).as_secs_f64()),
        None => UNKNOWN.to_owned(),
    }
}

/// A ratio (0.42) as a percentage with `decimals` (`42%`).
pub fn percent(ratio: f64, decimals: usize) -> String {
    format!("{:.decimals$}%", ratio * 100.0)
}

/// Bytes in binary units as kubectl top prints memory (`512Ki`, `123Mi`, `1.5Gi`).
pub fn bytes(b: f64) -> String {
    const KI: f64 = 1024.0;
    if b >= KI * KI * KI {
        format!("{:.1}Gi", b / (KI * KI * KI))
    } else if b >= KI * KI {
        format!("{:.0}Mi", b / (KI * KI))
    } else if b >= KI {
        format!("{:.0}Ki", b / KI)
    } else {
        format!("{b:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_aligned_three_spaces_apart_without_trailing_blanks() {
        let mut t = Table::new(&["name", "phase"]);
        t.push(vec!["a-long-name".into(), "Running".into()]);
        t.push(vec!["b".into(), "Pending".into()]);
        assert_eq!(
            t.render(),
            "NAME          PHASE\na-long-name   Running\nb             Pending\n"
        );
    }

    #[test]
    fn a_watch_line_longer_than_the_widths_pushes_the_rest_right() {
        let widths = [2, 2];
        assert_eq!(line(&["abcd".into(), "x".into()], &widths), "abcd   x\n");
        assert_eq!(line(&["a".into(), "x".into()], &widths), "a    x\n");
    }

    #[test]
    fn cells_read_as_kubectl_prints_them() {
        assert_eq!(age_seconds(3.9), "3s");
        assert_eq!(age_seconds(200.0), "3m20s");
        assert_eq!(percent(0.423, 0), "42%");
        assert_eq!(percent(0.0123, 1), "1.2%");
        assert_eq!(bytes(3.0 * 1024.0 * 1024.0), "3Mi");
        assert_eq!(bytes(1.5 * 1024.0 * 1024.0 * 1024.0), "1.5Gi");
        assert_eq!(bytes(2048.0), "2Ki");
        assert_eq!(bytes(12.0), "12");
        let now: Timestamp = "2026-11-25T02:00:00Z".parse().unwrap_or_default();
        let then: Timestamp = "2026-11-25T01:59:30Z".parse().unwrap_or_default();
        assert_eq!(age_since(Some(then), now), "30s");
        assert_eq!(age_since(None, now), UNKNOWN);
    }
}
