//! Gossip trust with the real binaries on loopback (sealed gossip, sim as the API server):
//! - captured datagrams replayed at a real agent and a real coordinator are dropped and
//!   counted (`replayed`, then `stale` once older than the replay window);
//! - a key rotation drill (add key B everywhere, make it primary everywhere, remove key A, one
//!   member at a time, each reloading its key file without a restart): no honest datagram
//!   dropped, the view whole throughout;
//! - agents whose clocks are minutes off: their figures look neither stale nor fresh from the
//!   future to a coordinator, itself minutes off.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use telemesh_runtime::gossip::Keyring;
use telemesh_tests::mesh::{MESH_WAIT, Mesh, log_field, metric_value as value};
use telemesh_tests::{SimEnv, eventually};

/// The key the mesh starts with (tests/src/mesh.rs).
const KEY_A: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

fn key_b() -> String {
    base64::engine::general_purpose::STANDARD.encode([7u8; 32])
}

/// The gossip drop counter of `reason` in a member's /metrics (agent or coordinator).
fn dropped(metrics: &str, reason: &str) -> f64 {
    ["telemesh_agent", "telemesh_coordinator"]
        .iter()
        .map(|p| {
            value(
                metrics,
                &format!("{p}_gossip_dropped_packets_total{{reason=\"{reason}\"}}"),
            )
        })
        .sum()
}

fn now_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replayed_datagrams_are_dropped_and_counted_by_agents_and_coordinators() {
    let env = SimEnv::start(3).await;
    let window = "--gossip-replay-window=3s";
    let nodes = [
        ("sim-node-0", "node_metric 1\n"),
        ("sim-node-1", "node_metric 2\n"),
    ];
    let mut mesh = Mesh::start_with(&env, &nodes, &[window], &[window], 1).await;

    // A tap: one more agent joins through a seed address the test relays to sim-node-1, so
    // the test captures a real sealed datagram, as an attacker on the path would. Its only seed
    // is the tap, so its first gossip round goes there (no luck of the peer draw involved), and
    // neither target has seen the captured datagram before the test sends it.
    let (tap, mut captured) = tap_relay(mesh.agent_gossip["sim-node-1"]).await;
    let tap_seed = format!("--gossip-seeds={tap}");
    mesh.add_agent(&env, "sim-node-2", "node_metric 3\n", &[&tap_seed])
        .await;
    let captured = tokio::time::timeout(MESH_WAIT, captured.recv())
        .await
        .expect("the tapped agent gossips with its seed")
        .unwrap();
    let captured_at = tokio::time::Instant::now();
    assert_eq!(captured[0], 2, "a version 2 frame");

    let targets = [
        ("sim-node-0".to_owned(), mesh.agent_gossip["sim-node-0"]),
        ("coordinator-0".to_owned(), mesh.coordinators[0].gossip),
    ];
    let attacker = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    // First delivery: fresh to the target. Then the replay.
    for (_, addr) in &targets {
        attacker.send_to(&captured, addr).await.unwrap();
        attacker.send_to(&captured, addr).await.unwrap();
    }
    for (name, _) in &targets {
        eventually(&format!("{name} counts the replay"), MESH_WAIT, || async {
            let m = mesh.metrics_of(name).await;
            (dropped(&m, "replayed") == 1.0).then_some(())
        })
        .await;
    }
    // Once older than the window (3 s), it is stale, wherever it is sent.
    tokio::time::sleep_until(captured_at + Duration::from_millis(3_200)).await;
    for (_, addr) in &targets {
        attacker.send_to(&captured, addr).await.unwrap();
    }
    for (name, _) in &targets {
        eventually(
            &format!("{name} counts the stale replay"),
            MESH_WAIT,
            || async {
                let m = mesh.metrics_of(name).await;
                (dropped(&m, "stale") >= 1.0).then_some(())
            },
        )
        .await;
        let m = mesh.metrics_of(name).await;
        assert_eq!(dropped(&m, "replayed"), 1.0, "{name}: {m}");
        assert_eq!(dropped(&m, "no_key_opens"), 0.0, "{name}");
    }
    // Honest gossip goes on: every node is still live in the view.
    for node in ["sim-node-0", "sim-node-1", "sim-node-2"] {
        mesh.wait_node(node, |_| true).await;
    }
}

