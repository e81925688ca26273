//! End to end against sim with real agents: three agents (sealed gossip, metrics scripted
//! through node-exporter textfiles) and two coordinator replicas, in-process on 127.0.0.1. The
//! seed policy file is applied unchanged. A node whose metric breaks the dontschedule rule is
//! filtered with a reason naming the rule, scheduleonmetric ranks nodes by value, both modes
//! work, a changed metric changes the answer, both replicas answer alike, and the JSON API
//! fetches a node's pods from its agent over QUIC.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use clap::Parser as _;
use http_body_util::{BodyExt as _, Full};
use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ListParams, PostParams};
use telemesh_core::extender::{ExtenderArgs, ExtenderFilterResult, HostPriority, NodeList};
use telemesh_core::policy::TASPolicy;
use telemesh_core::policy::crd::CRD_YAML;
use telemesh_runtime::quic::tls::DevCa;
use telemesh_runtime::testing::eventually;
use tokio_util::sync::CancellationToken;

const KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
const SEED_POLICY: &str = include_str!("../../deploy/examples/scheduling-policy.yaml");
const NAMESPACE: &str = "health-metric-demo";
const WAIT: Duration = Duration::from_secs(30);

/// Writes `node_metric <value>` where the agent's textfile collector reads it, atomically.
fn script_metric(root: &Path, value: f64) {
    let dir = root.join("textfile");
    std::fs::create_dir_all(&dir).unwrap();
    let tmp = dir.join(".metrics.prom.tmp");
    std::fs::write(&tmp, format!("node_metric {value}\n")).unwrap();
    std::fs::rename(tmp, dir.join("metrics.prom")).unwrap();
}

fn free_udp_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn http(method: &str, addr: SocketAddr, path: &str, body: Vec<u8>) -> (u16, Vec<u8>) {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let req = http::Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let resp = client.request(req).await.unwrap();
    let status = resp.status().as_u16();
    (
        status,
        resp.into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec(),
    )
}

async fn post<T: serde::de::DeserializeOwned>(
    addr: SocketAddr,
    path: &str,
    body: &ExtenderArgs,
) -> T {
    let (status, bytes) = http("POST", addr, path, serde_json::to_vec(body).unwrap()).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&bytes));
    serde_json::from_slice(&bytes).unwrap()
}

fn pod() -> k8s_openapi::api::core::v1::Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "demo", "namespace": NAMESPACE, "uid": "u-1",
                     "labels": {"app": "demo", "telemetry-policy": "scheduling-policy"}},
        "spec": {"containers": [{"name": "c", "image": "nginx",
                 "resources": {"limits": {"telemetry/scheduling": "1"}}}]}
    }))
    .unwrap()
}

fn names_args(names: &[&str]) -> ExtenderArgs {
    ExtenderArgs {
        pod: Some(pod()),
        nodes: None,
        node_names: Some(names.iter().map(|n| (*n).to_owned()).collect()),
    }
}

fn agent_config(
    node: &str,
    root: &Path,
    dir: &Path,
    seeds: &[String],
    quic: Option<(u16, &DevCa)>,
) -> telemesh_agent::config::Config {
    let mut args = vec![
        "telemesh-agent".to_string(),
        format!("--node-name={node}"),
        format!("--host-root={}", root.display()),
        "--textfile-dir=/textfile".into(),
        format!("--gossip-key-file={}", dir.join("keys").display()),
        format!("--kubeconfig={}", dir.join("kubeconfig").display()),
        "--gossip-listen=127.0.0.1:0".into(),
        "--http-listen=127.0.0.1:0".into(),
        "--gossip-interval=100ms".into(),
        "--collect-interval=100ms".into(),
    ];
    if !seeds.is_empty() {
        args.push(format!("--gossip-seeds={}", seeds.join(",")));
    }
    if let Some((port, ca)) = quic {
        let files = ca.issue(node, &[node, "127.0.0.1"]).unwrap();
        args.extend([
            format!("--quic-listen=127.0.0.1:{port}"),
            format!("--quic-ca={}", files.ca.display()),
            format!("--quic-cert={}", files.cert_chain.display()),
            format!("--quic-key={}", files.key.display()),
        ]);
    }
    telemesh_agent::config::Config::try_from(
        telemesh_agent::config::Cli::try_parse_from(args).unwrap(),
    )
    .unwrap()
}

