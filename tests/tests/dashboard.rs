//! The Grafana dashboard (deploy/grafana/telemesh.json) and the process metrics, against the
//! real binaries: sim with its kubelets, controllers and scheduler stand-in (calling the
//! coordinator's extender), an agent per node and a coordinator.
//!
//! - Every query of the dashboard parses (GreptimeDB's PromQL parser) and names only metrics
//!   the running binaries export, with the type it uses them as and the labels it filters,
//!   groups and matches by: the source of truth is their `/metrics`, scraped once the cluster
//!   has done everything the dashboard shows (policy filtering, a violation with its label
//!   and eviction, rewards, a workload action, a ScavengerJob evicted under node pressure).
//! - The real Prometheus (Debian's 2.42; scripts/test.sh installs it) scrapes the same
//!   cluster, and every query evaluated through its HTTP API returns data. Skipped, saying so,
//!   when no `prometheus` binary is found (`$TELEMESH_PROMETHEUS`, else `prometheus` on PATH).
//! - The metric reference (docs/metrics.md) lists exactly the metrics each binary exports, with
//!   their types and labels, checked against the same kind of cluster after the same scenario.
//! - Each binary's process metrics are true of its process (RSS against /proc/<pid>/statm, CPU
//!   time non-decreasing, open fds, start time) and its build-info gauge names it.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use telemesh_core::scavenge::crd::{CRD_YAML, PRIORITY_CLASS_YAML, ScavengerJob};
use telemesh_tests::cluster::{
    APP_LABEL, ClusterParts, POLICY_NAMESPACE, install_example_policy, live_pods,
};
use telemesh_tests::dashboard::{self, Exposition, Query};
use telemesh_tests::mesh::{Mesh, MeshEnv, log_field};
use telemesh_tests::metrics_reference;
use telemesh_tests::real::RealEnv;
use telemesh_tests::{Process, SimEnv, eventually};
use tokio::process::Command;

const NODES: [&str; 3] = ["sim-node-0", "sim-node-1", "sim-node-2"];
/// Bounds a broken run; not a timing goal.
const WAIT: Duration = Duration::from_secs(120);
/// What Grafana's `$__rate_interval` becomes here: long enough to span the whole scenario, so
/// each rate sees the activity the test drove.
const RATE_INTERVAL: &str = "10m";
const SCAVENGER_NS: &str = "batch";

fn repo() -> PathBuf {
    telemesh_tests::upstream::workspace_root()
}

fn dashboard_queries() -> Vec<Query> {
    let text = std::fs::read_to_string(repo().join(dashboard::DASHBOARD)).unwrap();
    let json: Value = serde_json::from_str(&text).unwrap();
    let queries = dashboard::queries(&json);
    assert!(queries.len() > 20, "the dashboard has its queries");
    queries
}

