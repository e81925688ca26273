//! The rewards story (`telemesh-sim dev --story rewards`): kubeRL's demo, measured. Pods of type
//! D run on every node; sim-node-1's kubelet crashes them every 10 s and sim-node-2's every
//! 60 s. New D pods are placed one by one through the scheduler and the coordinators' extender,
//! and the share that lands on the failing nodes is printed: before any failure, while the
//! agents learn, once they have learnt (target: at most 2 %), for another type E (which should
//! still use those nodes), and one half-life after the faults stop (the nodes win D pods back).
//!
//! The start-failure variant (`--story rewards-start`, [`play_start`]) is the same measure with
//! kubeRL's own failures instead of crashes: sim-node-1 cannot create a sandbox for D pods
//! (`FailedCreatePodSandBox`) and sim-node-2 cannot pull their image (a registry lookup that
//! times out there), so D pods placed there never start. The agents count each such pod once
//! after their start grace (agent/src/rewards/start.rs); a new pinned D pod is put on each
//! failing node every few seconds while the faults hold, as the crash variant's probes crash
//! again and again.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use tokio::sync::{broadcast, watch};

use telemesh_sim::cluster::kubelet::{Fault, FaultRule};
use telemesh_sim::cluster::scheduler::Decision;

use super::story::Story;
use telemesh_sim::processes::Processes;

const NS: &str = "rl-demo";
/// The nodes the demo makes fail, and how often.
const FAILING: [(&str, u64); 2] = [("sim-node-1", 10), ("sim-node-2", 60)];

/// Placement shares measured in one phase.
#[derive(Debug, Clone, Default)]
struct Share {
    on_failing: usize,
    total: usize,
    per_node: BTreeMap<String, usize>,
}

impl Share {
    fn add(&mut self, other: &Share) {
        self.on_failing += other.on_failing;
        self.total += other.total;
        for (n, c) in &other.per_node {
            *self.per_node.entry(n.clone()).or_default() += c;
        }
    }

    /// `sim-node-0 x12, sim-node-3 x13`.
    fn placement(&self) -> String {
        let parts: Vec<String> = self
            .per_node
            .iter()
            .map(|(n, c)| format!("{n} x{c}"))
            .collect();
        parts.join(", ")
    }

    /// `<when>: 0.0 % of 50 new D pods landed on the failing nodes ... (sim-node-0 x25, ...)`.
    fn describe(&self, when: &str, podtype: &str) -> String {
        format!(
            "{when}: {:.1} % of {} new {podtype} pods landed on the failing nodes sim-node-1/sim-node-2 ({})",
            self.percent(),
            self.total,
            self.placement()
        )
    }

    fn percent(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            100.0 * self.on_failing as f64 / self.total as f64
        }
    }
}

/// Where the story learns which node each new pod went to.
pub enum Placements {
    /// sim's scheduler stand-in reports each placement as it binds the pod.
    Decisions(broadcast::Receiver<Decision>),
    /// Any other scheduler (the real kube-scheduler) reports nothing to us: the pod's
    /// `spec.nodeName`, read through the API.
    Api,
}

/// How long a new pod may take to be placed.
const PLACED_WITHIN: Duration = Duration::from_secs(30);

impl Placements {
    /// The node pod `NS/name` was placed on; an error after [`PLACED_WITHIN`].
    async fn node_of(&mut self, client: &Client, name: &str) -> anyhow::Result<String> {
        let key = format!("{NS}/{name}");
        let placed = match self {
            Self::Decisions(decisions) => {
                tokio::time::timeout(PLACED_WITHIN, decided(decisions, &key))
                    .await
                    .ok()
                    .flatten()
            }
            Self::Api => {
                let api = Api::<Pod>::namespaced(client.clone(), NS);
                let bound = kube::runtime::wait::await_condition(api, name, |p: Option<&Pod>| {
                    node_name(p).is_some()
                });
                tokio::time::timeout(PLACED_WITHIN, bound)
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .and_then(|p| node_name(p.as_ref()))
            }
        };
        placed.with_context(|| format!("{key} was not placed within {PLACED_WITHIN:?}"))
    }
}

