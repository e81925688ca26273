//! Victim selection and node choice against upstream's documented behaviour
//! (kubernetes.io/docs/concepts/scheduling-eviction/pod-priority-preemption/ and the Go code the
//! module cites).

use k8s_openapi::api::core::v1::Node;
use serde_json::json;

use super::*;

const NOW: &str = "2026-11-25T00:00:00Z";

fn now() -> jiff::Timestamp {
    NOW.parse().unwrap()
}

/// A pod in `default` with a priority, a CPU request, a start time (seconds before NOW) and
/// labels.
fn pod(name: &str, priority: i32, cpu: &str, started_ago: i64) -> Pod {
    let start = now() - jiff::SignedDuration::from_secs(started_ago);
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
                     "labels": {"app": name}},
        "spec": {"priority": priority, "containers": [{"name": "c", "image": "i",
                 "resources": {"requests": {"cpu": cpu}}}]},
        "status": {"startTime": start.to_string()},
    }))
    .unwrap()
}

fn labelled(mut p: Pod, key: &str, value: &str) -> Pod {
    p.metadata
        .labels
        .get_or_insert_default()
        .insert(key.into(), value.into());
    p
}

fn node_info(name: &str, cpu: &str, pods: &[&Pod]) -> NodeInfo {
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }))
    .unwrap();
    NodeInfo::new(&node, pods.iter().copied())
}

fn select(
    preemptor: &Pod,
    cpu: &str,
    on: &[&Pod],
    budgets: &[Budget],
) -> Result<Victims, NoVictims> {
    let info = node_info("n", cpu, on);
    select_victims_on_node(
        preemptor,
        &fit::pod_requests(preemptor),
        &info,
        on,
        budgets,
        &BTreeSet::new(),
        now(),
    )
}

fn names(v: &Victims) -> Vec<&str> {
    v.pods
        .iter()
        .map(|p| p.metadata.name.as_deref().unwrap())
        .collect()
}

fn budget(allowed: i32, app: &str) -> Budget {
    Budget {
        namespace: "default".into(),
        selector: Some(LabelSelector::parse(&format!("app={app}")).unwrap()),
        disruptions_allowed: allowed,
        disrupted_pods: BTreeSet::new(),
    }
}

#[test]
fn only_lower_priority_pods_are_victims() {
    let high = pod("high", 100, "2", 10);
    let low_old = pod("low-old", 0, "1", 100);
    let low_new = pod("low-new", 0, "1", 5);
    let on = [&high, &low_old, &low_new];
    // Equal priority never preempts.
    assert_eq!(
        select(&pod("p", 0, "1", 0), "4", &on, &[]).unwrap_err(),
        NoVictims::Unschedulable(NO_VICTIMS.into())
    );
    // One lower-priority pod must go: the less important (the one that started later).
    let v = select(&pod("p", 50, "1", 0), "4", &on, &[]).unwrap();
    assert_eq!(names(&v), ["low-new"]);
    assert_eq!(v.num_pdb_violations, 0);
    // The higher-priority pod stays even when removing it alone would be enough.
    let v = select(&pod("p", 50, "2", 0), "4", &on, &[]).unwrap();
    assert_eq!(names(&v), ["low-old", "low-new"]);
}

#[test]
fn reprieves_the_most_important_first_as_upstream_greedily_does() {
    let p10 = pod("p10", 10, "2", 50);
    let p5 = pod("p5", 5, "1", 50);
    let p1 = pod("p1", 1, "1", 50);
    let on = [&p1, &p10, &p5];
    // Room for 2 CPUs: p10 alone would do, but upstream keeps the most important pod and
    // evicts the two below it.
    let v = select(&pod("p", 20, "2", 0), "4", &on, &[]).unwrap();
    assert_eq!(names(&v), ["p5", "p1"]);
    // Room for 1 CPU: only the least important goes.
    let v = select(&pod("p", 20, "1", 0), "4", &on, &[]).unwrap();
    assert_eq!(names(&v), ["p1"]);
}

#[test]
fn a_node_where_even_removing_every_lower_pod_is_not_enough_gives_the_filter_reason() {
    let high = pod("high", 100, "3", 10);
    let low = pod("low", 0, "1", 10);
    let err = select(&pod("p", 50, "2", 0), "4", &[&high, &low], &[]).unwrap_err();
    assert_eq!(err, NoVictims::Unschedulable("Insufficient cpu".into()));
    // A node where the pod fits with every lower pod back is no candidate, and an error as
    // upstream (the filters must have turned it down for another reason, e.g. an extender).
    let err = select(&pod("p", 50, "1", 0), "8", &[&high, &low], &[]).unwrap_err();
    assert_eq!(
        err,
        NoVictims::Error("expected at least one victim pod on node \"n\"".into())
    );
}

