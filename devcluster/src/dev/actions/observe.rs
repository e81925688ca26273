//! What the actions story reads from the API server for its checks: a workload's replica count
//! and pods, a pod template's resources, a WorkloadAction's phase, and (during a Move) the
//! fewest Ready pods a workload had, followed through a watch so no dip between two polls is
//! missed.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context as _;
use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, ListParams};
use kube::core::Selector;
use kube::runtime::watcher;
use kube::{Client, ResourceExt as _};
use tokio_util::sync::CancellationToken;

use telemesh_core::action::WorkloadAction;
use telemesh_sim::cluster::pod_state::is_running_and_ready;

use super::checks::{ActionSeen, PodSeen, ResourcesSeen, WorkloadSeen};

/// Reads one namespace.
#[derive(Clone)]
pub struct Observer {
    client: Client,
    namespace: String,
}

/// The pod as the checks see it.
pub fn pod_seen(p: &Pod) -> PodSeen {
    let spec = p.spec.as_ref();
    PodSeen {
        name: p.name_any(),
        uid: p.uid().unwrap_or_default(),
        node: spec.and_then(|s| s.node_name.clone()),
        ready: is_running_and_ready(p),
        deleting: p.metadata.deletion_timestamp.is_some(),
        created: p
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_default(),
        cpu_request: spec
            .and_then(|s| s.containers.first())
            .and_then(|c| resource(c, false, "cpu")),
    }
}

fn resource(c: &Container, limit: bool, name: &str) -> Option<String> {
    let r = c.resources.as_ref()?;
    let map = if limit { &r.limits } else { &r.requests };
    map.as_ref()?.get(name).map(|q| q.0.clone())
}

/// The query of `workload`'s pods: its `spec.selector` ([`telemesh_core::selector::of_workload`]).
fn pod_query(workload: &str, selector: Option<&LabelSelector>) -> anyhow::Result<Selector> {
    telemesh_core::selector::of_workload(selector.unwrap_or(&LabelSelector::default()))
        .with_context(|| format!("{workload}'s spec.selector"))
}

