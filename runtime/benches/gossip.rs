//! Gossip convergence and bandwidth at 10, 100 and 1,000 members, printed as a table. Not a
//! criterion statistic: each line is one in-process cluster run.
//!
//! - `udp10`, `udp100`: members on 127.0.0.1 over the real sealed UDP path
//!   (`GossipMember::start`: relay sockets, ChaCha20-Poly1305, one process).
//! - `cell<N>` (`cell1000`, `cell5000`): what one agent of an N-node cluster gossips with, its
//!   cell: N names of the chosen shape hashed into cells as the agents hash them
//!   (`Cells::of`; one cell per 100 nodes as the chart sizes them, or `GOSSIP_BENCH_CELLS`),
//!   the largest cell's agents started as in `udp<N>`, and `GOSSIP_BENCH_REPLICAS` (3)
//!   coordinator replicas, observers, on a runtime thread of their own so their CPU is
//!   measured apart. A replica's bytes and CPU in this cell, times the cell count, is what it
//!   pays in all of them (cells are alike by construction; docs/scale.md, "Stop 33").
//! - `chan1000v`: 1,000 members on chitchat's in-process `ChannelTransport`
//!   (`GossipMember::start_on`): no sockets and **no sealing** (add 37 bytes per datagram, frame version 2), on
//!   tokio's paused clock, which only advances when every task is idle. Figures are protocol
//!   time with free CPU and an instant network: what 1,000 nodes would see if each had its own
//!   core. (A whole 1,000-member cluster costs several CPU seconds per round, so on the wall
//!   clock one process measures its cores, not the protocol: `chan1000` does that, if wanted.)
//!
//! Every member seeds with the first three. Once every member hears 99 % of the members
//! (`membership`), traffic is measured for 10 rounds idle (heartbeats and digests only), then
//! with load: each node publishes 30 of the agent's metrics at start, then changes one of the
//! first 10 (five families) `GOSSIP_BENCH_UPDATES` times a second (default 10), to a new
//! measured-looking value (17 digits, as gossip carries values exactly), while a probe key is published on one member after another. Members start
//! spread over one interval, so their rounds are out of phase as in a real cluster. Convergence is the time from publishing the probe
//! until 99 % (and 100 %) of members have it, from key-change callbacks. Bandwidth is bytes sent
//! per node per second (as many are received). `cpu/node` is the process's CPU time per
//! (clock) second divided by the member count, in % of one core: on the paused clock that is
//! what one node would spend.
//!
//! Metrics go out in the encoding members choose (groups: no observer speaks version 1 here);
//! `GOSSIP_BENCH_ENCODING=keys` pins one key per metric, as before schema version 2.
//! `anon/node` is the process's anonymous RSS after the idle window divided by the member
//! count: about one member's heap (its view of the cluster, digests, failure detector).
//! `FIGURE gossip_update_scan_us` is the wall-clock cost of one scan for members' updates that
//! finds none (`GossipMember::sync_updates`), which the coordinator's view runs on every tick to
//! see deletions: a step and a comparison per known member.
//!
//! Run: `cargo bench -p telemesh-runtime --bench gossip`. Choose runs with
//! `GOSSIP_BENCH=udp10@1000,udp100@200,chan1000v@1000` (name@interval in ms; `udp<N>` and
//! `chan<N>v` for other sizes), and the node names' shape with `GOSSIP_BENCH_NAMES=eks` (the
//! default: sequential addresses), `eks-ip` (addresses over a /16), `gke` or `aks` (random
//! parts, which compress worse in digests). A cell of a larger cluster is a mesh of the cell's
//! size: what an agent there sees (docs/scale.md, "Stop 32").
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use chitchat::transport::ChannelTransport;
use telemesh_core::gossip::cells::{Cell, Cells};
use telemesh_core::gossip::groups::MetricEncoding;
use telemesh_core::gossip::{NodeState, Role};
use telemesh_core::metric::{MetricName, Sample};
use telemesh_core::testing::{
    NameShape, agent_metric_names, agent_samples, process_cpu_seconds, process_rss_split_mib,
    thread_cpu_seconds,
};
use telemesh_runtime::gossip::{GossipConfig, GossipMember, Keyring, Security};
use tokio::time::Instant;

