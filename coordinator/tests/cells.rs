//! Gossip cells end to end against sim, in-process on loopback: ten agents split into four cells
//! and two coordinator replicas that serve every cell. Both replicas' views hold every node with
//! its metric; each agent's gossip holds only its own cell's agents and the two replicas (the
//! cells are separate meshes); an agent started with another cell count is in view and reported
//! by both replicas and by itself; an agent that leaves is seen leaving through its cell; a
//! metric an agent stops publishing leaves both views (re-read from the agent's own cell).
//!
//! And a rolling upgrade from the flat mesh: agents in the flat mesh replaced one by one with
//! agents in cells, both replicas polled throughout, no node ever missing from either view; the
//! replicas leave the flat mesh once it is empty for its grace, and keep every node.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use clap::Parser as _;
use http_body_util::{BodyExt as _, Empty};
use telemesh_core::gossip::{Cells, Liveness};
use telemesh_runtime::testing::eventually;
use tokio_util::sync::CancellationToken;

const KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
const WAIT: Duration = Duration::from_secs(30);
const CELLS: u32 = 4;
/// Loopback addresses of this test's own (no other test binds them): the replicas' cell ports
/// are fixed offsets from their base port, so each replica has an address to itself.
const REPLICA_IPS: [Ipv4Addr; 2] = [Ipv4Addr::new(127, 0, 84, 1), Ipv4Addr::new(127, 0, 84, 2)];
const UPGRADE_IPS: [Ipv4Addr; 2] = [Ipv4Addr::new(127, 0, 85, 1), Ipv4Addr::new(127, 0, 85, 2)];

fn script_metric(root: &Path, value: f64) {
    let dir = root.join("textfile");
    std::fs::create_dir_all(&dir).unwrap();
    let tmp = dir.join(".metrics.prom.tmp");
    std::fs::write(&tmp, format!("node_metric {value}\n")).unwrap();
    std::fs::rename(tmp, dir.join("metrics.prom")).unwrap();
}

/// A base port whose next `cells` ports are free on every replica address (the replicas bind
/// them right after; nothing else binds these addresses).
fn free_base_port(ips: &[Ipv4Addr], cells: u32) -> u16 {
    let span = u16::try_from(cells).unwrap();
    (20_000..30_000)
        .step_by(usize::from(span) + 1)
        .find(|&base| {
            ips.iter().all(|ip| {
                (base..=base + span)
                    .all(|port| std::net::UdpSocket::bind((IpAddr::V4(*ip), port)).is_ok())
            })
        })
        .unwrap()
}

async fn get(addr: SocketAddr, path: &str) -> String {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Empty<bytes::Bytes>>();
    let Ok(resp) = client
        .get(format!("http://{addr}{path}").parse().unwrap())
        .await
    else {
        return String::new();
    };
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8_lossy(&body).into_owned()
}

fn agent_config(
    node: &str,
    dir: &Path,
    cells: u32,
    cell_seeds: &str,
) -> telemesh_agent::config::Config {
    agent_config_with(node, dir, cells, cell_seeds, &[])
}

fn agent_config_with(
    node: &str,
    dir: &Path,
    cells: u32,
    cell_seeds: &str,
    extra: &[String],
) -> telemesh_agent::config::Config {
    let mut args = vec![
        "telemesh-agent".to_string(),
        format!("--node-name={node}"),
        format!("--host-root={}", dir.join(node).display()),
        "--textfile-dir=/textfile".into(),
        format!("--gossip-key-file={}", dir.join("keys").display()),
        format!("--kubeconfig={}", dir.join("kubeconfig").display()),
        "--gossip-listen=127.0.0.1:0".into(),
        "--http-listen=127.0.0.1:0".into(),
        "--gossip-interval=100ms".into(),
        "--collect-interval=100ms".into(),
        format!("--gossip-cells={cells}"),
        format!("--gossip-cell-seeds={cell_seeds}"),
    ];
    args.extend_from_slice(extra);
    telemesh_agent::config::Config::try_from(
        telemesh_agent::config::Cli::try_parse_from(args).unwrap(),
    )
    .unwrap()
}

fn coordinator_config(
    name: &str,
    dir: &Path,
    listen: SocketAddr,
    cell_seeds: &str,
) -> telemesh_coordinator::config::Config {
    coordinator_config_with(name, dir, listen, cell_seeds, &[])
}