impl Observer {
    /// An observer of `namespace`.
    pub fn new(client: Client, namespace: &str) -> Self {
        Self {
            client,
            namespace: namespace.to_owned(),
        }
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    async fn pods_of(&self, selector: &Selector) -> anyhow::Result<Vec<PodSeen>> {
        let list = self
            .pods()
            .list(&ListParams::default().labels_from(selector))
            .await
            .with_context(|| format!("listing pods {selector}"))?;
        Ok(list.items.iter().map(pod_seen).collect())
    }

    /// The query of a Deployment's pods.
    pub async fn deployment_selector(&self, name: &str) -> anyhow::Result<Selector> {
        let d = Api::<Deployment>::namespaced(self.client.clone(), &self.namespace)
            .get(name)
            .await
            .with_context(|| format!("reading Deployment {name}"))?;
        pod_query(
            &format!("Deployment {name}"),
            d.spec.as_ref().map(|s| &s.selector),
        )
    }

    /// A Deployment's replica count and pods.
    pub async fn deployment(&self, name: &str) -> anyhow::Result<WorkloadSeen> {
        let d = Api::<Deployment>::namespaced(self.client.clone(), &self.namespace)
            .get(name)
            .await
            .with_context(|| format!("reading Deployment {name}"))?;
        let spec = d.spec.as_ref();
        Ok(WorkloadSeen {
            replicas: spec.and_then(|s| s.replicas).unwrap_or(1),
            pods: self
                .pods_of(&pod_query(
                    &format!("Deployment {name}"),
                    spec.map(|s| &s.selector),
                )?)
                .await?,
        })
    }

    /// A StatefulSet's replica count and pods.
    pub async fn stateful_set(&self, name: &str) -> anyhow::Result<WorkloadSeen> {
        let s = Api::<StatefulSet>::namespaced(self.client.clone(), &self.namespace)
            .get(name)
            .await
            .with_context(|| format!("reading StatefulSet {name}"))?;
        let spec = s.spec.as_ref();
        Ok(WorkloadSeen {
            replicas: spec.and_then(|s| s.replicas).unwrap_or(1),
            pods: self
                .pods_of(&pod_query(
                    &format!("StatefulSet {name}"),
                    spec.map(|s| &s.selector),
                )?)
                .await?,
        })
    }

    /// The resources of `container` in a Deployment's pod template.
    pub async fn template_resources(
        &self,
        deployment: &str,
        container: &str,
    ) -> anyhow::Result<ResourcesSeen> {
        let d = Api::<Deployment>::namespaced(self.client.clone(), &self.namespace)
            .get(deployment)
            .await
            .with_context(|| format!("reading Deployment {deployment}"))?;
        let c = d
            .spec
            .and_then(|s| s.template.spec)
            .and_then(|s| s.containers.into_iter().find(|c| c.name == container))
            .with_context(|| format!("Deployment {deployment} has no container {container}"))?;
        Ok(ResourcesSeen {
            cpu_request: resource(&c, false, "cpu"),
            cpu_limit: resource(&c, true, "cpu"),
            memory_request: resource(&c, false, "memory"),
            memory_limit: resource(&c, true, "memory"),
        })
    }

    /// The WorkloadAction behind `action_id`: the object of that name in the namespace, else the
    /// one whose UID it is.
    pub async fn action(&self, action_id: &str) -> anyhow::Result<ActionSeen> {
        let api = Api::<WorkloadAction>::namespaced(self.client.clone(), &self.namespace);
        let found = match api.get_opt(action_id).await? {
            Some(a) => Some(a),
            None => api
                .list(&ListParams::default())
                .await?
                .items
                .into_iter()
                .find(|a| a.uid().as_deref() == Some(action_id)),
        };
        let action = found.with_context(|| {
            format!(
                "no WorkloadAction {action_id} in namespace {}",
                self.namespace
            )
        })?;
        Ok(ActionSeen {
            phase: action.phase(),
            message: action.status.map(|s| s.message).unwrap_or_default(),
        })
    }

    /// Starts following the live Ready pods of `selector`; returns once the watch has its first
    /// full list, so every change after this call is seen.
    pub async fn follow_ready(&self, selector: &Selector) -> anyhow::Result<ReadyFloor> {
        let stop = CancellationToken::new();
        let (synced_tx, synced) = tokio::sync::oneshot::channel();
        let stream = watcher(
            self.pods(),
            watcher::Config::default().labels_from(selector),
        );
        let task = tokio::spawn(follow(stream, synced_tx, stop.clone()));
        tokio::time::timeout(Duration::from_secs(10), synced)
            .await
            .context("the pod watch did not list within 10s")?
            .context("the pod watch stopped before its first list")?;
        Ok(ReadyFloor { stop, task })
    }
}

/// The fewest live Ready pods seen since [`Observer::follow_ready`].
pub struct ReadyFloor {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Option<usize>>,
}

impl ReadyFloor {
    /// Stops following; `None` if the watch failed meanwhile.
    pub async fn finish(self) -> Option<usize> {
        self.stop.cancel();
        self.task.await.ok().flatten()
    }
}

async fn follow(
    stream: impl futures::Stream<Item = Result<watcher::Event<Pod>, watcher::Error>>,
    synced: tokio::sync::oneshot::Sender<()>,
    stop: CancellationToken,
) -> Option<usize> {
    let mut stream = std::pin::pin!(stream);
    let mut ready: BTreeMap<String, bool> = BTreeMap::new();
    let mut initial: BTreeMap<String, bool> = BTreeMap::new();
    let mut synced = Some(synced);
    let mut floor: Option<usize> = None;
    let live_ready = |p: &Pod| p.metadata.deletion_timestamp.is_none() && is_running_and_ready(p);
    loop {
        let event = tokio::select! {
            () = stop.cancelled() => return floor,
            e = stream.next() => e,
        };
        match event? {
            Ok(watcher::Event::Init) => initial.clear(),
            Ok(watcher::Event::InitApply(p)) => {
                initial.insert(p.name_any(), live_ready(&p));
            }
            Ok(watcher::Event::InitDone) => {
                ready = std::mem::take(&mut initial);
                if let Some(tx) = synced.take() {
                    let _ = tx.send(());
                }
            }
            Ok(watcher::Event::Apply(p)) => {
                ready.insert(p.name_any(), live_ready(&p));
            }
            Ok(watcher::Event::Delete(p)) => {
                ready.remove(&p.name_any());
            }
            // A broken watch may have missed a dip: the floor is unknown.
            Err(e) => {
                tracing::warn!(error = %e, "the pod watch failed; the Ready floor is unknown");
                return None;
            }
        }
        if synced.is_none() {
            let now = ready.values().filter(|r| **r).count();
            floor = Some(floor.map_or(now, |f| f.min(now)));
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use kube::api::PostParams;
    use serde_json::json;
    use telemesh_sim::{Sim, SimConfig};

    use super::*;

    async fn create<K>(client: &Client, object: serde_json::Value)
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + serde::Serialize
            + std::fmt::Debug,
    {
        let object: K = serde_json::from_value(object).unwrap();
        Api::<K>::namespaced(client.clone(), "default")
            .create(&PostParams::default(), &object)
            .await
            .unwrap();
    }

    fn pod(name: &str, app: &str) -> serde_json::Value {
        json!({"metadata": {"name": name, "labels": {"app": app}},
               "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}})
    }

    /// A workload selecting with `matchExpressions` is read with those expressions: its pods,
    /// not every pod of the namespace.
    #[tokio::test]
    async fn a_match_expressions_selector_reads_only_the_workloads_pods() {
        let sim = Sim::start(SimConfig::default()).await.unwrap();
        let client = sim.client().await.unwrap();
        let selector =
            json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]});
        let template = |app: &str| {
            json!({"metadata": {"labels": {"app": app}},
                   "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}})
        };
        create::<Deployment>(
            &client,
            json!({"metadata": {"name": "web"},
                   "spec": {"replicas": 0, "selector": selector, "template": template("web")}}),
        )
        .await;
        create::<StatefulSet>(
            &client,
            json!({"metadata": {"name": "web-set"},
                   "spec": {"replicas": 0, "serviceName": "web", "selector": selector, "template": template("web")}}),
        )
        .await;
        for (name, app) in [("web-1", "web"), ("web-2", "web"), ("db-1", "db")] {
            create::<Pod>(&client, pod(name, app)).await;
        }
        let observer = Observer::new(client, "default");
        assert_eq!(
            observer
                .deployment_selector("web")
                .await
                .unwrap()
                .to_string(),
            "app in (web)"
        );
        let names =
            |w: WorkloadSeen| -> Vec<String> { w.pods.into_iter().map(|p| p.name).collect() };
        assert_eq!(
            names(observer.deployment("web").await.unwrap()),
            ["web-1", "web-2"]
        );
        assert_eq!(
            names(observer.stateful_set("web-set").await.unwrap()),
            ["web-1", "web-2"]
        );
    }
}
