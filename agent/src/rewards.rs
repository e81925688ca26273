//! Rewards on this node: every `--reward-interval` the agent looks at each pod bound here (the
//! node's pod watch and the latest cgroup figures), turns what changed into observations
//! (core's `reward::signal` table), feeds the estimate of the pod's type on this node, and
//! gossips the estimates as `r:<namespace>/<type>` = `<good>,<bad>@<ms>` for the coordinator.
//! A pod that waits to start longer than `--reward-start-grace` has its Events looked up, and
//! counts once if this node is what keeps it from starting (the `start` module).
//!
//! Bounded: only the `--reward-max-types` most recently active types are kept and gossiped
//! (an older type's key is deleted). Kept across restarts in `--reward-state-file` (written
//! atomically when it changed); a restarted agent reloads it, so a restart forgets nothing but
//! the time it was down, which decays like any other time.

mod start;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt as _;
use kube::api::{Api, ListParams};
use kube::runtime::reflector::Store;
use parking_lot::RwLock;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use telemesh_core::gossip::schema::{StateKey, unix_ms};
use telemesh_core::pod::PodFigures;
use telemesh_core::reward::{
    Estimate, Observation, REWARD_ANNOTATION, RewardModel, SignalSettings, pod_type,
};

use crate::config::RewardConfig;
use crate::metrics::{AgentMetrics, PodTypeLabel};
use crate::shared::SharedGossip;

pub use self::start::{Cause, PodEvent, StartMemory, StartStep, start_failure};

/// Pods whose Events are looked up in one look at most (the rest wait for the next look).
const LOOKUPS_PER_LOOK: usize = 16;

/// What the learner remembers of one pod between looks.
#[derive(Debug, Clone, PartialEq, Default)]
struct PodMemory {
    seen_ms: u64,
    restarts: i32,
    last_restart_ms: Option<u64>,
    crash_looping: bool,
    failed: bool,
    reported: Option<String>,
    cpu: Option<(u64, u64)>,
    start: StartMemory,
}

/// Everything the agent learnt, per pod type on this node.
#[derive(Debug, Clone)]
pub struct Learner {
    model: RewardModel,
    signals: SignalSettings,
    start_grace: Duration,
    max_types: usize,
    estimates: BTreeMap<String, Estimate>,
    /// Type → when a pod of it was last seen here (recency decides which types are kept).
    active_ms: BTreeMap<String, u64>,
    pods: HashMap<String, PodMemory>,
}

impl Learner {
    /// A learner with no history.
    pub fn new(config: &RewardConfig) -> Self {
        Self {
            model: config.model,
            signals: config.signals,
            start_grace: config.start_grace,
            max_types: config.max_types,
            estimates: BTreeMap::new(),
            active_ms: BTreeMap::new(),
            pods: HashMap::new(),
        }
    }

    /// The estimates, by type.
    pub fn estimates(&self) -> &BTreeMap<String, Estimate> {
        &self.estimates
    }

