//! The policy loop: every evaluation period, every TASPolicy is evaluated against this node's
//! latest collection ([`mod@plan`] decides, purely), and the node is brought in line: its labels
//! ([`labeler`]), its entry in each policy's status, its `v:` gossip keys, and the eviction of its
//! pods linked to a violated deschedule policy ([`evictor`]). Nothing is written when nothing
//! changed. When the node stops breaking every dontschedule rule, [`recovery`] annotates the
//! Node so kube-scheduler retries the pods our extender held back.
//!
//! Evaluation, gossip and metrics run every period whatever the API server does; the writes
//! go behind the agent's one backoff ([`api_backoff`]): when one finds the server
//! unavailable, the rest of the pass waits, and they all catch up once a write gets through.
//!
//! Status: each agent writes only `status.nodes.<its node>` of a policy, by JSON merge patch on
//! the status subresource: agents never contend for one field (no resourceVersion conflicts at
//! 5,000 nodes), and a reader sees in one object which nodes violate which rule with which
//! value. The entry is rewritten when the set of violated rules changes, not when a value moves
//! while the rules stay violated (that would be a write per tick). `status.problems` is written
//! by whichever agent first sees it differ from the compiled policy's problems; every agent
//! computes the same list, so late writers find it done. Every patch goes through
//! [`scope::status_patch`] before it is sent, so no other node's entry is ever written.
//!
//! Labels: the agent applies what the policies want (server-side apply, [`labeler`]);
//! under `--label-cleanup tas` it then removes, whoever wrote them, the labels in TAS's
//! namespace no current policy sets on its node ([`label_cleanup`]), read from the apply's
//! answer or from its watch of its own Node ([`crate::watch::node_watch`]).
//!
//! Label collisions: `<policy>=violating` is keyed by the bare policy name because the
//! descheduler's node affinity (`<policy> NotIn [violating]`) and TAS users expect that key. Two
//! policies with one name in two namespaces therefore share the label, which is set while either
//! is violated; their pods are still evicted only for their own namespace's policy.

pub mod api_backoff;
pub mod evictor;
pub mod label_cleanup;
pub mod labeler;
pub mod plan;
pub mod recovery;
pub mod scope;

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::Store;
use kube::{Api, Client, ResourceExt as _};
use telemesh_core::gossip::StateKey;
use telemesh_core::policy::crd::NodeViolation;
use telemesh_core::policy::{NodeReadings, POLICY_LINK_LABEL, Policy, TASPolicy};
use telemesh_runtime::gossip::GossipMember;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use self::api_backoff::SharedApiBackoff;
use self::evictor::{Outcome, eligibility, truncate};
use self::label_cleanup::{LabelCleanup, PolicyNames, Removal};
use self::labeler::{LabelChange, Labeler, Removed};
use self::plan::{Eviction, Plan, StatusEntry, ViolatingSince, node_state, plan};
use self::recovery::RecoverySignal;
use self::scope::Refusals;
use crate::config::PolicyConfig;
use crate::metrics::{AgentMetrics, EvictionLabels, LabelWriteLabels};
use crate::shared::LatestSamples;
use crate::watch::node_watch::{self, OwnNode};
use crate::watch::policies::Compiled;

/// What the loop needs from the rest of the agent.
pub struct Inputs {
    /// This node.
    pub node_name: String,
    /// Client for labels, status and events: a [`crate::shared::write_client`].
    pub client: Client,
    /// The agent's backoff for an unavailable API server, shared with the evictor.
    pub backoff: SharedApiBackoff,
    /// The node's evictor (shared with the scavenger loop, so the rate limit is the node's);
    /// `None`: local eviction is off.
    pub evictor: Option<crate::shared::SharedEvictor>,
    /// All TASPolicies.
    pub policies: Store<TASPolicy>,
    /// This node's pods.
    pub pods: Store<Pod>,
    /// The collection loop's output.
    pub samples: LatestSamples,
    /// The gossip member, for `v:` keys (None once shut down).
    pub gossip: crate::shared::SharedGossip,
    /// This node's metadata, watched under `--label-cleanup tas` ([`crate::watch::node_watch`]).
    pub own_node: Option<OwnNode>,
    /// Settings.
    pub config: PolicyConfig,
    /// Metrics.
    pub metrics: AgentMetrics,
}

