//! Whether a scavenger pod placed on a node has started and, if not, what keeps it and whether
//! that can go away by itself: what the controller observes for `--scavenger-start-timeout`
//! ([`super::controller::reconcile`] gives the run up once a pod has waited that long, for good
//! when the cause is [`Cause::Permanent`]).
//!
//! Read from the pod's status as the kubelet writes it. A pod is placed when it is bound
//! (`spec.nodeName`), and has not started while the kubelet keeps it `Pending` with a container
//! that never ran (`waiting`, no `lastState.terminated`): the kubelet reports a pod `Running` as
//! soon as every container has started once, so a running pod, or one whose container crashed and
//! waits to restart, never counts. Nor does one whose init container is at work: that is
//! progress, however long it takes.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;

/// The reason given when the kubelet has reported no container status at all (its node may be
/// down).
pub const NO_STATUS: &str = "NoContainerStatus";

/// Whether what keeps a pod from starting can go away without anyone changing anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The kubelet will fail the same way until someone changes the pod or the cluster: the
    /// ScavengerJob fails, and its message says what is wrong.
    Permanent,
    /// It may clear by itself: the run is given up and the ScavengerJob waits for another turn.
    Transient,
}

/// Classifies the kubelet's `reason` for a container that waits without ever having run. Only
/// what the kubelet can never get past by retrying is permanent:
///
/// - `InvalidImageName`: the image reference does not parse, so the kubelet never pulls it; the
///   ScavengerJob's spec is immutable, so only a new ScavengerJob can fix it.
/// - `CreateContainerConfigError`: the kubelet cannot build the container's configuration: a
///   Secret or ConfigMap (or a key of one) that an environment variable names is missing, or the
///   security context cannot be met (`runAsNonRoot` with an image that runs as root). The kubelet
///   retries, but the answer changes only when someone creates the object or changes the pod.
/// - `ErrImageNeverPull`: `imagePullPolicy: Never` and the image is not on the node; only
///   someone loading it there helps.
///
/// Everything else is transient, notably:
///
/// - `ErrImagePull`, `ImagePullBackOff`: the registry refused the image or could not be
///   reached. The kubelet retries with back-off, and cannot tell a missing image from an outage,
///   a rate limit or missing credentials (registries answer "not found" for images one may not
///   read), so neither can we.
/// - `ContainerCreating`: the pod's volumes are not mounted yet (the kubelet's `FailedMount`
///   Events): a slow attach, a storage driver not ready, or a Secret or ConfigMap volume whose
///   object is missing. The pod's status does not say which, and the kubelet mounts the volume as
///   soon as it can.
/// - [`NO_STATUS`] and reasons this list does not know. A wrong `Failed` ends the ScavengerJob for
///   good and needs a person to create it anew; a wrong `Pending` costs one more start timeout of
///   held room.
pub fn cause(reason: &str) -> Cause {
    match reason {
        "InvalidImageName" | "CreateContainerConfigError" | "ErrImageNeverPull" => Cause::Permanent,
        _ => Cause::Transient,
    }
}

/// A pod placed on a node whose containers have not started.
#[derive(Debug, Clone, PartialEq)]
pub struct NotStarted {
    /// The pod's name.
    pub pod: String,
    /// Its node.
    pub node: String,
    /// When it was placed: its `PodScheduled=True` condition's `lastTransitionTime`, which the
    /// API server sets when it binds the pod; None when the condition carries no time.
    pub placed: Option<Timestamp>,
    /// The kubelet's waiting reason (`ImagePullBackOff`), or [`NO_STATUS`].
    pub reason: String,
    /// The kubelet's message; may be empty.
    pub message: String,
}

impl NotStarted {
    /// Whether it can clear by itself ([`cause`] of the reason).
    pub fn cause(&self) -> Cause {
        cause(&self.reason)
    }

    /// The kubelet's word: `reason: message`, or the reason alone.
    pub fn why(&self) -> String {
        if self.message.is_empty() {
            self.reason.clone()
        } else {
            format!("{}: {}", self.reason, self.message)
        }
    }
}

/// Whether `c` waits without ever having run.
fn never_ran(c: &ContainerStatus) -> bool {
    let state = c.state.as_ref();
    state.is_some_and(|s| s.waiting.is_some())
        && c.last_state.as_ref().is_none_or(|s| s.terminated.is_none())
}

