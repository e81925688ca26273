//! kube-scheduler's default preemption (the DefaultPreemption PostFilter, v1.32), as pure
//! functions: whether a pod may preempt, which pods on a node it would evict
//! (`SelectVictimsOnNode`), how an extender's preempt answer maps back to pods
//! (`convertToVictims`), and which candidate node wins (`pickOneNodeForPreemption`). The scheduler
//! (`super`) calls them and makes the API calls (DisruptionTarget condition, deletion, Event,
//! nomination).
//!
//! Followed: pkg/scheduler/framework/preemption/preemption.go,
//! pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go,
//! pkg/scheduler/extender.go and pkg/scheduler/util/utils.go (`MoreImportantPod`,
//! `GetEarliestPodStartTime`). One difference: upstream dry-runs a random sample of the
//! candidate nodes (at least 100 or 10 %, `minCandidateNodesAbsolute/Percentage`); sim evaluates
//! every node, so on clusters of more than 100 nodes it may find a better candidate than
//! kube-scheduler would, never a worse one. Where upstream breaks the last tie by Go's map
//! order ("sort of randomly"), sim takes the first node by name.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use telemesh_core::extender::{MetaPod, MetaVictims, Victims};
use telemesh_core::fit::{self, NodeInfo, Resources};

use crate::storage::selectors::LabelSelector;

/// The preemption policy that never preempts (`spec.preemptionPolicy`).
pub const PREEMPT_NEVER: &str = "Never";

/// What SelectVictimsOnNode answers for a node with no lower-priority pod.
pub const NO_VICTIMS: &str = "No preemption victims found for incoming pod";

/// What a node preemption cannot help (UnschedulableAndUnresolvable in the filters) is marked.
pub const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";

/// The pod condition preemption adds to each victim before deleting it.
pub const DISRUPTION_TARGET: &str = "DisruptionTarget";

/// That condition's reason.
pub const REASON_PREEMPTION_BY_SCHEDULER: &str = "PreemptionByScheduler";

/// The condition's message: `<preemptor's schedulerName>: preempting to accommodate a higher
/// priority pod`, as `Evaluator.PreemptPod` writes it.
pub fn disruption_message(scheduler_name: &str) -> String {
    format!("{scheduler_name}: preempting to accommodate a higher priority pod")
}

/// The `Preempted` Event's note on a victim: `Preempted by pod <preemptor UID> on node <node>`.
pub fn preempted_note(preemptor_uid: &str, node: &str) -> String {
    format!("Preempted by pod {preemptor_uid} on node {node}")
}

/// A pod's priority: `spec.priority`, else 0 (`corev1helpers.PodPriority`).
pub fn priority(pod: &Pod) -> i32 {
    pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

/// When a pod started: `status.startTime`, else `now` (`util.GetPodStartTime`: assumed and
/// bound pods that have not started count as starting now).
pub fn start_time(pod: &Pod, now: jiff::Timestamp) -> jiff::Timestamp {
    pod.status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map_or(now, |t| t.0)
}

/// Whether `a` is more important than `b` (`util.MoreImportantPod`): higher priority, then the
/// one that started earlier.
pub fn more_important(a: &Pod, b: &Pod, now: jiff::Timestamp) -> bool {
    let (pa, pb) = (priority(a), priority(b));
    if pa != pb {
        return pa > pb;
    }
    start_time(a, now) < start_time(b, now)
}

/// Orders pods most important first, for sorting.
fn by_importance(a: &Pod, b: &Pod, now: jiff::Timestamp) -> Ordering {
    if more_important(a, b, now) {
        Ordering::Less
    } else if more_important(b, a, now) {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

/// Why a pod may not preempt (`PodEligibleToPreemptOthers`'s message), or `None` if it may.
/// `nominated_unresolvable`: the filters found the pod's nominated node
/// UnschedulableAndUnresolvable; `on_nominated_node`: the pods on that node.
pub fn ineligible(
    pod: &Pod,
    nominated_unresolvable: bool,
    on_nominated_node: &[&Pod],
) -> Option<&'static str> {
    let spec = pod.spec.as_ref();
    if spec.and_then(|s| s.preemption_policy.as_deref()) == Some(PREEMPT_NEVER) {
        return Some("not eligible due to preemptionPolicy=Never.");
    }
    let nominated = pod
        .status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref())
        .unwrap_or_default();
    if nominated.is_empty() || nominated_unresolvable {
        return None;
    }
    let preemptor = priority(pod);
    on_nominated_node
        .iter()
        .any(|p| priority(p) < preemptor && terminating_by_preemption(p))
        .then_some("not eligible due to a terminating pod on the nominated node.")
}

/// Whether a pod is being deleted because the scheduler preempted it
/// (`podTerminatingByPreemption`).
pub fn terminating_by_preemption(pod: &Pod) -> bool {
    if pod.metadata.deletion_timestamp.is_none() {
        return false;
    }
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == DISRUPTION_TARGET))
        .is_some_and(|c| {
            c.status == "True" && c.reason.as_deref() == Some(REASON_PREEMPTION_BY_SCHEDULER)
        })
}

