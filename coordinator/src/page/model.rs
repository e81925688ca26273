//! What the live page shows, as one JSON document built from a view snapshot and the policy set:
//! the nodes as `GET /api/v1/nodes` lists them plus the labels each violation puts on the node
//! and what the policies make of the node ([`state::judge`]: `state`, `stateReasons`), which
//! end of each metric's scale the rules make worse ([`scale::scale`]: `scales`), the reward
//! table per pod type as `GET /api/v1/rewards` lists it, the extender's recent decisions and the
//! action queue. Pure: the feed and the SSE handler call it.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use telemesh_core::policy::{Metrics, Unknown, VIOLATING};

use super::{scale, state};
use crate::actions::board::Queue;
use crate::api::{node_json, rewards_json};
use crate::extender::Settings;
use crate::extender::decisions::Decision;
use crate::policies::PolicySet;
use crate::view::{NodeEntry, Snapshot};
use telemesh_core::metric::MetricName;
use telemesh_core::policy::Policy;
use telemesh_core::reward::RewardModel;

/// What the page reads besides the snapshot and the policies.
#[derive(Debug, Clone, Copy)]
pub struct PageSettings {
    /// Age beyond which a metric is stale (the extender's `--stale-after`).
    pub stale_after: Duration,
    /// How the extender scores rewards.
    pub reward_model: RewardModel,
    /// What an unknown metric counts as (the extender's `--unknown`).
    pub unknown: Unknown,
}

// === impl PageSettings ===

impl PageSettings {
    /// The extender's settings as its filter reads them (`stale_after`, `unknown`); the rest,
    /// which the filter does not read, at their defaults.
    fn filter_settings(&self) -> Settings {
        Settings {
            stale_after: self.stale_after,
            unknown: self.unknown,
            ..Settings::default()
        }
    }
}

/// The labels a violation of `policy_key` (`namespace/name`) with the gossiped `strategies`
/// (`deschedule,labeling`, as agents publish them) puts on the node: deschedule's
/// `<policy>=violating`, and the labeling strategy's labels evaluated on `readings` with the
/// agents' own code. A policy this replica has not seen (yet) shows deschedule's label only.
pub fn violation_labels(
    policies: &PolicySet,
    policy_key: &str,
    strategies: &str,
    readings: &impl Metrics,
    unknown: Unknown,
) -> BTreeMap<String, String> {
    let (namespace, name) = policy_key.split_once('/').unwrap_or(("", policy_key));
    let mut labels = BTreeMap::new();
    for strategy in strategies.split(',') {
        match strategy {
            // The violator label key is the bare policy name, as the agents write it.
            "deschedule" => {
                labels.insert(name.to_owned(), VIOLATING.to_owned());
            }
            "labeling" => {
                if let Some(labeling) = policies
                    .get(namespace, name)
                    .and_then(|p| p.labeling.as_ref())
                {
                    labels.extend(labeling.labels(name, readings, unknown).0);
                }
            }
            _ => {}
        }
    }
    labels
}

/// One node: [`node_json`] plus `violationLabels` (policy key → labels), `state` and
/// `stateReasons` ([`state::judge`] with `every`, the policies in order).
fn page_node(
    snapshot: &Snapshot,
    e: &NodeEntry,
    policies: &PolicySet,
    every: &[&Policy],
    settings: &PageSettings,
    now_ms: u64,
) -> Value {
    let mut node = node_json(e, now_ms, settings.stale_after);
    let readings = snapshot.readings(&e.name, now_ms, settings.stale_after);
    let labels: BTreeMap<&str, BTreeMap<String, String>> = e
        .state
        .violations
        .iter()
        .map(|(key, strategies)| {
            let labels = violation_labels(policies, key, strategies, &readings, settings.unknown);
            (key.as_str(), labels)
        })
        .collect();
    node["violationLabels"] = json!(labels);
    let judged = state::judge(snapshot, e, every, &settings.filter_settings(), now_ms);
    node["state"] = json!(judged.state);
    node["stateReasons"] = json!(judged.reasons);
    node
}

