//! `kubectl telemesh` end to end: the built `kubectl-telemesh` binary run as a subprocess, as
//! kubectl runs a plugin, against sim with its kubelets, controllers and scheduler stand-in
//! (calling the coordinators' extender), an agent per node and two real coordinators:
//!
//! - `top nodes` shows each node's figures as the coordinators' view has them (`-o json` is
//!   the view itself);
//! - `rewards web` shows what the agents learned about the Deployment's pods;
//! - `move --wait` and `swap --wait` go through `/rpc` and end Succeeded; `actions` lists them,
//!   `actions -w` prints a `scale` action as it is accepted and again when it succeeds;
//! - `why` tells of the moved pod's policy, its node and the action that created it, and of
//!   the old pod that the action removed;
//! - `jobs` shows a ScavengerJob created here running, with its unsaved work from the view.
//! - with `--api-auth kubernetes`, the kubeconfig user's token is what the coordinator checks;
//!   a user without `get nodes` and a bogus token are refused, saying so.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use telemesh_core::action::WorkloadAction;
use telemesh_core::scavenge::crd::ScavengerJob;
use telemesh_tests::cluster::{
    APP_LABEL, ClusterParts, POLICY_NAMESPACE, install_example_policy, live_pods,
};
use telemesh_tests::mesh::Mesh;
use telemesh_tests::{
    Process, SimEnv, cells, eventually, header, kubectl_binary, row, workspace_binary,
};

const NODES: [&str; 3] = ["sim-node-0", "sim-node-1", "sim-node-2"];
/// The example policy's namespace: the Deployment's pods link to its policy.
const NS: &str = POLICY_NAMESPACE;
const BATCH: &str = "batch";
/// Bounds a broken run; not a timing goal.
const WAIT: Duration = Duration::from_secs(90);

struct Scene {
    env: SimEnv,
    _parts: ClusterParts,
    mesh: Mesh,
    client: Client,
}

impl Scene {
    async fn start() -> Self {
        telemesh_runtime::telemetry::init(telemesh_runtime::cli::LogFormat::Text, "warn");
        let env = SimEnv::start(NODES.len()).await;
        let parts = ClusterParts::start(&env, NODES.len()).await;
        let client = env.client().await;
        for yaml in [
            telemesh_core::action::crd::CRD_YAML,
            telemesh_core::scavenge::crd::CRD_YAML,
        ] {
            let crd: CustomResourceDefinition = serde_yaml_ng::from_str(yaml).unwrap();
            Api::<CustomResourceDefinition>::all(client.clone())
                .create(&PostParams::default(), &crd)
                .await
                .unwrap();
        }
        let class: PriorityClass =
            serde_yaml_ng::from_str(telemesh_core::scavenge::crd::PRIORITY_CLASS_YAML).unwrap();
        Api::<PriorityClass>::all(client.clone())
            .create(&PostParams::default(), &class)
            .await
            .unwrap();
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": BATCH}})).unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
        install_example_policy(&client).await;
        let nodes: Vec<(&str, &str)> = NODES.iter().map(|n| (*n, "node_metric 50\n")).collect();
        let mesh = Mesh::start_with(
            &env,
            &nodes,
            &["--reward-interval=200ms", "--reward-healthy-unit=1s"],
            &[
                "--leader-lease-duration=3s",
                "--action-ready-timeout=30s",
                "--scavenger-admission-interval=200ms",
            ],
            2,
        )
        .await;
        parts
            .start_scheduler(&env, &mesh.coordinators[0].url_prefix())
            .await;
        Self {
            env,
            _parts: parts,
            mesh,
            client,
        }
    }

    /// `kubectl-telemesh ARGS` with the sim's kubeconfig and the first coordinator's API, as
    /// a user would run it (HOME private, no TELEMESH_* from the test's environment).
    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(workspace_binary("kubectl-telemesh"));
        cmd.arg(format!("--kubeconfig={}", self.env.kubeconfig.display()))
            .arg(format!(
                "--coordinator=http://{}",
                self.mesh.coordinators[0].api
            ))
            .args(args)
            .env("HOME", self.env.dir())
            .env_remove("KUBECONFIG")
            .env_remove("TELEMESH_COORDINATOR")
            .env_remove("TELEMESH_TOKEN")
            .kill_on_drop(true);
        cmd
    }

    /// Runs the plugin; returns its stdout, panicking with its output unless it exits 0.
    async fn run(&self, args: &[&str]) -> String {
        let out = self.command(args).output().await.unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "kubectl telemesh {args:?} exited {}:\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }

    /// The coordinators' view, as `GET /api/v1/nodes` answers.
    async fn view(&self) -> Value {
        let url = format!("http://{}/api/v1/nodes", self.mesh.coordinators[0].api);
        let body = telemesh_sim::cluster::http::request(http::Method::GET, &url, None)
            .await
            .unwrap();
        serde_json::from_slice(&body).unwrap()
    }

    async fn action(&self, name: &str) -> WorkloadAction {
        Api::<WorkloadAction>::namespaced(self.client.clone(), NS)
            .get(name)
            .await
            .unwrap()
    }
}