async fn get(url: &str) -> Option<String> {
    telemesh_sim::cluster::http::request(http::Method::GET, url, None)
        .await
        .ok()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// Each agent's `/metrics` address, from its "agent listening" log line.
async fn agent_http(mesh: &mut Mesh) -> BTreeMap<String, SocketAddr> {
    let mut out = BTreeMap::new();
    for (node, agent) in &mut mesh.agents {
        let addr = agent
            .wait_for_line("the agent's HTTP address", WAIT, |l| {
                log_field(l, "agent listening", "http.addr").and_then(|a| a.parse().ok())
            })
            .await;
        out.insert(node.clone(), addr);
    }
    out
}

/// The `/metrics` address and process of every binary of the mesh.
async fn targets(mesh: &mut Mesh) -> Vec<(String, SocketAddr, Option<u32>)> {
    let http = agent_http(mesh).await;
    let mut out: Vec<_> = mesh
        .agents
        .iter()
        .map(|(node, p)| (format!("telemesh-agent {node}"), http[node], p.id()))
        .collect();
    for (i, c) in mesh.coordinators.iter().enumerate() {
        out.push((format!("telemesh-coordinator {i}"), c.http, c.process.id()));
    }
    out
}

/// What runs under the binaries: sim with its kubelets, controllers and scheduler stand-in, or
/// the real control plane (kube-controller-manager, kube-scheduler v1.36) with sim's kubelets.
#[allow(dead_code, reason = "held for their Drop: they stop the cluster")]
#[allow(clippy::large_enum_variant, reason = "one per test, never moved about")]
enum Cluster {
    Sim(SimEnv, ClusterParts),
    Real(RealEnv),
}

/// The dev cluster of this test: sim with kubelets, controllers and its scheduler calling the
/// coordinator's extender; the TASPolicy, WorkloadAction and ScavengerJob CRDs; TAS's example
/// policy; an agent per node (quick eviction, reward and pressure settings) and a coordinator.
async fn start_cluster() -> (Cluster, Mesh, Client) {
    telemesh_runtime::telemetry::init(telemesh_runtime::cli::LogFormat::Text, "warn");
    let env = SimEnv::start(NODES.len()).await;
    let parts = ClusterParts::start(&env, NODES.len()).await;
    let client = env.client().await;
    let mesh = install_and_mesh(&env, &client).await;
    parts
        .start_scheduler(&env, &mesh.coordinators[0].url_prefix())
        .await;
    (Cluster::Sim(env, parts), mesh, client)
}

/// [`start_cluster`] on the real control plane, its kube-scheduler calling the extender with
/// the same shipped configuration; None (SKIPPED) without the control-plane binaries.
async fn start_real_cluster(test: &str) -> Option<(Cluster, Mesh, Client)> {
    telemesh_runtime::telemetry::init(telemesh_runtime::cli::LogFormat::Text, "warn");
    let mut env = RealEnv::start(test, NODES.len()).await?;
    let client = env.client().await;
    let mesh = install_and_mesh(&env, &client).await;
    for ns in [SCAVENGER_NS, POLICY_NAMESPACE] {
        env.wait_default_service_account(ns).await;
    }
    env.start_scheduler(&mesh.coordinators[0].url_prefix(), true);
    Some((Cluster::Real(env), mesh, client))
}

/// The CRDs, the scavengers' PriorityClass and namespace, TAS's example policy, then the
/// agents and the coordinator.
async fn install_and_mesh(env: &impl MeshEnv, client: &Client) -> Mesh {
    for crd in [telemesh_core::action::crd::CRD_YAML, CRD_YAML] {
        let crd: CustomResourceDefinition = serde_yaml_ng::from_str(crd).unwrap();
        Api::<CustomResourceDefinition>::all(client.clone())
            .create(&PostParams::default(), &crd)
            .await
            .unwrap();
    }
    let class: PriorityClass = serde_yaml_ng::from_str(PRIORITY_CLASS_YAML).unwrap();
    Api::<PriorityClass>::all(client.clone())
        .create(&PostParams::default(), &class)
        .await
        .unwrap();
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": SCAVENGER_NS}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    install_example_policy(client).await;
    let nodes: Vec<(&str, &str)> = NODES.iter().map(|n| (*n, "node_metric 50\n")).collect();
    Mesh::start_with(
        env,
        &nodes,
        &[
            "--min-pod-age=1s",
            "--violation-grace=1s",
            "--reward-interval=1s",
            // The /proc fixture's CPU stall (53 % some avg10) is above the 40 % threshold:
            // every agent evicts a scavenger after this hold.
            "--scavenger-pressure-for=2s",
        ],
        &[
            "--leader-lease-duration=3s",
            "--scavenger-admission-interval=200ms",
            "--action-ready-timeout=20s",
        ],
        1,
    )
    .await
}

/// Drives what the dashboard shows: pods linked to the policy placed through the extender, a
/// node breaking the policy (label, eviction, the filter refusing it) and recovering, rewards
/// from the pods' lives, a Scale action and a wait on it, and a ScavengerJob that the node
/// pressure evicts (an interruption with its waste).
async fn drive(
    mesh: &Mesh,
    agents: &BTreeMap<String, SocketAddr>,
    client: &Client,
    prometheus: Option<&Prometheus>,
) {
    // "demo" spreads over the nodes; "pinned" must run on sim-node-1, so that node's agent has a
    // linked pod to evict and the pod's replacement can only be refused there.
    for (name, replicas, node_selector) in [
        ("demo", 6, json!({})),
        ("pinned", 2, json!({"kubernetes.io/hostname": "sim-node-1"})),
    ] {
        let deployment: Deployment = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": POLICY_NAMESPACE},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {APP_LABEL: name}},
                "template": {
                    "metadata": {"labels": {APP_LABEL: name, "telemetry-policy": "scheduling-policy"}},
                    "spec": {
                        "nodeSelector": node_selector,
                        "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}]
                    }
                }
            }
        }))
        .unwrap();
        Api::<Deployment>::namespaced(client.clone(), POLICY_NAMESPACE)
            .create(&PostParams::default(), &deployment)
            .await
            .unwrap();
    }
    let sj: ScavengerJob = serde_json::from_value(json!({
        "apiVersion": "telemesh.io/v1alpha1", "kind": "ScavengerJob",
        "metadata": {"name": "crunch", "namespace": SCAVENGER_NS},
        "spec": {
            "image": "registry.example/work:1",
            "resources": {"requests": {"cpu": "1", "memory": "64Mi"}},
            "checkpointInterval": "30s",
            "podMetadata": {"annotations": {"sim.telemesh.io/run-for": "1h"}}
        }
    }))
    .unwrap();
    Api::<ScavengerJob>::namespaced(client.clone(), SCAVENGER_NS)
        .create(&PostParams::default(), &sj)
        .await
        .unwrap();

    eventually(
        "the pinned pods to be bound to sim-node-1",
        WAIT,
        || async {
            let pods = live_pods(client, POLICY_NAMESPACE, "pinned").await;
            (pods.len() == 2 && pods.values().all(|n| n == "sim-node-1")).then_some(())
        },
    )
    .await;

    // sim-node-1 breaks the policy (deschedule and dontschedule), then recovers.
    mesh.script("sim-node-1", "node_metric -1\n");
    mesh.wait_metric("sim-node-1", "node_metric", -1.0).await;
    let coordinator = &mesh.coordinators[0];
    let agent = format!("http://{}/metrics", agents["sim-node-1"]);
    eventually(
        "sim-node-1's agent to evict a pod and the extender to refuse the node",
        WAIT,
        || async {
            let evicted = get(&agent)
                .await?
                .contains("telemesh_agent_evictions_total{outcome=\"evicted\"}");
            let refused = coordinator
                .metrics()
                .await
                .contains("telemesh_coordinator_extender_filtered_nodes_total{result=\"Failed\"}");
            (evicted && refused).then_some(())
        },
    )
    .await;
    mesh.script("sim-node-1", "node_metric 50\n");
    mesh.wait_metric("sim-node-1", "node_metric", 50.0).await;

    // A workload action and a wait on it, twice: a series appears with its first observation,
    // so a rate needs a second one after Prometheus has seen the series.
    scale(coordinator.api, 7).await;
    if let Some(prometheus) = prometheus {
        eventually(
            "Prometheus to scrape the first action's series",
            WAIT,
            || async {
                for series in [
                    "telemesh_coordinator_actions_step_seconds_count",
                    "telemesh_coordinator_rpc_latency_seconds_count",
                ] {
                    if !has_data(&prometheus.query(series).await.ok()?) {
                        return None;
                    }
                }
                Some(())
            },
        )
        .await;
    }
    scale(coordinator.api, 8).await;

    // An oversized POST at each binary's health port: its door refuses it (413) and counts the
    // refusal, so the refusal counters have series for the dashboard and the metric reference.
    let oversized = vec![b'x'; 64 * 1024];
    for addr in agents.values().chain([&coordinator.http]) {
        let url = format!("http://{addr}/metrics");
        let answer =
            telemesh_sim::cluster::http::request(http::Method::POST, &url, Some(oversized.clone()))
                .await;
        assert!(answer.is_err(), "{url} accepted a 64 KiB body");
    }
}

