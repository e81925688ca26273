//! What the policies make of one node, which the live page shows as the node's colour: refused
//! (a `dontschedule` strategy filters it out, as the extender's [`filter::filter`] decides),
//! violating (a `deschedule` strategy is violated: agents label it `<policy>=violating` and
//! evict), labelled (a `labeling` strategy is violated: its labels go on the node), fine, or
//! stale (nothing it gossips can be trusted now, [`NodeEntry::fresh`]). Pure: the snapshot, the
//! policies, the extender's settings and the clock in, a [`Judgement`] out.
//!
//! The coordinator judges the node itself, with the readings and settings its extender uses
//! (`--stale-after`, `--unknown`), rather than repeating what agents gossip (`v:` keys, the
//! page's violations table): the colour says what the extender does with the node right now,
//! and what the agents' evaluation of the same rules does once it has run.

use std::borrow::Cow;

use serde::Serialize;
use telemesh_core::gossip::Liveness;
use telemesh_core::policy::{Policy, StrategyKind};

use crate::extender::Settings;
use crate::extender::filter;
use crate::extender::parse::{Candidates, NodeName};
use crate::view::{NodeEntry, Snapshot};

/// A node's state on the page, the most severe that applies first: [`PolicyState::Stale`]
/// overrides the rest, then refused, violating, labelled, fine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PolicyState {
    /// The node's agent is not live, or its newest metric is older than `--stale-after`.
    Stale,
    /// A policy's `dontschedule` filters the node out for that policy's pods.
    Refused,
    /// A policy's `deschedule` is violated: the node carries `<policy>=violating` and loses
    /// that policy's pods.
    Violating,
    /// A policy's `labeling` is violated: its labels go on the node.
    Labelled,
    /// No policy objects to the node.
    Fine,
}

/// The state and the reasons behind it: every strategy that applies, most severe first, each
/// as the extender or the agents word it (`policy ns/p dontschedule: node_metric LessThan 10
/// (value 5)`), after the staleness when the node is stale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judgement {
    /// What colours the node.
    pub state: PolicyState,
    /// Why.
    pub reasons: Vec<String>,
}

/// Judges `entry` (a node of `snapshot`) against every policy at `now_ms`: whether the
/// extender's filter refuses it ([`filter::filter`], the function that answers kube-scheduler),
/// and whether its `deschedule` and `labeling` strategies are violated, each evaluated on the
/// readings the filter reads (metrics older than `settings.stale_after` count as
/// `settings.unknown` says).
pub fn judge(
    snapshot: &Snapshot,
    entry: &NodeEntry,
    policies: &[&Policy],
    settings: &Settings,
    now_ms: u64,
) -> Judgement {
    let readings = snapshot.readings(&entry.name, now_ms, settings.stale_after);
    let candidates = Candidates::Names(vec![NodeName::Decoded(Cow::Borrowed(&entry.name))]);
    let (mut refused, mut violating, mut labelled) = (Vec::new(), Vec::new(), Vec::new());
    for policy in policies {
        if let Some(rules) = &policy.dont_schedule {
            let decision = filter::filter(snapshot, policy, rules, &candidates, settings, now_ms);
            refused.extend(decision.failed.into_iter().map(|(_, reason)| reason));
        }
        if let Some(rules) = &policy.deschedule {
            let verdict = rules.evaluate(&readings, settings.unknown);
            if verdict.violated {
                violating.push(verdict.reason(&policy.key(), StrategyKind::Deschedule.as_str()));
            }
        }
        if let Some(labeling) = &policy.labeling {
            let (_, verdict) = labeling.labels(&policy.name, &readings, settings.unknown);
            if verdict.violated {
                labelled.push(verdict.reason(&policy.key(), StrategyKind::Labeling.as_str()));
            }
        }
    }
    let fresh = entry.fresh(now_ms, settings.stale_after);
    let state = state_of(
        fresh,
        !refused.is_empty(),
        !violating.is_empty(),
        !labelled.is_empty(),
    );
    let mut reasons = Vec::with_capacity(1 + refused.len() + violating.len() + labelled.len());
    if !fresh {
        reasons.push(staleness(entry, settings, now_ms));
    }
    reasons.extend(refused);
    reasons.extend(violating);
    reasons.extend(labelled);
    Judgement { state, reasons }
}