    /// The pods whose Events the next [`look`](Self::look) at `now_ms` wants: stuck past the
    /// start grace and not yet counted ([`start_failure`]).
    pub fn wants_events<'p>(&self, pods: &'p [Arc<Pod>], now_ms: u64) -> Vec<&'p Arc<Pod>> {
        pods.iter()
            .filter(|pod| {
                let memory = pod
                    .uid()
                    .and_then(|uid| self.pods.get(&uid))
                    .map(|m| m.start)
                    .unwrap_or_default();
                start_failure(memory, pod, None, now_ms, self.start_grace).1 == StartStep::LookUp
            })
            .collect()
    }

    /// Looks at the pods now on the node, with the Events looked up for some of them (by pod
    /// UID); returns the types dropped to stay within the bound.
    pub fn look(
        &mut self,
        pods: &[Arc<Pod>],
        figures: &[PodFigures],
        events: &HashMap<String, Vec<PodEvent>>,
        now_ms: u64,
    ) -> Vec<String> {
        let by_uid: HashMap<&str, &PodFigures> =
            figures.iter().map(|f| (f.uid.as_str(), f)).collect();
        let mut present = Vec::with_capacity(pods.len());
        for pod in pods {
            let Some(uid) = pod.uid() else { continue };
            let kind = pod_type(pod);
            let previous = self.pods.get(&uid);
            let start = Start {
                events: events.get(&uid).map(Vec::as_slice),
                grace: self.start_grace,
            };
            let (memory, observations) = observe(
                previous,
                pod,
                by_uid.get(uid.as_str()).copied(),
                start,
                now_ms,
            );
            for o in observations {
                if let Some(signal) = o.signal(&self.signals) {
                    let e = self.estimates.entry(kind.clone()).or_default();
                    self.model.observe(e, signal, now_ms);
                }
            }
            self.active_ms.insert(kind, now_ms);
            self.pods.insert(uid.clone(), memory);
            present.push(uid);
        }
        self.pods.retain(|uid, _| present.contains(uid));
        self.trim()
    }

    /// Drops the least recently active types beyond the bound.
    fn trim(&mut self) -> Vec<String> {
        let mut dropped = Vec::new();
        while self.estimates.len() > self.max_types {
            let oldest = self
                .estimates
                .keys()
                .min_by_key(|t| self.active_ms.get(*t).copied().unwrap_or(0))
                .cloned();
            let Some(t) = oldest else { break };
            self.estimates.remove(&t);
            self.active_ms.remove(&t);
            dropped.push(t);
        }
        dropped
    }

    /// Restores estimates saved by an earlier run (they decay from their own timestamps).
    pub fn restore(&mut self, saved: BTreeMap<String, Estimate>, now_ms: u64) {
        for (t, e) in saved {
            self.active_ms.insert(t.clone(), e.at_ms.min(now_ms));
            self.estimates.insert(t, e);
        }
        self.trim();
    }
}

/// What a look knows of a pod's start: its Events when they were looked up, and the grace.
#[derive(Debug, Clone, Copy)]
struct Start<'e> {
    events: Option<&'e [PodEvent]>,
    grace: Duration,
}