/// Scales the demo Deployment to `replicas` through `action.Scale` and waits for it to end.
async fn scale(api: SocketAddr, replicas: i32) {
    let reply = telemesh_tests::rpc::call(
        api,
        None,
        "action.Scale",
        json!({"workload": {"namespace": POLICY_NAMESPACE, "kind": "Deployment", "name": "demo"},
               "replicas": replicas}),
    )
    .await;
    assert_eq!(reply["error"], Value::Null, "Scale refused: {reply}");
    let id = reply["result"]["actionId"].as_str().unwrap().to_owned();
    let reply = telemesh_tests::rpc::call(
        api,
        None,
        "action.Wait",
        json!({"actionId": id, "namespace": POLICY_NAMESPACE, "timeoutSeconds": 60}),
    )
    .await;
    assert_eq!(reply["error"], Value::Null, "Wait failed: {reply}");
    assert_eq!(reply["result"]["phase"], "Succeeded", "{reply}");
}

/// Scrapes every target's `/metrics` into one exposition model.
async fn scrape(targets: &[(String, SocketAddr, Option<u32>)]) -> Exposition {
    let mut exposition = Exposition::default();
    for (name, addr, _) in targets {
        let text = get(&format!("http://{addr}/metrics"))
            .await
            .unwrap_or_else(|| panic!("{name} does not answer /metrics"));
        exposition
            .add(&text)
            .unwrap_or_else(|e| panic!("{name}'s /metrics: {e}"));
    }
    exposition
}