/// Each metric some node gossips whose scale a rule points ([`scale::scale`]), by name.
fn scales_json(snapshot: &Snapshot, every: &[&Policy]) -> Value {
    let metrics: std::collections::BTreeSet<&MetricName> = snapshot
        .nodes()
        .flat_map(|e| e.state.metrics.keys())
        .collect();
    let scales: serde_json::Map<String, Value> = metrics
        .into_iter()
        .filter_map(|m| Some((m.to_string(), json!(scale::scale(m, every)?))))
        .collect();
    Value::Object(scales)
}

/// What the page shows besides the view and the policies.
#[derive(Debug, Clone, Copy)]
pub struct Activity<'a> {
    /// The extender's recent decisions, newest first.
    pub decisions: &'a [Decision],
    /// The action queue.
    pub actions: &'a Queue,
}

/// The page's document at `now_ms`: nodes sorted by name with their states, the metrics'
/// scales, every pod type's rewards, recent decisions and the action queue.
pub fn page_json(
    snapshot: &Snapshot,
    policies: &PolicySet,
    settings: &PageSettings,
    activity: Activity<'_>,
    now_ms: u64,
) -> Value {
    let sorted: BTreeMap<&str, &NodeEntry> = snapshot.nodes().map(|e| (&*e.name, e)).collect();
    let every = policies.sorted();
    let nodes: Vec<Value> = sorted
        .values()
        .map(|e| page_node(snapshot, e, policies, &every, settings, now_ms))
        .collect();
    let rewards = rewards_json(snapshot, &settings.reward_model, None, now_ms);
    json!({
        "atMs": now_ms,
        "synced": snapshot.synced,
        "staleAfterSeconds": settings.stale_after.as_secs_f64(),
        "nodes": nodes,
        "scales": scales_json(snapshot, &every),
        "rewards": rewards["types"],
        "decisions": activity.decisions,
        "actions": activity.actions,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use telemesh_core::gossip::{Liveness, NodeState};
    use telemesh_core::policy::{Policy, TASPolicy};

    use super::*;

    const NOW_MS: u64 = 1_000_000_000;

    fn policy(yaml: &str) -> Policy {
        let raw: TASPolicy = serde_yaml_ng::from_str(yaml).unwrap();
        Policy::compile(&raw)
    }

    fn labeling_policy() -> PolicySet {
        PolicySet::from_policies([policy(
            r#"
apiVersion: telemetry.intel.com/v1alpha1
kind: TASPolicy
metadata: { name: hot, namespace: default }
spec:
  strategies:
    deschedule:
      rules: [{ metricname: node_temp, operator: GreaterThan, target: 80 }]
    labeling:
      rules:
        - { metricname: node_temp, operator: GreaterThan, target: 80, labels: ["zone=warm"] }
        - { metricname: node_temp, operator: GreaterThan, target: 95, labels: ["zone=melting"] }
"#,
        )])
    }

    fn entry(name: &str, kvs: &[(&str, &str)]) -> NodeEntry {
        let state =
            NodeState::from_key_values([("role", "agent")].into_iter().chain(kvs.iter().copied()));
        NodeEntry::new(name, 1, Liveness::Live, state)
    }

    fn no_activity() -> Activity<'static> {
        static QUEUE: std::sync::LazyLock<Queue> = std::sync::LazyLock::new(Queue::default);
        Activity {
            decisions: &[],
            actions: &QUEUE,
        }
    }

    fn settings() -> PageSettings {
        PageSettings {
            stale_after: Duration::from_secs(45),
            reward_model: RewardModel::default(),
            unknown: Unknown::NotViolating,
        }
    }

    #[test]
    fn a_violating_node_shows_the_labels_its_strategies_put_on_it() {
        let temp = format!("90@{}", NOW_MS - 1_000);
        let snapshot = Snapshot::from_entries([
            entry(
                "n1",
                &[
                    ("m:node_temp", temp.as_str()),
                    ("v:default/hot", "deschedule,labeling"),
                ],
            ),
            entry("n0", &[]),
        ]);
        let v = page_json(
            &snapshot,
            &labeling_policy(),
            &settings(),
            no_activity(),
            NOW_MS,
        );
        let nodes = v["nodes"].as_array().unwrap();
        assert_eq!(nodes[0]["name"], "n0", "{v}");
        assert_eq!(nodes[0]["violationLabels"], json!({}));
        let n1 = &nodes[1];
        assert_eq!(n1["violations"]["default/hot"], "deschedule,labeling");
        assert_eq!(
            n1["violationLabels"]["default/hot"],
            json!({ "hot": "violating", "telemetry.aware.scheduling.hot/zone": "warm" }),
            "{n1}"
        );
        assert_eq!(n1["metrics"]["node_temp"]["stale"], false);
    }

    #[test]
    fn every_node_carries_what_the_policies_make_of_it_and_metrics_their_scale() {
        let raw: TASPolicy = serde_yaml_ng::from_str(include_str!(
            "../../../deploy/examples/scheduling-policy.yaml"
        ))
        .unwrap();
        let policies = PolicySet::from_policies([Policy::compile(&raw)]);
        let value = |v: &str| format!("{v}@{}", NOW_MS - 1_000);
        let (low, mid, high) = (value("5"), value("50"), value("150"));
        let snapshot = Snapshot::from_entries([
            entry("refused", &[("m:node_metric", low.as_str())]),
            entry("fine", &[("m:node_metric", mid.as_str())]),
            entry("labelled", &[("m:node_metric", high.as_str())]),
            entry("silent", &[]),
        ]);
        let v = page_json(&snapshot, &policies, &settings(), no_activity(), NOW_MS);
        let states: BTreeMap<&str, &str> = v["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| (n["name"].as_str().unwrap(), n["state"].as_str().unwrap()))
            .collect();
        assert_eq!(
            states,
            BTreeMap::from([
                ("fine", "fine"),
                ("labelled", "labelled"),
                ("refused", "refused"),
                ("silent", "stale"),
            ]),
            "{v}"
        );
        let refused = &v["nodes"][2];
        assert_eq!(
            refused["stateReasons"],
            json!([
                "policy health-metric-demo/scheduling-policy dontschedule: node_metric LessThan 10 (value 5)"
            ])
        );
        assert_eq!(v["scales"]["node_metric"]["worse"], "low", "{v}");
    }

    #[test]
    fn a_policy_this_replica_has_not_seen_still_shows_its_violator_label() {
        let labels = violation_labels(
            &PolicySet::default(),
            "ops/gone",
            "deschedule,labeling",
            &Snapshot::default().readings("n1", NOW_MS, Duration::from_secs(45)),
            Unknown::NotViolating,
        );
        assert_eq!(
            labels,
            BTreeMap::from([("gone".to_owned(), "violating".to_owned())])
        );
    }

    #[test]
    fn rewards_are_listed_per_type() {
        let estimate = format!("3,0@{NOW_MS}");
        let snapshot = Snapshot::from_entries([entry("n1", &[("r:web/api", estimate.as_str())])]);
        let v = page_json(
            &snapshot,
            &PolicySet::default(),
            &settings(),
            no_activity(),
            NOW_MS,
        );
        assert_eq!(v["rewards"]["web/api"][0]["node"], "n1", "{v}");
        assert_eq!(v["rewards"]["web/api"][0]["score"], 10);
    }

    #[test]
    fn decisions_and_actions_are_listed() {
        let decision = Decision {
            at_ms: NOW_MS,
            verb: "filter",
            pod: "default/p".into(),
            summary: "kept 1 of 2 nodes".into(),
            reasons: vec![crate::extender::decisions::NodeReason {
                node: "n2".into(),
                reason: "node_temp 90 > 80".into(),
            }],
        };
        let queue = Queue::default();
        let activity = Activity {
            decisions: std::slice::from_ref(&decision),
            actions: &queue,
        };
        let v = page_json(
            &Snapshot::default(),
            &PolicySet::default(),
            &settings(),
            activity,
            NOW_MS,
        );
        assert_eq!(v["decisions"][0]["reasons"][0]["node"], "n2", "{v}");
        assert_eq!(v["decisions"][0]["atMs"], NOW_MS);
        assert_eq!(v["actions"], json!({ "active": [], "finished": [] }));
    }
}
