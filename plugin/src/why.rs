//! `why POD`: what touched a pod's placement, gathered from what the cluster recorded: the
//! TAS policy the pod links to with each rule against its node's live figures, the labels
//! policies put on the node and the violations it gossips, the learned reward of the pod's type
//! there, the WorkloadActions naming the pod, and the Events about it and those actions (the
//! scheduler's `Scheduled`/`FailedScheduling` with the extender's reasons, an agent's `Evicted`
//! with the policy rule, an action's end). Pure: the plumbing fetches, this decides and words.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt as _;
use serde::Serialize;
use serde_json::Value;
use telemesh_core::action::WorkloadAction;
use telemesh_core::policy::eval::evaluate_rule;
use telemesh_core::policy::{
    LABELING_PREFIX, Metrics, Policy, Reading, RuleOutcome, TASPolicy, Unknown, VIOLATING,
};

use crate::table::{self, NONE, Table, UNKNOWN};

/// What was fetched about the pod.
#[derive(Debug, Clone, Copy)]
pub struct Evidence<'a> {
    /// The pod's namespace.
    pub namespace: &'a str,
    /// The pod's name.
    pub name: &'a str,
    /// The pod, unless it is gone (a moved pod's old self).
    pub pod: Option<&'a Pod>,
    /// Events of the namespace (events.k8s.io/v1).
    pub events: &'a [Event],
    /// WorkloadActions of the namespace.
    pub actions: &'a [WorkloadAction],
    /// The pod's node.
    pub node: Option<&'a Node>,
    /// `GET /api/v1/nodes`, when the coordinator answered.
    pub view: Option<&'a Value>,
    /// The TASPolicy the pod links to (`telemetry-policy` label), when it exists.
    pub policy: Option<&'a TASPolicy>,
    /// `GET /api/v1/rewards?podType=<the pod's type>`, when the coordinator answered.
    pub rewards: Option<&'a Value>,
}

/// The answer, for people (rendered) and for `-o json|yaml`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// `namespace/name`.
    pub pod: String,
    /// Whether the pod still exists.
    pub exists: bool,
    /// Its node.
    pub node: Option<String>,
    /// Its phase.
    pub phase: Option<String>,
    /// Its reward type (`namespace/type`).
    pub pod_type: Option<String>,
    /// The TAS policy it links to.
    pub policy: Option<PolicyReport>,
    /// Its node as policies and the view see it.
    pub node_state: Option<NodeReport>,
    /// The reward of its type on its node.
    pub reward: Option<RewardReport>,
    /// WorkloadActions naming the pod, in arrival order.
    pub actions: Vec<ActionReport>,
    /// Events about the pod and those actions, oldest first.
    pub events: Vec<EventReport>,
}

/// The pod's policy and each rule on its node now, evaluated as the extender and the agents
/// evaluate them (core's compiled [`Policy`]; a stale or missing figure counts as not violating,
/// the coordinators' and agents' default).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyReport {
    /// The policy's name (the label's value).
    pub name: String,
    /// Whether the TASPolicy exists in the namespace.
    pub found: bool,
    /// Its rules on the pod's node.
    pub rules: Vec<RuleReport>,
    /// Whether its `dontschedule` is violated on the pod's node (the extender filters the node
    /// out for the pod's next placement).
    pub dontschedule_violated: bool,
    /// Whether its `deschedule` is violated on the pod's node (the agent labels the node
    /// `<policy>=violating` and evicts linked pods).
    pub deschedule_violated: bool,
    /// The nodes its `dontschedule` filters out now, with the extender's reason.
    pub filtered_nodes: Vec<FilteredNode>,
    /// What of the policy is not enforced, and why.
    pub problems: Vec<String>,
}

