//! Real telemesh-agent and telemesh-coordinator processes against a sim or a real control plane
//! ([`MeshEnv`]): one agent per node,
//! its telemetry scripted through a node-exporter textfile under a private host root, gossip
//! sealed with a test key, and coordinator replicas seeded from the first agent. On a
//! [`Fabric`], every member's gossip goes through its port there, so a test can partition the
//! members or lose datagrams.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::process::Command;

use crate::fabric::Fabric;
use crate::images::AgentImage;
use crate::{Process, SimEnv, eventually, workspace_binary};

/// What a mesh needs of the cluster it runs against: the kubeconfig its processes use and a
/// private directory for their host roots and key files. [`SimEnv`] and
/// [`RealEnv`](crate::real::RealEnv) both give it.
pub trait MeshEnv {
    /// The kubeconfig the agents and coordinators use.
    fn kubeconfig(&self) -> &Path;
    /// The private directory (host roots under `hosts/<node>`, key files).
    fn dir(&self) -> &Path;
    /// Writes `contents` to `name` in [`MeshEnv::dir`] and returns its path.
    fn write_file(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.dir().join(name);
        std::fs::write(&path, contents)
            .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        path
    }
}

impl MeshEnv for SimEnv {
    fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }
    fn dir(&self) -> &Path {
        SimEnv::dir(self)
    }
}

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

/// `defaults` then `args`, leaving out each default whose flag (`--name` before any `=`) one of
/// `args` sets again: the binaries refuse a flag given twice, and a test's own value wins.
pub fn merge_args(defaults: &[&str], args: &[String]) -> Vec<String> {
    let flag = |a: &str| a.split('=').next().unwrap_or(a).to_owned();
    let overridden: Vec<String> = args.iter().map(|a| flag(a)).collect();
    defaults
        .iter()
        .filter(|d| !overridden.contains(&flag(d)))
        .map(|d| (*d).to_owned())
        .chain(args.iter().cloned())
        .collect()
}

/// Reads `series` (the full name with its labels, as exposed) from a `/metrics` text; absent
/// counts as 0.
pub fn metric_value(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix(series)?
                .strip_prefix(' ')?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0.0)
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
    /// Its gossip socket.
    pub gossip: SocketAddr,
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
    /// Each agent's `/metrics`, `/healthz` address by node name.
    pub agent_http: BTreeMap<String, SocketAddr>,
    /// Each agent's gossip socket by node name.
    pub agent_gossip: BTreeMap<String, SocketAddr>,
    /// Coordinator replicas.
    pub coordinators: Vec<Coordinator>,
    roots: BTreeMap<String, PathBuf>,
    /// Each process's own gossip key file (as each pod mounts its Secret), by node name or
    /// `coordinator-<r>`: all start with the same key.
    key_files: BTreeMap<String, PathBuf>,
    seed: String,
    agent_args: Vec<String>,
    /// Each agent's own extra arguments, to restart it as it was.
    extra_args: BTreeMap<String, Vec<String>>,
    /// Where every member's gossip goes through, when the test controls the network.
    pub fabric: Option<Fabric>,
    /// The image the agents run in, when not the workspace's binary.
    agent_image: Option<AgentImage>,
}

/// A started agent: its process, gossip (advertised) and HTTP addresses.
struct Started {
    process: Process,
    gossip: String,
    http: SocketAddr,
}

/// The flags every agent of a mesh starts with (a test's own arguments override them).
const AGENT_DEFAULTS: [&str; 7] = [
    "--textfile-dir=/textfile",
    "--log-format=json",
    "--gossip-listen=127.0.0.1:0",
    "--http-listen=127.0.0.1:0",
    "--gossip-interval=100ms",
    "--collect-interval=100ms",
    "--policy-interval=300ms",
];

/// The flags every coordinator of a mesh starts with (a test's own arguments override them).
const COORDINATOR_DEFAULTS: [&str; 8] = [
    "--log-format=json",
    "--gossip-listen=127.0.0.1:0",
    "--extender-listen=127.0.0.1:0",
    "--api-listen=127.0.0.1:0",
    "--api-auth=none",
    "--http-listen=127.0.0.1:0",
    "--gossip-interval=100ms",
    "--view-tick=50ms",
];

impl Mesh {
    /// Starts one agent per `(node, textfile)` (the textfile scripted before it starts, and
    /// `agent_args` added to its command line) and `replicas` coordinators; returns once every
    /// coordinator's view shows every node.
    pub async fn start(
        env: &impl MeshEnv,
        nodes: &[(&str, &str)],
        agent_args: &[&str],
        replicas: usize,
    ) -> Self {
        Self::start_with(env, nodes, agent_args, &[], replicas).await
    }

    /// [`Mesh::start`] with `coordinator_args` added to every coordinator's command line.
    pub async fn start_with(
        env: &impl MeshEnv,
        nodes: &[(&str, &str)],
        agent_args: &[&str],
        coordinator_args: &[&str],
        replicas: usize,
    ) -> Self {
        Self::start_on(None, env, nodes, agent_args, coordinator_args, replicas).await
    }