/// The node of the stand-in's next decision to place `key`; None if it stopped.
async fn decided(decisions: &mut broadcast::Receiver<Decision>, key: &str) -> Option<String> {
    loop {
        match decisions.recv().await {
            Ok(Decision::Placed { pod, node, .. }) if pod == key => return Some(node),
            Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
            Err(broadcast::error::RecvError::Closed) => return None,
        }
    }
}

fn node_name(pod: Option<&Pod>) -> Option<String> {
    pod?.spec.as_ref()?.node_name.clone()
}

/// Plays the story; `Ok(true)` when every target was met.
pub async fn play(
    story: &Story,
    client: &Client,
    faults: &watch::Sender<Vec<FaultRule>>,
    decisions: &mut Placements,
    processes: &mut Processes,
    half_life: Duration,
    coordinator_apis: &[SocketAddr],
) -> anyhow::Result<bool> {
    let nodes: Vec<String> = (0..).map(|i| format!("sim-node-{i}")).take(4).collect();
    create_namespace(client).await?;
    for node in &nodes {
        create_pod(client, &format!("probe-{node}"), "D", Some(node)).await?;
    }
    story.say("type D runs on every node (probe pods); new pods of D and E opt in to the extender");
    let before = measure(story, client, decisions, "before", "D", 20).await?;
    story.say(&before.describe("before any failure", "D"));
    let rules = FAILING
        .iter()
        .map(|(node, every)| FaultRule {
            node: (*node).to_owned(),
            selector: BTreeMap::from([("podtype".to_owned(), "D".to_owned())]),
            fault: Fault::Crash,
            every: Duration::from_secs(*every),
        })
        .collect();
    faults.send_replace(rules);
    story.say("faults on: sim-node-1 crashes D pods every 10 s, sim-node-2 every 60 s");
    wait_first_failure(client, processes).await?;
    story.say("first failure observed (probe-sim-node-1 restarted)");
    // Learning lasts 60 s and until sim-node-2, which fails once a minute, has failed twice. By
    // the model's design one crash after a healthy minute is weak evidence (its bound is back at
    // neutral within seconds: core::reward::estimate), so "learnt" is measured once the agents
    // have seen the second, as kubeRL's demo ran for many minutes of both nodes failing. Within
    // each of its crashes' back-off the evidence on both nodes is fresh.
    // "Learnt" starts once every coordinator's view holds that second failure, not when sim
    // records it: the agent, gossip and the view take a second or two, more on a loaded
    // machine, and pods placed meanwhile would measure that delay instead of the learning.
    // What each view held the last time sim had not yet recorded the second failure is the
    // baseline: bad evidence only decays until a new failure adds to it.
    let learning_until = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut learning = Share::default();
    let mut round = 0;
    let mut bad_before_second = bad_evidence(coordinator_apis).await?;
    loop {
        let second_failure = restarts(client, "probe-sim-node-2").await? >= 2;
        if !second_failure {
            // Read after sim's count: it holds nothing of a failure sim had not yet recorded.
            bad_before_second = bad_evidence(coordinator_apis).await?;
        }
        if second_failure && tokio::time::Instant::now() >= learning_until {
            break;
        }
        learning_round(story, client, decisions, processes, &mut learning, round).await?;
        round += 1;
    }
    story.say(&learning.describe(
        "while learning (60 s, and until sim-node-2 failed twice)",
        "D",
    ));
    until_views_hold_more_bad_evidence(coordinator_apis, &bad_before_second).await?;
    let learnt = measure(story, client, decisions, "learnt", "D", 50).await?;
    story.say(&learnt.describe("learnt (target at most 2 %)", "D"));
    let other = measure(story, client, decisions, "other", "E", 20).await?;
    story.say(&other.describe("another type, which the failing nodes do not fail", "E"));
    faults.send_replace(Vec::new());
    story.say(&format!(
        "faults off; waiting one reward half-life ({half_life:?})"
    ));
    tokio::time::sleep(half_life).await;
    let recovered = measure(story, client, decisions, "recovered", "D", 20).await?;
    story.say(&recovered.describe("one half-life after the faults stopped", "D"));
    Ok(report(
        "rewards",
        [&before, &learning, &learnt, &other, &recovered],
    ))
}