#[test]
fn budgets_are_respected_while_something_else_works_and_counted_when_not() {
    // Two equal pods; the guarded one started later, so it would be the victim without a PDB.
    let free = pod("free", 0, "1", 100);
    let guarded = pod("guarded", 0, "1", 10);
    let on = [&free, &guarded];
    let pdb = [budget(0, "guarded")];
    let v = select(&pod("p", 10, "1", 0), "2", &on, &pdb).unwrap();
    assert_eq!(names(&v), ["free"]);
    assert_eq!(v.num_pdb_violations, 0);
    // Needing both: the budget is violated (best effort), and counted.
    let v = select(&pod("p", 10, "2", 0), "2", &on, &pdb).unwrap();
    assert_eq!(names(&v), ["free", "guarded"]);
    assert_eq!(v.num_pdb_violations, 1);
    // A budget that allows the disruption protects nothing.
    let v = select(&pod("p", 10, "1", 0), "2", &on, &[budget(1, "guarded")]).unwrap();
    assert_eq!(names(&v), ["guarded"]);
}

#[test]
fn budgets_count_as_upstream_counts_them() {
    let a = labelled(pod("a", 0, "1", 30), "tier", "web");
    let b = labelled(pod("b", 0, "1", 20), "tier", "web");
    let c = labelled(pod("c", 0, "1", 10), "tier", "web");
    let web = |allowed| Budget {
        namespace: "default".into(),
        selector: Some(LabelSelector::parse("tier=web").unwrap()),
        disruptions_allowed: allowed,
        disrupted_pods: BTreeSet::new(),
    };
    // One disruption allowed: the first pod spends it, the next ones violate.
    let (violating, fine) = split_by_budget(&[&a, &b, &c], &[web(1)]);
    assert_eq!(fine, [&a]);
    assert_eq!(violating, [&b, &c]);
    // A pod the API server already counted as disrupted spends nothing.
    let mut counted = web(1);
    counted.disrupted_pods.insert("a".into());
    let (violating, fine) = split_by_budget(&[&a, &b, &c], &[counted]);
    assert_eq!(fine, [&a, &b]);
    assert_eq!(violating, [&c]);
    // Another namespace, or a selector that selects nothing, guards nothing.
    let mut elsewhere = web(0);
    elsewhere.namespace = "other".into();
    let nothing = Budget {
        selector: None,
        ..web(0)
    };
    let (violating, _) = split_by_budget(&[&a, &b], &[elsewhere, nothing]);
    assert!(violating.is_empty());
    // An empty selector object selects nothing in preemption.
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "all", "namespace": "default"},
        "spec": {"selector": {}},
        "status": {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0,
                   "expectedPods": 0},
    }))
    .unwrap();
    let (violating, _) = split_by_budget(&[&a], &[Budget::from_object(&pdb)]);
    assert!(violating.is_empty());
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"tier": "web"}}},
        "status": {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0,
                   "expectedPods": 0, "disruptedPods": {"b": NOW}},
    }))
    .unwrap();
    let (violating, fine) = split_by_budget(&[&a, &b], &[Budget::from_object(&pdb)]);
    assert_eq!((violating, fine), (vec![&a], vec![&b]));
}

#[test]
fn preemption_policy_never_and_terminating_victims_make_a_pod_ineligible() {
    let mut never = pod("p", 10, "1", 0);
    never.spec.as_mut().unwrap().preemption_policy = Some("Never".into());
    assert_eq!(
        ineligible(&never, false, &[]),
        Some("not eligible due to preemptionPolicy=Never.")
    );
    let mut nominated = pod("p", 10, "1", 0);
    nominated.status.get_or_insert_default().nominated_node_name = Some("n".into());
    let mut victim = pod("v", 0, "1", 10);
    victim.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
    // Being deleted, but not by preemption: no reason to wait.
    assert_eq!(ineligible(&nominated, false, &[&victim]), None);
    victim.status.get_or_insert_default().conditions = Some(vec![
        serde_json::from_value(json!({
            "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"
        }))
        .unwrap(),
    ]);
    assert_eq!(
        ineligible(&nominated, false, &[&victim]),
        Some("not eligible due to a terminating pod on the nominated node.")
    );
    // Unless the nominated node can no longer take it at all.
    assert_eq!(ineligible(&nominated, true, &[&victim]), None);
    // Or the terminating pod is not a lower-priority one.
    let mut peer = victim.clone();
    peer.spec.as_mut().unwrap().priority = Some(10);
    assert_eq!(ineligible(&nominated, false, &[&peer]), None);
}

fn victims(pods: &[Pod], violations: i64) -> Victims {
    Victims {
        pods: pods.to_vec(),
        num_pdb_violations: violations,
    }
}

