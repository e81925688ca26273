//! Actions accepted per second by one coordinator replica into sim's store: concurrent clients
//! POST WAM's `action.Create` (gorilla dialect, keep-alive connections) to `/rpc`; every reply
//! must carry an action id, and afterwards the store must hold exactly that many
//! WorkloadActions. Two rounds: `--api-auth none` (the accept path alone: one create per action)
//! and `--api-auth kubernetes` with one caller (TokenReview and SubjectAccessReview answered
//! from the cache after the first call). Sim, the replica and the clients share the machine.
//!
//! Target (issue 16): at least 1,000 actions/s on one replica.
//! Run: `cargo bench -p telemesh-coordinator --bench actions_accept`; `ACTIONS` (default 5,000)
//! and `CLIENTS` (default 64) change the load.
#![allow(clippy::unwrap_used, clippy::print_stdout)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Parser as _;
use http_body_util::{BodyExt as _, Full};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use telemesh_core::action::WorkloadAction;
use telemesh_sim::{Auth, Sim, SimConfig, UserInfo};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

const NS: &str = "bench";

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn start(
    auth: bool,
) -> (
    Sim,
    kube::Client,
    telemesh_coordinator::Coordinator,
    tempfile::TempDir,
) {
    let config = if auth {
        let tokens: HashMap<String, UserInfo> = [
            (
                "coordinator-token",
                "system:serviceaccount:telemesh:coordinator",
                "system:masters",
            ),
            ("caller-token", "aiops", "system:masters"),
        ]
        .into_iter()
        .map(|(t, u, g)| {
            (
                t.to_owned(),
                UserInfo {
                    username: u.into(),
                    uid: u.into(),
                    groups: vec![g.into()],
                },
            )
        })
        .collect();
        SimConfig {
            auth: Auth {
                tokens,
                rules: Vec::new(),
            },
            kubeconfig_token: Some("coordinator-token".into()),
            ..SimConfig::default()
        }
    } else {
        SimConfig::default()
    };
    let sim = Sim::start(config).await.unwrap();
    let client = sim.client().await.unwrap();
    for yaml in [
        telemesh_core::action::crd::CRD_YAML,
        telemesh_core::policy::crd::CRD_YAML,
    ] {
        let crd: CustomResourceDefinition = serde_yaml_ng::from_str(yaml).unwrap();
        Api::<CustomResourceDefinition>::all(client.clone())
            .create(&PostParams::default(), &crd)
            .await
            .unwrap();
    }
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    sim.write_kubeconfig(&dir.path().join("kubeconfig"))
        .unwrap();
    let args = vec![
        "telemesh-coordinator".to_string(),
        "--insecure-gossip".into(),
        format!("--kubeconfig={}", dir.path().join("kubeconfig").display()),
        "--gossip-listen=127.0.0.1:0".into(),
        "--extender-listen=127.0.0.1:0".into(),
        "--api-listen=127.0.0.1:0".into(),
        "--http-listen=127.0.0.1:0".into(),
        format!("--api-auth={}", if auth { "kubernetes" } else { "none" }),
    ];
    let config = telemesh_coordinator::config::Config::try_from(
        telemesh_coordinator::config::Cli::try_parse_from(args).unwrap(),
    )
    .unwrap();
    let coordinator = telemesh_coordinator::start(config, CancellationToken::new())
        .await
        .unwrap();
    // The CRD is served once established.
    let actions = Api::<WorkloadAction>::namespaced(client.clone(), NS);
    for _ in 0..500 {
        if actions.list(&ListParams::default()).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    (sim, client, coordinator, dir)
}

async fn round(auth: bool, actions: usize, clients: usize) {
    let (_sim, client, coordinator, _dir) = start(auth).await;
    let addr: SocketAddr = coordinator.api_addr;
    let http = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .pool_max_idle_per_host(clients)
        .build_http::<Full<Bytes>>();
    let limit = Arc::new(Semaphore::new(clients));
    let started = Instant::now();
    let mut calls = Vec::with_capacity(actions);
    for i in 0..actions {
        let (http, limit) = (http.clone(), limit.clone());
        calls.push(tokio::spawn(async move {
            let _permit = limit.acquire_owned().await.unwrap();
            let body = format!(
                r#"{{"method":"action.Create","params":[{{"workload":{{"namespace":"{NS}","kind":"Deployment","name":"app-{}"}},"node":{{"name":"node-{}"}}}}],"id":"{i}"}}"#,
                i % 50,
                i % 8
            );
            let mut req = http::Request::post(format!("http://{addr}/rpc"))
                .header("content-type", "application/json");
            if auth {
                req = req.header("authorization", "Bearer caller-token");
            }
            let t = Instant::now();
            let resp = http
                .request(req.body(Full::new(Bytes::from(body))).unwrap())
                .await
                .unwrap();
            let status = resp.status();
            let bytes = resp.into_body().collect().await.unwrap().to_bytes();
            let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            assert!(
                status == 200 && v["result"]["actionId"].is_string(),
                "{status} {v}"
            );
            t.elapsed()
        }));
    }
    let mut latencies = Vec::with_capacity(actions);
    for call in calls {
        latencies.push(call.await.unwrap());
    }
    let elapsed = started.elapsed();
    let stored = Api::<WorkloadAction>::namespaced(client, NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .len();
    assert_eq!(stored, actions, "every accepted action is in the store");
    latencies.sort();
    let pct = |p: f64| latencies[((latencies.len() - 1) as f64 * p) as usize];
    println!(
        "api-auth {:<10} {actions} actions, {clients} clients: {:.2} s, {:.0} actions/s accepted into the store; latency p50 {:.1} ms, p99 {:.1} ms",
        if auth { "kubernetes" } else { "none" },
        elapsed.as_secs_f64(),
        actions as f64 / elapsed.as_secs_f64(),
        pct(0.5).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
    );
    coordinator.shutdown().await;
}

fn main() {
    telemesh_core::telemetry::init(telemesh_core::cli::LogFormat::Text, "error");
    let actions = env_usize("ACTIONS", 5_000);
    let clients = env_usize("CLIENTS", 64);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        round(false, actions, clients).await;
        round(true, actions, clients).await;
    });
}
