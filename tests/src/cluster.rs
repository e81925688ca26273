//! sim's cluster parts for tests that bring their own scheduler: a kubelet stand-in per node and
//! the workload controllers, with sim's scheduler stand-in left out (the real kube-scheduler, or
//! none, places pods) unless asked for. Also the TAS example policy installed as a user would.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt as _;
use kube::api::{Api, ListParams, PostParams};
use telemesh_core::policy::TASPolicy;
use telemesh_sim::cluster::kubelet::{CRASH_BACKOFF, Kubelet};
use telemesh_sim::cluster::scheduler;
use telemesh_sim::cluster::scheduler::config::SchedulerConfiguration;
use tokio_util::sync::CancellationToken;

use crate::{SimEnv, eventually};

/// The namespace of deploy/examples/scheduling-policy.yaml.
pub const POLICY_NAMESPACE: &str = "health-metric-demo";

/// Kubelets and controllers running in-process; stopped on drop.
#[derive(Debug)]
pub struct ClusterParts {
    stop: CancellationToken,
    faults: tokio::sync::watch::Sender<Vec<telemesh_sim::cluster::kubelet::FaultRule>>,
    /// The workload controllers' own stop and task, while they run.
    controllers: Option<(CancellationToken, tokio::task::JoinHandle<()>)>,
}

impl Drop for ClusterParts {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl ClusterParts {
    /// Starts a kubelet for each of `env`'s `nodes` nodes (`sim-node-0..`) and the controllers.
    pub async fn start(env: &SimEnv, nodes: usize) -> Self {
        let client = env.client().await;
        let stop = CancellationToken::new();
        let (faults, faults_rx) = tokio::sync::watch::channel(Vec::new());
        for i in 0..nodes {
            let kubelet = Kubelet {
                node: format!("sim-node-{i}"),
                index: u8::try_from(i).expect("fewer than 256 nodes"),
                backoff: CRASH_BACKOFF,
                // Where a mesh's agent for this node reads its host (crate::mesh).
                host_root: Some(env.dir().join("hosts").join(format!("sim-node-{i}"))),
                workloads: env.sim.workloads.clone(),
            };
            tokio::spawn(kubelet.run(client.clone(), faults_rx.clone(), stop.clone()));
        }
        let controllers = Some(spawn_controllers(client, &stop));
        Self {
            stop,
            faults,
            controllers,
        }
    }

    /// Stops the workload controllers and returns once they have stopped, as when
    /// kube-controller-manager is down: from then on no controller writes, so workloads' status
    /// stays as it is until [`ClusterParts::resume_controllers`].
    pub async fn pause_controllers(&mut self) {
        if let Some((stop, task)) = self.controllers.take() {
            stop.cancel();
            task.await.expect("the controllers' task ends cleanly");
        }
    }

    /// Starts the workload controllers again (they re-list and reconcile everything, as a
    /// restarted kube-controller-manager does).
    pub async fn resume_controllers(&mut self, env: &SimEnv) {
        if self.controllers.is_none() {
            self.controllers = Some(spawn_controllers(env.client().await, &self.stop));
        }
    }

    /// Also runs sim's scheduler stand-in, with the shipped dev configuration
    /// (deploy/scheduler/kube-scheduler-config.dev.yaml) calling the extender at `url_prefix`:
    /// for tests that need pods placed through the extender but not upstream's scheduler.
    pub async fn start_scheduler(&self, env: &SimEnv, url_prefix: &str) {
        let rendered =
            crate::upstream::dev_scheduler_config(&env.kubeconfig, url_prefix, None, false);
        let settings = scheduler::Settings {
            config: SchedulerConfiguration::parse(&rendered)
                .expect("the dev scheduler configuration parses"),
            ..scheduler::Settings::default()
        };
        // Nobody listens to the decisions; the scheduler does not need anyone to.
        let (decisions, _) = tokio::sync::broadcast::channel(16);
        let (client, stop) = (env.client().await, self.stop.clone());
        tokio::spawn(async move {
            if let Err(e) = scheduler::run(client, settings, decisions, stop).await {
                tracing::error!(error = format!("{e:#}"), "sim's scheduler stopped");
            }
        });
    }

