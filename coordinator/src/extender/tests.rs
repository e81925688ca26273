use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::{Node, NodeStatus, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use telemesh_core::extender::{
    ExtenderArgs, ExtenderFilterResult, ExtenderPreemptionArgs, ExtenderPreemptionResult,
    HostPriority, MetaPod, MetaVictims, NodeList, Victims,
};
use telemesh_core::gossip::schema::unix_ms;
use telemesh_core::gossip::{Liveness, NodeState};
use telemesh_core::policy::{Policy, RuleSet, TASPolicy, Unknown};

use super::*;
use crate::policies::{PolicyCache, PolicySet};
use crate::view::{NodeEntry, Snapshot};

const SEED_POLICY: &str = include_str!("../../../deploy/examples/scheduling-policy.yaml");

fn seed_policy() -> Policy {
    let p: TASPolicy = serde_yaml_ng::from_str(SEED_POLICY).unwrap();
    Policy::compile(&p)
}

/// A node whose `node_metric` is `value`, measured `age` ago.
fn entry(name: &str, value: Option<f64>, age: Duration) -> NodeEntry {
    let at = unix_ms(SystemTime::now() - age);
    let kvs: Vec<(String, String)> = [("role".to_owned(), "agent".to_owned())]
        .into_iter()
        .chain(value.map(|v| ("m:node_metric".to_owned(), format!("{v}@{at}"))))
        .collect();
    let state = NodeState::from_key_values(kvs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    NodeEntry::new(name, 1, Liveness::Live, state)
}

fn extender(entries: Vec<NodeEntry>) -> Extender {
    Extender::new(
        ClusterView::with_snapshot(Snapshot::from_entries(entries)),
        PolicyCache::with_set(PolicySet::from_policies([seed_policy()])),
        Settings::default(),
    )
}

fn fresh(values: &[(&str, f64)]) -> Extender {
    extender(
        values
            .iter()
            .map(|(n, v)| entry(n, Some(*v), Duration::ZERO))
            .collect(),
    )
}

fn pod(policy: Option<&str>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("demo".into()),
            namespace: Some("health-metric-demo".into()),
            uid: Some("uid-1".into()),
            labels: policy.map(|p| {
                [
                    ("app".to_owned(), "demo".to_owned()),
                    ("telemetry-policy".to_owned(), p.to_owned()),
                ]
                .into()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn node(name: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([("kubernetes.io/hostname".to_owned(), name.to_owned())].into()),
            ..Default::default()
        },
        status: Some(NodeStatus {
            capacity: Some([("cpu".to_owned(), Quantity("4".into()))].into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn names_args(policy: Option<&str>, names: &[&str]) -> Vec<u8> {
    serde_json::to_vec(&ExtenderArgs {
        pod: Some(pod(policy)),
        nodes: None,
        node_names: Some(names.iter().map(|n| (*n).to_owned()).collect()),
    })
    .unwrap()
}

fn full_args(policy: Option<&str>, names: &[&str]) -> Vec<u8> {
    serde_json::to_vec(&ExtenderArgs {
        pod: Some(pod(policy)),
        nodes: Some(NodeList {
            items: names.iter().map(|n| node(n)).collect(),
            metadata: Default::default(),
        }),
        node_names: None,
    })
    .unwrap()
}

fn filter_result(h: &Handled) -> ExtenderFilterResult {
    assert_eq!(
        h.reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&h.reply.body)
    );
    serde_json::from_slice(&h.reply.body).unwrap()
}

fn priorities(h: &Handled) -> Vec<(String, i64)> {
    assert_eq!(h.reply.status, 200);
    let list: Vec<HostPriority> = serde_json::from_slice(&h.reply.body).unwrap();
    list.into_iter().map(|p| (p.host, p.score)).collect()
}

const POLICY: Option<&str> = Some("scheduling-policy");

#[test]
fn filter_removes_violators_with_a_reason_naming_policy_rule_and_value() {
    let ext = fresh(&[("n1", 50.0), ("n2", 5.0), ("n3", 20.0)]);
    let h = ext.filter(&names_args(POLICY, &["n1", "n2", "n3", "unknown"]));
    assert_eq!(h.outcome, Outcome::Evaluated);
    let r = filter_result(&h);
    assert_eq!(
        r.node_names,
        Some(vec!["n1".into(), "n3".into(), "unknown".into()])
    );
    assert_eq!(r.nodes, None);
    assert_eq!(
        r.failed_and_unresolvable_nodes,
        BTreeMap::from([(
            "n2".to_owned(),
            "policy health-metric-demo/scheduling-policy dontschedule: node_metric LessThan 10 (value 5)"
                .to_owned()
        )])
    );
    // A dontschedule refusal is about the node's telemetry: preemption cannot help there.
    assert!(r.failed_nodes.is_empty() && r.error.is_empty());
    assert_eq!((h.passed, h.failed), (3, 1));
}

#[test]
fn a_filter_that_removes_nodes_is_recorded_for_the_page_with_its_reasons() {
    let ext = fresh(&[("n1", 50.0), ("n2", 5.0)]);
    let h = ext.filter(&names_args(POLICY, &["n1", "n2"]));
    assert_eq!((h.passed, h.failed), (1, 1));
    let recent = ext.decisions.recent();
    assert_eq!(recent.len(), 1, "{recent:?}");
    let d = &recent[0];
    assert_eq!(
        (d.verb, d.pod.as_str(), d.summary.as_str()),
        ("filter", "health-metric-demo/demo", "kept 1 of 2 nodes")
    );
    assert_eq!(d.reasons.len(), 1);
    assert_eq!(d.reasons[0].node, "n2");
    assert!(
        d.reasons[0]
            .reason
            .contains("node_metric LessThan 10 (value 5)")
    );
    // Routine filters (nothing removed) are sampled, not all recorded.
    for _ in 0..super::decisions::SAMPLE_EVERY * 2 {
        ext.filter(&names_args(POLICY, &["n1"]));
    }
    assert_eq!(ext.decisions.recent().len(), 1 + 2);
}

#[test]
fn names_come_back_as_sent_whether_or_not_they_were_escaped() {
    // Names written verbatim are copied back; the others (an escaped quote, a \u escape, a
    // control character) go through the encoder. Both verbs, refused nodes' reasons too.
    let names = ["n1", "n\"q", "n\u{e9}", "n\u{1}", "n2"];
    let ext = fresh(&[("n1", 50.0), ("n\"q", 5.0), ("n\u{e9}", 20.0), ("n2", 30.0)]);
    let body = names_args(POLICY, &names);
    let text = String::from_utf8(body.clone()).unwrap();
    assert!(
        text.contains(r#""n\"q""#) && text.contains(r#""n\u0001""#),
        "{text}"
    );
    let r = filter_result(&ext.filter(&body));
    assert_eq!(
        r.node_names,
        Some(vec![
            "n1".into(),
            "n\u{e9}".into(),
            "n\u{1}".into(),
            "n2".into()
        ])
    );
    assert_eq!(
        r.failed_and_unresolvable_nodes.keys().collect::<Vec<_>>(),
        ["n\"q"]
    );
    let hosts: Vec<String> = priorities(&ext.prioritize(&body))
        .into_iter()
        .map(|(host, _)| host)
        .collect();
    assert_eq!(hosts, names);
}

#[test]
fn full_node_requests_round_trip_the_real_types() {
    let ext = fresh(&[("n1", 50.0), ("n2", 5.0)]);
    let h = ext.filter(&full_args(POLICY, &["n1", "n2"]));
    let r = filter_result(&h);
    // The surviving Node comes back as it was sent, and parses into the k8s-openapi type.
    assert_eq!(r.nodes.unwrap().items, vec![node("n1")]);
    assert_eq!(r.node_names, None);
    assert!(r.failed_and_unresolvable_nodes.contains_key("n2"));
    assert!(r.failed_nodes.is_empty());

    let scores = priorities(&ext.prioritize(&full_args(POLICY, &["n1", "n2"])));
    assert_eq!(scores, [("n1".to_owned(), 10), ("n2".to_owned(), 1)]);
}

/// A request as kube-scheduler writes it for TAS (not nodeCacheCapable; Go's field order and
/// `null`s; items without apiVersion/kind), and the exact answer.
#[test]
fn captured_tas_style_request_gets_the_expected_response() {
    let request = r#"{"Pod":{"metadata":{"name":"demo-app-7d9c","namespace":"health-metric-demo","uid":"0c5b","creationTimestamp":null,"labels":{"app":"demo","telemetry-policy":"scheduling-policy"}},"spec":{"containers":[{"name":"nginx","image":"nginx","resources":{"limits":{"telemetry/scheduling":"1"}}}]},"status":{}},"Nodes":{"metadata":{},"items":[{"metadata":{"name":"node-a","uid":"a1","creationTimestamp":null,"labels":{"kubernetes.io/hostname":"node-a"}},"spec":{},"status":{"capacity":{"cpu":"4"}}},{"metadata":{"name":"node-b","uid":"b1","creationTimestamp":null},"spec":{},"status":{}}]},"NodeNames":null}"#;
    let ext = fresh(&[("node-a", 12.0), ("node-b", 3.0)]);
    let h = ext.filter(request.as_bytes());
    let expected = r#"{"Nodes":{"metadata":{},"items":[{"metadata":{"name":"node-a","uid":"a1","creationTimestamp":null,"labels":{"kubernetes.io/hostname":"node-a"}},"spec":{},"status":{"capacity":{"cpu":"4"}}}]},"NodeNames":null,"FailedNodes":{},"FailedAndUnresolvableNodes":{"node-b":"policy health-metric-demo/scheduling-policy dontschedule: node_metric LessThan 10 (value 3)"},"Error":""}"#;
    assert_eq!(String::from_utf8(h.reply.body).unwrap(), expected);

    let h = ext.prioritize(request.as_bytes());
    // Magnitude, not rank: 12 → 10, 3 → 10·3/12 = 2.5 → 3.
    assert_eq!(
        String::from_utf8(h.reply.body).unwrap(),
        r#"[{"Host":"node-a","Score":10},{"Host":"node-b","Score":3}]"#
    );
}

#[test]
fn keys_are_accepted_in_any_case() {
    let ext = fresh(&[("n1", 50.0), ("n2", 5.0)]);
    let body = String::from_utf8(names_args(POLICY, &["n1", "n2"]))
        .unwrap()
        .replace("\"Pod\"", "\"pod\"")
        .replace("\"NodeNames\"", "\"nodenames\"")
        .replace("\"Nodes\"", "\"NODES\"");
    let r = filter_result(&ext.filter(body.as_bytes()));
    assert_eq!(r.node_names, Some(vec!["n1".into()]));
}

#[test]
fn prioritize_scores_by_magnitude_and_unknown_nodes_get_the_neutral_score() {
    let mut ext = extender(vec![
        entry("hi", Some(80.0), Duration::ZERO),
        entry("mid", Some(40.0), Duration::ZERO),
        entry("lo", Some(0.0), Duration::ZERO),
        entry("stale", Some(100.0), Duration::from_secs(3600)),
        entry("silent", None, Duration::ZERO),
    ]);
    let names = ["hi", "mid", "lo", "stale", "silent", "absent"];
    let scores = priorities(&ext.prioritize(&names_args(POLICY, &names)));
    // Known: 10, 5, 0; neutral = mean 5.
    let expect: Vec<(String, i64)> = names
        .iter()
        .zip([10, 5, 0, 5, 5, 5])
        .map(|(n, s)| ((*n).to_owned(), s))
        .collect();
    assert_eq!(scores, expect);
    ext.settings.unknown_score = UnknownScore::Zero;
    let scores = priorities(&ext.prioritize(&names_args(POLICY, &names)));
    assert_eq!(
        scores.iter().map(|(_, s)| *s).collect::<Vec<_>>(),
        [10, 5, 0, 0, 0, 0]
    );
}

#[test]
fn unknown_metrics_follow_the_setting_in_filter() {
    let mut ext = extender(vec![
        entry("stale", Some(1.0), Duration::from_secs(3600)),
        entry("ok", Some(50.0), Duration::ZERO),
    ]);
    let body = names_args(POLICY, &["stale", "ok", "absent"]);
    let r = filter_result(&ext.filter(&body));
    assert_eq!(
        r.node_names.unwrap().len(),
        3,
        "unknown is allowed by default"
    );
    ext.settings.unknown = Unknown::Violating;
    let r = filter_result(&ext.filter(&body));
    assert_eq!(r.node_names, Some(vec!["ok".into()]));
    assert!(
        r.failed_and_unresolvable_nodes["stale"].contains("(value stale 1)"),
        "{:?}",
        r.failed_and_unresolvable_nodes
    );
    assert!(r.failed_and_unresolvable_nodes["absent"].contains("(value missing)"));
}

#[test]
fn pods_without_a_known_policy_pass_through() {
    let ext = fresh(&[("n1", 5.0)]);
    for (policy, outcome) in [
        (None, Outcome::NoPolicy),
        (Some("no-such-policy"), Outcome::PolicyNotFound),
    ] {
        let h = ext.filter(&names_args(policy, &["n1", "n2"]));
        assert_eq!(h.outcome, outcome);
        let r = filter_result(&h);
        assert_eq!(r.node_names, Some(vec!["n1".into(), "n2".into()]));
        assert!(r.failed_and_unresolvable_nodes.is_empty());
        let h = ext.prioritize(&names_args(policy, &["n1"]));
        assert_eq!(h.reply.body, b"[]");
        // Full-node mode echoes every Node.
        let r = filter_result(&ext.filter(&full_args(policy, &["n1", "n2"])));
        assert_eq!(r.nodes.unwrap().items, vec![node("n1"), node("n2")]);
    }
}

#[test]
fn a_policy_without_the_strategy_passes_through() {
    let mut p = seed_policy();
    p.dont_schedule = None;
    p.schedule_on_metric = None;
    let ext = Extender::new(
        ClusterView::with_snapshot(Snapshot::from_entries([entry(
            "n1",
            Some(1.0),
            Duration::ZERO,
        )])),
        PolicyCache::with_set(PolicySet::from_policies([p])),
        Settings::default(),
    );
    let h = ext.filter(&names_args(POLICY, &["n1"]));
    assert_eq!(h.outcome, Outcome::NoStrategy);
    assert_eq!(filter_result(&h).node_names, Some(vec!["n1".into()]));
    assert_eq!(
        ext.prioritize(&names_args(POLICY, &["n1"])).reply.body,
        b"[]"
    );
}

#[test]
fn malformed_bodies_get_a_well_formed_error_and_a_400() {
    let ext = fresh(&[("n1", 5.0)]);
    let mut bodies: Vec<Vec<u8>> = [
        "",
        "null",
        "[]",
        "{",
        "{}",
        "not json",
        r#"{"NodeNames":"n1"}"#,
        r#"{"NodeNames":[1]}"#,
        r#"{"Nodes":{"items":[{"metadata":{}}]}}"#,
        r#"{"Nodes":{"items":[7]}}"#,
        r#"{"Pod":[],"NodeNames":[]}"#,
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    // Truncations of a valid body: never a panic.
    let valid = full_args(POLICY, &["n1", "n2"]);
    bodies.extend((0..valid.len()).step_by(7).map(|n| valid[..n].to_vec()));
    for body in bodies {
        assert_every_verb_answers_json(&ext, &body);
    }
    let r: ExtenderFilterResult = serde_json::from_slice(&ext.filter(b"{}").reply.body).unwrap();
    assert!(r.error.contains("NodeNames"), "{}", r.error);
    assert_eq!(r.nodes, None);
    assert_eq!(r.node_names, None);
}

/// Every verb answers `body` with JSON: a 200, or a 400 saying what is wrong.
fn assert_every_verb_answers_json(ext: &Extender, body: &[u8]) {
    for h in [ext.filter(body), ext.prioritize(body), ext.preempt(body)] {
        let v: serde_json::Value = serde_json::from_slice(&h.reply.body).unwrap();
        if h.reply.status == 200 {
            continue; // a change that kept the body valid
        }
        assert_eq!(h.reply.status, 400);
        assert_eq!(h.outcome, Outcome::Malformed);
        assert!(!v["Error"].as_str().unwrap().is_empty(), "{v}");
    }
}

proptest::proptest! {
    /// A valid body with bytes overwritten: never a panic, always a JSON answer.
    #[test]
    fn damaged_bodies_get_a_json_answer(
        flips in proptest::collection::vec((proptest::prelude::any::<usize>(), proptest::prelude::any::<u8>()), 1..4),
    ) {
        let mut body = full_args(POLICY, &["n1", "n2"]);
        for (at, byte) in flips {
            let i = at % body.len();
            body[i] = byte;
        }
        assert_every_verb_answers_json(&fresh(&[("n1", 5.0)]), &body);
    }
}

#[test]
fn preempt_returns_the_victims_by_uid() {
    let ext = fresh(&[]);
    let full = ExtenderPreemptionArgs {
        pod: Some(pod(POLICY)),
        node_name_to_victims: Some(BTreeMap::from([(
            "n1".to_owned(),
            Victims {
                pods: vec![pod(None)],
                num_pdb_violations: 1,
            },
        )])),
        node_name_to_meta_victims: None,
    };
    let meta = BTreeMap::from([(
        "n1".to_owned(),
        MetaVictims {
            pods: vec![MetaPod {
                uid: "uid-1".into(),
            }],
            num_pdb_violations: 1,
        },
    )]);
    let h = ext.preempt(&serde_json::to_vec(&full).unwrap());
    let r: ExtenderPreemptionResult = serde_json::from_slice(&h.reply.body).unwrap();
    assert_eq!(r.node_name_to_meta_victims.as_ref(), Some(&meta));
    let cached = ExtenderPreemptionArgs {
        node_name_to_victims: None,
        node_name_to_meta_victims: Some(meta.clone()),
        ..full
    };
    let h = ext.preempt(&serde_json::to_vec(&cached).unwrap());
    assert_eq!(
        String::from_utf8(h.reply.body).unwrap(),
        r#"{"NodeNameToMetaVictims":{"n1":{"Pods":[{"UID":"uid-1"}],"NumPDBViolations":1}}}"#
    );
}

#[test]
fn preempt_drops_the_nodes_the_pods_policy_refuses_in_both_modes() {
    let ext = fresh(&[("ok", 50.0), ("hot", 5.0)]);
    let victim = |uid: &str| {
        let mut p = pod(None);
        p.metadata.uid = Some(uid.into());
        p
    };
    let full = ExtenderPreemptionArgs {
        pod: Some(pod(POLICY)),
        node_name_to_victims: Some(BTreeMap::from([
            (
                "ok".to_owned(),
                Victims {
                    pods: vec![victim("v-ok")],
                    num_pdb_violations: 0,
                },
            ),
            (
                "hot".to_owned(),
                Victims {
                    pods: vec![victim("v-hot")],
                    num_pdb_violations: 0,
                },
            ),
        ])),
        node_name_to_meta_victims: None,
    };
    let only_ok = BTreeMap::from([(
        "ok".to_owned(),
        MetaVictims {
            pods: vec![MetaPod { uid: "v-ok".into() }],
            num_pdb_violations: 0,
        },
    )]);
    let h = ext.preempt(&serde_json::to_vec(&full).unwrap());
    assert_eq!(h.outcome, Outcome::Evaluated);
    let r: ExtenderPreemptionResult = serde_json::from_slice(&h.reply.body).unwrap();
    assert_eq!(r.node_name_to_meta_victims.as_ref(), Some(&only_ok));

    let cached = ExtenderPreemptionArgs {
        node_name_to_victims: None,
        node_name_to_meta_victims: Some(
            full.node_name_to_victims
                .as_ref()
                .unwrap()
                .iter()
                .map(|(n, v)| (n.clone(), v.to_meta()))
                .collect(),
        ),
        ..full.clone()
    };
    let r: ExtenderPreemptionResult = serde_json::from_slice(
        &ext.preempt(&serde_json::to_vec(&cached).unwrap())
            .reply
            .body,
    )
    .unwrap();
    assert_eq!(r.node_name_to_meta_victims.as_ref(), Some(&only_ok));

    // A pod without a policy keeps every candidate.
    let unlinked = ExtenderPreemptionArgs {
        pod: Some(pod(None)),
        ..cached
    };
    let h = ext.preempt(&serde_json::to_vec(&unlinked).unwrap());
    assert_eq!(h.outcome, Outcome::NoPolicy);
    let r: ExtenderPreemptionResult = serde_json::from_slice(&h.reply.body).unwrap();
    assert_eq!(r.node_name_to_meta_victims.map(|m| m.len()), Some(2));
}

proptest::proptest! {
    /// The allocation-free check agrees with the policy module's evaluation, for any rule set
    /// over three metrics and any readings of them (fresh, stale or missing).
    #[test]
    fn fast_violation_check_agrees_with_rule_evaluation(
        rules in proptest::collection::vec((0..3usize, 0..5u8), 1..=3),
        all_of in proptest::prelude::any::<bool>(),
        metrics in proptest::collection::vec(proptest::option::of((0..5u8, proptest::prelude::any::<bool>())), 3),
    ) {
        use telemesh_core::policy::{LogicalOperator, Operator, Rule};
        let ops = [Operator::Equals, Operator::LessThan, Operator::GreaterThan];
        let policy = seed_policy();
        let rules: Vec<Rule> = rules
            .iter()
            .enumerate()
            .map(|(i, &(op, target))| Rule {
                metric: format!("m{i}"),
                operator: ops[op],
                target: f64::from(target),
            })
            .collect();
        let logical = if all_of { LogicalOperator::AllOf } else { LogicalOperator::AnyOf };
        let set = RuleSet { logical, rules };
        let reasons = reasons::Reasons::new(&policy, &set);
        let kvs: Vec<(String, String)> = metrics
            .iter()
            .enumerate()
            .filter_map(|(i, m)| {
                let (value, stale) = (*m)?;
                let at = if stale { 0 } else { 1_000_000 };
                Some((format!("m:m{i}"), format!("{value}@{at}")))
            })
            .collect();
        let state = NodeState::from_key_values(kvs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let snap = Snapshot::from_entries([NodeEntry::new("n", 1, Liveness::Live, state)]);
        let readings = snap.readings("n", 1_000_500, Duration::from_secs(1));
        for unknown in [Unknown::NotViolating, Unknown::Violating] {
            let verdict = set.evaluate(&readings, unknown);
            proptest::prop_assert_eq!(set.violated(&readings, unknown), verdict.violated);
            if verdict.violated {
                proptest::prop_assert_eq!(
                    reasons.reason(&set, &readings, unknown),
                    verdict.reason(&policy.key(), "dontschedule")
                );
            }
        }
    }
}

mod routes {
    use ::http::Request;
    use axum::body::Body;
    use http_body_util::BodyExt as _;
    use prometheus_client::registry::Registry;
    use tower::ServiceExt as _;

    use super::*;
    use crate::extender::http::{Paths, router};
    use crate::metrics::ExtenderMetrics;

    async fn call(
        app: axum::Router,
        method: &str,
        path: &str,
        body: Vec<u8>,
    ) -> (u16, serde_json::Value) {
        let resp = app
            .oneshot(
                Request::builder()
                    .method(method)
                    .uri(path)
                    .body(Body::from(body))
                    .unwrap(),
            )
            .await
            .unwrap();
        let status = resp.status().as_u16();
        assert_eq!(resp.headers()["content-type"], "application/json");
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn every_reply_is_json_with_the_right_status() {
        let mut reg = Registry::default();
        let metrics = ExtenderMetrics::register(&mut reg);
        let app = router(fresh(&[("n1", 50.0)]), metrics, &Paths::default(), 4096);
        let (s, v) = call(
            app.clone(),
            "POST",
            "/scheduler/filter",
            names_args(POLICY, &["n1"]),
        )
        .await;
        assert_eq!((s, v["NodeNames"][0].as_str()), (200, Some("n1")));
        let (s, v) = call(
            app.clone(),
            "POST",
            "/scheduler/prioritize",
            names_args(POLICY, &["n1"]),
        )
        .await;
        assert_eq!((s, v[0]["Score"].as_i64()), (200, Some(10)));
        let (s, v) = call(app.clone(), "POST", "/scheduler/filter", b"{".to_vec()).await;
        assert_eq!(s, 400);
        assert!(v["Error"].as_str().unwrap().contains("malformed"));
        let (s, v) = call(app.clone(), "GET", "/scheduler/filter", vec![]).await;
        assert_eq!(s, 405);
        assert!(v["Error"].as_str().unwrap().contains("POST"));
        let (s, _) = call(app.clone(), "POST", "/scheduler/bind", vec![]).await;
        assert_eq!(s, 404);
        let (s, v) = call(app, "POST", "/scheduler/filter", vec![b' '; 5000]).await;
        assert_eq!(s, 413);
        assert!(
            v["Error"]
                .as_str()
                .unwrap()
                .contains("--extender-max-body-mib")
        );
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &reg).unwrap();
        assert!(
            text.contains(r#"decisions_total{verb="Filter",outcome="Evaluated"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"decisions_total{verb="Filter",outcome="Malformed"} 2"#),
            "{text}"
        );
    }
}

mod rewards {
    //! Rewards in prioritize and filter: a pod of type `health-metric-demo/D` (the seed policy's
    //! namespace, so the same pod can also link to the policy).

    use super::*;
    use crate::extender::reward;
    use crate::extender::settings::RewardSettings;
    use telemesh_core::reward::{Estimate, RewardModel};

    const TYPE: &str = "health-metric-demo/D";

    /// A node with `node_metric` `value` (if any) and the gossiped estimates `rewards`.
    fn node_with(name: &str, value: Option<f64>, rewards: &[(&str, String)]) -> NodeEntry {
        let now = unix_ms(SystemTime::now());
        let kvs: Vec<(String, String)> = [("role".to_owned(), "agent".to_owned())]
            .into_iter()
            .chain(value.map(|v| ("m:node_metric".to_owned(), format!("{v}@{now}"))))
            .chain(rewards.iter().map(|(t, v)| (format!("r:{t}"), v.clone())))
            .collect();
        let state = NodeState::from_key_values(kvs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        NodeEntry::new(name, 1, Liveness::Live, state)
    }

    /// Four bad observations, `ago` ago.
    fn failing(ago: Duration) -> String {
        format!("0,4@{}", unix_ms(SystemTime::now() - ago))
    }

    fn typed_pod(policy: Option<&str>, pod_type: &str) -> Pod {
        let mut p = pod(policy);
        p.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert("telemesh.io/pod-type".into(), pod_type.into());
        p
    }

    fn body(pod: Pod, names: &[&str]) -> Vec<u8> {
        serde_json::to_vec(&ExtenderArgs {
            pod: Some(pod),
            nodes: None,
            node_names: Some(names.iter().map(|n| (*n).to_owned()).collect()),
        })
        .unwrap()
    }

    fn with_settings(entries: Vec<NodeEntry>, rewards: RewardSettings) -> Extender {
        let mut ext = extender(entries);
        ext.settings.rewards = rewards;
        ext
    }

    fn bad_score() -> i64 {
        let e = Estimate {
            good: 0.0,
            bad: 4.0,
            at_ms: 0,
        };
        i64::from(reward::score(&RewardModel::default(), &e, 0))
    }

    #[test]
    fn the_parsed_pod_type_is_core_pod_type() {
        for p in [
            typed_pod(None, "D"),
            pod(POLICY),
            pod(None),
            Pod {
                metadata: ObjectMeta {
                    name: Some("web-7d9f-x1".into()),
                    labels: Some([("pod-template-hash".to_owned(), "7d9f".to_owned())].into()),
                    owner_references: Some(vec![
                        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                            kind: "ReplicaSet".into(),
                            name: "web-7d9f".into(),
                            controller: Some(true),
                            ..Default::default()
                        },
                    ]),
                    ..Default::default()
                },
                ..Default::default()
            },
        ] {
            let b = body(p.clone(), &["n1"]);
            let args = parse::parse_args(&b).unwrap();
            assert_eq!(args.pod.pod_type(), telemesh_core::reward::pod_type(&p));
            // preempt reads the same parts from a whole Pod.
            let mut of = parse::PodInfo::of(&p);
            let mut parsed = args.pod.clone();
            of.labels.sort();
            parsed.labels.sort();
            assert_eq!(of, parsed);
        }
    }

    #[test]
    fn reward_alone_scores_bad_low_and_unseen_or_decayed_neutral() {
        let ext = extender(vec![
            node_with("bad", None, &[(TYPE, failing(Duration::ZERO))]),
            node_with(
                "unseen",
                None,
                &[("health-metric-demo/other", failing(Duration::ZERO))],
            ),
            node_with(
                "decayed",
                None,
                &[(TYPE, failing(Duration::from_secs(3 * 3600)))],
            ),
            node_with("malformed", None, &[(TYPE, "0,4".into())]),
        ]);
        let names = ["bad", "unseen", "decayed", "malformed", "absent"];
        let h = ext.prioritize(&body(typed_pod(None, "D"), &names));
        assert_eq!(h.outcome, Outcome::NoPolicy);
        assert_eq!(h.reward, Some(RewardEffect::Changed));
        let scores: Vec<i64> = priorities(&h).into_iter().map(|(_, s)| s).collect();
        assert!(
            bad_score() < 7,
            "confidently bad scores low: {}",
            bad_score()
        );
        assert_eq!(scores, [bad_score(), 10, 10, 10, 10]);
    }

    #[test]
    fn rewards_blend_with_telemetry_by_weight() {
        let entries = || {
            vec![
                node_with("hi", Some(80.0), &[(TYPE, failing(Duration::ZERO))]),
                node_with("mid", Some(40.0), &[]),
                node_with("lo", Some(0.0), &[]),
            ]
        };
        let names = ["hi", "mid", "lo"];
        let pod = || typed_pod(POLICY, "D");
        // Telemetry alone: 10, 5, 0.
        let ext = with_settings(entries(), RewardSettings::default());
        let h = ext.prioritize(&body(pod(), &names));
        assert_eq!(h.outcome, Outcome::Evaluated);
        let blended = |t: i64, r: i64| ((t + r) as f64 / 2.0).round() as i64;
        assert_eq!(
            priorities(&h)
                .into_iter()
                .map(|(_, s)| s)
                .collect::<Vec<_>>(),
            [blended(10, bad_score()), blended(5, 10), blended(0, 10)]
        );
        // hi (10 → 8) now ties mid (5 → 8): the best nodes changed.
        assert_eq!(h.reward, Some(RewardEffect::Changed));
        // Weight 0: telemetry alone, rewards applied without effect.
        let ext = with_settings(
            entries(),
            RewardSettings {
                weight: 0.0,
                ..RewardSettings::default()
            },
        );
        let h = ext.prioritize(&body(pod(), &names));
        assert_eq!(
            priorities(&h)
                .into_iter()
                .map(|(_, s)| s)
                .collect::<Vec<_>>(),
            [10, 5, 0]
        );
        assert_eq!(h.reward, Some(RewardEffect::Unchanged));
        // Weight 1: reward alone.
        let ext = with_settings(
            entries(),
            RewardSettings {
                weight: 1.0,
                ..RewardSettings::default()
            },
        );
        let h = ext.prioritize(&body(pod(), &names));
        assert_eq!(
            priorities(&h)
                .into_iter()
                .map(|(_, s)| s)
                .collect::<Vec<_>>(),
            [bad_score(), 10, 10]
        );
    }

    #[test]
    fn pods_without_reward_history_are_untouched() {
        let entries = || {
            vec![
                node_with("hi", Some(80.0), &[(TYPE, failing(Duration::ZERO))]),
                node_with("lo", Some(0.0), &[]),
            ]
        };
        let ext = extender(entries());
        // Another type: no history anywhere.
        for (policy, expect) in [(None, "[]"), (POLICY, "")] {
            let h = ext.prioritize(&body(typed_pod(policy, "other"), &["hi", "lo"]));
            assert_eq!(h.reward, None);
            if policy.is_none() {
                assert_eq!(String::from_utf8(h.reply.body.clone()).unwrap(), expect);
                assert_eq!(h.outcome, Outcome::NoPolicy);
            } else {
                assert_eq!(
                    priorities(&h),
                    [("hi".to_owned(), 10), ("lo".to_owned(), 0)]
                );
            }
        }
        // History for the type, but on none of the candidates.
        let h = ext.prioritize(&body(typed_pod(None, "D"), &["lo", "absent"]));
        assert_eq!((h.reply.body.as_slice(), h.reward), (&b"[]"[..], None));
        // A view with no rewards at all.
        let ext = fresh(&[("hi", 80.0)]);
        let h = ext.prioritize(&body(typed_pod(None, "D"), &["hi"]));
        assert_eq!((h.reply.body.as_slice(), h.reward), (&b"[]"[..], None));
    }

    #[test]
    fn the_floor_filters_only_when_set_and_says_why() {
        let entries = || {
            vec![
                node_with("bad", Some(50.0), &[(TYPE, failing(Duration::ZERO))]),
                node_with("cold", Some(5.0), &[]),
                node_with("ok", Some(50.0), &[(TYPE, "3,0@0".into())]),
                node_with(
                    "decayed",
                    Some(50.0),
                    &[(TYPE, failing(Duration::from_secs(3600)))],
                ),
            ]
        };
        let names = ["bad", "cold", "ok", "decayed"];
        // Off by default.
        let ext = extender(entries());
        let h = ext.filter(&body(typed_pod(None, "D"), &names));
        assert_eq!(filter_result(&h).node_names.unwrap().len(), 4);
        assert_eq!(h.reward, None);
        // On: the confidently bad node goes, with its reason; the policy's reasons stay.
        let floor = RewardSettings {
            floor: Some(0.4),
            ..RewardSettings::default()
        };
        let ext = with_settings(entries(), floor);
        let h = ext.filter(&body(typed_pod(POLICY, "D"), &names));
        let r = filter_result(&h);
        assert_eq!(r.node_names, Some(vec!["ok".into(), "decayed".into()]));
        assert_eq!(
            r.failed_and_unresolvable_nodes["bad"],
            "reward of health-metric-demo/D on bad is confidently below 0.4 (mean 0.17, evidence 4.0)"
        );
        assert!(
            r.failed_and_unresolvable_nodes["cold"]
                .starts_with("policy health-metric-demo/scheduling-policy")
        );
        assert_eq!((h.passed, h.failed), (2, 2));
        assert_eq!(h.reward, Some(RewardEffect::Changed));
        // Without a policy too; a floor below the node's optimistic bound keeps it.
        let h = ext.filter(&body(typed_pod(None, "D"), &names));
        assert_eq!(filter_result(&h).node_names.unwrap().len(), 3);
        let lenient = with_settings(
            entries(),
            RewardSettings {
                floor: Some(0.3),
                ..RewardSettings::default()
            },
        );
        let h = lenient.filter(&body(typed_pod(None, "D"), &names));
        assert_eq!(filter_result(&h).node_names.unwrap().len(), 4);
        assert_eq!(h.reward, Some(RewardEffect::Unchanged));
        // A type without history: untouched.
        let h = ext.filter(&body(typed_pod(None, "other"), &names));
        assert_eq!(
            (filter_result(&h).node_names.unwrap().len(), h.reward),
            (4, None)
        );
    }

    /// A reward-floor refusal is as unresolvable as a dontschedule one: reported in
    /// FailedAndUnresolvableNodes (never FailedNodes) and dropped from preemption's candidates.
    #[test]
    fn preemption_never_targets_a_node_the_reward_floor_refuses() {
        let entries = vec![
            node_with("bad", Some(50.0), &[(TYPE, failing(Duration::ZERO))]),
            node_with("ok", Some(50.0), &[(TYPE, "3,0@0".into())]),
        ];
        let ext = with_settings(
            entries,
            RewardSettings {
                floor: Some(0.4),
                ..RewardSettings::default()
            },
        );
        let r = filter_result(&ext.filter(&body(typed_pod(None, "D"), &["bad", "ok"])));
        assert!(r.failed_nodes.is_empty());
        assert_eq!(
            r.failed_and_unresolvable_nodes.keys().collect::<Vec<_>>(),
            ["bad"]
        );
        let victims = |uid: &str| MetaVictims {
            pods: vec![MetaPod { uid: uid.into() }],
            num_pdb_violations: 0,
        };
        let args = ExtenderPreemptionArgs {
            pod: Some(typed_pod(None, "D")),
            node_name_to_victims: None,
            node_name_to_meta_victims: Some(BTreeMap::from([
                ("bad".to_owned(), victims("v-bad")),
                ("ok".to_owned(), victims("v-ok")),
            ])),
        };
        let h = ext.preempt(&serde_json::to_vec(&args).unwrap());
        let r: ExtenderPreemptionResult = serde_json::from_slice(&h.reply.body).unwrap();
        assert_eq!(
            r.node_name_to_meta_victims,
            Some(BTreeMap::from([("ok".to_owned(), victims("v-ok"))]))
        );
    }

    #[tokio::test]
    async fn reward_decisions_are_counted() {
        use ::http::Request;
        use axum::body::Body;
        use prometheus_client::registry::Registry;
        use tower::ServiceExt as _;

        use crate::extender::http::{Paths, router};
        use crate::metrics::ExtenderMetrics;

        let mut reg = Registry::default();
        let metrics = ExtenderMetrics::register(&mut reg);
        let ext = extender(vec![node_with(
            "bad",
            None,
            &[(TYPE, failing(Duration::ZERO))],
        )]);
        let app = router(ext, metrics, &Paths::default(), 1 << 20);
        for pod_type in ["D", "other"] {
            let resp = app
                .clone()
                .oneshot(
                    Request::builder()
                        .method("POST")
                        .uri("/scheduler/prioritize")
                        .body(Body::from(body(typed_pod(None, pod_type), &["bad", "n2"])))
                        .unwrap(),
                )
                .await
                .unwrap();
            assert_eq!(resp.status(), 200);
        }
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &reg).unwrap();
        assert!(
            text.contains(r#"reward_scored_total{verb="Prioritize",effect="Changed"} 1"#),
            "{text}"
        );
        assert!(!text.contains(r#"effect="Unchanged""#), "{text}");
    }
}

mod scavengers {
    //! Preempt with scavenger pods in the view, through the HTTP router: victims swapped for
    //! pods with less unsaved work, dearer nodes dropped, counted in /metrics; and
    //! `--scavenger-victims scheduler` leaving the scheduler's choice alone.

    use ::http::Request;
    use axum::body::Body;
    use http_body_util::BodyExt as _;
    use prometheus_client::registry::Registry;
    use tower::ServiceExt as _;

    use super::*;
    use crate::extender::http::{Paths, router};
    use crate::extender::pods::ScavengerPods;
    use crate::extender::unsaved::ScavengerVictims;
    use crate::metrics::ExtenderMetrics;

    /// A fresh node gossiping `pods`: (uid, job, seconds since its checkpoint, millicores),
    /// each with 1 GiB.
    fn node_with(name: &str, pods: &[(&str, &str, u64, u64)]) -> NodeEntry {
        let now = unix_ms(SystemTime::now());
        let mut kvs = vec![
            ("role".to_owned(), "agent".to_owned()),
            ("m:node_metric".to_owned(), format!("50@{now}")),
        ];
        for (uid, job, unsaved_s, cpu) in pods {
            kvs.push((
                format!("s:{uid}"),
                format!("{job}@{}@{cpu}@1073741824", now - unsaved_s * 1000),
            ));
        }
        let state = NodeState::from_key_values(kvs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        NodeEntry::new(name, 1, Liveness::Live, state)
    }

    fn cluster() -> Vec<NodeEntry> {
        vec![
            // n1: the scheduler would evict "dear" (1 core, an hour unsaved); "cheap" frees
            // as much and has a minute unsaved.
            node_with(
                "n1",
                &[
                    ("dear", "batch/dear", 3600, 1000),
                    ("cheap", "batch/cheap", 60, 1000),
                ],
            ),
            // n2: its only scavenger has ten minutes unsaved: dearer than n1 after the swap.
            node_with("n2", &[("mid", "batch/mid", 600, 1000)]),
        ]
    }

    /// The API server's copy of a scavenger pod gossiped as (uid, `ns/job`) on `node`.
    fn api_pod(uid: &str, job: &str, node: &str) -> Pod {
        let (namespace, job) = job.split_once('/').unwrap();
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": uid, "namespace": namespace, "uid": uid,
                         "labels": {telemesh_core::scavenge::JOB_LABEL: job}},
            "spec": {"nodeName": node, "containers": [{"name": "job", "image": "i"}]},
            "status": {"phase": "Running"},
        }))
        .unwrap()
    }

    fn with(ranking: ScavengerVictims) -> Extender {
        Extender::new(
            ClusterView::with_snapshot(Snapshot::from_entries(cluster())),
            PolicyCache::with_set(PolicySet::from_policies([seed_policy()])),
            Settings {
                scavenger_victims: ranking,
                ..Settings::default()
            },
        )
        .with_scavenger_pods(ScavengerPods::from_pods(&[
            api_pod("dear", "batch/dear", "n1"),
            api_pod("cheap", "batch/cheap", "n1"),
            api_pod("mid", "batch/mid", "n2"),
        ]))
    }

    fn victims(uids: &[&str]) -> MetaVictims {
        MetaVictims {
            pods: uids.iter().map(|u| MetaPod { uid: (*u).into() }).collect(),
            num_pdb_violations: 0,
        }
    }

    /// The scheduler's request: "dear" on n1, "mid" on n2, and an ordinary pod on n3.
    fn request(cached: bool) -> Vec<u8> {
        let meta = BTreeMap::from([
            ("n1".to_owned(), victims(&["dear"])),
            ("n2".to_owned(), victims(&["mid"])),
            ("n3".to_owned(), victims(&["web"])),
        ]);
        let args = if cached {
            ExtenderPreemptionArgs {
                pod: Some(pod(None)),
                node_name_to_victims: None,
                node_name_to_meta_victims: Some(meta),
            }
        } else {
            let full = meta
                .into_iter()
                .map(|(node, v)| {
                    let pods = v
                        .pods
                        .iter()
                        .map(|p| {
                            let mut victim = Pod::default();
                            victim.metadata.uid = Some(p.uid.clone());
                            victim
                        })
                        .collect();
                    (
                        node,
                        Victims {
                            pods,
                            num_pdb_violations: 0,
                        },
                    )
                })
                .collect();
            ExtenderPreemptionArgs {
                pod: Some(pod(None)),
                node_name_to_victims: Some(full),
                node_name_to_meta_victims: None,
            }
        };
        serde_json::to_vec(&args).unwrap()
    }

    async fn preempt(app: &axum::Router, body: Vec<u8>) -> BTreeMap<String, Vec<String>> {
        let resp = app
            .clone()
            .oneshot(
                Request::builder()
                    .method("POST")
                    .uri("/scheduler/preempt")
                    .body(Body::from(body))
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let result: ExtenderPreemptionResult = serde_json::from_slice(&bytes).unwrap();
        result
            .node_name_to_meta_victims
            .unwrap()
            .into_iter()
            .map(|(n, v)| (n, v.pods.into_iter().map(|p| p.uid).collect()))
            .collect()
    }

    #[tokio::test]
    async fn preempt_spares_unsaved_work_and_drops_dearer_nodes_in_both_modes() {
        let mut reg = Registry::default();
        let app = router(
            with(ScavengerVictims::Unsaved),
            ExtenderMetrics::register(&mut reg),
            &Paths::default(),
            1 << 20,
        );
        let expected = BTreeMap::from([
            ("n1".to_owned(), vec!["cheap".to_owned()]),
            // n3's victim is not a scavenger: left to the scheduler's own criteria.
            ("n3".to_owned(), vec!["web".to_owned()]),
        ]);
        assert_eq!(preempt(&app, request(true)).await, expected);
        assert_eq!(preempt(&app, request(false)).await, expected);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &reg).unwrap();
        for line in [
            "preempt_changed_total 2",
            "victims_spared_total 2",
            "preempt_nodes_dropped_total 2",
            r#"decisions_total{verb="Preempt",outcome="NoPolicy"} 2"#,
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        // (3600 − 60) s × 1 core per call: both jobs' unsaved work grows alike between the
        // view and the call, so the difference is exact.
        let avoided: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("loss_avoided_cpu_seconds_total "))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(avoided, 2.0 * 3540.0);
    }

    #[tokio::test]
    async fn the_scheduler_setting_keeps_upstreams_choice() {
        let mut reg = Registry::default();
        let app = router(
            with(ScavengerVictims::Scheduler),
            ExtenderMetrics::register(&mut reg),
            &Paths::default(),
            1 << 20,
        );
        let expected = BTreeMap::from([
            ("n1".to_owned(), vec!["dear".to_owned()]),
            ("n2".to_owned(), vec!["mid".to_owned()]),
            ("n3".to_owned(), vec!["web".to_owned()]),
        ]);
        assert_eq!(preempt(&app, request(true)).await, expected);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &reg).unwrap();
        assert!(text.contains("preempt_changed_total 0"), "{text}");
    }
}

/// The located paths (a snapshot's positions and columns, what the verbs use) give the direct
/// lookups' answers, on random views: metrics missing, stale or stamped in the future, nodes
/// the view does not know, reward estimates on some nodes only, candidates in any order with
/// repeats, and snapshots whose columns were built ahead by [`Snapshot::warm_like`].
mod located {
    use proptest::prelude::*;
    use telemesh_core::reward::RewardModel;

    use super::*;
    use crate::extender::parse::Candidates;
    use crate::extender::{filter, prioritize, reward};

    const NOW: u64 = 10_000_000;
    const TYPE: &str = "health-metric-demo/demo";

    /// A node's metric (value, and how long before `NOW` it was measured: up to a minute,
    /// or a little in the future) and its reward estimate for `TYPE` (good, bad in halves, age).
    type NodeSpec = (Option<(u8, i64)>, Option<(u8, u8, u64)>);

    fn node_spec() -> impl Strategy<Value = NodeSpec> {
        (
            proptest::option::weighted(0.8, (0..30u8, -5_000..60_000i64)),
            proptest::option::weighted(0.67, (0..8u8, 0..8u8, 0..600_000u64)),
        )
    }

    fn view_of(specs: &[NodeSpec]) -> Snapshot {
        Snapshot::from_entries(specs.iter().enumerate().map(|(i, (metric, estimate))| {
            let mut kvs = vec![("role".to_owned(), "agent".to_owned())];
            if let Some((value, age)) = metric {
                let at = NOW as i64 - age;
                kvs.push(("m:node_metric".into(), format!("{value}@{at}")));
            }
            if let Some((good, bad, age)) = estimate {
                let (good, bad) = (f64::from(*good) * 0.5, f64::from(*bad) * 0.5);
                kvs.push((format!("r:{TYPE}"), format!("{good},{bad}@{}", NOW - age)));
            }
            let state =
                NodeState::from_key_values(kvs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            NodeEntry::new(&format!("n{i}"), 1, Liveness::Live, state)
        }))
    }

    /// Every located answer on `view` equals the direct one, for candidates `n<k>` (some of
    /// which the view does not know), the filter's with the rules folded at `folded_at` (before
    /// the call, or after it: then the fold does not apply).
    fn assert_located_equals_direct(view: &Snapshot, picks: &[u8], folded_at: u64) {
        let policy = seed_policy();
        let rules = policy.dont_schedule.as_ref().unwrap();
        let rule = policy.schedule_on_metric.as_ref().unwrap();
        let model = RewardModel::default();
        let names: Vec<NodeName<'_>> = picks
            .iter()
            .map(|k| NodeName::Decoded(format!("n{k}").into()))
            .collect();
        let candidates = Candidates::Names(names);
        let positions = view.locate((0..candidates.len()).map(|i| candidates.name(i)));
        for unknown in [Unknown::NotViolating, Unknown::Violating] {
            for unknown_score in [UnknownScore::Neutral, UnknownScore::Zero] {
                let settings = Settings {
                    unknown,
                    unknown_score,
                    ..Settings::default()
                };
                let direct = filter::filter(view, &policy, rules, &candidates, &settings, NOW);
                let stale_after_ms = settings.stale_after.as_millis() as u64;
                let verdicts =
                    Verdicts::fold(view, &policy, rules, unknown, stale_after_ms, folded_at);
                let located = filter::filter_located(
                    view, &positions, &verdicts, &policy, rules, &settings, NOW,
                );
                assert_eq!(
                    direct,
                    located,
                    "folded at NOW{:+}",
                    folded_at as i64 - NOW as i64
                );
                for floor in [0.3, 0.6] {
                    let (mut d, mut l) = (direct.clone(), located.clone());
                    let a =
                        reward::apply_floor(view, TYPE, floor, &model, &candidates, &mut d, NOW);
                    let b = reward::apply_floor_located(
                        view,
                        &positions,
                        TYPE,
                        floor,
                        &model,
                        &candidates,
                        &mut l,
                        NOW,
                    );
                    assert_eq!((a, d), (b, l));
                }
                assert_eq!(
                    prioritize::prioritize(view, rule, &candidates, &settings, NOW),
                    prioritize::prioritize_located(view, &positions, rule, &settings, NOW)
                );
            }
        }
        assert_eq!(
            reward::scores(view, TYPE, &candidates, &model, NOW),
            reward::scores_located(&positions, &view.reward_column(TYPE), &model, NOW)
        );
    }

    proptest! {
        /// On a snapshot as it is published, and on its successor with columns built ahead from
        /// the first's requests (or not), a call's located answers are the direct lookups'.
        #[test]
        fn located_answers_equal_direct_lookups(
            first in proptest::collection::vec(node_spec(), 1..=40),
            second in proptest::collection::vec(node_spec(), 1..=40),
            warm in any::<bool>(),
            picks in proptest::collection::vec(0..45u8, 0..50),
            folded_ago in -1_000..120_000i64,
        ) {
            let folded_at = (NOW as i64 - folded_ago) as u64;
            let first = view_of(&first);
            assert_located_equals_direct(&first, &picks, folded_at);
            let second = view_of(&second);
            if warm {
                second.warm_like(&first);
            }
            assert_located_equals_direct(&second, &picks, folded_at);
        }
    }
}

/// The hand-written replies are the JSON serde writes for the same answer, whatever the names
/// (quotes, backslashes, control characters, any Unicode) and reasons, in both request modes.
mod encoding {
    use proptest::prelude::*;

    use super::*;
    use crate::extender::filter::FilterDecision;
    use crate::extender::parse::parse_args;

    /// Distinct names (kube-scheduler never sends one twice) in any order, each with a `T`.
    fn named<T: std::fmt::Debug + Clone>(
        each: impl Strategy<Value = T>,
    ) -> impl Strategy<Value = Vec<(String, T)>> {
        proptest::collection::btree_map(any::<String>(), each, 0..12)
            .prop_map(|m| m.into_iter().collect::<Vec<_>>())
            .prop_shuffle()
    }

    /// Names each passed (`None`) or refused for a reason.
    fn fates() -> impl Strategy<Value = Vec<(String, Option<String>)>> {
        named(proptest::option::of(any::<String>()))
    }

    fn decision(fates: &[(String, Option<String>)]) -> FilterDecision {
        let mut d = FilterDecision::default();
        for (i, (_, fate)) in fates.iter().enumerate() {
            match fate {
                None => d.passed.push(i),
                Some(reason) => d.failed.push((i, reason.clone())),
            }
        }
        d
    }

    /// What serde writes for the answer `fates` describes (`full`: the nodes echoed whole).
    fn serde_filter(fates: &[(String, Option<String>)], full: bool) -> Vec<u8> {
        let passed = fates.iter().filter(|(_, f)| f.is_none()).map(|(n, _)| n);
        let result = ExtenderFilterResult {
            nodes: full.then(|| NodeList {
                items: passed.clone().map(|n| node(n)).collect(),
                metadata: Default::default(),
            }),
            node_names: (!full).then(|| passed.cloned().collect()),
            failed_and_unresolvable_nodes: fates
                .iter()
                .filter_map(|(n, f)| Some((n.clone(), f.clone()?)))
                .collect(),
            ..Default::default()
        };
        serde_json::to_vec(&result).unwrap()
    }

    /// The reply as a JSON value, to compare without regard to key order (a refusal map is
    /// written in input order, serde's in name order, and Go reads either into its map). The
    /// node list's `apiVersion` and `kind` are left out: k8s-openapi always writes them, Go's
    /// `v1.NodeList` (kube-scheduler's, TAS's) omits them empty, and the extender answers as TAS
    /// does (`captured_tas_style_request_gets_the_expected_response`).
    fn value(body: &[u8]) -> serde_json::Value {
        let mut v: serde_json::Value = serde_json::from_slice(body).unwrap();
        if let Some(list) = v.get_mut("Nodes").and_then(|n| n.as_object_mut()) {
            list.remove("apiVersion");
            list.remove("kind");
        }
        v
    }

    proptest! {
        /// `pretty`: the body indented, so kept names copied from it in runs carry whitespace.
        #[test]
        fn filter_replies_are_what_serde_writes(
            fates in fates(),
            full in any::<bool>(),
            pretty in any::<bool>(),
        ) {
            let names: Vec<&str> = fates.iter().map(|(n, _)| n.as_str()).collect();
            let body = if full { full_args(POLICY, &names) } else { names_args(POLICY, &names) };
            let body = if pretty {
                let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
                serde_json::to_vec_pretty(&v).unwrap()
            } else {
                body
            };
            let args = parse_args(&body).unwrap();
            prop_assert_eq!(args.candidates.names(), names.clone());
            let hand = encode_filter(&body, &args.candidates, &decision(&fates));
            prop_assert_eq!(value(&hand), value(&serde_filter(&fates, full)));
        }

        #[test]
        fn prioritize_replies_are_byte_for_byte_what_serde_writes(
            scored in named(0..=10u8),
            full in any::<bool>(),
        ) {
            let names: Vec<&str> = scored.iter().map(|(n, _)| n.as_str()).collect();
            let body = if full { full_args(POLICY, &names) } else { names_args(POLICY, &names) };
            let args = parse_args(&body).unwrap();
            let scores: Vec<u8> = scored.iter().map(|(_, s)| *s).collect();
            let list: Vec<HostPriority> = scored
                .iter()
                .map(|(n, s)| HostPriority { host: n.clone(), score: i64::from(*s) })
                .collect();
            let hand = encode_priorities(&args.candidates, &scores);
            prop_assert_eq!(
                String::from_utf8(hand).unwrap(),
                serde_json::to_string(&list).unwrap()
            );
        }
    }
}
