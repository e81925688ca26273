//! Scavenger pods on this node (pods carrying [`JOB_LABEL`]): the agent observes each one's
//! last checkpoint from its marker file, where the kubelet keeps the pod's checkpoint `emptyDir`
//! (read under `--host-root`, no API call), and gossips it as `s:<pod uid>` for the extender's
//! victim ranking, only when the value changes, deleting the key when the pod leaves. Under
//! sustained pressure (PSI `some avg10` of cpu, memory or io above
//! `--scavenger-pressure-threshold` for `--scavenger-pressure-for`) it evicts the scavenger that
//! loses the least unsaved work, through the local evictor (Eviction API, rate limit,
//! dry-run), one at a time: after each eviction the pressure must stay high for a whole
//! `--scavenger-pressure-for` again before the next.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::runtime::reflector::Store;
use telemesh_core::gossip::StateKey;
use telemesh_core::metric::Sample;
use telemesh_core::scavenge::pressure::{Sustained, least_unsaved};
use telemesh_core::scavenge::{
    CHECKPOINT_INTERVAL_ANNOTATION, JOB_LABEL, MINIMUM_RUN_ANNOTATION, ScavengerPod,
    checkpoint_file_on_host, last_checkpoint, worth_keeping_from,
};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::config::ScavengerConfig;
use crate::enforcement::evictor::Outcome;
use crate::metrics::{AgentMetrics, EvictionLabels};
use crate::shared::{LatestSamples, SharedEvictor, SharedGossip};

/// The node pressure metrics compared with the threshold (ratios; the threshold is percent).
const PRESSURE_METRICS: [&str; 3] = [
    "node_pressure_cpu_some_avg10_ratio",
    "node_pressure_memory_some_avg10_ratio",
    "node_pressure_io_some_avg10_ratio",
];

/// What the scavenger loop needs.
pub struct Inputs {
    /// The host root the kubelet root is read under.
    pub host_root: PathBuf,
    /// This node's pods.
    pub pods: Store<Pod>,
    /// The latest node collection.
    pub samples: LatestSamples,
    /// Where `s:` keys go.
    pub gossip: SharedGossip,
    /// The node's evictor; `None`: local eviction is off, so no pressure eviction.
    pub evictor: Option<SharedEvictor>,
    /// Metrics (evictions by outcome).
    pub metrics: AgentMetrics,
    /// Settings.
    pub config: ScavengerConfig,
}

/// The `s:` value of `pod` at `now`, if it is a started scavenger still running here:
/// its job, its last checkpoint (the marker's modification time `marker` when the workload gave
/// one, else the start of its checkpoint window; never before its minimum run has passed) and
/// its requests.
pub fn observe(pod: &Pod, marker: Option<SystemTime>, now: SystemTime) -> Option<ScavengerPod> {
    let job = pod.labels().get(JOB_LABEL)?;
    if pod.metadata.deletion_timestamp.is_some()
        || matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        )
    {
        return None;
    }
    let started = SystemTime::from(pod.status.as_ref()?.start_time.as_ref()?.0);
    let seconds = |key: &str| {
        pod.annotations()
            .get(key)
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs)
    };
    let last = last_checkpoint(
        started,
        seconds(CHECKPOINT_INTERVAL_ANNOTATION),
        marker,
        now,
    );
    let checkpoint = worth_keeping_from(started, last, seconds(MINIMUM_RUN_ANNOTATION));
    let requests = telemesh_core::fit::pod_requests(pod);
    let amount = |key: &str| requests.get(key).copied().unwrap_or(0.0).max(0.0);
    Some(ScavengerPod {
        job: format!("{}/{job}", pod.namespace().unwrap_or_default()),
        checkpoint_ms: u64::try_from(
            checkpoint
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_millis(),
        )
        .unwrap_or(u64::MAX),
        cpu_millis: (amount("cpu") * 1000.0).round() as u64,
        memory_bytes: amount("memory").round() as u64,
    })
}

