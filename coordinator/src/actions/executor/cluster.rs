//! What the executor reads and changes in the cluster: a workload's replica count through its
//! `/scale` subresource (changed only from the count a step recorded, so it is never applied
//! twice), its pods, and waits on pods through a watch. The rules about what a pod's state
//! means are small pure functions at the end.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::wait::await_condition;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt as _};
use serde_json::json;
use telemesh_core::action::ObjectRef;
use telemesh_core::action::placement::{
    self, CONTROLLER_REVISION_HASH, POD_TEMPLATE_HASH, PodFacts,
};

use super::Failure;

/// The annotation the ReplicaSet controller ranks pods by when it scales down.
pub const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// The field manager of the executor's patches.
pub const FIELD_MANAGER: &str = "telemesh-actions";

fn api_error(what: String) -> impl FnOnce(kube::Error) -> Failure {
    move |e| Failure::Api(format!("{what}: {e}"))
}

/// Whether an API error is 404.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// A workload's replicas and selector.
#[derive(Debug, Clone)]
pub struct WorkloadState {
    /// `spec.replicas`.
    pub replicas: i32,
    /// `spec.selector.matchLabels` as a label selector.
    pub selector: String,
}

/// Reads a Deployment or StatefulSet.
pub async fn workload(client: &Client, w: &ObjectRef) -> Result<WorkloadState, Failure> {
    let what = || format!("reading {w}");
    match w.kind.as_str() {
        "Deployment" => {
            let d = Api::<Deployment>::namespaced(client.clone(), &w.namespace)
                .get_opt(&w.name)
                .await
                .map_err(api_error(what()))?
                .ok_or_else(|| Failure::NotFound(format!("{w} does not exist")))?;
            let spec = d.spec.unwrap_or_default();
            let replicas = spec.replicas.unwrap_or(1);
            Ok(WorkloadState {
                replicas,
                selector: selector_string(&spec.selector),
            })
        }
        "StatefulSet" => {
            let s = Api::<StatefulSet>::namespaced(client.clone(), &w.namespace)
                .get_opt(&w.name)
                .await
                .map_err(api_error(what()))?
                .ok_or_else(|| Failure::NotFound(format!("{w} does not exist")))?;
            let spec = s.spec.unwrap_or_default();
            let replicas = spec.replicas.unwrap_or(1);
            Ok(WorkloadState {
                replicas,
                selector: selector_string(&spec.selector),
            })
        }
        other => Err(Failure::Unsupported(format!(
            "{other} {}/{} is not a workload actions can scale; only Deployments and StatefulSets",
            w.namespace, w.name
        ))),
    }
}

/// Whether a Deployment's controller has seen its latest spec and every pod runs it: only then
/// does its ReplicaSet choose which pod to remove by deletion cost alone.
fn deployment_settled(d: &Deployment) -> bool {
    let replicas = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    d.status.as_ref().is_some_and(|status| {
        status.observed_generation >= d.metadata.generation
            && status.updated_replicas.unwrap_or(0) == replicas
            && status.replicas.unwrap_or(0) == replicas
    })
}

/// Whether a StatefulSet's controller has seen its latest spec and runs as many pods.
fn statefulset_settled(s: &StatefulSet) -> bool {
    let replicas = s.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    s.status.as_ref().is_some_and(|status| {
        status.observed_generation >= s.metadata.generation && status.replicas == replicas
    })
}

