//! The agent's QUIC server answers the coordinator's client (mutual TLS from a dev CA) with
//! the cgroup figures of the pods on its node.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

use clap::Parser as _;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use telemesh_agent::config::{Cli, Config};
use telemesh_core::testing::copy_tree;
use telemesh_core::wire::{Request, Response};
use telemesh_runtime::quic::client::QuicClient;
use telemesh_runtime::quic::tls::{DevCa, client_config};
use telemesh_runtime::testing::eventually;
use tokio_util::sync::CancellationToken;

const POD_CGROUP: &str = "sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice";
const TEMPLATE: &str = "kubepods-burstable-pod6f1e2d3c_4b5a_4978_8a6b_5c4d3e2f1a0b.slice";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_telemetry_comes_over_mutual_tls() {
    let sim = telemesh_sim::Sim::start(Default::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig).unwrap();

    // A pod on node-0 whose cgroup exists under the agent's host root.
    let pods: Api<Pod> = Api::default_namespaced(sim.client().await.unwrap());
    let pod: Pod = serde_json::from_value(serde_json::json!({"metadata": {"name": "web"}, "spec": {"nodeName": "node-0", "containers": [{"name": "c", "image": "i"}]}})).unwrap();
    let uid = pods
        .create(&PostParams::default(), &pod)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    let root = dir.path().join("host");
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/host-a"),
        &root,
    )
    .unwrap();
    let cgroups = root.join(POD_CGROUP);
    copy_tree(
        &cgroups.join(TEMPLATE),
        &cgroups.join(format!(
            "kubepods-burstable-pod{}.slice",
            uid.replace('-', "_")
        )),
    )
    .unwrap();

    let ca = DevCa::create(&dir.path().join("pki"), "telemesh-test-ca").unwrap();
    let agent_tls = ca.issue("agent", &["node-0", "127.0.0.1"]).unwrap();
    let coordinator_tls = ca.issue("coordinator", &["coordinator"]).unwrap();
    let args = [
        "telemesh-agent".to_string(),
        "--node-name=node-0".into(),
        format!("--host-root={}", root.display()),
        format!("--kubeconfig={}", kubeconfig.display()),
        "--insecure-gossip".into(),
        "--gossip-listen=127.0.0.1:0".into(),
        "--http-listen=127.0.0.1:0".into(),
        "--collect-interval=100ms".into(),
        "--quic-listen=127.0.0.1:0".into(),
        format!("--quic-ca={}", agent_tls.ca.display()),
        format!("--quic-cert={}", agent_tls.cert_chain.display()),
        format!("--quic-key={}", agent_tls.key.display()),
    ];
    let config = Config::try_from(Cli::try_parse_from(args).unwrap()).unwrap();
    let agent = telemesh_agent::start(config, CancellationToken::new())
        .await
        .unwrap();
    let addr = agent.quic_addr.expect("QUIC enabled");

    let client = QuicClient::new(client_config(&coordinator_tls).unwrap()).unwrap();
    let figures = eventually(
        "the pod's figures over QUIC",
        Duration::from_secs(10),
        || {
            let client = &client;
            async move {
                match client.request(addr, "node-0", &Request::PodTelemetry).await {
                    Ok(Response::PodTelemetry { node_name, pods }) => {
                        assert_eq!(node_name, "node-0");
                        pods.into_iter()
                            .find(|p| p.name == "web" && p.cpu_usage_usec.is_some())
                    }
                    _ => None,
                }
            }
        },
    )
    .await;
    // The fixture's cpu.stat: usage_usec 3993939501.
    assert_eq!(figures.cpu_usage_usec, Some(3_993_939_501));
    assert_eq!(figures.namespace, "default");
    agent.shutdown().await;
}
