//! Sim driven only through kube-rs (`Api`, `watcher`, `reflector`, `Controller`), as a client
//! of a real cluster would: each behaviour of the API server the issue lists has a test here
//! that fails if it breaks.
#![allow(clippy::unwrap_used)]

mod admission;
mod auth;
mod crd;
mod crud;
mod discovery;
mod events;
mod faults;
mod gc;
mod list;
mod openapi_v2;
mod patch;
mod subresources;
mod watch;

use kube::Client;
pub use telemesh_runtime::testing::eventually;
use telemesh_sim::{Sim, SimConfig};

/// Starts a sim on a free loopback port and returns it with a client.
pub async fn sim() -> (Sim, Client) {
    sim_with(SimConfig::default()).await
}

/// Starts a sim with the given configuration.
pub async fn sim_with(config: SimConfig) -> (Sim, Client) {
    telemesh_runtime::telemetry::init(telemesh_runtime::cli::LogFormat::Text, "warn");
    let sim = Sim::start(config).await.expect("sim starts");
    let client = sim.client().await.expect("client for sim");
    (sim, client)
}

/// Returns the HTTP status code of a kube API error.
pub fn code(e: &kube::Error) -> u16 {
    match e {
        kube::Error::Api(s) => s.code,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Returns the reason of a kube API error.
pub fn reason(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.reason.clone(),
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// A minimal pod.
pub fn pod(name: &str, labels: &[(&str, &str)]) -> k8s_openapi::api::core::v1::Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<std::collections::BTreeMap<_, _>>()},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}
    }))
    .unwrap()
}
