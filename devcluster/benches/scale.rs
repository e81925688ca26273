//! Sim at cluster scale: starts the real `telemesh-sim` binary, fills it with NODES nodes and
//! NODES × PODS_PER_NODE pods through kube-rs, then prints the sim process's memory, the time to
//! list every pod, and how fast one pod update reaches its node's watcher while NODES watchers
//! each watch `spec.nodeName=<their node>` (watchers are indexed by node, so an update costs one
//! watcher, not all of them).
//!
//! Run: `scripts/bench-sim.sh` (or `cargo bench -p telemesh-devcluster --bench scale`);
//! `NODES=500 PODS_PER_NODE=10` for a quick run.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use telemesh_core::testing::{process_cpu_seconds, process_rss_mib};
use tokio::sync::mpsc;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

struct SimProcess {
    child: std::process::Child,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_sim(nodes: usize) -> SimProcess {
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = dir.path().join("kubeconfig");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_telemesh-sim"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--nodes",
            &nodes.to_string(),
            "--kubeconfig-out",
        ])
        .arg(&kubeconfig)
        .env("RUST_LOG", "warn")
        .spawn()
        .expect("start telemesh-sim");
    let deadline = Instant::now() + Duration::from_secs(120);
    while !kubeconfig.exists() {
        assert!(
            Instant::now() < deadline,
            "sim did not write its kubeconfig"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    SimProcess {
        child,
        kubeconfig,
        _dir: dir,
    }
}

async fn client(kubeconfig: &PathBuf) -> kube::Client {
    let yaml = std::fs::read_to_string(kubeconfig).expect("kubeconfig");
    let kc = kube::config::Kubeconfig::from_yaml(&yaml).expect("parse kubeconfig");
    let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("load kubeconfig");
    config.read_timeout = Some(Duration::from_secs(600));
    kube::Client::try_from(config).expect("client")
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run());
}