/// Whether two entries name the same violated rules (values and `since` aside).
fn same_rules(a: &NodeViolation, b: &NodeViolation) -> bool {
    let key = |e: &NodeViolation| {
        e.rules
            .iter()
            .map(|r| {
                (
                    r.strategy.clone(),
                    r.metricname.clone(),
                    r.operator.clone(),
                    r.target.to_bits(),
                )
            })
            .collect::<Vec<_>>()
    };
    a.strategies == b.strategies && key(a) == key(b)
}

/// Runs the loop until `stop`.
pub async fn run(inputs: Inputs, stop: CancellationToken) {
    let Inputs {
        node_name,
        client,
        backoff,
        evictor,
        policies,
        pods,
        samples,
        gossip,
        own_node,
        config,
        metrics,
    } = inputs;
    let reporter = Reporter {
        controller: "telemesh-agent".into(),
        instance: Some(node_name.clone()),
    };
    let recorder = Recorder::new(client.clone(), reporter);
    let mut labeler = Labeler::new(Api::<Node>::all(client.clone()), &node_name);
    let refusals = metrics.refusals();
    let mut recovery = RecoverySignal::new(config.recovery);
    let node_ref = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(node_name.clone()),
        ..Default::default()
    };
    let mut compiled = Compiled::default();
    let mut written: HashMap<String, Option<NodeViolation>> = HashMap::new();
    let mut gossiped: BTreeMap<String, String> = BTreeMap::new();
    let mut violating_since = ViolatingSince::new();
    let mut label_reasons: BTreeMap<String, String> = BTreeMap::new();
    let mut names = PolicyNames::default();

    if policies.wait_until_ready().await.is_err() {
        return;
    }
    let mut tick = tokio::time::interval(config.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tick.tick() => {}
        }
        let Some((at, latest)) = samples.read().clone() else {
            continue; // nothing collected yet
        };
        // One span per pass: its events carry the node.
        async {
        let state = node_state(&latest, at);
        let readings = NodeReadings {
            state: &state,
            now: SystemTime::now(),
            stale_after: config.stale_after,
        };
        let current = compiled.refresh(&policies);
        names.observe(current.iter().map(|(raw, _)| raw.as_ref()));
        let Plan {
            labels: desired,
            reasons,
            violations,
            statuses,
            breaking_dont_schedule,
            evict,
            violating_since: next,
        } = plan(
            &current,
            &readings,
            &violating_since,
            Instant::now(),
            &config,
        );
        violating_since = next;
        written.retain(|k, _| current.iter().any(|(_, p)| p.key() == *k));
        // Gossip and metrics from memory, whatever the API server does.
        metrics.policies_violated.set(violations.len() as i64);
        sync_gossip(&gossip, &violations, &mut gossiped).await;
        let announce = recovery.observe(breaking_dont_schedule, Instant::now());

        // The writes, while the API server answers; the first that finds it unavailable ends
        // the pass, and the next pass waits for the agent's backoff.
        let mut writes = Writes::begin(&backoff);
        for StatusEntry { raw, policy, entry } in statuses {
            if !writes.open() {
                break;
            }
            let result = sync_status(
                &client,
                &raw,
                &policy,
                &node_name,
                entry,
                &mut written,
                &refusals,
            )
            .await;
            let sent = *result.as_ref().unwrap_or(&Sent::Answered);
            writes.note(&result, sent, "writing the policy status");
        }
        if writes.open() {
            let sent = if labeler.needs_request(&desired) {
                Sent::Answered
            } else {
                Sent::Nothing
            };
            let result = labeler.sync(&desired).await;
            writes.note(&result, sent, "writing policy labels");
            if let Ok(synced) = result {
                let mut change = synced.change;
                let mut cleaned = Vec::new();
                if config.label_cleanup == LabelCleanup::Tas && writes.open() {
                    // The apply's answer is fresher than the watch.
                    let node = synced
                        .node
                        .or_else(|| own_node.as_ref().and_then(node_watch::current));
                    if let Some(node) = node {
                        let (sent, result) = clean_up(&labeler, node, &desired, &names).await;
                        writes.note(&result, sent, "removing stale policy labels");
                        if let Ok(removed) = result {
                            names.settle(&removed.node.labels.unwrap_or_default());
                            cleaned = removed.removed;
                        }
                    }
                }
                // Under `tas` a label the apply released is the clean-up's: removed above and
                // told as such, or, if that failed, removed and told at a later pass.
                if config.label_cleanup == LabelCleanup::Tas {
                    change.kept.clear();
                }
                if !change.is_empty() || !cleaned.is_empty() {
                    record_label_events(
                        &recorder,
                        &node_ref,
                        &change,
                        &cleaned,
                        &reasons,
                        &label_reasons,
                    )
                    .await;
                    for (action, n) in [
                        ("set", change.set.len()),
                        ("removed", change.removed.len()),
                        ("cleaned", cleaned.len()),
                    ] {
                        metrics
                            .labels_written
                            .get_or_create(&LabelWriteLabels {
                                action: action.into(),
                            })
                            .inc_by(n as u64);
                    }
                }
                label_reasons = reasons;
            }
        }
        if announce {
            let result = if writes.open() {
                let result =
                    crate::enforcement::recovery::announce(&Api::<Node>::all(client.clone()), &node_name).await;
                writes.note(&result, Sent::Answered, "writing the recovery annotation");
                result.is_ok()
            } else {
                false
            };
            if result {
                tracing::info!(
                    node.name = %node_name,
                    "node breaks no dontschedule rule; annotated so the scheduler retries held-back pods"
                );
            } else {
                recovery.write_failed();
            }
        }

        if let Some(evictor) = evictor.as_ref().filter(|_| writes.open()) {
            let mut evictor = evictor.lock().await;
            let pods_now = pods.state();
            evictor.retain(&pods_now.iter().filter_map(|p| p.uid()).collect());
            'evict: for Eviction { policy, reason } in &evict {
                for pod in pods_now.iter().filter(|p| linked(p, policy)) {
                    let age = pod_age(pod);
                    if eligibility(pod, age, evictor.config().min_pod_age).is_err()
                        || evictor.evicted(pod)
                    {
                        continue;
                    }
                    let outcome = evictor.evict(pod, reason, Instant::now()).await;
                    metrics
                        .evictions
                        .get_or_create(&EvictionLabels {
                            outcome: outcome.as_str().into(),
                        })
                        .inc();
                    if outcome == Outcome::RateLimited || outcome.api_unavailable() {
                        break 'evict;
                    }
                }
            }
        }
        }
        .instrument(tracing::info_span!("policy_pass", node.name = %node_name))
        .await;
    }
}

