//! What to publish to gossip each cycle: a metric goes out when it moved past its deadband, when
//! the move takes it across a policy rule's target, or when its last published value grew older
//! than the refresh period, so Scuttlebutt ships only what changed and readers can still tell a
//! live value from a stale one.
//!
//! **Why a target crossing always goes out.** This agent decides its rules (labels, evictions,
//! status) on its latest collection, as TAS decides on the node's own figure; the extender
//! decides on what this agent published, which gossip carries exactly (`telemesh_core::gossip::
//! groups`). A move held back by the deadband across a target would leave the two deciding the
//! same rule differently until the refresh (a node at 7.95 reading 8.05 against
//! `GreaterThan 8`). Of the two ways to make them decide on one value, we publish every move
//! that crosses a target ([`telemesh_core::policy::Targets`]) rather than have the agent decide
//! on its published values: the latter would make both sides, and the evictions, wait for the
//! deadband too, and TAS, reading the node's figure, would still decide otherwise. A value that
//! hovers around a target is published on each crossing, at most once per collection.

use std::collections::HashMap;
use std::time::Duration;

use telemesh_core::metric::{MetricName, Sample};
use telemesh_core::policy::{Metrics, Reading, Targets};
use tokio::time::Instant;

/// When a value is worth publishing again.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Deadband {
    /// Relative change that counts (0.02 = 2 % of the last published value).
    pub relative: f64,
    /// Absolute change that always counts, for values near zero.
    pub absolute: f64,
    /// Republish an unchanged value at least this often.
    pub refresh: Duration,
}

impl Default for Deadband {
    fn default() -> Self {
        Self {
            relative: 0.02,
            absolute: 1e-3,
            refresh: Duration::from_secs(30),
        }
    }
}

/// Remembers what was last published.
#[derive(Debug, Default)]
pub struct Publisher {
    band: Deadband,
    last: HashMap<MetricName, (f64, Instant)>,
}

impl Publisher {
    /// Returns a publisher with the given deadband.
    pub fn new(band: Deadband) -> Self {
        Self {
            band,
            last: HashMap::new(),
        }
    }

    /// Forgets what was published, so the next [`Self::select`] publishes every sample (their
    /// stamps must change: the clock correction moved).
    pub fn republish_all(&mut self) {
        self.last.clear();
    }

    /// The values last published, as policy rules read them: what each reader of this node's
    /// gossip state holds once the exchanges reach it (the deadband keeps a value that moved
    /// less than its band at the published one).
    pub fn published(&self) -> PublishedValues<'_> {
        PublishedValues(&self.last)
    }

    /// Returns the samples to publish now, and forgets metrics that are no longer measured
    /// (returned as `gone`, for the caller to delete from gossip). A sample whose move from its
    /// published value crosses one of `targets` goes out whatever the deadband says (module
    /// docs), so the published value is always on the same side of every target as the sample.
    pub fn select(&mut self, samples: &[Sample], now: Instant, targets: &Targets) -> Selection {
        let mut out = Selection::default();
        for s in samples {
            if !s.value.is_finite() {
                continue;
            }
            let due = match self.last.get(&s.name) {
                None => true,
                Some((v, at)) => {
                    let moved =
                        (s.value - v).abs() > self.band.absolute.max(self.band.relative * v.abs());
                    moved
                        || now.duration_since(*at) >= self.band.refresh
                        || targets.crossed(&s.name, *v, s.value)
                }
            };
            if due {
                self.last.insert(s.name.clone(), (s.value, now));
                out.publish.push(s.clone());
            }
        }
        if self.last.len() > samples.len() || !out.publish.is_empty() {
            let present: std::collections::HashSet<&MetricName> =
                samples.iter().map(|s| &s.name).collect();
            let gone: Vec<MetricName> = self
                .last
                .keys()
                .filter(|k| !present.contains(k))
                .cloned()
                .collect();
            for g in &gone {
                self.last.remove(g);
            }
            out.gone = gone;
        }
        out
    }
}

/// The values a [`Publisher`] last published, read by policy rules. Each counts as fresh: it is
/// this agent's latest measurement as far as the deadband lets readers see it.
#[derive(Debug, Clone, Copy)]
pub struct PublishedValues<'a>(&'a HashMap<MetricName, (f64, Instant)>);

impl Metrics for PublishedValues<'_> {
    fn reading(&self, metric: &str) -> Reading {
        let found = self.0.get(metric).or_else(|| {
            self.0
                .iter()
                .find(|(name, _)| name.answers_to(metric))
                .map(|(_, v)| v)
        });
        found.map_or(Reading::Missing, |(value, _)| Reading::Fresh(*value))
    }
}

/// One cycle's decision.
#[derive(Debug, Default, PartialEq)]
pub struct Selection {
    /// Samples to publish.
    pub publish: Vec<Sample>,
    /// Metrics no longer measured.
    pub gone: Vec<MetricName>,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn s(name: &str, v: f64) -> Sample {
        Sample {
            name: MetricName::new(name).unwrap(),
            value: v,
        }
    }

