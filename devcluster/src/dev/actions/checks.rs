//! What counts as success for each of the seed's calls, decided from what the API shows before
//! and after: the action's phase, the workload's replica count and its pods (by UID, so a pod
//! replaced under the same name, as a StatefulSet does, counts as replaced). Pure functions; the
//! story polls them until they pass or its deadline ends.

use std::collections::BTreeSet;

use telemesh_core::action::ActionPhase;

/// What a check saw: `Ok(what happened, for a person)` or `Err(what is not (yet) so)`.
pub type Verdict = Result<String, String>;

/// A pod as the checks see it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodSeen {
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
    /// The node it is bound to.
    pub node: Option<String>,
    /// Running with its Ready condition True.
    pub ready: bool,
    /// Has a deletionTimestamp: on its way out.
    pub deleting: bool,
    /// creationTimestamp (RFC 3339), for "the newest pod".
    pub created: String,
    /// The first container's cpu request, as written.
    pub cpu_request: Option<String>,
}

/// A workload (Deployment or StatefulSet) as the checks see it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkloadSeen {
    /// `spec.replicas`.
    pub replicas: i32,
    /// Its pods, terminating ones included.
    pub pods: Vec<PodSeen>,
}

/// The action as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActionSeen {
    /// Its phase.
    pub phase: ActionPhase,
    /// Its message.
    pub message: String,
}

/// A container's resources in the pod template.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourcesSeen {
    /// requests.cpu
    pub cpu_request: Option<String>,
    /// limits.cpu
    pub cpu_limit: Option<String>,
    /// requests.memory
    pub memory_request: Option<String>,
    /// limits.memory
    pub memory_limit: Option<String>,
}

impl WorkloadSeen {
    /// Pods not being deleted.
    pub fn live(&self) -> impl Iterator<Item = &PodSeen> {
        self.pods.iter().filter(|p| !p.deleting)
    }

    fn live_uid(&self, uid: &str) -> bool {
        self.live().any(|p| p.uid == uid)
    }

    /// Live pods whose UID was not live in `before`.
    fn new_since<'a>(&'a self, before: &WorkloadSeen) -> Vec<&'a PodSeen> {
        let old: BTreeSet<&str> = before.pods.iter().map(|p| p.uid.as_str()).collect();
        self.live()
            .filter(|p| !old.contains(p.uid.as_str()))
            .collect()
    }

    /// `Err` naming a pod of `before` (other than `except`) that is gone from `self`.
    fn kept_others(&self, before: &WorkloadSeen, except: &[&str]) -> Result<(), String> {
        match before
            .live()
            .find(|p| !except.contains(&p.uid.as_str()) && !self.live_uid(&p.uid))
        {
            Some(p) => Err(format!("{} went too, though it was not asked to", p.name)),
            None => Ok(()),
        }
    }
}

/// The first live pod on `node` in name order: the seed's `kubectl get pods -o wide | grep NODE
/// | head -n 1` (kubectl lists by name).
pub fn first_pod_on<'a>(w: &'a WorkloadSeen, node: &str) -> Option<&'a PodSeen> {
    w.live()
        .filter(|p| p.node.as_deref() == Some(node))
        .min_by(|a, b| a.name.cmp(&b.name))
}

/// The pod the seed binds after UpdateResources: the newest (creationTimestamp, then name, as
/// `--sort-by=.metadata.creationTimestamp ... items[-1]`) among live pods that no scheduler has
/// placed and that already carry the new cpu request.
pub fn next_to_bind<'a>(w: &'a WorkloadSeen, cpu_request: &str) -> Option<&'a PodSeen> {
    w.live()
        .filter(|p| p.node.is_none() && p.cpu_request.as_deref() == Some(cpu_request))
        .max_by(|a, b| (&a.created, &a.name).cmp(&(&b.created, &b.name)))
}

fn succeeded(action: &ActionSeen) -> Result<(), String> {
    match action.phase {
        ActionPhase::Succeeded => Ok(()),
        phase if phase.is_terminal() => Err(format!(
            "the action ended {}: {}",
            phase.as_str(),
            action.message
        )),
        phase => Err(format!("the action is still {}", phase.as_str())),
    }
}

fn replicas_are(w: &WorkloadSeen, want: i32, what: &str) -> Result<(), String> {
    if w.replicas == want {
        Ok(())
    } else {
        Err(format!("{what} has replicas {}, not {want}", w.replicas))
    }
}