/// How often a new pinned D pod is put on each failing node while the start faults hold.
const START_PROBE_EVERY: Duration = Duration::from_secs(5);
/// The label of those pods.
const START_PROBE: (&str, &str) = ("rl-demo", "start-probe");

/// Plays the start-failure variant; `Ok(true)` when every target was met (the crash story's).
pub async fn play_start(
    story: &Story,
    client: &Client,
    faults: &watch::Sender<Vec<FaultRule>>,
    decisions: &mut Placements,
    processes: &mut Processes,
    half_life: Duration,
    coordinator_apis: &[SocketAddr],
) -> anyhow::Result<bool> {
    let nodes: Vec<String> = (0..).map(|i| format!("sim-node-{i}")).take(4).collect();
    create_namespace(client).await?;
    for node in &nodes {
        create_pod(client, &format!("probe-{node}"), "D", Some(node)).await?;
    }
    story.say("type D runs on every node (probe pods); new pods of D and E opt in to the extender");
    let before = measure(story, client, decisions, "before", "D", 20).await?;
    story.say(&before.describe("before any failure", "D"));
    let rules = [(FAILING[0].0, Fault::Sandbox), (FAILING[1].0, Fault::Pull)]
        .into_iter()
        .map(|(node, fault)| FaultRule {
            node: node.to_owned(),
            selector: BTreeMap::from([("podtype".to_owned(), "D".to_owned())]),
            fault,
            every: Duration::ZERO,
        })
        .collect();
    faults.send_replace(rules);
    story.say(
        "start faults on: sim-node-1 cannot create D pods' sandboxes, sim-node-2 cannot pull \
         their image; a new D pod is pinned to each every 5 s",
    );
    let probes = AbortOnDrop(tokio::spawn(start_probes(client.clone())));
    // Learning lasts 60 s and until every coordinator's view holds a start failure of D on both
    // failing nodes (one counted failure is 2 bad, decaying).
    let learning_until = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut learning = Share::default();
    let mut round = 0;
    loop {
        let mut learnt_everywhere = true;
        for (node, _) in FAILING {
            let bad = bad_evidence_on(coordinator_apis, node).await?;
            learnt_everywhere &= bad.iter().all(|b| *b >= 1.5);
        }
        if learnt_everywhere && tokio::time::Instant::now() >= learning_until {
            break;
        }
        // Start failures reach the views within grace + a few seconds; two minutes more means
        // they never will.
        if tokio::time::Instant::now() >= learning_until + Duration::from_secs(120) {
            anyhow::bail!(
                "the coordinators' views never showed start failures of {MEASURED_TYPE} on both \
                 failing nodes: see the agents' logs (\"a pod failed to start on this node\")"
            );
        }
        learning_round(story, client, decisions, processes, &mut learning, round).await?;
        round += 1;
    }
    story.say(&learning.describe(
        "while learning (60 s, and until both failing nodes' start failures reached every view)",
        "D",
    ));
    let learnt = measure(story, client, decisions, "learnt", "D", 50).await?;
    story.say(&learnt.describe("learnt (target at most 2 %)", "D"));
    let other = measure(story, client, decisions, "other", "E", 20).await?;
    story.say(&other.describe("another type, which the failing nodes start", "E"));
    drop(probes);
    faults.send_replace(Vec::new());
    let api = Api::<Pod>::namespaced(client.clone(), NS);
    let selector = format!("{}={}", START_PROBE.0, START_PROBE.1);
    let stuck = api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .len();
    api.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels(&selector),
    )
    .await
    .context("deleting the start probes")?;
    story.say(&format!(
        "faults off ({stuck} pinned D pods never started); waiting one reward half-life ({half_life:?})"
    ));
    tokio::time::sleep(half_life).await;
    let recovered = measure(story, client, decisions, "recovered", "D", 20).await?;
    story.say(&recovered.describe("one half-life after the faults stopped", "D"));
    Ok(report(
        "rewards (start failures)",
        [&before, &learning, &learnt, &other, &recovered],
    ))
}

