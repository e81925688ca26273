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
use telemesh_core::policy::{LABELING_PREFIX, Operator, TASPolicy, VIOLATING};

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
    /// Now.
    pub now: Timestamp,
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

/// The pod's policy and each rule on its node now.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyReport {
    /// The policy's name (the label's value).
    pub name: String,
    /// Whether the TASPolicy exists in the namespace.
    pub found: bool,
    /// Its rules.
    pub rules: Vec<RuleReport>,
}

/// One rule against the node's current figure.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleReport {
    /// `dontschedule`, `deschedule`, `scheduleonmetric`, `labeling`.
    pub strategy: String,
    /// The metric.
    pub metric: String,
    /// The operator.
    pub operator: String,
    /// The target.
    pub target: f64,
    /// The node's value now, if the view has a fresh one.
    pub value: Option<f64>,
    /// Whether the rule holds on the node now (a dontschedule rule that holds filters the node
    /// out, a deschedule one evicts); `None` for scheduleonmetric (it ranks, it does not hold)
    /// or without a value.
    pub holds: Option<bool>,
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

/// The `metric` figure of `node` in the view, by the policy's name for it (with or without
/// `node_`, as the agents answer to both), if fresh.
fn view_value(view_node: Option<&Value>, metric: &str) -> Option<f64> {
    let metrics = &view_node?["metrics"];
    [metric.to_owned(), format!("node_{metric}")]
        .iter()
        .map(|k| &metrics[k])
        .find(|m| m.is_object())
        .filter(|m| m["stale"] != true)
        .and_then(|m| m["value"].as_f64())
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
        let rules = e.policy.filter(|pol| pol.name_any() == name).map(|pol| {
            pol.spec
                .strategies
                .iter()
                .flat_map(|(strategy, s)| s.rules.iter().map(move |r| (strategy, r)))
                .map(|(strategy, r)| {
                    let value = view_value(view_node, &r.metricname);
                    let holds = (strategy != "scheduleonmetric")
                        .then(|| Some(Operator::parse(&r.operator)?.holds(value?, r.target)))
                        .flatten();
                    RuleReport {
                        strategy: strategy.clone(),
                        metric: r.metricname.clone(),
                        operator: r.operator.clone(),
                        target: r.target,
                        value,
                        holds,
                    }
                })
                .collect()
        });
        Some(PolicyReport {
            name,
            found: rules.is_some(),
            rules: rules.unwrap_or_default(),
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
    match (r.strategy.as_str(), r.holds) {
        ("scheduleonmetric", _) => "ranks nodes by it",
        (_, None) => "no figure: unknown",
        ("dontschedule", Some(true)) => "holds: the extender filters the node out",
        ("deschedule", Some(true)) => "holds: the node is labelled violating, the pod evicted",
        ("labeling", Some(true)) => "holds: the node is labelled",
        (_, Some(true)) => "holds",
        (_, Some(false)) => "does not hold",
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
                    // scheduleonmetric orders nodes; its rule has no target.
                    if rule.strategy == "scheduleonmetric" {
                        format!("{} {}", rule.metric, rule.operator)
                    } else {
                        format!("{} {} {}", rule.metric, rule.operator, rule.target)
                    },
                    rule.value.map_or_else(
                        || UNKNOWN.to_owned(),
                        telemesh_core::gossip::schema::format_f64,
                    ),
                    rule_effect(rule).to_owned(),
                ]);
            }
            out += &t.render();
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
            now,
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
        assert_eq!((dont.value, dont.holds), (Some(5.0), Some(true)));
        let som = p
            .rules
            .iter()
            .find(|x| x.strategy == "scheduleonmetric")
            .unwrap();
        assert_eq!(som.holds, None);
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
            text.contains("holds: the extender filters the node out"),
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
            now,
        });
        assert!(!r.exists);
        assert_eq!(r.actions[0].role, "removed this pod");
        let text = render(&r, now);
        assert!(text.starts_with("Pod ul/web-1 is gone"), "{text}");
        assert!(text.contains("removed this pod"), "{text}");
        assert!(text.contains("60s"), "{text}");
    }
}