fn coordinator_config(
    name: &str,
    dir: &Path,
    seed: &str,
    quic: (u16, &DevCa),
) -> telemesh_coordinator::config::Config {
    let files = quic.1.issue(name, &[name]).unwrap();
    let args = vec![
        "telemesh-coordinator".to_string(),
        format!("--replica-name={name}"),
        format!("--gossip-key-file={}", dir.join("keys").display()),
        format!("--kubeconfig={}", dir.join("kubeconfig").display()),
        format!("--gossip-seeds={seed}"),
        "--gossip-listen=127.0.0.1:0".into(),
        "--extender-listen=127.0.0.1:0".into(),
        "--api-listen=127.0.0.1:0".into(),
        "--api-auth=none".into(),
        "--http-listen=127.0.0.1:0".into(),
        "--gossip-interval=100ms".into(),
        "--view-tick=50ms".into(),
        format!("--quic-ca={}", files.ca.display()),
        format!("--quic-cert={}", files.cert_chain.display()),
        format!("--quic-key={}", files.key.display()),
        "--quic-bind=127.0.0.1:0".into(),
        format!("--agent-quic-port={}", quic.0),
    ];
    telemesh_coordinator::config::Config::try_from(
        telemesh_coordinator::config::Cli::try_parse_from(args).unwrap(),
    )
    .unwrap()
}

