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
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use kube::api::{Api, ListParams};
use telemesh_core::action::WorkloadAction;
use telemesh_sim::{Auth, UserInfo};
use tokio::sync::Semaphore;

const NS: &str = "bench";

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[path = "../tests/support/actions_env.rs"]
mod actions_env;

/// sim (checking tokens when `auth`) and one replica, sharing the `/rpc` tests' set-up.
async fn start(auth: bool) -> actions_env::ActionsEnv {
    let table = auth.then(|| Auth {
        tokens: [
            (
                "coordinator-token",
                "system:serviceaccount:telemesh:coordinator",
            ),
            ("caller-token", "aiops"),
        ]
        .into_iter()
        .map(|(t, u)| {
            (
                t.to_owned(),
                UserInfo {
                    username: u.into(),
                    uid: u.into(),
                    groups: vec!["system:masters".into()],
                    ..UserInfo::default()
                },
            )
        })
        .collect::<HashMap<_, _>>(),
        rules: Vec::new(),
    });
    actions_env::start(table, NS).await
}

async fn round(auth: bool, actions: usize, clients: usize) {
    let (_sim, client, coordinator, _dir) = start(auth).await.into_parts();
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
    telemesh_runtime::telemetry::init(telemesh_runtime::cli::LogFormat::Text, "error");
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
