//! Pods as the workload controllers see them: which count as active, ready and available,
//! which to delete first when there are too many, and the pod a template makes. Shared by the
//! ReplicaSet and Job controllers; everything but `create` and `delete` is pure.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt as _};

use super::error::{Error, Result};
use super::owners::is_not_found;
pub use crate::cluster::pod_state::{is_ready, is_running_and_ready, is_terminal, phase};

/// Returns whether the pod counts toward a workload's replicas: not finished, not being deleted.
pub fn is_active(pod: &Pod) -> bool {
    !is_terminal(pod) && pod.metadata.deletion_timestamp.is_none()
}

/// Returns when the pod's `Ready` condition became `True`, if it is ready.
fn ready_condition(pod: &Pod) -> Option<Option<jiff::Timestamp>> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")
        .map(|c| c.last_transition_time.as_ref().map(|t| t.0))
}

/// Returns whether the pod has been ready for `min_ready_seconds` at `now`. A ready pod with no
/// transition time counts as available, as upstream does.
pub fn is_available(pod: &Pod, min_ready_seconds: i32, now: jiff::Timestamp) -> bool {
    match ready_condition(pod) {
        None => false,
        Some(_) if min_ready_seconds <= 0 => true,
        Some(None) => true,
        Some(Some(since)) => {
            since + jiff::SignedDuration::from_secs(i64::from(min_ready_seconds)) <= now
        }
    }
}

/// Returns when a ready pod becomes available, if it is not yet; the controller looks again then.
pub fn available_at(
    pod: &Pod,
    min_ready_seconds: i32,
    now: jiff::Timestamp,
) -> Option<jiff::Timestamp> {
    let since = ready_condition(pod)??;
    let at = since + jiff::SignedDuration::from_secs(i64::from(min_ready_seconds));
    (min_ready_seconds > 0 && at > now).then_some(at)
}

/// The annotation a pod's deletion cost is read from: pods with a lower cost are deleted first
/// when a ReplicaSet scales down (upstream's `PodDeletionCost`, on by default since 1.22).
pub const DELETION_COST_ANNOTATION: &str = "controller.kubernetes.io/pod-deletion-cost";

/// Returns the pod's deletion cost: the annotation as a 32-bit integer, 0 when it is absent or
/// invalid. As upstream, a leading `+` or leading zeros (`+10`, `007`) make the value invalid.
pub fn deletion_cost(pod: &Pod) -> i32 {
    let Some(value) = pod.annotations().get(DELETION_COST_ANNOTATION) else {
        return 0;
    };
    let valid_first_digit = match value.as_bytes().first() {
        Some(b'-' | b'1'..=b'9') => true,
        Some(b'0') => value == "0",
        _ => false,
    };
    if !valid_first_digit {
        return 0;
    }
    value.parse().unwrap_or(0)
}

/// Orders pods so the ones to delete first come first, like upstream's `ActivePods` (what the
/// Job controller sorts by): unscheduled before scheduled; Pending, then Unknown, then Running;
/// not ready before ready; ready more recently before ready longer; more restarts before fewer;
/// newer before older. Names break ties, so the order is total.
pub fn deletion_order(a: &Pod, b: &Pod) -> Ordering {
    compare_for_deletion(a, b, None)
}

/// Sorts `pods` so the ones to delete first come first, like upstream's `ActivePodsWithRanks`
/// (what the ReplicaSet controller sorts by when it scales down): [`deletion_order`] with two
/// ranks inserted right after readiness: a lower [`deletion_cost`] first, then pods sharing their
/// node with more of `related`'s active pods first (upstream's co-location rank, which spreads
/// what is left over the nodes).
pub fn sort_for_deletion(pods: &mut [&Pod], related: &[&Pod]) {
    let mut on_node: HashMap<&str, usize> = HashMap::new();
    for p in related.iter().filter(|p| is_active(p)) {
        *on_node.entry(node_name(p)).or_default() += 1;
    }
    let rank = |p: &Pod| on_node.get(node_name(p)).copied().unwrap_or(0);
    pods.sort_by(|a, b| compare_for_deletion(a, b, Some((rank(a), rank(b)))));
}

fn node_name(p: &Pod) -> &str {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default()
}

