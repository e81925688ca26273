//! What the executor reads and changes in the cluster: a workload's replica count through its
//! `/scale` subresource (changed only from the count a step recorded, so it is never applied
//! twice), its pods, and waits on pods through watches kept open ([`PodWatches`]). The rules about what a pod's state
//! means are small pure functions at the end.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{ListParams, Patch, PatchParams};
use kube::core::Selector;
use kube::runtime::reflector::{self, Store};
use kube::runtime::wait::await_condition;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt as _};
use serde_json::json;
use telemesh_core::action::ObjectRef;
use telemesh_core::action::placement::{
    self, CONTROLLER_REVISION_HASH, POD_TEMPLATE_HASH, PodFacts,
};
use tokio::sync::watch;

use super::failure::Failure;

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
    /// `spec.selector` (`matchLabels` and `matchExpressions`) as the query of its pods.
    pub selector: Selector,
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
                selector: pod_query(w, &spec.selector)?,
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
                selector: pod_query(w, &spec.selector)?,
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
pub fn deployment_settled(d: &Deployment) -> bool {
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

/// `w`'s `spec.selector` as the query of its pods ([`telemesh_core::selector::of_workload`]).
fn pod_query(w: &ObjectRef, selector: &LabelSelector) -> Result<Selector, Failure> {
    telemesh_core::selector::of_workload(selector).map_err(|e| {
        Failure::Unsupported(format!("{w} has a spec.selector actions cannot use: {e}"))
    })
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
/// overwritten); `to` already means done. The patch goes first: only when its test fails is
/// the count read, to tell a change already made from someone else's.
pub async fn set_replicas(
    client: &Client,
    w: &ObjectRef,
    from: i32,
    to: i32,
) -> Result<ScaleOutcome, Failure> {
    if !matches!(w.kind.as_str(), "Deployment" | "StatefulSet") {
        // The same refusal as reading it.
        workload(client, w).await?;
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
        // The `test` failed: the count is not `from` (any more).
        Err(kube::Error::Api(s)) if s.code == 422 || s.code == 409 => {
            let current = workload(client, w).await?.replicas;
            if current == to {
                return Ok(ScaleOutcome::AlreadyDone);
            }
            Err(Failure::Conflict(format!(
                "{w} has {current} replicas, not the {from} this step recorded: someone else \
                 scaled it ({what}: {})",
                s.message
            )))
        }
        Err(kube::Error::Api(s)) if s.code == 404 => {
            Err(Failure::NotFound(format!("{w} does not exist")))
        }
        Err(e) => Err(api_error(what)(e)),
    }
}

/// The pods of `w` (matched by selector, then by owner), terminating ones included.
pub async fn pods_of(client: &Client, w: &ObjectRef) -> Result<Vec<Pod>, Failure> {
    let state = workload(client, w).await?;
    pods_selected(client, w, &state.selector).await
}

/// The pods of `w` whose selector (its [`WorkloadState`]'s) the caller has read already.
pub async fn pods_selected(
    client: &Client,
    w: &ObjectRef,
    selector: &Selector,
) -> Result<Vec<Pod>, Failure> {
    let pods = Api::<Pod>::namespaced(client.clone(), &w.namespace)
        .list(&ListParams::default().labels_from(selector))
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

/// How long a pod watch no wait uses stays open: the next action on the same workload (often
/// queued right behind) finds it warm.
pub const IDLE_WATCH: Duration = Duration::from_secs(60);

/// How long [`PodWatches::wait`] waits for a watch's first list when its own timeout is
/// shorter: long enough for a loaded API server to answer a list, short enough that an
/// unreachable one fails the step rather than holding it.
pub const FIRST_LIST: Duration = Duration::from_secs(10);

/// The pod watches the executor's waits share, one per namespace and label selector, opened on
/// first use and closed once idle for [`IDLE_WATCH`]. Opening a watch (a list, then the watch
/// request) for every wait cost more than the rest of a step; an open one answers at once from
/// its cache and hears each change as it happens. Its cache lags the API server by one watch
/// delivery, as a freshly listed one does by the time it is checked, so the checks (which ask
/// for a state the cluster reaches, e.g. "the new pod is Ready", "the old pod is gone") decide
/// the same as before.
#[derive(Clone, Default)]
pub struct PodWatches {
    open: Arc<parking_lot::Mutex<HashMap<(String, String), Shared>>>,
}

impl std::fmt::Debug for PodWatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodWatches")
            .field("open", &self.open.lock().len())
            .finish()
    }
}

struct Shared {
    watch: Arc<PodWatch>,
    last_used: Instant,
}

/// One watch of a namespace's pods matching a selector, cached as kube's reflector does.
struct PodWatch {
    store: Store<Pod>,
    changed: watch::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for PodWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl PodWatch {
    fn open(client: &Client, namespace: &str, selector: &Selector) -> Self {
        let (store, writer) = reflector::store::<Pod>();
        let api = Api::<Pod>::namespaced(client.clone(), namespace);
        let config = watcher::Config::default().labels_from(selector);
        let (changed, _) = watch::channel(());
        let task = tokio::spawn({
            let changed = changed.clone();
            async move {
                let mut events = telemesh_runtime::watch_backoff::backoff(reflector::reflector(
                    writer,
                    telemesh_runtime::store_watch::watcher_for_store(api, config),
                ))
                .boxed();
                while let Some(event) = events.next().await {
                    match event {
                        // A relist's single objects are seen at its end, all at once.
                        Ok(Event::Init | Event::InitApply(_)) => {}
                        Ok(_) => changed.send_replace(()),
                        Err(e) => {
                            tracing::debug!(error = %e, "pod watch error; the watcher retries");
                        }
                    }
                }
            }
        });
        Self {
            store,
            changed,
            task,
        }
    }
}

impl PodWatches {
    /// The open watch of `namespace`'s pods matching `selector`, opened if there is none (or
    /// its task ended); closes the idle ones.
    fn get(&self, client: &Client, namespace: &str, selector: &Selector) -> Arc<PodWatch> {
        let now = Instant::now();
        let mut open = self.open.lock();
        Self::retain_used(&mut open, now);
        let key = (namespace.to_string(), selector.to_string());
        let shared = open
            .entry(key)
            .and_modify(|s| {
                if s.watch.task.is_finished() {
                    s.watch = Arc::new(PodWatch::open(client, namespace, selector));
                }
            })
            .or_insert_with(|| Shared {
                watch: Arc::new(PodWatch::open(client, namespace, selector)),
                last_used: now,
            });
        shared.last_used = now;
        shared.watch.clone()
    }

    /// Waits until `check` on the namespace's pods matching `selector` decides, or `timeout`
    /// passes (`Ok(None)`). `check` runs once the watch has listed, after every change, and
    /// every second (some decisions depend on time: how long a pod has been unschedulable).
    ///
    /// `check` always sees the listed pods once, even when `timeout` is zero: a leader that
    /// resumes a step whose window ran out during the failover must find the pod that became
    /// Ready meanwhile, not report a timeout (and undo the action) without looking. Only a
    /// watch that cannot list within [`FIRST_LIST`] (or `timeout`, if longer) gives up unseen.
    pub async fn wait<R>(
        &self,
        client: &Client,
        namespace: &str,
        selector: &Selector,
        timeout: Duration,
        mut check: impl FnMut(&[Arc<Pod>]) -> Option<R>,
    ) -> Result<Option<R>, Failure> {
        let watch = self.get(client, namespace, selector);
        let now = tokio::time::Instant::now();
        let deadline = now + timeout;
        let mut changed = watch.changed.subscribe();
        tokio::select! {
            () = tokio::time::sleep_until(deadline.max(now + FIRST_LIST)) => return Ok(None),
            ready = watch.store.wait_until_ready() => {
                ready.map_err(|e| Failure::Api(format!("the pod watch ended: {e}")))?;
            }
        }
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            changed.borrow_and_update();
            if let Some(r) = check(&watch.store.state()) {
                self.touch(namespace, selector);
                return Ok(Some(r));
            }
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => break,
                _ = tick.tick() => {}
                seen = changed.changed() => if seen.is_err() {
                    return Err(Failure::Api("the pod watch ended".into()));
                },
            }
        }
        self.touch(namespace, selector);
        Ok(None)
    }

    /// Closes the watches no wait has used for [`IDLE_WATCH`] (the lead loop calls it every
    /// tick, so a quiet executor holds none).
    pub fn close_idle(&self) {
        Self::retain_used(&mut self.open.lock(), Instant::now());
    }

    fn retain_used(open: &mut HashMap<(String, String), Shared>, now: Instant) {
        open.retain(|_, s| {
            Arc::strong_count(&s.watch) > 1 || now.duration_since(s.last_used) < IDLE_WATCH
        });
    }

    /// Closes every watch (when this replica stops leading).
    pub fn close_all(&self) {
        self.open.lock().clear();
    }

    /// Counts the idle time of a watch from the end of its last wait.
    fn touch(&self, namespace: &str, selector: &Selector) {
        if let Some(s) = self
            .open
            .lock()
            .get_mut(&(namespace.to_string(), selector.to_string()))
        {
            s.last_used = Instant::now();
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Duration;

    use kube::core::Expression;
    use telemesh_runtime::testing::eventually;
    use telemesh_sim::{Sim, SimConfig};
    use tokio_util::sync::CancellationToken;

    use super::*;

    const WITHIN: Duration = Duration::from_secs(10);

    fn deployment(name: &str, replicas: i32, selector: serde_json::Value) -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": selector, "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}}}
        }))
        .unwrap()
    }

    /// A Deployment selecting with `matchExpressions` (as some Helm chart generators write it):
    /// the executor reads that selector, lists only its pods and waits on a watch of only its
    /// pods, not of every pod of the namespace.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_match_expressions_selector_counts_and_watches_only_the_workloads_pods() {
        let sim = Sim::start(SimConfig::default()).await.unwrap();
        let client = sim.client().await.unwrap();
        let stop = CancellationToken::new();
        let _stop = stop.clone().drop_guard();
        tokio::spawn(telemesh_sim::cluster::controllers::run(
            client.clone(),
            stop,
        ));
        let api = Api::<Deployment>::namespaced(client.clone(), "default");
        let web =
            json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]});
        for d in [
            deployment("web", 2, web),
            deployment("db", 2, json!({"matchLabels": {"app": "db"}})),
        ] {
            api.create(&Default::default(), &d).await.unwrap();
        }
        let all = Api::<Pod>::namespaced(client.clone(), "default");
        eventually("four pods", WITHIN, || async {
            let n = all.list(&ListParams::default()).await.ok()?.items.len();
            (n == 4).then_some(())
        })
        .await;
        let w = ObjectRef::new("Deployment", "default", "web");
        let state = workload(&client, &w).await.unwrap();
        assert_eq!(state.selector.to_string(), "app in (web)");
        let names: Vec<String> = pods_of(&client, &w)
            .await
            .unwrap()
            .iter()
            .map(|p| p.name_any())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(names.iter().all(|n| n.starts_with("web-")), "{names:?}");
        let watches = PodWatches::default();
        let watched = watches
            .wait(&client, "default", &state.selector, WITHIN, |pods| {
                let mut names: Vec<String> = pods.iter().map(|p| p.name_any()).collect();
                names.sort();
                Some(names)
            })
            .await
            .unwrap()
            .unwrap();
        assert_eq!(watched.len(), 2, "{watched:?}");
        assert!(watched.iter().all(|n| n.starts_with("web-")), "{watched:?}");
    }

    /// A step resumed after its window ran out (a new leader after a failover) waits with no
    /// time left: the pods are still looked at once, on a fresh watch, so a pod that is there
    /// is found rather than the step reported timed out.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_wait_with_no_time_left_still_looks_at_the_pods_once() {
        let sim = Sim::start(SimConfig::default()).await.unwrap();
        let client = sim.client().await.unwrap();
        let api = Api::<Pod>::namespaced(client.clone(), "default");
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "web-1", "namespace": "default", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}
        }))
        .unwrap();
        api.create(&Default::default(), &pod).await.unwrap();
        let selector: Selector = Expression::Equal("app".into(), "web".into()).into();
        let watches = PodWatches::default();
        let seen = watches
            .wait(&client, "default", &selector, Duration::ZERO, |pods| {
                pods.iter().map(|p| p.name_any()).next()
            })
            .await
            .unwrap();
        assert_eq!(seen.as_deref(), Some("web-1"));
        // Nothing to find: the zero window ends it at once, after that one look.
        let none = watches
            .wait(&client, "default", &selector, Duration::ZERO, |pods| {
                pods.iter().find(|p| p.name_any() == "web-2").map(|_| ())
            })
            .await
            .unwrap();
        assert_eq!(none, None);
    }
}
