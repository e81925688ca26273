//! Five agents on 127.0.0.1 against sim, gossiping over the sealed UDP path: every agent sees
//! every other's metrics; a killed agent is reported dead; an agent with the wrong key is
//! dropped and counted, and changes nothing.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

use clap::Parser as _;
use http_body_util::{BodyExt as _, Empty};
use telemesh_agent::config::{Cli, Config};
use telemesh_runtime::testing::eventually;
use tokio_util::sync::CancellationToken;

const KEY_A: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
const KEY_B: &str = "HwAeAB0AHAAbABoAGQAYABcAFgAVABQAEwASABEAEAA=";

fn host_root(dir: &Path, load1: &str) {
    std::fs::create_dir_all(dir.join("proc")).unwrap();
    std::fs::write(
        dir.join("proc/loadavg"),
        format!("{load1} 1.00 1.00 1/100 123\n"),
    )
    .unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/host-a/proc/meminfo");
    std::fs::copy(fixture, dir.join("proc/meminfo")).unwrap();
}

fn config(node: &str, root: &Path, key_file: &Path, kubeconfig: &Path, seeds: &[String]) -> Config {
    let mut args = vec![
        "telemesh-agent".to_string(),
        format!("--node-name={node}"),
        format!("--host-root={}", root.display()),
        format!("--gossip-key-file={}", key_file.display()),
        format!("--kubeconfig={}", kubeconfig.display()),
        "--gossip-listen=127.0.0.1:0".into(),
        "--http-listen=127.0.0.1:0".into(),
        "--gossip-interval=100ms".into(),
        "--collect-interval=100ms".into(),
    ];
    if !seeds.is_empty() {
        args.push(format!("--gossip-seeds={}", seeds.join(",")));
    }
    Config::try_from(Cli::try_parse_from(args).unwrap()).unwrap()
}

async fn get(addr: std::net::SocketAddr, path: &str) -> String {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Empty<bytes::Bytes>>();
    let resp = client
        .get(format!("http://{addr}{path}").parse().unwrap())
        .await
        .unwrap();
    String::from_utf8(
        resp.into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec(),
    )
    .unwrap()
}

async fn members(addr: std::net::SocketAddr) -> Vec<serde_json::Value> {
    let state: serde_json::Value = serde_json::from_str(&get(addr, "/debug/state").await).unwrap();
    state["members"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_share_metrics_detect_death_and_drop_strangers() {
    telemesh_runtime::telemetry::init(telemesh_runtime::cli::LogFormat::Text, "warn");
    let sim = telemesh_sim::Sim::start(Default::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig).unwrap();
    let keys = dir.path().join("keys");
    std::fs::write(&keys, format!("{KEY_A}\n")).unwrap();

    let mut agents = Vec::new();
    let mut seeds = Vec::new();
    for i in 0..5 {
        let root = dir.path().join(format!("node-{i}"));
        host_root(&root, &format!("{i}.25"));
        let agent = telemesh_agent::start(
            config(&format!("node-{i}"), &root, &keys, &kubeconfig, &seeds),
            CancellationToken::new(),
        )
        .await
        .unwrap();
        if seeds.is_empty() {
            seeds.push(agent.gossip_addr.to_string());
        }
        agents.push(agent);
    }

    // Every agent sees every agent, each with its own load.
    for a in &agents {
        let http = a.http_addr;
        eventually(
            "every agent sees all five loads",
            Duration::from_secs(20),
            || async move {
                let ms = members(http).await;
                let mut loads: Vec<f64> = ms
                    .iter()
                    .filter(|m| m["liveness"] == "Live")
                    .filter_map(|m| m["metrics"]["node_load1"]["value"].as_f64())
                    .collect();
                loads.sort_by(f64::total_cmp);
                (loads == [0.25, 1.25, 2.25, 3.25, 4.25]).then_some(())
            },
        )
        .await;
        assert_eq!(get(http, "/readyz").await, "ready");
    }

    // A killed agent (no goodbye) is reported dead by the others.
    let killed = agents.pop().unwrap();
    killed.kill().await;
    for a in &agents {
        let http = a.http_addr;
        eventually(
            "node-4 reported dead",
            Duration::from_secs(30),
            || async move {
                let ms = members(http).await;
                ms.iter()
                    .any(|m| m["node"] == "node-4" && m["liveness"] == "Dead")
                    .then_some(())
            },
        )
        .await;
    }

    // A stranger with another key: its datagrams are dropped and counted, and it never shows.
    let wrong = dir.path().join("wrong-keys");
    std::fs::write(&wrong, format!("{KEY_B}\n")).unwrap();
    let root = dir.path().join("stranger");
    host_root(&root, "9.99");
    let stranger = telemesh_agent::start(
        config("stranger", &root, &wrong, &kubeconfig, &seeds),
        CancellationToken::new(),
    )
    .await
    .unwrap();
    let seed_http = agents[0].http_addr;
    eventually(
        "the stranger's packets are dropped and counted",
        Duration::from_secs(20),
        || async move {
            let text = get(seed_http, "/metrics").await;
            let dropped: f64 = text
                .lines()
                .filter(|l| l.starts_with("telemesh_agent_gossip_dropped_packets_total"))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum();
            (dropped > 0.0).then_some(())
        },
    )
    .await;
    // Traffic is counted both ways on the wire.
    let text = get(seed_http, "/metrics").await;
    for direction in ["In", "Out"] {
        let series = format!("telemesh_agent_gossip_bytes_total{{direction=\"{direction}\"}} ");
        let bytes: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix(series.as_str())?.parse().ok())
            .unwrap_or(0.0);
        assert!(bytes > 0.0, "{series}missing or zero in\n{text}");
    }
    for a in &agents {
        let ms = members(a.http_addr).await;
        assert!(
            ms.iter().all(|m| m["node"] != "stranger"),
            "the stranger never joins"
        );
        assert!(
            ms.iter()
                .all(|m| m["metrics"]["node_load1"]["value"] != 9.99),
            "nor do its values"
        );
        let live = ms.iter().filter(|m| m["liveness"] == "Live").count();
        assert_eq!(live, 4, "the four live agents are unchanged");
    }
    stranger.shutdown().await;
    for a in agents {
        a.shutdown().await;
    }
}