fn coordinator_config_with(
    name: &str,
    dir: &Path,
    listen: SocketAddr,
    cell_seeds: &str,
    extra: &[String],
) -> telemesh_coordinator::config::Config {
    let mut args = vec![
        "telemesh-coordinator".to_string(),
        format!("--replica-name={name}"),
        format!("--gossip-key-file={}", dir.join("keys").display()),
        format!("--kubeconfig={}", dir.join("kubeconfig").display()),
        format!("--gossip-listen={listen}"),
        format!("--gossip-cells={CELLS}"),
        format!("--gossip-cell-seeds={cell_seeds}"),
        "--extender-listen=127.0.0.1:0".into(),
        "--api-listen=127.0.0.1:0".into(),
        "--api-auth=none".into(),
        "--http-listen=127.0.0.1:0".into(),
        "--gossip-interval=100ms".into(),
        "--view-tick=50ms".into(),
        "--scavengers=false".into(),
        // Only the re-read of a member that moved removes anything, never the full resync.
        "--view-resync=1h".into(),
    ];
    args.extend_from_slice(extra);
    telemesh_coordinator::config::Config::try_from(
        telemesh_coordinator::config::Cli::try_parse_from(args).unwrap(),
    )
    .unwrap()
}

/// The agents and observers an agent's gossip holds (itself left out), from `/debug/state`.
async fn seen_by(agent: SocketAddr) -> (BTreeSet<String>, BTreeSet<String>) {
    let state: serde_json::Value =
        serde_json::from_str(&get(agent, "/debug/state").await).unwrap_or_default();
    let (mut agents, mut observers) = (BTreeSet::new(), BTreeSet::new());
    for m in state["members"].as_array().into_iter().flatten() {
        if m["self"] == true || m["liveness"] != "Live" {
            continue;
        }
        let name = m["node"].as_str().unwrap_or_default().to_owned();
        match m["role"].as_str() {
            Some("Agent") => agents.insert(name),
            Some("Observer") => observers.insert(name),
            _ => false,
        };
    }
    (agents, observers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_gossip_in_cells_that_every_replica_serves_and_merges() {
    telemesh_runtime::telemetry::init(telemesh_runtime::cli::LogFormat::Text, "error");
    let sim = telemesh_sim::Sim::start(Default::default()).await.unwrap();
    telemesh_sim::nodes::create_nodes(&sim.server, 11).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    sim.write_kubeconfig(&dir.join("kubeconfig")).unwrap();
    std::fs::write(dir.join("keys"), format!("{KEY}\n")).unwrap();

    let base = free_base_port(&REPLICA_IPS, CELLS);
    let cell_seeds = REPLICA_IPS
        .iter()
        .map(|ip| format!("{ip}:{base}"))
        .collect::<Vec<_>>()
        .join(",");
    let mut replicas = Vec::new();
    for (r, ip) in REPLICA_IPS.iter().enumerate() {
        let listen = SocketAddr::new(IpAddr::V4(*ip), base);
        let replica = telemesh_coordinator::start(
            coordinator_config(&format!("coordinator-{r}"), dir, listen, &cell_seeds),
            CancellationToken::new(),
        )
        .await
        .unwrap();
        // One port per cell, after the base (which the flat mesh keeps).
        let ports: Vec<u16> = replica.gossip_addrs.iter().map(|a| a.port()).collect();
        assert_eq!(ports, [base + 1, base + 2, base + 3, base + 4]);
        replicas.push(replica);
    }

    let cells = Cells::new(CELLS).unwrap();
    let names: Vec<String> = (0..10).map(|i| format!("sim-node-{i}")).collect();
    let mut agents = Vec::new();
    for (i, name) in names.iter().enumerate() {
        script_metric(&dir.join(name), i as f64);
        let agent = telemesh_agent::start(
            agent_config(name, dir, CELLS, &cell_seeds),
            CancellationToken::new(),
        )
        .await
        .unwrap();
        agents.push(agent);
    }
    let used: BTreeSet<u16> = names.iter().map(|n| cells.of(n).index()).collect();
    assert!(used.len() > 1, "the nodes should span cells: {used:?}");

    // Both replicas merge every cell: every node, live, with its own metric.
    for replica in &replicas {
        let view = replica.view.clone();
        let names = names.clone();
        eventually("every node in the replica's view", WAIT, || {
            let (view, names) = (view.clone(), names.clone());
            async move {
                let snapshot = view.load();
                names
                    .iter()
                    .enumerate()
                    .all(|(i, n)| {
                        snapshot.node(n).is_some_and(|e| {
                            e.liveness == Liveness::Live
                                && e.metric("node_metric").map(|v| v.value) == Some(i as f64)
                        })
                    })
                    .then_some(())
            }
        })
        .await;
    }

    // A metric an agent stops publishing leaves both views, read back from its own cell.
    let dropped = names[1].clone();
    let textfile = dir.join(&dropped).join("textfile");
    std::fs::write(textfile.join(".metrics.prom.tmp"), "node_other 1\n").unwrap();
    std::fs::rename(
        textfile.join(".metrics.prom.tmp"),
        textfile.join("metrics.prom"),
    )
    .unwrap();
    for replica in &replicas {
        let view = replica.view.clone();
        let dropped = dropped.clone();
        eventually("the stopped metric leaves the view", WAIT, || {
            let (view, dropped) = (view.clone(), dropped.clone());
            async move {
                view.load()
                    .node(&dropped)
                    .is_some_and(|e| {
                        e.metric("node_metric").is_none() && e.metric("node_other").is_some()
                    })
                    .then_some(())
            }
        })
        .await;
    }

    // Each agent's gossip is its cell: the other agents of its cell and both replicas.
    let replica_names: BTreeSet<String> =
        ["coordinator-0", "coordinator-1"].map(String::from).into();
    for (name, agent) in names.iter().zip(&agents) {
        let cell = cells.of(name).index();
        let peers: BTreeSet<String> = names
            .iter()
            .filter(|n| *n != name && cells.of(n).index() == cell)
            .cloned()
            .collect();
        let http = agent.http_addr;
        let want = (peers, replica_names.clone());
        eventually("the agent's gossip holds exactly its cell", WAIT, || {
            let want = want.clone();
            async move { (seen_by(http).await == want).then_some(()) }
        })
        .await;
    }

    // An agent started with another cell count still reaches a replica's cell of the same
    // index, and both replicas say so.
    let odd = "sim-node-10";
    script_metric(&dir.join(odd), 10.0);
    let two = Cells::new(2).unwrap();
    assert!(two.of(odd).index() < 2);
    let odd_agent = telemesh_agent::start(
        agent_config(odd, dir, 2, &cell_seeds),
        CancellationToken::new(),
    )
    .await
    .unwrap();
    for replica in &replicas {
        let (view, http) = (replica.view.clone(), replica.http_addr);
        eventually("the mismatched agent is in view and reported", WAIT, || {
            let view = view.clone();
            async move {
                let in_view = view.load().node(odd).is_some();
                let metrics = get(http, "/metrics").await;
                (in_view && metrics.contains("telemesh_coordinator_view_cell_count_mismatches 1\n"))
                    .then_some(())
            }
        })
        .await;
    }

    // The agent says so too, and an agent with the replicas' count does not.
    let (odd_http, fine_http) = (odd_agent.http_addr, agents[0].http_addr);
    eventually(
        "the mismatched agent reports the replicas' count",
        WAIT,
        || async move {
            let odd = get(odd_http, "/metrics").await;
            let fine = get(fine_http, "/metrics").await;
            (odd.contains("telemesh_agent_gossip_cell_count_mismatch 1\n")
                && fine.contains("telemesh_agent_gossip_cell_count_mismatch 0\n"))
            .then_some(())
        },
    )
    .await;

    // An agent that leaves is seen leaving, through its cell, by both replicas.
    let leaving = names[3].clone();
    agents.remove(3).shutdown().await;
    for replica in &replicas {
        let view = replica.view.clone();
        let leaving = leaving.clone();
        eventually("the agent that left is Left in the view", WAIT, || {
            let (view, leaving) = (view.clone(), leaving.clone());
            async move {
                (view.load().node(&leaving).map(|e| e.liveness) == Some(Liveness::Left))
                    .then_some(())
            }
        })
        .await;
    }

    odd_agent.shutdown().await;
    for agent in agents {
        agent.shutdown().await;
    }
    for replica in replicas {
        replica.shutdown().await;
    }
}

/// Every `name` in `view` (whatever its liveness), else the first missing.
fn missing(view: &telemesh_coordinator::view::ClusterView, names: &[String]) -> Option<String> {
    let snapshot = view.load();
    names.iter().find(|n| snapshot.node(n).is_none()).cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_upgrade_from_the_flat_mesh_keeps_every_node_in_view() {
    telemesh_runtime::telemetry::init(telemesh_runtime::cli::LogFormat::Text, "error");
    let sim = telemesh_sim::Sim::start(Default::default()).await.unwrap();
    telemesh_sim::nodes::create_nodes(&sim.server, 6).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    sim.write_kubeconfig(&dir.join("kubeconfig")).unwrap();
    std::fs::write(dir.join("keys"), format!("{KEY}\n")).unwrap();

    // The new replicas: cells, and the flat mesh at the base port through the flat seeds.
    let base = free_base_port(&UPGRADE_IPS, CELLS);
    let bases: Vec<String> = UPGRADE_IPS
        .iter()
        .map(|ip| format!("{ip}:{base}"))
        .collect();
    let seeds = bases.join(",");
    let mut replicas = Vec::new();
    for (r, ip) in UPGRADE_IPS.iter().enumerate() {
        let extra = [
            format!("--gossip-seeds={seeds}"),
            "--gossip-flat-mesh-grace=3s".to_owned(),
        ];
        let replica = telemesh_coordinator::start(
            coordinator_config_with(
                &format!("coordinator-{r}"),
                dir,
                SocketAddr::new(IpAddr::V4(*ip), base),
                &seeds,
                &extra,
            ),
            CancellationToken::new(),
        )
        .await
        .unwrap();
        assert_eq!(
            replica.gossip_addr.port(),
            base,
            "the flat mesh keeps the base port"
        );
        replicas.push(replica);
    }

    // The old agents: the flat mesh (one cell), seeded at the replicas' base port.
    let names: Vec<String> = (0..6).map(|i| format!("sim-node-{i}")).collect();
    let flat_seeds = [format!("--gossip-seeds={seeds}")];
    let mut agents = Vec::new();
    for (i, name) in names.iter().enumerate() {
        script_metric(&dir.join(name), i as f64);
        let agent = telemesh_agent::start(
            agent_config_with(name, dir, 1, &seeds, &flat_seeds),
            CancellationToken::new(),
        )
        .await
        .unwrap();
        agents.push(agent);
    }
    let live_in = |cell: bool| {
        let names = names.clone();
        move |view: telemesh_coordinator::view::ClusterView| {
            let snapshot = view.load();
            names.iter().all(|n| {
                snapshot
                    .node(n)
                    .is_some_and(|e| e.liveness == Liveness::Live && e.state.cell.is_some() == cell)
            })
        }
    };
    for replica in &replicas {
        let (view, check) = (replica.view.clone(), live_in(false));
        eventually("every old agent live in the flat mesh", WAIT, || {
            let (view, check) = (view.clone(), check.clone());
            async move { check(view).then_some(()) }
        })
        .await;
    }

    // Both views polled throughout the rollout: a node missing once is a failure.
    let stop_polling = CancellationToken::new();
    let poller = {
        let views: Vec<_> = replicas.iter().map(|r| r.view.clone()).collect();
        let (names, stop) = (names.clone(), stop_polling.clone());
        tokio::spawn(async move {
            let (mut polls, mut misses) = (0u64, Vec::new());
            while !stop.is_cancelled() {
                for (r, view) in views.iter().enumerate() {
                    if let Some(name) = missing(view, &names) {
                        misses.push(format!("{name} missing from replica {r}"));
                    }
                }
                polls += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            (polls, misses)
        })
    };

    // The DaemonSet rollout: one node at a time, the next once the new agent is live in both
    // views in its cell.
    let cells = Cells::new(CELLS).unwrap();
    for (i, name) in names.iter().enumerate() {
        let old = std::mem::replace(
            &mut agents[i],
            telemesh_agent::start(
                agent_config(name, dir, CELLS, &seeds),
                CancellationToken::new(),
            )
            .await
            .unwrap(),
        );
        old.shutdown().await;
        for replica in &replicas {
            let view = replica.view.clone();
            let (name, cell) = (name.clone(), cells.of(name));
            eventually("the upgraded agent live in its cell", WAIT, || {
                let (view, name) = (view.clone(), name.clone());
                async move {
                    view.load()
                        .node(&name)
                        .is_some_and(|e| e.liveness == Liveness::Live && e.state.cell == Some(cell))
                        .then_some(())
                }
            })
            .await;
        }
    }

    // The flat mesh empty for its grace: both replicas leave it and keep every node, live.
    for replica in &replicas {
        let http = replica.http_addr;
        eventually("the replica left the flat mesh", WAIT, || async move {
            let metrics = get(http, "/metrics").await;
            (metrics.contains("telemesh_coordinator_view_flat_mesh_joined 0\n")
                && metrics.contains("telemesh_coordinator_view_flat_mesh_agents 0\n"))
            .then_some(())
        })
        .await;
    }
    for replica in &replicas {
        let (view, check) = (replica.view.clone(), live_in(true));
        eventually(
            "every agent live in its cell after the flat mesh",
            WAIT,
            || {
                let (view, check) = (view.clone(), check.clone());
                async move { check(view).then_some(()) }
            },
        )
        .await;
    }
    stop_polling.cancel();
    let (polls, misses) = poller.await.unwrap();
    assert!(polls > 50, "the views were polled {polls} times");
    assert!(misses.is_empty(), "{} polls: {misses:?}", polls);

    for agent in agents {
        agent.shutdown().await;
    }
    for replica in replicas {
        replica.shutdown().await;
    }
}