/// Deployment `web` of `replicas` pods linked to the example policy (`telemetry-policy`).
async fn create_web(client: &Client, replicas: i32) {
    let labels = json!({APP_LABEL: "web", "telemetry-policy": "scheduling-policy"});
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": NS},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {APP_LABEL: "web"}},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{
                "name": "pause", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}]}}}
    }))
    .unwrap();
    Api::<Deployment>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
}

/// The action id in a `workloadaction.telemesh.io/<id> created (...)` line.
fn created_id(out: &str) -> String {
    let line = out
        .lines()
        .find(|l| l.contains(" created ("))
        .unwrap_or_else(|| panic!("no created line in:\n{out}"));
    line.split_whitespace()
        .next()
        .and_then(|w| w.strip_prefix("workloadaction.telemesh.io/"))
        .unwrap()
        .to_owned()
}

/// The cell under `column` in `table`'s row for `name`.
fn cell<'a>(table: &'a str, name: &str, column: &str) -> &'a str {
    let i = header(table)
        .iter()
        .position(|h| *h == column)
        .unwrap_or_else(|| panic!("no column {column} in:\n{table}"));
    row(table, name)[i]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_subcommand_answers_from_the_live_cluster() {
    let scene = Scene::start().await;

    // top nodes: the view's figures, formatted. Memory and pressure come from each agent's
    // /proc fixture (fixed), the health metric from its textfile.
    let table = scene.run(&["top", "nodes", "--metric=node_metric"]).await;
    let view = scene.view().await;
    for node in NODES {
        let entry = view["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["name"] == node)
            .unwrap();
        let figure = |m: &str| {
            entry["metrics"][m]["value"]
                .as_f64()
                .unwrap_or_else(|| panic!("{m} of {node} in {entry}"))
        };
        assert_eq!(cell(&table, node, "STATUS"), "live", "{table}");
        assert_eq!(cell(&table, node, "NODE_METRIC"), "50", "{table}");
        let memory = figure("node_memory_utilization_ratio");
        assert_eq!(
            cell(&table, node, "MEMORY%"),
            format!("{:.0}%", memory * 100.0),
            "{table}"
        );
        let psi = figure("node_pressure_cpu_some_avg10_ratio");
        assert_eq!(
            cell(&table, node, "PSI-CPU"),
            format!("{:.1}%", psi * 100.0),
            "{table}"
        );
        assert!(psi > 0.0, "the fixture's CPU pressure: {entry}");
        assert_eq!(cell(&table, node, "STALE"), "0", "{table}");
    }
    // kubectl finds the plugin on PATH by its name, as krew installs it.
    let bin_dir = workspace_binary("kubectl-telemesh")
        .parent()
        .unwrap()
        .to_owned();
    let path = std::env::join_paths(std::iter::once(bin_dir).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    let out = tokio::process::Command::new(kubectl_binary())
        .args(["telemesh", "top", "nodes"])
        .arg(format!("--kubeconfig={}", scene.env.kubeconfig.display()))
        .arg(format!(
            "--coordinator=http://{}",
            scene.mesh.coordinators[1].api
        ))
        .env("PATH", path)
        .env("HOME", scene.env.dir())
        .output()
        .await
        .unwrap();
    let through_kubectl = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{through_kubectl}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        header(&through_kubectl).contains(&"PSI-CPU"),
        "{through_kubectl}"
    );
    assert_eq!(
        cell(&through_kubectl, NODES[0], "STATUS"),
        "live",
        "{through_kubectl}"
    );
    let json: Value =
        serde_json::from_str(&scene.run(&["top", "nodes", "-o", "json"]).await).unwrap();
    assert_eq!(json["nodes"].as_array().unwrap().len(), NODES.len());
    // From here on scavengers run: no agent may evict them for the fixture's pressure.
    scene.mesh.calm_pressure();

    // rewards: the agents learn that web's pods run well where they run.
    create_web(&scene.client, 2).await;
    let pods = eventually("web's two pods placed", WAIT, || async {
        let pods = live_pods(&scene.client, NS, "web").await;
        (pods.len() == 2 && pods.values().all(|n| !n.is_empty())).then_some(pods)
    })
    .await;
    let (a_node, learned) = eventually("a reward learned for web", WAIT, || async {
        let table = scene.run(&["rewards", "web", "-n", NS]).await;
        pods.values()
            .find(|node| {
                table.lines().skip(1).any(|l| {
                    let c = cells(l);
                    c[0] == node.as_str() && c[2].parse::<f64>().is_ok_and(|g| g > 0.0)
                })
            })
            .map(|n| (n.clone(), table.clone()))
    })
    .await;
    assert_eq!(
        header(&learned),
        ["NODE", "MEAN", "GOOD", "BAD", "EVIDENCE", "SCORE", "AGE"]
    );
    let all = scene.run(&["rewards", "-A"]).await;
    assert!(
        all.lines()
            .any(|l| cells(l)[..2] == [format!("{NS}/web").as_str(), a_node.as_str()]),
        "{all}"
    );

    // move through /rpc, waited for.
    let old_pod = pods.keys().next().unwrap().clone();
    // A node without a web pod, so the two pods end on different nodes (for the swap).
    let to = NODES
        .iter()
        .find(|n| !pods.values().any(|p| p == *n))
        .unwrap();
    let out = scene
        .run(&["move", &old_pod, "--to", to, "-n", NS, "--wait"])
        .await;
    let moved = created_id(&out);
    assert!(
        out.contains(&format!("workloadaction.telemesh.io/{moved} Succeeded")),
        "{out}"
    );
    let action = scene.action(&moved).await;
    assert_eq!(action.spec.method, "Move");
    let status = action.status.unwrap();
    let new_pod = status.pods_created[0].name.clone();
    assert_eq!(status.pods_created[0].node, *to);
    assert_eq!(
        live_pods(&scene.client, NS, "web").await.get(&new_pod),
        Some(&to.to_string())
    );

    // actions: the move, succeeded.
    let table = scene.run(&["actions", "-n", NS]).await;
    assert_eq!(cell(&table, &moved, "METHOD"), "Move", "{table}");
    assert_eq!(cell(&table, &moved, "PHASE"), "Succeeded", "{table}");
    assert_eq!(cell(&table, &moved, "NODE"), *to, "{table}");

    // why: the new pod's policy and node, and the action that created it; the old pod's end.
    let web_nodes = live_pods(&scene.client, NS, "web").await;
    let failing = *NODES
        .iter()
        .find(|n| !web_nodes.values().any(|p| p == *n))
        .unwrap();
    scene.mesh.script(failing, "node_metric 5\n");
    scene.mesh.wait_metric(failing, "node_metric", 5.0).await;
    let why = scene.run(&["why", &new_pod, "-n", NS]).await;
    assert!(
        why.contains(&format!("Pod {NS}/{new_pod} on {to}, Running")),
        "{why}"
    );
    assert!(why.contains("Policy scheduling-policy on"), "{why}");
    let rule = why
        .lines()
        .find(|l| l.starts_with("dontschedule"))
        .unwrap_or_else(|| panic!("no dontschedule rule in:\n{why}"));
    assert!(rule.contains("node_metric LessThan 10"), "{rule}");
    assert!(
        cells(rule).contains(&"50") && rule.ends_with("not violated"),
        "{rule}"
    );
    // The node without a web pod reports a failing health metric: the pod's policy filters it.
    assert!(
        why.contains(&format!(
            "filtered out now: {failing}: policy {NS}/scheduling-policy dontschedule: node_metric LessThan 10 (value 5)"
        )),
        "{why}"
    );
    let action_row = why
        .lines()
        .find(|l| l.starts_with(&moved))
        .unwrap_or_else(|| panic!("no row for {moved} in:\n{why}"));
    assert!(action_row.contains("created this pod"), "{action_row}");
    assert!(action_row.contains("Succeeded"), "{action_row}");
    assert!(
        why.contains(&format!("Successfully assigned {NS}/{new_pod} to {to}")),
        "{why}"
    );
    let old = scene.run(&["why", &old_pod, "-n", NS]).await;
    assert!(
        old.starts_with(&format!("Pod {NS}/{old_pod} is gone")),
        "{old}"
    );
    assert!(
        old.lines()
            .any(|l| l.starts_with(&moved) && l.contains("removed this pod")),
        "{old}"
    );
    let report: Value =
        serde_json::from_str(&scene.run(&["why", &new_pod, "-n", NS, "-o", "json"]).await).unwrap();
    assert_eq!(report["actions"][0]["name"], moved.as_str());

    scene.mesh.script(failing, "node_metric 50\n");
    scene.mesh.wait_metric(failing, "node_metric", 50.0).await;

    // swap the two pods, waited for.
    let pods = live_pods(&scene.client, NS, "web").await;
    let names: Vec<&String> = pods.keys().collect();
    assert_ne!(pods[names[0]], pods[names[1]], "{pods:?}");
    let out = scene
        .run(&[
            "swap",
            names[0],
            names[1],
            "-n",
            NS,
            "--wait",
            "--timeout=90s",
        ])
        .await;
    let swapped = created_id(&out);
    assert!(out.contains(&format!("{swapped} Succeeded")), "{out}");

    // actions -w: a scale accepted shows up, then its success.
    let mut watch = Process::spawn(
        "kubectl telemesh actions -w",
        scene.command(&["actions", "-w", "-n", NS]),
    );
    watch
        .wait_for_line("the listing", WAIT, |l| {
            l.starts_with(&swapped).then_some(())
        })
        .await;
    let out = scene
        .run(&["scale", "deployment/web", "--replicas=3", "-n", NS])
        .await;
    let scaled = created_id(&out);
    watch
        .wait_for_line("the scale action's success", WAIT, |l| {
            let c = cells(l);
            (c.first() == Some(&scaled.as_str()) && c.contains(&"Succeeded")).then_some(())
        })
        .await;
    assert!(
        watch
            .output()
            .iter()
            .any(|l| l.starts_with(&scaled) && l.contains("Scale")),
        "{:?}",
        watch.output()
    );
    watch.kill().await;

    // jobs: a ScavengerJob created here, running, with its unsaved work from the view.
    let sj: ScavengerJob = serde_json::from_value(json!({
        "apiVersion": "telemesh.io/v1alpha1", "kind": "ScavengerJob",
        "metadata": {"name": "render", "namespace": BATCH},
        "spec": {"image": "registry.example/render:1", "checkpointInterval": "10m",
            "resources": {"requests": {"cpu": "2", "memory": "64Mi"}},
            "podMetadata": {"annotations": {"sim.telemesh.io/run-for": "10m"}}}
    }))
    .unwrap();
    Api::<ScavengerJob>::namespaced(scene.client.clone(), BATCH)
        .create(&PostParams::default(), &sj)
        .await
        .unwrap();
    let table = eventually(
        "jobs to show render running with unsaved work",
        WAIT,
        || async {
            let table = scene.run(&["jobs", "-n", BATCH]).await;
            let unsaved: f64 = cell(&table, "render", "UNSAVED-CPU-S").parse().ok()?;
            (cell(&table, "render", "PHASE") == "Running" && unsaved > 0.0).then_some(table)
        },
    )
    .await;
    assert_eq!(cell(&table, "render", "INTERRUPTED"), "0", "{table}");
    assert_ne!(cell(&table, "render", "RUNNING-FOR"), "-", "{table}");
    let all = scene.run(&["jobs", "-A", "-o", "yaml"]).await;
    let list: Value = serde_yaml_ng::from_str(&all).unwrap();
    assert_eq!(list["items"][0]["metadata"]["name"], "render");
    assert!(
        list["items"][0]["unsaved"]["cpuSeconds"].as_f64().unwrap() > 0.0,
        "{all}"
    );
}

/// With `--api-auth kubernetes` a coordinator checks the plugin's bearer token with the API
/// server: the kubeconfig user's token is sent and allowed; `--token` of a user without
/// `get nodes` is refused with the coordinator's 403 and a bogus one with its 401, each said on
/// stderr with exit 1, and `/rpc` refuses an action the user may not create. With nothing at
/// `--coordinator`, the error names the coordinator Service the API server has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kubeconfig_token_is_what_the_coordinators_check() {
    telemesh_runtime::telemetry::init(telemesh_runtime::cli::LogFormat::Text, "warn");
    let user = |name: &str| telemesh_sim::apiserver::requests::auth::UserInfo {
        username: name.to_owned(),
        uid: format!("uid-{name}"),
        groups: Vec::new(),
        ..Default::default()
    };
    let rule = |subject: &str, resources: &[&str]| telemesh_sim::apiserver::requests::auth::Rule {
        subjects: vec![subject.to_owned()],
        verbs: vec!["*".to_owned()],
        api_groups: vec!["*".to_owned()],
        resources: resources.iter().map(|r| (*r).to_owned()).collect(),
        namespaces: Vec::new(),
    };
    let config = telemesh_sim::SimConfig {
        auth: telemesh_sim::apiserver::requests::auth::Auth {
            tokens: [("admin-token", "admin"), ("viewer-token", "viewer")]
                .into_iter()
                .map(|(t, u)| (t.to_owned(), user(u)))
                .collect(),
            // The viewer may read pods only: not `get nodes`, not `create workloadactions`.
            rules: vec![rule("admin", &["*"]), rule("viewer", &["pods"])],
        },
        kubeconfig_token: Some("admin-token".to_owned()),
        ..Default::default()
    };
    let env = SimEnv::start_with(config, 1).await;
    let client = env.client().await;
    let crd: CustomResourceDefinition =
        serde_yaml_ng::from_str(telemesh_core::action::crd::CRD_YAML).unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    // One coordinator, no agent: what is checked here is who may read its (empty) view.
    let mut coordinator = Process::spawn("telemesh-coordinator", {
        let mut cmd = tokio::process::Command::new(workspace_binary("telemesh-coordinator"));
        cmd.args([
            "--log-format=json",
            "--insecure-gossip",
            "--gossip-listen=127.0.0.1:0",
            "--extender-listen=127.0.0.1:0",
            "--api-listen=127.0.0.1:0",
            "--http-listen=127.0.0.1:0",
            "--api-auth=kubernetes",
        ])
        .arg(format!("--kubeconfig={}", env.kubeconfig.display()))
        .env("RUST_LOG", "info");
        cmd
    });
    let api: std::net::SocketAddr = coordinator
        .wait_for_line("the API address", WAIT, |l| {
            telemesh_tests::mesh::log_field(l, "coordinator listening", "api.addr")?
                .parse()
                .ok()
        })
        .await;
    let plugin = |extra: &[&str]| {
        let mut cmd = tokio::process::Command::new(workspace_binary("kubectl-telemesh"));
        cmd.arg(format!("--kubeconfig={}", env.kubeconfig.display()))
            .arg(format!("--coordinator=http://{api}"))
            .args(extra)
            .env("HOME", env.dir())
            .env_remove("TELEMESH_COORDINATOR")
            .env_remove("TELEMESH_TOKEN");
        cmd
    };
    let out = plugin(&["top", "nodes"]).output().await.unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{table}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(header(&table)[..2], ["NAME", "STATUS"], "{table}");

    for (token, status, says) in [
        ("viewer-token", "403", "cannot get resource \"nodes\""),
        ("bogus", "401", ""),
    ] {
        let out = plugin(&["top", "nodes", "--token", token])
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{token}: {stderr}");
        assert!(
            stderr.contains(&format!("answered {status} to /api/v1/nodes"))
                && stderr.contains(says),
            "{token}: {stderr}"
        );
    }
    let out = plugin(&[
        "scale",
        "deployment/web",
        "--replicas=2",
        "--token=viewer-token",
    ])
    .output()
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("action.Scale refused") && stderr.contains("code -32003"),
        "{stderr}"
    );

    // Nothing at --coordinator: the error names the chart's coordinator Service, found through
    // the API server, and the port-forward that reaches it.
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "telemesh-system"}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let service: k8s_openapi::api::core::v1::Service = serde_json::from_value(json!({
        "metadata": {"name": "telemesh-coordinator", "namespace": "telemesh-system", "labels": {
            "app.kubernetes.io/name": "telemesh", "app.kubernetes.io/component": "coordinator"}},
        "spec": {"ports": [{"name": "api", "port": 9080, "targetPort": "api"}]}
    }))
    .unwrap();
    Api::<k8s_openapi::api::core::v1::Service>::namespaced(client.clone(), "telemesh-system")
        .create(&PostParams::default(), &service)
        .await
        .unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = closed.local_addr().unwrap();
    drop(closed);
    let out = plugin(&["top", "nodes", &format!("--coordinator=http://{dead}")])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cannot reach the coordinators' API at http://{dead}"
        )) && stderr
            .contains("kubectl port-forward -n telemesh-system svc/telemesh-coordinator 9080:api"),
        "{stderr}"
    );
}
