//! `telemesh-sim dev --control-plane real` end to end: the dev cluster on the upstream control
//! plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler), Telemesh installed from
//! deploy/manifests/telemesh.yaml, each agent and coordinator process authenticated as its own
//! service account. Headless, it must tell the whole health story and exit 0, leaving nothing
//! running. Skipped (passing, with a `SKIPPED` line) where no control-plane binaries are found.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

/// deploy/scheduler's dev registration with the extender on a free port, so the test may run
/// next to a developer's own dev cluster.
fn scheduler_config(dir: &Path) -> std::path::PathBuf {
    const SHIPPED: &str = include_str!("../../deploy/scheduler/kube-scheduler-config.dev.yaml");
    const SHIPPED_URL: &str = "http://127.0.0.1:9001/scheduler";
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    assert!(SHIPPED.contains(SHIPPED_URL), "{SHIPPED}");
    let path = dir.join("scheduler.yaml");
    std::fs::write(
        &path,
        SHIPPED.replace(SHIPPED_URL, &format!("http://127.0.0.1:{port}/scheduler")),
    )
    .unwrap();
    path
}

/// Pids of processes whose command line mentions `dir` (every process a dev cluster starts,
/// the control plane's included, gets paths under its state directory).
fn processes_under(dir: &Path) -> Vec<u32> {
    let needle = dir.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&needle))
        })
        .collect()
}

#[tokio::test]
async fn headless_dev_cluster_on_a_real_control_plane_tells_the_whole_story() {
    const TEST: &str = "headless_dev_cluster_on_a_real_control_plane_tells_the_whole_story";
    let Some(binaries) = telemesh_sim::control_plane::binaries::for_test(TEST) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_telemesh-sim"))
        // Port 0: the control plane takes a random 127.a.b.c of its own, beside any other.
        .args(["dev", "--control-plane", "real", "--listen", "127.0.0.1:0"])
        .args([
            "--api-service",
            "127.0.0.1:0",
            "--nodes",
            "3",
            "--for",
            "150s",
        ])
        .arg("--dir")
        .arg(dir.path().join("state"))
        .arg("--scheduler-config")
        .arg(scheduler_config(dir.path()))
        .env(telemesh_sim::control_plane::binaries::ENV, binaries)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("starting telemesh-sim dev --control-plane real");
    let out = tokio::time::timeout(Duration::from_secs(200), child.wait_with_output())
        .await
        .expect("telemesh-sim dev --for 150s overran its own deadline")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "dev failed:\n{stdout}");
    assert!(
        stdout.contains("installed Telemesh from deploy/manifests/telemesh.yaml"),
        "{stdout}"
    );
    for step in [
        "both coordinators see every node",
        "the demo Deployment's pods are placed and Running",
        "labels its node scheduling-policy=violating",
        "the demo pods on sim-node-1 are evicted by its agent",
        "sim-node-1 filtered out by the extender",
        "the label goes away once the telemetry recovers",
    ] {
        assert!(
            stdout
                .lines()
                .any(|l| l.trim_start().starts_with("ok") && l.contains(step)),
            "step {step:?} not observed:\n{stdout}"
        );
    }
    assert!(!stdout.contains("MISSING"), "{stdout}");
    assert_eq!(
        processes_under(dir.path()),
        Vec::<u32>::new(),
        "left running"
    );
}