    /// [`Mesh::start_with`], every member's gossip through its port on `fabric` when given.
    pub async fn start_on(
        fabric: Option<Fabric>,
        env: &impl MeshEnv,
        nodes: &[(&str, &str)],
        agent_args: &[&str],
        coordinator_args: &[&str],
        replicas: usize,
    ) -> Self {
        Self::launch(
            fabric,
            None,
            env,
            nodes,
            agent_args,
            coordinator_args,
            replicas,
        )
        .await
    }

    /// [`Mesh::start`] with each agent run from `image` (the workspace's coordinators). The
    /// agents run as their image's non-root user: `env`'s directory is opened to it (its host
    /// roots, key files and kubeconfig readable, as a pod's mounted volumes are).
    pub async fn start_in_image(
        image: AgentImage,
        env: &impl MeshEnv,
        nodes: &[(&str, &str)],
        agent_args: &[&str],
        replicas: usize,
    ) -> Self {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(env.dir(), std::fs::Permissions::from_mode(0o755))
            .expect("opening the mesh's directory to the image's user");
        Self::launch(None, Some(image), env, nodes, agent_args, &[], replicas).await
    }

    async fn launch(
        fabric: Option<Fabric>,
        agent_image: Option<AgentImage>,
        env: &impl MeshEnv,
        nodes: &[(&str, &str)],
        agent_args: &[&str],
        coordinator_args: &[&str],
        replicas: usize,
    ) -> Self {
        let mut mesh = Self {
            agents: BTreeMap::new(),
            agent_http: BTreeMap::new(),
            agent_gossip: BTreeMap::new(),
            coordinators: Vec::new(),
            roots: BTreeMap::new(),
            key_files: BTreeMap::new(),
            seed: String::new(),
            agent_args: agent_args.iter().map(|a| (*a).to_owned()).collect(),
            extra_args: BTreeMap::new(),
            fabric,
            agent_image,
        };
        for (node, metrics) in nodes {
            mesh.add_agent(env, node, metrics, &[]).await;
        }
        let seed = mesh.seed.clone();
        for r in 0..replicas {
            let name = format!("coordinator-{r}");
            let keys = mesh.write_key_file(env, &name);
            let mut args: Vec<String> = coordinator_args.iter().map(|a| (*a).to_owned()).collect();
            if let Some(fabric) = &mesh.fabric {
                args.push(format!("--gossip-advertise={}", fabric.port(&name).await));
            }
            let mut cmd = Command::new(workspace_binary("telemesh-coordinator"));
            cmd.args(merge_args(&COORDINATOR_DEFAULTS, &args))
                .arg(format!("--replica-name={name}"))
                .arg(format!("--gossip-seeds={seed}"))
                .arg(format!("--gossip-key-file={}", keys.display()))
                .arg(format!("--kubeconfig={}", env.kubeconfig().display()))
                .env("RUST_LOG", coordinator_log_filter());
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
            let gossip = process
                .wait_for_line("the gossip address", MESH_WAIT, addr("gossip.addr"))
                .await;
            if let Some(fabric) = &mesh.fabric {
                let listen = process
                    .wait_for_line("the gossip socket", MESH_WAIT, addr("gossip.listen"))
                    .await;
                fabric.attach(&name, listen);
            }
            mesh.coordinators.push(Coordinator {
                process,
                extender,
                api,
                http,
                gossip,
            });
        }
        for (node, _) in nodes {
            mesh.wait_node(node, |_| true).await;
        }
        mesh
    }

    /// Starts one more agent for `node` (its textfile scripted with `metrics` first), with the
    /// mesh's agent arguments and `extra_args`, seeded from the first agent (or the seed itself
    /// when it is the first) unless `extra_args` name its seeds (`--gossip-seeds=...`). Returns once it listens; coordinators see it later
    /// ([`Mesh::wait_node`]).
    pub async fn add_agent(
        &mut self,
        env: &impl MeshEnv,
        node: &str,
        metrics: &str,
        extra_args: &[&str],
    ) {
        self.write_key_file(env, node);
        let root = env.dir().join("hosts").join(node);
        let fixture = crate::upstream::workspace_root().join("agent/tests/fixtures/host-a/proc");
        telemesh_core::testing::copy_tree(&fixture, &root.join("proc"))
            .expect("copying the /proc fixture");
        script_textfile(&root, metrics);
        self.roots.insert(node.to_owned(), root);
        self.extra_args.insert(
            node.to_owned(),
            extra_args.iter().map(|a| (*a).to_owned()).collect(),
        );
        self.spawn_agent(env, node).await;
    }