/// The marker's modification time, if the workload has touched it; an error other than its
/// absence (no permission to read the kubelet's pods directory, which is root's, 0750).
fn marker_time(kubelet_root: &Path, uid: &str) -> std::io::Result<Option<SystemTime>> {
    match std::fs::metadata(checkpoint_file_on_host(kubelet_root, uid)).and_then(|m| m.modified()) {
        Ok(at) => Ok(Some(at)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The highest node pressure (percent) in `samples`, if any is measured.
pub fn node_pressure(samples: &[Sample]) -> Option<f64> {
    samples
        .iter()
        .filter(|s| PRESSURE_METRICS.contains(&s.name.as_str()) && s.value.is_finite())
        .map(|s| s.value * 100.0)
        .reduce(f64::max)
}

/// `kubelet_root` (a host path) under `host_root`.
fn under_host_root(host_root: &Path, kubelet_root: &Path) -> PathBuf {
    host_root.join(kubelet_root.strip_prefix("/").unwrap_or(kubelet_root))
}

/// Runs until `stop`: publishes `s:` keys and evicts under sustained pressure.
pub async fn run(inputs: Inputs, stop: CancellationToken) {
    let Inputs {
        host_root,
        pods,
        samples,
        gossip,
        evictor,
        metrics,
        config,
    } = inputs;
    let kubelet_root = under_host_root(&host_root, &config.kubelet_root);
    let mut pressure = Sustained::new(config.pressure_threshold, config.pressure_for);
    let mut published: BTreeMap<String, ScavengerPod> = BTreeMap::new();
    let mut warned_unreadable = false;
    let mut tick = tokio::time::interval(config.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        // One tick: publishing the scavengers' checkpoints, then the pressure eviction.
        async {
            let now = SystemTime::now();
            let here = pods.state();
            let current: BTreeMap<String, ScavengerPod> = here
                .iter()
                .filter_map(|pod| {
                    let uid = pod.uid()?;
                    let marker = marker_time(&kubelet_root, &uid).unwrap_or_else(|e| {
                        if !std::mem::replace(&mut warned_unreadable, true) {
                            tracing::warn!(dir = %kubelet_root.display(), error = %e, "cannot read scavenger checkpoint markers; unsaved work falls back to checkpoint windows (the kubelet's pods directory is root's: the agent needs read access to it)");
                        }
                        None
                    });
                    let value = observe(pod, marker, now)?;
                    Some((uid, value))
                })
                .collect();
            publish(&gossip, &mut published, &current).await;

            let latest = samples.read().as_ref().map(|(_, s)| node_pressure(s));
            let sustained = pressure.observe(latest.flatten(), tokio::time::Instant::now().into_std());
            let Some(evictor) = evictor.as_ref().filter(|_| sustained) else {
                return;
            };
            let Some(uid) = least_unsaved(current.iter().map(|(u, p)| (u.as_str(), p)), now) else {
                return;
            };
            let Some(pod) = here.iter().find(|p| p.uid().as_deref() == Some(uid)) else {
                return;
            };
            let unsaved = telemesh_core::scavenge::unsaved(current[uid].checkpoint(), now);
            let reason = format!(
                "node pressure above {}% for {:?}; this scavenger loses the least unsaved work on the node ({:?})",
                config.pressure_threshold, config.pressure_for, unsaved
            );
            let outcome = evictor
                .lock()
                .await
                .evict(pod, &reason, tokio::time::Instant::now().into_std())
                .await;
            if outcome == Outcome::AlreadyEvicted {
                return; // leaving already; this loop's view of the pods lags behind
            }
            metrics
                .scavenger_evictions
                .get_or_create(&EvictionLabels {
                    outcome: outcome.as_str().into(),
                })
                .inc();
            if matches!(outcome, Outcome::Evicted | Outcome::DryRun | Outcome::Gone) {
                tracing::info!(pod.namespace = %pod.namespace().unwrap_or_default(), pod.name = %pod.name_any(), outcome = outcome.as_str(), unsaved_seconds = unsaved.as_secs_f64(), "scavenger pressure eviction");
                pressure.restart(tokio::time::Instant::now().into_std());
            } else {
                // Refused or rate limited: tried again next tick, so not worth a line each time.
                tracing::debug!(pod.namespace = %pod.namespace().unwrap_or_default(), pod.name = %pod.name_any(), outcome = outcome.as_str(), "scavenger pressure eviction not done yet");
            }
        }
        .instrument(tracing::info_span!("scavenger_tick"))
        .await;
    }
}

/// Sets the `s:` keys whose value changed and deletes those of pods that left.
async fn publish(
    gossip: &SharedGossip,
    published: &mut BTreeMap<String, ScavengerPod>,
    current: &BTreeMap<String, ScavengerPod>,
) {
    let guard = gossip.lock().await;
    let Some(member) = guard.as_ref() else {
        return;
    };
    let gone: Vec<String> = published
        .keys()
        .filter(|uid| !current.contains_key(*uid))
        .cloned()
        .collect();
    for uid in gone {
        // chitchat 0.13 keeps a tombstone (a newer version readers see as deleted) until its
        // grace period ends, so peers learn of the removal.
        match member.delete(&StateKey::Scavenger(uid.clone())).await {
            Ok(()) => {
                published.remove(&uid);
            }
            Err(e) => tracing::warn!(pod.uid = %uid, error = %e, "cannot remove a scavenger key"),
        }
    }
    let clock = member.clock();
    for (uid, local) in current {
        // Observed in this machine's time (the marker's mtime, the system clock); published in
        // cluster time, which readers age it with.
        let value = &ScavengerPod {
            checkpoint_ms: clock.cluster_ms(local.checkpoint()),
            ..local.clone()
        };
        if published.get(uid) == Some(value) {
            continue;
        }
        match member
            .set(&StateKey::Scavenger(uid.clone()), &value.to_string())
            .await
        {
            Ok(()) => {
                published.insert(uid.clone(), value.clone());
            }
            Err(e) => tracing::warn!(pod.uid = %uid, error = %e, "cannot publish a scavenger key"),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;
    use telemesh_core::metric::MetricName;

    use super::*;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn pod(annotations: serde_json::Value, status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "batch", "uid": "u1",
                         "labels": {JOB_LABEL: "render"}, "annotations": annotations},
            "spec": {"containers": [{"name": "c", "image": "i",
                "resources": {"requests": {"cpu": "1500m", "memory": "256Mi"}}}]},
            "status": status,
        }))
        .unwrap()
    }

    fn running() -> serde_json::Value {
        json!({"phase": "Running", "startTime": "1970-01-01T00:01:40Z"})
    }

    #[test]
    fn the_marker_wins_then_the_window_then_the_minimum_run() {
        let interval = json!({CHECKPOINT_INTERVAL_ANNOTATION: "60"});
        let p = pod(interval.clone(), running());
        let seen = observe(&p, Some(at(130)), at(200)).unwrap();
        assert_eq!(seen.job, "batch/render");
        assert_eq!(seen.checkpoint_ms, 130_000, "the observed marker");
        assert_eq!((seen.cpu_millis, seen.memory_bytes), (1500, 268_435_456));
        let window = observe(&p, None, at(200)).unwrap();
        assert_eq!(window.checkpoint_ms, 160_000, "the window start (100 + 60)");
        let young = pod(
            json!({CHECKPOINT_INTERVAL_ANNOTATION: "60", MINIMUM_RUN_ANNOTATION: "300"}),
            running(),
        );
        let seen = observe(&young, Some(at(130)), at(200)).unwrap();
        assert_eq!(
            seen.checkpoint_ms, 400_000,
            "start + minimum run, ahead of now"
        );
    }

    #[test]
    fn only_started_live_scavengers_are_published() {
        let mut plain = pod(json!({}), running());
        plain.metadata.labels = None;
        assert_eq!(observe(&plain, None, at(200)), None, "not a scavenger");
        assert_eq!(
            observe(&pod(json!({}), json!({})), None, at(200)),
            None,
            "not started"
        );
        let done = json!({"phase": "Succeeded", "startTime": "1970-01-01T00:01:40Z"});
        assert_eq!(observe(&pod(json!({}), done), None, at(200)), None);
        let mut leaving = pod(json!({}), running());
        leaving.metadata.deletion_timestamp =
            Some(serde_json::from_value(json!("1970-01-01T00:03:00Z")).unwrap());
        assert_eq!(observe(&leaving, None, at(200)), None);
        let no_interval = observe(&pod(json!({}), running()), None, at(200)).unwrap();
        assert_eq!(
            no_interval.checkpoint_ms, 100_000,
            "everything since the start"
        );
    }

    #[test]
    fn an_untouched_marker_is_no_error() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(marker_time(root.path(), "u1").unwrap(), None);
        let marker = checkpoint_file_on_host(root.path(), "u1");
        std::fs::create_dir_all(marker.parent().unwrap()).unwrap();
        std::fs::write(&marker, "").unwrap();
        let touched = std::fs::metadata(&marker).unwrap().modified().unwrap();
        assert_eq!(marker_time(root.path(), "u1").unwrap(), Some(touched));
    }

    #[test]
    fn node_pressure_is_the_highest_some_avg10_in_percent() {
        let s = |name: &str, value: f64| Sample {
            name: MetricName::new(name).unwrap(),
            value,
        };
        let samples = [
            s("node_pressure_cpu_some_avg10_ratio", 0.25),
            s("node_pressure_io_some_avg10_ratio", 0.5),
            s("node_pressure_memory_full_avg10_ratio", 0.9),
            s("node_load1", 7.0),
        ];
        assert_eq!(node_pressure(&samples), Some(50.0));
        assert_eq!(node_pressure(&samples[2..]), None);
        assert_eq!(
            under_host_root(Path::new("/host"), Path::new("/var/lib/kubelet")),
            Path::new("/host/var/lib/kubelet")
        );
    }
}
