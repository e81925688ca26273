//! Local eviction: this node's pods linked to a violated deschedule policy leave through the
//! Eviction API, so PodDisruptionBudgets are honoured (a 429 is retried on a later pass, never
//! forced). Which pods may go is decided by [`eligibility`], a pure function; [`Evictor`] adds
//! the node scope (it evicts only pods bound to its own node, [`crate::enforcement::scope::pod`], whoever
//! asks), the rate limit, the API call and the Event on the pod.
//!
//! Never evicted: pods of DaemonSets (they would come straight back here), static and mirror
//! pods (the kubelet owns them), pods annotated `telemesh.io/evict: "never"`, pods already
//! terminating, and pods younger than the minimum age. A pod already terminating is also what
//! keeps a restarted agent from evicting twice; a running agent also remembers the pods it
//! evicted until they leave its watch, because that watch can lag behind: after the API server
//! was away, the pods are listed again only when the watch's backoff ends, and until then they
//! look as they did before their eviction (the fault suite evicted pods two and three times so).
//!
//! While the API server is unavailable, attempts wait on the agent's one backoff
//! ([`crate::enforcement::api_backoff`]): one request per wait for the whole node, not one per pod.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, EvictParams};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::{Client, Resource as _, ResourceExt as _};

use crate::config::EvictionConfig;
use crate::enforcement::api_backoff::{self, SharedApiBackoff};
use crate::enforcement::scope::{self, Refusals};

/// The opt-out annotation.
pub const EVICT_ANNOTATION: &str = "telemesh.io/evict";

/// Why a linked pod stays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Owned by a DaemonSet.
    DaemonSet,
    /// A static or mirror pod.
    Static,
    /// Annotated `telemesh.io/evict: "never"`.
    OptedOut,
    /// Already being deleted.
    Terminating,
    /// Younger than the minimum age.
    TooYoung,
}

/// Whether a linked pod may be evicted at `now` (`created_age` is its age, if known).
pub fn eligibility(pod: &Pod, age: Option<Duration>, min_age: Duration) -> Result<(), Keep> {
    let meta = &pod.metadata;
    if meta.deletion_timestamp.is_some() {
        return Err(Keep::Terminating);
    }
    let owners = meta.owner_references.iter().flatten();
    let mut daemonset = false;
    let mut node_owned = false;
    for owner in owners {
        daemonset |= owner.kind == "DaemonSet";
        node_owned |= owner.kind == "Node";
    }
    if daemonset {
        return Err(Keep::DaemonSet);
    }
    let annotations = meta.annotations.as_ref();
    let annotated = |k: &str| annotations.is_some_and(|a| a.contains_key(k));
    if node_owned
        || annotated("kubernetes.io/config.mirror")
        || annotations
            .and_then(|a| a.get("kubernetes.io/config.source"))
            .is_some_and(|s| s != "api")
    {
        return Err(Keep::Static);
    }
    if annotations
        .and_then(|a| a.get(EVICT_ANNOTATION))
        .is_some_and(|v| v == "never")
    {
        return Err(Keep::OptedOut);
    }
    if age.is_some_and(|a| a < min_age) {
        return Err(Keep::TooYoung);
    }
    Ok(())
}

/// What one eviction attempt did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The API server accepted the eviction.
    Evicted,
    /// Dry run: recorded, not evicted.
    DryRun,
    /// A PodDisruptionBudget refused it (429); tried again later.
    Blocked,
    /// The pod was already gone.
    Gone,
    /// The per-minute budget is spent; tried again later.
    RateLimited,
    /// Tried recently and refused; waiting before the next try.
    Waiting,
    /// Bound to another node (or none): refused, never sent.
    OutsideNode,
    /// Any other error; tried again later.
    Failed,
    /// The API server is unavailable (this attempt found it so); tried after the backoff.
    Unavailable,
    /// Not tried: the API server was unavailable and the backoff has not elapsed.
    Deferred,
    /// Not tried: this agent evicted the pod already (its watch has not caught up yet).
    AlreadyEvicted,
}