/// One rule against the node's current figure.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleReport {
    /// `dontschedule`, `deschedule`, `scheduleonmetric`, `labeling`.
    pub strategy: String,
    /// The rule (`node_metric LessThan 10`; scheduleonmetric's has no target).
    pub rule: String,
    /// The node's figure: `50`, `stale 50` or `missing`.
    pub value: String,
    /// Whether the rule is violated on the node; `None` for scheduleonmetric (it ranks nodes).
    pub violated: Option<bool>,
}

/// A node the pod's policy filters out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FilteredNode {
    /// The node.
    pub node: String,
    /// The extender's reason.
    pub reason: String,
}

/// A node's figures in the view (`GET /api/v1/nodes`), as policy rules read them: by the name
/// a policy uses, with or without `node_`; older than the coordinator's `--stale-after`, stale.
struct ViewMetrics<'a>(Option<&'a Value>);

impl Metrics for ViewMetrics<'_> {
    fn reading(&self, metric: &str) -> Reading {
        let Some(metrics) = self.0.and_then(|n| n["metrics"].as_object()) else {
            return Reading::Missing;
        };
        let found = metrics
            .iter()
            .find(|(k, _)| *k == metric || k.strip_prefix("node_") == Some(metric));
        match found.and_then(|(_, m)| Some((m["value"].as_f64()?, m["stale"] == true))) {
            None => Reading::Missing,
            Some((v, true)) => Reading::Stale(v),
            Some((v, false)) => Reading::Fresh(v),
        }
    }
}

fn reading_text(r: Reading) -> String {
    let mut out = String::new();
    r.write_value(&mut out);
    out
}