/// Returns the problems of every query against `exposition`, one line each.
fn problems(queries: &[Query], exposition: &Exposition) -> Vec<String> {
    queries
        .iter()
        .flat_map(|q| {
            let expr = dashboard::expand(&q.expr, RATE_INTERVAL);
            dashboard::check(&expr, exposition)
                .into_iter()
                .map(move |p| format!("panel {:?}: {}: {p}", q.panel, q.expr))
        })
        .collect()
}

/// The Prometheus binary: `$TELEMESH_PROMETHEUS`, else `prometheus` on PATH.
fn prometheus_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TELEMESH_PROMETHEUS") {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("prometheus"))
            .find(|p| p.is_file())
    })
}

/// A real Prometheus scraping `targets` every second, its storage in a temporary directory
/// and its API on a loopback port. Killed on drop.
struct Prometheus {
    process: Process,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    async fn start(
        binary: &std::path::Path,
        targets: &[(String, SocketAddr, Option<u32>)],
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let job = |prefix: &str| -> Vec<String> {
            targets
                .iter()
                .filter(|(n, _, _)| n.starts_with(prefix))
                .map(|(_, a, _)| a.to_string())
                .collect()
        };
        let config = json!({
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [
                {"job_name": "telemesh-agent", "static_configs": [{"targets": job("telemesh-agent")}]},
                {"job_name": "telemesh-coordinator", "static_configs": [{"targets": job("telemesh-coordinator")}]},
            ]
        });
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, serde_yaml_ng::to_string(&config).unwrap()).unwrap();
        // A free loopback port: Prometheus does not report the port it bound for `:0`.
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let mut cmd = Command::new(binary);
        cmd.arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--log.level=warn");
        let process = Process::spawn("prometheus", cmd);
        let prometheus = Self {
            process,
            addr,
            _dir: dir,
        };
        let want = targets.len();
        eventually("Prometheus to scrape every target", WAIT, || async {
            let v = prometheus.query("count(up == 1)").await.ok()?;
            let n: f64 = v.first()?["value"][1].as_str()?.parse().ok()?;
            (n as usize == want).then_some(())
        })
        .await;
        prometheus
    }

    /// Evaluates `expr` now; returns the result vector.
    async fn query(&self, expr: &str) -> Result<Vec<Value>, String> {
        let q: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("query", expr)
            .finish();
        let body = get(&format!("http://{}/api/v1/query?{q}", self.addr))
            .await
            .ok_or("no answer")?;
        let v: Value = serde_json::from_str(&body).map_err(|e| e.to_string())?;
        if v["status"] != "success" {
            return Err(body);
        }
        Ok(v["data"]["result"].as_array().cloned().unwrap_or_default())
    }
}