const DEFAULT_RUNS: &str = "udp10@1000,udp10@200,udp100@1000,udp100@200,chan1000v@1000";

#[derive(Clone, Copy, PartialEq)]
enum Path {
    SealedUdp,
    Channel,
}

struct Run {
    name: String,
    /// Agents in the mesh.
    members: usize,
    path: Path,
    virtual_time: bool,
    interval: Duration,
    /// `cell<N>`: the mesh is the largest cell of an `N`-node cluster, and the agents' names are
    /// those the cell hashing puts there.
    cell_of: Option<CellOf>,
}

/// The largest cell of a cluster (`cell<N>` runs): what an agent of that cluster gossips with.
struct CellOf {
    /// Nodes in the whole cluster.
    cluster: usize,
    cells: Cells,
    /// The largest cell.
    cell: Cell,
    /// Its agents' node names.
    agents: Vec<String>,
    /// Coordinator replicas, observers in every cell.
    replicas: usize,
}

impl CellOf {
    /// The largest of `cells` cells of a `cluster`-node cluster whose names have `shape`.
    fn largest(cluster: usize, cells: Cells, shape: NameShape, replicas: usize) -> Self {
        let mut by_cell: Vec<Vec<String>> = vec![Vec::new(); usize::from(cells.count())];
        for i in 0..cluster {
            let name = shape.name(i);
            by_cell[usize::from(cells.of(&name).index())].push(name);
        }
        let agents = by_cell.into_iter().max_by_key(Vec::len).unwrap_or_default();
        Self {
            cluster,
            cells,
            cell: agents
                .first()
                .map_or(Cells::FLAT.of(""), |name| cells.of(name)),
            agents,
            replicas,
        }
    }
}

fn parse_runs(spec: &str) -> Vec<Run> {
    spec.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            let (name, ms) = s.trim().split_once('@').expect("runs look like udp10@1000");
            let interval = Duration::from_millis(ms.parse().expect("interval in ms"));
            if let Some(cluster) = name.strip_prefix("cell").and_then(|n| n.parse().ok()) {
                let cells = cells_for(cluster);
                let cell = CellOf::largest(cluster, cells, name_shape(), replicas());
                return Run {
                    name: name.to_owned(),
                    members: cell.agents.len(),
                    path: Path::SealedUdp,
                    virtual_time: false,
                    interval,
                    cell_of: Some(cell),
                };
            }
            let (members, path, virtual_time) = match name {
                "udp10" => (10, Path::SealedUdp, false),
                "udp100" => (100, Path::SealedUdp, false),
                "chan1000" => (1000, Path::Channel, false),
                "chan1000v" => (1000, Path::Channel, true),
                other => match (
                    other
                        .strip_prefix("chan")
                        .and_then(|r| r.strip_suffix('v'))
                        .and_then(|n| n.parse().ok()),
                    other.strip_prefix("udp").and_then(|n| n.parse().ok()),
                ) {
                    (Some(n), _) => (n, Path::Channel, true),
                    (None, Some(n)) => (n, Path::SealedUdp, false),
                    (None, None) => {
                        panic!(
                            "unknown run {other}: use udp<N>, cell<N>, chan1000, chan1000v or chan<N>v"
                        )
                    }
                },
            };
            Run {
                name: name.to_owned(),
                members,
                path,
                virtual_time,
                interval,
                cell_of: None,
            }
        })
        .collect()
}

