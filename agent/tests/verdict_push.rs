//! The collection loop pushes a publication that flips this node's dontschedule verdict, or that
//! removes a metric, to the coordinator replicas (gossip observers) at once, and leaves every
//! other change to the gossip rounds. Paused clock, chitchat's channel transport, 10 s rounds:
//! between rounds only a push can carry a change to the observer.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use chitchat::transport::ChannelTransport;
use kube::runtime::reflector;
use kube::runtime::watcher::Event;
use prometheus_client::registry::Registry;
use telemesh_agent::collection::collect::CollectorConfig;
use telemesh_agent::collection::{Inputs, run};
use telemesh_agent::metrics::AgentMetrics;
use telemesh_core::gossip::Role;
use telemesh_core::policy::{TASPolicy, Unknown};
use telemesh_runtime::gossip::{GossipConfig, GossipMember, Security};
use tokio_util::sync::CancellationToken;

const POLICY: &str = r#"
apiVersion: telemetry.intel.com/v1alpha1
kind: TASPolicy
metadata: {name: busy, namespace: default}
spec:
  strategies:
    dontschedule:
      rules:
      - {metricname: node_load1, operator: GreaterThan, target: 8}
"#;

fn write_load(root: &Path, load1: f64) {
    std::fs::write(
        root.join("proc/loadavg"),
        format!("{load1:.2} 1.00 1.00 1/100 123\n"),
    )
    .unwrap();
}

fn member(name: &str, port: u16, role: Role, seeds: Vec<String>) -> GossipConfig {
    let mut c = GossipConfig::new(
        name,
        "mesh",
        SocketAddr::from(([127, 0, 0, 1], port)),
        Security::Insecure,
    );
    c.gossip_interval = Duration::from_secs(10);
    c.role = role;
    c.seeds = seeds;
    c
}

/// The observer's reading of the agent's `node_load1`.
async fn heard(observer: &GossipMember) -> Option<f64> {
    let m = observer.member("node-a").await?;
    m.state.metric("node_load1").map(|v| v.value)
}

/// The real collection loop over `root` (its textfile directory `/textfile`) for agent `node-a`,
/// with the policy above in its watch, and an observer seeded with the agent.
struct Scene {
    observer: GossipMember,
    metrics: AgentMetrics,
    stop: CancellationToken,
    collection: tokio::task::JoinHandle<()>,
}

async fn start(root: &Path, ports: (u16, u16)) -> Scene {
    let channel = ChannelTransport::with_mtu(65_507);
    let agent = GossipMember::start_on(member("node-a", ports.0, Role::Agent, vec![]), &channel)
        .await
        .unwrap();
    let seed = vec![agent.id().gossip_addr.to_string()];
    let observer = GossipMember::start_on(
        member("coordinator-0", ports.1, Role::Observer, seed),
        &channel,
    )
    .await
    .unwrap();

    let (policies, mut policy_writer) = reflector::store::<TASPolicy>();
    policy_writer.apply_watcher_event(&Event::Apply(serde_yaml_ng::from_str(POLICY).unwrap()));
    let (pods, _pod_writer) = reflector::store();
    let mut registry = Registry::default();
    let metrics = AgentMetrics::register(&mut registry);
    let stop = CancellationToken::new();
    let inputs = Inputs {
        node_name: "node-a".into(),
        collector: CollectorConfig {
            textfile_dir: Some("/textfile".into()),
            ..CollectorConfig::with_root(root.to_path_buf())
        },
        interval: Duration::from_secs(1),
        deadband: Default::default(),
        prometheus_endpoints: Vec::new(),
        pods,
        pods_synced: Arc::new(AtomicBool::new(true)),
        policies,
        unknown: Unknown::NotViolating,
        gossip: Arc::new(tokio::sync::Mutex::new(Some(agent))),
        counters: Arc::default(),
        latest_pods: Arc::default(),
        latest_samples: Arc::default(),
        metrics: metrics.clone(),
        http: Arc::new(telemesh_agent::http::HttpState {
            registry,
            ready: AtomicBool::new(false),
            debug_state: Box::new(|| Box::pin(async { serde_json::Value::Null })),
        }),
    };
    let collection = tokio::spawn(run(inputs, stop.clone()));
    Scene {
        observer,
        metrics,
        stop,
        collection,
    }
}

