//! Real telemesh-agent and telemesh-coordinator processes against a sim: one agent per node,
//! its telemetry scripted through a node-exporter textfile under a private host root, gossip
//! sealed with a test key, and coordinator replicas seeded from the first agent.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::process::Command;

use crate::{Process, SimEnv, eventually, workspace_binary};

/// How long a mesh may take to come up or to show a scripted change.
pub const MESH_WAIT: Duration = Duration::from_secs(60);

const GOSSIP_KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n";

/// Rewrites the node-exporter textfile under `root` atomically (write, then rename), as
/// node-exporter asks textfile writers to.
pub fn script_textfile(root: &Path, metrics: &str) {
    let dir = root.join("textfile");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    let tmp = dir.join(".metrics.prom.tmp");
    std::fs::write(&tmp, metrics).unwrap_or_else(|e| panic!("writing {}: {e}", tmp.display()));
    std::fs::rename(&tmp, dir.join("metrics.prom")).expect("renaming the textfile into place");
}

/// Reads a JSON log line's field (`fields.<key>` in tracing's JSON format) of the line whose
/// message is `message`.
pub fn log_field(line: &str, message: &str, key: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    let fields = &v["fields"];
    (fields["message"] == message).then(|| fields[key].as_str().map(str::to_owned))?
}

/// A running coordinator replica.
#[derive(Debug)]
pub struct Coordinator {
    /// The process.
    pub process: Process,
    /// The extender listener (`http://<extender>/scheduler` is the urlPrefix).
    pub extender: SocketAddr,
    /// The JSON API (`/api/v1/nodes`).
    pub api: SocketAddr,
    /// `/metrics`, `/healthz`, `/readyz`.
    pub http: SocketAddr,
}

impl Coordinator {
    /// This replica's `/metrics` text (empty if it does not answer).
    pub async fn metrics(&self) -> String {
        let url = format!("http://{}/metrics", self.http);
        telemesh_sim::cluster::http::request(http::Method::GET, &url, None)
            .await
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// The extender `urlPrefix` that reaches this replica.
    pub fn url_prefix(&self) -> String {
        format!("http://{}/scheduler", self.extender)
    }
}

/// The agents and coordinators of one test.
#[derive(Debug)]
pub struct Mesh {
    /// Agent processes by node name.
    pub agents: BTreeMap<String, Process>,
    /// Coordinator replicas.
    pub coordinators: Vec<Coordinator>,
    roots: BTreeMap<String, PathBuf>,
}

impl Mesh {
    /// Starts one agent per `(node, textfile)` (the textfile scripted before it starts, and
    /// `agent_args` added to its command line) and `replicas` coordinators; returns once every
    /// coordinator's view shows every node.
    pub async fn start(
        env: &SimEnv,
        nodes: &[(&str, &str)],
        agent_args: &[&str],
        replicas: usize,
    ) -> Self {
        Self::start_with(env, nodes, agent_args, &[], replicas).await
    }

