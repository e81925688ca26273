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
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::{Value, json};

use telemesh_runtime::testing::eventually;
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

/// A kube-scheduler running against `sim` with one filter extender at `extender`; it stops
/// when dropped. Its log is at `log`.
struct Scheduler {
    _process: tokio::process::Child,
    _dir: tempfile::TempDir,
    log: PathBuf,
}

fn start_scheduler(binary: &Path, sim: &Sim, extender: &str) -> Scheduler {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig).unwrap();
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
    let process = tokio::process::Command::new(binary)
        .arg("--config")
        .arg(&config)
        .args(["--secure-port", "0", "--v", "2"])
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap();

    Scheduler {
        _process: process,
        _dir: dir,
        log: log_path,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_kube_scheduler_syncs_its_informers_and_binds_a_pod() {
    let Some(binary) = kube_scheduler() else {
        return;
    };
    let sim = Sim::start(SimConfig::default()).await.unwrap();
    telemesh_sim::nodes::create_nodes(&sim.server, 2).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let extender = pass_all_extender(calls.clone()).await;
    let scheduler = start_scheduler(&binary, &sim, &extender);
    let log_path = scheduler.log.clone();
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

/// An extender that refuses every node as a policy would (nodeCacheCapable: names only).
async fn refuse_all_extender() -> String {
    let app = axum::Router::new().route(
        "/filter",
        post(|Json(args): Json<Value>| async move {
            let failed: serde_json::Map<String, Value> = args["NodeNames"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(|n| {
                    (
                        n.to_owned(),
                        json!("policy demo/scheduling-policy dontschedule"),
                    )
                })
                .collect();
            Json(json!({"NodeNames": [], "FailedNodes": failed, "Error": ""}))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

/// kube-scheduler records FailedScheduling through events.k8s.io/v1; core v1 readers (the
/// Event API, `kubectl describe pod`) see it, since sim serves one Event resource in both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_scheduling_recorded_by_the_real_kube_scheduler_reads_as_a_core_event() {
    let Some(binary) = kube_scheduler() else {
        return;
    };
    let sim = Sim::start(SimConfig::default()).await.unwrap();
    telemesh_sim::nodes::create_nodes(&sim.server, 2).unwrap();
    let extender = refuse_all_extender().await;
    let scheduler = start_scheduler(&binary, &sim, &extender);
    let _show_log = LogOnPanic(scheduler.log.clone());
    let client = sim.client().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "refused"},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();

    let events: Api<Event> = Api::namespaced(client, "default");
    let selector = ListParams::default()
        .fields("involvedObject.kind=Pod,involvedObject.name=refused,reason=FailedScheduling");
    let event = eventually("a FailedScheduling core Event", BIND_WITHIN, || {
        let events = events.clone();
        let selector = selector.clone();
        async move { events.list(&selector).await.ok()?.items.into_iter().next() }
    })
    .await;
    let message = event.message.unwrap_or_default();
    assert!(message.starts_with("0/2 nodes are available"), "{message}");
    // Written through events.k8s.io/v1: only that API sets an action and reportingController.
    assert_eq!(event.action.as_deref(), Some("Scheduling"));
    assert_eq!(
        event.reporting_component.as_deref(),
        Some("default-scheduler")
    );

    let kubeconfig = scheduler.log.with_file_name("kubeconfig");
    let described = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["describe", "pod", "refused", "-n", "default"])
        .output();
    match described {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("SKIPPED (kubectl describe): kubectl not found on PATH");
        }
        Err(e) => panic!("running kubectl: {e}"),
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let events = text
                .split_once("Events:")
                .map(|(_, e)| e)
                .unwrap_or_default();
            assert!(
                events.contains("Warning  FailedScheduling")
                    && events.contains("default-scheduler")
                    && events.contains("0/2 nodes are available"),
                "{text}"
            );
        }
    }
}