/// The policy's rules on the node `view_node` and what its `dontschedule` filters in `view`.
fn policy_report(
    name: String,
    policy: &TASPolicy,
    view_node: Option<&Value>,
    view: Option<&Value>,
) -> PolicyReport {
    let compiled = Policy::compile(policy);
    let metrics = ViewMetrics(view_node);
    let unknown = Unknown::default();
    let mut rules = Vec::new();
    let mut push = |strategy: &str, o: RuleOutcome, ranks: bool| {
        rules.push(RuleReport {
            strategy: strategy.to_owned(),
            rule: if ranks {
                format!("{} {}", o.rule.metric, o.rule.operator)
            } else {
                o.rule.to_string()
            },
            value: reading_text(o.reading),
            violated: (!ranks).then_some(o.violated),
        });
    };
    if let Some(rule) = &compiled.schedule_on_metric {
        push(
            "scheduleonmetric",
            evaluate_rule(0, rule, &metrics, unknown),
            true,
        );
    }
    let mut verdicts = [false; 2];
    for (i, (strategy, set)) in [
        ("dontschedule", &compiled.dont_schedule),
        ("deschedule", &compiled.deschedule),
    ]
    .into_iter()
    .enumerate()
    {
        if let Some(set) = set {
            let verdict = set.evaluate(&metrics, unknown);
            verdicts[i] = verdict.violated;
            for o in verdict.rules {
                push(strategy, o, false);
            }
        }
    }
    if let Some(labeling) = &compiled.labeling {
        for (i, l) in labeling.rules.iter().enumerate() {
            push(
                "labeling",
                evaluate_rule(i, &l.rule, &metrics, unknown),
                false,
            );
        }
    }
    let filtered_nodes = compiled
        .dont_schedule
        .as_ref()
        .map(|set| {
            view.and_then(|v| v["nodes"].as_array())
                .into_iter()
                .flatten()
                .filter_map(|n| {
                    let verdict = set.evaluate(&ViewMetrics(Some(n)), unknown);
                    verdict.violated.then(|| FilteredNode {
                        node: n["name"].as_str().unwrap_or(UNKNOWN).to_owned(),
                        reason: verdict.reason(&compiled.key(), "dontschedule"),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    PolicyReport {
        name,
        found: true,
        rules,
        dontschedule_violated: verdicts[0],
        deschedule_violated: verdicts[1],
        filtered_nodes,
        problems: compiled.problems.iter().map(ToString::to_string).collect(),
    }
}

/// The pod's node as policies and the view see it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeReport {
    /// The node.
    pub name: String,
    /// Its liveness in the view (`live`, `dead`, `left`), if the view has it.
    pub liveness: Option<String>,
    /// Labels policies put on it (`<policy>=violating`, `telemetry.aware.scheduling.*`).
    pub policy_labels: BTreeMap<String, String>,
    /// Violations it gossips.
    pub violations: BTreeMap<String, Value>,
}

/// The learned reward of the pod's type.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RewardReport {
    /// The type.
    pub pod_type: String,
    /// The extender's reward score for the pod's node (0–10), if it has evidence there.
    pub node_score: Option<u64>,
    /// The best-scored node.
    pub best: Option<NodeScore>,
    /// Nodes with evidence.
    pub nodes: usize,
}

/// A node's reward score.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeScore {
    /// The node.
    pub node: String,
    /// The extender's reward score (0–10).
    pub score: u64,
}

/// An action naming the pod.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionReport {
    /// The action id.
    pub name: String,
    /// Its method.
    pub method: String,
    /// What it did to this pod.
    pub role: String,
    /// Its phase.
    pub phase: String,
    /// The node it places on.
    pub node: Option<String>,
    /// Its message.
    pub message: String,
    /// Who asked.
    pub requester: String,
}

/// An Event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventReport {
    /// When it last happened.
    pub time: Option<Timestamp>,
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Reason.
    pub reason: String,
    /// The reporting controller.
    pub from: String,
    /// `Kind/name` of the object it is about.
    pub object: String,
    /// The note.
    pub message: String,
}

/// What `action` did to pod `namespace/name`, if it names it.
pub fn role(action: &WorkloadAction, namespace: &str, name: &str) -> Option<&'static str> {
    let same = |r: &Value| {
        r["name"] == name && {
            let ns = r["namespace"].as_str().unwrap_or_default();
            (if ns.is_empty() { "default" } else { ns }) == namespace
        }
    };
    let status = action.status.clone().unwrap_or_default();
    let record = |pods: &[telemesh_core::action::crd::PodRecord]| {
        pods.iter()
            .any(|p| p.namespace == namespace && p.name == name)
    };
    if record(&status.pods_created) {
        return Some("created this pod");
    }
    if record(&status.pods_removed) {
        return Some("removed this pod");
    }
    let p = &action.spec.params;
    let named = same(&p["pod"])
        || same(&p["x"])
        || same(&p["y"])
        || (action.namespace().as_deref() == Some(namespace)
            && action.spec.target == format!("Pod/{name}"));
    named.then_some(match action.spec.method.as_str() {
        "Move" => "asked to move this pod",
        "Swap" => "asked to swap this pod",
        "Delete" => "asked to delete this pod",
        "Bind" => "asked to bind this pod",
        "Redeploy" => "asked to redeploy this pod",
        _ => "names this pod",
    })
}

