//! sim's kube-scheduler: binds pending pods to nodes the way kube-scheduler does for Telemesh's
//! purposes. Per pod: the default filters ([`super::fit`]), then every interested extender's
//! filter, then scores (LeastAllocated 0..=100 plus each extender's 0..=10 score × weight × 10,
//! upstream's scaling), the best node (ties broken at random, as upstream), and a Binding (or the
//! extender's bind verb). A pod no node takes goes through upstream's default preemption
//! ([`preemption`]: victims on each node, the extenders' preempt verb, one node picked); the
//! victims get the `DisruptionTarget` condition and are deleted, and the pod is nominated to
//! the node (`status.nominatedNodeName`) and placed on a later attempt. Either way it gets
//! `PodScheduled=False/Unschedulable` and a `FailedScheduling` Event, and is retried.
//!
//! It is a client of the API server like the real one: three reflectors (nodes, pods,
//! PodDisruptionBudgets) and writes through the kube client.

pub mod config;
pub mod extender;
pub mod preemption;
pub mod upstream;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{reflector, watcher};
use kube::{Client, Resource as _, ResourceExt as _};
use rand::seq::IndexedRandom as _;
use serde_json::json;
use tokio::sync::{Notify, broadcast};
use tokio_util::sync::CancellationToken;

use telemesh_core::extender::{ExtenderArgs, ExtenderBindingArgs, MAX_EXTENDER_PRIORITY, Victims};

use self::config::SchedulerConfiguration;
use self::extender::ExtenderClient;
use super::pod_state::is_terminal;
use telemesh_core::fit::{self, NodeInfo};

/// kube-scheduler's `MaxNodeScore`; extender scores are scaled to it.
const MAX_NODE_SCORE: i64 = 100;

/// How the scheduler runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Pods whose `spec.schedulerName` is this (or unset) are ours, unless `config` has
    /// profiles: then the profiles' names are.
    pub scheduler_name: String,
    /// Extenders and their options.
    pub config: SchedulerConfiguration,
    /// How often the queue is looked at without a cluster event: pods whose binding failed are
    /// tried again then, and unschedulable pods once they are due for the flush.
    pub retry: Duration,
    /// How long a pod no node takes waits without a cluster event before it is tried again:
    /// upstream's `podMaxInUnschedulablePodsDuration` (5 minutes).
    pub flush: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            scheduler_name: "default-scheduler".into(),
            config: SchedulerConfiguration::default(),
            retry: Duration::from_secs(1),
            flush: Duration::from_secs(300),
        }
    }
}

/// What the scheduler decided for one pod, for whoever watches it work (the dev cluster's story).
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Bound to `node`; `filtered` are the nodes extenders turned down, with their reasons.
    Placed {
        /// `namespace/name`.
        pod: String,
        /// The node it was bound to.
        node: String,
        /// Node → reason, from extenders' filters.
        filtered: BTreeMap<String, String>,
    },
    /// No node takes it now.
    Unschedulable {
        /// `namespace/name`.
        pod: String,
        /// kube-scheduler's summary (`0/4 nodes are available: ...`).
        message: String,
    },
}