/// A PodDisruptionBudget as preemption counts it: its namespace, selector, how many
/// disruptions its status allows and the pods the API server already counted as disrupted.
#[derive(Debug, Clone, Default)]
pub struct Budget {
    /// The PDB's namespace: it guards pods there only.
    pub namespace: String,
    /// Its selector; `None` when null, empty or invalid, which upstream treats as selecting
    /// nothing.
    pub selector: Option<LabelSelector>,
    /// `status.disruptionsAllowed`.
    pub disruptions_allowed: i32,
    /// `status.disruptedPods` names.
    pub disrupted_pods: BTreeSet<String>,
}

impl Budget {
    /// Reads a PodDisruptionBudget object.
    pub fn from_object(pdb: &PodDisruptionBudget) -> Self {
        let selector = pdb
            .spec
            .as_ref()
            .and_then(|s| s.selector.as_ref())
            .and_then(|s| serde_json::to_value(s).ok())
            .and_then(|v| LabelSelector::from_label_selector_object(&v).ok().flatten())
            .filter(|s| !s.is_empty());
        let status = pdb.status.as_ref();
        Self {
            namespace: pdb.metadata.namespace.clone().unwrap_or_default(),
            selector,
            disruptions_allowed: status.map_or(0, |s| s.disruptions_allowed),
            disrupted_pods: status
                .and_then(|s| s.disrupted_pods.as_ref())
                .map(|d| d.keys().cloned().collect())
                .unwrap_or_default(),
        }
    }

    fn guards(&self, pod: &Pod) -> bool {
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        pod.metadata.namespace.as_deref().unwrap_or_default() == self.namespace
            && self.selector.as_ref().is_some_and(|s| s.matches(&labels))
    }
}

/// Splits pods (in their order) into those whose eviction would violate a PodDisruptionBudget and
/// the rest (`filterPodsWithPDBViolation`): each matching budget's allowance is spent pod by pod,
/// and a pod already in a budget's `disruptedPods` spends nothing.
pub fn split_by_budget<'a>(pods: &[&'a Pod], budgets: &[Budget]) -> (Vec<&'a Pod>, Vec<&'a Pod>) {
    let mut allowed: Vec<i32> = budgets.iter().map(|b| b.disruptions_allowed).collect();
    let (mut violating, mut fine) = (Vec::new(), Vec::new());
    for pod in pods {
        let mut violated = false;
        // A pod with no labels matches no budget.
        if pod.metadata.labels.as_ref().is_some_and(|l| !l.is_empty()) {
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            for (i, budget) in budgets.iter().enumerate() {
                if !budget.guards(pod) || budget.disrupted_pods.contains(name) {
                    continue;
                }
                allowed[i] -= 1;
                if allowed[i] < 0 {
                    violated = true;
                }
            }
        }
        if violated {
            violating.push(*pod);
        } else {
            fine.push(*pod);
        }
    }
    (violating, fine)
}

/// Why preemption found no victims on a node: a status the node reports in the FitError, or an
/// error (upstream's `Error` code), which fails the whole attempt when no node is a candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoVictims {
    /// The node's status message (e.g. [`NO_VICTIMS`], `Insufficient cpu`).
    Unschedulable(String),
    /// Something preemption did not expect (a node where the pod fits with every victim back).
    Error(String),
}

/// Finds the fewest, least important pods on one node whose removal lets `pod` fit
/// (`SelectVictimsOnNode`): every lower-priority pod is removed; if `pod` then fits, victims are
/// reprieved one by one, PDB-violating ones first, each group most important first, keeping each
/// that still leaves room. `node` is the node as the filters see it (its pods and the nominated
/// pods that outrank `pod`), `on_node` the pods running there. Returns the victims (most
/// important first) with the number of PDB violations, or the node's status message.
pub fn select_victims_on_node(
    pod: &Pod,
    requests: &Resources,
    node: &NodeInfo,
    on_node: &[&Pod],
    budgets: &[Budget],
    ignored: &BTreeSet<String>,
    now: jiff::Timestamp,
) -> Result<Victims, NoVictims> {
    let preemptor = priority(pod);
    let mut potential: Vec<&Pod> = on_node
        .iter()
        .copied()
        .filter(|p| priority(p) < preemptor)
        .collect();
    if potential.is_empty() {
        return Err(NoVictims::Unschedulable(NO_VICTIMS.to_owned()));
    }
    let mut info = node.clone();
    for victim in &potential {
        info.remove(&fit::pod_requests(victim));
    }
    fit::check(pod, requests, &info, ignored)
        .map_err(|unfit| NoVictims::Unschedulable(unfit.to_string()))?;
    potential.sort_by(|a, b| by_importance(a, b, now));
    let (violating, fine) = split_by_budget(&potential, budgets);
    let mut victims: Vec<&Pod> = Vec::new();
    let mut violations = 0;
    let reprieve = |victim: &Pod, info: &mut NodeInfo| -> bool {
        let requests_of_victim = fit::pod_requests(victim);
        info.add(&requests_of_victim);
        let fits = fit::check(pod, requests, info, ignored).is_ok();
        if !fits {
            info.remove(&requests_of_victim);
        }
        fits
    };
    for victim in &violating {
        if !reprieve(victim, &mut info) {
            victims.push(victim);
            violations += 1;
        }
    }
    for victim in &fine {
        if !reprieve(victim, &mut info) {
            victims.push(victim);
        }
    }
    if victims.is_empty() {
        return Err(NoVictims::Error(format!(
            "expected at least one victim pod on node {:?}",
            node.name
        )));
    }
    if !violating.is_empty() && !fine.is_empty() {
        victims.sort_by(|a, b| by_importance(a, b, now));
    }
    Ok(Victims {
        pods: victims.into_iter().cloned().collect(),
        num_pdb_violations: violations,
    })
}