    /// Makes the kubelets apply `rules` from now on (crashes, OOM kills, failures on cue).
    pub fn set_faults(&self, rules: Vec<telemesh_sim::cluster::kubelet::FaultRule>) {
        self.faults.send_replace(rules);
    }
}

fn spawn_controllers(
    client: kube::Client,
    parts: &CancellationToken,
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let stop = parts.child_token();
    let task = tokio::spawn(telemesh_sim::cluster::controllers::run(
        client,
        stop.clone(),
    ));
    (stop, task)
}

/// Installs the TASPolicy CRD, the namespace and deploy/examples/scheduling-policy.yaml
/// unchanged.
pub async fn install_example_policy(client: &kube::Client) {
    let path = crate::upstream::workspace_root().join("deploy/examples/scheduling-policy.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let policy: TASPolicy = serde_yaml_ng::from_str(&text).expect("the example policy parses");
    install_policies(client, POLICY_NAMESPACE, &[policy]).await;
}

/// Installs the TASPolicy CRD, creates `namespace` and then `policies` in it (each retried
/// until the new CRD is served).
pub async fn install_policies(client: &kube::Client, namespace: &str, policies: &[TASPolicy]) {
    let crd: CustomResourceDefinition =
        serde_yaml_ng::from_str(telemesh_core::policy::crd::CRD_YAML).expect("the CRD parses");
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .expect("installing the TASPolicy CRD");
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": namespace}}))
            .expect("a namespace");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("creating the policy's namespace");
    let api = Api::<TASPolicy>::namespaced(client.clone(), namespace);
    for policy in policies {
        eventually("the TASPolicy is created", crate::mesh::MESH_WAIT, || {
            let (api, policy) = (api.clone(), policy.clone());
            async move {
                api.create(&PostParams::default(), &policy)
                    .await
                    .ok()
                    .map(|_| ())
            }
        })
        .await;
    }
}

/// The label the workloads of [`create_deployment`] select their pods by.
pub const APP_LABEL: &str = "app.kubernetes.io/name";

/// Creates Deployment `namespace/name` with `replicas` pods of one pause container named
/// `pause` (1m CPU, 1 MiB requested), selected by `app.kubernetes.io/name=<name>`.
pub async fn create_deployment(client: &kube::Client, namespace: &str, name: &str, replicas: i32) {
    create_deployment_with(client, namespace, name, replicas, serde_json::json!({})).await;
}

/// [`create_deployment`] with `extra` fields in the container (a readinessProbe, ...).
pub async fn create_deployment_with(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    replicas: i32,
    extra: serde_json::Value,
) {
    let mut container = serde_json::json!({"name": "pause", "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}});
    for (k, v) in extra.as_object().into_iter().flatten() {
        container[k] = v.clone();
    }
    let d: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {APP_LABEL: name}},
            "template": {
                "metadata": {"labels": {APP_LABEL: name}},
                "spec": {"containers": [container]}
            }
        }
    }))
    .expect("a Deployment");
    Api::<Deployment>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &d)
        .await
        .unwrap_or_else(|e| panic!("creating Deployment {namespace}/{name}: {e}"));
}

/// The live (not terminating) pods labelled `app.kubernetes.io/name=<app>` in `namespace`, by
/// name → node (empty while unscheduled).
pub async fn live_pods(
    client: &kube::Client,
    namespace: &str,
    app: &str,
) -> BTreeMap<String, String> {
    Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().labels(&format!("{APP_LABEL}={app}")))
        .await
        .unwrap_or_else(|e| panic!("listing the pods of {namespace}/{app}: {e}"))
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let node = p
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default();
            (p.name_any(), node)
        })
        .collect()
}