async fn run() {
    let nodes = env_usize("NODES", 5_000);
    let per_node = env_usize("PODS_PER_NODE", 10);
    let samples = env_usize("SAMPLES", 200);
    println!(
        "sim scale benchmark: {nodes} nodes, {} pods, {nodes} node-filtered watchers",
        nodes * per_node
    );

    let t = Instant::now();
    let sim = start_sim(nodes);
    let pid = sim.child.id();
    println!(
        "start with {nodes} nodes:            {:>8.2} s, RSS {:.1} MiB",
        t.elapsed().as_secs_f64(),
        process_rss_mib(pid)
    );
    let c = client(&sim.kubeconfig).await;
    let pods: Api<Pod> = Api::default_namespaced(c.clone());

    let t = Instant::now();
    let creates = (0..nodes).flat_map(|n| (0..per_node).map(move |i| (n, i)));
    stream::iter(creates)
        .map(|(n, i)| {
            let pods = pods.clone();
            async move {
                let pod: Pod = serde_json::from_value(json!({
                    "metadata": {"name": format!("pod-{n}-{i}"), "labels": {"app": format!("app-{}", i % 7)}},
                    "spec": {"nodeName": format!("sim-node-{n}"), "containers": [{"name": "main", "image": "registry.example/app:1.0",
                        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}
                }))
                .expect("pod json");
                pods.create(&PostParams::default(), &pod).await.expect("create pod");
            }
        })
        .buffer_unordered(64)
        .collect::<Vec<()>>()
        .await;
    let populate = t.elapsed();
    println!(
        "create {} pods (64 in flight):    {:>8.2} s ({:.0} creates/s), RSS {:.1} MiB",
        nodes * per_node,
        populate.as_secs_f64(),
        (nodes * per_node) as f64 / populate.as_secs_f64(),
        process_rss_mib(pid)
    );

    // Listing every pod: the raw response (server time + transfer), and kube-rs typed.
    let url = "/api/v1/pods";
    let mut raw = Vec::new();
    let mut bytes = 0;
    for _ in 0..5 {
        let t = Instant::now();
        let body = c
            .request_text(http::Request::get(url).body(Vec::new()).expect("request"))
            .await
            .expect("list");
        raw.push(t.elapsed());
        bytes = body.len();
    }
    raw.sort();
    let t = Instant::now();
    let all: Api<Pod> = Api::all(c.clone());
    let typed = all.list(&ListParams::default()).await.expect("typed list");
    let typed_time = t.elapsed();
    let list_rv = typed.metadata.resource_version.clone().unwrap_or_default();
    println!(
        "list all {} pods, raw JSON:       {:>8.1} ms median of 5 ({:.1} MiB); kube-rs typed list {:.1} ms",
        typed.items.len(),
        percentile(&raw, 0.5).as_secs_f64() * 1e3,
        bytes as f64 / (1 << 20) as f64,
        typed_time.as_secs_f64() * 1e3
    );

    // One watcher per node, each selecting its node's pods.
    let (tx, mut rx) = mpsc::unbounded_channel::<(usize, Instant)>();
    let (ready_tx, mut ready_rx) = mpsc::unbounded_channel::<()>();
    let t = Instant::now();
    for n in 0..nodes {
        let (all, tx, ready_tx, rv) = (all.clone(), tx.clone(), ready_tx.clone(), list_rv.clone());
        tokio::spawn(async move {
            let wp = WatchParams::default()
                .fields(&format!("spec.nodeName=sim-node-{n}"))
                .timeout(3_000);
            let mut s = all.watch(&wp, &rv).await.expect("watch").boxed();
            let _ = ready_tx.send(());
            while let Ok(Some(ev)) = s.try_next().await {
                if matches!(ev, WatchEvent::Modified(_)) {
                    let _ = tx.send((n, Instant::now()));
                }
            }
        });
    }
    for _ in 0..nodes {
        ready_rx.recv().await.expect("watcher ready");
    }
    println!(
        "open {nodes} watches:                {:>8.2} s, RSS {:.1} MiB",
        t.elapsed().as_secs_f64(),
        process_rss_mib(pid)
    );

    // Single updates: the time from sending the patch to the node's watcher having the event.
    let mut lat = Vec::with_capacity(samples);
    for k in 0..samples {
        let n = (k * 7919) % nodes;
        let t = Instant::now();
        let patch = Patch::Merge(json!({"metadata": {"labels": {"rev": format!("s{k}")}}}));
        pods.patch(&format!("pod-{n}-0"), &PatchParams::default(), &patch)
            .await
            .expect("patch");
        loop {
            let (got, at) = rx.recv().await.expect("event");
            if got == n {
                lat.push(at - t);
                break;
            }
        }
    }
    lat.sort();
    println!(
        "one update -> its node's watcher: p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs ({samples} samples, {nodes} watchers open)",
        percentile(&lat, 0.5).as_secs_f64() * 1e6,
        percentile(&lat, 0.99).as_secs_f64() * 1e6,
        lat.last().copied().unwrap_or_default().as_secs_f64() * 1e6
    );

    // One update on every node: all watchers must see theirs.
    let cpu0 = process_cpu_seconds(pid);
    let t = Instant::now();
    let waiter = tokio::spawn(async move {
        let mut seen: HashMap<usize, Instant> = HashMap::new();
        while seen.len() < nodes {
            let (n, at) = rx.recv().await.expect("event");
            seen.entry(n).or_insert(at);
        }
        seen
    });
    stream::iter(0..nodes)
        .map(|n| {
            let pods = pods.clone();
            async move {
                let patch = Patch::Merge(json!({"metadata": {"labels": {"rev": "broadcast"}}}));
                pods.patch(&format!("pod-{n}-1"), &PatchParams::default(), &patch)
                    .await
                    .expect("patch");
            }
        })
        .buffer_unordered(64)
        .collect::<Vec<()>>()
        .await;
    let patched = t.elapsed();
    let seen = Arc::new(waiter.await.expect("waiter"));
    let all_seen = seen.values().max().map(|m| *m - t).unwrap_or_default();
    let cpu = process_cpu_seconds(pid) - cpu0;
    println!(
        "{nodes} updates, one per node:        all watchers served in {:.2} s (patches done in {:.2} s); sim CPU {:.0} µs per update",
        all_seen.as_secs_f64(),
        patched.as_secs_f64(),
        cpu / nodes as f64 * 1e6
    );
    println!(
        "final sim RSS:                      {:.1} MiB",
        process_rss_mib(pid)
    );
}
