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
//! PEER_PROCS (plain peers only; default 2) runs the plain members in that many child
//! processes, this bench re-executed as `footprint --peers-only` with a share of the members
//! each, so the swarm is not one runtime's worth of tasks contending with itself and every
//! member stays alive in the agent's view; 0 keeps them in this process (as before). The bench
//! prints how many members the agent's view held alive, at least and at most, over the window.
//!
//! CLUSTER=N puts the agent in gossip cells instead (issue 30): it is node 0 of an N-node
//! cluster whose names have the shape NAMES (`eks`, `eks-ip`, `gke`, `aks`:
//! `telemesh_core::testing::NameShape`), split into CELLS cells (default one per 100 nodes, the
//! chart's sizing rule), and runs with `--gossip-cells`. The other members are what it sees of
//! that cluster: the nodes the hashing puts in its cell (MEMBERS is ignored) and REPLICAS
//! coordinator replicas (observers, default 3 as the chart), sealed, in this process; replica 0
//! serves the cell at the port the agent's `--gossip-cell-seeds` names. The FIGURE lines then
//! carry N.
//!
//! Run: `cargo bench -p telemesh-agent --bench footprint` (MEMBERS=100 PODS=100 WINDOW=30
//! WARMUP=20 by default). FOOTPRINT_WRAPPER profiles the agent, FOOTPRINT_AGENT measures
//! another build of it (below). Besides the human lines it prints `FIGURE <series> <members>
//! <value> <unit>` lines for scripts/scaling.sh.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use chitchat::transport::UdpTransport;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use telemesh_core::gossip::groups::MetricEncoding;
use telemesh_core::gossip::{Cell, Cells, Role};
use telemesh_core::metric::Sample;
use telemesh_core::testing::{
    NameShape, agent_metric_names, copy_tree, process_cpu_seconds, process_rss_mib,
    process_rss_split_mib,
};
use telemesh_runtime::gossip::{GossipConfig, GossipMember, Keyring, Security};

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
    if std::env::args().any(|a| a == "--peers-only") {
        rt.block_on(peers_only());
    } else {
        rt.block_on(run());
    }
}

/// How the other members are laid out and how often they gossip, from the environment.
struct PeerSpec {
    plain: bool,
    interval: Duration,
    encoding: Option<MetricEncoding>,
    /// CLUSTER: the agent's cell of a larger cluster, else one flat mesh of `peer-<i>`.
    cell: Option<CellOfAgent>,
}

/// The agent's cell of a CLUSTER-node cluster: who else is in it.
struct CellOfAgent {
    cluster: usize,
    cells: Cells,
    /// The agent's node name (node 0 of the cluster).
    node: String,
    /// The other nodes in its cell.
    peers: Vec<String>,
    replicas: usize,
}

impl CellOfAgent {
    fn from_env() -> Option<Self> {
        let cluster = env_usize("CLUSTER", 0);
        if cluster == 0 {
            return None;
        }
        let cells = Cells::new(
            u32::try_from(env_usize("CELLS", cluster.div_ceil(100))).expect("CELLS fits u32"),
        )
        .expect("CELLS between 1 and 1,024");
        let shape = NameShape::from_env("NAMES");
        let node = shape.name(0);
        let cell = cells.of(&node);
        let peers = (1..cluster)
            .map(|i| shape.name(i))
            .filter(|name| cells.of(name) == cell)
            .collect();
        Some(Self {
            cluster,
            cells,
            node,
            peers,
            replicas: env_usize("REPLICAS", 3),
        })
    }
}

impl PeerSpec {
    fn from_env(members: usize) -> Self {
        let cell = CellOfAgent::from_env();
        let plain = match std::env::var("PEERS").as_deref() {
            Ok("plain") => true,
            Ok("sealed") => false,
            Ok(other) => panic!("PEERS={other}: use sealed or plain"),
            // A cell is about a hundred nodes: sealed, in this process.
            Err(_) => cell.is_none() && members > 100,
        };
        // PEER_ENCODING=keys|groups: how the other members lay out their metrics (default: as
        // they choose, groups, since no observer of schema version 1 is in view). `keys` is the
        // layout before schema version 2: one key per metric.
        let encoding = match std::env::var("PEER_ENCODING").as_deref() {
            Ok("keys") => Some(MetricEncoding::Keys),
            Ok("groups") | Err(_) => Some(MetricEncoding::Groups),
            Ok(other) => panic!("PEER_ENCODING={other}: use keys or groups"),
        };
        Self {
            plain,
            interval: Duration::from_millis(env_usize("PEER_INTERVAL_MS", 1000) as u64),
            encoding,
            cell,
        }
    }