/// `GOSSIP_BENCH_CELLS`, else the chart's sizing rule: one cell per 100 nodes.
fn cells_for(cluster: usize) -> Cells {
    let count = std::env::var("GOSSIP_BENCH_CELLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| u32::try_from(cluster.div_ceil(100)).unwrap_or(u32::MAX));
    Cells::new(count).expect("GOSSIP_BENCH_CELLS between 1 and 1,024")
}

/// Coordinator replicas in a `cell<N>` run's cell: `GOSSIP_BENCH_REPLICAS`, default 3 (the
/// chart's).
fn replicas() -> usize {
    std::env::var("GOSSIP_BENCH_REPLICAS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

fn main() {
    let spec = std::env::var("GOSSIP_BENCH").unwrap_or_else(|_| DEFAULT_RUNS.to_owned());
    println!(
        "load: {} metric updates per node per second (GOSSIP_BENCH_UPDATES)",
        updates_per_second()
    );
    println!(
        "encoding: {} (GOSSIP_BENCH_ENCODING)",
        match encoding() {
            Some(MetricEncoding::Keys) => "keys",
            _ => "groups",
        }
    );
    println!(
        "{:<10} {:>5} {:>6} {:>10} {:>17} {:>9} {:>11} {:>11} {:>9} {:>9} {:>9} {:>6}",
        "run",
        "nodes",
        "round",
        "membership",
        "conv99 p50/max",
        "conv100",
        "idle B/s",
        "loaded B/s",
        "dgram/s",
        "cpu/node",
        "anon/node",
        "drops"
    );
    for run in parse_runs(&spec) {
        let runtime = if run.virtual_time {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .start_paused(true)
                .build()
        } else {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
        }
        .expect("runtime");
        // The replicas run on a runtime of their own, one worker thread, so their CPU time is
        // that thread's (and its blocking pool's): the agents' runtime never polls their tasks.
        let replicas = run.cell_of.as_ref().map(|_| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name(REPLICA_THREADS)
                .enable_all()
                .build()
                .expect("the replicas' runtime")
        });
        let report = runtime.block_on(bench(&run, replicas.as_ref().map(|r| r.handle().clone())));
        report.print(&run);
        drop(runtime);
        drop(replicas);
    }
    println!(
        "B/s and dgram/s: sent per node per second while loaded (received is the same on \
         average). cpu/node: % of one core per node while loaded. conv100 '-' = not all members \
         within the deadline. chan* runs are unsealed."
    );
}

struct Report {
    membership: Option<Duration>,
    conv99: Vec<Option<Duration>>,
    conv100: Vec<Option<Duration>>,
    idle_bps: f64,
    loaded_bps: f64,
    loaded_dps: f64,
    cpu_per_node: f64,
    heap_per_node: f64,
    /// Bytes sent per replica per second while loaded, in this one cell (`cell<N>` runs).
    replica_bps: Option<f64>,
    /// CPU per replica while loaded, in this one cell, as a share of one core.
    replica_cpu: Option<f64>,
    /// For each probe and replica, how long the probe took to reach it (the deadline if it
    /// did not).
    replica_arrivals: Vec<Duration>,
    /// Wall-clock µs of one scan for members' updates that finds none.
    update_scan_us: f64,
    drops: u64,
}

impl Report {
    fn print(&self, run: &Run) {
        let secs =
            |d: Option<Duration>| d.map_or("-".to_owned(), |d| format!("{:.2}s", d.as_secs_f64()));
        let mut c99: Vec<Duration> = self.conv99.iter().flatten().copied().collect();
        c99.sort();
        let p50 = c99.get(c99.len() / 2).copied();
        let max99 = if c99.len() == self.conv99.len() {
            c99.last().copied()
        } else {
            None
        };
        let max100 = if self.conv100.iter().all(Option::is_some) {
            self.conv100.iter().flatten().max().copied()
        } else {
            None
        };
        println!(
            "{:<10} {:>5} {:>5}ms {:>10} {:>17} {:>9} {:>11.0} {:>11.0} {:>9.1} {:>8.2}% {:>7.1}KB {:>6}",
            run.name,
            run.members,
            run.interval.as_millis(),
            secs(self.membership),
            format!("{}/{}", secs(p50), secs(max99)),
            secs(max100),
            self.idle_bps,
            self.loaded_bps,
            self.loaded_dps,
            self.cpu_per_node * 100.0,
            self.heap_per_node / 1000.0,
            self.drops
        );
        // A cell run stands for the whole cluster: x is its node count.
        let x = run.cell_of.as_ref().map_or(run.members, |c| c.cluster);
        if let Some(c) = &run.cell_of {
            let mut arrivals = self.replica_arrivals.clone();
            arrivals.sort();
            let p99 = arrivals
                .get((arrivals.len() * 99).div_ceil(100).saturating_sub(1))
                .copied();
            println!(
                "  {}: the largest of {} cells of {} nodes: {} agents and {} replicas; per \
                 replica in this cell: {:.0} B/s sent and {:.2} % of a core while loaded (x{} \
                 cells: {:.0} KB/s, {:.0} % of a core), probe reached every replica p99 {}",
                run.name,
                c.cells.count(),
                c.cluster,
                run.members,
                c.replicas,
                self.replica_bps.unwrap_or(0.0),
                self.replica_cpu.unwrap_or(0.0) * 100.0,
                c.cells.count(),
                self.replica_bps.unwrap_or(0.0) * f64::from(c.cells.count()) / 1000.0,
                self.replica_cpu.unwrap_or(0.0) * 100.0 * f64::from(c.cells.count()),
                secs(p99),
            );
            if let (Some(bps), Some(p99)) = (self.replica_bps, p99) {
                println!(
                    "FIGURE gossip_replica_kbps {x} {:.3} KB/s",
                    bps * f64::from(c.cells.count()) / 1000.0
                );
                println!(
                    "FIGURE gossip_replica_arrival_p99_s {x} {:.3} s",
                    p99.as_secs_f64()
                );
                if let Some(cpu) = self.replica_cpu {
                    println!(
                        "FIGURE gossip_replica_cpu_percent {x} {:.3} %",
                        cpu * 100.0 * f64::from(c.cells.count())
                    );
                }
            }
        }
        // One line per headline figure for scripts/scaling.sh (x = members, or the cluster's
        // nodes for a cell; the round is in the run's name above).
        let figures = [
            ("gossip_idle_kbps", Some(self.idle_bps / 1000.0), "KB/s"),
            ("gossip_loaded_kbps", Some(self.loaded_bps / 1000.0), "KB/s"),
            ("gossip_conv99_p50_s", p50.map(|d| d.as_secs_f64()), "s"),
            ("gossip_conv99_max_s", max99.map(|d| d.as_secs_f64()), "s"),
            (
                "gossip_member_anon_kb",
                Some(self.heap_per_node / 1000.0),
                "KB",
            ),
            ("gossip_update_scan_us", Some(self.update_scan_us), "us"),
        ];
        for (series, value, unit) in figures {
            // A figure not reached (a trial past its deadline) is left out, not printed as 0.
            if let Some(value) = value {
                println!("FIGURE {series} {x} {value:.3} {unit}");
            }
        }
    }
}

/// The name of the replicas' runtime threads, whose CPU time is theirs.
const REPLICA_THREADS: &str = "bench-replicas";

/// CPU seconds the threads named [`REPLICA_THREADS`] have used.
fn replica_cpu_seconds() -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    tasks
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .is_ok_and(|comm| comm.trim() == REPLICA_THREADS)
        })
        .filter_map(|t| t.file_name().to_str()?.parse::<u32>().ok())
        .map(thread_cpu_seconds)
        .sum()
}