/// Whether a result vector holds at least one finite value.
fn has_data(result: &[Value]) -> bool {
    result.iter().any(|s| {
        s["value"][1]
            .as_str()
            .and_then(|v| v.parse::<f64>().ok())
            .is_some_and(f64::is_finite)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_dashboard_query_names_exported_metrics_and_returns_data() {
    let (cluster, mesh, client) = start_cluster().await;
    dashboard_queries_return_data(cluster, mesh, client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_dashboard_query_names_exported_metrics_and_returns_data_on_a_real_control_plane() {
    let test =
        "every_dashboard_query_names_exported_metrics_and_returns_data_on_a_real_control_plane";
    if let Some((cluster, mesh, client)) = start_real_cluster(test).await {
        dashboard_queries_return_data(cluster, mesh, client).await;
    }
}

async fn dashboard_queries_return_data(_cluster: Cluster, mut mesh: Mesh, client: Client) {
    let queries = dashboard_queries();
    let agents = agent_http(&mut mesh).await;
    let targets = targets(&mut mesh).await;
    let prometheus = match prometheus_binary() {
        Some(binary) => Some(Prometheus::start(&binary, &targets).await),
        None => {
            eprintln!(
                "SKIPPED the Prometheus half of every_dashboard_query_names_exported_metrics_and_returns_data: \
                 no prometheus binary (set TELEMESH_PROMETHEUS or install Debian's prometheus; scripts/test.sh does)"
            );
            None
        }
    };
    drive(&mesh, &agents, &client, prometheus.as_ref()).await;

    // Every query against the binaries' own /metrics, once they have exported what the
    // scenario makes them export.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let found = problems(&queries, &scrape(&targets).await);
        if found.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "after {WAIT:?}, the dashboard's queries do not match what the binaries export:\n  {}",
            found.join("\n  ")
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!(
        "{} dashboard queries name only exported metrics, types and labels",
        queries.len()
    );

    // Every query through the real Prometheus.
    let Some(prometheus) = prometheus else { return };
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let mut empty = Vec::new();
        for q in &queries {
            let expr = dashboard::expand(&q.expr, RATE_INTERVAL);
            match prometheus.query(&expr).await {
                Ok(result) if has_data(&result) => {}
                Ok(result) => empty.push(format!("panel {:?}: {expr}: {result:?}", q.panel)),
                Err(e) => empty.push(format!("panel {:?}: {expr}: error {e}", q.panel)),
            }
        }
        if empty.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "after {WAIT:?}, Prometheus returns no data for:\n  {}\nits output:\n{}",
            empty.join("\n  "),
            prometheus.process.output().join("\n")
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!(
        "{} dashboard queries return data from Prometheus",
        queries.len()
    );
}

/// A figure of a `/metrics` text: the value of the first sample line starting with `series`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metric_reference_lists_exactly_what_each_binary_exports() {
    let text = std::fs::read_to_string(repo().join(metrics_reference::REFERENCE)).unwrap();
    let reference = metrics_reference::parse(&text).unwrap();
    let (_cluster, mut mesh, client) = start_cluster().await;
    let agents = agent_http(&mut mesh).await;
    let targets = targets(&mut mesh).await;
    // After the scenario every labelled family has series, so their labels are compared too.
    drive(&mesh, &agents, &client, None).await;
    let mut found = Vec::new();
    for binary in ["telemesh-agent", "telemesh-coordinator"] {
        let mine: Vec<_> = targets
            .iter()
            .filter(|(name, ..)| name.split(' ').next() == Some(binary))
            .cloned()
            .collect();
        assert!(!mine.is_empty(), "no {binary} in the mesh");
        found.extend(metrics_reference::compare(
            binary,
            &reference,
            &scrape(&mine).await,
        ));
    }
    assert!(
        found.is_empty(),
        "{} does not match what the binaries export:\n  {}",
        metrics_reference::REFERENCE,
        found.join("\n  ")
    );
    eprintln!(
        "{} metrics in {} match what the binaries export",
        reference.len(),
        metrics_reference::REFERENCE
    );
}

fn figure(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// Resident bytes of `pid` by /proc/<pid>/statm (resident pages × page size).
fn statm_rss(pid: u32) -> f64 {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).unwrap();
    let pages: f64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * procfs::page_size() as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn process_metrics_are_true_of_each_process() {
    let began = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    telemesh_runtime::telemetry::init(telemesh_runtime::cli::LogFormat::Text, "warn");
    let env = SimEnv::start(1).await;
    let mut mesh = Mesh::start(&env, &[("sim-node-0", "node_metric 1\n")], &[], 1).await;
    let targets = targets(&mut mesh).await;
    for (name, addr, pid) in &targets {
        let pid = pid.unwrap();
        let binary = name.split(' ').next().unwrap();
        let url = format!("http://{addr}/metrics");
        let first = get(&url).await.unwrap();
        let rss = figure(&first, "process_resident_memory_bytes");
        let theirs = statm_rss(pid);
        assert!(rss > 0.0, "{name}");
        // Two reads a moment apart: within 20 % (an allocation between them moves RSS).
        assert!(
            (rss - theirs).abs() <= theirs * 0.2,
            "{name}: RSS {rss} against /proc/{pid}/statm {theirs}"
        );
        assert!(
            figure(&first, "process_virtual_memory_bytes") >= rss,
            "{name}"
        );
        let fds = figure(&first, "process_open_fds");
        let listed = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .count() as f64;
        assert!(
            (fds - listed).abs() <= 8.0,
            "{name}: {fds} open fds, /proc lists {listed}"
        );
        assert!(figure(&first, "process_max_fds") >= fds, "{name}");
        let start = figure(&first, "process_start_time_seconds");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(
            start >= began - 2.0 && start <= now + 1.0,
            "{name}: started at {start}, the test ran from {began} to {now}"
        );
        let cpu = figure(&first, "process_cpu_seconds_total");
        let cores = std::thread::available_parallelism().unwrap().get() as f64;
        assert!(
            cpu >= 0.0 && cpu <= (now - start + 1.0) * cores,
            "{name}: {cpu} CPU-seconds"
        );
        let later = eventually("a second scrape", WAIT, || async { get(&url).await }).await;
        assert!(
            figure(&later, "process_cpu_seconds_total") >= cpu,
            "{name}: the CPU counter went down"
        );
        eprintln!(
            "{name}: RSS {:.1} MiB (statm {:.1} MiB), {cpu:.2} CPU-seconds since start, {fds} open fds",
            rss / 1_048_576.0,
            theirs / 1_048_576.0
        );
        let build = format!(
            "telemesh_build_info{{binary=\"{binary}\",version=\"{}\",revision=\"{}\"}}",
            env!("CARGO_PKG_VERSION"),
            telemesh_runtime::process_metrics::REVISION
        );
        assert_eq!(figure(&first, &build), 1.0, "{name}");
        for (family, kind) in telemesh_runtime::process_metrics::FAMILIES {
            assert!(
                first.contains(&format!("# TYPE {family} {kind}\n")),
                "{name}: {family} is not a {kind}:\n{first}"
            );
        }
    }
}