/// Runs the scheduler until `stop`. Decisions are sent on `decisions` (nobody need listen).
pub async fn run(
    client: Client,
    settings: Settings,
    decisions: broadcast::Sender<Decision>,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let extenders = settings
        .config
        .extenders
        .iter()
        .cloned()
        .map(ExtenderClient::new)
        .collect::<anyhow::Result<Vec<_>>>()?;
    let changed = Arc::new(Notify::new());
    let (nodes, nodes_writer) = reflector::store::<Node>();
    let (pods, pods_writer) = reflector::store::<Pod>();
    let (pdbs, pdbs_writer) = reflector::store::<PodDisruptionBudget>();
    let node_stream = reflector(
        nodes_writer,
        watcher(Api::<Node>::all(client.clone()), watcher::Config::default()),
    );
    let pod_stream = reflector(
        pods_writer,
        watcher(Api::<Pod>::all(client.clone()), watcher::Config::default()),
    );
    tokio::spawn(super::notify::notify_on_change(
        node_stream,
        changed.clone(),
        stop.clone(),
    ));
    tokio::spawn(super::notify::notify_on_change(
        pod_stream,
        changed.clone(),
        stop.clone(),
    ));
    let pdb_stream = reflector(
        pdbs_writer,
        watcher(
            Api::<PodDisruptionBudget>::all(client.clone()),
            watcher::Config::default(),
        ),
    );
    tokio::spawn(super::notify::notify_on_change(
        pdb_stream,
        changed.clone(),
        stop.clone(),
    ));
    tokio::select! {
        () = stop.cancelled() => return Ok(()),
        ready = async { tokio::try_join!(nodes.wait_until_ready(), pods.wait_until_ready(), pdbs.wait_until_ready()) } => {
            ready.map_err(|e| anyhow::anyhow!("scheduler caches never filled: {e}"))?;
        }
    }
    let mut scheduler = Scheduler {
        recorder: Recorder::new(
            client.clone(),
            Reporter {
                controller: settings.scheduler_name.clone(),
                instance: None,
            },
        ),
        client,
        ignored: settings
            .config
            .scheduler_names(&settings.scheduler_name)
            .into_iter()
            .map(|name| {
                let ignored = settings.config.ignored_resources(&name);
                (name, ignored)
            })
            .collect(),
        served: settings.config.scheduler_names(&settings.scheduler_name),
        settings,
        extenders,
        assumed: HashMap::new(),
        unschedulable: HashMap::new(),
        decisions,
    };
    tracing::info!(
        extenders = scheduler.extenders.len(),
        "sim scheduler running"
    );
    loop {
        tokio::select! {
            () = stop.cancelled() => return Ok(()),
            () = changed.notified() => {}
            () = tokio::time::sleep(scheduler.settings.retry) => {}
        }
        let budgets: Vec<preemption::Budget> = pdbs
            .state()
            .iter()
            .map(|pdb| preemption::Budget::from_object(pdb))
            .collect();
        scheduler
            .pass(&nodes.state(), &pods.state(), &budgets)
            .await;
    }
}

/// What kube-scheduler (v1.32) writes into PodScheduled and the FailedScheduling Event when no
/// node takes a pod (`FitError.Error`): the filters' reasons, then what its PostFilter
/// (DefaultPreemption) said, e.g. `preemption: 0/3 nodes are available: 1 Preemption is not
/// helpful for scheduling, 2 No preemption victims found for incoming pod.`; nothing after the
/// filters' reasons when preemption succeeded.
pub fn unschedulable_message(total: usize, filters: &[String], post_filter: &str) -> String {
    let message = fit::unschedulable_message(total, filters);
    if post_filter.is_empty() {
        message
    } else {
        format!("{message} {post_filter}")
    }
}

/// Why one node did not take a pod: the filter's reason and whether it is
/// UnschedulableAndUnresolvable (taints, affinity, an extender's FailedAndUnresolvableNodes),
/// which preemption never tries.
#[derive(Debug, Clone)]
struct NodeStatus {
    reason: String,
    unresolvable: bool,
}

/// Why `place` found no node.
enum Unplaced {
    /// The filters turned every node down (a FitError: preemption runs).
    Fit(BTreeMap<String, NodeStatus>),
    /// Scheduling failed as a whole (a non-ignorable extender failed): no preemption.
    Error(String),
}

/// A pending pod nominated to a node: counted there for pods of lower or equal priority
/// (upstream's `RunFilterPluginsWithNominatedPods`).
#[derive(Debug, Clone)]
struct Nominee {
    uid: String,
    namespace: String,
    name: String,
    priority: i32,
    requests: fit::Resources,
}

impl Nominee {
    /// `pod` (whose uid is `uid`) as a nominee asking for `requests`.
    fn of(pod: &Pod, uid: String, requests: fit::Resources) -> Self {
        Self {
            uid,
            namespace: pod.namespace().unwrap_or_default(),
            name: pod.name_any(),
            priority: preemption::priority(pod),
            requests,
        }
    }
}

/// What one pass knows besides the node infos: the pods on each node and the nominations.
struct PassState<'a> {
    on_node: BTreeMap<String, Vec<&'a Pod>>,
    nominated: BTreeMap<String, Vec<Nominee>>,
    budgets: &'a [preemption::Budget],
}

/// `node`'s info with the nominated pods that `pod` must leave room for added.
fn with_nominated<'i>(
    info: &'i NodeInfo,
    nominated: &BTreeMap<String, Vec<Nominee>>,
    pod: &Pod,
) -> std::borrow::Cow<'i, NodeInfo> {
    let uid = pod.uid().unwrap_or_default();
    let priority = preemption::priority(pod);
    let ahead: Vec<&Nominee> = nominated
        .get(&info.name)
        .into_iter()
        .flatten()
        .filter(|n| n.uid != uid && n.priority >= priority)
        .collect();
    if ahead.is_empty() {
        return std::borrow::Cow::Borrowed(info);
    }
    let mut info = info.clone();
    for n in ahead {
        info.add(&n.requests);
    }
    std::borrow::Cow::Owned(info)
}