impl Outcome {
    /// A bounded label for metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Evicted => "evicted",
            Self::DryRun => "dry_run",
            Self::Blocked => "blocked_by_budget",
            Self::Gone => "gone",
            Self::RateLimited => "rate_limited",
            Self::Waiting => "waiting",
            Self::OutsideNode => "outside_node",
            Self::Failed => "failed",
            Self::Unavailable => "unavailable",
            Self::Deferred => "deferred",
            Self::AlreadyEvicted => "already_evicted",
        }
    }

    /// Whether the API server could not be reached, so the rest of a pass should wait too.
    pub fn api_unavailable(self) -> bool {
        matches!(self, Self::Unavailable | Self::Deferred)
    }
}

/// How long a pod a budget refused waits before the next attempt.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// Evicts pods within the guards.
pub struct Evictor {
    node_name: String,
    refusals: Refusals,
    client: Client,
    recorder: Recorder,
    config: EvictionConfig,
    recent: VecDeque<Instant>,
    /// Pods (by uid) refused recently, and when they may be tried again.
    retry_at: HashMap<String, Instant>,
    /// Pods (by uid) this agent evicted, until they leave its watch.
    evicted: HashSet<String>,
    /// The agent's backoff for an unavailable API server.
    backoff: SharedApiBackoff,
}

impl Evictor {
    /// An evictor of `node_name`'s pods; `client` should not retry 429s itself (a PDB refusal
    /// is an answer), and `backoff` is the agent's one backoff for an unavailable API server.
    /// Pods bound elsewhere are refused and counted in `refusals`.
    pub fn new(
        node_name: &str,
        refusals: Refusals,
        client: Client,
        recorder: Recorder,
        config: EvictionConfig,
        backoff: SharedApiBackoff,
    ) -> Self {
        Self {
            node_name: node_name.to_owned(),
            refusals,
            client,
            recorder,
            config,
            recent: VecDeque::new(),
            retry_at: HashMap::new(),
            evicted: HashSet::new(),
            backoff,
        }
    }

    /// The guards.
    pub fn config(&self) -> &EvictionConfig {
        &self.config
    }

    /// Whether this agent evicted `pod` already (it may still look untouched in a lagging watch).
    pub fn evicted(&self, pod: &Pod) -> bool {
        pod.uid().is_some_and(|uid| self.evicted.contains(&uid))
    }

    /// Evicts `pod` for `reason` (which names policy, rule and value), unless a guard holds.
    pub async fn evict(&mut self, pod: &Pod, reason: &str, now: Instant) -> Outcome {
        if let Err(e) = scope::pod(&self.node_name, pod) {
            self.refusals.refuse(&e);
            return Outcome::OutsideNode;
        }
        let uid = pod.uid().unwrap_or_default();
        if self.evicted.contains(&uid) {
            return Outcome::AlreadyEvicted;
        }
        if self.retry_at.get(&uid).is_some_and(|at| *at > now) {
            return Outcome::Waiting;
        }
        while self
            .recent
            .front()
            .is_some_and(|t| now.duration_since(*t) >= Duration::from_secs(60))
        {
            self.recent.pop_front();
        }
        if self.recent.len() >= self.config.max_per_minute as usize {
            return Outcome::RateLimited;
        }
        let (namespace, name) = (pod.namespace().unwrap_or_default(), pod.name_any());
        if self.config.dry_run {
            self.recent.push_back(now);
            self.retry_at.insert(uid, now + Duration::from_secs(60));
            tracing::info!(pod.namespace = %namespace, pod.name = %name, reason, "dry run: would evict");
            self.record(pod, "WouldEvict", reason).await;
            return Outcome::DryRun;
        }
        if !self.backoff.lock().ready(now) {
            return Outcome::Deferred;
        }
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
        let result = pods.evict(&name, &EvictParams::default()).await;
        match result.as_ref().err().map(api_backoff::unavailable) {
            Some(Some(retry_after)) => {
                let wait = self
                    .backoff
                    .lock()
                    .failed(now, retry_after, api_backoff::draw());
                if let Err(e) = &result {
                    tracing::warn!(pod.namespace = %namespace, pod.name = %name, error = %e, wait = ?wait, "eviction failed: the API server is unavailable; retrying after the backoff");
                }
                return Outcome::Unavailable;
            }
            _ => self.backoff.lock().succeeded(),
        }
        match result {
            Ok(_) => {
                self.recent.push_back(now);
                self.retry_at.remove(&uid);
                self.evicted.insert(uid);
                tracing::info!(pod.namespace = %namespace, pod.name = %name, reason, "evicted");
                self.record(pod, "Evicted", reason).await;
                Outcome::Evicted
            }
            Err(kube::Error::Api(s)) if s.code == 404 => Outcome::Gone,
            Err(kube::Error::Api(s)) if s.code == 429 => {
                self.retry_at.insert(uid, now + RETRY_AFTER);
                tracing::info!(pod.namespace = %namespace, pod.name = %name, message = %s.message, "eviction refused by a disruption budget; will retry");
                Outcome::Blocked
            }
            Err(e) => {
                self.retry_at.insert(uid, now + RETRY_AFTER);
                tracing::warn!(pod.namespace = %namespace, pod.name = %name, error = %e, "eviction failed; will retry");
                Outcome::Failed
            }
        }
    }

