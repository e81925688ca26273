//! Start failures: which pods on this node failed to start *because of this node*, each counted
//! once (core's `Observation::StartFailed`, weighed as a crash). Pure; the reward loop looks up
//! the Events this asks for and feeds what it decides to the estimates.
//!
//! What the kubelet shows of a pod that does not start: the pod stays `Pending` with its
//! containers waiting (`ContainerCreating` while there is no sandbox or a volume is not
//! mounted; `ErrImagePull`, then `ImagePullBackOff`; `ErrImageNeverPull`; `InvalidImageName`;
//! `CreateContainerConfigError`), and the cause is in its Events on the pod:
//! `FailedCreatePodSandBox`, `FailedAttachVolume`, `FailedMapVolume`, `FailedMount`,
//! `Failed` ("Failed to pull image ..."), `ErrImageNeverPull`.
//!
//! The decision:
//! - A pod is *stuck* while it is `Pending`, scheduled here, and a container waits for a start
//!   reason (above) or none has a status yet. Only what the agent saw counts: the grace starts at
//!   the first look that found it stuck (a pod stuck before a restart of the agent, perhaps
//!   already counted, is given the grace again).
//! - Stuck for `grace` (`--reward-start-grace`): its Events are looked up (one list call), again
//!   every further `grace` while it stays stuck and nothing was counted, never more often.
//! - It counts, once, when the Events or the container statuses show a cause this node owns:
//!   a sandbox that cannot be created (CNI, runtime), a volume that does not attach, map or mount
//!   here (CSI driver missing on the node, attach limits, a volume attached elsewhere, mount
//!   timeouts), an image this node cannot pull for want of its network or disk (timeouts, refused
//!   connections, DNS, TLS, no space left, rate limits), or `ErrImageNeverPull` (the image is not
//!   on this node).
//! - It never counts for a cause every node would share: a missing Secret or ConfigMap (a mount's
//!   `secret "x" not found`, `CreateContainerConfigError`), an image reference that does not parse
//!   (`InvalidImageName`), an image the registry does not have or refuses (`not found`, `manifest
//!   unknown`, `pull access denied`, `unauthorized`). These fail the pod on every node, so they
//!   say nothing of this one. A transport failure that is in fact the registry's (down for
//!   everyone) is counted on every node alike and leaves their ranking as it was.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

/// Container waiting reasons of a pod that has not started (the kubelet's).
const START_REASONS: [&str; 7] = [
    "ContainerCreating",
    "ErrImagePull",
    "ImagePullBackOff",
    "ErrImageNeverPull",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
];

/// An Event the kubelet recorded on a pod: its reason and message (`note`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodEvent {
    /// `FailedMount`, `FailedCreatePodSandBox`, `Failed`, ...
    pub reason: String,
    /// The message.
    pub message: String,
}

/// Why a pod did not start, as the kubelet says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// The Event's or waiting state's reason.
    pub reason: String,
    /// Its message.
    pub message: String,
}

/// What the learner remembers of a pod's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StartMemory {
    /// Since when the agent has seen it stuck.
    pub stuck_since_ms: Option<u64>,
    /// When its Events were last looked at.
    pub looked_ms: Option<u64>,
    /// Its start failure was counted (never again for this pod).
    pub counted: bool,
}

/// What to do about a pod's start now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartStep {
    /// Nothing: started, not stuck long enough, already counted, or looked at recently.
    Nothing,
    /// Stuck past the grace: look up its Events and decide again with them.
    LookUp,
    /// This node failed to start it: count one `StartFailed`.
    Count(Cause),
}

