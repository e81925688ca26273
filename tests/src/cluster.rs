//! sim's cluster parts for tests that bring their own scheduler: a kubelet stand-in per node and
//! the workload controllers, with sim's scheduler stand-in left out (the real kube-scheduler, or
//! none, places pods). Also the TAS example policy installed as a user would.

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use telemesh_core::policy::TASPolicy;
use telemesh_sim::cluster::kubelet::{Backoff, Kubelet};
use tokio_util::sync::CancellationToken;

use crate::{SimEnv, eventually};

/// The namespace of deploy/examples/scheduling-policy.yaml.
pub const POLICY_NAMESPACE: &str = "health-metric-demo";

/// Kubelets and controllers running in-process; stopped on drop.
#[derive(Debug)]
pub struct ClusterParts {
    stop: CancellationToken,
    faults: tokio::sync::watch::Sender<Vec<telemesh_sim::cluster::kubelet::FaultRule>>,
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
                backoff: Backoff::default(),
            };
            tokio::spawn(kubelet.run(client.clone(), faults_rx.clone(), stop.clone()));
        }
        tokio::spawn(telemesh_sim::cluster::controllers::run(
            client.clone(),
            stop.clone(),
        ));
        Self { stop, faults }
    }

    /// Makes the kubelets apply `rules` from now on (crashes, OOM kills, failures on cue).
    pub fn set_faults(&self, rules: Vec<telemesh_sim::cluster::kubelet::FaultRule>) {
        self.faults.send_replace(rules);
    }
}

/// Installs the TASPolicy CRD, the namespace and deploy/examples/scheduling-policy.yaml
/// unchanged.
pub async fn install_example_policy(client: &kube::Client) {
    let crd: CustomResourceDefinition =
        serde_yaml_ng::from_str(telemesh_core::policy::crd::CRD_YAML).expect("the CRD parses");
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .expect("installing the TASPolicy CRD");
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": POLICY_NAMESPACE}}))
            .expect("a namespace");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("creating the policy's namespace");
    let path = crate::upstream::workspace_root().join("deploy/examples/scheduling-policy.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let policy: TASPolicy = serde_yaml_ng::from_str(&text).expect("the example policy parses");
    let api = Api::<TASPolicy>::namespaced(client.clone(), POLICY_NAMESPACE);
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
