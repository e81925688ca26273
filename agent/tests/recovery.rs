//! The recovery signal end to end: a real agent against sim, telemetry scripted through a
//! textfile, the seed's scheduling policy (dontschedule: node_metric LessThan 10). Every Node
//! update is watched: the agent annotates its Node exactly once per recovery (and once at start,
//! a node coming back live), never while the node breaks the rule, and never twice in a row.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser as _;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::ApiResource;
use kube::runtime::{WatchStreamExt as _, watcher};
use parking_lot::Mutex;
use telemesh_agent::config::{Cli, Config};
use telemesh_agent::recovery::ANNOTATION;
use telemesh_core::policy::TASPolicy;
use telemesh_core::policy::crd::CRD_YAML;
use telemesh_core::testing::eventually;
use tokio_util::sync::CancellationToken;

const KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
const NS: &str = "health-metric-demo";
const NODE: &str = "sim-node-0";
const WAIT: Duration = Duration::from_secs(20);

fn script(dir: &Path, metrics: &str) {
    let tmp = dir.join("textfile/.metrics.prom.tmp");
    std::fs::write(&tmp, metrics).unwrap();
    std::fs::rename(tmp, dir.join("textfile/metrics.prom")).unwrap();
}

/// What the Node watch saw, in order: the annotation's value on every update that changed it.
type Seen = Arc<Mutex<Vec<String>>>;

async fn annotations_seen(seen: &Seen) -> Vec<String> {
    seen.lock().clone()
}

/// Waits until the policy's status says whether this node breaks dontschedule: the agent has
/// evaluated (and acted on) the scripted value.
async fn until_breaking(policies: &Api<DynamicObject>, breaking: bool) {
    eventually(
        &format!("{NODE} breaking dontschedule = {breaking} in the policy status"),
        WAIT,
        || {
            let policies = policies.clone();
            async move {
                let p = policies.get("scheduling-policy").await.ok()?;
                let strategies = p.data["status"]["nodes"][NODE]["strategies"].clone();
                let is = strategies
                    .as_array()
                    .is_some_and(|a| a.iter().any(|s| s == "dontschedule"));
                (is == breaking).then_some(())
            }
        },
    )
    .await;
}

async fn until_annotations(seen: &Seen, n: usize) -> Vec<String> {
    eventually(&format!("{n} recovery annotations"), WAIT, || {
        let seen = seen.clone();
        async move {
            let v = annotations_seen(&seen).await;
            (v.len() >= n).then_some(v)
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_is_annotated_once_per_recovery() {
    telemesh_core::telemetry::init(telemesh_core::cli::LogFormat::Text, "warn");
    let sim = telemesh_sim::Sim::start(Default::default()).await.unwrap();
    telemesh_sim::nodes::create_nodes(&sim.server, 1).unwrap();
    let client = sim.client().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig).unwrap();
    let keys = dir.path().join("keys");
    std::fs::write(&keys, format!("{KEY}\n")).unwrap();

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
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/examples/scheduling-policy.yaml");
    let obj: DynamicObject =
        serde_yaml_ng::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    eventually("the CRD serves TASPolicies", WAIT, || {
        let (policies, obj) = (policies.clone(), obj.clone());
        async move { policies.create(&PostParams::default(), &obj).await.ok() }
    })
    .await;

    // Every change of the annotation, as kube-scheduler's Node informer would see it.
    let seen: Seen = Arc::default();
    let nodes: Api<Node> = Api::all(client.clone());
    let watch = tokio::spawn({
        let seen = seen.clone();
        let stream = watcher(nodes.clone(), watcher::Config::default()).applied_objects();
        async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(Ok(node)) = stream.next().await {
                let value = node
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(ANNOTATION))
                    .cloned();
                let mut seen = seen.lock();
                if let Some(v) = value
                    && seen.last() != Some(&v)
                {
                    seen.push(v);
                }
            }
        }
    });

    // The node starts breaking the rule (node_metric 5 < 10).
    let root = dir.path().join("node-0");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/host-a/proc");
    telemesh_core::testing::copy_tree(&fixture, &root.join("proc")).unwrap();
    std::fs::create_dir_all(root.join("textfile")).unwrap();
    script(&root, "node_metric 5\n");
    let args = [
        "telemesh-agent".to_string(),
        format!("--node-name={NODE}"),
        format!("--host-root={}", root.display()),
        "--textfile-dir=/textfile".into(),
        format!("--gossip-key-file={}", keys.display()),
        format!("--kubeconfig={}", kubeconfig.display()),
        "--gossip-listen=127.0.0.1:0".into(),
        "--http-listen=127.0.0.1:0".into(),
        "--gossip-interval=100ms".into(),
        "--collect-interval=100ms".into(),
        "--policy-interval=200ms".into(),
        "--recovery-signal-delay=300ms".into(),
        "--recovery-signal-min-interval=1s".into(),
    ];
    let config = Config::try_from(Cli::try_parse_from(args).unwrap()).unwrap();
    let agent = telemesh_agent::start(config, CancellationToken::new())
        .await
        .unwrap();

    until_breaking(&policies, true).await;
    assert_eq!(
        annotations_seen(&seen).await,
        Vec::<String>::new(),
        "no signal while the node breaks the rule"
    );

    // Recovery: one annotation.
    script(&root, "node_metric 50\n");
    until_breaking(&policies, false).await;
    until_annotations(&seen, 1).await;

    // Broken again, then recovered again: exactly one more. Waiting for the break to show in
    // the status means the agent evaluated several more times after the first write.
    script(&root, "node_metric 5\n");
    until_breaking(&policies, true).await;
    assert_eq!(
        annotations_seen(&seen).await.len(),
        1,
        "one write per recovery"
    );
    script(&root, "node_metric 50\n");
    until_breaking(&policies, false).await;
    until_annotations(&seen, 2).await;
    script(&root, "node_metric 5\n");
    until_breaking(&policies, true).await;
    let seen_now = annotations_seen(&seen).await;
    assert_eq!(seen_now.len(), 2, "one write per recovery: {seen_now:?}");

    agent.shutdown().await;
    watch.abort();
}
