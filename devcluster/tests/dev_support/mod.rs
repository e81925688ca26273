//! What the `telemesh-sim dev` tests share: the binary started headless or interactive on free
//! addresses, the processes it left, and the health story's checklist.

use std::path::Path;
use std::process::Stdio;

use tokio::process::{Child, Command};

/// deploy/scheduler's dev registration with the extender on a free port, so tests may run next
/// to a developer's own dev cluster (and `dev` puts the API Service on a free port too).
pub fn scheduler_config(dir: &Path) -> std::path::PathBuf {
    const SHIPPED: &str = include_str!("../../../deploy/scheduler/kube-scheduler-config.dev.yaml");
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

pub fn dev(dir: &Path, extra: &[&str]) -> Child {
    let config = scheduler_config(dir);
    Command::new(env!("CARGO_BIN_EXE_telemesh-sim"))
        .args([
            "dev",
            "--listen",
            "127.0.0.1:0",
            "--api-service",
            "127.0.0.1:0",
        ])
        .arg("--dir")
        .arg(dir.join("state"))
        .arg("--scheduler-config")
        .arg(config)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("starting telemesh-sim dev")
}

/// Pids of processes whose command line mentions `dir` (every process a dev cluster starts gets
/// paths under its state directory).
pub fn processes_under(dir: &Path) -> Vec<u32> {
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

/// Asserts that `stdout` reports every step of the health story observed (`ok`) and none missing.
fn assert_health_story_told(stdout: &str) {
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
}

/// Runs the dev cluster headless (`--nodes 3 --for 150s` and `extra`) and asserts that it told
/// the whole health story, exited 0 and left nothing running; returns what it printed.
pub async fn tell_health_story(dir: &Path, extra: &[&str]) -> String {
    let args: Vec<&str> = ["--nodes", "3", "--for", "150s"]
        .into_iter()
        .chain(extra.iter().copied())
        .collect();
    let child = dev(dir, &args);
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(200),
        child.wait_with_output(),
    )
    .await
    .expect("telemesh-sim dev --for 150s overran its own deadline")
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "dev failed:\n{stdout}");
    assert_health_story_told(&stdout);
    assert_eq!(processes_under(dir), Vec::<u32>::new(), "left running");
    stdout
}