/// A UDP relay on loopback to `to`: returns its address and the datagrams it carried from
/// its clients to `to` (answers go back to the client that sent last).
async fn tap_relay(
    to: std::net::SocketAddr,
) -> (
    std::net::SocketAddr,
    tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>,
) {
    let tap = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let upstream = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    upstream.connect(to).await.unwrap();
    let addr = tap.local_addr().unwrap();
    let (carried, captured) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let (mut from_client, mut from_upstream) = (vec![0u8; 65_536], vec![0u8; 65_536]);
        let mut client = None;
        loop {
            tokio::select! {
                Ok((n, peer)) = tap.recv_from(&mut from_client) => {
                    client = Some(peer);
                    let _ = carried.send(from_client[..n].to_vec());
                    let _ = upstream.send(&from_client[..n]).await;
                }
                Ok(n) = upstream.recv(&mut from_upstream) => {
                    if let Some(peer) = client {
                        let _ = tap.send_to(&from_upstream[..n], peer).await;
                    }
                }
            }
        }
    });
    (addr, captured)
}

/// Writes a key file atomically (as a Secret update lands: the reader never sees half a file).
fn write_keys(path: &std::path::Path, keys: &[&str]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, keys.join("\n") + "\n").unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn fingerprints(keys: &[&str]) -> String {
    let ring = Keyring::parse(&keys.join("\n"), "<test>").unwrap();
    format!("{:?}", ring.fingerprints())
}

/// Waits until `name` logged that it reloaded exactly `keys`.
async fn wait_reloaded(mesh: &mut Mesh, name: &str, keys: &[&str]) {
    let expected = fingerprints(keys);
    let process = match name.strip_prefix("coordinator-") {
        Some(r) => &mut mesh.coordinators[r.parse::<usize>().unwrap()].process,
        None => mesh.agents.get_mut(name).unwrap(),
    };
    process
        .wait_for_line(&format!("{name} to reload {expected}"), MESH_WAIT, |l| {
            let keys = log_field(l, "gossip keyring reloaded; the first key seals", "keys")?;
            (keys == expected).then_some(())
        })
        .await;
}

