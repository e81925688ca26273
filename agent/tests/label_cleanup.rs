//! TAS's label clean-up end to end (agent/src/enforcement/label_cleanup.rs): real agents with TAS's two
//! example policies, telemetry scripted through textfiles, on sim and on a real control plane
//! (etcd, kube-apiserver and kube-controller-manager v1.36; its nodes kept alive as kubelets
//! keep theirs, so other managers write the Nodes meanwhile), the same scenario on each.
//!
//! Labels are put on the Nodes before the agents start by other field managers: `tas`, with a
//! JSON patch as TAS wrote them, and `kubectl`. Under the default `--label-cleanup tas`:
//!
//! - on a node that does not violate `scheduling-policy`, a `scheduling-policy=violating` and
//!   `telemetry.aware.scheduling.*` labels no policy sets go (one of an existing policy, one of
//!   none, one without `/<key>`, as in TAS's tests); labels outside TAS's namespace and a
//!   `<name>=violating` of a name no policy has stay;
//! - on the node that violates it, `scheduling-policy=violating` stays (the agent applies it
//!   too, sharing the field with `tas`), and goes once the node recovers, which server-side apply
//!   alone would not do (the field is still `tas`'s);
//! - a deleted deschedule policy's `<policy>=violating` goes, though `tas` wrote it too;
//! - labels set by hand while the agents run go too (seen through the agent's watch of its
//!   Node: no label of the agent's changes then);
//! - each removal is told by an Event naming the label, why and who had set it.
//!
//! Under `--label-cleanup own` the labels others wrote stay, and the Event says why.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use telemesh_runtime::testing::eventually;
use telemesh_sim::cluster::machines::{self, Machine};
use telemesh_sim::control_plane::{ControlPlane, ControlPlaneConfig, binaries};
use tokio_util::sync::CancellationToken;

use common::{KEY, WAIT, events, host_root, install_policies, labels, script};

const NODE_0: &str = "sim-node-0";
const NODE_1: &str = "sim-node-1";
const PREFIX: &str = "telemetry.aware.scheduling.";

/// What stands behind the API.
enum Backend {
    Sim {
        _sim: telemesh_sim::Sim,
    },
    Real {
        plane: ControlPlane,
        heartbeats: CancellationToken,
    },
}

/// An API server with two nodes, TAS's two example policies and what agents need.
struct Env {
    backend: Backend,
    client: kube::Client,
    kubeconfig: PathBuf,
    keys: PathBuf,
    dir: tempfile::TempDir,
    policies: Api<DynamicObject>,
}

impl Env {
    async fn on_sim() -> Self {
        telemesh_runtime::telemetry::init(telemesh_runtime::cli::LogFormat::Text, "warn");
        let sim = telemesh_sim::Sim::start(Default::default()).await.unwrap();
        telemesh_sim::nodes::create_nodes(&sim.server, 2).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        sim.write_kubeconfig(&kubeconfig).unwrap();
        let client = sim.client().await.unwrap();
        Self::install(Backend::Sim { _sim: sim }, client, kubeconfig, dir).await
    }

    /// None, after printing `SKIPPED`, without the control-plane binaries.
    async fn on_real_control_plane(test: &str) -> Option<Self> {
        let binaries = binaries::for_test(test)?;
        telemesh_runtime::telemetry::init(telemesh_runtime::cli::LogFormat::Text, "warn");
        let dir = tempfile::tempdir().unwrap();
        let plane = ControlPlane::start(ControlPlaneConfig::new(
            binaries,
            dir.path().join("control-plane"),
        ))
        .await
        .unwrap();
        let client = plane.client().await.unwrap();
        let machines = vec![Machine::standard(NODE_0), Machine::standard(NODE_1)];
        machines::register(&client, &machines).await.unwrap();
        let heartbeats = CancellationToken::new();
        tokio::spawn(machines::heartbeat(
            client.clone(),
            machines,
            heartbeats.clone(),
        ));
        let kubeconfig = plane.kubeconfig().to_owned();
        let backend = Backend::Real { plane, heartbeats };
        Some(Self::install(backend, client, kubeconfig, dir).await)
    }

