//! The official Kubernetes Python client against telemesh-sim: runs `tests/python/sim_client.py`
//! (create, read, list with selectors, patch, watch and delete of pods, deployments, configmaps,
//! events and a custom resource) and `tests/python/read_every_kind.py` (list and read of every
//! kind discovery lists, through the typed API) against an in-process sim.
//!
//! Needs `python3` with `kubernetes==37.0.2`; set `PYTHON` to use another interpreter.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use telemesh_tests::SimEnv;

/// The whole script's time limit (each of its watches is bounded at 20 s).
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(180);

fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

/// Fails the test (never skips it) when the Python client is not installed.
async fn require_python_client() {
    let out = tokio::process::Command::new(python())
        .args(["-c", "import kubernetes; print(kubernetes.__version__)"])
        .output()
        .await
        .unwrap_or_else(|e| panic!("cannot run {}: {e}; install Python 3", python()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "run scripts/test.sh (it installs the Python client) or `pip install kubernetes==37.0.2` \
         ({} cannot import kubernetes: {})",
        python(),
        stderr.trim().lines().last().unwrap_or_default()
    );
}

/// Runs `tests/python/<script>` with the sim's kubeconfig and asserts it printed `done`.
async fn run_script(script: &str, done: &str) {
    require_python_client().await;
    let env = SimEnv::start(2).await;
    // Run as `python3 tests/python/<script> KUBECONFIG` from the workspace root.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let script = Path::new("tests/python").join(script);
    assert!(
        root.join(&script).is_file(),
        "{} is missing",
        root.join(&script).display()
    );
    let child = tokio::process::Command::new(python())
        .current_dir(root)
        .arg(&script)
        .arg(&env.kubeconfig)
        .env_remove("KUBECONFIG")
        .env("HOME", env.dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {} {}: {e}", python(), script.display()));
    let out = tokio::time::timeout(SCRIPT_TIMEOUT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{} did not finish within {SCRIPT_TIMEOUT:?}",
                script.display()
            )
        })
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{} failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        script.display(),
        out.status
    );
    assert!(
        stdout.contains(done),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_python_client_works_against_sim() {
    run_script("sim_client.py", "sim_client: all checks passed").await;
}

/// Every kind sim serves is listed and read through the client's typed API (issue 14: its
/// models refused a StatefulSet whose status lacked `replicas`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_python_client_reads_every_kind() {
    run_script("read_every_kind.py", "read_every_kind: all kinds read").await;
}