/// Asserts every coordinator sees every node live right now.
async fn assert_view_whole(mesh: &Mesh, nodes: &[&str], step: &str) {
    for c in &mesh.coordinators {
        let url = format!("http://{}/api/v1/nodes", c.api);
        let body = telemesh_sim::cluster::http::request(http::Method::GET, &url, None)
            .await
            .unwrap();
        let view: serde_json::Value = serde_json::from_slice(&body).unwrap();
        for node in nodes {
            let entry = view["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|n| n["name"] == *node);
            assert!(
                entry.is_some_and(|e| e["liveness"] == "live"),
                "{step}: {node} not live in {url}: {view}"
            );
        }
    }
}

/// Waits until the agents received `datagrams` more datagrams in total: gossip ran under the
/// current keys before the next step.
async fn gossip_flows(mesh: &Mesh, datagrams: f64) {
    let total = || async {
        let mut sum = 0.0;
        for node in mesh.agents.keys() {
            let m = mesh.metrics_of(node).await;
            sum += value(
                &m,
                "telemesh_agent_gossip_datagrams_total{direction=\"In\"}",
            );
        }
        sum
    };
    let target = total().await + datagrams;
    eventually("gossip to flow", MESH_WAIT, || async {
        (total().await >= target).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_rotation_drill_drops_no_honest_datagram() {
    let env = SimEnv::start(3).await;
    let nodes = [
        ("sim-node-0", "node_metric 1\n"),
        ("sim-node-1", "node_metric 2\n"),
        ("sim-node-2", "node_metric 3\n"),
    ];
    let reload = "--gossip-key-reload-interval=100ms";
    let mut mesh = Mesh::start_with(&env, &nodes, &[reload], &[reload], 2).await;
    let names: Vec<&str> = nodes.iter().map(|(n, _)| *n).collect();
    let b = key_b();
    let steps: [(&str, Vec<&str>); 3] = [
        ("install B", vec![KEY_A, &b]),
        ("use B", vec![&b, KEY_A]),
        ("remove A", vec![&b]),
    ];
    for (step, keys) in &steps {
        for member in mesh.members() {
            write_keys(mesh.key_file(&member), keys);
            wait_reloaded(&mut mesh, &member, keys).await;
            gossip_flows(&mesh, 30.0).await;
            assert_view_whole(&mesh, &names, &format!("{step} on {member}")).await;
        }
        println!("key rotation step {step:?} done on every member");
    }
    for member in mesh.members() {
        let m = mesh.metrics_of(&member).await;
        for reason in [
            "no_key_opens",
            "bad_version",
            "replayed",
            "stale",
            "too_short",
        ] {
            assert_eq!(dropped(&m, reason), 0.0, "{member} dropped {reason}:\n{m}");
        }
    }
    // The drill has teeth: a member back on key A alone is now a stranger to the others.
    let member = "sim-node-2";
    write_keys(mesh.key_file(member), &[KEY_A]);
    wait_reloaded(&mut mesh, member, &[KEY_A]).await;
    eventually("the coordinator to refuse key A", MESH_WAIT, || async {
        let m = mesh.metrics_of("coordinator-0").await;
        (dropped(&m, "no_key_opens") > 0.0).then_some(())
    })
    .await;
}

/// The metric figures of `node` in a coordinator's view entry: every value measured within
/// the last `recent` by the test's clock, none in the future, none stale.
fn figures_in_cluster_time(entry: &serde_json::Value, recent: Duration) -> bool {
    let Some(metrics) = entry["metrics"].as_object() else {
        return false;
    };
    let now = now_ms();
    let oldest = now - u64::try_from(recent.as_millis()).unwrap();
    !metrics.is_empty()
        && metrics.values().all(|m| {
            let at = m["measuredAtMs"].as_u64().unwrap_or(0);
            m["stale"] == false && at >= oldest && at <= now + 2_000
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn figures_of_agents_with_skewed_clocks_are_neither_stale_nor_from_the_future() {
    let env = SimEnv::start(5).await;
    let nodes = [
        ("sim-node-0", "node_metric 1\n"),
        ("sim-node-1", "node_metric 2\n"),
        ("sim-node-2", "node_metric 3\n"),
    ];
    // The coordinator's own clock is two minutes ahead too: it ages figures in cluster time.
    let mut mesh = Mesh::start_with(&env, &nodes, &[], &["--debug-clock-offset=+2m"], 1).await;
    // Two minutes behind (its figures would look 2 minutes old: stale after 45 s) and two
    // minutes ahead (they would look fresh for two minutes after the agent stopped).
    mesh.add_agent(
        &env,
        "sim-node-3",
        "node_metric 4\n",
        &["--debug-clock-offset=-2m"],
    )
    .await;
    mesh.add_agent(
        &env,
        "sim-node-4",
        "node_metric 5\n",
        &["--debug-clock-offset=+2m"],
    )
    .await;
    // Values are republished every 30 s unchanged, so "recent" is the refresh plus slack.
    let recent = Duration::from_secs(40);
    for node in ["sim-node-3", "sim-node-4"] {
        mesh.wait_node(node, |e| figures_in_cluster_time(e, recent))
            .await;
    }
    for (node, expected) in [("sim-node-3", 120.0), ("sim-node-4", -120.0)] {
        let m = mesh.metrics_of(node).await;
        let correction = value(&m, "telemesh_agent_gossip_clock_correction_seconds");
        println!("{node}: clock correction {correction:+.3} s (expected about {expected:+})");
        assert!((correction - expected).abs() < 5.0, "{node}: {correction}");
    }
    // The coordinator's /metrics copies its correction every second.
    let correction = eventually(
        "the coordinator's correction exported",
        MESH_WAIT,
        || async {
            let m = mesh.metrics_of("coordinator-0").await;
            let c = value(&m, "telemesh_coordinator_gossip_clock_correction_seconds");
            (c != 0.0).then_some(c)
        },
    )
    .await;
    println!("coordinator-0: clock correction {correction:+.3} s (expected about -120)");
    assert!(
        (correction + 120.0).abs() < 5.0,
        "coordinator: {correction}"
    );
    // Agents with good clocks are left alone.
    for node in ["sim-node-0", "sim-node-1", "sim-node-2"] {
        let m = mesh.metrics_of(node).await;
        assert_eq!(
            value(&m, "telemesh_agent_gossip_clock_correction_seconds"),
            0.0,
            "{node}"
        );
    }
}
