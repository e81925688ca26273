//! The demo program as a ScavengerJob pod runs it: started, stopped with SIGTERM after a
//! checkpoint, started again: it resumes where the checkpoint left it (not from zero), touched
//! the marker, and its result equals an uninterrupted run's.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, SystemTime};

use telemesh_runtime::testing::eventually;
use tokio::process::Command;

const WAIT: Duration = Duration::from_secs(60);

/// Long enough (seconds, unoptimised) that a SIGTERM sent after the first checkpoint lands
/// well before the end.
const ARGS: [&str; 3] = ["--units=400", "--unit-iterations=200000", "--interval=50ms"];

fn demo(state: &Path, marker: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_telemesh-checkpoint-demo"));
    cmd.args(ARGS)
        .arg(format!("--state={}", state.display()))
        .env("TELEMESH_CHECKPOINT_FILE", marker)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

fn done_units(state: &Path) -> Option<u64> {
    let text = std::fs::read(state).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&text).ok()?;
    v["done"].as_u64()
}

#[tokio::test]
async fn a_stopped_run_resumes_from_its_checkpoint_and_gets_the_same_result() {
    let dir = tempfile::tempdir().unwrap();
    let (state, marker) = (dir.path().join("state"), dir.path().join("marker"));

    let whole = demo(&dir.path().join("whole"), &dir.path().join("whole-marker"))
        .output()
        .await
        .unwrap();
    assert!(whole.status.success(), "{whole:?}");
    let expected = String::from_utf8(whole.stdout).unwrap();
    assert!(expected.starts_with("result "), "{expected}");

    let started = SystemTime::now();
    let first = demo(&state, &marker).spawn().unwrap();
    let state_ref = &state;
    let saved = eventually("a first checkpoint", WAIT, || async move {
        done_units(state_ref).filter(|d| *d > 0)
    })
    .await;
    let pid = first.id().unwrap().to_string();
    let kill = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(kill.success());
    let stopped = first.wait_with_output().await.unwrap();
    assert_eq!(stopped.status.code(), Some(143), "{stopped:?}");
    assert!(stopped.stdout.is_empty(), "stopped before the end");
    let kept = done_units(&state).unwrap();
    assert!(kept >= saved && kept < 400, "checkpoint at unit {kept}");
    let touched = std::fs::metadata(&marker).unwrap().modified().unwrap();
    assert!(touched >= started, "the marker was touched by this run");
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        format!("{kept}/400\n")
    );

    let second = demo(&state, &marker).output().await.unwrap();
    assert!(second.status.success(), "{second:?}");
    let said = String::from_utf8(second.stderr).unwrap();
    assert!(
        said.contains(&format!("resuming at unit {kept} of 400")),
        "{said}"
    );
    assert_eq!(String::from_utf8(second.stdout).unwrap(), expected);
}