/// Starts the run's members: the agents on this runtime, the replicas (`cell<N>`) on
/// `replicas`.
async fn start_members(
    run: &Run,
    channel: &ChannelTransport,
    replicas_rt: Option<&tokio::runtime::Handle>,
) -> Vec<GossipMember> {
    let keyring = Keyring::from_keys(&[[42; 32]]).unwrap();
    let mut members: Vec<GossipMember> = Vec::with_capacity(run.members);
    let mut seeds: Vec<String> = Vec::new();
    let shape = name_shape();
    let replicas = run.cell_of.as_ref().map_or(0, |c| c.replicas);
    for i in 0..run.members + replicas {
        // Agents first, then the replicas (observers), which seed from the agents as a replica
        // started last would.
        let (name, role) = match &run.cell_of {
            Some(_) if i >= run.members => (
                format!("telemesh-coordinator-{}", i - run.members),
                Role::Observer,
            ),
            Some(c) => (c.agents[i].clone(), Role::Agent),
            None => (shape.name(i), Role::Agent),
        };
        let member = match run.path {
            Path::SealedUdp => {
                let cell = run
                    .cell_of
                    .as_ref()
                    .map_or(Cells::FLAT.of(&name), |c| c.cell);
                let mut c = GossipConfig::new(
                    name,
                    "bench",
                    "127.0.0.1:0".parse().unwrap(),
                    Security::Sealed(keyring.clone()),
                );
                c.role = role;
                c.join_cell(cell);
                c.seeds = seeds.clone();
                c.gossip_interval = run.interval;
                c.metric_encoding = encoding();
                match replicas_rt.filter(|_| role == Role::Observer) {
                    Some(rt) => rt.spawn(GossipMember::start(c)).await.unwrap().unwrap(),
                    None => GossipMember::start(c).await.unwrap(),
                }
            }
            Path::Channel => {
                let addr = SocketAddr::from(([127, 0, 0, 1], 30_000 + i as u16));
                let mut c = GossipConfig::new(name, "bench", addr, Security::Insecure);
                c.seeds = seeds.clone();
                c.gossip_interval = run.interval;
                c.metric_encoding = encoding();
                GossipMember::start_on(c, channel).await.unwrap()
            }
        };
        if seeds.len() < 3 {
            seeds.push(member.id().gossip_addr.to_string());
        }
        members.push(member);
        // Spread the members' round phases over one interval, as in a real cluster.
        tokio::time::sleep(run.interval / run.members as u32).await;
    }
    members
}