/// Turns an extender's preempt answer (victims by UID) back into pods on each node
/// (`HTTPExtender.convertToVictims`), then drops or refuses nodes left without victims as
/// `Evaluator.callExtenders` does (dropped when the extender is ignorable, an error otherwise).
/// A node or UID the scheduler does not know is an error, as upstream.
pub fn convert_to_victims(
    extender: &str,
    answer: &BTreeMap<String, MetaVictims>,
    on_nodes: &BTreeMap<String, Vec<&Pod>>,
    ignorable: bool,
) -> Result<BTreeMap<String, Victims>, String> {
    let mut out = BTreeMap::new();
    for (node, meta) in answer {
        let Some(pods) = on_nodes.get(node) else {
            return Err(format!("nodeinfo not found for node name {node:?}"));
        };
        let mut victims = Victims {
            pods: Vec::new(),
            num_pdb_violations: meta.num_pdb_violations,
        };
        for MetaPod { uid } in &meta.pods {
            let Some(pod) = pods.iter().find(|p| p.metadata.uid.as_deref() == Some(uid)) else {
                // Go prints the *MetaPod as &{<uid>}.
                return Err(format!(
                    "extender: {extender} claims to preempt pod (UID: &{{{uid}}}) on node: {node}, but the pod is not found on that node"
                ));
            };
            victims.pods.push((*pod).clone());
        }
        out.insert(node.clone(), victims);
    }
    let empty: Vec<String> = out
        .iter()
        .filter(|(_, v)| v.pods.is_empty())
        .map(|(n, _)| n.clone())
        .collect();
    for node in empty {
        if !ignorable {
            return Err(format!("expected at least one victim pod on node {node:?}"));
        }
        out.remove(&node);
    }
    Ok(out)
}

/// Picks the node to preempt on (`pickOneNodeForPreemption`), by upstream's criteria in order:
/// fewest PDB violations, lowest highest-priority victim, smallest sum of victim priorities,
/// fewest victims, latest start of the highest-priority victims; then the first by name.
/// Like upstream, it reads each node's highest-priority victim as its first pod.
pub fn pick_one_node(
    candidates: &BTreeMap<String, Victims>,
    now: jiff::Timestamp,
) -> Option<String> {
    type Score<'a> = Box<dyn Fn(&Victims) -> i64 + 'a>;
    let scores: [Score<'_>; 5] = [
        Box::new(|v| -v.num_pdb_violations),
        Box::new(|v| -i64::from(v.pods.first().map_or(0, priority))),
        Box::new(|v| {
            // Shifted by MaxInt32+1 so that a few negative-priority victims never beat fewer
            // victims of the same priority.
            -v.pods
                .iter()
                .map(|p| i64::from(priority(p)) + i64::from(i32::MAX) + 1)
                .sum::<i64>()
        }),
        Box::new(|v| -i64::try_from(v.pods.len()).unwrap_or(i64::MAX)),
        Box::new(move |v| {
            earliest_start_of_highest(v, now).map_or(i64::MIN, |t| {
                i64::try_from(t.as_nanosecond()).unwrap_or(i64::MAX)
            })
        }),
    ];
    let mut left: Vec<&String> = candidates.keys().collect();
    for score in &scores {
        let scored: Vec<(i64, &String)> = left
            .iter()
            .map(|n| (candidates.get(*n).map_or(i64::MIN, score), *n))
            .collect();
        let best = scored.iter().map(|(s, _)| *s).max()?;
        left = scored
            .into_iter()
            .filter(|(s, _)| *s == best)
            .map(|(_, n)| n)
            .collect();
        if left.len() == 1 {
            break;
        }
    }
    left.first().map(|n| (*n).clone())
}

/// The earliest start among the victims of the highest priority (`GetEarliestPodStartTime`).
fn earliest_start_of_highest(victims: &Victims, now: jiff::Timestamp) -> Option<jiff::Timestamp> {
    let top = victims.pods.iter().map(priority).max()?;
    victims
        .pods
        .iter()
        .filter(|p| priority(p) == top)
        .map(|p| start_time(p, now))
        .min()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