    /// Starts `node`'s agent process (its host root, key file and arguments already set up);
    /// returns once it listens.
    async fn spawn_agent(&mut self, env: &impl MeshEnv, node: &str) {
        let mut args = self.agent_args.clone();
        args.extend(self.extra_args[node].iter().cloned());
        if let Some(fabric) = &self.fabric {
            args.push(format!("--gossip-advertise={}", fabric.port(node).await));
        }
        let mut cmd = match &self.agent_image {
            None => Command::new(workspace_binary("telemesh-agent")),
            Some(image) => {
                image
                    .container
                    .command(&[env.dir()], &[("RUST_LOG", "info")], &image.program)
            }
        };
        cmd.args(merge_args(&AGENT_DEFAULTS, &args))
            .arg(format!("--node-name={node}"))
            .arg(format!("--host-root={}", self.roots[node].display()))
            .arg(format!(
                "--gossip-key-file={}",
                self.key_file(node).display()
            ))
            .arg(format!("--kubeconfig={}", env.kubeconfig().display()))
            .env("RUST_LOG", "info");
        let own_seeds = args.iter().any(|a| a.starts_with("--gossip-seeds"));
        if !self.seed.is_empty() && !own_seeds {
            cmd.arg(format!("--gossip-seeds={}", self.seed));
        }
        let name = format!("telemesh-agent {node}");
        let mut process = match self.agent_image {
            None => Process::spawn(&name, cmd),
            Some(_) => Process::spawn_group(&name, cmd),
        };
        let (gossip, http, listen) = process
            .wait_for_line("the agent's addresses", MESH_WAIT, |l| {
                let gossip = log_field(l, "agent listening", "gossip.addr")?;
                let http = log_field(l, "agent listening", "http.addr")?.parse().ok()?;
                let listen: SocketAddr = log_field(l, "agent listening", "gossip.listen")?
                    .parse()
                    .ok()?;
                Some((gossip, http, listen))
            })
            .await;
        if let Some(fabric) = &self.fabric {
            fabric.attach(node, listen);
        }
        let started = Started {
            process,
            gossip,
            http,
        };
        if self.seed.is_empty() {
            self.seed = started.gossip.clone();
        }
        self.agents.insert(node.to_owned(), started.process);
        self.agent_http.insert(node.to_owned(), started.http);
        if let Ok(gossip) = started.gossip.parse() {
            self.agent_gossip.insert(node.to_owned(), gossip);
        }
    }

    /// Kills `node`'s agent with SIGKILL, as a crash or an OOM kill would: it leaves nothing
    /// behind cleanly (no gossip leave, no Lease or label clean-up).
    pub async fn kill_agent(&mut self, node: &str) {
        self.agents
            .get_mut(node)
            .unwrap_or_else(|| panic!("{node} has no agent in this mesh"))
            .kill()
            .await;
    }

    /// Starts `node`'s agent again, as its DaemonSet would after a crash: same host root,
    /// telemetry, key file and arguments, a new process (a new gossip generation). Returns
    /// once it listens.
    pub async fn restart_agent(&mut self, env: &impl MeshEnv, node: &str) {
        assert!(
            !self.agents.get_mut(node).is_some_and(Process::is_running),
            "{node}'s agent is still running; kill it first"
        );
        self.spawn_agent(env, node).await;
    }

    fn write_key_file(&mut self, env: &impl MeshEnv, name: &str) -> PathBuf {
        let path = env.write_file(&format!("gossip-{name}.keys"), GOSSIP_KEY);
        self.key_files.insert(name.to_owned(), path.clone());
        path
    }

    /// The gossip key file of `name` (a node name, or `coordinator-<r>`), which that process
    /// reloads when it changes.
    pub fn key_file(&self, name: &str) -> &Path {
        self.key_files
            .get(name)
            .unwrap_or_else(|| panic!("{name} is not in this mesh"))
    }

    /// The names of every process with a key file: agents, then coordinators.
    pub fn members(&self) -> Vec<String> {
        let mut names: Vec<String> = self.agents.keys().cloned().collect();
        names.extend((0..self.coordinators.len()).map(|r| format!("coordinator-{r}")));
        names
    }

    /// `name`'s `/metrics` text (an agent's node name or `coordinator-<r>`; empty if it does
    /// not answer).
    pub async fn metrics_of(&self, name: &str) -> String {
        let addr = match name.strip_prefix("coordinator-") {
            Some(r) => {
                let r: usize = r.parse().expect("coordinator-<number>");
                self.coordinators[r].http
            }
            None => self.agent_http[name],
        };
        let url = format!("http://{addr}/metrics");
        telemesh_sim::cluster::http::request(http::Method::GET, &url, None)
            .await
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
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

/// The coordinators' `RUST_LOG`: `TELEMESH_TEST_COORDINATOR_LOG` when set (e.g.
/// `info,telemesh_coordinator::extender=debug` to trace preempt decisions), else `info`.
fn coordinator_log_filter() -> String {
    std::env::var("TELEMESH_TEST_COORDINATOR_LOG").unwrap_or_else(|_| "info".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tests_own_flags_replace_the_defaults() {
        let args = vec![
            "--gossip-interval=1s".to_owned(),
            "--node-name=x".to_owned(),
        ];
        assert_eq!(
            merge_args(&["--log-format=json", "--gossip-interval=100ms"], &args),
            ["--log-format=json", "--gossip-interval=1s", "--node-name=x"]
        );
    }
}