/// Bytes and datagrams sent so far by all members.
fn traffic(members: &[GossipMember], channel: &ChannelTransport, path: Path) -> (u64, u64) {
    match path {
        Path::SealedUdp => members
            .iter()
            .map(|m| m.stats())
            .fold((0, 0), |(b, d), s| (b + s.bytes_out, d + s.datagrams_out)),
        Path::Channel => {
            let s = channel.statistics();
            (s.num_bytes_total, s.num_messages_total)
        }
    }
}

/// `GOSSIP_BENCH_NAMES=eks|eks-ip|gke|aks`, default `eks`.
fn name_shape() -> NameShape {
    NameShape::from_env("GOSSIP_BENCH_NAMES")
}

/// `GOSSIP_BENCH_ENCODING=keys|groups`, else chosen by the members (groups here).
fn encoding() -> Option<MetricEncoding> {
    match std::env::var("GOSSIP_BENCH_ENCODING").as_deref() {
        Ok("keys") => Some(MetricEncoding::Keys),
        Ok("groups") => Some(MetricEncoding::Groups),
        _ => None,
    }
}

/// The probe's trial number in a key change, in either encoding.
fn probe_trial(key: &str, value: &str) -> Option<usize> {
    let state = NodeState::from_key_values([(key, value)]);
    let v = state.metric(PROBE)?.value;
    (v >= 0.0).then_some(v as usize)
}

/// The probe metric: a family of its own, so its group carries only it.
const PROBE: &str = "probe_value";

/// Metric updates per node per second while loaded: `GOSSIP_BENCH_UPDATES`, default 10.
fn updates_per_second() -> u32 {
    std::env::var("GOSSIP_BENCH_UPDATES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10)
}

async fn wait_until<F, Fut>(within: Duration, every: Duration, mut done: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if done().await {
            return true;
        }
        tokio::time::sleep(every).await;
    }
    false
}