/// Compares a pod with what was remembered of it; returns the new memory and what happened.
/// The first look only remembers (a pod's past before the agent saw it — or before a restart
/// of the agent — is not counted again).
fn observe(
    previous: Option<&PodMemory>,
    pod: &Pod,
    figures: Option<&PodFigures>,
    start: Start<'_>,
    now_ms: u64,
) -> (PodMemory, Vec<Observation>) {
    let status = pod.status.as_ref();
    let containers = status
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    let restarts: i32 = containers.iter().map(|c| c.restart_count).sum();
    let oom = containers.iter().any(|c| {
        c.last_state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .is_some_and(|t| t.reason.as_deref() == Some("OOMKilled"))
    });
    let crash_looping = containers.iter().any(|c| {
        c.state
            .as_ref()
            .and_then(|s| s.waiting.as_ref())
            .is_some_and(|w| w.reason.as_deref() == Some("CrashLoopBackOff"))
    });
    let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let reported = pod.annotations().get(REWARD_ANNOTATION).cloned();
    let cpu = figures.and_then(|f| Some((f.cpu_periods?, f.cpu_throttled_periods?)));
    let (start_memory, start_step) = start_failure(
        previous.map(|p| p.start).unwrap_or_default(),
        pod,
        start.events,
        now_ms,
        start.grace,
    );
    let mut memory = PodMemory {
        seen_ms: now_ms,
        restarts,
        last_restart_ms: previous.and_then(|p| p.last_restart_ms),
        crash_looping,
        failed: phase == "Failed",
        reported: reported.clone(),
        cpu,
        start: start_memory,
    };
    let mut out = Vec::new();
    if let StartStep::Count(cause) = start_step {
        tracing::info!(pod = %pod.name_any(), namespace = %pod.namespace().unwrap_or_default(),
            reason = %cause.reason, detail = %cause.message, "a pod failed to start on this node");
        out.push(Observation::StartFailed);
    }
    let Some(prev) = previous else {
        return (memory, out);
    };
    let dt = Duration::from_millis(now_ms.saturating_sub(prev.seen_ms));
    for _ in prev.restarts..restarts {
        out.push(Observation::Restart {
            since_previous: memory
                .last_restart_ms
                .map(|at| Duration::from_millis(now_ms.saturating_sub(at))),
            oom,
        });
        memory.last_restart_ms = Some(now_ms);
    }
    if crash_looping && !prev.crash_looping {
        out.push(Observation::CrashLoop);
    }
    if memory.failed && !prev.failed {
        out.push(Observation::Failed);
    }
    if phase == "Running" && !dt.is_zero() {
        out.push(if ready {
            Observation::Healthy(dt)
        } else {
            Observation::NotReady(dt)
        });
    }
    if let (Some((periods, throttled)), Some((p0, t0))) = (cpu, prev.cpu) {
        let periods = periods.saturating_sub(p0);
        if periods > 0 {
            out.push(Observation::Throttled {
                fraction: throttled.saturating_sub(t0) as f64 / periods as f64,
                over: dt,
            });
        }
    }
    if let Some(f) = figures {
        let worst = [
            f.cpu_pressure_some_avg10,
            f.memory_pressure_some_avg10,
            f.io_pressure_some_avg10,
        ]
        .into_iter()
        .flatten()
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
        if let Some(percent) = worst {
            out.push(Observation::Pressure { percent, over: dt });
        }
    }
    if let Some(text) = &reported
        && prev.reported.as_ref() != Some(text)
    {
        match text.trim().parse::<f64>() {
            Ok(v) => out.push(Observation::Reported(v)),
            Err(_) => {
                tracing::debug!(pod = %pod.name_any(), value = %text, "ignoring a {REWARD_ANNOTATION} that is not a number")
            }
        }
    }
    (memory, out)
}

/// The Events on `pod` (UID `uid`), as [`PodEvent`]s; None when they cannot be listed now
/// (the next look asks again).
async fn pod_events(client: &kube::Client, pod: &Pod, uid: &str) -> Option<Vec<PodEvent>> {
    let namespace = pod.namespace().unwrap_or_default();
    let api: Api<Event> = Api::namespaced(client.clone(), &namespace);
    let params = ListParams::default().fields(&format!("regarding.uid={uid}"));
    match api.list(&params).await {
        Ok(list) => Some(
            list.items
                .into_iter()
                .map(|e| PodEvent {
                    reason: e.reason.unwrap_or_default(),
                    message: e.note.unwrap_or_default(),
                })
                .collect(),
        ),
        Err(e) => {
            tracing::debug!(pod = %pod.name_any(), error = %e, "listing a pod's Events failed; retrying at the next look");
            None
        }
    }
}

/// What the reward loop needs.
pub struct Inputs {
    /// The API, to list the Events of pods that do not start.
    pub client: kube::Client,
    /// The node's pods.
    pub pods: Store<Pod>,
    /// The latest cgroup figures.
    pub figures: Arc<RwLock<Vec<PodFigures>>>,
    /// Gossip, to publish the estimates.
    pub gossip: SharedGossip,
    /// Metrics.
    pub metrics: AgentMetrics,
    /// Settings.
    pub config: RewardConfig,
}