/// Upstream's `ActivePods` comparison, and `ActivePodsWithRanks` when co-location `ranks` are
/// given (the ranks bring the deletion cost with them, as upstream's ranked order does).
fn compare_for_deletion(a: &Pod, b: &Pod, ranks: Option<(usize, usize)>) -> Ordering {
    fn phase_rank(p: &Pod) -> u8 {
        match phase(p) {
            "Pending" => 0,
            "Unknown" => 1,
            "Running" => 2,
            _ => 3,
        }
    }
    fn restarts(p: &Pod) -> i32 {
        p.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .map(|cs| cs.iter().map(|c| c.restart_count).max().unwrap_or(0))
            .unwrap_or(0)
    }
    let scheduled = |p: &Pod| !node_name(p).is_empty();
    let ready_since = |p: &Pod| ready_condition(p).flatten();
    let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
    scheduled(a)
        .cmp(&scheduled(b))
        .then_with(|| phase_rank(a).cmp(&phase_rank(b)))
        .then_with(|| is_ready(a).cmp(&is_ready(b)))
        .then_with(|| match ranks {
            // Cheaper first, then the more crowded node first.
            Some((rank_a, rank_b)) => deletion_cost(a)
                .cmp(&deletion_cost(b))
                .then_with(|| rank_b.cmp(&rank_a)),
            None => Ordering::Equal,
        })
        // Later ready time first; a missing time sorts as the most recent.
        .then_with(|| match (ready_since(a), ready_since(b)) {
            (Some(x), Some(y)) => y.cmp(&x),
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        })
        .then_with(|| restarts(b).cmp(&restarts(a)))
        // Newer first; a missing timestamp sorts as the newest.
        .then_with(|| match (created(a), created(b)) {
            (Some(x), Some(y)) => y.cmp(&x),
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        })
        .then_with(|| a.name_any().cmp(&b.name_any()))
}