/// Whether a write went to the API server (and, given an `Ok`, was answered).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    /// A request went out.
    Answered,
    /// Nothing needed writing: no request.
    Nothing,
}

/// One pass's writes behind the agent's backoff ([`api_backoff`]).
struct Writes<'a> {
    backoff: &'a SharedApiBackoff,
    open: bool,
}

impl<'a> Writes<'a> {
    /// Open when the backoff lets a write go now.
    fn begin(backoff: &'a SharedApiBackoff) -> Self {
        let open = backoff.lock().ready(Instant::now());
        Self { backoff, open }
    }

    /// Whether this pass may still write.
    fn open(&self) -> bool {
        self.open
    }

    /// Notes what a write's result says about the API server (and logs a failure): an
    /// unavailable server closes the pass and backs off; an answer, even a refusal, resets the
    /// backoff.
    fn note<T>(&mut self, result: &Result<T, kube::Error>, sent: Sent, what: &'static str) {
        let Err(e) = result else {
            // Only an answer says the server is back: a writer with nothing to send must not
            // reset the wait another writer's failure started, or a down server gets a request
            // every pass (seen: the labeler's node read every 0.9 s through a 60 s outage).
            if sent == Sent::Answered {
                self.backoff.lock().succeeded();
            }
            return;
        };
        match api_backoff::unavailable(e) {
            Some(retry_after) => {
                let wait =
                    self.backoff
                        .lock()
                        .failed(Instant::now(), retry_after, api_backoff::draw());
                self.open = false;
                tracing::warn!(error = %e, wait = ?wait, "{what} failed: the API server is unavailable; writes wait for the backoff while evaluation goes on");
            }
            None => {
                self.backoff.lock().succeeded();
                tracing::warn!(error = %e, "{what} failed; retrying next period");
            }
        }
    }
}

/// Whether `pod` is linked to `policy`: label `telemetry-policy=<name>` in the policy's namespace.
pub fn linked(pod: &Pod, policy: &Policy) -> bool {
    pod.namespace().as_deref() == Some(policy.namespace.as_str())
        && pod.labels().get(POLICY_LINK_LABEL) == Some(&policy.name)
}