    /// Forgets pods that are gone, so the tables stay as small as the node's pod list.
    pub fn retain(&mut self, live_uids: &HashSet<String>) {
        self.retry_at.retain(|uid, _| live_uids.contains(uid));
        self.evicted.retain(|uid| live_uids.contains(uid));
    }

    async fn record(&self, pod: &Pod, reason: &str, note: &str) {
        let event = Event {
            type_: EventType::Warning,
            reason: reason.into(),
            note: Some(truncate(note, 1000)),
            action: "Evict".into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &pod.object_ref(&())).await {
            tracing::debug!(error = %e, "recording the eviction event failed");
        }
    }
}

/// Cuts `s` to at most `max` bytes on a character boundary.
pub fn truncate(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn pod(meta: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({ "metadata": meta })).unwrap()
    }

    #[test]
    fn guards_keep_the_pods_that_must_stay() {
        let min = Duration::from_secs(30);
        let old = Some(Duration::from_secs(60));
        assert_eq!(
            eligibility(&pod(serde_json::json!({"name": "p"})), old, min),
            Ok(())
        );
        let cases = [
            (
                serde_json::json!({"name": "p", "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "u"}]}),
                Keep::DaemonSet,
            ),
            (
                serde_json::json!({"name": "p", "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "u"}]}),
                Keep::Static,
            ),
            (
                serde_json::json!({"name": "p", "annotations": {"kubernetes.io/config.mirror": "x"}}),
                Keep::Static,
            ),
            (
                serde_json::json!({"name": "p", "annotations": {"kubernetes.io/config.source": "file"}}),
                Keep::Static,
            ),
            (
                serde_json::json!({"name": "p", "annotations": {"telemesh.io/evict": "never"}}),
                Keep::OptedOut,
            ),
            (
                serde_json::json!({"name": "p", "deletionTimestamp": "2026-01-01T00:00:00Z"}),
                Keep::Terminating,
            ),
        ];
        for (meta, keep) in cases {
            assert_eq!(
                eligibility(&pod(meta.clone()), old, min),
                Err(keep),
                "{meta}"
            );
        }
        assert_eq!(
            eligibility(
                &pod(serde_json::json!({"name": "p"})),
                Some(Duration::from_secs(5)),
                min
            ),
            Err(Keep::TooYoung)
        );
        // Another value of the annotation does not opt out; a ReplicaSet owner is fine.
        let ok = pod(
            serde_json::json!({"name": "p", "annotations": {"telemesh.io/evict": "always", "kubernetes.io/config.source": "api"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "uid": "u"}]}),
        );
        assert_eq!(eligibility(&ok, old, min), Ok(()));
    }

    #[tokio::test]
    async fn pods_of_other_nodes_are_refused_without_a_request() {
        let (client, seen) = crate::test_client::recording();
        let reporter = kube::runtime::events::Reporter {
            controller: "telemesh-agent".into(),
            instance: Some("node-a".into()),
        };
        let recorder = Recorder::new(client.clone(), reporter);
        let refusals = Refusals::default();
        let config = EvictionConfig {
            dry_run: false,
            max_per_minute: 10,
            min_pod_age: Duration::ZERO,
            grace: Duration::ZERO,
        };
        let mut evictor = Evictor::new(
            "node-a",
            refusals.clone(),
            client,
            recorder,
            config,
            SharedApiBackoff::default(),
        );
        let on = |node: &str| -> Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "web", "namespace": "shop", "uid": "u"},
                "spec": {"nodeName": node, "containers": []}
            }))
            .unwrap()
        };
        let now = Instant::now();
        assert_eq!(
            evictor.evict(&on("node-b"), "r", now).await,
            Outcome::OutsideNode
        );
        assert!(seen.lock().is_empty(), "nothing sent: {:?}", seen.lock());
        assert_eq!(refusals.count(crate::enforcement::scope::Target::Pod), 1);
        assert_eq!(
            evictor.evict(&on("node-a"), "r", now).await,
            Outcome::Evicted
        );
        assert!(
            seen.lock()[0].starts_with("POST /api/v1/namespaces/shop/pods/web/eviction"),
            "{:?}",
            seen.lock()
        );
    }

    /// An evictor on a fresh sim, with a pod `p` held by a finalizer once deleted (as a real
    /// pod stays Terminating through its grace period).
    async fn held_pod() -> (telemesh_sim::Sim, Evictor, Pod) {
        let sim = telemesh_sim::Sim::start(Default::default()).await.unwrap();
        let client = sim.client().await.unwrap();
        let pods: Api<Pod> = Api::default_namespaced(client.clone());
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "finalizers": ["test/hold"]},
            "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "i"}]}
        }))
        .unwrap();
        let pod = pods
            .create(&kube::api::PostParams::default(), &pod)
            .await
            .unwrap();
        let recorder = Recorder::new(
            client.clone(),
            kube::runtime::events::Reporter {
                controller: "test".into(),
                instance: None,
            },
        );
        let config = EvictionConfig {
            dry_run: false,
            max_per_minute: 10,
            min_pod_age: Duration::ZERO,
            grace: Duration::ZERO,
        };
        let evictor = Evictor::new(
            "n",
            Refusals::default(),
            client,
            recorder,
            config,
            SharedApiBackoff::default(),
        );
        (sim, evictor, pod)
    }

    #[tokio::test]
    async fn a_pod_is_never_evicted_twice_even_through_a_lagging_watch() {
        let (_sim, mut evictor, pod) = held_pod().await;
        let now = Instant::now();
        assert_eq!(evictor.evict(&pod, "r", now).await, Outcome::Evicted);
        // The same, untouched-looking object again (a watch that has not caught up): no
        // second eviction, though the API server would accept one for a terminating pod.
        assert!(evictor.evicted(&pod));
        assert_eq!(evictor.evict(&pod, "r", now).await, Outcome::AlreadyEvicted);
        // Forgotten once it leaves the watch.
        evictor.retain(&HashSet::new());
        assert!(!evictor.evicted(&pod));
    }

    #[tokio::test]
    async fn an_unavailable_api_server_is_tried_once_per_backoff_not_once_per_pod() {
        let (sim, mut evictor, pod) = held_pod().await;
        sim.faults.start(telemesh_sim::faults::Fault::Outage, None);
        let now = Instant::now();
        assert_eq!(evictor.evict(&pod, "r", now).await, Outcome::Unavailable);
        assert_eq!(evictor.evict(&pod, "r", now).await, Outcome::Deferred);
        let refused: u64 = sim.faults.clients().values().map(|c| c.refused).sum();
        assert_eq!(refused, 1, "one request while the server is away");
        sim.faults.clear();
        let later = now + crate::enforcement::api_backoff::MAX;
        assert_eq!(evictor.evict(&pod, "r", later).await, Outcome::Evicted);
    }

    #[test]
    fn truncation_respects_characters() {
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(truncate("abc", 10), "abc");
    }
}