    /// Peer `i`'s node name.
    fn name(&self, i: usize) -> String {
        self.cell
            .as_ref()
            .map_or_else(|| format!("peer-{i}"), |c| c.peers[i].clone())
    }

    /// The cell the node `name` gossips in.
    fn cell_of(&self, name: &str) -> Cell {
        self.cell.as_ref().map_or(Cells::FLAT, |c| c.cells).of(name)
    }

    /// A member's configuration here: `name` in `cell`, listening on `addr`, plain or sealed
    /// with `keyring` as the spec says, at the spec's rounds.
    fn config(
        &self,
        name: String,
        cell: Cell,
        addr: SocketAddr,
        keyring: &Keyring,
    ) -> GossipConfig {
        let security = if self.plain {
            Security::Insecure
        } else {
            Security::Sealed(keyring.clone())
        };
        let mut cfg = GossipConfig::new(name, "telemesh", addr, security);
        cfg.join_cell(cell);
        cfg.gossip_interval = self.interval;
        cfg
    }

    /// Starts a member on the spec's transport: chitchat's plain UDP or the sealed relay.
    async fn start(&self, cfg: GossipConfig) -> GossipMember {
        if self.plain {
            GossipMember::start_on(cfg, &UdpTransport).await
        } else {
            GossipMember::start(cfg).await
        }
        .expect("a gossip member starts")
    }

    /// The agent's node name.
    fn node(&self) -> String {
        self.cell
            .as_ref()
            .map_or_else(|| "node-0".to_owned(), |c| c.node.clone())
    }
}

/// Replica 0's base gossip port on its own loopback address: the agent seeds its cell at
/// base + 1 + the cell's index, as from the chart's `--gossip-cell-seeds`.
const REPLICA_BASE: &str = "127.78.0.1:17946";

/// The plain member `i`'s address: its own loopback address, so there is no free-port race
/// and no port exhaustion, and every process can compute the first member's (the seed).
fn plain_addr(i: usize) -> String {
    format!("127.77.{}.{}:17946", i / 200, i % 200 + 1)
}

/// Starts members `range` (each publishing the agent's metrics), all seeding from `seed`, or
/// from the first of them when `seed` is empty. Returns them and the seed.
async fn start_peers(
    spec: &PeerSpec,
    range: std::ops::Range<usize>,
    mut seed: String,
) -> (Vec<GossipMember>, String) {
    let keyring = Keyring::parse(&format!("{KEY}\n"), "bench").expect("keyring");
    // What an agent publishes: thirty names over six families, measured-looking values.
    let samples: Vec<Sample> = agent_metric_names()
        .into_iter()
        .enumerate()
        .map(|(k, name)| Sample {
            name,
            value: (k * 17 % 1000) as f64 / 997.0,
        })
        .collect();
    let mut peers = Vec::with_capacity(range.len());
    for i in range {
        let name = spec.name(i);
        let cell = spec.cell_of(&name);
        let addr = if spec.plain {
            plain_addr(i).parse().expect("addr")
        } else {
            SocketAddr::from(([127, 0, 0, 1], 0))
        };
        let mut cfg = spec.config(name, cell, addr, &keyring);
        cfg.metric_encoding = spec.encoding;
        if !seed.is_empty() {
            cfg.seeds = vec![seed.clone()];
        }
        let m = spec.start(cfg).await;
        m.publish_metrics(&samples, SystemTime::now())
            .await
            .expect("publish");
        if seed.is_empty() {
            seed = m.id().gossip_addr.to_string();
        }
        peers.push(m);
    }
    (peers, seed)
}

/// The coordinator replicas in the agent's cell (CLUSTER runs): observers seeding from `seed`,
/// replica `r` on 127.78.0.<r+1> at the cell's port of [`REPLICA_BASE`], as the chart lays
/// them out.
async fn start_replicas(spec: &PeerSpec, seed: &str) -> Vec<GossipMember> {
    let Some(c) = &spec.cell else {
        return Vec::new();
    };
    let keyring = Keyring::parse(&format!("{KEY}\n"), "bench").expect("keyring");
    let base: SocketAddr = REPLICA_BASE.parse().expect("addr");
    let cell = spec.cell_of(&c.node);
    let port = cell
        .coordinator_port(base.port())
        .expect("a port for the cell");
    let mut replicas = Vec::with_capacity(c.replicas);
    for r in 0..c.replicas {
        let ip = std::net::Ipv4Addr::new(127, 78, 0, u8::try_from(r + 1).expect("few replicas"));
        let mut cfg = spec.config(
            format!("telemesh-coordinator-{r}"),
            cell,
            (ip, port).into(),
            &keyring,
        );
        cfg.role = Role::Observer;
        cfg.seeds = vec![seed.to_owned()];
        replicas.push(spec.start(cfg).await);
    }
    replicas
}