/// Runs the reward loop until `stop`.
pub async fn run(inputs: Inputs, stop: CancellationToken) {
    let Inputs {
        client,
        pods,
        figures,
        gossip,
        metrics,
        config,
    } = inputs;
    let mut learner = Learner::new(&config);
    if let Some(path) = &config.state_file {
        match load(path) {
            Ok(saved) => {
                tracing::info!(types = saved.len(), path = %path.display(), "rewards restored");
                learner.restore(saved, unix_ms(SystemTime::now()));
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = format!("{e:#}"), "starting rewards from scratch")
            }
        }
    }
    let mut published: BTreeMap<String, String> = BTreeMap::new();
    let mut tick = tokio::time::interval(config.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        // One look: a span of its own, so its lines and its lookups' read together.
        let go_on = async {
            // Estimates are stamped and decayed in cluster time, as readers age them.
            let clock = gossip.lock().await.as_ref().map(|m| m.clock());
            let now_ms = clock.map_or_else(|| unix_ms(SystemTime::now()), |c| c.now_ms());
            let current = pods.state();
            let mut events = HashMap::new();
            for pod in learner
                .wants_events(&current, now_ms)
                .into_iter()
                .take(LOOKUPS_PER_LOOK)
            {
                if let Some(uid) = pod.uid()
                    && let Some(found) = pod_events(&client, pod, &uid).await
                {
                    events.insert(uid, found);
                }
            }
            let dropped = {
                let figures = figures.read();
                learner.look(&current, &figures, &events, now_ms)
            };
            let guard = gossip.lock().await;
            let Some(member) = guard.as_ref() else { return false };
            for t in dropped {
                published.remove(&t);
                let label = PodTypeLabel {
                    pod_type: t.clone(),
                };
                metrics.reward.remove(&label);
                metrics.reward_evidence.remove(&label);
                if let Err(e) = member.delete(&StateKey::Reward(t)).await {
                    tracing::debug!(error = %e, "removing a reward key failed");
                }
            }
            let mut changed = false;
            for (t, e) in learner.estimates() {
                let value = e.to_string();
                let label = PodTypeLabel {
                    pod_type: t.clone(),
                };
                metrics.reward.get_or_create(&label).set(e.mean());
                metrics
                    .reward_evidence
                    .get_or_create(&label)
                    .set(e.evidence());
                if published.get(t) == Some(&value) {
                    continue;
                }
                match member.set(&StateKey::Reward(t.clone()), &value).await {
                    Ok(()) => {
                        published.insert(t.clone(), value);
                        changed = true;
                    }
                    Err(e) => tracing::warn!(pod_type = %t, error = %e, "publishing a reward failed"),
                }
            }
            drop(guard);
            if changed
                && let Some(path) = &config.state_file
                && let Err(e) = save(path, learner.estimates())
            {
                tracing::warn!(path = %path.display(), error = format!("{e:#}"), "saving rewards failed; they will be retried");
            }
            true
        }
        .instrument(tracing::info_span!("reward_look"))
        .await;
        if !go_on {
            return;
        }
    }
}

/// Reads saved estimates: one `<type> <good>,<bad>@<ms>` per line.
fn load(path: &Path) -> anyhow::Result<BTreeMap<String, Estimate>> {
    use anyhow::Context as _;
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let Some((t, e)) = line.split_once(' ') else {
            continue;
        };
        match e.parse::<Estimate>() {
            Ok(e) => {
                out.insert(t.to_owned(), e);
            }
            Err(err) => {
                tracing::warn!(path = %path.display(), line = i + 1, error = %err, "skipping a malformed saved reward")
            }
        }
    }
    Ok(out)
}