/// Decides what a look at `pod` at `now_ms` means for its start: the new memory and the step.
/// `events` are the pod's Events when they were looked up for this look (`None`: not looked up).
pub fn start_failure(
    memory: StartMemory,
    pod: &Pod,
    events: Option<&[PodEvent]>,
    now_ms: u64,
    grace: Duration,
) -> (StartMemory, StartStep) {
    if memory.counted {
        return (memory, StartStep::Nothing);
    }
    if !stuck(pod) {
        return (StartMemory::default(), StartStep::Nothing);
    }
    let since = memory.stuck_since_ms.unwrap_or(now_ms);
    let mut memory = StartMemory {
        stuck_since_ms: Some(since),
        ..memory
    };
    let grace_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
    let due = now_ms.saturating_sub(since) >= grace_ms
        && memory
            .looked_ms
            .is_none_or(|at| now_ms.saturating_sub(at) >= grace_ms);
    if !due {
        return (memory, StartStep::Nothing);
    }
    let Some(events) = events else {
        return (memory, StartStep::LookUp);
    };
    memory.looked_ms = Some(now_ms);
    match node_cause(pod, events) {
        Some(cause) => {
            memory.counted = true;
            (memory, StartStep::Count(cause))
        }
        None => (memory, StartStep::Nothing),
    }
}

/// Whether `pod` is waiting to start its containers on its node.
fn stuck(pod: &Pod) -> bool {
    let Some(status) = pod.status.as_ref() else {
        return false;
    };
    if status.phase.as_deref() != Some("Pending")
        || pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_ref())
            .is_none()
    {
        return false;
    }
    let containers = status.container_statuses.as_deref().unwrap_or_default();
    containers.is_empty() || containers.iter().any(|c| waiting_reason(c).is_some())
}

fn waiting_reason(c: &k8s_openapi::api::core::v1::ContainerStatus) -> Option<(&str, &str)> {
    let w = c.state.as_ref()?.waiting.as_ref()?;
    let reason = w.reason.as_deref()?;
    START_REASONS
        .contains(&reason)
        .then(|| (reason, w.message.as_deref().unwrap_or_default()))
}

/// The first cause this node owns among the pod's Events and its containers' waiting states.
fn node_cause(pod: &Pod, events: &[PodEvent]) -> Option<Cause> {
    let waiting = pod
        .status
        .iter()
        .flat_map(|s| s.container_statuses.iter().flatten())
        .filter_map(waiting_reason);
    events
        .iter()
        .map(|e| (e.reason.as_str(), e.message.as_str()))
        .chain(waiting)
        .find(|(reason, message)| the_nodes(reason, message))
        .map(|(reason, message)| Cause {
            reason: reason.to_owned(),
            message: message.to_owned(),
        })
}

/// Whether an Event's or a waiting state's (reason, message) says the node failed the start.
fn the_nodes(reason: &str, message: &str) -> bool {
    match reason {
        "FailedCreatePodSandBox"
        | "FailedAttachVolume"
        | "FailedMapVolume"
        | "ErrImageNeverPull" => true,
        "FailedMount" => !missing_object(message),
        // The kubelet's pull failure Event; its other `Failed` Events ("Error: ErrImagePull")
        // carry no cause.
        "Failed" => message
            .strip_prefix("Failed to pull image ")
            .is_some_and(|cause| !image_fault(cause)),
        // The waiting state of a failed attempt: the runtime's error.
        "ErrImagePull" => !message.is_empty() && !image_fault(message),
        // Between attempts: "Back-off pulling image \"x\"", with the last error after
        // "ErrImagePull: " on recent kubelets.
        "ImagePullBackOff" => message
            .split_once("ErrImagePull: ")
            .is_some_and(|(_, cause)| !image_fault(cause)),
        _ => false,
    }
}

/// A mount that failed because a Secret or ConfigMap does not exist (every node fails it).
fn missing_object(message: &str) -> bool {
    let names_object = message.contains("secret \"") || message.contains("configmap \"");
    (names_object && message.contains("not found")) || message.contains("not registered")
}