/// Returns the pod a controller creates from `template`: the template's labels (plus `labels`),
/// annotations and spec, in `namespace`, named `<generate_name><random>` by the server, and
/// controlled by `owner`.
pub fn from_template(
    template: &PodTemplateSpec,
    namespace: &str,
    generate_name: String,
    owner: OwnerReference,
    labels: &BTreeMap<String, String>,
) -> Pod {
    let tmeta = template.metadata.clone().unwrap_or_default();
    let mut all_labels = tmeta.labels.unwrap_or_default();
    all_labels.extend(labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(generate_name),
            namespace: Some(namespace.to_owned()),
            labels: Some(all_labels),
            annotations: tmeta.annotations.filter(|a| !a.is_empty()),
            finalizers: tmeta.finalizers.filter(|f| !f.is_empty()),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

/// Creates `count` copies of `pod`; returns the names the server gave them. Stops at the first
/// failure, after which the next reconcile creates what is still missing.
pub async fn create(api: &Api<Pod>, pod: &Pod, count: usize, owner: &str) -> Result<Vec<String>> {
    let mut names = Vec::with_capacity(count);
    for _ in 0..count {
        let created = api
            .create(&PostParams::default(), pod)
            .await
            .map_err(Error::api(format!("creating a pod for {owner}")))?;
        tracing::debug!(owner, pod.name = %created.name_any(), "pod created");
        names.push(created.name_any());
    }
    Ok(names)
}

/// Deletes the named pods; ones already gone are fine.
pub async fn delete(api: &Api<Pod>, names: &[String], owner: &str) -> Result<()> {
    for name in names {
        match api.delete(name, &DeleteParams::background()).await {
            Ok(_) => tracing::debug!(owner, pod.name = %name, "pod deleted"),
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(Error::api(format!("deleting pod {name} of {owner}"))(e)),
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    /// A pod fixture: name, creation second, phase.
    pub fn pod(name: &str, created_sec: i64, phase: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                creation_timestamp: Some(Time(ts(created_sec))),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec::default()),
            status: Some(PodStatus {
                phase: Some(phase.into()),
                ..PodStatus::default()
            }),
        }
    }

    pub fn ts(sec: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_700_000_000 + sec).expect("valid timestamp")
    }

    /// Marks a pod ready since `sec`.
    pub fn ready(mut p: Pod, sec: i64) -> Pod {
        let status = p.status.get_or_insert_with(PodStatus::default);
        status.conditions = Some(vec![PodCondition {
            type_: "Ready".into(),
            status: "True".into(),
            last_transition_time: Some(Time(ts(sec))),
            ..PodCondition::default()
        }]);
        p
    }

    fn on_node(mut p: Pod) -> Pod {
        p.spec.get_or_insert_with(PodSpec::default).node_name = Some("n1".into());
        p
    }

    fn order(mut pods: Vec<Pod>) -> Vec<String> {
        pods.sort_by(deletion_order);
        pods.iter().map(|p| p.name_any()).collect()
    }

    #[test]
    fn unscheduled_pending_not_ready_go_first() {
        let pods = vec![
            ready(on_node(pod("running-ready", 0, "Running")), 5),
            on_node(pod("running", 0, "Running")),
            on_node(pod("pending-on-node", 0, "Pending")),
            pod("unscheduled", 0, "Pending"),
        ];
        assert_eq!(
            order(pods),
            ["unscheduled", "pending-on-node", "running", "running-ready"]
        );
    }

    #[test]
    fn among_equals_recently_ready_then_newest_go_first() {
        let pods = vec![
            ready(on_node(pod("ready-long", 0, "Running")), 10),
            ready(on_node(pod("ready-recent", 0, "Running")), 50),
        ];
        assert_eq!(order(pods), ["ready-recent", "ready-long"]);
        let pods = vec![pod("old", 1, "Pending"), pod("new", 9, "Pending")];
        assert_eq!(order(pods), ["new", "old"]);
    }

    fn on(mut p: Pod, node: &str) -> Pod {
        p.spec.get_or_insert_with(PodSpec::default).node_name = Some(node.into());
        p
    }

    fn cost(mut p: Pod, cost: &str) -> Pod {
        p.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(DELETION_COST_ANNOTATION.into(), cost.into());
        p
    }

    fn ranked_order(pods: &[Pod]) -> Vec<String> {
        let mut refs: Vec<&Pod> = pods.iter().collect();
        sort_for_deletion(&mut refs, &pods.iter().collect::<Vec<_>>());
        refs.iter().map(|p| p.name_any()).collect()
    }

    #[test]
    fn the_cheapest_ready_pod_goes_before_its_older_and_newer_siblings() {
        let pods = vec![
            ready(on_node(pod("older", 0, "Running")), 5),
            ready(
                on_node(cost(pod("chosen", 10, "Running"), "-2147483648")),
                15,
            ),
            ready(on_node(pod("newer", 20, "Running")), 25),
        ];
        assert_eq!(ranked_order(&pods)[0], "chosen");
        // Jobs sort without costs (upstream's plain ActivePods): the newest ready goes first.
        assert_eq!(order(pods)[0], "newer");
    }

    #[test]
    fn deletion_cost_ranks_after_readiness_and_phase() {
        let pods = vec![
            ready(on_node(cost(pod("cheap-ready", 0, "Running"), "-100")), 5),
            on_node(cost(pod("costly-not-ready", 0, "Running"), "100")),
        ];
        assert_eq!(ranked_order(&pods), ["costly-not-ready", "cheap-ready"]);
        let pods = vec![
            ready(on_node(cost(pod("costly", 0, "Running"), "100")), 5),
            ready(on_node(pod("free", 0, "Running")), 5),
        ];
        assert_eq!(ranked_order(&pods), ["free", "costly"]);
    }

    #[test]
    fn invalid_deletion_costs_count_as_zero() {
        for (value, want) in [
            ("-5", -5),
            ("0", 0),
            ("42", 42),
            ("-2147483648", i32::MIN),
            ("+10", 0),
            ("007", 0),
            ("2147483648", 0),
            ("ten", 0),
            ("", 0),
        ] {
            assert_eq!(
                deletion_cost(&cost(pod("p", 0, "Running"), value)),
                want,
                "{value:?}"
            );
        }
        assert_eq!(deletion_cost(&pod("p", 0, "Running")), 0);
    }

    #[test]
    fn pods_on_crowded_nodes_go_first() {
        let pods = vec![
            ready(on(pod("alone", 5, "Running"), "n1"), 5),
            ready(on(pod("crowded-a", 0, "Running"), "n2"), 5),
            ready(on(pod("crowded-b", 0, "Running"), "n2"), 5),
        ];
        let order = ranked_order(&pods);
        assert_eq!(order[2], "alone", "{order:?}");
    }

    #[test]
    fn availability_waits_min_ready_seconds() {
        let p = ready(pod("p", 0, "Running"), 100);
        assert!(is_available(&p, 0, ts(100)));
        assert!(!is_available(&p, 10, ts(105)));
        assert_eq!(available_at(&p, 10, ts(105)), Some(ts(110)));
        assert!(is_available(&p, 10, ts(110)));
        assert_eq!(available_at(&p, 10, ts(110)), None);
        assert!(!is_available(&pod("q", 0, "Running"), 0, ts(0)));
    }

    #[test]
    fn terminal_and_deleting_pods_are_not_active() {
        assert!(is_active(&pod("p", 0, "Running")));
        assert!(!is_active(&pod("s", 0, "Succeeded")));
        assert!(!is_active(&pod("f", 0, "Failed")));
        let mut d = pod("d", 0, "Running");
        d.metadata.deletion_timestamp = Some(Time(ts(1)));
        assert!(!is_active(&d));
    }

    #[test]
    fn pods_from_a_template_carry_its_labels_and_the_owner() {
        let template = PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some([("app".to_owned(), "web".to_owned())].into()),
                annotations: Some([("a".to_owned(), "b".to_owned())].into()),
                ..ObjectMeta::default()
            }),
            spec: Some(PodSpec::default()),
        };
        let owner = OwnerReference {
            name: "web-1".into(),
            uid: "u1".into(),
            controller: Some(true),
            ..OwnerReference::default()
        };
        let extra = [("x".to_owned(), "y".to_owned())].into();
        let p = from_template(&template, "ns", "web-1-".into(), owner, &extra);
        assert_eq!(p.metadata.generate_name.as_deref(), Some("web-1-"));
        assert_eq!(p.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(p.labels().get("app").map(String::as_str), Some("web"));
        assert_eq!(p.labels().get("x").map(String::as_str), Some("y"));
        assert_eq!(p.annotations().get("a").map(String::as_str), Some("b"));
        assert_eq!(p.owner_references()[0].uid, "u1");
        assert!(p.spec.is_some());
    }
}