async fn install_policy(client: &kube::Client) {
    let crd: CustomResourceDefinition = serde_yaml_ng::from_str(CRD_YAML).unwrap();
    kube::Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": NAMESPACE}})).unwrap();
    kube::Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let policy: TASPolicy = serde_yaml_ng::from_str(SEED_POLICY).unwrap();
    let api = kube::Api::<TASPolicy>::namespaced(client.clone(), NAMESPACE);
    eventually("the TASPolicy is created", WAIT, || {
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

/// The filter answer of a replica, names mode: kept names and failed reasons.
async fn filter(addr: SocketAddr, names: &[&str]) -> ExtenderFilterResult {
    post(addr, "/scheduler/filter", &names_args(names)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extender_answers_from_gossiped_telemetry() {
    telemesh_runtime::telemetry::init(telemesh_runtime::cli::LogFormat::Text, "warn");
    let sim = telemesh_sim::Sim::start(Default::default()).await.unwrap();
    telemesh_sim::nodes::create_nodes(&sim.server, 3).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir: PathBuf = tmp.path().to_owned();
    sim.write_kubeconfig(&dir.join("kubeconfig")).unwrap();
    std::fs::write(dir.join("keys"), format!("{KEY}\n")).unwrap();
    let client = sim.client().await.unwrap();
    install_policy(&client).await;

    // Three agents: node_metric 5 (breaks dontschedule LessThan 10), 50 and 20.
    let ca = DevCa::create(&dir.join("ca"), "telemesh test CA").unwrap();
    let quic_port = free_udp_port();
    let names = ["sim-node-0", "sim-node-1", "sim-node-2"];
    let mut agents = Vec::new();
    let mut seeds = Vec::new();
    for (i, (name, value)) in names.iter().zip([5.0, 50.0, 20.0]).enumerate() {
        let root = dir.join(name);
        script_metric(&root, value);
        let quic = (i == 0).then_some((quic_port, &ca));
        let agent = telemesh_agent::start(
            agent_config(name, &root, &dir, &seeds, quic),
            CancellationToken::new(),
        )
        .await
        .unwrap();
        seeds.push(agent.gossip_addr.to_string());
        agents.push(agent);
    }

    let coordinator = telemesh_coordinator::start(
        coordinator_config("coordinator-a", &dir, &seeds[0], (quic_port, &ca)),
        CancellationToken::new(),
    )
    .await
    .unwrap();
    let (ext, api, health) = (
        coordinator.extender_addr,
        coordinator.api_addr,
        coordinator.http_addr,
    );
    eventually("the coordinator is ready", WAIT, || async move {
        (http("GET", health, "/readyz", vec![]).await.0 == 200).then_some(())
    })
    .await;

    eventually("the view holds every node's metric", WAIT, || async move {
        let (_, body) = http("GET", api, "/api/v1/nodes", vec![]).await;
        let v: serde_json::Value = serde_json::from_slice(&body).ok()?;
        let with_metric = v["nodes"]
            .as_array()?
            .iter()
            .filter(|n| n["metrics"]["node_metric"].is_object())
            .count();
        (with_metric == 3).then_some(())
    })
    .await;

    // The violating node is filtered with a reason naming policy, rule and value.
    let result = eventually("sim-node-0 filtered", WAIT, || async move {
        let r = filter(ext, &names).await;
        (r.node_names.as_deref() == Some(&["sim-node-1".to_owned(), "sim-node-2".to_owned()][..]))
            .then_some(r)
    })
    .await;
    assert_eq!(
        result.failed_and_unresolvable_nodes["sim-node-0"],
        "policy health-metric-demo/scheduling-policy dontschedule: node_metric LessThan 10 (value 5)"
    );
    assert!(result.error.is_empty());

    // scheduleonmetric GreaterThan ranks by value, scored by magnitude: 50 → 10, 20 → 4, 5 → 1.
    let scores: Vec<HostPriority> = post(ext, "/scheduler/prioritize", &names_args(&names)).await;
    let scores: Vec<(&str, i64)> = scores.iter().map(|h| (h.host.as_str(), h.score)).collect();
    assert_eq!(
        scores,
        [("sim-node-0", 1), ("sim-node-1", 10), ("sim-node-2", 4)]
    );

    // Full-node mode with the Node objects from the API server: survivors come back intact.
    let nodes = kube::Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    let by_name = |n: &str| {
        nodes
            .items
            .iter()
            .find(|x| x.metadata.name.as_deref() == Some(n))
            .cloned()
            .unwrap()
    };
    let full = ExtenderArgs {
        pod: Some(pod()),
        nodes: Some(NodeList {
            items: names.iter().map(|n| by_name(n)).collect(),
            metadata: Default::default(),
        }),
        node_names: None,
    };
    let r: ExtenderFilterResult = post(ext, "/scheduler/filter", &full).await;
    assert_eq!(
        r.nodes.unwrap().items,
        vec![by_name("sim-node-1"), by_name("sim-node-2")]
    );
    assert!(r.failed_and_unresolvable_nodes.contains_key("sim-node-0"));

    // A second replica gives the same answers.
    let replica = telemesh_coordinator::start(
        coordinator_config("coordinator-b", &dir, &seeds[1], (quic_port, &ca)),
        CancellationToken::new(),
    )
    .await
    .unwrap();
    let ext_b = replica.extender_addr;
    eventually("both replicas answer alike", WAIT, || async move {
        let (a, b) = (filter(ext, &names).await, filter(ext_b, &names).await);
        (a == b).then_some(())
    })
    .await;

    // A metric that changes changes the answer: sim-node-2 drops to 3.
    script_metric(&dir.join("sim-node-2"), 3.0);
    for addr in [ext, ext_b] {
        eventually(
            "sim-node-2 filtered after its metric dropped",
            WAIT,
            || async move {
                let r = filter(addr, &names).await;
                (r.node_names.as_deref() == Some(&["sim-node-1".to_owned()][..])
                    && r.failed_and_unresolvable_nodes
                        .get("sim-node-2")
                        .is_some_and(|m| m.contains("(value 3)")))
                .then_some(())
            },
        )
        .await;
    }

    // The JSON API: every node from the view, and a node's pods from its agent over QUIC.
    // Metrics can reach the view before this replica's failure detector has heard a member
    // twice; until then the member is listed, not live. Each turns live once it is heard.
    let v = eventually("the view lists every node live", WAIT, || async move {
        let (status, body) = http("GET", api, "/api/v1/nodes", vec![]).await;
        assert_eq!(status, 200);
        let v: serde_json::Value = serde_json::from_slice(&body).ok()?;
        v["nodes"]
            .as_array()?
            .iter()
            .all(|n| n["liveness"] == "live")
            .then_some(v)
    })
    .await;
    let listed: Vec<&str> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["name"].as_str())
        .collect();
    assert_eq!(listed, names);
    assert_eq!(v["nodes"][0]["metrics"]["node_metric"]["value"], 5.0);
    let (status, body) = http("GET", api, "/api/v1/nodes/sim-node-0/pods", vec![]).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["node"], "sim-node-0");
    assert!(v["pods"].is_array());
    let (status, _) = http("GET", api, "/api/v1/nodes/no-such-node/pods", vec![]).await;
    assert_eq!(status, 404);

    // Metrics: latency per verb, decisions, view size.
    // (View gauges refresh every second.)
    eventually("the coordinator's metrics", WAIT, || async move {
        let (_, text) = http("GET", health, "/metrics", vec![]).await;
        let text = String::from_utf8(text).ok()?;
        [
            "telemesh_coordinator_extender_latency_seconds_bucket{",
            r#"telemesh_coordinator_extender_decisions_total{verb="Filter",outcome="Evaluated"}"#,
            r#"telemesh_coordinator_view_nodes{liveness="Live"} 3"#,
            "telemesh_coordinator_view_stale_nodes 0",
            "telemesh_coordinator_policies_cached 1",
        ]
        .iter()
        .all(|needle| text.contains(needle))
        .then_some(())
    })
    .await;

    replica.shutdown().await;
    coordinator.shutdown().await;
    for a in agents {
        a.shutdown().await;
    }
}