/// `status.nominatedNodeName`, if set.
fn nominated_node(pod: &Pod) -> Option<&str> {
    pod.status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref())
        .filter(|n| !n.is_empty())
}

/// What a preemption attempt decided for the pod's nomination (upstream's `NominatingInfo`).
#[derive(Debug, Clone, PartialEq)]
enum Nomination {
    /// Left as it is.
    Keep,
    /// Set to this node (`Some`) or cleared (`None`).
    Set(Option<String>),
}

struct Scheduler {
    client: Client,
    settings: Settings,
    extenders: Vec<ExtenderClient>,
    /// Per served scheduler name (profile): the resources its fit check skips.
    ignored: BTreeMap<String, BTreeSet<String>>,
    /// The `spec.schedulerName`s this scheduler serves.
    served: BTreeSet<String>,
    recorder: Recorder,
    /// Pods bound by this scheduler that the pod cache has not shown bound yet (upstream's
    /// assume cache): counted on their node so two passes never overfill it.
    assumed: HashMap<String, (String, fit::Resources)>,
    /// Pod UID → why no node took it and when, so a retry does not repeat the Event and the pod
    /// waits for a cluster event or the flush, as in upstream's unschedulable queue.
    unschedulable: HashMap<String, Unschedulable>,
    decisions: broadcast::Sender<Decision>,
}

/// A pod no node took: what was recorded, the cluster it was tried against, and when.
#[derive(Debug, Clone)]
struct Unschedulable {
    message: String,
    nominated: Option<String>,
    cluster: u64,
    since: tokio::time::Instant,
}

impl Unschedulable {
    /// Returns whether the pod is tried again: kube-scheduler v1.32 moves a pod an extender (or
    /// any filter) rejected back to its active queue on a cluster event (for an extender's
    /// rejection, any Node or assigned-pod change) or when it has waited `flush`; nothing else
    /// retries it, so neither does sim.
    fn due(&self, cluster: u64, now: tokio::time::Instant, flush: Duration) -> bool {
        self.cluster != cluster || now.duration_since(self.since) >= flush
    }
}

/// Returns a fingerprint of what upstream's cluster events are about: every Node and every
/// assigned pod, by UID and resourceVersion. A pending pod's own updates (the scheduler's
/// PodScheduled condition among them) leave it unchanged, as they requeue nothing upstream.
fn cluster_fingerprint(nodes: &[Arc<Node>], pods: &[Arc<Pod>]) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for node in nodes {
        (node.uid(), node.resource_version()).hash(&mut hasher);
    }
    for pod in pods.iter().filter(|p| node_name(p).is_some()) {
        (pod.uid(), pod.resource_version()).hash(&mut hasher);
    }
    // Deletions count too: the number of objects is part of the fingerprint.
    (nodes.len(), pods.len()).hash(&mut hasher);
    hasher.finish()
}

fn node_name(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

/// The profile (scheduler name) a pod asks for.
fn profile_of(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduler_name.as_deref())
        .unwrap_or("default-scheduler")
}

impl Scheduler {
    fn is_ours(&self, pod: &Pod) -> bool {
        self.served.contains(profile_of(pod))
    }