#[test]
fn the_node_is_picked_by_upstreams_criteria_in_order() {
    let pick = |c: &[(&str, Victims)]| {
        let map: BTreeMap<String, Victims> = c
            .iter()
            .map(|(n, v)| ((*n).to_owned(), v.clone()))
            .collect();
        pick_one_node(&map, now()).unwrap()
    };
    let lo = |name: &str, prio, ago| pod(name, prio, "1", ago);
    // 1. Fewest PDB violations, even with more and higher victims.
    assert_eq!(
        pick(&[
            ("a", victims(&[lo("x", 0, 1)], 1)),
            ("b", victims(&[lo("y", 5, 1), lo("z", 5, 1)], 0)),
        ]),
        "b"
    );
    // 2. Lowest highest-priority victim.
    assert_eq!(
        pick(&[
            ("a", victims(&[lo("x", 5, 1)], 0)),
            ("b", victims(&[lo("y", 3, 1), lo("z", 3, 1)], 0)),
        ]),
        "b"
    );
    // 3. Smallest priority sum (shifted, so one -10 beats two -10s).
    assert_eq!(
        pick(&[
            ("a", victims(&[lo("x", -10, 1), lo("w", -10, 1)], 0)),
            ("b", victims(&[lo("y", -10, 1)], 0)),
        ]),
        "b"
    );
    assert_eq!(
        pick(&[
            ("a", victims(&[lo("x", 3, 1), lo("w", 2, 1)], 0)),
            ("b", victims(&[lo("y", 3, 1), lo("z", 1, 1)], 0)),
        ]),
        "b"
    );
    // 4. (Fewest victims: with the MaxInt32+1 shift, equal sums imply equal counts, so upstream's
    //    fourth criterion never decides.) 5. Latest start of the highest-priority victims.
    assert_eq!(
        pick(&[
            ("a", victims(&[lo("x", 3, 500), lo("w", 1, 1)], 0)),
            ("b", victims(&[lo("y", 3, 5), lo("z", 1, 1000)], 0)),
        ]),
        "b"
    );
    // 6. Still tied: the first by name.
    assert_eq!(
        pick(&[
            ("b", victims(&[lo("y", 3, 5)], 0)),
            ("a", victims(&[lo("x", 3, 5)], 0)),
        ]),
        "a"
    );
    assert_eq!(pick_one_node(&BTreeMap::new(), now()), None);
}

#[test]
fn an_extenders_answer_maps_back_to_the_pods_on_each_node() {
    let a = pod("a", 0, "1", 1);
    let b = pod("b", 0, "1", 1);
    let on: BTreeMap<String, Vec<&Pod>> =
        [("n1".to_owned(), vec![&a]), ("n2".to_owned(), vec![&b])].into();
    let meta = |uids: &[&str], v| MetaVictims {
        pods: uids.iter().map(|u| MetaPod { uid: (*u).into() }).collect(),
        num_pdb_violations: v,
    };
    let answer: BTreeMap<String, MetaVictims> = [("n2".to_owned(), meta(&["uid-b"], 2))].into();
    let out = convert_to_victims("http://x", &answer, &on, false).unwrap();
    assert_eq!(out.keys().collect::<Vec<_>>(), ["n2"]);
    assert_eq!(names(&out["n2"]), ["b"]);
    assert_eq!(out["n2"].num_pdb_violations, 2);
    // A UID not on that node is an error, worded as upstream.
    let wrong: BTreeMap<String, MetaVictims> = [("n1".to_owned(), meta(&["uid-b"], 0))].into();
    assert_eq!(
        convert_to_victims("http://x", &wrong, &on, true).unwrap_err(),
        "extender: http://x claims to preempt pod (UID: &{uid-b}) on node: n1, but the pod is not found on that node"
    );
    let unknown: BTreeMap<String, MetaVictims> = [("n9".to_owned(), meta(&[], 0))].into();
    assert!(convert_to_victims("http://x", &unknown, &on, true).is_err());
    // A node left without victims: dropped when ignorable, an error otherwise.
    let empty: BTreeMap<String, MetaVictims> = [("n1".to_owned(), meta(&[], 0))].into();
    assert!(
        convert_to_victims("http://x", &empty, &on, true)
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        convert_to_victims("http://x", &empty, &on, false).unwrap_err(),
        "expected at least one victim pod on node \"n1\""
    );
    // No node at all: no preemption.
    assert!(
        convert_to_victims("http://x", &BTreeMap::new(), &on, false)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn more_important_means_higher_priority_then_older() {
    let old = pod("old", 1, "1", 100);
    let new = pod("new", 1, "1", 1);
    let high = pod("high", 2, "1", 1);
    assert!(more_important(&old, &new, now()));
    assert!(!more_important(&new, &old, now()));
    assert!(more_important(&high, &old, now()));
    // A pod that has not started counts as starting now: least important among equals.
    let mut pending = pod("pending", 1, "1", 0);
    pending.status = None;
    assert!(more_important(&new, &pending, now()));
}