fn pod_age(pod: &Pod) -> Option<Duration> {
    let created = pod.metadata.creation_timestamp.as_ref()?;
    let now = k8s_openapi::jiff::Timestamp::now();
    let span = now.duration_since(created.0);
    Duration::try_from(span).ok()
}

/// Brings this node's entry (and the problems) in the policy's status in line.
async fn sync_status(
    client: &Client,
    raw: &TASPolicy,
    policy: &Policy,
    node_name: &str,
    entry: Option<NodeViolation>,
    written: &mut HashMap<String, Option<NodeViolation>>,
    refusals: &Refusals,
) -> Result<Sent, kube::Error> {
    let key = policy.key();
    let status = raw.status.clone().unwrap_or_default();
    let stored = status.nodes.get(node_name);
    let unchanged = |have: Option<&NodeViolation>| match (have, &entry) {
        (None, None) => true,
        (Some(a), Some(b)) => same_rules(a, b),
        _ => false,
    };
    let entry_ok = match written.get(&key) {
        Some(last) => unchanged(last.as_ref()),
        None => unchanged(stored),
    };
    let problems: Vec<String> = policy.problems.iter().map(ToString::to_string).collect();
    let problems_ok = status.problems == problems;
    if entry_ok && problems_ok {
        written.insert(key, stored.cloned().or(entry));
        return Ok(Sent::Nothing);
    }
    let mut entry = entry;
    if !entry_ok && let Some(e) = entry.as_mut() {
        // A violation that goes on under other rules keeps its start.
        e.since = stored
            .and_then(|s| s.since.clone())
            .or_else(|| Some(k8s_openapi::jiff::Timestamp::now().to_string()));
    }
    let patch = status_patch(
        node_name,
        (!entry_ok).then_some(entry.as_ref()),
        (!problems_ok).then_some(problems.as_slice()),
    );
    if let Err(e) = scope::status_patch(node_name, &key, &patch) {
        refusals.refuse(&e);
        return Ok(Sent::Nothing);
    }
    let api: Api<TASPolicy> = Api::namespaced(client.clone(), &policy.namespace);
    match api
        .patch_status(&policy.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {
            written.insert(key, entry);
            Ok(Sent::Answered)
        }
        Err(e) => {
            written.remove(&key);
            Err(e)
        }
    }
}

/// The merge patch of a policy's status that writes this node's entry (`Some(None)` removes it)
/// and the problems, each only when given.
pub fn status_patch(
    node_name: &str,
    entry: Option<Option<&NodeViolation>>,
    problems: Option<&[String]>,
) -> serde_json::Value {
    let mut patch = serde_json::json!({ "status": {} });
    if let Some(entry) = entry {
        patch["status"]["nodes"] = serde_json::json!({ node_name: entry });
    }
    if let Some(problems) = problems {
        patch["status"]["problems"] = serde_json::json!(problems);
    }
    patch
}

/// Removes from this Node the labels in TAS's namespace that no current policy sets
/// ([`label_cleanup::stale`], decided on `node`, the Node's metadata now); with nothing to
/// remove, sends nothing and answers `node` itself.
async fn clean_up(
    labeler: &Labeler,
    node: ObjectMeta,
    desired: &BTreeMap<String, String>,
    names: &PolicyNames,
) -> (Sent, Result<Removed, kube::Error>) {
    let decide = |meta: &ObjectMeta| {
        let labels = meta.labels.clone().unwrap_or_default();
        label_cleanup::stale(&labels, desired, names, LabelCleanup::Tas)
    };
    let removals = decide(&node);
    if removals.is_empty() {
        let nothing = Removed {
            removed: Vec::new(),
            node,
        };
        return (Sent::Nothing, Ok(nothing));
    }
    (Sent::Answered, labeler.remove(removals, node, decide).await)
}