    async fn pass(
        &mut self,
        nodes: &[Arc<Node>],
        pods: &[Arc<Pod>],
        budgets: &[preemption::Budget],
    ) {
        let present: BTreeSet<String> = pods.iter().filter_map(|p| p.uid()).collect();
        self.assumed.retain(|uid, _| {
            present.contains(uid)
                && pods
                    .iter()
                    .any(|p| p.uid().as_deref() == Some(uid) && node_name(p).is_none())
        });
        self.unschedulable.retain(|uid, _| present.contains(uid));
        let cluster = cluster_fingerprint(nodes, pods);
        let now = tokio::time::Instant::now();

        let mut infos: BTreeMap<String, NodeInfo> = nodes
            .iter()
            .map(|n| {
                let name = n.name_any();
                let on_node = pods
                    .iter()
                    .filter(|p| node_name(p) == Some(name.as_str()) && !is_terminal(p))
                    .map(AsRef::as_ref);
                let info = NodeInfo::new(n, on_node);
                (name, info)
            })
            .collect();
        for (node, requests) in self.assumed.values() {
            if let Some(info) = infos.get_mut(node) {
                info.add(requests);
            }
        }
        let mut pending: Vec<&Arc<Pod>> = pods
            .iter()
            .filter(|p| {
                node_name(p).is_none()
                    && p.metadata.deletion_timestamp.is_none()
                    && !is_terminal(p)
                    && self.is_ours(p)
                    && p.uid().is_some_and(|uid| {
                        !self.assumed.contains_key(&uid)
                            && self
                                .unschedulable
                                .get(&uid)
                                .is_none_or(|u| u.due(cluster, now, self.settings.flush))
                    })
            })
            .collect();
        // Upstream's queue order: higher priority first, then older first.
        pending.sort_by_key(|p| {
            (
                std::cmp::Reverse(p.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)),
                p.metadata.creation_timestamp.clone().map(|t| t.0),
                p.name_any(),
            )
        });
        let by_name: BTreeMap<String, &Node> = nodes.iter().map(|n| (n.name_any(), &**n)).collect();
        let mut state = PassState {
            on_node: BTreeMap::new(),
            nominated: BTreeMap::new(),
            budgets,
        };
        for pod in pods.iter().filter(|p| !is_terminal(p)) {
            match node_name(pod) {
                Some(node) => state.on_node.entry(node.to_owned()).or_default().push(pod),
                None => {
                    if let (Some(node), Some(uid)) = (nominated_node(pod), pod.uid())
                        && pod.metadata.deletion_timestamp.is_none()
                        && !self.assumed.contains_key(&uid)
                    {
                        state
                            .nominated
                            .entry(node.to_owned())
                            .or_default()
                            .push(Nominee::of(pod, uid, fit::pod_requests(pod)));
                    }
                }
            }
        }
        for pod in pending {
            self.schedule_one(pod, &mut infos, &by_name, &mut state, cluster)
                .await;
        }
    }

    async fn schedule_one(
        &mut self,
        pod: &Pod,
        infos: &mut BTreeMap<String, NodeInfo>,
        nodes: &BTreeMap<String, &Node>,
        state: &mut PassState<'_>,
        cluster: u64,
    ) {
        let key = format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
        let requests = fit::pod_requests(pod);
        match self
            .place(pod, &requests, infos, nodes, &state.nominated)
            .await
        {
            Ok((node, filtered)) => match self.bind(pod, &node).await {
                Ok(()) => {
                    if let Some(uid) = pod.uid() {
                        self.assumed
                            .insert(uid.clone(), (node.clone(), requests.clone()));
                        self.unschedulable.remove(&uid);
                        for nominees in state.nominated.values_mut() {
                            nominees.retain(|n| n.uid != uid);
                        }
                    }
                    if let Some(info) = infos.get_mut(&node) {
                        info.add(&requests);
                    }
                    tracing::info!(pod = %key, %node, "scheduled");
                    self.record(
                        pod,
                        EventType::Normal,
                        "Scheduled",
                        format!("Successfully assigned {key} to {node}"),
                    )
                    .await;
                    let _ = self.decisions.send(Decision::Placed {
                        pod: key,
                        node,
                        filtered,
                    });
                }
                Err(e) => {
                    tracing::debug!(pod = %key, %node, error = format!("{e:#}"), "binding failed; retrying")
                }
            },
            Err(Unplaced::Error(message)) => {
                self.unschedulable(pod, key, message, Nomination::Keep, cluster)
                    .await;
            }
            Err(Unplaced::Fit(statuses)) => {
                let filters: Vec<String> = statuses.values().map(|s| s.reason.clone()).collect();
                let (post_filter, nomination) =
                    self.preempt(pod, &requests, infos, &statuses, state).await;
                let message = unschedulable_message(infos.len(), &filters, &post_filter);
                self.unschedulable(pod, key, message, nomination, cluster)
                    .await;
            }
        }
    }

    /// Upstream's DefaultPreemption PostFilter (`Evaluator.Preempt`) for a pod the filters
    /// turned down everywhere: returns its message (prefixed `preemption: `, empty on success)
    /// and what becomes of the pod's nomination. On success the victims are already marked and
    /// deleted.
    async fn preempt(
        &self,
        pod: &Pod,
        requests: &fit::Resources,
        infos: &BTreeMap<String, NodeInfo>,
        statuses: &BTreeMap<String, NodeStatus>,
        state: &mut PassState<'_>,
    ) -> (String, Nomination) {
        let now = jiff::Timestamp::now();
        let nominated_unresolvable = nominated_node(pod)
            .and_then(|n| statuses.get(n))
            .is_some_and(|s| s.unresolvable);
        let on_nominated: Vec<&Pod> = nominated_node(pod)
            .and_then(|n| state.on_node.get(n))
            .cloned()
            .unwrap_or_default();
        if let Some(why) = preemption::ineligible(pod, nominated_unresolvable, &on_nominated) {
            return (format!("preemption: {why}"), Nomination::Keep);
        }
        let none = BTreeSet::new();
        let ignored = self.ignored.get(profile_of(pod)).unwrap_or(&none);
        let mut candidates: BTreeMap<String, Victims> = BTreeMap::new();
        let mut outcomes: Vec<String> = Vec::new();
        let mut errors: Vec<String> = Vec::new();
        for (name, info) in infos {
            let resolvable = statuses.get(name).is_some_and(|s| !s.unresolvable);
            if !resolvable {
                outcomes.push(preemption::NOT_HELPFUL.to_owned());
                continue;
            }
            let info = with_nominated(info, &state.nominated, pod);
            let on_node = state
                .on_node
                .get(name)
                .map(Vec::as_slice)
                .unwrap_or_default();
            match preemption::select_victims_on_node(
                pod,
                requests,
                &info,
                on_node,
                state.budgets,
                ignored,
                now,
            ) {
                Ok(victims) => {
                    candidates.insert(name.clone(), victims);
                }
                Err(preemption::NoVictims::Unschedulable(reason)) => outcomes.push(reason),
                Err(preemption::NoVictims::Error(error)) => errors.push(error),
            }
        }
        if candidates.is_empty() {
            // Errors fail the attempt (Go's aggregate error: one as is, several in brackets)
            // and leave the nomination; otherwise the nodes' statuses make the FitError.
            match errors.as_slice() {
                [] => {}
                [one] => return (format!("preemption: {one}"), Nomination::Keep),
                many => {
                    return (
                        format!("preemption: [{}]", many.join(", ")),
                        Nomination::Keep,
                    );
                }
            }
            let message = fit::unschedulable_message(infos.len(), &outcomes);
            return (format!("preemption: {message}"), Nomination::Set(None));
        }
        let wants = fit::resource_names(pod);
        for e in self
            .extenders
            .iter()
            .filter(|e| e.supports_preemption() && e.config.is_interested(&wants))
        {
            let answer = match e.preempt(pod, &candidates).await {
                Ok(answer) => answer,
                Err(err) if e.config.ignorable => {
                    tracing::warn!(extender = %e.config.url_prefix, error = format!("{err:#}"), "ignorable extender's preempt failed; skipped");
                    continue;
                }
                Err(err) => return (format!("preemption: {err:#}"), Nomination::Keep),
            };
            let answer = answer.node_name_to_meta_victims.unwrap_or_default();
            match preemption::convert_to_victims(
                &e.config.url_prefix,
                &answer,
                &state.on_node,
                e.config.ignorable,
            ) {
                Ok(victims) => candidates = victims,
                Err(err) => return (format!("preemption: {err}"), Nomination::Keep),
            }
            if candidates.is_empty() {
                break;
            }
        }
        let Some(node) = preemption::pick_one_node(&candidates, now) else {
            return (
                "preemption: no candidate node for preemption".to_owned(),
                Nomination::Keep,
            );
        };
        let Some(victims) = candidates.get(&node) else {
            return (
                "preemption: no candidate node for preemption".to_owned(),
                Nomination::Keep,
            );
        };
        if let Err(e) = self.prepare_candidate(pod, &node, victims).await {
            return (format!("preemption: {e:#}"), Nomination::Keep);
        }
        self.clear_lower_nominations(pod, &node, state).await;
        if let Some(uid) = pod.uid() {
            for nominees in state.nominated.values_mut() {
                nominees.retain(|n| n.uid != uid);
            }
            state
                .nominated
                .entry(node.clone())
                .or_default()
                .push(Nominee::of(pod, uid, requests.clone()));
        }
        (String::new(), Nomination::Set(Some(node)))
    }

    /// Upstream's `prepareCandidate`: each victim not already being deleted gets the
    /// `DisruptionTarget` condition through the status subresource, is deleted, and gets a
    /// `Preempted` Event. A victim already gone is no error.
    async fn prepare_candidate(
        &self,
        preemptor: &Pod,
        node: &str,
        victims: &Victims,
    ) -> anyhow::Result<()> {
        let scheduler = profile_of(preemptor);
        let preemptor_uid = preemptor.uid().unwrap_or_default();
        for victim in &victims.pods {
            if victim.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let namespace = victim.namespace().unwrap_or_default();
            let name = victim.name_any();
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
            let condition = json!({"status": {"conditions": [{
                "type": preemption::DISRUPTION_TARGET, "status": "True",
                "reason": preemption::REASON_PREEMPTION_BY_SCHEDULER,
                "message": preemption::disruption_message(scheduler),
                "lastTransitionTime": crate::apiserver::objects::lifecycle::now(),
            }]}});
            match api
                .patch_status(&name, &PatchParams::default(), &Patch::Strategic(condition))
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => continue,
                Err(e) => {
                    return Err(anyhow::Error::new(e)
                        .context(format!("adding DisruptionTarget to {namespace}/{name}")));
                }
            }
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => continue,
                Err(e) => {
                    return Err(anyhow::Error::new(e)
                        .context(format!("deleting the victim {namespace}/{name}")));
                }
            }
            tracing::info!(preemptor = %preemptor.name_any(), victim = %format!("{namespace}/{name}"), %node, "preempted");
            let event = Event {
                type_: EventType::Normal,
                reason: "Preempted".into(),
                note: Some(preemption::preempted_note(&preemptor_uid, node)),
                action: "Preempting".into(),
                secondary: Some(preemptor.object_ref(&())),
            };
            if let Err(e) = self.recorder.publish(&event, &victim.object_ref(&())).await {
                tracing::debug!(error = %e, "recording a Preempted event failed");
            }
        }
        Ok(())
    }

    /// Lower-priority pods nominated to `node` may no longer fit there: their nomination is
    /// cleared (upstream's `clearNominatedNodeName`), so they are tried anew.
    async fn clear_lower_nominations(&self, pod: &Pod, node: &str, state: &mut PassState<'_>) {
        let priority = preemption::priority(pod);
        let Some(nominees) = state.nominated.get_mut(node) else {
            return;
        };
        let (lower, kept): (Vec<Nominee>, Vec<Nominee>) =
            nominees.drain(..).partition(|n| n.priority < priority);
        *nominees = kept;
        for n in lower {
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &n.namespace);
            let patch = json!({"status": {"nominatedNodeName": null}});
            if let Err(e) = api
                .patch_status(&n.name, &PatchParams::default(), &Patch::Strategic(patch))
                .await
            {
                tracing::debug!(pod = %n.name, error = %e, "clearing a nomination failed");
            }
        }
    }

    /// Filters and scores; returns the chosen node and the extenders' rejections, or why no node
    /// takes the pod.
    async fn place(
        &self,
        pod: &Pod,
        requests: &fit::Resources,
        infos: &BTreeMap<String, NodeInfo>,
        nodes: &BTreeMap<String, &Node>,
        nominated: &BTreeMap<String, Vec<Nominee>>,
    ) -> Result<(String, BTreeMap<String, String>), Unplaced> {
        // Each rejected node's reason, and whether preemption could never help there.
        let mut statuses: BTreeMap<String, NodeStatus> = BTreeMap::new();
        let mut feasible = Vec::new();
        let none = BTreeSet::new();
        let ignored = self.ignored.get(profile_of(pod)).unwrap_or(&none);
        for info in infos.values() {
            let info = with_nominated(info, nominated, pod);
            match fit::check(pod, requests, &info, ignored) {
                Ok(()) => feasible.push(info.name.clone()),
                Err(unfit) => {
                    let unresolvable =
                        matches!(unfit, fit::Unfit::Taint { .. } | fit::Unfit::Affinity);
                    statuses.insert(
                        info.name.clone(),
                        NodeStatus {
                            reason: unfit.to_string(),
                            unresolvable,
                        },
                    );
                }
            }
        }
        let wants = fit::resource_names(pod);
        let interested: Vec<&ExtenderClient> = self
            .extenders
            .iter()
            .filter(|e| e.config.is_interested(&wants))
            .collect();
        let mut filtered = BTreeMap::new();
        for e in interested
            .iter()
            .filter(|e| !e.config.filter_verb.is_empty())
        {
            if feasible.is_empty() {
                break;
            }
            match e.filter(&self.args(pod, &feasible, nodes, e)).await {
                Ok(result) => {
                    let survivors: BTreeSet<String> = match (&result.node_names, &result.nodes) {
                        (Some(names), _) => names.iter().cloned().collect(),
                        (None, Some(list)) => list.items.iter().map(|n| n.name_any()).collect(),
                        (None, None) => BTreeSet::new(),
                    };
                    // Each node once, unresolvable first, as upstream records statuses.
                    for (node, rejection) in extender::rejections(&result) {
                        statuses.insert(
                            node.clone(),
                            NodeStatus {
                                reason: rejection.reason.clone(),
                                unresolvable: rejection.unresolvable,
                            },
                        );
                        filtered.insert(node, rejection.reason);
                    }
                    feasible.retain(|n| survivors.contains(n));
                }
                Err(err) if e.config.ignorable => {
                    tracing::warn!(extender = %e.config.url_prefix, error = format!("{err:#}"), "ignorable extender failed; scheduling without it");
                }
                Err(err) => {
                    return Err(Unplaced::Error(format!(
                        "extender {}: {err:#}",
                        e.config.url_prefix
                    )));
                }
            }
        }
        if feasible.is_empty() {
            return Err(Unplaced::Fit(statuses));
        }
        let mut scores: BTreeMap<&str, i64> = feasible
            .iter()
            .map(|n| {
                let score = infos
                    .get(n)
                    .map_or(0, |info| fit::least_allocated_score(info, requests));
                (n.as_str(), score)
            })
            .collect();
        if feasible.len() > 1 {
            for e in interested
                .iter()
                .filter(|e| !e.config.prioritize_verb.is_empty())
            {
                match e.prioritize(&self.args(pod, &feasible, nodes, e)).await {
                    Ok(list) => {
                        for hp in list {
                            if let Some(s) = scores.get_mut(hp.host.as_str()) {
                                let score = hp.score.clamp(0, MAX_EXTENDER_PRIORITY);
                                *s += score
                                    * e.config.weight
                                    * (MAX_NODE_SCORE / MAX_EXTENDER_PRIORITY);
                            }
                        }
                    }
                    // Upstream ignores a failed prioritize: the extender just adds nothing.
                    Err(err) => {
                        tracing::warn!(extender = %e.config.url_prefix, error = format!("{err:#}"), "prioritize failed; ignored");
                    }
                }
            }
        }
        let best = scores.values().copied().max().unwrap_or(0);
        let top: Vec<&str> = scores
            .iter()
            .filter(|(_, s)| **s == best)
            .map(|(n, _)| *n)
            .collect();
        let chosen = top
            .choose(&mut rand::rng())
            .copied()
            .unwrap_or_default()
            .to_owned();
        Ok((chosen, filtered))
    }

    fn args(
        &self,
        pod: &Pod,
        feasible: &[String],
        nodes: &BTreeMap<String, &Node>,
        e: &ExtenderClient,
    ) -> ExtenderArgs {
        if e.config.node_cache_capable {
            ExtenderArgs {
                pod: Some(pod.clone()),
                nodes: None,
                node_names: Some(feasible.to_vec()),
            }
        } else {
            let items = feasible
                .iter()
                .filter_map(|n| nodes.get(n).map(|node| (*node).clone()))
                .collect();
            ExtenderArgs {
                pod: Some(pod.clone()),
                nodes: Some(telemesh_core::extender::NodeList {
                    items,
                    ..Default::default()
                }),
                node_names: None,
            }
        }
    }

    async fn bind(&self, pod: &Pod, node: &str) -> anyhow::Result<()> {
        let namespace = pod.namespace().unwrap_or_default();
        let wants = fit::resource_names(pod);
        if let Some(e) = self
            .extenders
            .iter()
            .find(|e| !e.config.bind_verb.is_empty() && e.config.is_interested(&wants))
        {
            return e
                .bind(&ExtenderBindingArgs {
                    pod_name: pod.name_any(),
                    pod_namespace: namespace,
                    pod_uid: pod.uid().unwrap_or_default(),
                    node: node.to_owned(),
                })
                .await;
        }
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
        let binding = json!({
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod.name_any(), "uid": pod.uid()},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}
        });
        api.create_subresource::<_, serde_json::Value>(
            "binding",
            &pod.name_any(),
            &PostParams::default(),
            &binding,
        )
        .await?;
        Ok(())
    }

    async fn unschedulable(
        &mut self,
        pod: &Pod,
        key: String,
        message: String,
        nomination: Nomination,
        cluster: u64,
    ) {
        let Some(uid) = pod.uid() else { return };
        let current = nominated_node(pod).map(str::to_owned);
        let nominated = match &nomination {
            Nomination::Keep => current.clone(),
            Nomination::Set(node) => node.clone(),
        };
        let entry = Unschedulable {
            message: message.clone(),
            nominated: nominated.clone(),
            cluster,
            since: tokio::time::Instant::now(),
        };
        let unchanged = self
            .unschedulable
            .insert(uid, entry)
            .is_some_and(|previous| previous.message == message && previous.nominated == nominated);
        if unchanged && nominated == current {
            return;
        }
        tracing::info!(pod = %key, %message, nominated = ?nominated, "unschedulable");
        let api: Api<Pod> =
            Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
        let mut status = json!({"status": {"conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": message, "lastTransitionTime": crate::apiserver::objects::lifecycle::now(),
        }]}});
        // One status patch with the condition and, when it changes, the nomination (upstream's
        // `updatePod`).
        if nominated != current {
            status["status"]["nominatedNodeName"] = json!(nominated);
        }
        if let Err(e) = api
            .patch_status(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Strategic(status),
            )
            .await
        {
            tracing::debug!(pod = %key, error = %e, "recording PodScheduled=False failed");
        }
        self.record(pod, EventType::Warning, "FailedScheduling", message.clone())
            .await;
        let _ = self
            .decisions
            .send(Decision::Unschedulable { pod: key, message });
    }

    async fn record(&self, pod: &Pod, type_: EventType, reason: &str, note: String) {
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(note),
            action: "Scheduling".into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &pod.object_ref(&())).await {
            tracing::debug!(error = %e, "recording a scheduler event failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(uid: &str, rv: &str, node: Option<&str>) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": uid, "uid": uid, "resourceVersion": rv},
                "spec": {"containers": [], "nodeName": node},
            }))
            .expect("a pod"),
        )
    }

    fn node(uid: &str, rv: &str) -> Arc<Node> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": uid, "uid": uid, "resourceVersion": rv}
            }))
            .expect("a node"),
        )
    }

    #[test]
    fn a_pending_pods_own_updates_are_no_cluster_event() {
        let nodes = [node("n1", "1")];
        let before = cluster_fingerprint(&nodes, &[pod("a", "2", Some("n1")), pod("p", "3", None)]);
        // The pending pod's PodScheduled condition written: nothing upstream requeues on.
        let own = cluster_fingerprint(&nodes, &[pod("a", "2", Some("n1")), pod("p", "4", None)]);
        assert_eq!(before, own);
        // An assigned pod changed, one was deleted, a node changed: cluster events.
        for (nodes, pods) in [
            (
                vec![node("n1", "1")],
                vec![pod("a", "5", Some("n1")), pod("p", "3", None)],
            ),
            (vec![node("n1", "1")], vec![pod("p", "3", None)]),
            (
                vec![node("n1", "6")],
                vec![pod("a", "2", Some("n1")), pod("p", "3", None)],
            ),
        ] {
            assert_ne!(before, cluster_fingerprint(&nodes, &pods));
        }
    }

    #[test]
    fn the_message_ends_with_what_preemption_said_and_nothing_when_it_succeeded() {
        let filters = vec!["Insufficient cpu".to_owned(), "Insufficient cpu".to_owned()];
        assert_eq!(
            unschedulable_message(2, &filters, ""),
            "0/2 nodes are available: 2 Insufficient cpu."
        );
        assert_eq!(
            unschedulable_message(
                2,
                &filters,
                "preemption: not eligible due to preemptionPolicy=Never."
            ),
            "0/2 nodes are available: 2 Insufficient cpu. \
             preemption: not eligible due to preemptionPolicy=Never."
        );
    }

    #[test]
    fn nominated_pods_count_only_for_pods_they_outrank_or_equal() {
        let info = NodeInfo {
            name: "n1".into(),
            ..NodeInfo::default()
        };
        let nominee = |uid: &str, priority| Nominee {
            uid: uid.into(),
            namespace: "default".into(),
            name: uid.into(),
            priority,
            requests: [("cpu".to_owned(), 2.0)].into(),
        };
        let nominated: BTreeMap<String, Vec<Nominee>> = [(
            "n1".to_owned(),
            vec![nominee("high", 100), nominee("same", 10), nominee("low", 1)],
        )]
        .into();
        let mut pod = pod("me", "1", None);
        Arc::make_mut(&mut pod)
            .spec
            .as_mut()
            .expect("spec")
            .priority = Some(10);
        // high and same count; low does not; the pod's own nomination never does.
        assert_eq!(
            with_nominated(&info, &nominated, &pod).requested["cpu"],
            4.0
        );
        let mut own = nominated.clone();
        own.get_mut("n1").expect("n1").push(nominee("me", 10));
        assert_eq!(with_nominated(&info, &own, &pod).requested["cpu"], 4.0);
        // Elsewhere, nothing.
        let other = NodeInfo {
            name: "n2".into(),
            ..NodeInfo::default()
        };
        assert!(
            with_nominated(&other, &nominated, &pod)
                .requested
                .is_empty()
        );
    }

    #[test]
    fn an_unschedulable_pod_waits_for_a_cluster_event_or_the_flush() {
        let since = tokio::time::Instant::now();
        let flush = Duration::from_secs(300);
        let waiting = Unschedulable {
            message: "0/1 nodes are available".into(),
            nominated: None,
            cluster: 7,
            since,
        };
        assert!(!waiting.due(7, since + Duration::from_secs(299), flush));
        assert!(waiting.due(8, since + Duration::from_secs(1), flush));
        assert!(waiting.due(7, since + flush, flush));
    }
}