/// The precedence: stale over refused over violating over labelled over fine.
fn state_of(fresh: bool, refused: bool, violating: bool, labelled: bool) -> PolicyState {
    if !fresh {
        PolicyState::Stale
    } else if refused {
        PolicyState::Refused
    } else if violating {
        PolicyState::Violating
    } else if labelled {
        PolicyState::Labelled
    } else {
        PolicyState::Fine
    }
}

/// Why a node that is not [`NodeEntry::fresh`] is stale.
fn staleness(entry: &NodeEntry, settings: &Settings, now_ms: u64) -> String {
    let limit = settings.stale_after.as_secs_f64();
    match (entry.liveness, entry.newest_ms()) {
        (Liveness::Dead, _) => "stale: the node's agent is dead to gossip".to_owned(),
        (Liveness::Left, _) => "stale: the node's agent left gossip".to_owned(),
        (Liveness::Live, 0) => "stale: the node's agent publishes no metric".to_owned(),
        (Liveness::Live, newest) => format!(
            "stale: the newest metric is {:.0} s old (stale after {limit:.0} s)",
            now_ms.saturating_sub(newest) as f64 / 1000.0
        ),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Duration;

    use telemesh_core::gossip::NodeState;
    use telemesh_core::policy::{TASPolicy, Unknown};

    use super::*;

    const NOW_MS: u64 = 1_000_000_000;

    /// TAS's example policy, as deploy/examples/scheduling-policy.yaml has it.
    fn example() -> Policy {
        let raw: TASPolicy = serde_yaml_ng::from_str(include_str!(
            "../../../deploy/examples/scheduling-policy.yaml"
        ))
        .unwrap();
        Policy::compile(&raw)
    }

    /// `yaml`'s strategies in a policy `ns/p`.
    fn policy(strategies: &str) -> Policy {
        Policy::compile(&telemesh_core::testing::tas_policy("ns", "p", strategies))
    }

    fn node(liveness: Liveness, metrics: &[(&str, f64, u64)]) -> NodeEntry {
        let values: Vec<(String, String)> = metrics
            .iter()
            .map(|(m, v, age_ms)| (format!("m:{m}"), format!("{v}@{}", NOW_MS - age_ms)))
            .collect();
        let state = NodeState::from_key_values(
            [("role", "agent")]
                .into_iter()
                .chain(values.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
        );
        NodeEntry::new("n", 1, liveness, state)
    }

    fn judged(entry: NodeEntry, policies: &[Policy], settings: Settings) -> Judgement {
        let snapshot = Snapshot::from_entries([entry]);
        let entry = snapshot.node("n").unwrap().clone();
        let policies: Vec<&Policy> = policies.iter().collect();
        judge(&snapshot, &entry, &policies, &settings, NOW_MS)
    }

    fn metric(value: f64) -> NodeEntry {
        node(Liveness::Live, &[("node_metric", value, 1_000)])
    }

    #[test]
    fn a_node_under_a_dontschedule_less_than_target_is_refused_however_low_its_value() {
        let j = judged(metric(5.0), &[example()], Settings::default());
        assert_eq!(j.state, PolicyState::Refused);
        assert_eq!(
            j.reasons,
            [
                "policy health-metric-demo/scheduling-policy dontschedule: node_metric LessThan 10 (value 5)"
            ]
        );
    }

    #[test]
    fn the_extenders_reason_is_the_one_shown() {
        let snapshot = Snapshot::from_entries([metric(5.0)]);
        let policy = example();
        let rules = policy.dont_schedule.as_ref().unwrap();
        let candidates = Candidates::Names(vec![NodeName::Decoded(Cow::Borrowed("n"))]);
        let settings = Settings::default();
        let decision = filter::filter(&snapshot, &policy, rules, &candidates, &settings, NOW_MS);
        let entry = snapshot.node("n").unwrap();
        let j = judge(&snapshot, entry, &[&policy], &settings, NOW_MS);
        assert_eq!(j.reasons, [decision.failed[0].1.clone()]);
    }

    #[test]
    fn a_high_value_no_rule_objects_to_is_fine() {
        let only_dontschedule = policy(
            "    dontschedule:\n      rules: [{ metricname: node_metric, operator: LessThan, target: 10 }]\n",
        );
        let j = judged(metric(150.0), &[only_dontschedule], Settings::default());
        assert_eq!(j.state, PolicyState::Fine);
        assert!(j.reasons.is_empty(), "{j:?}");
        let j = judged(metric(50.0), &[example()], Settings::default());
        assert_eq!(j.state, PolicyState::Fine);
    }

    #[test]
    fn a_node_past_a_labeling_rule_is_labelled() {
        let j = judged(metric(150.0), &[example()], Settings::default());
        assert_eq!(j.state, PolicyState::Labelled);
        assert_eq!(
            j.reasons,
            [
                "policy health-metric-demo/scheduling-policy labeling: node_metric GreaterThan 100 (value 150)"
            ]
        );
    }

    #[test]
    fn a_node_violating_deschedule_only_is_violating() {
        let hot = policy(
            "    deschedule:\n      rules: [{ metricname: temp, operator: GreaterThan, target: 80 }]\n    \
             labeling:\n      rules: [{ metricname: temp, operator: GreaterThan, target: 70, labels: [\"zone=warm\"] }]\n",
        );
        let j = judged(
            node(Liveness::Live, &[("node_temp", 90.0, 1_000)]),
            &[hot],
            Settings::default(),
        );
        assert_eq!(j.state, PolicyState::Violating);
        assert_eq!(
            j.reasons,
            [
                "policy ns/p deschedule: temp GreaterThan 80 (value 90)",
                "policy ns/p labeling: temp GreaterThan 70 (value 90)",
            ],
            "the labelling is listed too, after the more severe state"
        );
    }

    #[test]
    fn refused_wins_over_violating() {
        // -1 breaks the example's deschedule (Equals -1) and its dontschedule (LessThan 10).
        let j = judged(metric(-1.0), &[example()], Settings::default());
        assert_eq!(j.state, PolicyState::Refused);
        assert_eq!(j.reasons.len(), 2, "{j:?}");
        assert!(j.reasons[0].contains("dontschedule"), "{j:?}");
        assert!(j.reasons[1].contains("deschedule"), "{j:?}");
    }

    #[test]
    fn stale_overrides_every_other_state() {
        let old = node(Liveness::Live, &[("node_metric", 5.0, 60_000)]);
        let settings = Settings {
            unknown: Unknown::Violating,
            ..Settings::default()
        };
        let j = judged(old, &[example()], settings);
        assert_eq!(j.state, PolicyState::Stale);
        assert_eq!(
            j.reasons[0],
            "stale: the newest metric is 60 s old (stale after 45 s)"
        );
        assert!(
            j.reasons[1].contains("(value stale 5)"),
            "the filter still refuses it, as --unknown violating says: {j:?}"
        );

        let dead = node(Liveness::Dead, &[("node_metric", 5.0, 1_000)]);
        let j = judged(dead, &[example()], Settings::default());
        assert_eq!(j.state, PolicyState::Stale);
        assert_eq!(j.reasons[0], "stale: the node's agent is dead to gossip");

        let silent = node(Liveness::Live, &[]);
        let j = judged(silent, &[example()], Settings::default());
        assert_eq!(j.state, PolicyState::Stale);
        assert_eq!(j.reasons, ["stale: the node's agent publishes no metric"]);
    }

    #[test]
    fn a_stale_metric_counts_as_unknown_says() {
        // Fresh node (another metric is new), its node_metric stale.
        let entry = || {
            node(
                Liveness::Live,
                &[("node_metric", 5.0, 60_000), ("node_other", 1.0, 1_000)],
            )
        };
        let j = judged(entry(), &[example()], Settings::default());
        assert_eq!(j.state, PolicyState::Fine, "not violating by default");
        let violating = Settings {
            unknown: Unknown::Violating,
            stale_after: Duration::from_secs(45),
            ..Settings::default()
        };
        let j = judged(entry(), &[example()], violating);
        assert_eq!(j.state, PolicyState::Refused, "{j:?}");
    }

    #[test]
    fn precedence_is_stale_refused_violating_labelled_fine() {
        use PolicyState::*;
        for refused in [false, true] {
            for violating in [false, true] {
                for labelled in [false, true] {
                    assert_eq!(state_of(false, refused, violating, labelled), Stale);
                    let expected = if refused {
                        Refused
                    } else if violating {
                        Violating
                    } else if labelled {
                        Labelled
                    } else {
                        Fine
                    };
                    assert_eq!(state_of(true, refused, violating, labelled), expected);
                }
            }
        }
    }

    #[test]
    fn states_serialize_as_the_page_reads_them() {
        let names: Vec<String> = [
            PolicyState::Stale,
            PolicyState::Refused,
            PolicyState::Violating,
            PolicyState::Labelled,
            PolicyState::Fine,
        ]
        .iter()
        .map(|s| {
            serde_json::to_value(s)
                .unwrap()
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
        assert_eq!(names, ["stale", "refused", "violating", "labelled", "fine"]);
    }
}