/// `footprint --peers-only`: plain members FOOTPRINT_PEERS_FROM..FOOTPRINT_PEERS_TO seeding
/// from member 0, for a parent bench. Prints `ready` once they run, and stops when stdin closes
/// (the parent ended or dropped the pipe).
async fn peers_only() {
    let from = env_usize("FOOTPRINT_PEERS_FROM", 0);
    let to = env_usize("FOOTPRINT_PEERS_TO", 0);
    let spec = PeerSpec::from_env(to);
    let seed = if from == 0 {
        String::new()
    } else {
        plain_addr(0)
    };
    let (peers, _) = start_peers(&spec, from..to, seed).await;
    println!("ready");
    // Until the parent closes stdin.
    let _ =
        tokio::task::spawn_blocking(|| std::io::copy(&mut std::io::stdin(), &mut std::io::sink()))
            .await;
    // Stopped as by a crash: a clean leave waits up to a round per member.
    drop(peers);
}

/// Runs `members` plain members in `procs` child processes (this bench as `--peers-only`),
/// returns once each said it is ready. Member 0 lives in the first child, which starts first.
fn spawn_peer_processes(members: usize, procs: usize) -> Vec<std::process::Child> {
    use std::io::BufRead;
    let exe = std::env::current_exe().expect("the bench's own path");
    let mut children = Vec::with_capacity(procs);
    for p in 0..procs {
        let (from, to) = (members * p / procs, members * (p + 1) / procs);
        let mut child = std::process::Command::new(&exe)
            .arg("--peers-only")
            .env("FOOTPRINT_PEERS_FROM", from.to_string())
            .env("FOOTPRINT_PEERS_TO", to.to_string())
            .env("PEERS", "plain")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start a peer process");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut line = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .expect("a peer process's ready line");
        assert_eq!(line.trim(), "ready", "peer process {p} did not start");
        children.push(child);
    }
    children
}

