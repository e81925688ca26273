//! The agent and the extender decide every rule alike (issue 37): the real agent and coordinator
//! binaries against sim, two coordinator replicas, telemetry scripted through node-exporter
//! textfiles. An agent decides on its own readings (its `<policy>=violating` label, from the
//! policy's deschedule rules); each replica's extender decides on what gossip brought it (its
//! filter answer, from the same rules as dontschedule). Each test waits, within a bound on a
//! broken run, for every replica's answers to match the agents' labels:
//!
//! - a value next to its target (1000001 against `GreaterThan 1000000`), and a move across the
//!   target far smaller than the agents' publication deadband (1000001 to 999999.5): gossip
//!   carried values rounded to 6 digits, and the deadband held such a move back until its
//!   refresh (here an hour), so the extender decided on a value the node did not have;
//! - a metric removed from a node's textfile: unknown to both replicas as to its agent, whether
//!   its family's gossip key is rewritten without it or deleted with it. With the replicas'
//!   resync at an hour, the view kept the removed values.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::Api;
use serde_json::{Value, json};
use telemesh_core::policy::TASPolicy;
use telemesh_tests::SimEnv;
use telemesh_tests::mesh::{Coordinator, MESH_WAIT, Mesh};

const NAMESPACE: &str = "agreement";
const NODES: [&str; 2] = ["sim-node-0", "sim-node-1"];

/// Agents republish an unchanged value only after an hour, so nothing but the deadband's own
/// rules brings a small move to the replicas within a test.
const AGENT_ARGS: [&str; 1] = ["--refresh=1h"];
/// Replicas re-read every member only after an hour and keep values as long: what leaves their
/// view within a test left it through gossip's own updates.
const COORDINATOR_ARGS: [&str; 2] = ["--view-resync=1h", "--stale-after=2h"];

/// A policy whose `rule` is both a dontschedule rule (the extender's filter) and a deschedule
/// rule (the agent's `<name>=violating` label).
fn policy(name: &str, metric: &str, operator: &str, target: &str) -> TASPolicy {
    let rule = format!("{{metricname: {metric}, operator: {operator}, target: {target}}}");
    let yaml = format!(
        "apiVersion: telemetry.intel.com/v1alpha1\nkind: TASPolicy\n\
         metadata: {{name: {name}, namespace: {NAMESPACE}}}\nspec:\n  strategies:\n    \
         dontschedule:\n      rules: [{rule}]\n    deschedule:\n      rules: [{rule}]\n"
    );
    serde_yaml_ng::from_str(&yaml).unwrap_or_else(|e| panic!("policy {name}: {e}"))
}

/// sim with the nodes, the policies, one agent per `(node, textfile)` and two replicas.
async fn start(nodes: &[(&str, &str)], policies: &[TASPolicy]) -> (SimEnv, Client, Mesh) {
    telemesh_runtime::telemetry::init(telemesh_runtime::cli::LogFormat::Text, "warn");
    let env = SimEnv::start(nodes.len()).await;
    let client = env.client().await;
    telemesh_tests::cluster::install_policies(&client, NAMESPACE, policies).await;
    let mesh = Mesh::start_with(&env, nodes, &AGENT_ARGS, &COORDINATOR_ARGS, 2).await;
    (env, client, mesh)
}

/// The policies whose `<policy>=violating` label the agent of each of `nodes` has set, by node.
async fn agent_verdicts(
    client: &Client,
    nodes: &[&str],
    policies: &[&str],
) -> BTreeMap<String, Vec<String>> {
    let api: Api<Node> = Api::all(client.clone());
    let mut out = BTreeMap::new();
    for node in nodes {
        let labels = api
            .get(node)
            .await
            .unwrap_or_else(|e| panic!("reading node {node}: {e}"))
            .metadata
            .labels
            .unwrap_or_default();
        let violated = policies
            .iter()
            .filter(|p| labels.get(**p).is_some_and(|v| v == "violating"))
            .map(|p| (*p).to_owned())
            .collect();
        out.insert((*node).to_owned(), violated);
    }
    out
}

/// The policies whose filter answer on `coordinator` refuses each of `nodes`, by node: one call
/// per policy, for a pod linked to it.
async fn extender_verdicts(
    coordinator: &Coordinator,
    nodes: &[&str],
    policies: &[&str],
) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = nodes
        .iter()
        .map(|n| ((*n).to_owned(), Vec::new()))
        .collect();
    for policy in policies {
        let body = json!({
            "Pod": {"metadata": {"name": "probe", "namespace": NAMESPACE, "uid": "probe",
                                 "labels": {"telemetry-policy": policy}},
                    "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}},
            "NodeNames": nodes,
        });
        let url = format!("{}/filter", coordinator.url_prefix());
        let reply = telemesh_sim::cluster::http::request(
            http::Method::POST,
            &url,
            Some(serde_json::to_vec(&body).expect("a filter body")),
        )
        .await
        .unwrap_or_else(|e| panic!("{url}: {e:#}"));
        let reply: Value = serde_json::from_slice(&reply).expect("a JSON filter answer");
        let refused = reply["FailedAndUnresolvableNodes"]
            .as_object()
            .into_iter()
            .flatten();
        for (node, _) in refused {
            if let Some(list) = out.get_mut(node) {
                list.push((*policy).to_owned());
            }
        }
    }
    out
}

