//! The real upstream programs the end-to-end tests run against sim (kube-scheduler v1.32.5,
//! descheduler v0.32.2; ../shared/tools/README.md says how they were built): where they are,
//! and kube-scheduler started with a shipped configuration.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use telemesh_sim::cluster::scheduler::upstream::{self, Render};
use tokio::process::Command;

use crate::{Process, SimEnv};

/// An upstream program: its file name under ../shared/tools/ and the variable that overrides it.
#[derive(Debug, Clone, Copy)]
pub struct Upstream {
    /// File name, e.g. `kube-scheduler`.
    pub name: &'static str,
    /// Environment variable naming the binary, e.g. `TELEMESH_KUBE_SCHEDULER`.
    pub env: &'static str,
}

/// kube-scheduler v1.32.5.
pub const KUBE_SCHEDULER: Upstream = Upstream {
    name: "kube-scheduler",
    env: "TELEMESH_KUBE_SCHEDULER",
};

/// descheduler v0.32.2.
pub const DESCHEDULER: Upstream = Upstream {
    name: "descheduler",
    env: "TELEMESH_DESCHEDULER",
};

/// The workspace root (the directory holding deploy/ and the root Cargo.toml).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives in the workspace")
        .to_owned()
}

impl Upstream {
    /// The binary: `$<env>`, else `../shared/tools/<name>` relative to the workspace root.
    /// `None` when there is no such file, after saying on stderr (past the test harness's
    /// capture, so it shows in a passing run) that `test` was skipped and why.
    pub fn find(&self, test: &str) -> Option<PathBuf> {
        let path = std::env::var_os(self.env).map_or_else(
            || workspace_root().join("../shared/tools").join(self.name),
            PathBuf::from,
        );
        if path.is_file() {
            return Some(path);
        }
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED {test}: {} not found at {} (set {} to the binary)",
            self.name,
            path.display(),
            self.env
        );
        None
    }
}

/// A running kube-scheduler, its output kept for the test (shown when a wait fails).
#[derive(Debug)]
pub struct KubeScheduler {
    /// The process.
    pub process: Process,
    /// The rendered configuration it runs with.
    pub config: PathBuf,
}

impl KubeScheduler {
    /// Starts `binary` with deploy/scheduler/kube-scheduler-config.dev.yaml rendered for `env`
    /// (its kubeconfig; leader election off) with the first extender at `url_prefix` and its
    /// `nodeCacheCapable` as given; health and metrics are not served (`--secure-port=0`).
    pub fn start(binary: &Path, env: &SimEnv, url_prefix: &str, node_cache_capable: bool) -> Self {
        Self::start_with(binary, env, url_prefix, node_cache_capable, false)
    }

    /// [`KubeScheduler::start`], with TAS's opt-in when `opted_in` (the chart's
    /// `scheduler.pods: optedIn`: only pods requesting or limiting `telemetry/scheduling` reach
    /// the extender).
    pub fn start_with(
        binary: &Path,
        env: &SimEnv,
        url_prefix: &str,
        node_cache_capable: bool,
        opted_in: bool,
    ) -> Self {
        let rendered = dev_scheduler_config(
            &env.kubeconfig,
            url_prefix,
            Some(node_cache_capable),
            opted_in,
        );
        let config = env.write_file("kube-scheduler.yaml", &rendered);
        let mut cmd = Command::new(binary);
        cmd.args(upstream::args(
            &config,
            &env.dir().join("kube-scheduler-certs"),
            0,
        ));
        Self {
            process: Process::spawn("kube-scheduler", cmd),
            config,
        }
    }
}

/// deploy/scheduler/kube-scheduler-config.dev.yaml rendered for one scheduler: `kubeconfig`,
/// leader election off, the first extender at `url_prefix` with `nodeCacheCapable` as given
/// (None: as shipped) and TAS's opt-in when `opted_in`.
pub fn dev_scheduler_config(
    kubeconfig: &Path,
    url_prefix: &str,
    node_cache_capable: Option<bool>,
    opted_in: bool,
) -> String {
    let shipped = workspace_root().join("deploy/scheduler/kube-scheduler-config.dev.yaml");
    let template = std::fs::read_to_string(&shipped)
        .unwrap_or_else(|e| panic!("reading {}: {e}", shipped.display()));
    Render {
        kubeconfig: kubeconfig.to_owned(),
        url_prefix: Some(url_prefix.to_owned()),
        node_cache_capable,
        opted_in,
    }
    .apply(&template)
    .expect("rendering the dev scheduler configuration")
}