    async fn install(
        backend: Backend,
        client: kube::Client,
        kubeconfig: PathBuf,
        dir: tempfile::TempDir,
    ) -> Self {
        let keys = dir.path().join("keys");
        std::fs::write(&keys, format!("{KEY}\n")).unwrap();
        let policies = install_policies(
            &client,
            &["scheduling-policy.yaml", "multirules-policy.yaml"],
        )
        .await;
        Self {
            backend,
            client,
            kubeconfig,
            keys,
            dir,
            policies,
        }
    }

    /// Starts the agent of `node`, its telemetry `metrics`, with `extra` flags.
    async fn agent(&self, node: &str, metrics: &str, extra: &[&str]) -> telemesh_agent::Agent {
        let root = self.root(node);
        host_root(&root, metrics);
        let mut flags = vec![
            "--policy-interval=300ms".to_owned(),
            "--local-eviction=false".into(),
        ];
        flags.extend(extra.iter().map(|f| (*f).to_owned()));
        let config = common::agent_config(&self.kubeconfig, &self.keys, node, &root, &flags);
        telemesh_agent::start(config, CancellationToken::new())
            .await
            .unwrap()
    }

    fn root(&self, node: &str) -> PathBuf {
        self.dir.path().join(node)
    }

    fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        if let Backend::Real { plane, heartbeats } = &self.backend {
            heartbeats.cancel();
            if std::thread::panicking() {
                eprintln!("{}", plane.log_tail("kube-apiserver"));
            }
        }
    }
}

/// Labels `node` as TAS did: a JSON patch of `add` operations, field manager `tas`.
async fn tas_labels(nodes: &Api<Node>, node: &str, pairs: &[(&str, &str)]) {
    let ops: Vec<serde_json::Value> = pairs
        .iter()
        .map(|(k, v)| {
            let path = format!("/metadata/labels/{}", k.replace('/', "~1"));
            serde_json::json!({"op": "add", "path": path, "value": v})
        })
        .collect();
    let patch: json_patch::Patch = serde_json::from_value(serde_json::Value::Array(ops)).unwrap();
    let params = PatchParams {
        field_manager: Some("tas".into()),
        ..PatchParams::default()
    };
    nodes
        .patch(node, &params, &Patch::Json::<()>(patch))
        .await
        .unwrap();
}

/// Labels `node` by hand: a merge patch, field manager `kubectl`.
async fn kubectl_labels(nodes: &Api<Node>, node: &str, pairs: &[(&str, &str)]) {
    let labels: BTreeMap<&str, &str> = pairs.iter().copied().collect();
    let params = PatchParams {
        field_manager: Some("kubectl".into()),
        ..PatchParams::default()
    };
    nodes
        .patch(
            node,
            &params,
            &Patch::Merge(serde_json::json!({"metadata": {"labels": labels}})),
        )
        .await
        .unwrap();
}

/// Waits until `node`'s labels satisfy `ok`; returns them.
async fn until_labels(
    nodes: &Api<Node>,
    node: &str,
    what: &str,
    ok: impl Fn(&BTreeMap<String, String>) -> bool,
) -> BTreeMap<String, String> {
    eventually(&format!("{node}: {what}"), WAIT, || async {
        let l = labels(nodes, node).await;
        ok(&l).then_some(l)
    })
    .await
}

/// Waits for an Event with `reason` on `node` whose note contains `needle`.
async fn until_event(client: &kube::Client, node: &str, reason: &str, needle: &str) {
    eventually(
        &format!("a {reason} event on {node}: {needle}"),
        WAIT,
        || async {
            let found = events(client, "default", reason, node).await;
            found
                .iter()
                .any(|e| e.note.as_deref().is_some_and(|n| n.contains(needle)))
                .then_some(())
        },
    )
    .await;
}