    fn names(sel: &Selection) -> Vec<&str> {
        sel.publish.iter().map(|s| s.name.as_str()).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn small_moves_wait_for_the_refresh_and_big_ones_go_at_once() {
        let none = Targets::default();
        let mut p = Publisher::new(Deadband {
            relative: 0.05,
            absolute: 0.0,
            refresh: Duration::from_secs(10),
        });
        let t0 = Instant::now();
        assert_eq!(
            names(&p.select(&[s("node_a", 100.0)], t0, &none)),
            ["node_a"],
            "first reading goes out"
        );
        assert!(
            p.select(&[s("node_a", 104.0)], t0 + Duration::from_secs(1), &none)
                .publish
                .is_empty(),
            "4 % is inside the band"
        );
        assert_eq!(
            names(&p.select(&[s("node_a", 106.0)], t0 + Duration::from_secs(2), &none)),
            ["node_a"],
            "6 % is outside"
        );
        assert!(
            p.select(&[s("node_a", 106.0)], t0 + Duration::from_secs(11), &none)
                .publish
                .is_empty(),
            "refresh counts from the last publish"
        );
        assert_eq!(
            names(&p.select(&[s("node_a", 106.0)], t0 + Duration::from_secs(12), &none)),
            ["node_a"],
            "refreshed after 10 s"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn values_near_zero_use_the_absolute_band_and_vanished_metrics_are_reported() {
        let none = Targets::default();
        let mut p = Publisher::new(Deadband {
            relative: 0.05,
            absolute: 0.01,
            refresh: Duration::from_secs(60),
        });
        let t0 = Instant::now();
        p.select(&[s("node_a", 0.0), s("node_b", 1.0)], t0, &none);
        assert!(
            p.select(&[s("node_a", 0.005), s("node_b", 1.0)], t0, &none)
                .publish
                .is_empty()
        );
        assert_eq!(
            names(&p.select(&[s("node_a", 0.02), s("node_b", 1.0)], t0, &none)),
            ["node_a"]
        );
        let sel = p.select(&[s("node_b", 1.0)], t0, &none);
        assert_eq!(sel.gone, vec![MetricName::new("node_a").unwrap()]);
        assert_eq!(
            names(&p.select(&[s("node_a", 0.02), s("node_b", 1.0)], t0, &none)),
            ["node_a"],
            "a returning metric is new again"
        );
    }

    /// Rules read what readers hold: the published value while a move stays in the band, by the
    /// full name or the adapter's name, and nothing for a metric no longer measured.
    #[tokio::test(start_paused = true)]
    async fn rules_read_the_published_values() {
        let none = Targets::default();
        let mut p = Publisher::new(Deadband {
            relative: 0.05,
            absolute: 0.0,
            refresh: Duration::from_secs(60),
        });
        let t0 = Instant::now();
        p.select(&[s("node_load1", 7.8), s("node_b", 1.0)], t0, &none);
        p.select(&[s("node_load1", 8.1), s("node_b", 1.0)], t0, &none);
        assert_eq!(p.published().reading("node_load1"), Reading::Fresh(7.8));
        assert_eq!(p.published().reading("load1"), Reading::Fresh(7.8));
        p.select(&[s("node_b", 1.0)], t0, &none);
        assert_eq!(p.published().reading("load1"), Reading::Missing);
    }

    /// The deadband never hides a move across a rule's target: what gossip carries decides
    /// every rule as this agent's own reading does (module docs).
    #[tokio::test(start_paused = true)]
    async fn a_move_across_a_target_goes_out_however_small() {
        let policy = telemesh_core::testing::tas_policy(
            "default",
            "p",
            "    dontschedule:\n      rules:\n      \
             - {metricname: load1, operator: GreaterThan, target: 8}\n",
        );
        let policy = telemesh_core::policy::Policy::compile(&policy);
        let targets = Targets::from_rules(policy.threshold_rules());
        let mut p = Publisher::new(Deadband {
            relative: 0.05,
            absolute: 0.0,
            refresh: Duration::from_secs(60),
        });
        let t0 = Instant::now();
        let mut published = Vec::new();
        for load in [7.9, 7.95, 8.05, 8.1, 8.0, 7.99] {
            let sel = p.select(&[s("node_load1", load)], t0, &targets);
            if !sel.publish.is_empty() {
                published.push(load);
            }
            let held = p.published().reading("load1").fresh().unwrap();
            assert_eq!(
                held.partial_cmp(&8.0),
                load.partial_cmp(&8.0),
                "{load} published as {held}"
            );
        }
        // 7.95 and 8.1 are within 5 % of the value before them and on its side of 8.
        assert_eq!(published, [7.9, 8.05, 8.0, 7.99]);
    }

    #[tokio::test(start_paused = true)]
    async fn non_finite_values_are_never_published() {
        let none = Targets::default();
        let mut p = Publisher::new(Deadband::default());
        assert!(
            p.select(
                &[s("node_a", f64::NAN), s("node_b", f64::INFINITY)],
                Instant::now(),
                &none
            )
            .publish
            .is_empty()
        );
    }
}