/// Waits until every node's agent labels exactly `expected` and every replica's filter answers
/// refuse exactly those (node, policy) pairs: the agents and both extenders agree, and on what
/// the values say. A broken run fails after [`MESH_WAIT`] with what each side decided last.
async fn wait_agreement(
    client: &Client,
    mesh: &Mesh,
    policies: &[&str],
    expected: &BTreeMap<String, Vec<String>>,
    what: &str,
) {
    let nodes: Vec<&str> = expected.keys().map(String::as_str).collect();
    let deadline = tokio::time::Instant::now() + MESH_WAIT;
    loop {
        let agents = agent_verdicts(client, &nodes, policies).await;
        let mut replicas = Vec::new();
        for c in &mesh.coordinators {
            replicas.push(extender_verdicts(c, &nodes, policies).await);
        }
        if agents == *expected && replicas.iter().all(|r| r == expected) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {MESH_WAIT:?} waiting for the agents and both replicas to agree on \
             {what}: expected {expected:?}, the agents' labels say {agents:?}, the replicas' \
             filters {replicas:?}"
        );
        // A poll interval, not a guess at timing.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

fn verdicts(pairs: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
    pairs
        .iter()
        .map(|(node, policies)| {
            (
                (*node).to_owned(),
                policies.iter().map(|p| (*p).to_owned()).collect(),
            )
        })
        .collect()
}

/// A byte count next to its target, and a move across it far inside the deadband.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_and_extender_decide_a_value_next_to_its_target_alike() {
    let metric = "node_test_used_bytes";
    let policies = [
        policy("above", metric, "GreaterThan", "1000000"),
        policy("below", metric, "LessThan", "1000001"),
    ];
    let names = ["above", "below"];
    let nodes = [
        (NODES[0], "node_test_used_bytes 1000001\n"),
        (NODES[1], "node_test_used_bytes 1000000\n"),
    ];
    let (_env, client, mesh) = start(&nodes, &policies).await;

    // 1000001 > 1000000 and not < 1000001; 1000000 the other way round.
    let expected = verdicts(&[(NODES[0], &["above"]), (NODES[1], &["below"])]);
    wait_agreement(&client, &mesh, &names, &expected, "1000001 and 1000000").await;

    // 1000001 to 999999.5: 1.5e-6 of the value, inside the 2 % deadband, across both targets.
    mesh.script(NODES[0], "node_test_used_bytes 999999.5\n");
    let expected = verdicts(&[(NODES[0], &["below"]), (NODES[1], &["below"])]);
    wait_agreement(&client, &mesh, &names, &expected, "999999.5 and 1000000").await;
    for c in &mesh.coordinators {
        let metrics = c.metrics().await;
        assert!(
            metrics.contains("telemesh_coordinator_view_resyncs_total 1\n"),
            "a resync would hide what is tested here:\n{metrics}"
        );
    }
}

/// Metrics removed from a node's textfile leave both replicas' decisions as they leave the
/// agent's: one whose family's key is rewritten without it (`node_probe` shares `M:node_` with
/// the load averages), one whose family's key is deleted (`node_lone_probe`, alone in
/// `M:node_lone_`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metric_removed_from_a_textfile_is_unknown_to_every_replica() {
    let policies = [
        policy("shared", "node_probe", "GreaterThan", "8"),
        policy("lone", "node_lone_probe", "GreaterThan", "8"),
    ];
    let names = ["shared", "lone"];
    let both = "node_probe 20\nnode_lone_probe 20\nnode_test_kept 1\n";
    let nodes = [(NODES[0], both), (NODES[1], both)];
    let (_env, client, mesh) = start(&nodes, &policies).await;
    let expected = verdicts(&[
        (NODES[0], &["shared", "lone"]),
        (NODES[1], &["shared", "lone"]),
    ]);
    wait_agreement(&client, &mesh, &names, &expected, "both metrics at 20").await;

    // Unknown, as to the agent (not violating, the default): kept by every filter.
    mesh.script(NODES[0], "node_test_kept 1\n");
    let expected = verdicts(&[(NODES[0], &[]), (NODES[1], &["shared", "lone"])]);
    wait_agreement(
        &client,
        &mesh,
        &names,
        &expected,
        "sim-node-0's metrics removed",
    )
    .await;
    mesh.wait_node(NODES[0], |n| {
        n["metrics"]["node_probe"].is_null()
            && n["metrics"]["node_lone_probe"].is_null()
            && n["metrics"]["node_test_kept"]["value"] == 1.0
    })
    .await;
    for c in &mesh.coordinators {
        let metrics = c.metrics().await;
        assert!(
            metrics.contains("telemesh_coordinator_view_resyncs_total 1\n"),
            "a resync would hide what is tested here:\n{metrics}"
        );
    }
    // Back again: known and refused again everywhere.
    mesh.script(NODES[0], both);
    let expected = verdicts(&[
        (NODES[0], &["shared", "lone"]),
        (NODES[1], &["shared", "lone"]),
    ]);
    wait_agreement(
        &client,
        &mesh,
        &names,
        &expected,
        "sim-node-0's metrics back",
    )
    .await;
}