async fn run() {
    let spec = PeerSpec::from_env(env_usize("MEMBERS", 100));
    let members = spec
        .cell
        .as_ref()
        .map_or_else(|| env_usize("MEMBERS", 100), |c| c.peers.len());
    let node = spec.node();
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
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "app:1"}]}
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

    // Other members in view: in child processes (plain, PEER_PROCS > 0) or in this one.
    let procs = if spec.plain {
        env_usize("PEER_PROCS", 2)
    } else {
        0
    };
    let (peers, seed, mut children) = if procs > 0 {
        let children = spawn_peer_processes(members, procs);
        (Vec::new(), plain_addr(0), children)
    } else {
        let (mut peers, seed) = start_peers(&spec, 0..members, String::new()).await;
        peers.extend(start_replicas(&spec, &seed).await);
        (peers, seed, Vec::new())
    };
    let plain = spec.plain;
    let peer_interval = spec.interval;
    let peer_encoding = spec.encoding;
    let swarm_pids: Vec<u32> = std::iter::once(std::process::id())
        .chain(children.iter().map(std::process::Child::id))
        .collect();
    let swarm_cpu = || -> f64 { swarm_pids.iter().map(|p| process_cpu_seconds(*p)).sum() };

    let http_port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    // FOOTPRINT_WRAPPER runs the agent under a profiler, e.g. "valgrind --tool=massif
    // --massif-out-file=target/massif.agent" (heap by allocation site) or "valgrind
    // --tool=callgrind --callgrind-out-file=target/callgrind.agent" (instructions by function);
    // the RSS and CPU printed are then the profiler's, not the agent's.
    // FOOTPRINT_AGENT measures another build of the agent, e.g. the shipped artefact
    // (`cargo build --profile agent -p telemesh-agent`: fat LTO, panics abort) while this bench
    // is built without LTO; scripts/scaling.sh measures that one.
    let agent = std::env::var("FOOTPRINT_AGENT")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_telemesh-agent").to_owned());
    let wrapper = std::env::var("FOOTPRINT_WRAPPER").unwrap_or_default();
    let mut words = wrapper.split_whitespace();
    let mut command = match words.next() {
        Some(program) => {
            let mut c = std::process::Command::new(program);
            c.args(words).arg(&agent);
            c
        }
        None => std::process::Command::new(&agent),
    };
    let mut child = command
        .args([
            "--node-name",
            &node,
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
        .args(spec.cell.as_ref().map_or_else(Vec::new, |c| {
            vec![
                format!("--gossip-cells={}", c.cells),
                format!("--gossip-cell-seeds={REPLICA_BASE}"),
            ]
        }))
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
    let swarm_cpu0 = swarm_cpu();
    let t0 = Instant::now();
    let mut peak: f64 = 0.0;
    let (mut alive_min, mut alive_max) = (in_view, in_view);
    while t0.elapsed() < window {
        tokio::time::sleep(Duration::from_secs(1)).await;
        peak = peak.max(process_rss_mib(pid));
        // A read that fails (the agent busy, a connection closed) only leaves a gap in the range.
        if let Some(t) = try_gossip_traffic(&metrics_url).await {
            alive_min = alive_min.min(t.alive);
            alive_max = alive_max.max(t.alive);
        }
    }
    let cpu = process_cpu_seconds(pid) - cpu0;
    let swarm_cpu = swarm_cpu() - swarm_cpu0;
    let traffic = gossip_traffic(&metrics_url).await;
    if let Ok(Some(status)) = child.try_wait() {
        panic!("telemesh-agent exited during the measurement: {status}");
    }
    println!(
        "agent footprint: {pods_n} pods on its node, {members} other {} members ({:?} metrics) at {} ms rounds, {} ({in_view} alive in the agent's view at the start, {alive_min}-{alive_max} over the window; {} alive and {} dead, all held in its state, at the end), agent at 1 s intervals",
        if plain { "plain-UDP" } else { "sealed" },
        peer_encoding.unwrap_or(MetricEncoding::Groups),
        peer_interval.as_millis(),
        if procs > 0 {
            format!("in {procs} peer processes")
        } else {
            "in the bench process".to_owned()
        },
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
        "  (the {members} other members used {:.0} % of one core in {})",
        swarm_cpu / secs * 100.0,
        if procs > 0 {
            "their processes"
        } else {
            "this process"
        }
    );
    if let Some(c) = &spec.cell {
        println!(
            "  as node {} of a {}-node cluster in {} cells ({} names): its cell holds {} other \
             nodes and {} replicas",
            c.node,
            c.cluster,
            c.cells,
            std::env::var("NAMES").unwrap_or_else(|_| "eks".to_owned()),
            c.peers.len(),
            c.replicas
        );
    }
    // A cell run stands for its whole cluster.
    let x = spec.cell.as_ref().map_or(members, |c| c.cluster);
    let rss = process_rss_mib(pid);
    let cpu_percent = cpu / secs * 100.0;
    let out_kbps = (traffic.bytes_out - traffic0.bytes_out) / secs / 1000.0;
    let in_kbps = (traffic.bytes_in - traffic0.bytes_in) / secs / 1000.0;
    for (series, value, unit) in [
        ("agent_rss_mib", rss, "MiB"),
        ("agent_anon_mib", anon, "MiB"),
        ("agent_file_mib", file, "MiB"),
        ("agent_cpu_percent", cpu_percent, "%"),
        ("agent_gossip_out_kbps", out_kbps, "KB/s"),
        ("agent_gossip_in_kbps", in_kbps, "KB/s"),
        // The figures are for the members the swarm kept alive, which may be fewer than asked.
        ("agent_members_alive", alive_min as f64, "members"),
    ] {
        println!("FIGURE {series} {x} {value:.2} {unit}");
    }
    stop_agent(&mut child).await;
    // Stopped as by a crash: a clean leave waits up to a round per member.
    drop(peers);
    // Closing their stdin stops the peer processes.
    for mut c in children.drain(..) {
        drop(c.stdin.take());
        let _ = c.wait();
    }
}

/// Stops the agent as Kubernetes would, with SIGTERM, so that a profiler around it
/// (FOOTPRINT_WRAPPER) writes its output on the way out; kills it if it is still running 20 s
/// later.
async fn stop_agent(child: &mut std::process::Child) {
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
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
    try_gossip_traffic(url).await.expect("the agent's /metrics")
}

/// [`gossip_traffic`], or `None` if `/metrics` could not be read.
async fn try_gossip_traffic(url: &str) -> Option<GossipTraffic> {
    let text = telemesh_sim::cluster::http::request(http::Method::GET, url, None)
        .await
        .map(|body| String::from_utf8_lossy(&body).into_owned())
        .ok()?;
    let value = |series: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    Some(GossipTraffic {
        alive: value("telemesh_agent_gossip_peers{state=\"Alive\"}") as usize,
        dead: value("telemesh_agent_gossip_peers{state=\"Dead\"}") as usize,
        bytes_in: value("telemesh_agent_gossip_bytes_total{direction=\"In\"}"),
        bytes_out: value("telemesh_agent_gossip_bytes_total{direction=\"Out\"}"),
        datagrams_in: value("telemesh_agent_gossip_datagrams_total{direction=\"In\"}"),
        datagrams_out: value("telemesh_agent_gossip_datagrams_total{direction=\"Out\"}"),
    })
}