async fn record_label_events(
    recorder: &Recorder,
    node: &ObjectReference,
    change: &LabelChange,
    cleaned: &[Removal],
    reasons: &BTreeMap<String, String>,
    previous: &BTreeMap<String, String>,
) {
    let mut events = Vec::new();
    let no_longer = |k: &str| {
        previous
            .get(k)
            .map(|r| format!("no longer true ({r})"))
            .unwrap_or_else(|| "no longer true or its policy was deleted".into())
    };
    for (k, v) in &change.set {
        let why = reasons
            .get(k)
            .map(String::as_str)
            .unwrap_or("policy violated");
        events.push((
            k.as_str(),
            "TelemetryLabelSet",
            format!("label {k}={v} set: {why}"),
        ));
    }
    for k in &change.removed {
        let why = no_longer(k);
        events.push((
            k.as_str(),
            "TelemetryLabelRemoved",
            format!("label {k} removed: {why}"),
        ));
    }
    for r in cleaned {
        let by = if r.written_by.is_empty() {
            String::new()
        } else {
            format!("; set by {}", r.written_by.join(", "))
        };
        events.push((
            r.key.as_str(),
            "TelemetryLabelRemoved",
            format!(
                "label {}={} removed: {}{by} (--label-cleanup=tas removes TAS's labels whoever wrote them)",
                r.key, r.value, r.why
            ),
        ));
    }
    for (k, v) in &change.kept {
        let why = no_longer(k);
        events.push((
            k.as_str(),
            "TelemetryLabelLeft",
            format!(
                "label {k}={v} no longer set by this agent ({why}) but left on the node: another field manager set it too, and --label-cleanup=own removes only labels the agent alone wrote"
            ),
        ));
    }
    for (key, reason, note) in events {
        let event = Event {
            type_: EventType::Normal,
            reason: reason.into(),
            note: Some(truncate(&note, 1000)),
            // kube's Recorder folds events of one action and reason into one Event's series,
            // keeping the first note: naming the label keeps each label's event its own, and
            // a repeat of the same one counts in its series (action is at most 128 bytes).
            action: truncate(&format!("Label {key}"), 128),
            secondary: None,
        };
        if let Err(e) = recorder.publish(&event, node).await {
            tracing::debug!(error = %e, "recording a node label event failed");
        }
    }
}

/// Publishes `v:<namespace>/<policy>` = violated strategies, deleting keys no longer true.
async fn sync_gossip(
    gossip: &tokio::sync::Mutex<Option<GossipMember>>,
    violations: &BTreeMap<String, String>,
    published: &mut BTreeMap<String, String>,
) {
    if violations == published {
        return;
    }
    let guard = gossip.lock().await;
    let Some(member) = guard.as_ref() else { return };
    for (k, v) in violations {
        if published.get(k) != Some(v)
            && let Err(e) = member.set(&StateKey::Violation(k.clone()), v).await
        {
            tracing::warn!(policy = %k, error = %e, "publishing a violation to gossip failed");
        }
    }
    for k in published.keys().filter(|k| !violations.contains_key(*k)) {
        if let Err(e) = member.delete(&StateKey::Violation(k.clone())).await {
            tracing::warn!(policy = %k, error = %e, "removing a violation from gossip failed");
        }
    }
    *published = violations.clone();
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A writer with nothing to send leaves the wait another writer's failure started: only an
    /// answered request resets it.
    #[test]
    fn only_an_answered_write_resets_the_backoff() {
        let backoff = SharedApiBackoff::default();
        backoff
            .lock()
            .failed(Instant::now(), None, api_backoff::draw());
        let mut writes = Writes::begin(&backoff);
        writes.note(&Ok::<_, kube::Error>(()), Sent::Nothing, "nothing to write");
        assert_eq!(backoff.lock().failures(), 1, "a no-op reset the backoff");
        writes.note(&Ok::<_, kube::Error>(()), Sent::Answered, "a write");
        assert_eq!(backoff.lock().failures(), 0);
    }

    #[test]
    fn status_patches_name_this_nodes_entry_only() {
        let entry: NodeViolation = serde_json::from_value(serde_json::json!({
            "strategies": ["deschedule"], "since": "2026-01-01T00:00:00Z"
        }))
        .unwrap();
        let problems = ["unknown strategy x".to_owned()];
        let full = status_patch("node-a", Some(Some(&entry)), Some(&problems));
        assert_eq!(
            full["status"]["nodes"]
                .as_object()
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            ["node-a"]
        );
        assert_eq!(full["status"]["problems"], serde_json::json!(problems));
        assert_eq!(scope::status_patch("node-a", "ns/p", &full), Ok(()));
        let cleared = status_patch("node-a", Some(None), None);
        assert_eq!(
            cleared,
            serde_json::json!({"status": {"nodes": {"node-a": null}}})
        );
        let problems_only = status_patch("node-a", None, Some(&problems));
        assert!(problems_only["status"].get("nodes").is_none());
    }
}
