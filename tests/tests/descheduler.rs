//! The real descheduler (v0.32.2, `$TELEMESH_DESCHEDULER`, default ../shared/tools/) with
//! deploy/descheduler/policy.yaml unchanged, against sim with its kubelets and controllers and a
//! real telemesh-agent per node in descheduler mode (`--local-eviction=false`): once an agent
//! labels its node `scheduling-policy=violating`, one descheduling pass evicts exactly the pods
//! the policy's header describes, the linked pods on that node with the required
//! `scheduling-policy NotIn [violating]` node affinity, and nothing else.
//!
//! The same scene runs on a real control plane (kube-apiserver and kube-controller-manager
//! v1.36; the descheduler is a client, so the newer server serves it).
//!
//! Skipped, saying so, when the descheduler binary (or the control plane's) is absent.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt as _;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use telemesh_sim::cluster::pod_state::is_running_and_ready;
use telemesh_tests::cluster::{ClusterParts, POLICY_NAMESPACE, install_example_policy};
use telemesh_tests::mesh::{Mesh, MeshEnv};
use telemesh_tests::real::RealEnv;
use telemesh_tests::upstream::{DESCHEDULER, workspace_root};
use telemesh_tests::{Process, SimEnv, eventually};
use tokio::process::Command;

const WAIT: Duration = Duration::from_secs(60);

/// A ReplicaSet of `replicas` pods linked to scheduling-policy on `node`, with the policy
/// header's required affinity when `affine`.
fn replica_set(name: &str, node: &str, replicas: i32, affine: bool) -> ReplicaSet {
    let affinity = affine.then(|| {
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "scheduling-policy", "operator": "NotIn", "values": ["violating"]}
            ]}]
        }}})
    });
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name, "telemetry-policy": "scheduling-policy"}},
                "spec": {
                    // Placed directly: this test has no scheduler; where pods run is the scene.
                    "nodeName": node,
                    "affinity": affinity,
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]
                }
            }
        }
    }))
    .unwrap()
}

/// Pod UID → `app` label, of the pods present now and not on their way out (a real API server
/// keeps an evicted pod, Terminating, until its kubelet reports the end).
async fn pods_by_uid(pods: &Api<Pod>) -> BTreeMap<String, String> {
    pods.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| Some((p.uid()?, p.labels().get("app")?.clone())))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn descheduler_evicts_exactly_the_affine_linked_pods_of_a_violating_node() {
    let Some(binary) =
        DESCHEDULER.find("descheduler_evicts_exactly_the_affine_linked_pods_of_a_violating_node")
    else {
        return;
    };
    telemesh_runtime::telemetry::init(telemesh_runtime::cli::LogFormat::Text, "warn");
    let env = SimEnv::start(3).await;
    let _parts = ClusterParts::start(&env, 3).await;
    let client = env.client().await;
    install_example_policy(&client).await;
    scene(&env, &client, &binary).await;
}

/// [`descheduler_evicts_exactly_the_affine_linked_pods_of_a_violating_node`] on a real control
/// plane (its ReplicaSet controller; the Eviction API marks a pod `DisruptionTarget` and
/// deletes it gracefully, so an evicted pod is Terminating until its kubelet reports the end).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn descheduler_evicts_exactly_the_affine_linked_pods_on_a_real_control_plane() {
    const TEST: &str = "descheduler_evicts_exactly_the_affine_linked_pods_on_a_real_control_plane";
    let Some(binary) = DESCHEDULER.find(TEST) else {
        return;
    };
    let Some(env) = RealEnv::start(TEST, 3).await else {
        return;
    };
    telemesh_runtime::telemetry::init(telemesh_runtime::cli::LogFormat::Text, "warn");
    let client = env.client().await;
    install_example_policy(&client).await;
    env.wait_default_service_account(POLICY_NAMESPACE).await;
    scene(&env, &client, &binary).await;
}

/// The scene on `env` (the example policy installed): agents in descheduler mode, three
/// ReplicaSets placed directly, sim-node-1 made to violate, one descheduling pass.
async fn scene(env: &impl MeshEnv, client: &kube::Client, binary: &Path) {
    let healthy = "node_metric 50\n";
    let mesh = Mesh::start(
        env,
        &[
            ("sim-node-0", healthy),
            ("sim-node-1", healthy),
            ("sim-node-2", healthy),
        ],
        &[
            "--local-eviction=false",
            "--min-pod-age=0s",
            "--violation-grace=0s",
        ],
        0,
    )
    .await;

    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), POLICY_NAMESPACE);
    for rs in [
        replica_set("affine-on-bad", "sim-node-1", 2, true),
        replica_set("plain-on-bad", "sim-node-1", 1, false),
        replica_set("affine-elsewhere", "sim-node-0", 1, true),
    ] {
        sets.create(&PostParams::default(), &rs).await.unwrap();
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), POLICY_NAMESPACE);
    eventually("the four pods running", WAIT, || {
        let pods = pods.clone();
        async move {
            let list = pods.list(&ListParams::default()).await.ok()?.items;
            (list.len() == 4 && list.iter().all(is_running_and_ready)).then_some(())
        }
    })
    .await;

    // sim-node-1 breaks the deschedule rule (node_metric Equals -1): its agent labels the node.
    mesh.script("sim-node-1", "node_metric -1\n");
    let nodes: Api<Node> = Api::all(client.clone());
    eventually(
        "sim-node-1 labelled scheduling-policy=violating",
        WAIT,
        || {
            let nodes = nodes.clone();
            async move {
                let node = nodes.get("sim-node-1").await.ok()?;
                (node.labels().get("scheduling-policy").map(String::as_str) == Some("violating"))
                    .then_some(())
            }
        },
    )
    .await;
    let before = pods_by_uid(&pods).await;
    assert_eq!(
        before.len(),
        4,
        "the agent evicted nothing itself: {before:?}"
    );

    // descheduler v0.32 cannot run without its HTTPS server (--secure-port=0 crashes it): a
    // loopback port free now, its self-signed certificate under the test's directory.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cmd = Command::new(binary);
    cmd.arg(format!("--kubeconfig={}", env.kubeconfig().display()))
        .arg(format!(
            "--policy-config-file={}",
            workspace_root()
                .join("deploy/descheduler/policy.yaml")
                .display()
        ))
        .arg(format!(
            "--cert-dir={}",
            env.dir().join("descheduler-certs").display()
        ))
        .args([
            &format!("--secure-port={port}"),
            "--descheduling-interval=0",
            "--bind-address=127.0.0.1",
            "--v=3",
        ]);
    let mut descheduler = Process::spawn("descheduler", cmd);
    let status = descheduler.wait_exit(WAIT).await;
    let output = descheduler.output().join("\n");
    assert!(status.success(), "descheduler failed ({status}):\n{output}");

    let after = pods_by_uid(&pods).await;
    let evicted: Vec<&String> = before
        .iter()
        .filter(|(uid, _)| !after.contains_key(*uid))
        .map(|(_, app)| app)
        .collect();
    assert_eq!(
        evicted,
        vec!["affine-on-bad", "affine-on-bad"],
        "evicted (by app) of {before:?}; descheduler output:\n{output}"
    );
}
