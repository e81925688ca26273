//! TASPolicies end to end: two real agents against sim, telemetry scripted through textfiles,
//! the seed's two TAS policy files applied unchanged. A metric crosses the deschedule threshold
//! → the node is labelled `<policy>=violating` and its linked pods are evicted (unlinked ones
//! stay, one protected by a PodDisruptionBudget waits); labeling-strategy labels appear and go;
//! a restarted agent neither evicts twice nor leaves a stale label. Labels others wrote in TAS's
//! namespace: label_cleanup.rs.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use telemesh_core::policy::TASPolicy;
use telemesh_runtime::testing::eventually;
use tokio_util::sync::CancellationToken;

use common::{NS, PolicyEnv, WAIT, events, host_root, labels, script};

fn pod(name: &str, node: &str, labels: serde_json::Value) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]},
    }))
    .unwrap()
}

/// Marks a pod Running and Ready (sim has no kubelet yet), so budgets count it healthy.
async fn make_ready(pods: &Api<Pod>, name: &str) {
    let status = serde_json::json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

/// Waits until `node` carries `key=want` (or, with `None`, no `key`).
async fn until_label(nodes: &Api<Node>, node: &str, key: &str, want: Option<&str>) {
    eventually(&format!("{node}: {key}={want:?}"), WAIT, || async move {
        (labels(nodes, node).await.get(key).map(String::as_str) == want).then_some(())
    })
    .await;
}

/// Waits until the agent's `/metrics` at `addr` contains `needle`.
async fn until_metrics_contain(addr: std::net::SocketAddr, needle: &str) {
    use http_body_util::BodyExt as _;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Empty<bytes::Bytes>>();
    eventually(&format!("/metrics to contain {needle}"), WAIT, || {
        let client = client.clone();
        async move {
            let uri = format!("http://{addr}/metrics").parse().unwrap();
            let body = client
                .get(uri)
                .await
                .ok()?
                .into_body()
                .collect()
                .await
                .ok()?;
            String::from_utf8_lossy(&body.to_bytes())
                .contains(needle)
                .then_some(())
        }
    })
    .await;
}

/// The names of the pods not being deleted: no kubelet runs here to finish an evicted pod, so
/// it stays Terminating (its deletionTimestamp set), as on a real API server.
async fn pod_names(pods: &Api<Pod>) -> Vec<String> {
    let mut names: Vec<String> = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.metadata.name)
        .collect();
    names.sort();
    names
}

struct Cluster<'a> {
    env: &'a PolicyEnv,
    roots: Vec<PathBuf>,
    seeds: Vec<String>,
}

