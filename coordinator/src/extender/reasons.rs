//! The reasons a filter gives for a removed node, as [`telemesh_core::policy::Verdict::reason`]
//! writes them, with what does not depend on the node formatted once: the filter writes them
//! for the nodes it removes, the folds ([`super::folded`]) once per snapshot.

use std::fmt::Write as _;

use telemesh_core::policy::{Metrics, Policy, Reading, RuleSet, StrategyKind, Unknown};

/// Writes the reasons [`telemesh_core::policy::Verdict::reason`] writes, with the parts that
/// do not depend on the node formatted once per request.
pub struct Reasons {
    head: String,
    rules: Vec<String>,
}

impl Reasons {
    /// Prepares the reasons of `rules` in `policy`'s dontschedule.
    pub fn new(policy: &Policy, rules: &RuleSet) -> Self {
        Self {
            head: format!(
                "policy {} {}:",
                policy.key(),
                StrategyKind::DontSchedule.as_str()
            ),
            rules: rules
                .rules
                .iter()
                .map(|r| format!(" {r} (value "))
                .collect(),
        }
    }

    /// The reason a node with `metrics` violates `rules`.
    pub fn reason(&self, rules: &RuleSet, metrics: &impl Metrics, unknown: Unknown) -> String {
        let mut out = String::with_capacity(self.head.len() + 48 * self.rules.len());
        out.push_str(&self.head);
        let mut first = true;
        for (rule, prefix) in rules.rules.iter().zip(&self.rules) {
            let reading = metrics.reading(&rule.metric);
            if !rule.violated_by(reading, unknown) {
                continue;
            }
            if !first {
                out.push(';');
            }
            first = false;
            out.push_str(prefix);
            write_reading(&mut out, reading);
            out.push(')');
        }
        out
    }
}

/// Appends `reading` exactly as [`telemesh_core::policy::Reading::write_value`] does, formatting
/// the value once instead of twice: that writes the shorter of the positional and the
/// exponential form, and the exponential one can only be shorter when the positional one has a
/// run of zeros, so only then is it formatted too. Every removed node pays for this.
fn write_reading(out: &mut String, reading: Reading) {
    let v = match reading {
        Reading::Fresh(v) => v,
        Reading::Stale(v) => {
            out.push_str("stale ");
            v
        }
        Reading::Missing => {
            out.push_str("missing");
            return;
        }
    };
    let start = out.len();
    let _ = write!(out, "{v}");
    if out[start..].contains("00") {
        let exponential = format!("{v:e}");
        if exponential.len() < out.len() - start {
            out.truncate(start);
            out.push_str(&exponential);
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn assert_same_text(v: f64) {
        for reading in [Reading::Fresh(v), Reading::Stale(v), Reading::Missing] {
            let (mut a, mut b) = (String::new(), String::new());
            reading.write_value(&mut a);
            write_reading(&mut b, reading);
            assert_eq!(a, b, "{v:?}");
        }
    }

    /// The one-format path writes what `Reading::write_value` writes at the edges: zeros,
    /// powers of ten, the switch to exponents, the extremes.
    #[test]
    fn write_reading_matches_write_value_at_the_edges() {
        for v in [
            0.0,
            -0.0,
            1.0,
            10.0,
            100.0,
            1e21,
            1e-7,
            0.05,
            0.005,
            123_000_000.0,
            1.5e300,
            -2e-300,
            f64::MAX,
            f64::MIN_POSITIVE,
            3.25,
            1_000_001.0,
            0.000_123,
        ] {
            assert_same_text(v);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        /// ... and on any finite value.
        #[test]
        fn write_reading_matches_write_value(
            v in prop::num::f64::POSITIVE | prop::num::f64::NEGATIVE | prop::num::f64::NORMAL
                | prop::num::f64::SUBNORMAL | prop::num::f64::ZERO,
        ) {
            assert_same_text(v);
        }

        /// ... and on decimal values of every magnitude, with and without runs of zeros.
        #[test]
        fn write_reading_matches_write_value_on_decimals(
            mantissa in 0..100_000u32,
            exponent in -20..20i32,
        ) {
            assert_same_text(f64::from(mantissa) * 10f64.powi(exponent));
        }
    }
}