fn get<'a>(labels: &'a BTreeMap<String, String>, key: &str) -> Option<&'a str> {
    labels.get(key).map(String::as_str)
}

fn prefixed(labels: &BTreeMap<String, String>) -> Vec<&str> {
    labels
        .keys()
        .filter(|k| k.starts_with(PREFIX))
        .map(String::as_str)
        .collect()
}

async fn tas_cleanup(env: Env) {
    let nodes = env.nodes();
    // Node 0 will violate scheduling-policy's deschedule (node_metric Equals -1); node 1 will
    // not, but will violate multirules-policy's (temperature > 80 and freeRAM < 200).
    tas_labels(
        &nodes,
        NODE_0,
        &[
            ("scheduling-policy", "violating"),
            ("telemetry.aware.scheduling.old-policy/card0", "true"),
        ],
    )
    .await;
    kubectl_labels(&nodes, NODE_0, &[("team", "blue")]).await;
    kubectl_labels(
        &nodes,
        NODE_1,
        &[
            ("scheduling-policy", "violating"),
            ("telemetry.aware.scheduling.scheduling-policy/label1", "foo"),
            ("telemetry.aware.scheduling.labeling-test", ""),
            ("other-policy", "violating"),
        ],
    )
    .await;
    tas_labels(&nodes, NODE_1, &[("multirules-policy", "violating")]).await;

    let agent0 = env.agent(NODE_0, "node_metric -1\n", &[]).await;
    let agent1 = env
        .agent(
            NODE_1,
            "node_metric 50\ntemperature 90\nfreeRAM 100\n",
            &[&format!("--gossip-seeds={}", agent0.gossip_addr)],
        )
        .await;

    // Node 1 does not violate scheduling-policy: its violator label and the prefixed labels
    // no policy sets there go, whoever wrote them; what it violates and what is not TAS's stay.
    let l = until_labels(&nodes, NODE_1, "no stale TAS labels", |l| {
        !l.contains_key("scheduling-policy") && prefixed(l).is_empty()
    })
    .await;
    assert_eq!(get(&l, "multirules-policy"), Some("violating"), "{l:?}");
    assert_eq!(get(&l, "other-policy"), Some("violating"), "{l:?}");
    // Node 0 violates it: the label stays; the label of a policy that does not exist goes.
    let l = until_labels(&nodes, NODE_0, "old-policy's label gone", |l| {
        prefixed(l).is_empty()
    })
    .await;
    assert_eq!(get(&l, "scheduling-policy"), Some("violating"), "{l:?}");
    assert_eq!(get(&l, "team"), Some("blue"), "{l:?}");
    let client = &env.client;
    until_event(
        client,
        NODE_1,
        "TelemetryLabelRemoved",
        "label scheduling-policy=violating removed: this node does not violate deschedule policy scheduling-policy; set by kubectl",
    )
    .await;
    until_event(
        client,
        NODE_1,
        "TelemetryLabelRemoved",
        "label telemetry.aware.scheduling.scheduling-policy/label1=foo removed: labeling policy scheduling-policy does not set it on this node; set by kubectl",
    )
    .await;
    until_event(
        client,
        NODE_0,
        "TelemetryLabelRemoved",
        "label telemetry.aware.scheduling.old-policy/card0=true removed: no policy old-policy exists; set by tas",
    )
    .await;

    // Node 0 recovers: the agent stops applying the label it shared with `tas`, and removes it.
    script(&env.root(NODE_0), "node_metric 50\n");
    until_labels(&nodes, NODE_0, "scheduling-policy gone", |l| {
        !l.contains_key("scheduling-policy")
    })
    .await;
    until_event(
        client,
        NODE_0,
        "TelemetryLabelRemoved",
        "label scheduling-policy=violating removed: this node does not violate deschedule policy scheduling-policy; set by tas",
    )
    .await;

    // multirules-policy deleted: its violator label on node 1 goes, though `tas` wrote it too.
    env.policies
        .delete("multirules-policy", &Default::default())
        .await
        .unwrap();
    let l = until_labels(&nodes, NODE_1, "multirules-policy gone", |l| {
        !l.contains_key("multirules-policy")
    })
    .await;
    assert_eq!(get(&l, "other-policy"), Some("violating"), "{l:?}");
    until_event(
        client,
        NODE_1,
        "TelemetryLabelRemoved",
        "label multirules-policy=violating removed: deschedule policy multirules-policy was deleted; set by tas",
    )
    .await;

    // Set by hand while the agents run, with no label of theirs changing: seen through the
    // agent's watch of its Node, and removed.
    kubectl_labels(
        &nodes,
        NODE_1,
        &[
            ("scheduling-policy", "violating"),
            ("telemetry.aware.scheduling.by-hand/x", "y"),
        ],
    )
    .await;
    let l = until_labels(&nodes, NODE_1, "the labels set by hand gone", |l| {
        !l.contains_key("scheduling-policy") && prefixed(l).is_empty()
    })
    .await;
    assert_eq!(get(&l, "other-policy"), Some("violating"), "{l:?}");
    until_event(
        client,
        NODE_1,
        "TelemetryLabelRemoved",
        "label telemetry.aware.scheduling.by-hand/x=y removed: no policy by-hand exists; set by kubectl",
    )
    .await;

    agent0.shutdown().await;
    agent1.shutdown().await;
}