/// Every member's initial metrics: 30 measured-looking values (ratios and rates to 17 digits,
/// as collectors compute them).
async fn publish_initial(members: &[GossipMember]) {
    for (i, m) in members.iter().enumerate() {
        m.publish_metrics(&agent_samples(i), SystemTime::now())
            .await
            .unwrap();
    }
}

/// The load: each tick every member changes one of the first ten metrics (five families), so
/// at 10 updates a second each of them changes once a second. The values look measured (ratios
/// and rates to 17 digits, as collectors compute them and as gossip carries them, exactly:
/// `telemesh_core::gossip::groups`), not short decimals, which would hide what exact values
/// cost on the wire.
async fn load(members: Arc<Vec<GossipMember>>, agents: usize, updates_per_second: u32) {
    let names: Vec<MetricName> = agent_metric_names().into_iter().take(10).collect();
    let mut tick = tokio::time::interval(Duration::from_secs(1) / updates_per_second.max(1));
    for round in 0usize.. {
        tick.tick().await;
        for (i, m) in members[..agents].iter().enumerate() {
            let sample = Sample {
                name: names[(round + i) % names.len()].clone(),
                value: ((round * 31 + i * 7) % 1000) as f64 / 997.0,
            };
            let _ = m.publish_metrics(&[sample], SystemTime::now()).await;
        }
    }
}

