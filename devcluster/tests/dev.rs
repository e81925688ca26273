//! `telemesh-sim dev` end to end: the real binary starting real agent and coordinator processes
//! (built beside it; scripts/test.sh builds every binary first). Headless, it must tell the whole
//! story and exit 0; interrupted, it must stop every process it started.
#![allow(clippy::unwrap_used)]

mod dev_support;

use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::Command;

use dev_support::{dev, processes_under, tell_health_story};

#[tokio::test]
async fn headless_dev_cluster_tells_the_whole_story_and_leaves_nothing_running() {
    let dir = tempfile::tempdir().unwrap();
    let stdout = tell_health_story(dir.path(), &[]).await;
    assert!(stdout.contains("the extender filtered out sim-node-1: policy health-metric-demo/scheduling-policy dontschedule"), "{stdout}");
}

#[tokio::test]
async fn interrupting_the_dev_cluster_stops_every_process_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = dev(dir.path(), &["--nodes", "3"]);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut api_service = None;
    let up = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some((_, rest)) = line.split_once("the coordinators' JSON API Service: http://")
            {
                api_service = rest.split_whitespace().next().map(str::to_owned);
            }
            if line.contains("both coordinators see every node") {
                return true;
            }
        }
        false
    })
    .await
    .expect("the dev cluster did not come up within 60s");
    assert!(up, "dev exited before the cluster was up");
    // The printed address is the one a person would curl: it answers for the coordinators.
    let api_service = api_service.expect("dev prints the coordinators' JSON API address");
    let body = telemesh_sim::cluster::http::request(
        http::Method::GET,
        &format!("http://{api_service}/api/v1/nodes"),
        None,
    )
    .await
    .expect("the printed JSON API address answers");
    let view: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(view["nodes"].as_array().map(Vec::len), Some(3), "{view}");
    // The dev process, 3 agents and 2 coordinators.
    assert_eq!(processes_under(dir.path()).len(), 6);
    let pid = child.id().unwrap().to_string();
    let kill = Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .await
        .unwrap();
    assert!(kill.success());
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("dev did not stop within 30s of Ctrl-C")
        .unwrap();
    assert!(status.success(), "{status}");
    assert_eq!(
        processes_under(dir.path()),
        Vec::<u32>::new(),
        "left running"
    );
}

/// Plays a rewards story on 4 nodes and checks that it ends with its figures line (the line
/// starting `figures`) saying every target was met, and that nothing is left running.
async fn rewards_story_meets_its_targets(story: &str, figures: &str) {
    let dir = tempfile::tempdir().unwrap();
    let child = dev(
        dir.path(),
        &["--nodes", "4", "--story", story, "--for", "420s"],
    );
    let out = tokio::time::timeout(Duration::from_secs(480), child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("telemesh-sim dev --story {story} overran its own deadline"))
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{story} story failed:\n{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with(figures))
        .unwrap_or_else(|| panic!("no figures line:\n{stdout}"));
    assert!(line.ends_with("targets met"), "{line}");
    assert_eq!(
        processes_under(dir.path()),
        Vec::<u32>::new(),
        "left running"
    );
}

#[tokio::test]
async fn the_rewards_story_learns_to_avoid_failing_nodes_and_forgives_them() {
    rewards_story_meets_its_targets("rewards", "rewards: ").await;
}

#[tokio::test]
async fn the_rewards_story_with_start_failures_learns_to_avoid_nodes_that_cannot_start_a_type() {
    rewards_story_meets_its_targets("rewards-start", "rewards (start failures): ").await;
}

#[tokio::test]
async fn the_actions_story_plays_every_seed_call_and_each_does_what_it_says() {
    let dir = tempfile::tempdir().unwrap();
    let child = dev(dir.path(), &["--story", "actions", "--for", "300s"]);
    let out = tokio::time::timeout(Duration::from_secs(360), child.wait_with_output())
        .await
        .expect("telemesh-sim dev --story actions overran its own deadline")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "actions story failed:\n{stdout}");
    // Every method of the seed's README was sent and checked (the story's own checks: pods on
    // the named nodes, exactly the named pod gone, replica counts, never fewer Ready pods).
    for method in [
        "Create",
        "Delete",
        "Move",
        "Swap",
        "Bind",
        "Redeploy",
        "UpdateResources",
        "Scale",
    ] {
        let call = format!("action.{method}:");
        assert!(
            stdout
                .lines()
                .any(|l| l.trim_start().starts_with("ok") && l.contains(&call)),
            "{call} not played or not ok:\n{stdout}"
        );
    }
    let tally = stdout
        .lines()
        .find(|l| l.starts_with("actions: ") && l.contains(" of "))
        .unwrap_or_else(|| panic!("no tally:\n{stdout}"));
    let (done, all) = tally
        .trim_start_matches("actions: ")
        .split_once(" of ")
        .unwrap();
    assert_eq!(
        done,
        all.split_whitespace().next().unwrap(),
        "{tally}\n{stdout}"
    );
    assert_eq!(
        processes_under(dir.path()),
        Vec::<u32>::new(),
        "left running"
    );
}
