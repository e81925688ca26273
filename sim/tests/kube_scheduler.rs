//! The real kube-scheduler (v1.32.5, `../shared/tools/kube-scheduler`) runs against sim: with an
//! extender configured it starts informers for every resource it knows and schedules nothing
//! until all of them have listed and watched, so a pod it binds through sim proves sim serves
//! them all. Skipped, saying so, when the binary is absent (`TELEMESH_KUBE_SCHEDULER` overrides
//! the path).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Json;
use axum::routing::post;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

use telemesh_core::testing::eventually;
use telemesh_sim::{Sim, SimConfig};

/// How long the scheduler may take to start, sync its informers and bind one pod.
const BIND_WITHIN: Duration = Duration::from_secs(60);

/// Returns the kube-scheduler binary, or None (after saying why) when it is absent.
fn kube_scheduler() -> Option<PathBuf> {
    let path = match std::env::var_os("TELEMESH_KUBE_SCHEDULER") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/tools/kube-scheduler"),
    };
    if path.is_file() {
        Some(path)
    } else {
        eprintln!(
            "SKIPPED: the real kube-scheduler is not at {} (set TELEMESH_KUBE_SCHEDULER to its path)",
            path.display()
        );
        None
    }
}

/// An extender that filters nothing out, counting its calls (nodeCacheCapable: names only).
async fn pass_all_extender(calls: Arc<AtomicUsize>) -> String {
    let app = axum::Router::new().route(
        "/filter",
        post(move |Json(args): Json<Value>| {
            let calls = calls.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Json(json!({"NodeNames": args["NodeNames"], "FailedNodes": {}, "Error": ""}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

/// Prints kube-scheduler's log when the test fails, so the failure says why.
struct LogOnPanic(PathBuf);

impl Drop for LogOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.0).unwrap_or_default();
            eprintln!("kube-scheduler's log:\n{log}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_kube_scheduler_syncs_its_informers_and_binds_a_pod() {
    let Some(binary) = kube_scheduler() else {
        return;
    };
    let sim = Sim::start(SimConfig::default()).await.unwrap();
    telemesh_sim::nodes::create_nodes(&sim.server, 2).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let extender = pass_all_extender(calls.clone()).await;
    let config = dir.path().join("scheduler.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: {}
leaderElection:
  leaderElect: false
extenders:
- urlPrefix: {extender}
  filterVerb: filter
  nodeCacheCapable: true
  ignorable: true
",
            kubeconfig.display()
        ),
    )
    .unwrap();
    let log_path = dir.path().join("kube-scheduler.log");
    let log = std::fs::File::create(&log_path).unwrap();
    // --secure-port 0: no health/metrics listener, nothing to collide with other tests.
    let _scheduler = tokio::process::Command::new(&binary)
        .arg("--config")
        .arg(&config)
        .args(["--secure-port", "0", "--v", "2"])
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap();

    let client = sim.client().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "first"},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();

    let _show_log = LogOnPanic(log_path.clone());
    let node = eventually(
        "the real kube-scheduler to bind the pod",
        BIND_WITHIN,
        || {
            let pods = pods.clone();
            async move { pods.get("first").await.ok()?.spec?.node_name }
        },
    )
    .await;
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    assert!(node.starts_with("sim-node-"), "bound to {node}");
    assert!(
        calls.load(Ordering::SeqCst) > 0,
        "the extender was never asked, so the configuration with it was not in effect"
    );
    // Every informer listed and watched: none of them logged a failure against sim.
    let failures: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("Failed to watch") || l.contains("failed to list"))
        .collect();
    assert!(
        failures.is_empty(),
        "informer failures:\n{}",
        failures.join("\n")
    );
}
