//! The recovery signal end to end: a real agent against sim, telemetry scripted through a
//! textfile, the seed's scheduling policy (dontschedule: node_metric LessThan 10). Every Node
//! update is watched: the agent annotates its Node exactly once per recovery (and once at start,
//! a node coming back live), never while the node breaks the rule, and never twice in a row.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DynamicObject};
use kube::runtime::{WatchStreamExt as _, watcher};
use parking_lot::Mutex;
use telemesh_agent::enforcement::recovery::ANNOTATION;
use telemesh_runtime::testing::eventually;
use tokio_util::sync::CancellationToken;

use common::{PolicyEnv, WAIT, host_root, script};

const NODE: &str = "sim-node-0";

/// What the Node watch saw, in order: the annotation's value on every update that changed it.
type Seen = Arc<Mutex<Vec<String>>>;

async fn annotations_seen(seen: &Seen) -> Vec<String> {
    seen.lock().clone()
}

/// Waits until the policy's status says whether this node breaks dontschedule: the agent has
/// evaluated (and acted on) the scripted value.
async fn until_breaking(policies: &Api<DynamicObject>, breaking: bool) {
    eventually(
        &format!("{NODE} breaking dontschedule = {breaking} in the policy status"),
        WAIT,
        || {
            let policies = policies.clone();
            async move {
                let p = policies.get("scheduling-policy").await.ok()?;
                let strategies = p.data["status"]["nodes"][NODE]["strategies"].clone();
                let is = strategies
                    .as_array()
                    .is_some_and(|a| a.iter().any(|s| s == "dontschedule"));
                (is == breaking).then_some(())
            }
        },
    )
    .await;
}

async fn until_annotations(seen: &Seen, n: usize) -> Vec<String> {
    eventually(&format!("{n} recovery annotations"), WAIT, || {
        let seen = seen.clone();
        async move {
            let v = annotations_seen(&seen).await;
            (v.len() >= n).then_some(v)
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_is_annotated_once_per_recovery() {
    let env = PolicyEnv::start(1, &["scheduling-policy.yaml"]).await;
    let policies = env.policies.clone();

    // Every change of the annotation, as kube-scheduler's Node informer would see it.
    let seen: Seen = Arc::default();
    let nodes: Api<Node> = Api::all(env.client.clone());
    let watch = tokio::spawn({
        let seen = seen.clone();
        let stream = watcher(nodes.clone(), watcher::Config::default()).applied_objects();
        async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(Ok(node)) = stream.next().await {
                let value = node
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(ANNOTATION))
                    .cloned();
                let mut seen = seen.lock();
                if let Some(v) = value
                    && seen.last() != Some(&v)
                {
                    seen.push(v);
                }
            }
        }
    });

    // The node starts breaking the rule (node_metric 5 < 10).
    let root = env.dir.path().join("node-0");
    host_root(&root, "node_metric 5\n");
    let config = env.agent_config(
        NODE,
        &root,
        &[
            "--policy-interval=200ms".into(),
            "--recovery-signal-delay=300ms".into(),
            "--recovery-signal-min-interval=1s".into(),
        ],
    );
    let agent = telemesh_agent::start(config, CancellationToken::new())
        .await
        .unwrap();

    until_breaking(&policies, true).await;
    assert_eq!(
        annotations_seen(&seen).await,
        Vec::<String>::new(),
        "no signal while the node breaks the rule"
    );

    // Recovery: one annotation.
    script(&root, "node_metric 50\n");
    until_breaking(&policies, false).await;
    until_annotations(&seen, 1).await;

    // Broken again, then recovered again: exactly one more. Waiting for the break to show in
    // the status means the agent evaluated several more times after the first write.
    script(&root, "node_metric 5\n");
    until_breaking(&policies, true).await;
    assert_eq!(
        annotations_seen(&seen).await.len(),
        1,
        "one write per recovery"
    );
    script(&root, "node_metric 50\n");
    until_breaking(&policies, false).await;
    until_annotations(&seen, 2).await;
    script(&root, "node_metric 5\n");
    until_breaking(&policies, true).await;
    let seen_now = annotations_seen(&seen).await;
    assert_eq!(seen_now.len(), 2, "one write per recovery: {seen_now:?}");

    agent.shutdown().await;
    watch.abort();
}