/// Waits, through a watch, until the workload's controller has caught up with it (its status
/// lags the pods it counts), or `timeout` passes (`Ok(false)`).
pub async fn wait_settled(
    client: &Client,
    w: &ObjectRef,
    timeout: Duration,
) -> Result<bool, Failure> {
    let watch_error = |e: kube::runtime::wait::Error| Failure::Api(format!("watching {w}: {e}"));
    let settled = match w.kind.as_str() {
        "Deployment" => {
            let api = Api::<Deployment>::namespaced(client.clone(), &w.namespace);
            let wait = await_condition(api, &w.name, |d: Option<&Deployment>| {
                d.is_some_and(deployment_settled)
            });
            tokio::time::timeout(timeout, wait)
                .await
                .map(|r| r.map(|_| ()))
        }
        "StatefulSet" => {
            let api = Api::<StatefulSet>::namespaced(client.clone(), &w.namespace);
            let wait = await_condition(api, &w.name, |s: Option<&StatefulSet>| {
                s.is_some_and(statefulset_settled)
            });
            tokio::time::timeout(timeout, wait)
                .await
                .map(|r| r.map(|_| ()))
        }
        _ => return Ok(true),
    };
    match settled {
        Ok(Ok(())) => Ok(true),
        Ok(Err(e)) => Err(watch_error(e)),
        Err(_elapsed) => Ok(false),
    }
}

fn selector_string(selector: &LabelSelector) -> String {
    selector
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// What [`set_replicas`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleOutcome {
    /// The count was `from` and is now `to`.
    Changed,
    /// The count was already `to` (a previous leader made the change).
    AlreadyDone,
}

/// Sets `w`'s replicas from `from` to `to`, only if they are `from` now (a JSON patch with a
/// `test` operation: the API server applies it atomically, so a concurrent change is never
/// overwritten); `to` already means done.
pub async fn set_replicas(
    client: &Client,
    w: &ObjectRef,
    from: i32,
    to: i32,
) -> Result<ScaleOutcome, Failure> {
    let current = workload(client, w).await?.replicas;
    if current == to {
        return Ok(ScaleOutcome::AlreadyDone);
    }
    if current != from {
        return Err(Failure::Conflict(format!(
            "{w} has {current} replicas, not the {from} this step recorded: someone else scaled it"
        )));
    }
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/spec/replicas", "value": from},
        {"op": "replace", "path": "/spec/replicas", "value": to},
    ]))
    .map_err(|e| Failure::Api(format!("building the scale patch: {e}")))?;
    let params = PatchParams::default();
    let what = format!("scaling {w} from {from} to {to}");
    let result = match w.kind.as_str() {
        "Deployment" => Api::<Deployment>::namespaced(client.clone(), &w.namespace)
            .patch(&w.name, &params, &Patch::<()>::Json(patch))
            .await
            .map(drop),
        _ => Api::<StatefulSet>::namespaced(client.clone(), &w.namespace)
            .patch(&w.name, &params, &Patch::<()>::Json(patch))
            .await
            .map(drop),
    };
    match result {
        Ok(()) => Ok(ScaleOutcome::Changed),
        // The `test` failed: someone changed the count between the read and the patch.
        Err(kube::Error::Api(s)) if s.code == 422 || s.code == 409 => Err(Failure::Conflict(
            format!("{what}: the count changed meanwhile ({})", s.message),
        )),
        Err(e) => Err(api_error(what)(e)),
    }
}

/// The pods of `w` (matched by selector, then by owner), terminating ones included.
pub async fn pods_of(client: &Client, w: &ObjectRef) -> Result<Vec<Pod>, Failure> {
    let state = workload(client, w).await?;
    let pods = Api::<Pod>::namespaced(client.clone(), &w.namespace)
        .list(&ListParams::default().labels(&state.selector))
        .await
        .map_err(api_error(format!("listing the pods of {w}")))?;
    Ok(pods
        .items
        .into_iter()
        .filter(|p| owner_of(p).as_ref() == Some(w))
        .collect())
}

/// The workload that owns `pod` (see [`placement::workload_of`]).
pub fn owner_of(pod: &Pod) -> Option<ObjectRef> {
    placement::workload_of(&facts(pod))
}

/// What the placement rule reads of a pod.
pub fn facts(pod: &Pod) -> PodFacts<'_> {
    let labels = pod.metadata.labels.as_ref();
    PodFacts {
        namespace: pod.metadata.namespace.as_deref().unwrap_or_default(),
        name: pod.metadata.name.as_deref().unwrap_or_default(),
        controller: pod
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true))
            .map(|o| (o.kind.as_str(), o.name.as_str())),
        template_hash: labels.and_then(|l| {
            l.get(POD_TEMPLATE_HASH)
                .or_else(|| l.get(CONTROLLER_REVISION_HASH))
                .map(String::as_str)
        }),
    }
}

