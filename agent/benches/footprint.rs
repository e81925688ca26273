//! The agent's footprint in steady state: the real `telemesh-agent` binary at a 1 s collection
//! and gossip interval, with PODS pods on its node (their cgroup v2 directories generated from
//! the fixture), and MEMBERS other sealed gossip members in view (run in this process, each
//! publishing 30 metrics). Prints the agent process's RSS and CPU use over a measured window.
//!
//! Run: `cargo bench -p telemesh-agent --bench footprint` (MEMBERS=100 PODS=100 WINDOW=30 by
//! default).

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use telemesh_core::gossip::{GossipConfig, GossipMember, Keyring, Security};
use telemesh_core::metric::{MetricName, Sample};
use telemesh_core::testing::{copy_tree, process_cpu_seconds, process_rss_mib};

const KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run());
}

async fn run() {
    let members = env_usize("MEMBERS", 100);
    let pods_n = env_usize("PODS", 100);
    let window = Duration::from_secs(env_usize("WINDOW", 30) as u64);
    let sim = telemesh_sim::Sim::start(Default::default())
        .await
        .expect("sim");
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let keys = dir.path().join("keys");
    std::fs::write(&keys, format!("{KEY}\n")).expect("keys");

    // The node's pods, and a host tree with a cgroup for each (systemd driver, burstable).
    let client = sim.client().await.expect("client");
    let api: Api<Pod> = Api::default_namespaced(client);
    let root = dir.path().join("host");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/host-a");
    copy_tree(&fixtures, &root).expect("host tree");
    let burstable = root.join("sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice");
    let template =
        burstable.join("kubepods-burstable-pod6f1e2d3c_4b5a_4978_8a6b_5c4d3e2f1a0b.slice");
    for i in 0..pods_n {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("pod-{i}")},
            "spec": {"nodeName": "node-0", "containers": [{"name": "c", "image": "app:1"}]}
        }))
        .expect("pod");
        let created = api
            .create(&PostParams::default(), &pod)
            .await
            .expect("create pod");
        let uid = created.metadata.uid.unwrap_or_default().replace('-', "_");
        copy_tree(
            &template,
            &burstable.join(format!("kubepods-burstable-pod{uid}.slice")),
        )
        .expect("pod cgroup");
    }

    // Other members in view, sealed like the agent.
    let keyring = Keyring::parse(&format!("{KEY}\n"), "bench").expect("keyring");
    let mut peers = Vec::new();
    let mut seed = String::new();
    let samples: Vec<Sample> = (0..30)
        .map(|k| Sample {
            name: MetricName::new(format!("node_bench_metric_{k}")).expect("name"),
            value: k as f64,
        })
        .collect();
    for i in 0..members {
        let mut cfg = GossipConfig::new(
            format!("peer-{i}"),
            "telemesh",
            "127.0.0.1:0".parse().expect("addr"),
            Security::Sealed(keyring.clone()),
        );
        cfg.gossip_interval = Duration::from_secs(1);
        if !seed.is_empty() {
            cfg.seeds = vec![seed.clone()];
        }
        let m = GossipMember::start(cfg).await.expect("peer");
        m.publish_metrics(&samples, SystemTime::now())
            .await
            .expect("publish");
        if seed.is_empty() {
            seed = m.id().gossip_addr.to_string();
        }
        peers.push(m);
    }

    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_telemesh-agent"))
        .args([
            "--node-name",
            "node-0",
            "--gossip-listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
            "--collect-interval",
            "1s",
            "--gossip-interval",
            "1s",
        ])
        .arg(format!("--host-root={}", root.display()))
        .arg(format!("--gossip-key-file={}", keys.display()))
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--gossip-seeds={seed}"))
        .env("RUST_LOG", "warn")
        .spawn()
        .expect("start telemesh-agent");
    let pid = child.id();
    // Warm up: the agent learns every member and every pod.
    let warm = Duration::from_secs(env_usize("WARMUP", 20) as u64);
    tokio::time::sleep(warm).await;
    if let Ok(Some(status)) = child.try_wait() {
        panic!("telemesh-agent exited during warm-up: {status}");
    }
    let in_view = peers[0].members().await.len();
    let cpu0 = process_cpu_seconds(pid);
    let t0 = Instant::now();
    let mut peak: f64 = 0.0;
    while t0.elapsed() < window {
        tokio::time::sleep(Duration::from_secs(1)).await;
        peak = peak.max(process_rss_mib(pid));
    }
    let cpu = process_cpu_seconds(pid) - cpu0;
    if let Ok(Some(status)) = child.try_wait() {
        panic!("telemesh-agent exited during the measurement: {status}");
    }
    println!(
        "agent footprint: {pods_n} pods on its node, {members} other sealed members ({in_view} members in view), 1 s intervals"
    );
    println!(
        "  RSS now {:.1} MiB, peak over {}s {:.1} MiB",
        process_rss_mib(pid),
        window.as_secs(),
        peak
    );
    println!(
        "  CPU {:.2} % of one core ({:.2} s over {:.0} s)",
        cpu / t0.elapsed().as_secs_f64() * 100.0,
        cpu,
        t0.elapsed().as_secs_f64()
    );
    let _ = child.kill();
    let _ = child.wait();
    for p in peers {
        let _ = p.shutdown().await;
    }
}