async fn own_keeps_labels_others_wrote(env: Env) {
    let nodes = env.nodes();
    tas_labels(
        &nodes,
        NODE_0,
        &[
            ("scheduling-policy", "violating"),
            ("telemetry.aware.scheduling.old-policy/card0", "true"),
        ],
    )
    .await;
    kubectl_labels(
        &nodes,
        NODE_0,
        &[("telemetry.aware.scheduling.scheduling-policy/label1", "foo")],
    )
    .await;
    let agent = env
        .agent(NODE_0, "node_metric -1\n", &["--label-cleanup=own"])
        .await;
    let client = &env.client;
    until_event(
        client,
        NODE_0,
        "TelemetryLabelSet",
        "label scheduling-policy=violating set",
    )
    .await;
    // Recovered: the agent releases its share of the label, which `tas` keeps, and says so.
    script(&env.root(NODE_0), "node_metric 50\n");
    until_event(
        client,
        NODE_0,
        "TelemetryLabelLeft",
        "label scheduling-policy=violating no longer set by this agent",
    )
    .await;
    let l = labels(&nodes, NODE_0).await;
    assert_eq!(get(&l, "scheduling-policy"), Some("violating"), "{l:?}");
    assert_eq!(
        prefixed(&l),
        [
            "telemetry.aware.scheduling.old-policy/card0",
            "telemetry.aware.scheduling.scheduling-policy/label1"
        ],
        "{l:?}"
    );
    assert!(
        events(client, "default", "TelemetryLabelRemoved", NODE_0)
            .await
            .is_empty()
    );
    agent.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tas_cleanup_removes_labels_no_policy_sets_whoever_wrote_them_on_sim() {
    tas_cleanup(Env::on_sim().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tas_cleanup_removes_labels_no_policy_sets_whoever_wrote_them_on_real_control_plane() {
    let test = "tas_cleanup_removes_labels_no_policy_sets_whoever_wrote_them_on_real_control_plane";
    let Some(env) = Env::on_real_control_plane(test).await else {
        return;
    };
    tas_cleanup(env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conservative_option_keeps_labels_others_wrote_on_sim() {
    own_keeps_labels_others_wrote(Env::on_sim().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conservative_option_keeps_labels_others_wrote_on_real_control_plane() {
    let test = "the_conservative_option_keeps_labels_others_wrote_on_real_control_plane";
    let Some(env) = Env::on_real_control_plane(test).await else {
        return;
    };
    own_keeps_labels_others_wrote(env).await;
}