/// Reads a pod, `None` if it does not exist.
pub async fn pod(client: &Client, namespace: &str, name: &str) -> Result<Option<Pod>, Failure> {
    Api::<Pod>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(api_error(format!("reading pod {namespace}/{name}")))
}

/// Sets the pod's deletion cost to the lowest there is, so its ReplicaSet removes it first
/// among its ready siblings when scaled down.
pub async fn mark_for_deletion(client: &Client, pod: &ObjectRef) -> Result<(), Failure> {
    let patch = json!({
        "metadata": {
            "uid": pod.uid,
            "annotations": { POD_DELETION_COST: i32::MIN.to_string() }
        }
    });
    Api::<Pod>::namespaced(client.clone(), &pod.namespace)
        .patch(&pod.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(drop)
        .map_err(api_error(format!(
            "annotating pod {}/{}",
            pod.namespace, pod.name
        )))
}

/// Waits, through a watch on the namespace's pods matching `selector`, until `check` on the
/// current set of pods decides, or `timeout` passes (`Ok(None)`).
pub async fn wait_pods<R>(
    client: &Client,
    namespace: &str,
    selector: &str,
    timeout: Duration,
    mut check: impl FnMut(&[Pod]) -> Option<R>,
) -> Result<Option<R>, Failure> {
    let api = Api::<Pod>::namespaced(client.clone(), namespace);
    let config = watcher::Config::default().labels(selector);
    let mut events = watcher::watcher(api, config).boxed();
    let mut pods: BTreeMap<String, Pod> = BTreeMap::new();
    let mut init: Option<BTreeMap<String, Pod>> = None;
    let mut synced = false;
    let deadline = tokio::time::Instant::now() + timeout;
    // A timer wakes the check too: some decisions depend on time (how long a pod has been
    // unschedulable).
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        let changed = tokio::select! {
            () = tokio::time::sleep_until(deadline) => return Ok(None),
            _ = tick.tick() => synced,
            event = events.next() => match event {
                None => return Err(Failure::Api("the pod watch ended".into())),
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "pod watch error; the watcher retries");
                    false
                }
                Some(Ok(Event::Init)) => { init = Some(BTreeMap::new()); false }
                Some(Ok(Event::InitApply(p))) => {
                    if let Some(init) = &mut init { init.insert(p.name_any(), p); }
                    false
                }
                Some(Ok(Event::InitDone)) => {
                    if let Some(init) = init.take() { pods = init; }
                    synced = true;
                    true
                }
                Some(Ok(Event::Apply(p))) => { pods.insert(p.name_any(), p); synced }
                Some(Ok(Event::Delete(p))) => { pods.remove(&p.name_any()); synced }
            },
        };
        if changed {
            let all: Vec<Pod> = pods.values().cloned().collect();
            if let Some(r) = check(&all) {
                return Ok(Some(r));
            }
        }
    }
}

/// The node a pod is bound to.
pub fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

/// Whether the pod is being deleted.
pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// Whether the pod runs and its Ready condition is true.
pub fn is_running_and_ready(pod: &Pod) -> bool {
    let Some(status) = pod.status.as_ref() else {
        return false;
    };
    status.phase.as_deref() == Some("Running")
        && status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// The scheduler's reason the pod is unschedulable, and since when, if it says so.
pub fn unschedulable(pod: &Pod) -> Option<(Option<jiff::Timestamp>, String)> {
    let c = pod
        .status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")?;
    (c.reason.as_deref() == Some("Unschedulable")).then(|| {
        (
            c.last_transition_time.as_ref().map(|t| t.0),
            c.message.clone().unwrap_or_default(),
        )
    })
}

/// A pod's reference with its UID.
pub fn pod_ref(pod: &Pod) -> ObjectRef {
    ObjectRef {
        kind: "Pod".into(),
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.name_any(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
    }
}