/// A D pod pinned to `node` that requests nothing: the scheduler's resource balancing must
/// not see the failing nodes fill up with pods that never start (they would lose E pods too).
async fn create_start_probe(client: &Client, name: &str, node: &str) -> anyhow::Result<()> {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"podtype": "D", START_PROBE.0: START_PROBE.1}},
        "spec": {"nodeName": node,
                 "containers": [{"name": "work", "image": "registry.k8s.io/pause:3.10"}]},
    }))?;
    Api::<Pod>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &pod)
        .await
        .with_context(|| format!("creating pod {name}"))?;
    Ok(())
}

/// Aborts its task when dropped (the story ends or fails).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Pins a new D pod to each failing node every [`START_PROBE_EVERY`], until aborted.
async fn start_probes(client: Client) {
    for i in 0.. {
        for (node, _) in FAILING {
            let name = format!("start-{node}-{i}");
            if let Err(e) = create_start_probe(&client, &name, node).await {
                tracing::debug!(pod = %name, error = format!("{e:#}"), "creating a start probe failed");
            }
        }
        tokio::time::sleep(START_PROBE_EVERY).await;
    }
}

async fn create_namespace(client: &Client) -> anyhow::Result<()> {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .context("creating namespace rl-demo")?;
    Ok(())
}

/// A pod of `podtype`, opted in to the extender like TAS pods; pinned to `node` if given.
async fn create_pod(
    client: &Client,
    name: &str,
    podtype: &str,
    node: Option<&str>,
) -> anyhow::Result<()> {
    let mut spec = json!({
        "containers": [{"name": "work", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                          "limits": {"telemetry/scheduling": "1"}}}]
    });
    if let Some(node) = node {
        spec["nodeName"] = json!(node);
    }
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"podtype": podtype, "rl-demo": "measure"}},
        "spec": spec,
    }))?;
    Api::<Pod>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &pod)
        .await
        .with_context(|| format!("creating pod {name}"))?;
    Ok(())
}

/// One round while the agents learn: checks the dev cluster's processes, places two D pods
/// (added to `learning`), then waits 3 s.
async fn learning_round(
    story: &Story,
    client: &Client,
    decisions: &mut Placements,
    processes: &mut Processes,
    learning: &mut Share,
    round: usize,
) -> anyhow::Result<()> {
    super::story::check_processes(processes)?;
    let s = measure(
        story,
        client,
        decisions,
        &format!("learning-{round}"),
        "D",
        2,
    )
    .await?;
    learning.add(&s);
    tokio::time::sleep(Duration::from_secs(3)).await;
    Ok(())
}

/// Prints a story's figures line (`<label>: before ... targets met|MISSED`) from its phases
/// (before, learning, learnt, other type, recovered) and returns whether every target was met:
/// at most 2 % of D on the failing nodes once learnt, and some E pods and some recovered D pods
/// on them.
fn report(label: &str, [before, learning, learnt, other, recovered]: [&Share; 5]) -> bool {
    let met = learnt.percent() <= 2.0 && other.on_failing > 0 && recovered.on_failing > 0;
    println!(
        "{label}: before {:.1} %  learning {:.1} %  learnt {:.1} %  other-type {:.1} %  recovered {:.1} %  targets {}",
        before.percent(),
        learning.percent(),
        learnt.percent(),
        other.percent(),
        recovered.percent(),
        if met { "met" } else { "MISSED" }
    );
    met
}