/// Writes the estimates atomically (temporary file, then rename).
fn save(path: &Path, estimates: &BTreeMap<String, Estimate>) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let text: String = estimates
        .iter()
        .map(|(t, e)| format!("{t} {e}\n"))
        .collect();
    let tmp: PathBuf = path.with_extension("tmp");
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming into {}", path.display()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::{Value, json};

    use super::*;

    fn config() -> RewardConfig {
        RewardConfig {
            interval: Duration::from_secs(5),
            model: RewardModel {
                half_life: Duration::from_secs(60),
                // Uncapped here: the tests check what observations add up to.
                max_evidence: 100.0,
                ..RewardModel::default()
            },
            signals: SignalSettings {
                healthy_unit: Duration::from_secs(10),
                ..SignalSettings::default()
            },
            start_grace: Duration::from_secs(30),
            max_types: 2,
            state_file: None,
        }
    }

    fn none() -> HashMap<String, Vec<PodEvent>> {
        HashMap::new()
    }

    fn pod(uid: &str, app: &str, status: Value) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": uid, "namespace": "ns", "uid": uid, "labels": {"app": app}},
                "status": status,
            }))
            .unwrap(),
        )
    }

    fn running(restarts: i32, ready: bool, waiting: Option<&str>) -> Value {
        let state = match waiting {
            Some(reason) => json!({"waiting": {"reason": reason}}),
            None => json!({"running": {}}),
        };
        json!({"phase": "Running",
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
            "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": ready,
                "restartCount": restarts, "state": state,
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}]})
    }

    #[test]
    fn restarts_crash_loops_and_ready_time_move_the_estimate() {
        let mut l = Learner::new(&config());
        l.look(&[pod("a", "D", running(0, true, None))], &[], &none(), 0);
        assert!(l.estimates().is_empty(), "the first look only remembers");
        l.look(
            &[pod("a", "D", running(0, true, None))],
            &[],
            &none(),
            10_000,
        );
        let healthy = l.estimates()["ns/D"];
        assert!(healthy.good > 0.9 && healthy.bad == 0.0, "{healthy:?}");
        l.look(
            &[pod("a", "D", running(1, false, Some("CrashLoopBackOff")))],
            &[],
            &none(),
            12_000,
        );
        let crashed = l.estimates()["ns/D"];
        assert!(
            crashed.bad > 1.5,
            "restart + crash loop + not ready: {crashed:?}"
        );
        assert!(crashed.mean() < healthy.mean());
    }

    fn creating(uid: &str, app: &str) -> Arc<Pod> {
        let mut p = (*pod(
            uid,
            app,
            json!({"phase": "Pending",
            "conditions": [{"type": "PodReadyToStartContainers", "status": "False"}],
            "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": false,
                "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}]}),
        ))
        .clone();
        p.spec = serde_json::from_value(json!({"nodeName": "n1", "containers": [{"name": "c"}]}))
            .unwrap();
        Arc::new(p)
    }

    #[test]
    fn a_node_that_cannot_start_a_type_loses_it_as_one_that_crashes_it() {
        let model = config().model;
        // This node: a D pod stuck in ContainerCreating, its sandbox failing.
        let mut l = Learner::new(&config());
        let stuck = [creating("a", "D")];
        l.look(&stuck, &[], &none(), 0);
        assert!(
            l.wants_events(&stuck, 10_000).is_empty(),
            "within the grace"
        );
        l.look(&stuck, &[], &none(), 10_000);
        assert!(l.estimates().is_empty(), "nothing is known of it yet");
        assert_eq!(l.wants_events(&stuck, 30_000).len(), 1, "past the grace");
        let events = HashMap::from([(
            "a".to_owned(),
            vec![PodEvent {
                reason: "FailedCreatePodSandBox".into(),
                message: "Failed to create pod sandbox: rpc error: code = Unknown desc = failed \
                          to setup network for sandbox: plugin type=\"bridge\" failed (add)"
                    .into(),
            }],
        )]);
        l.look(&stuck, &[], &events, 30_000);
        let failed = l.estimates()["ns/D"];
        assert_eq!((failed.good, failed.bad), (0.0, 2.0), "one start failure");
        assert!(l.wants_events(&stuck, 90_000).is_empty(), "counted once");
        l.look(&stuck, &[], &events, 90_000);
        assert_eq!(l.estimates()["ns/D"], failed, "nothing new");

        // Another node: a D pod that crashes once, at the same time.
        // (Seen at the same instant: a restart and its crash loop, no not-Ready time.)
        let mut c = Learner::new(&config());
        c.look(
            &[pod("b", "D", running(0, true, None))],
            &[],
            &none(),
            30_000,
        );
        c.look(
            &[pod("b", "D", running(1, false, Some("CrashLoopBackOff")))],
            &[],
            &none(),
            30_000,
        );
        let crashed = c.estimates()["ns/D"];
        assert!(
            model.score(&failed, 30_000) <= model.score(&crashed, 30_000),
            "start failure {failed:?} scores no better than a crash {crashed:?}"
        );
        assert!(model.score(&failed, 30_000) < model.score(&Estimate::default(), 30_000));
    }

    #[test]
    fn a_pod_seen_late_is_not_charged_for_its_past_and_reports_count() {
        let mut l = Learner::new(&config());
        l.look(&[pod("a", "D", running(7, true, None))], &[], &none(), 0);
        l.look(
            &[pod("a", "D", running(7, true, None))],
            &[],
            &none(),
            1_000,
        );
        assert_eq!(l.estimates()["ns/D"].bad, 0.0);
        let mut p = (*pod("a", "D", running(7, true, None))).clone();
        p.metadata.annotations = Some([(REWARD_ANNOTATION.to_owned(), "0.2".to_owned())].into());
        l.look(&[Arc::new(p)], &[], &none(), 1_000);
        assert!(l.estimates()["ns/D"].bad >= 0.8, "the workload's own 0.2");
    }

    #[test]
    fn types_stay_within_the_bound_most_recent_first() {
        let mut l = Learner::new(&config());
        let all = [
            pod("a", "A", running(0, true, None)),
            pod("b", "B", running(0, true, None)),
        ];
        l.look(&all, &[], &none(), 0);
        l.look(&all, &[], &none(), 5_000);
        let now = [pod("c", "C", running(0, true, None)), all[1].clone()];
        let dropped = l.look(&now, &[], &none(), 10_000);
        assert_eq!(
            dropped,
            Vec::<String>::new(),
            "C has no estimate until its second look"
        );
        let dropped = l.look(&now, &[], &none(), 15_000);
        assert_eq!(
            dropped,
            vec!["ns/A".to_owned()],
            "A was active least recently"
        );
        assert_eq!(
            l.estimates().keys().cloned().collect::<Vec<_>>(),
            vec!["ns/B".to_owned(), "ns/C".to_owned()]
        );
    }

    #[test]
    fn throttling_and_pressure_from_cgroup_figures() {
        let mut l = Learner::new(&config());
        let figures = |periods, throttled, psi| PodFigures {
            uid: "a".into(),
            cpu_periods: Some(periods),
            cpu_throttled_periods: Some(throttled),
            cpu_pressure_some_avg10: Some(psi),
            ..PodFigures::default()
        };
        let p = [pod("a", "D", running(0, true, None))];
        l.look(&p, &[figures(100, 0, 0.0)], &none(), 0);
        l.look(&p, &[figures(200, 90, 60.0)], &none(), 10_000);
        let e = l.estimates()["ns/D"];
        // Healthy 1 unit (good 1) + throttled 90 % (good 0.1, bad 0.9) + pressure 60 % (0.4/0.6).
        assert!((e.bad - 1.5).abs() < 1e-6, "{e:?}");
    }

    #[test]
    fn saved_estimates_round_trip_and_bad_lines_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rewards");
        assert!(load(&path).unwrap().is_empty(), "no file yet");
        let mut l = Learner::new(&config());
        l.look(&[pod("a", "D", running(0, true, None))], &[], &none(), 0);
        l.look(
            &[pod("a", "D", running(2, false, None))],
            &[],
            &none(),
            10_000,
        );
        save(&path, l.estimates()).unwrap();
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("garbage\nns/X not-an-estimate\n");
        std::fs::write(&path, text).unwrap();
        let loaded = load(&path).unwrap();
        assert_eq!(loaded.len(), 1);
        let saved = loaded["ns/D"];
        let original = l.estimates()["ns/D"];
        assert!((saved.bad - original.bad).abs() < 1e-3);
        let mut restored = Learner::new(&config());
        restored.restore(loaded, 20_000);
        assert_eq!(restored.estimates().len(), 1);
    }
}
