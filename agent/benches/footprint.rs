//! The agent's footprint in steady state: the real `telemesh-agent` binary at a 1 s collection
//! and gossip interval, with PODS pods on its node (their cgroup v2 directories generated from
//! the fixture), and MEMBERS other gossip members in view (run in this process, each publishing
//! 30 of the agent's metric names over six families). Prints the agent process's RSS and CPU use over a measured window, and its gossip
//! traffic from its own `/metrics`.
//!
//! PEERS chooses the other members:
//! - `sealed` (default up to 100 members): `GossipMember::start`, the agent's own sealed relay
//!   path. Each member's relay opens a loopback socket per peer it talks to, so a thousand of
//!   them in one process would hold hundreds of thousands of sockets.
//! - `plain` (default above 100): the same members on chitchat's `UdpTransport`, one socket
//!   each, each on its own loopback address (127.77.x.y); the agent then runs with
//!   `--insecure-gossip`. Its relay path is the same minus ChaCha20-Poly1305, which costs about
//!   a microsecond per datagram: the figures stand for a sealed agent.
//!
//! PEER_INTERVAL_MS sets the other members' gossip interval (default 1000, as the agent's):
//! the whole swarm shares this machine's cores, and on 2 cores 1,000 members at 1 s rounds may
//! fall behind; the bench prints the swarm's CPU so that shows.
//!
//! Run: `cargo bench -p telemesh-agent --bench footprint` (MEMBERS=100 PODS=100 WINDOW=30
//! WARMUP=20 by default). FOOTPRINT_WRAPPER profiles the agent (below).

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use chitchat::transport::UdpTransport;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use telemesh_core::gossip::groups::MetricEncoding;
use telemesh_core::gossip::{GossipConfig, GossipMember, Keyring, Security};
use telemesh_core::metric::Sample;
use telemesh_core::testing::{
    agent_metric_names, copy_tree, process_cpu_seconds, process_rss_mib, process_rss_split_mib,
};

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

    // Other members in view.
    let plain = match std::env::var("PEERS").as_deref() {
        Ok("plain") => true,
        Ok("sealed") => false,
        Ok(other) => panic!("PEERS={other}: use sealed or plain"),
        Err(_) => members > 100,
    };
    let peer_interval = Duration::from_millis(env_usize("PEER_INTERVAL_MS", 1000) as u64);
    // PEER_ENCODING=keys|groups: how the other members lay out their metrics (default: as
    // they choose, groups, since no observer of schema version 1 is in view). `keys` is the
    // layout before schema version 2: one key per metric.
    let peer_encoding = match std::env::var("PEER_ENCODING").as_deref() {
        Ok("keys") => Some(MetricEncoding::Keys),
        Ok("groups") | Err(_) => Some(MetricEncoding::Groups),
        Ok(other) => panic!("PEER_ENCODING={other}: use keys or groups"),
    };
    let keyring = Keyring::parse(&format!("{KEY}\n"), "bench").expect("keyring");
    let mut peers = Vec::new();
    let mut seed = String::new();
    // What an agent publishes: thirty names over six families, measured-looking values.
    let samples: Vec<Sample> = agent_metric_names()
        .into_iter()
        .enumerate()
        .map(|(k, name)| Sample {
            name,
            value: (k * 17 % 1000) as f64 / 997.0,
        })
        .collect();
    for i in 0..members {
        let mut cfg = if plain {
            // Own loopback address per member: no free-port race, no port exhaustion.
            let addr = format!("127.77.{}.{}:17946", i / 200, i % 200 + 1);
            GossipConfig::new(
                format!("peer-{i}"),
                "telemesh",
                addr.parse().expect("addr"),
                Security::Insecure,
            )
        } else {
            GossipConfig::new(
                format!("peer-{i}"),
                "telemesh",
                "127.0.0.1:0".parse().expect("addr"),
                Security::Sealed(keyring.clone()),
            )
        };
        cfg.gossip_interval = peer_interval;
        cfg.metric_encoding = peer_encoding;
        if !seed.is_empty() {
            cfg.seeds = vec![seed.clone()];
        }
        let m = if plain {
            GossipMember::start_on(cfg, &UdpTransport).await
        } else {
            GossipMember::start(cfg).await
        }
        .expect("peer");
        m.publish_metrics(&samples, SystemTime::now())
            .await
            .expect("publish");
        if seed.is_empty() {
            seed = m.id().gossip_addr.to_string();
        }
        peers.push(m);
    }

    let http_port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    // FOOTPRINT_WRAPPER runs the agent under a profiler, e.g. "valgrind --tool=massif
    // --massif-out-file=target/massif.agent" (heap by allocation site) or "valgrind
    // --tool=callgrind --callgrind-out-file=target/callgrind.agent" (instructions by function);
    // the RSS and CPU printed are then the profiler's, not the agent's.
    let agent = env!("CARGO_BIN_EXE_telemesh-agent");
    let wrapper = std::env::var("FOOTPRINT_WRAPPER").unwrap_or_default();
    let mut words = wrapper.split_whitespace();
    let mut command = match words.next() {
        Some(program) => {
            let mut c = std::process::Command::new(program);
            c.args(words).arg(agent);
            c
        }
        None => std::process::Command::new(agent),
    };
    let mut child = command
        .args([
            "--node-name",
            "node-0",
            "--gossip-listen",
            "127.0.0.1:0",
            "--http-listen",
            &format!("127.0.0.1:{http_port}"),
            "--collect-interval",
            "1s",
            "--gossip-interval",
            "1s",
        ])
        .arg(format!("--host-root={}", root.display()))
        .args(if plain {
            vec!["--insecure-gossip".to_owned()]
        } else {
            vec![format!("--gossip-key-file={}", keys.display())]
        })
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
    let metrics_url = format!("http://127.0.0.1:{http_port}/metrics");
    let traffic0 = gossip_traffic(&metrics_url).await;
    let in_view = traffic0.alive;
    let cpu0 = process_cpu_seconds(pid);
    let swarm_cpu0 = process_cpu_seconds(std::process::id());
    let t0 = Instant::now();
    let mut peak: f64 = 0.0;
    while t0.elapsed() < window {
        tokio::time::sleep(Duration::from_secs(1)).await;
        peak = peak.max(process_rss_mib(pid));
    }
    let cpu = process_cpu_seconds(pid) - cpu0;
    let swarm_cpu = process_cpu_seconds(std::process::id()) - swarm_cpu0;
    let traffic = gossip_traffic(&metrics_url).await;
    if let Ok(Some(status)) = child.try_wait() {
        panic!("telemesh-agent exited during the measurement: {status}");
    }
    println!(
        "agent footprint: {pods_n} pods on its node, {members} other {} members ({:?} metrics) at {} ms rounds ({in_view} alive in the agent's view at the start; {} alive and {} dead, all held in its state, at the end), agent at 1 s intervals",
        if plain { "plain-UDP" } else { "sealed" },
        peer_encoding.unwrap_or(MetricEncoding::Groups),
        peer_interval.as_millis(),
        traffic.alive,
        traffic.dead,
    );
    let (anon, file) = process_rss_split_mib(pid);
    println!(
        "  RSS now {:.1} MiB ({anon:.1} anonymous, {file:.1} file-backed), peak over {}s {:.1} MiB",
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
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "  gossip {:.1} KB/s out, {:.1} KB/s in ({:.1} / {:.1} datagrams/s)",
        (traffic.bytes_out - traffic0.bytes_out) / secs / 1000.0,
        (traffic.bytes_in - traffic0.bytes_in) / secs / 1000.0,
        (traffic.datagrams_out - traffic0.datagrams_out) / secs,
        (traffic.datagrams_in - traffic0.datagrams_in) / secs,
    );
    println!(
        "  (the {members} other members used {:.0} % of one core in this process)",
        swarm_cpu / secs * 100.0
    );
    let _ = child.kill();
    let _ = child.wait();
    for p in peers {
        let _ = p.shutdown().await;
    }
}

/// What the agent's `/metrics` says of its gossip.
#[derive(Default)]
struct GossipTraffic {
    alive: usize,
    dead: usize,
    bytes_in: f64,
    bytes_out: f64,
    datagrams_in: f64,
    datagrams_out: f64,
}

async fn gossip_traffic(url: &str) -> GossipTraffic {
    let text = telemesh_sim::cluster::http::request(http::Method::GET, url, None)
        .await
        .map(|body| String::from_utf8_lossy(&body).into_owned())
        .expect("the agent's /metrics");
    let value = |series: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    GossipTraffic {
        alive: value("telemesh_agent_gossip_peers{state=\"Alive\"}") as usize,
        dead: value("telemesh_agent_gossip_peers{state=\"Dead\"}") as usize,
        bytes_in: value("telemesh_agent_gossip_bytes_total{direction=\"In\"}"),
        bytes_out: value("telemesh_agent_gossip_bytes_total{direction=\"Out\"}"),
        datagrams_in: value("telemesh_agent_gossip_datagrams_total{direction=\"In\"}"),
        datagrams_out: value("telemesh_agent_gossip_datagrams_total{direction=\"Out\"}"),
    }
}