/// `pod` as [`NotStarted`] when it is placed, not being deleted, still `Pending` with a
/// container that never ran (or no container status at all) and no init container running.
/// The reason is the first waiting container's, init containers first, preferring a specific
/// one (`ErrImagePull`) to the kubelet's defaults (`ContainerCreating`, `PodInitializing`).
pub fn not_started(pod: &Pod) -> Option<NotStarted> {
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .filter(|n| !n.is_empty())?;
    if pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let status = pod.status.as_ref();
    if status.and_then(|s| s.phase.as_deref()).unwrap_or("Pending") != "Pending" {
        return None;
    }
    let init: &[ContainerStatus] = status
        .and_then(|s| s.init_container_statuses.as_deref())
        .unwrap_or_default();
    let main: &[ContainerStatus] = status
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    if init
        .iter()
        .any(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
    {
        return None;
    }
    let (reason, message) = if main.is_empty() {
        (
            NO_STATUS.to_owned(),
            "its kubelet has reported no container status".to_owned(),
        )
    } else {
        if !main.iter().any(never_ran) {
            return None;
        }
        let waiting: Vec<(&str, &str)> = init
            .iter()
            .chain(main)
            .filter(|c| never_ran(c))
            .filter_map(|c| {
                let w = c.state.as_ref()?.waiting.as_ref()?;
                Some((
                    w.reason.as_deref().unwrap_or("Waiting"),
                    w.message.as_deref().unwrap_or_default(),
                ))
            })
            .collect();
        let default = |r: &str| matches!(r, "ContainerCreating" | "PodInitializing");
        let (reason, message) = waiting
            .iter()
            .find(|(r, _)| !default(r))
            .or(waiting.first())
            .copied()
            .unwrap_or(("Waiting", ""));
        (reason.to_owned(), message.to_owned())
    };
    let placed = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0);
    Some(NotStarted {
        pod: pod.name_any(),
        node,
        placed,
        reason,
        message,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// A pod bound to n1 at 10:00:00 with `status` merged in.
    fn pod(status: Value) -> Pod {
        let mut pod = json!({
            "metadata": {"name": "p"},
            "spec": {"nodeName": "n1", "containers": [{"name": "job", "image": "x"}]},
            "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T10:00:00Z"}
            ]}
        });
        for (k, v) in status.as_object().unwrap() {
            pod["status"][k] = v.clone();
        }
        serde_json::from_value(pod).unwrap()
    }

    fn waiting(reason: &str, message: &str) -> Value {
        json!({"name": "job", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
               "state": {"waiting": {"reason": reason, "message": message}}})
    }

    #[test]
    fn kubelet_reasons_are_classified_as_documented() {
        for reason in [
            "InvalidImageName",
            "CreateContainerConfigError",
            "ErrImageNeverPull",
        ] {
            assert_eq!(cause(reason), Cause::Permanent, "{reason}");
        }
        for reason in [
            "ErrImagePull",
            "ImagePullBackOff",
            "ContainerCreating",
            "PodInitializing",
            NO_STATUS,
            "SomethingNew",
        ] {
            assert_eq!(cause(reason), Cause::Transient, "{reason}");
        }
    }

    #[test]
    fn a_placed_pod_waiting_to_start_says_why_and_since_when() {
        let p = pod(
            json!({"containerStatuses": [waiting("ImagePullBackOff", "Back-off pulling image \"x\"")]}),
        );
        let s = not_started(&p).unwrap();
        assert_eq!((s.pod.as_str(), s.node.as_str()), ("p", "n1"));
        assert_eq!(s.placed, Some("2026-01-01T10:00:00Z".parse().unwrap()));
        assert_eq!(s.why(), "ImagePullBackOff: Back-off pulling image \"x\"");
        assert_eq!(s.cause(), Cause::Transient);

        let creating = pod(json!({"containerStatuses": [waiting("ContainerCreating", "")]}));
        assert_eq!(not_started(&creating).unwrap().why(), "ContainerCreating");

        let silent = pod(json!({}));
        assert_eq!(not_started(&silent).unwrap().reason, NO_STATUS);
    }

    #[test]
    fn a_specific_reason_beats_the_kubelets_default_and_init_containers_come_first() {
        let p = pod(json!({
            "initContainerStatuses": [waiting("ErrImagePull", "not found")],
            "containerStatuses": [waiting("PodInitializing", "")]
        }));
        assert_eq!(not_started(&p).unwrap().reason, "ErrImagePull");
        let p = pod(json!({"containerStatuses": [
            waiting("ContainerCreating", ""), waiting("InvalidImageName", "bad")
        ]}));
        let s = not_started(&p).unwrap();
        assert_eq!(
            (s.reason.as_str(), s.cause()),
            ("InvalidImageName", Cause::Permanent)
        );
    }

    #[test]
    fn running_restarting_unplaced_deleted_and_initialising_pods_do_not_count() {
        let running = json!({"name": "job", "image": "x", "imageID": "", "ready": true, "restartCount": 0,
                             "state": {"running": {"startedAt": "2026-01-01T10:00:01Z"}}});
        let restarting = json!({"name": "job", "image": "x", "imageID": "", "ready": false, "restartCount": 1,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 1}}});
        for (what, p) in [
            (
                "running",
                pod(json!({"phase": "Running", "containerStatuses": [running.clone()]})),
            ),
            (
                "restarting after a crash, reported Pending",
                pod(json!({"containerStatuses": [restarting]})),
            ),
            (
                "succeeded",
                pod(
                    json!({"phase": "Succeeded", "containerStatuses": [waiting("ContainerCreating", "")]}),
                ),
            ),
            (
                "an init container at work",
                pod(json!({
                    "initContainerStatuses": [running],
                    "containerStatuses": [waiting("PodInitializing", "")]
                })),
            ),
        ] {
            assert_eq!(not_started(&p), None, "{what}");
        }
        let mut unplaced = pod(json!({"containerStatuses": [waiting("ErrImagePull", "")]}));
        unplaced.spec.as_mut().unwrap().node_name = None;
        assert_eq!(not_started(&unplaced), None, "not placed");
        let mut deleted = pod(json!({"containerStatuses": [waiting("ErrImagePull", "")]}));
        deleted.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-01-01T10:00:05Z".parse().unwrap(),
            ));
        assert_eq!(not_started(&deleted), None, "being deleted");
    }
}