impl Cluster<'_> {
    async fn start_agent(&mut self, i: usize) -> telemesh_agent::Agent {
        let node = format!("sim-node-{i}");
        let mut extra = vec![
            "--policy-interval=500ms".to_string(),
            "--violation-grace=0s".into(),
            "--min-pod-age=0s".into(),
        ];
        if !self.seeds.is_empty() {
            extra.push(format!("--gossip-seeds={}", self.seeds.join(",")));
        }
        let config = self.env.agent_config(&node, &self.roots[i], &extra);
        let agent = telemesh_agent::start(config, CancellationToken::new())
            .await
            .unwrap();
        if self.seeds.is_empty() {
            self.seeds.push(agent.gossip_addr.to_string());
        }
        agent
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_policies_label_evict_and_clean_up_across_a_restart() {
    // The CRD, the namespace and the seed's policy files, unchanged.
    let env = PolicyEnv::start(2, &["scheduling-policy.yaml", "multirules-policy.yaml"]).await;
    let client = env.client.clone();
    let policies = env.policies.clone();

    // Pods: on node 0 two linked, one linked but protected by a budget, one unlinked; on node 1
    // one linked (its node stays healthy).
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let linked = serde_json::json!({"telemetry-policy": "scheduling-policy"});
    for (name, node, labels) in [
        ("linked-1", "sim-node-0", linked.clone()),
        ("linked-2", "sim-node-0", linked.clone()),
        (
            "guarded",
            "sim-node-0",
            serde_json::json!({"telemetry-policy": "scheduling-policy", "app": "guarded"}),
        ),
        (
            "unlinked",
            "sim-node-0",
            serde_json::json!({"app": "other"}),
        ),
        ("elsewhere", "sim-node-1", linked.clone()),
    ] {
        pods.create(&PostParams::default(), &pod(name, node, labels))
            .await
            .unwrap();
        make_ready(&pods, name).await;
    }
    let pdb: PodDisruptionBudget = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "guarded", "namespace": NS},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
    }))
    .unwrap();
    Api::<PodDisruptionBudget>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &pdb)
        .await
        .unwrap();

    let nodes: Api<Node> = Api::all(client.clone());

    let mut cluster = Cluster {
        env: &env,
        roots: (0..2)
            .map(|i| env.dir.path().join(format!("node-{i}")))
            .collect(),
        seeds: Vec::new(),
    };
    host_root(&cluster.roots[0], "node_metric 50\n");
    host_root(
        &cluster.roots[1],
        "node_metric 50\ntemperature 90\nfreeRAM 500\n",
    );
    let agent0 = cluster.start_agent(0).await;
    let agent1 = cluster.start_agent(1).await;

    // Healthy: the problems field stays empty and no label is written.
    eventually("no labels while healthy", WAIT, || {
        let nodes = nodes.clone();
        async move {
            let l = labels(&nodes, "sim-node-0").await;
            (!l.contains_key("scheduling-policy")).then_some(())
        }
    })
    .await;

    // node_metric Equals -1 breaks `deschedule` on node 0.
    let crossed = Instant::now();
    script(&cluster.roots[0], "node_metric -1\n");
    eventually("sim-node-0 labelled violating", WAIT, || {
        let nodes = nodes.clone();
        async move {
            let l = labels(&nodes, "sim-node-0").await;
            (l.get("scheduling-policy").map(String::as_str) == Some("violating")).then_some(())
        }
    })
    .await;
    eprintln!(
        "label after the threshold crossing: {:?} (policy interval 500 ms, collect 100 ms)",
        crossed.elapsed()
    );
    eventually("linked pods evicted", WAIT, || {
        let pods = pods.clone();
        async move {
            let names = pod_names(&pods).await;
            (names == ["elsewhere", "guarded", "unlinked"]).then_some(())
        }
    })
    .await;
    eprintln!("linked pods gone after: {:?}", crossed.elapsed());
    // The agent records the Event after the eviction is answered, so the pod can be gone from
    // the list before its Event is written.
    let evicted = eventually("linked-1's Evicted event", WAIT, || {
        let client = client.clone();
        async move {
            let evicted = events(&client, NS, "Evicted", "linked-1").await;
            (!evicted.is_empty()).then_some(evicted)
        }
    })
    .await;
    assert_eq!(evicted.len(), 1, "{evicted:?}");
    let note = evicted[0].note.clone().unwrap_or_default();
    assert!(
        note.contains("health-metric-demo/scheduling-policy deschedule")
            && note.contains("node_metric Equals -1 (value -1)"),
        "{note}"
    );
    assert_eq!(
        labels(&nodes, "sim-node-1").await.get("scheduling-policy"),
        None
    );

    // The policy's status names the node, the rules and the value.
    let status = eventually("status names sim-node-0", WAIT, || {
        let client = client.clone();
        async move {
            let p = Api::<TASPolicy>::namespaced(client, NS)
                .get("scheduling-policy")
                .await
                .unwrap();
            p.status.and_then(|s| s.nodes.get("sim-node-0").cloned())
        }
    })
    .await;
    assert_eq!(status.strategies, ["deschedule", "dontschedule"]);
    assert_eq!(status.rules[0].metricname, "node_metric");
    assert_eq!(status.rules[0].value, Some(-1.0));
    assert!(status.since.is_some());
    // Recorded after the label write, like the eviction's Event.
    let label_events = eventually("sim-node-0's TelemetryLabelSet event", WAIT, || {
        let client = client.clone();
        async move {
            let events = events(&client, "default", "TelemetryLabelSet", "sim-node-0").await;
            (!events.is_empty()).then_some(events)
        }
    })
    .await;
    assert_eq!(label_events.len(), 1, "{label_events:?}");

    // The budget-protected pod waits: its evictions are refused, not forced.
    let http0 = agent0.http_addr;
    until_metrics_contain(
        http0,
        "telemesh_agent_evictions_total{outcome=\"blocked_by_budget\"}",
    )
    .await;
    assert!(pod_names(&pods).await.contains(&"guarded".to_string()));

    // A crash while violating, then a restart: no second eviction, no second label write.
    agent0.kill().await;
    pods.create(
        &PostParams::default(),
        &pod("unlinked-2", "sim-node-0", serde_json::json!({})),
    )
    .await
    .unwrap();
    let agent0 = cluster.start_agent(0).await;
    let http0 = agent0.http_addr;
    until_metrics_contain(http0, "telemesh_agent_policies_violated 1").await;
    // Two more periods to let any duplicate show.
    let settle = Instant::now();
    eventually("two evaluation periods pass", WAIT, || async move {
        (settle.elapsed() >= Duration::from_millis(1200)).then_some(())
    })
    .await;
    assert_eq!(events(&client, NS, "Evicted", "linked-1").await.len(), 1);
    assert_eq!(events(&client, NS, "Evicted", "linked-2").await.len(), 1);
    assert_eq!(
        events(&client, "default", "TelemetryLabelSet", "sim-node-0")
            .await
            .len(),
        1
    );

    // Above 100, `labeling` applies its labels and `deschedule` lets go.
    script(&cluster.roots[0], "node_metric 150\n");
    eventually("labeling labels set, violator label gone", WAIT, || {
        let nodes = nodes.clone();
        async move {
            let l = labels(&nodes, "sim-node-0").await;
            (l.get("telemetry.aware.scheduling.scheduling-policy/label1")
                .map(String::as_str)
                == Some("foo")
                && l.get("telemetry.aware.scheduling.scheduling-policy/label2")
                    .map(String::as_str)
                    == Some("bar")
                && !l.contains_key("scheduling-policy"))
            .then_some(())
        }
    })
    .await;

    // The metric returns to normal while the agent is down: the restarted agent removes the
    // labels the previous run wrote.
    agent0.kill().await;
    script(&cluster.roots[0], "node_metric 50\n");
    let agent0 = cluster.start_agent(0).await;
    eventually("stale labels removed after the restart", WAIT, || {
        let nodes = nodes.clone();
        async move {
            let l = labels(&nodes, "sim-node-0").await;
            (!l.keys()
                .any(|k| k.starts_with("telemetry.aware.scheduling.scheduling-policy/")))
            .then_some(l)
        }
    })
    .await;
    eventually("the status entry is cleared", WAIT, || {
        let client = client.clone();
        async move {
            let p = Api::<TASPolicy>::namespaced(client, NS)
                .get("scheduling-policy")
                .await
                .unwrap();
            (!p.status
                .unwrap_or_default()
                .nodes
                .contains_key("sim-node-0"))
            .then_some(())
        }
    })
    .await;

    // multirules-policy's deschedule is allOf: hot alone is not enough, hot and short of memory is.
    assert_eq!(
        labels(&nodes, "sim-node-1").await.get("multirules-policy"),
        None
    );
    script(
        &cluster.roots[1],
        "node_metric 50\ntemperature 90\nfreeRAM 100\n",
    );
    until_label(&nodes, "sim-node-1", "multirules-policy", Some("violating")).await;
    // Its pod is linked to the other policy, which sim-node-1 does not violate.
    assert!(pod_names(&pods).await.contains(&"elsewhere".to_string()));

    // Deleting a policy removes its labels.
    policies
        .delete("multirules-policy", &Default::default())
        .await
        .unwrap();
    eventually("a deleted policy's label goes", WAIT, || {
        let nodes = nodes.clone();
        async move {
            (!labels(&nodes, "sim-node-1")
                .await
                .contains_key("multirules-policy"))
            .then_some(())
        }
    })
    .await;

    // A policy with a strategy TAS does not define is reported in its status, and the rest of
    // it still works.
    let broken: DynamicObject = serde_yaml_ng::from_str(
        r#"
apiVersion: telemetry.intel.com/v1alpha1
kind: TASPolicy
metadata: {name: broken, namespace: health-metric-demo}
spec:
  strategies:
    spreadevenly:
      rules: [{metricname: node_metric, operator: GreaterThan, target: 1}]
    deschedule:
      rules: [{metricname: node_metric, operator: GreaterThan, target: 10}]
"#,
    )
    .unwrap();
    policies
        .create(&PostParams::default(), &broken)
        .await
        .unwrap();
    let problems = eventually("problems reported", WAIT, || {
        let client = client.clone();
        async move {
            let p = Api::<TASPolicy>::namespaced(client, NS)
                .get("broken")
                .await
                .unwrap();
            p.status
                .filter(|s| !s.problems.is_empty())
                .map(|s| s.problems)
        }
    })
    .await;
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("\"spreadevenly\" is unknown"),
        "{problems:?}"
    );
    until_label(&nodes, "sim-node-1", "broken", Some("violating")).await;

    agent0.shutdown().await;
    agent1.shutdown().await;
}