/// A pull error that is the image's or the registry's answer, the same for every node.
fn image_fault(message: &str) -> bool {
    const IMAGE_FAULTS: [&str; 9] = [
        "not found",
        "manifest unknown",
        "name unknown",
        "pull access denied",
        "unauthorized",
        "authentication required",
        "insufficient_scope",
        "repository does not exist",
        "invalid reference format",
    ];
    let lower = message.to_lowercase();
    IMAGE_FAULTS.iter().any(|f| lower.contains(f))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::{Value, json};

    use super::*;

    const GRACE: Duration = Duration::from_secs(30);

    fn pod(phase: &str, waiting: Option<(&str, &str)>) -> Pod {
        let state = match waiting {
            Some((reason, message)) => json!({"waiting": {"reason": reason, "message": message}}),
            None => json!({"running": {}}),
        };
        let status: Value = json!({"phase": phase, "containerStatuses": [{"name": "c",
            "image": "i", "imageID": "", "ready": false, "restartCount": 0, "state": state}]});
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
            "status": status,
        }))
        .unwrap()
    }

    fn event(reason: &str, message: &str) -> PodEvent {
        PodEvent {
            reason: reason.into(),
            message: message.into(),
        }
    }

    const SANDBOX: &str = "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to \
        setup network for sandbox \"4f1e\": plugin type=\"calico\" failed (add): error getting \
        ClusterInformation: connection is unauthorized: Unauthorized";

    /// Plays looks every 10 s from 0 to `until_s`, looking Events up when asked; returns the
    /// times counted.
    fn play(p: &Pod, events: &[PodEvent], until_s: u64) -> (Vec<u64>, Vec<u64>) {
        let mut memory = StartMemory::default();
        let (mut lookups, mut counted) = (Vec::new(), Vec::new());
        for s in (0..=until_s).step_by(10) {
            let now = s * 1000;
            let (m, step) = start_failure(memory, p, None, now, GRACE);
            memory = m;
            let step = if step == StartStep::LookUp {
                lookups.push(s);
                let (m, step) = start_failure(memory, p, Some(events), now, GRACE);
                memory = m;
                step
            } else {
                step
            };
            if let StartStep::Count(_) = step {
                counted.push(s);
            }
        }
        (lookups, counted)
    }

    #[test]
    fn a_sandbox_failure_counts_once_after_the_grace() {
        let p = pod("Pending", Some(("ContainerCreating", "")));
        let events = [event("FailedCreatePodSandBox", SANDBOX)];
        let (lookups, counted) = play(&p, &events, 120);
        assert_eq!(lookups, [30], "looked up once the grace passed");
        assert_eq!(counted, [30], "counted once, not at every look");
        let (m, step) = start_failure(StartMemory::default(), &p, Some(&events), 0, GRACE);
        assert_eq!(step, StartStep::Nothing, "not before the grace");
        assert_eq!(m.stuck_since_ms, Some(0));
    }

    #[test]
    fn a_cause_every_node_shares_is_looked_at_again_but_never_counted() {
        let p = pod("Pending", Some(("ContainerCreating", "")));
        let missing = [event(
            "FailedMount",
            "MountVolume.SetUp failed for volume \"token\" : secret \"vol-token\" not found",
        )];
        let (lookups, counted) = play(&p, &missing, 120);
        assert_eq!(lookups, [30, 60, 90, 120], "once per grace, not every look");
        assert!(counted.is_empty());
        for (reason, message) in [
            (
                "InvalidImageName",
                "Failed to apply default image tag \"Busybox\": couldn't parse image name",
            ),
            (
                "CreateContainerConfigError",
                "secret \"env-token\" not found",
            ),
            (
                "ErrImagePull",
                "rpc error: code = NotFound desc = failed to pull and unpack image \
                \"docker.io/library/nope:1\": failed to resolve reference: not found",
            ),
            (
                "ErrImagePull",
                "failed to pull image \"private/app\": pull access denied, repository \
                does not exist or may require authorization",
            ),
        ] {
            let p = pod("Pending", Some((reason, message)));
            assert!(play(&p, &[], 60).1.is_empty(), "{reason}: {message}");
        }
    }

    #[test]
    fn causes_this_node_owns_count() {
        let creating = pod("Pending", Some(("ContainerCreating", "")));
        for (reason, message) in [
            (
                "FailedAttachVolume",
                "Multi-Attach error for volume \"pvc-1\" Volume is already exclusively attached to one node",
            ),
            (
                "FailedMount",
                "MountVolume.MountDevice failed for volume \"pvc-1\" : kubernetes.io/csi: attacher.MountDevice failed to create newCsiDriverClient: driver name ebs.csi.aws.com not found in the list of registered CSI drivers",
            ),
            (
                "FailedMapVolume",
                "MapVolume.WaitForAttach failed for volume \"pvc-2\" : timed out waiting for the condition",
            ),
            ("FailedCreatePodSandBox", SANDBOX),
        ] {
            assert_eq!(
                play(&creating, &[event(reason, message)], 60).1,
                [30],
                "{reason}"
            );
        }
        let timeout = "rpc error: code = Unknown desc = failed to pull and unpack image \
            \"registry.k8s.io/pause:3.10\": failed to do request: Head \
            \"https://registry.k8s.io/v2/pause/manifests/3.10\": dial tcp 34.96.108.209:443: i/o timeout";
        let backoff = pod(
            "Pending",
            Some((
                "ImagePullBackOff",
                "Back-off pulling image \"registry.k8s.io/pause:3.10\"",
            )),
        );
        assert_eq!(
            play(&backoff, &[event("Failed", "Error: ErrImagePull")], 60).1,
            Vec::<u64>::new(),
            "no cause given"
        );
        let failed = [event(
            "Failed",
            &format!("Failed to pull image \"registry.k8s.io/pause:3.10\": {timeout}"),
        )];
        assert_eq!(
            play(&backoff, &failed, 60).1,
            [30],
            "the pull Event's cause"
        );
        let err = pod("Pending", Some(("ErrImagePull", timeout)));
        assert_eq!(play(&err, &[], 60).1, [30], "the waiting state's cause");
        let recent = format!(
            "Back-off pulling image \"registry.k8s.io/pause:3.10\": ErrImagePull: {timeout}"
        );
        let backoff_with_cause = pod("Pending", Some(("ImagePullBackOff", &recent)));
        assert_eq!(
            play(&backoff_with_cause, &[], 60).1,
            [30],
            "a recent kubelet's back-off"
        );
        let refused = recent.replace("i/o timeout", "not found");
        let backoff_refused = pod("Pending", Some(("ImagePullBackOff", &refused)));
        assert!(
            play(&backoff_refused, &[], 60).1.is_empty(),
            "the registry's answer"
        );
        let never = pod(
            "Pending",
            Some((
                "ErrImageNeverPull",
                "Container image \"app:1\" is not present with pull policy of Never",
            )),
        );
        assert_eq!(play(&never, &[], 60).1, [30]);
    }

    #[test]
    fn a_pod_that_starts_or_is_not_placed_is_forgotten() {
        let stuck = pod("Pending", Some(("ContainerCreating", "")));
        let (m, _) = start_failure(StartMemory::default(), &stuck, None, 0, GRACE);
        let running = pod("Running", None);
        let (m, step) = start_failure(m, &running, None, 40_000, GRACE);
        assert_eq!((m, step), (StartMemory::default(), StartStep::Nothing));
        let mut unplaced = stuck.clone();
        unplaced.spec.as_mut().unwrap().node_name = None;
        assert_eq!(
            start_failure(
                StartMemory::default(),
                &unplaced,
                None,
                40_000,
                Duration::ZERO
            )
            .1,
            StartStep::Nothing
        );
        // Stuck again after it started (a new sandbox after a node restart): a new grace.
        let (m, step) = start_failure(m, &stuck, None, 50_000, GRACE);
        assert_eq!((m.stuck_since_ms, step), (Some(50_000), StartStep::Nothing));
    }
}