    /// [`Mesh::start`] with `coordinator_args` added to every coordinator's command line.
    pub async fn start_with(
        env: &SimEnv,
        nodes: &[(&str, &str)],
        agent_args: &[&str],
        coordinator_args: &[&str],
        replicas: usize,
    ) -> Self {
        let keys = env.write_file("gossip.keys", GOSSIP_KEY);
        let fixture = crate::upstream::workspace_root().join("agent/tests/fixtures/host-a/proc");
        let mut agents = BTreeMap::new();
        let mut roots = BTreeMap::new();
        let mut seed: Option<String> = None;
        for (node, metrics) in nodes {
            let root = env.dir().join("hosts").join(node);
            telemesh_core::testing::copy_tree(&fixture, &root.join("proc"))
                .expect("copying the /proc fixture");
            script_textfile(&root, metrics);
            let mut cmd = Command::new(workspace_binary("telemesh-agent"));
            cmd.args([
                "--textfile-dir=/textfile",
                "--log-format=json",
                "--gossip-listen=127.0.0.1:0",
                "--http-listen=127.0.0.1:0",
                "--gossip-interval=100ms",
                "--collect-interval=100ms",
                "--policy-interval=300ms",
            ])
            .arg(format!("--node-name={node}"))
            .arg(format!("--host-root={}", root.display()))
            .arg(format!("--gossip-key-file={}", keys.display()))
            .arg(format!("--kubeconfig={}", env.kubeconfig.display()))
            .args(agent_args)
            .env("RUST_LOG", "info");
            if let Some(seed) = &seed {
                cmd.arg(format!("--gossip-seeds={seed}"));
            }
            let mut agent = Process::spawn(&format!("telemesh-agent {node}"), cmd);
            let gossip = agent
                .wait_for_line("the agent's addresses", MESH_WAIT, |l| {
                    log_field(l, "agent listening", "gossip.addr")
                })
                .await;
            seed.get_or_insert(gossip);
            agents.insert((*node).to_owned(), agent);
            roots.insert((*node).to_owned(), root);
        }
        let seed = seed.expect("a mesh has at least one node");
        let mut coordinators = Vec::new();
        for r in 0..replicas {
            let mut cmd = Command::new(workspace_binary("telemesh-coordinator"));
            cmd.args([
                "--log-format=json",
                "--gossip-listen=127.0.0.1:0",
                "--extender-listen=127.0.0.1:0",
                "--api-listen=127.0.0.1:0",
                "--api-auth=none",
                "--http-listen=127.0.0.1:0",
                "--gossip-interval=100ms",
                "--view-tick=50ms",
            ])
            .args(coordinator_args)
            .arg(format!("--replica-name=coordinator-{r}"))
            .arg(format!("--gossip-seeds={seed}"))
            .arg(format!("--gossip-key-file={}", keys.display()))
            .arg(format!("--kubeconfig={}", env.kubeconfig.display()))
            .env("RUST_LOG", "info");
            let mut process = Process::spawn(&format!("telemesh-coordinator {r}"), cmd);
            let addr = |key: &'static str| {
                move |l: &str| {
                    log_field(l, "coordinator listening", key).and_then(|a| a.parse().ok())
                }
            };
            let extender = process
                .wait_for_line("the extender address", MESH_WAIT, addr("extender.addr"))
                .await;
            let api = process
                .wait_for_line("the API address", MESH_WAIT, addr("api.addr"))
                .await;
            let http = process
                .wait_for_line("the metrics address", MESH_WAIT, addr("http.addr"))
                .await;
            coordinators.push(Coordinator {
                process,
                extender,
                api,
                http,
            });
        }
        let mesh = Self {
            agents,
            coordinators,
            roots,
        };
        for (node, _) in nodes {
            mesh.wait_node(node, |_| true).await;
        }
        mesh
    }

    /// Makes every node's pressure stall figures calm (`/proc/pressure/{cpu,memory,io}` at zero).
    /// The /proc fixture the agents start from has CPU pressure at 53 % some avg10, above the
    /// agents' scavenger eviction threshold: tests that run scavengers for longer than
    /// `--scavenger-pressure-for` and are not about pressure call this, or agents evict them.
    pub fn calm_pressure(&self) {
        const CALM: &str = "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        for root in self.roots.values() {
            for resource in ["cpu", "memory", "io"] {
                let path = root.join("proc/pressure").join(resource);
                std::fs::write(&path, CALM)
                    .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
            }
        }
    }

    /// Rewrites `node`'s textfile.
    pub fn script(&self, node: &str, metrics: &str) {
        let root = self
            .roots
            .get(node)
            .unwrap_or_else(|| panic!("{node} has no agent in this mesh"));
        script_textfile(root, metrics);
    }

    /// Waits until every running coordinator's view shows `node` with its JSON (as
    /// `GET /api/v1/nodes` lists it) satisfying `pred`.
    pub async fn wait_node(&self, node: &str, pred: impl Fn(&serde_json::Value) -> bool) {
        let pred = &pred;
        eventually(
            &format!("every coordinator's view to show {node} as expected"),
            MESH_WAIT,
            || async move {
                for c in &self.coordinators {
                    let url = format!("http://{}/api/v1/nodes", c.api);
                    let body = telemesh_sim::cluster::http::request(http::Method::GET, &url, None)
                        .await
                        .ok()?;
                    let view: serde_json::Value = serde_json::from_slice(&body).ok()?;
                    let entry = view["nodes"]
                        .as_array()?
                        .iter()
                        .find(|n| n["name"] == node)?;
                    if entry["liveness"] != "live" || !pred(entry) {
                        return None;
                    }
                }
                Some(())
            },
        )
        .await;
    }

    /// Waits until every coordinator's view shows `node`'s `metric` at `value`.
    pub async fn wait_metric(&self, node: &str, metric: &str, value: f64) {
        self.wait_node(node, |n| {
            n["metrics"][metric]["value"].as_f64() == Some(value)
        })
        .await;
    }

    /// Kills every coordinator replica (the extender then refuses connections).
    pub async fn kill_coordinators(&mut self) {
        for c in &mut self.coordinators {
            c.process.kill().await;
        }
    }
}