async fn bench(run: &Run, replicas_rt: Option<tokio::runtime::Handle>) -> Report {
    let channel = ChannelTransport::with_mtu(65_507);
    let wall = std::time::Instant::now();
    let progress = |what: &str, clock: Instant| {
        eprintln!(
            "[{}@{}ms] {what} at {:.1}s clock, {:.0}s wall",
            run.name,
            run.interval.as_millis(),
            clock.elapsed().as_secs_f64(),
            wall.elapsed().as_secs_f64()
        );
    };
    let started = Instant::now();
    let members = Arc::new(start_members(run, &channel, replicas_rt.as_ref()).await);
    // Agents first, then the replicas (`cell<N>` runs): only agents publish.
    let agents = run.members;
    publish_initial(&members[..agents]).await;
    let n = members.len();
    progress("members started", started);
    let target = (0.99 * n as f64).ceil() as usize;

    let membership = wait_until(Duration::from_secs(600), run.interval / 2, || async {
        for m in members.iter() {
            if m.live_count().await < target {
                return false;
            }
        }
        true
    })
    .await
    .then(|| started.elapsed());
    progress("membership", started);

    // Idle: heartbeats and digests only.
    let window = run.interval * 10;
    let (b0, _) = traffic(&members[..agents], &channel, run.path);
    let t0 = Instant::now();
    tokio::time::sleep(window).await;
    let (b1, _) = traffic(&members[..agents], &channel, run.path);
    let idle_bps = (b1 - b0) as f64 / agents as f64 / t0.elapsed().as_secs_f64();
    let heap_per_node = process_rss_split_mib(std::process::id()).0 * 1024.0 * 1024.0 / n as f64;
    progress("idle window done", started);

    // What a reader pays to follow members' versions on its own tick, as the coordinator's view
    // does: the scan for updates when nothing moved (wall clock, one core).
    members[0].sync_updates().await;
    let calls = 200;
    let timer = std::time::Instant::now();
    for _ in 0..calls {
        members[0].sync_updates().await;
    }
    let update_scan_us = timer.elapsed().as_secs_f64() * 1e6 / f64::from(calls);

    // Loaded: metric churn plus probes.
    let trials = if n >= 1000 { 3 } else { 10 };
    let arrivals: Arc<Mutex<Vec<Vec<Option<Instant>>>>> =
        Arc::new(Mutex::new(vec![vec![None; n]; trials]));
    let mut subscriptions = Vec::with_capacity(n);
    for (i, m) in members.iter().enumerate() {
        for prefix in ["m:probe_value", "M:probe_"] {
            let arrivals = arrivals.clone();
            let sub = m
                .on_key_change(prefix, move |change| {
                    // chitchat hands callbacks the key without the subscribed prefix.
                    let key = format!("{prefix}{}", change.key);
                    if let Some(t) = probe_trial(&key, change.value) {
                        let mut a = arrivals.lock().unwrap();
                        if let Some(slot) = a.get_mut(t).and_then(|row| row.get_mut(i)) {
                            slot.get_or_insert_with(Instant::now);
                        }
                    }
                })
                .await;
            subscriptions.push(sub);
        }
    }
    let load_task = tokio::spawn(load(members.clone(), agents, updates_per_second()));
    let (b0, d0) = traffic(&members[..agents], &channel, run.path);
    let (r0, _) = traffic(&members[agents..], &channel, run.path);
    let cpu0 = process_cpu_seconds(std::process::id());
    let replica_cpu0 = replica_cpu_seconds();
    let t0 = Instant::now();
    let probe = MetricName::new(PROBE).unwrap();
    let deadline = (run.interval * 30).max(Duration::from_secs(30));
    let mut conv99 = Vec::new();
    let mut conv100 = Vec::new();
    let mut probe_starts = Vec::with_capacity(trials);
    for t in 0..trials {
        let writer = &members[(t * 37 + 1) % agents];
        let start = Instant::now();
        probe_starts.push(start);
        let sample = Sample {
            name: probe.clone(),
            value: t as f64,
        };
        writer
            .publish_metrics(&[sample], SystemTime::now())
            .await
            .unwrap();
        wait_until(deadline, Duration::from_millis(10), || async {
            arrivals.lock().unwrap()[t].iter().all(Option::is_some)
        })
        .await;
        let mut times: Vec<Duration> = arrivals.lock().unwrap()[t]
            .iter()
            .flatten()
            .map(|at| at.saturating_duration_since(start))
            .collect();
        times.sort();
        conv99.push(times.get(target - 1).copied());
        conv100.push((times.len() == n).then(|| times[n - 1]));
        progress(&format!("trial {t}: {}/{n} members", times.len()), started);
    }
    let (b1, d1) = traffic(&members[..agents], &channel, run.path);
    let (r1, _) = traffic(&members[agents..], &channel, run.path);
    let elapsed = t0.elapsed().as_secs_f64();
    // When each probe reached the replicas: the gossip part of their view's staleness.
    let replica_arrivals: Vec<Duration> = {
        let a = arrivals.lock().unwrap();
        probe_starts
            .iter()
            .enumerate()
            .flat_map(|(t, start)| {
                a[t][agents..]
                    .iter()
                    .map(move |at| at.map(|at| at.saturating_duration_since(*start)))
            })
            .map(|d| d.unwrap_or(deadline))
            .collect()
    };
    let cpu_per_node = (process_cpu_seconds(std::process::id()) - cpu0) / elapsed / n as f64;
    let replica_cpu = (n > agents)
        .then(|| (replica_cpu_seconds() - replica_cpu0) / elapsed / (n - agents) as f64);
    load_task.abort();
    drop(subscriptions);
    let drops = members
        .iter()
        .map(|m| m.stats().dropped.iter().sum::<u64>())
        .sum();
    Report {
        membership,
        conv99,
        conv100,
        idle_bps,
        loaded_bps: (b1 - b0) as f64 / agents as f64 / elapsed,
        loaded_dps: (d1 - d0) as f64 / agents as f64 / elapsed,
        replica_bps: (n > agents).then(|| (r1 - r0) as f64 / (n - agents) as f64 / elapsed),
        replica_cpu,
        replica_arrivals,
        cpu_per_node,
        heap_per_node,
        update_scan_us,
        drops,
    }
}