/// The one new pod of `after`, Running and Ready on `node`.
fn one_new_ready_on<'a>(
    before: &WorkloadSeen,
    after: &'a WorkloadSeen,
    node: &str,
) -> Result<&'a PodSeen, String> {
    let new = after.new_since(before);
    let [pod] = new.as_slice() else {
        return Err(format!(
            "{} new pods instead of one ({})",
            new.len(),
            names(&new)
        ));
    };
    if pod.node.as_deref() != Some(node) {
        return Err(format!(
            "the new pod {} is on {}, not {node}",
            pod.name,
            pod.node.as_deref().unwrap_or("no node yet")
        ));
    }
    if !pod.ready {
        return Err(format!(
            "the new pod {} on {node} is not Ready yet",
            pod.name
        ));
    }
    Ok(pod)
}

fn names(pods: &[&PodSeen]) -> String {
    pods.iter()
        .map(|p| p.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn gone(after: &WorkloadSeen, target: &PodSeen) -> Result<(), String> {
    if after.live_uid(&target.uid) {
        Err(format!("{} is still there", target.name))
    } else {
        Ok(())
    }
}

/// action.Create: Succeeded, one replica more, exactly one new pod and it is Running and Ready on
/// `node`, every other pod still there.
pub fn created_on(
    action: &ActionSeen,
    before: &WorkloadSeen,
    after: &WorkloadSeen,
    node: &str,
) -> Verdict {
    succeeded(action)?;
    replicas_are(after, before.replicas + 1, "the workload")?;
    let pod = one_new_ready_on(before, after, node)?;
    after.kept_others(before, &[])?;
    Ok(format!(
        "{} Running and Ready on {node}; replicas {} -> {}",
        pod.name, before.replicas, after.replicas
    ))
}

/// action.Delete: Succeeded, exactly `target` gone (no other pod), one replica fewer, and as many
/// live pods as replicas.
pub fn deleted(
    action: &ActionSeen,
    before: &WorkloadSeen,
    after: &WorkloadSeen,
    target: &PodSeen,
) -> Verdict {
    succeeded(action)?;
    gone(after, target)?;
    after.kept_others(before, &[&target.uid])?;
    replicas_are(after, before.replicas - 1, "the workload")?;
    let live = after.live().count();
    if live != usize::try_from(after.replicas).unwrap_or_default() {
        return Err(format!(
            "{live} live pods for {} replicas (a replacement?)",
            after.replicas
        ));
    }
    Ok(format!(
        "exactly {} is gone, every other pod stays; replicas {} -> {}",
        target.name, before.replicas, after.replicas
    ))
}

/// action.Move: Succeeded, `target` gone, its replacement Running and Ready on `node`, the
/// replica count as before, and never fewer Ready pods than replicas while it ran
/// (`min_ready`: the fewest Ready pods seen during the action).
pub fn moved(
    action: &ActionSeen,
    before: &WorkloadSeen,
    after: &WorkloadSeen,
    target: &PodSeen,
    node: &str,
    min_ready: Option<usize>,
) -> Verdict {
    succeeded(action)?;
    gone(after, target)?;
    after.kept_others(before, &[&target.uid])?;
    replicas_are(after, before.replicas, "the workload")?;
    let pod = one_new_ready_on(before, after, node)?;
    let floor = usize::try_from(before.replicas).unwrap_or_default();
    let min_ready = min_ready.ok_or("the Ready pods were not followed during the move")?;
    if min_ready < floor {
        return Err(format!(
            "only {min_ready} Ready pods at one point during the move, below {floor} replicas"
        ));
    }
    Ok(format!(
        "{} replaced by {} (Running and Ready on {node}); replicas stay {}; never fewer than {min_ready} Ready pods meanwhile",
        target.name, pod.name, after.replicas
    ))
}

/// action.Swap: Succeeded, `x` (of A) and `y` (of B) gone, A has a new Ready pod on y's node and
/// B one on x's node, both replica counts as before.
pub fn swapped(
    action: &ActionSeen,
    (a_before, a_after, x): (&WorkloadSeen, &WorkloadSeen, &PodSeen),
    (b_before, b_after, y): (&WorkloadSeen, &WorkloadSeen, &PodSeen),
) -> Verdict {
    succeeded(action)?;
    let (Some(x_node), Some(y_node)) = (x.node.as_deref(), y.node.as_deref()) else {
        return Err("the swapped pods were not both on nodes".into());
    };
    gone(a_after, x)?;
    gone(b_after, y)?;
    replicas_are(a_after, a_before.replicas, "x's workload")?;
    replicas_are(b_after, b_before.replicas, "y's workload")?;
    let a_new =
        one_new_ready_on(a_before, a_after, y_node).map_err(|e| format!("x's side: {e}"))?;
    let b_new =
        one_new_ready_on(b_before, b_after, x_node).map_err(|e| format!("y's side: {e}"))?;
    a_after.kept_others(a_before, &[&x.uid])?;
    b_after.kept_others(b_before, &[&y.uid])?;
    Ok(format!(
        "{} now runs as {} on {y_node}, {} as {} on {x_node}; replicas stay {} and {}",
        x.name, a_new.name, y.name, b_new.name, a_after.replicas, b_after.replicas
    ))
}

/// action.Bind: Succeeded and the very pod (same UID) bound to `node`, Running and Ready.
pub fn bound(action: &ActionSeen, after: &WorkloadSeen, target: &PodSeen, node: &str) -> Verdict {
    succeeded(action)?;
    let Some(pod) = after.live().find(|p| p.uid == target.uid) else {
        return Err(format!("{} is gone", target.name));
    };
    if pod.node.as_deref() != Some(node) {
        return Err(format!(
            "{} is on {}, not {node}",
            pod.name,
            pod.node.as_deref().unwrap_or("no node")
        ));
    }
    if !pod.ready {
        return Err(format!("{} is bound to {node} but not Ready yet", pod.name));
    }
    Ok(format!("{} bound to {node}, Running and Ready", pod.name))
}

/// action.Redeploy: Succeeded, `target` gone, the replica count unchanged and the controller's
/// replacement Running and Ready (as many Ready pods as replicas).
pub fn redeployed(
    action: &ActionSeen,
    before: &WorkloadSeen,
    after: &WorkloadSeen,
    target: &PodSeen,
) -> Verdict {
    succeeded(action)?;
    gone(after, target)?;
    after.kept_others(before, &[&target.uid])?;
    replicas_are(after, before.replicas, "the workload")?;
    let new = after.new_since(before);
    let [pod] = new.as_slice() else {
        return Err(format!(
            "{} replacement pods instead of one ({})",
            new.len(),
            names(&new)
        ));
    };
    if !pod.ready {
        return Err(format!("the replacement {} is not Ready yet", pod.name));
    }
    Ok(format!(
        "{} terminated; its controller replaced it with {} (on {}); replicas stay {}",
        target.name,
        pod.name,
        pod.node.as_deref().unwrap_or("no node"),
        after.replicas
    ))
}

/// action.UpdateResources: Succeeded and the template's container carries every value asked,
/// the others as they were.
pub fn resources_updated(
    action: &ActionSeen,
    before: &ResourcesSeen,
    after: &ResourcesSeen,
    asked: &ResourcesSeen,
) -> Verdict {
    succeeded(action)?;
    let fields = [
        (
            "cpu request",
            &before.cpu_request,
            &after.cpu_request,
            &asked.cpu_request,
        ),
        (
            "cpu limit",
            &before.cpu_limit,
            &after.cpu_limit,
            &asked.cpu_limit,
        ),
        (
            "memory request",
            &before.memory_request,
            &after.memory_request,
            &asked.memory_request,
        ),
        (
            "memory limit",
            &before.memory_limit,
            &after.memory_limit,
            &asked.memory_limit,
        ),
    ];
    let mut changed = Vec::new();
    for (what, was, is, want) in fields {
        let expected = want.as_ref().or(was.as_ref());
        if is.as_ref() != expected {
            return Err(format!("the template's {what} is {is:?}, not {expected:?}"));
        }
        if let Some(want) = want {
            changed.push(format!(
                "{what} {} -> {want}",
                was.as_deref().unwrap_or("unset")
            ));
        }
    }
    Ok(format!("the pod template now has {}", changed.join(", ")))
}

/// The rollout after UpdateResources and the Binds: as many live pods as replicas, every one
/// with the new cpu request, Running and Ready on `node`; no old pod left.
pub fn rolled_out(after: &WorkloadSeen, cpu_request: &str, node: &str) -> Verdict {
    let live: Vec<&PodSeen> = after.live().collect();
    if live.len() != usize::try_from(after.replicas).unwrap_or_default() {
        return Err(format!(
            "{} live pods for {} replicas",
            live.len(),
            after.replicas
        ));
    }
    if let Some(old) = live
        .iter()
        .find(|p| p.cpu_request.as_deref() != Some(cpu_request))
    {
        return Err(format!(
            "{} still has the old cpu request {}",
            old.name,
            old.cpu_request.as_deref().unwrap_or("unset")
        ));
    }
    if let Some(p) = live
        .iter()
        .find(|p| p.node.as_deref() != Some(node) || !p.ready)
    {
        return Err(format!("{} is not Running and Ready on {node}", p.name));
    }
    Ok(format!(
        "all {} pods have cpu request {cpu_request} and run on {node} ({}); the old ones are gone",
        live.len(),
        names(&live)
    ))
}

/// action.Scale: Succeeded, `spec.replicas` is `want`, and exactly that many live pods, all
/// Running and Ready (the default scheduler places the new ones).
pub fn scaled(
    action: &ActionSeen,
    before: &WorkloadSeen,
    after: &WorkloadSeen,
    want: i32,
) -> Verdict {
    succeeded(action)?;
    replicas_are(after, want, "the workload")?;
    let live: Vec<&PodSeen> = after.live().collect();
    if live.len() != usize::try_from(want).unwrap_or_default() {
        return Err(format!("{} live pods, not {want}", live.len()));
    }
    if let Some(p) = live.iter().find(|p| !p.ready) {
        return Err(format!("{} is not Running and Ready yet", p.name));
    }
    Ok(format!(
        "replicas {} -> {want}: {} Running and Ready",
        before.replicas,
        names(&live)
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn pod(name: &str, node: Option<&str>, ready: bool) -> PodSeen {
        PodSeen {
            name: name.into(),
            uid: format!("uid-{name}"),
            node: node.map(Into::into),
            ready,
            ..PodSeen::default()
        }
    }

    fn workload(replicas: i32, pods: &[PodSeen]) -> WorkloadSeen {
        WorkloadSeen {
            replicas,
            pods: pods.to_vec(),
        }
    }

    fn done() -> ActionSeen {
        ActionSeen {
            phase: ActionPhase::Succeeded,
            message: String::new(),
        }
    }

    #[test]
    fn create_needs_success_one_more_replica_and_the_new_pod_ready_on_the_node() {
        let before = workload(1, &[pod("a-1", Some("n1"), true)]);
        let good = workload(
            2,
            &[pod("a-1", Some("n1"), true), pod("a-2", Some("n3"), true)],
        );
        assert!(created_on(&done(), &before, &good, "n3").is_ok());
        // Elsewhere, not yet Ready, not yet counted, or the action did not succeed.
        let elsewhere = workload(
            2,
            &[pod("a-1", Some("n1"), true), pod("a-2", Some("n2"), true)],
        );
        assert!(
            created_on(&done(), &before, &elsewhere, "n3")
                .unwrap_err()
                .contains("n2")
        );
        let unready = workload(
            2,
            &[pod("a-1", Some("n1"), true), pod("a-2", Some("n3"), false)],
        );
        assert!(created_on(&done(), &before, &unready, "n3").is_err());
        assert!(created_on(&done(), &before, &workload(1, &good.pods), "n3").is_err());
        let failed = ActionSeen {
            phase: ActionPhase::Failed,
            message: "node n3 cannot take the pod".into(),
        };
        let why = created_on(&failed, &before, &good, "n3").unwrap_err();
        assert!(why.contains("Failed: node n3 cannot take the pod"), "{why}");
        let running = ActionSeen {
            phase: ActionPhase::Running,
            ..done()
        };
        assert!(created_on(&running, &before, &good, "n3").is_err());
        // An old pod that went is a failure too.
        let lost = workload(
            2,
            &[pod("a-2", Some("n3"), true), pod("a-3", Some("n3"), true)],
        );
        assert!(created_on(&done(), &before, &lost, "n3").is_err());
    }

    #[test]
    fn delete_needs_exactly_that_pod_gone_and_one_replica_fewer() {
        let (x, y) = (pod("a-1", Some("n1"), true), pod("a-2", Some("n2"), true));
        let before = workload(2, &[x.clone(), y.clone()]);
        assert!(deleted(&done(), &before, &workload(1, std::slice::from_ref(&y)), &x).is_ok());
        // A terminating pod counts as gone.
        let terminating = PodSeen {
            deleting: true,
            ..x.clone()
        };
        assert!(
            deleted(
                &done(),
                &before,
                &workload(1, &[terminating, y.clone()]),
                &x
            )
            .is_ok()
        );
        // WAM's defect: a different pod went.
        let why =
            deleted(&done(), &before, &workload(1, std::slice::from_ref(&x)), &x).unwrap_err();
        assert!(why.contains("a-1 is still there"), "{why}");
        let why = deleted(&done(), &before, &workload(1, &[]), &x).unwrap_err();
        assert!(why.contains("a-2 went too"), "{why}");
        // The count did not drop: a replacement came.
        let replaced = workload(2, &[y.clone(), pod("a-3", Some("n1"), true)]);
        assert!(deleted(&done(), &before, &replaced, &x).is_err());
    }

    #[test]
    fn move_needs_the_replacement_ready_on_the_node_and_no_dip_below_the_count() {
        let old = pod("a-1", Some("n2"), true);
        let before = workload(1, std::slice::from_ref(&old));
        let after = workload(1, &[pod("a-2", Some("n1"), true)]);
        assert!(moved(&done(), &before, &after, &old, "n1", Some(1)).is_ok());
        let why = moved(&done(), &before, &after, &old, "n1", Some(0)).unwrap_err();
        assert!(why.contains("below 1 replicas"), "{why}");
        assert!(moved(&done(), &before, &after, &old, "n1", None).is_err());
        assert!(moved(&done(), &before, &after, &old, "n3", Some(1)).is_err());
        let both = workload(1, &[old.clone(), pod("a-2", Some("n1"), true)]);
        assert!(moved(&done(), &before, &both, &old, "n1", Some(1)).is_err());
        let rolled_back = ActionSeen {
            phase: ActionPhase::RolledBack,
            message: "the new pod was not Ready within 5m".into(),
        };
        assert!(moved(&rolled_back, &before, &after, &old, "n1", Some(1)).is_err());
    }

    #[test]
    fn swap_needs_each_side_on_the_others_node() {
        let x = pod("a-1", Some("n1"), true);
        let (y, y2) = (pod("b-1", Some("n2"), true), pod("b-2", Some("n2"), true));
        let a_before = workload(1, std::slice::from_ref(&x));
        let b_before = workload(2, &[y.clone(), y2.clone()]);
        let a_after = workload(1, &[pod("a-9", Some("n2"), true)]);
        let b_after = workload(2, &[y2.clone(), pod("b-9", Some("n1"), true)]);
        assert!(
            swapped(
                &done(),
                (&a_before, &a_after, &x),
                (&b_before, &b_after, &y)
            )
            .is_ok()
        );
        // B's replacement on the wrong node, or B's other pod lost.
        let b_wrong = workload(2, &[y2.clone(), pod("b-9", Some("n2"), true)]);
        assert!(
            swapped(
                &done(),
                (&a_before, &a_after, &x),
                (&b_before, &b_wrong, &y)
            )
            .is_err()
        );
        let b_lost = workload(
            2,
            &[pod("b-9", Some("n1"), true), pod("b-8", Some("n1"), true)],
        );
        assert!(swapped(&done(), (&a_before, &a_after, &x), (&b_before, &b_lost, &y)).is_err());
    }

    #[test]
    fn bind_needs_the_same_pod_ready_on_the_node() {
        let pending = pod("c-0", None, false);
        let before_uid = pending.uid.clone();
        let after = workload(2, &[pod("c-0", Some("n3"), true), pod("c-1", None, false)]);
        assert!(bound(&done(), &after, &pending, "n3").is_ok());
        // Recreated under the same name (a new UID) is not the pod that was bound.
        let recreated = PodSeen {
            uid: "other".into(),
            ..pod("c-0", Some("n3"), true)
        };
        assert_ne!(recreated.uid, before_uid);
        assert!(bound(&done(), &workload(2, &[recreated]), &pending, "n3").is_err());
        assert!(
            bound(
                &done(),
                &workload(2, &[pod("c-0", Some("n3"), false)]),
                &pending,
                "n3"
            )
            .is_err()
        );
    }

    #[test]
    fn redeploy_needs_the_pod_replaced_and_the_count_unchanged() {
        let (p, q) = (pod("s-1", Some("n1"), true), pod("s-2", Some("n2"), true));
        let before = workload(2, &[p.clone(), q.clone()]);
        let after = workload(2, &[q.clone(), pod("s-3", Some("n2"), true)]);
        assert!(redeployed(&done(), &before, &after, &p).is_ok());
        assert!(redeployed(&done(), &before, &workload(1, std::slice::from_ref(&q)), &p).is_err());
        let unready = workload(2, &[q.clone(), pod("s-3", None, false)]);
        assert!(redeployed(&done(), &before, &unready, &p).is_err());
    }

    #[test]
    fn update_resources_sets_what_was_asked_and_keeps_the_rest() {
        let before = ResourcesSeen {
            cpu_request: Some("1m".into()),
            cpu_limit: Some("20m".into()),
            memory_request: Some("128Mi".into()),
            memory_limit: None,
        };
        let asked = ResourcesSeen {
            cpu_request: Some("50m".into()),
            cpu_limit: Some("200m".into()),
            ..ResourcesSeen::default()
        };
        let after = ResourcesSeen {
            cpu_request: Some("50m".into()),
            cpu_limit: Some("200m".into()),
            ..before.clone()
        };
        let said = resources_updated(&done(), &before, &after, &asked).unwrap();
        assert!(said.contains("cpu request 1m -> 50m"), "{said}");
        let lost_memory = ResourcesSeen {
            memory_request: None,
            ..after.clone()
        };
        assert!(resources_updated(&done(), &before, &lost_memory, &asked).is_err());
        assert!(resources_updated(&done(), &before, &before, &asked).is_err());
    }

    #[test]
    fn the_rollout_is_done_when_every_pod_is_new_and_ready_on_the_node() {
        let new = |name: &str, node: Option<&str>, ready| PodSeen {
            cpu_request: Some("50m".into()),
            ..pod(name, node, ready)
        };
        let old = PodSeen {
            cpu_request: Some("1m".into()),
            ..pod("p-old", None, false)
        };
        let done_state = workload(
            2,
            &[new("p-1", Some("n3"), true), new("p-2", Some("n3"), true)],
        );
        assert!(rolled_out(&done_state, "50m", "n3").is_ok());
        let half = workload(2, &[new("p-1", Some("n3"), true), old.clone()]);
        assert!(
            rolled_out(&half, "50m", "n3")
                .unwrap_err()
                .contains("p-old")
        );
        // The next pod to bind is the newest unplaced one with the new request.
        let mut pending = workload(
            2,
            &[new("p-1", Some("n3"), true), old, new("p-2", None, false)],
        );
        assert_eq!(next_to_bind(&pending, "50m").unwrap().name, "p-2");
        pending.pods[2].node = Some("n3".into());
        assert_eq!(next_to_bind(&pending, "50m"), None);
    }

    #[test]
    fn scale_needs_the_count_and_that_many_ready_pods() {
        let before = workload(
            2,
            &[pod("s-1", Some("n1"), true), pod("s-2", Some("n2"), true)],
        );
        let after = workload(1, &[pod("s-1", Some("n1"), true)]);
        assert!(scaled(&done(), &before, &after, 1).is_ok());
        let settling = workload(
            1,
            &[
                pod("s-1", Some("n1"), true),
                PodSeen {
                    deleting: true,
                    ..pod("s-2", Some("n2"), true)
                },
            ],
        );
        assert!(scaled(&done(), &before, &settling, 1).is_ok());
        assert!(scaled(&done(), &before, &before, 1).is_err());
        let up = workload(4, &[pod("s-1", Some("n1"), true), pod("s-3", None, false)]);
        assert!(scaled(&done(), &after, &up, 4).is_err());
    }

    #[test]
    fn the_seeds_pod_choices() {
        let w = workload(
            3,
            &[
                pod("b-2", Some("n2"), true),
                pod("b-1", Some("n2"), true),
                pod("b-0", Some("n1"), true),
            ],
        );
        assert_eq!(first_pod_on(&w, "n2").unwrap().name, "b-1");
        assert_eq!(first_pod_on(&w, "n3"), None);
    }
}