/// A host root with `/proc/meminfo` from the fixture, load 1 and `textfile` as its textfile.
fn host(root: &Path, textfile: &str) {
    std::fs::create_dir_all(root.join("proc")).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/host-a/proc/meminfo");
    std::fs::copy(fixture, root.join("proc/meminfo")).unwrap();
    write_load(root, 1.0);
    write_textfile(root, textfile);
}

fn write_textfile(root: &Path, text: &str) {
    std::fs::create_dir_all(root.join("textfile")).unwrap();
    std::fs::write(root.join("textfile/metrics.prom"), text).unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_verdict_flip_reaches_the_replicas_before_the_next_round() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    host(root, "");
    let Scene {
        observer,
        metrics,
        stop,
        collection,
    } = start(root, (30_031, 30_032)).await;

    // Rounds at 0, 10 and 20 s (the agent's first publication travels with them); collections
    // on every whole second. The next round is at 30 s.
    tokio::time::sleep(Duration::from_millis(25_500)).await;
    assert_eq!(
        heard(&observer).await,
        Some(1.0),
        "the first value, by the rounds"
    );
    assert_eq!(metrics.verdict_pushes.get(), 0, "no verdict flipped yet");

    // Read at 26 s: the node now breaks the policy, so the observer hears it at once.
    write_load(root, 20.0);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(heard(&observer).await, Some(20.0), "the flip was pushed");
    assert_eq!(
        metrics.verdict_pushes.get(),
        1,
        "one exchange, with the one observer"
    );

    // Still breaking: published at 27 s but not pushed, so the observer waits for the round.
    write_load(root, 25.0);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(heard(&observer).await, Some(20.0), "no push without a flip");
    assert_eq!(metrics.verdict_pushes.get(), 1);

    // Back under the target at 28 s: pushed again.
    write_load(root, 3.0);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        heard(&observer).await,
        Some(3.0),
        "the flip back was pushed"
    );
    assert_eq!(metrics.verdict_pushes.get(), 2);

    stop.cancel();
    collection.await.unwrap();
}

/// A metric the node stops measuring (here, dropped from its textfile) is pushed too, though no
/// policy reads it: its removal must reach the replicas' views within the freshness target.
#[tokio::test(start_paused = true)]
async fn a_removed_metric_reaches_the_replicas_before_the_next_round() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    host(root, "node_lone_probe 5\nnode_kept_probe 1\n");
    let Scene {
        observer,
        metrics,
        stop,
        collection,
    } = start(root, (30_033, 30_034)).await;
    let holds = |key: &'static str| {
        let observer = &observer;
        async move {
            let mut held = false;
            observer
                .visit_keys(["node-a"], |_, keys| held = keys.get(key).is_some())
                .await;
            held
        }
    };

    // Rounds at 0, 10 and 20 s bring the first publication; the next round is at 30 s.
    tokio::time::sleep(Duration::from_millis(25_500)).await;
    assert!(holds("M:node_lone_").await && holds("M:node_kept_").await);
    assert_eq!(metrics.verdict_pushes.get(), 0, "nothing removed yet");

    // Read at 26 s: the series is gone, its family's key deleted, and the observer hears it.
    write_textfile(root, "node_kept_probe 1\n");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!holds("M:node_lone_").await, "the removal was pushed");
    assert!(holds("M:node_kept_").await);
    assert_eq!(
        metrics.verdict_pushes.get(),
        1,
        "one exchange, with the one observer"
    );

    stop.cancel();
    collection.await.unwrap();
}