fn event_time(e: &Event) -> Option<Timestamp> {
    e.series
        .as_ref()
        .map(|s| s.last_observed_time.0)
        .or(e.deprecated_last_timestamp.as_ref().map(|t| t.0))
        .or(e.event_time.as_ref().map(|t| t.0))
        .or(e.deprecated_first_timestamp.as_ref().map(|t| t.0))
        .or(e.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// Gathers the report.
pub fn report(e: &Evidence) -> Report {
    let node_name = e
        .pod
        .and_then(|p| p.spec.as_ref()?.node_name.clone())
        .filter(|n| !n.is_empty());
    let view_node = node_name.as_ref().and_then(|n| {
        e.view?["nodes"]
            .as_array()?
            .iter()
            .find(|v| v["name"] == n.as_str())
    });
    let policy = e.pod.and_then(|p| {
        let name = p
            .labels()
            .get(telemesh_core::policy::POLICY_LINK_LABEL)?
            .clone();
        Some(match e.policy.filter(|pol| pol.name_any() == name) {
            Some(policy) => policy_report(name, policy, view_node, e.view),
            None => PolicyReport {
                name,
                found: false,
                rules: Vec::new(),
                dontschedule_violated: false,
                deschedule_violated: false,
                filtered_nodes: Vec::new(),
                problems: Vec::new(),
            },
        })
    });
    let node_state = node_name.as_ref().map(|n| NodeReport {
        name: n.clone(),
        liveness: view_node.and_then(|v| v["liveness"].as_str().map(str::to_owned)),
        policy_labels: e
            .node
            .map(|node| {
                node.labels()
                    .iter()
                    .filter(|(k, v)| *v == VIOLATING || k.starts_with(LABELING_PREFIX))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default(),
        violations: view_node
            .and_then(|v| v["violations"].as_object())
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default(),
    });
    let pod_type = e.pod.map(telemesh_core::reward::pod_type);
    let reward = e.rewards.zip(pod_type.clone()).map(|(body, pod_type)| {
        let nodes: Vec<(String, u64)> = body["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|n| Some((n["node"].as_str()?.to_owned(), n["score"].as_u64()?)))
            .collect();
        RewardReport {
            pod_type,
            node_score: nodes
                .iter()
                .find(|(n, _)| Some(n) == node_name.as_ref())
                .map(|(_, s)| *s),
            // The highest score; among equals the first node by name.
            best: nodes
                .iter()
                .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
                .map(|(node, score)| NodeScore {
                    node: node.clone(),
                    score: *score,
                }),
            nodes: nodes.len(),
        }
    });
    let mut named: Vec<(&WorkloadAction, &'static str)> = e
        .actions
        .iter()
        .filter_map(|a| Some((a, role(a, e.namespace, e.name)?)))
        .collect();
    named.sort_by(|a, b| a.0.spec.received_at.cmp(&b.0.spec.received_at));
    let action_names: Vec<String> = named.iter().map(|(a, _)| a.name_any()).collect();
    let actions = named
        .iter()
        .map(|(a, role)| ActionReport {
            name: a.name_any(),
            method: a.spec.method.clone(),
            role: (*role).to_owned(),
            phase: a.phase().as_str().to_owned(),
            node: a.spec.node.clone(),
            message: a
                .status
                .as_ref()
                .map(|s| s.message.clone())
                .unwrap_or_default(),
            requester: a.spec.requester.username.clone(),
        })
        .collect();
    let mut events: Vec<EventReport> = e
        .events
        .iter()
        .filter(|ev| {
            ev.regarding.as_ref().is_some_and(|r| {
                let name = r.name.as_deref().unwrap_or_default();
                match r.kind.as_deref() {
                    Some("Pod") => name == e.name,
                    Some("WorkloadAction") => action_names.iter().any(|a| a == name),
                    _ => false,
                }
            })
        })
        .map(|ev| {
            let r = ev.regarding.clone().unwrap_or_default();
            EventReport {
                time: event_time(ev),
                type_: ev.type_.clone().unwrap_or_default(),
                reason: ev.reason.clone().unwrap_or_default(),
                from: ev
                    .reporting_controller
                    .clone()
                    .or_else(|| ev.deprecated_source.as_ref()?.component.clone())
                    .unwrap_or_default(),
                object: format!(
                    "{}/{}",
                    r.kind.unwrap_or_default(),
                    r.name.unwrap_or_default()
                ),
                message: ev.note.clone().unwrap_or_default(),
            }
        })
        .collect();
    events.sort_by_key(|ev| ev.time);
    Report {
        pod: format!("{}/{}", e.namespace, e.name),
        exists: e.pod.is_some(),
        node: node_name,
        phase: e
            .pod
            .and_then(|p| p.status.as_ref()?.phase.clone())
            .filter(|p| !p.is_empty()),
        pod_type,
        policy,
        node_state,
        reward,
        actions,
        events,
    }
}

fn rule_effect(r: &RuleReport) -> &'static str {
    match r.violated {
        None => "ranks nodes by it",
        Some(true) => "violated",
        Some(false) => "not violated",
    }
}

/// The report as text, section by section.
pub fn render(r: &Report, now: Timestamp) -> String {
    let mut out = String::new();
    let on = r.node.as_deref().unwrap_or("no node");
    if r.exists {
        out += &format!(
            "Pod {} on {on}, {}; type {}\n",
            r.pod,
            r.phase.as_deref().unwrap_or(UNKNOWN),
            r.pod_type.as_deref().unwrap_or(UNKNOWN)
        );
    } else {
        out += &format!(
            "Pod {} is gone; what the cluster recorded about it:\n",
            r.pod
        );
    }
    match &r.policy {
        None if r.exists => out += "\nPolicy: none (no telemetry-policy label)\n",
        None => {}
        Some(p) if !p.found => {
            out += &format!("\nPolicy {}: no such TASPolicy in the namespace\n", p.name);
        }
        Some(p) => {
            out += &format!("\nPolicy {} on {on}:\n", p.name);
            let mut t = Table::new(&["strategy", "rule", "value", "effect"]);
            for rule in &p.rules {
                t.push(vec![
                    rule.strategy.clone(),
                    rule.rule.clone(),
                    rule.value.clone(),
                    rule_effect(rule).to_owned(),
                ]);
            }
            out += &t.render();
            if p.dontschedule_violated {
                out += &format!(
                    "  dontschedule is violated: the extender filters {on} out for this pod\n"
                );
            }
            if p.deschedule_violated {
                out += &format!(
                    "  deschedule is violated: the agent labels {on} {}=violating and evicts the pod\n",
                    p.name
                );
            }
            if p.filtered_nodes.is_empty() {
                out += "  dontschedule filters out no node now\n";
            } else {
                for f in &p.filtered_nodes {
                    out += &format!("  filtered out now: {}: {}\n", f.node, f.reason);
                }
            }
            for problem in &p.problems {
                out += &format!("  not enforced: {problem}\n");
            }
        }
    }
    if let Some(n) = &r.node_state {
        out += &format!(
            "\nNode {} ({} in the view):\n",
            n.name,
            n.liveness.as_deref().unwrap_or("not")
        );
        let join = |m: &BTreeMap<String, String>| {
            if m.is_empty() {
                NONE.to_owned()
            } else {
                m.iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        };
        out += &format!("  labels from policies: {}\n", join(&n.policy_labels));
        let violations: BTreeMap<String, String> = n
            .violations
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v.as_str().map_or_else(|| v.to_string(), str::to_owned),
                )
            })
            .collect();
        out += &format!("  violations: {}\n", join(&violations));
    }
    if let Some(w) = &r.reward {
        let score = w
            .node_score
            .map_or_else(|| "no evidence".to_owned(), |s| format!("{s}/10"));
        let best = w
            .best
            .as_ref()
            .map_or_else(String::new, |b| format!("; best {} {}/10", b.node, b.score));
        out += &format!(
            "\nReward of {} on {on}: {score}{best} ({} nodes with evidence)\n",
            w.pod_type, w.nodes
        );
    }
    out += "\nWorkloadActions naming the pod:";
    if r.actions.is_empty() {
        out += " none\n";
    } else {
        out += "\n";
        let mut t = Table::new(&[
            "name",
            "method",
            "phase",
            "node",
            "requester",
            "role",
            "message",
        ]);
        for a in &r.actions {
            t.push(vec![
                a.name.clone(),
                a.method.clone(),
                a.phase.clone(),
                a.node.clone().unwrap_or_else(|| NONE.to_owned()),
                a.requester.clone(),
                a.role.clone(),
                a.message.clone(),
            ]);
        }
        out += &t.render();
    }
    out += "\nEvents:";
    if r.events.is_empty() {
        out += " none\n";
    } else {
        out += "\n";
        let mut t = Table::new(&["age", "type", "reason", "from", "object", "message"]);
        for ev in &r.events {
            t.push(vec![
                table::age_since(ev.time, now),
                ev.type_.clone(),
                ev.reason.clone(),
                ev.from.clone(),
                ev.object.clone(),
                ev.message.clone(),
            ]);
        }
        out += &t.render();
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;
    use crate::actions::tests::action;

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "web-2", "namespace": "ul", "labels": {"app": "web", "telemetry-policy": "health"}},
            "spec": {"nodeName": "n3", "containers": []},
            "status": {"phase": "Running"},
        }))
        .unwrap()
    }

    fn event(kind: &str, name: &str, reason: &str, at: &str, note: &str) -> Event {
        serde_json::from_value(json!({
            "metadata": {"name": format!("{name}.{reason}"), "namespace": "ul"},
            "eventTime": at, "type": "Normal", "reason": reason, "note": note,
            "reportingController": "telemesh.io/test", "reportingInstance": "x", "action": "x",
            "regarding": {"kind": kind, "name": name, "namespace": "ul"},
        }))
        .unwrap()
    }

    fn policy() -> TASPolicy {
        serde_json::from_value(json!({
            "apiVersion": "telemetry.intel.com/v1alpha1", "kind": "TASPolicy",
            "metadata": {"name": "health", "namespace": "ul"},
            "spec": {"strategies": {
                "dontschedule": {"rules": [{"metricname": "health_metric", "operator": "LessThan", "target": 10}]},
                "scheduleonmetric": {"rules": [{"metricname": "health_metric", "operator": "GreaterThan"}]},
            }},
        }))
        .unwrap()
    }

    #[test]
    fn an_action_names_a_pod_it_acted_on_created_or_removed() {
        let moved = action(
            "wa-1",
            "Move",
            "t1",
            json!({"phase": "Succeeded",
            "podsCreated": [{"namespace": "ul", "name": "web-2", "node": "n3"}],
            "podsRemoved": [{"namespace": "ul", "name": "web-1"}]}),
        );
        assert_eq!(role(&moved, "ul", "web-2"), Some("created this pod"));
        assert_eq!(role(&moved, "ul", "web-1"), Some("removed this pod"));
        assert_eq!(role(&moved, "other", "web-1"), None);
        let pending = action("wa-2", "Move", "t2", json!(null));
        assert_eq!(
            role(&pending, "ul", "web-1"),
            Some("asked to move this pod")
        );
        assert_eq!(role(&pending, "ul", "web-9"), None);
    }

    #[test]
    fn the_report_ties_policy_node_reward_actions_and_events_together() {
        let pod = pod();
        let node: Node = serde_json::from_value(json!({"metadata": {"name": "n3", "labels": {
            "health": "violating", "kubernetes.io/hostname": "n3",
            "telemetry.aware.scheduling.health/x": "1"}}}))
        .unwrap();
        let view = json!({"nodes": [{"name": "n3", "liveness": "live",
            "metrics": {"node_health_metric": {"value": 5.0, "stale": false}}, "violations": {}}]});
        let rewards = json!({"podType": "ul/web", "nodes": [{"node": "n1", "score": 9}, {"node": "n3", "score": 4}, {"node": "n0", "score": 9}]});
        let actions = [
            action(
                "wa-1",
                "Move",
                "2026-11-25T01:00:00.000000Z",
                json!({"phase": "Succeeded", "message": "moved",
                "podsCreated": [{"namespace": "ul", "name": "web-2", "node": "n3"}]}),
            ),
            action("wa-0", "Scale", "2026-11-25T00:59:00.000000Z", json!(null)),
        ];
        let events = [
            event(
                "Pod",
                "web-2",
                "Scheduled",
                "2026-11-25T01:00:02.000000Z",
                "Successfully assigned ul/web-2 to n3",
            ),
            event(
                "WorkloadAction",
                "wa-1",
                "Succeeded",
                "2026-11-25T01:00:05.000000Z",
                "Move wa-1: moved",
            ),
            event(
                "Pod",
                "other",
                "Scheduled",
                "2026-11-25T01:00:01.000000Z",
                "x",
            ),
        ];
        let policy = policy();
        let now: Timestamp = "2026-11-25T01:01:00Z".parse().unwrap();
        let r = report(&Evidence {
            namespace: "ul",
            name: "web-2",
            pod: Some(&pod),
            events: &events,
            actions: &actions,
            node: Some(&node),
            view: Some(&view),
            policy: Some(&policy),
            rewards: Some(&rewards),
        });
        assert_eq!(r.node.as_deref(), Some("n3"));
        assert_eq!(r.pod_type.as_deref(), Some("ul/web"));
        let p = r.policy.as_ref().unwrap();
        assert!(p.found);
        let dont = p
            .rules
            .iter()
            .find(|x| x.strategy == "dontschedule")
            .unwrap();
        assert_eq!(
            (dont.rule.as_str(), dont.value.as_str(), dont.violated),
            ("health_metric LessThan 10", "5", Some(true))
        );
        assert!(p.dontschedule_violated && !p.deschedule_violated);
        assert_eq!(
            p.filtered_nodes,
            [FilteredNode {
                node: "n3".into(),
                reason: "policy ul/health dontschedule: health_metric LessThan 10 (value 5)".into()
            }]
        );
        let som = p
            .rules
            .iter()
            .find(|x| x.strategy == "scheduleonmetric")
            .unwrap();
        assert_eq!(
            (som.rule.as_str(), som.violated),
            ("health_metric GreaterThan", None)
        );
        let n = r.node_state.as_ref().unwrap();
        assert_eq!(
            n.policy_labels.keys().collect::<Vec<_>>(),
            ["health", "telemetry.aware.scheduling.health/x"]
        );
        let w = r.reward.as_ref().unwrap();
        assert_eq!(
            (w.node_score, w.best.clone(), w.nodes),
            (
                Some(4),
                Some(NodeScore {
                    node: "n0".into(),
                    score: 9
                }),
                3
            )
        );
        assert_eq!(r.actions.len(), 1);
        assert_eq!(r.actions[0].role, "created this pod");
        assert_eq!(
            r.events
                .iter()
                .map(|e| e.reason.as_str())
                .collect::<Vec<_>>(),
            ["Scheduled", "Succeeded"]
        );
        let text = render(&r, now);
        assert!(
            text.contains("dontschedule is violated: the extender filters n3 out for this pod")
                && text.contains("filtered out now: n3: policy ul/health dontschedule"),
            "{text}"
        );
        assert!(text.contains("wa-1"), "{text}");
        assert!(text.contains("health=violating"), "{text}");
        assert!(text.contains("4/10; best n0 9/10"), "{text}");
    }

    #[test]
    fn a_gone_pod_still_shows_the_actions_and_events_naming_it() {
        let actions = [action(
            "wa-1",
            "Move",
            "t",
            json!({"phase": "Succeeded",
            "podsRemoved": [{"namespace": "ul", "name": "web-1"}]}),
        )];
        let events = [event(
            "Pod",
            "web-1",
            "Scheduled",
            "2026-11-25T01:00:00.000000Z",
            "assigned",
        )];
        let now: Timestamp = "2026-11-25T01:01:00Z".parse().unwrap();
        let r = report(&Evidence {
            namespace: "ul",
            name: "web-1",
            pod: None,
            events: &events,
            actions: &actions,
            node: None,
            view: None,
            policy: None,
            rewards: None,
        });
        assert!(!r.exists);
        assert_eq!(r.actions[0].role, "removed this pod");
        let text = render(&r, now);
        assert!(text.starts_with("Pod ul/web-1 is gone"), "{text}");
        assert!(text.contains("removed this pod"), "{text}");
        assert!(text.contains("60s"), "{text}");
    }
}
