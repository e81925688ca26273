//! What the agent's policy-driven end-to-end tests share: a sim with the TASPolicy CRD, the demo
//! namespace and the seed's policy files applied unchanged, a gossip key, scripted host roots,
//! and an agent configuration from command-line flags.
#![allow(clippy::unwrap_used, dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser as _;
use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::ApiResource;
use telemesh_agent::config::{Cli, Config};
use telemesh_core::policy::TASPolicy;
use telemesh_core::policy::crd::CRD_YAML;
use telemesh_runtime::testing::eventually;

pub const KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
pub const NS: &str = "health-metric-demo";
pub const WAIT: Duration = Duration::from_secs(20);

/// A sim with `nodes` Nodes, the TASPolicy CRD, namespace [`NS`] and the seed's policy files
/// from deploy/examples/, with a kubeconfig and a gossip key file in a private directory.
pub struct PolicyEnv {
    pub sim: telemesh_sim::Sim,
    pub client: kube::Client,
    pub dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
    pub keys: PathBuf,
    pub policies: Api<DynamicObject>,
}

impl PolicyEnv {
    /// Starts the sim and applies `policy_files` (names under deploy/examples/).
    pub async fn start(nodes: usize, policy_files: &[&str]) -> Self {
        telemesh_runtime::telemetry::init(telemesh_runtime::cli::LogFormat::Text, "warn");
        let sim = telemesh_sim::Sim::start(Default::default()).await.unwrap();
        telemesh_sim::nodes::create_nodes(&sim.server, nodes).unwrap();
        let client = sim.client().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        sim.write_kubeconfig(&kubeconfig).unwrap();
        let keys = dir.path().join("keys");
        std::fs::write(&keys, format!("{KEY}\n")).unwrap();

        let policies = install_policies(&client, policy_files).await;
        Self {
            sim,
            client,
            dir,
            kubeconfig,
            keys,
            policies,
        }
    }

    /// Returns an agent's configuration for `node` with telemetry under `root`, quick test
    /// timings, and `extra` flags.
    pub fn agent_config(&self, node: &str, root: &Path, extra: &[String]) -> Config {
        agent_config(&self.kubeconfig, &self.keys, node, root, extra)
    }
}

/// Installs the TASPolicy CRD, namespace [`NS`] and the seed's `policy_files` (names under
/// deploy/examples/, unchanged) with `client`, on sim or a real API server; returns the
/// policies' Api.
pub async fn install_policies(client: &kube::Client, policy_files: &[&str]) -> Api<DynamicObject> {
    let crd: CustomResourceDefinition = serde_yaml_ng::from_str(CRD_YAML).unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let resource = ApiResource::erase::<TASPolicy>(&());
    let policies: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &resource);
    for file in policy_files {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../deploy/examples")
            .join(file);
        let obj: DynamicObject =
            serde_yaml_ng::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        eventually("the CRD serves TASPolicies", WAIT, || {
            let (policies, obj) = (policies.clone(), obj.clone());
            async move { policies.create(&PostParams::default(), &obj).await.ok() }
        })
        .await;
    }
    policies
}

/// Returns an agent's configuration for `node` against the API server of `kubeconfig`, gossip
/// sealed with the key file `keys`, telemetry under `root`, quick test timings, and `extra`
/// flags.
pub fn agent_config(
    kubeconfig: &Path,
    keys: &Path,
    node: &str,
    root: &Path,
    extra: &[String],
) -> Config {
    let mut args = vec![
        "telemesh-agent".to_string(),
        format!("--node-name={node}"),
        format!("--host-root={}", root.display()),
        "--textfile-dir=/textfile".into(),
        format!("--gossip-key-file={}", keys.display()),
        format!("--kubeconfig={}", kubeconfig.display()),
        "--gossip-listen=127.0.0.1:0".into(),
        "--http-listen=127.0.0.1:0".into(),
        "--gossip-interval=100ms".into(),
        "--collect-interval=100ms".into(),
    ];
    args.extend(extra.iter().cloned());
    Config::try_from(Cli::try_parse_from(args).unwrap()).unwrap()
}

/// The labels of Node `name`.
pub async fn labels(nodes: &Api<Node>, name: &str) -> BTreeMap<String, String> {
    nodes
        .get(name)
        .await
        .unwrap()
        .metadata
        .labels
        .unwrap_or_default()
}

/// Events in `namespace` with `reason` about the object named `name`.
pub async fn events(
    client: &kube::Client,
    namespace: &str,
    reason: &str,
    name: &str,
) -> Vec<Event> {
    Api::<Event>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some(reason)
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        })
        .collect()
}

/// A host root with the fixture's /proc and a textfile directory holding `metrics`.
pub fn host_root(dir: &Path, metrics: &str) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/host-a/proc");
    telemesh_core::testing::copy_tree(&fixture, &dir.join("proc")).unwrap();
    std::fs::create_dir_all(dir.join("textfile")).unwrap();
    script(dir, metrics);
}

/// Rewrites the node's scripted metrics atomically, as node-exporter asks textfile writers to.
pub fn script(dir: &Path, metrics: &str) {
    let tmp = dir.join("textfile/.metrics.prom.tmp");
    std::fs::write(&tmp, metrics).unwrap();
    std::fs::rename(tmp, dir.join("textfile/metrics.prom")).unwrap();
}