/// Creates `count` pods of `podtype` one at a time, each placed before the next is created;
/// returns how many landed on the failing nodes, then deletes them.
async fn measure(
    story: &Story,
    client: &Client,
    decisions: &mut Placements,
    phase: &str,
    podtype: &str,
    count: usize,
) -> anyhow::Result<Share> {
    let mut share = Share::default();
    let api = Api::<Pod>::namespaced(client.clone(), NS);
    let mut names = Vec::new();
    for i in 0..count {
        let name = format!("{}-{phase}-{i}", podtype.to_lowercase());
        create_pod(client, &name, podtype, None).await?;
        let node = decisions.node_of(client, &name).await?;
        share.total += 1;
        *share.per_node.entry(node.clone()).or_default() += 1;
        if FAILING.iter().any(|(n, _)| *n == node) {
            share.on_failing += 1;
        }
        names.push(name);
    }
    for name in names {
        if let Err(e) = api.delete(&name, &DeleteParams::default()).await {
            story.say(&format!("could not delete {name}: {e}"));
        }
    }
    Ok(share)
}

async fn wait_first_failure(client: &Client, processes: &mut Processes) -> anyhow::Result<()> {
    loop {
        super::story::check_processes(processes)?;
        if restarts(client, "probe-sim-node-1").await? > 0 {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The container restarts of `pod` so far.
/// The pod type whose placements the story measures, as the agents name it.
const MEASURED_TYPE: &str = "rl-demo/D";
/// The node whose second failure ends the learning.
const SLOW_FAILING: &str = "sim-node-2";

/// Each coordinator's decayed bad evidence for [`MEASURED_TYPE`] on [`SLOW_FAILING`]
/// (`GET /api/v1/rewards`), 0 where its view has no estimate yet.
async fn bad_evidence(apis: &[SocketAddr]) -> anyhow::Result<Vec<f64>> {
    bad_evidence_on(apis, SLOW_FAILING).await
}

/// Each coordinator's decayed bad evidence for [`MEASURED_TYPE`] on `node`, 0 where its view
/// has no estimate yet.
async fn bad_evidence_on(apis: &[SocketAddr], node: &str) -> anyhow::Result<Vec<f64>> {
    let mut out = Vec::with_capacity(apis.len());
    for api in apis {
        let url = format!("http://{api}/api/v1/rewards?podType={MEASURED_TYPE}");
        let body = telemesh_sim::cluster::http::request(http::Method::GET, &url, None).await?;
        let rewards: serde_json::Value =
            serde_json::from_slice(&body).with_context(|| format!("GET {url}: not JSON"))?;
        let bad = rewards["nodes"]
            .as_array()
            .and_then(|nodes| nodes.iter().find(|n| n["node"] == node))
            .and_then(|n| n["bad"].as_f64())
            .unwrap_or(0.0);
        out.push(bad);
    }
    Ok(out)
}

/// Waits until every coordinator's bad evidence exceeds `before`: decay only lowers it, so
/// more means the new failure reached that view.
async fn until_views_hold_more_bad_evidence(
    apis: &[SocketAddr],
    before: &[f64],
) -> anyhow::Result<()> {
    // A failure reaches the views in seconds; half a minute means it never will.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let now = bad_evidence(apis).await?;
        if now.iter().zip(before).all(|(n, b)| n > b) {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!(
                "the coordinators' views never showed {SLOW_FAILING}'s second failure of \
                 {MEASURED_TYPE} (bad evidence {now:?}, before it {before:?}): see the agents' \
                 and coordinators' logs"
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn restarts(client: &Client, pod: &str) -> anyhow::Result<i32> {
    let pod = Api::<Pod>::namespaced(client.clone(), NS).get(pod).await?;
    Ok(pod
        .status
        .and_then(|s| s.container_statuses)
        .unwrap_or_default()
        .iter()
        .map(|c| c.restart_count)
        .sum())
}
