//! ScavengerJobs: batch jobs that run on idle capacity, yield at once to every other workload,
//! and lose as little finished work as possible when they do.
//!
//! This module is the contract between the parts (names every part must agree on, and the
//! checkpoint signal), plus the pure decisions the controller, the extender and the agents
//! make. No API calls here.
//!
//! **The checkpoint signal.** A scavenger's unsaved work is the time since its last checkpoint.
//! The workload gives the signal without any API call: after each checkpoint it touches (or
//! writes) the file named by the environment variable [`CHECKPOINT_FILE_ENV`]
//! (`/var/run/telemesh/checkpoint`), in a small `emptyDir` volume ([`CHECKPOINT_VOLUME`]) the
//! controller adds to every scavenger pod. The agent on the node reads that file's modification
//! time where the kubelet keeps `emptyDir` volumes
//! (`<kubelet root>/pods/<pod uid>/volumes/kubernetes.io~empty-dir/telemesh-checkpoint/checkpoint`,
//! [`checkpoint_file_on_host`]): no hostPath in the workload, no permission for it, and the
//! layout is kubelet's, stable since `emptyDir` exists. A pod that never touches the file is
//! assumed to checkpoint exactly at its declared interval ([`last_checkpoint`]). The real
//! checkpoint data belongs on the job's persistent volume; the marker only says when.

pub mod controller;
pub mod crd;
pub mod pressure;
pub mod start;
pub mod victims;

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Label on a ScavengerJob's Job and pods: the ScavengerJob's name.
pub const JOB_LABEL: &str = "telemesh.io/scavenger-job";

/// Annotation on scavenger pods: the declared `checkpointInterval`, in whole seconds.
pub const CHECKPOINT_INTERVAL_ANNOTATION: &str = "telemesh.io/checkpoint-interval-seconds";

/// Annotation on scavenger pods: the declared minimum run (`minimumRun`), in whole seconds.
/// Before a pod has run that long its work is not worth keeping ([`worth_keeping_from`]).
pub const MINIMUM_RUN_ANNOTATION: &str = "telemesh.io/minimum-run-seconds";

/// The PriorityClass of every scavenger pod: below every other workload, and
/// `preemptionPolicy: Never` (deploy/priorityclasses.yaml).
pub const PRIORITY_CLASS: &str = "telemesh-scavenger";

/// That PriorityClass's value. Pods without a class get 0, so every ordinary pod outranks it.
pub const PRIORITY: i32 = -1000;

/// The `emptyDir` volume that holds the checkpoint marker.
pub const CHECKPOINT_VOLUME: &str = "telemesh-checkpoint";

/// Where the marker volume is mounted in every container.
pub const CHECKPOINT_MOUNT_PATH: &str = "/var/run/telemesh";

/// The marker file's name in that volume.
pub const CHECKPOINT_FILE_NAME: &str = "checkpoint";

/// The environment variable that tells the workload which file to touch after a checkpoint.
pub const CHECKPOINT_FILE_ENV: &str = "TELEMESH_CHECKPOINT_FILE";

/// The kubelet's default root directory (`--root-dir`).
pub const DEFAULT_KUBELET_ROOT: &str = "/var/lib/kubelet";

/// The marker's path inside the container (the value of [`CHECKPOINT_FILE_ENV`]).
pub fn checkpoint_file_in_container() -> String {
    format!("{CHECKPOINT_MOUNT_PATH}/{CHECKPOINT_FILE_NAME}")
}

/// Where the kubelet keeps a pod's marker on the node: `kubelet_root` as seen by the reader
/// (the agent prefixes its host root).
pub fn checkpoint_file_on_host(kubelet_root: &Path, pod_uid: &str) -> PathBuf {
    kubelet_root
        .join("pods")
        .join(pod_uid)
        .join("volumes")
        .join("kubernetes.io~empty-dir")
        .join(CHECKPOINT_VOLUME)
        .join(CHECKPOINT_FILE_NAME)
}

/// The last checkpoint of a pod that started at `started`: the marker's modification time when
/// the workload gave one since it started, else the start of the current `interval` window
/// (the job promised a checkpoint at least that often), else the start itself. Never later
/// than `now`.
pub fn last_checkpoint(
    started: SystemTime,
    interval: Option<Duration>,
    marker: Option<SystemTime>,
    now: SystemTime,
) -> SystemTime {
    let observed = marker.filter(|m| *m >= started).map(|m| m.min(now));
    if let Some(at) = observed {
        return at;
    }
    let Ok(running) = now.duration_since(started) else {
        return now;
    };
    match interval.filter(|i| !i.is_zero()) {
        Some(interval) => {
            let windows = running.as_nanos() / interval.as_nanos();
            let offset = interval.as_nanos() * windows;
            started + Duration::from_nanos(u64::try_from(offset).unwrap_or(u64::MAX))
        }
        None => started,
    }
}

/// The checkpoint to publish for a pod that started at `started`, whose [`last_checkpoint`] is
/// `last`, under the job's `minimum_run`: work done before the pod has run that long is not
/// worth keeping, so nothing counts as unsaved until then (`started + minimum_run`, which may
/// lie ahead of now: [`unsaved`] gives zero for it). Without a minimum run, `last` itself.
pub fn worth_keeping_from(
    started: SystemTime,
    last: SystemTime,
    minimum_run: Option<Duration>,
) -> SystemTime {
    let Some(earliest) = minimum_run.and_then(|m| started.checked_add(m)) else {
        return last;
    };
    last.max(earliest)
}

/// Work a pod would lose if stopped at `now`: the time since its last checkpoint.
pub fn unsaved(last_checkpoint: SystemTime, now: SystemTime) -> Duration {
    now.duration_since(last_checkpoint).unwrap_or_default()
}

/// What an agent gossips of one scavenger pod on its node (key `s:<pod uid>`), all the
/// extender needs to rank it as a preemption victim without an API call:
/// `<namespace>/<scavengerjob>@<last checkpoint, unix ms>@<cpu millicores>@<memory bytes>`.
/// The checkpoint is [`last_checkpoint`]'s answer (observed or the window start), so readers
/// need neither the pod's start time nor its interval.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ScavengerPod {
    /// The ScavengerJob, `namespace/name`: all its pods are interrupted together.
    pub job: String,
    /// The pod's last checkpoint, milliseconds since the Unix epoch: the agent's clock where
    /// it observes it, cluster time once published (`ClusterClock::cluster_ms`).
    pub checkpoint_ms: u64,
    /// The pod's CPU request, millicores.
    pub cpu_millis: u64,
    /// The pod's memory request, bytes.
    pub memory_bytes: u64,
}

/// A `s:` value that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "scavenger pod value {0:?} is not <namespace>/<job>@<checkpoint ms>@<cpu millicores>@<memory bytes>"
)]
pub struct MalformedScavengerPod(pub String);

impl ScavengerPod {
    /// The last checkpoint as a time.
    pub fn checkpoint(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.checkpoint_ms)
    }
}

impl fmt::Display for ScavengerPod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}@{}@{}@{}",
            self.job, self.checkpoint_ms, self.cpu_millis, self.memory_bytes
        )
    }
}

impl FromStr for ScavengerPod {
    type Err = MalformedScavengerPod;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let malformed = || MalformedScavengerPod(s.chars().take(64).collect());
        let mut parts = s.split('@');
        let (Some(job), Some(at), Some(cpu), Some(memory), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(malformed());
        };
        let number = |field: &str| {
            // u64 parsing takes a leading '+'; the writer never emits one.
            if field.starts_with('+') {
                return Err(malformed());
            }
            field.parse::<u64>().map_err(|_| malformed())
        };
        let valid_job = job
            .split_once('/')
            .is_some_and(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains('/'))
            && job.bytes().all(|b| b.is_ascii_graphic());
        if !valid_job {
            return Err(malformed());
        }
        Ok(Self {
            job: job.to_owned(),
            checkpoint_ms: number(at)?,
            cpu_millis: number(cpu)?,
            memory_bytes: number(memory)?,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn scavenger_pod_values_round_trip_and_refuse_junk() {
        let pod = ScavengerPod {
            job: "batch/render".into(),
            checkpoint_ms: 1_767_225_600_123,
            cpu_millis: 500,
            memory_bytes: 268_435_456,
        };
        let text = pod.to_string();
        assert_eq!(text, "batch/render@1767225600123@500@268435456");
        assert_eq!(text.parse::<ScavengerPod>().unwrap(), pod);
        assert_eq!(
            pod.checkpoint(),
            UNIX_EPOCH + Duration::from_millis(1_767_225_600_123)
        );
        for junk in [
            "",
            "render@1@2@3",
            "/render@1@2@3",
            "batch/@1@2@3",
            "a/b/c@1@2@3",
            "batch/render@1@2",
            "batch/render@1@2@3@4",
            "batch/render@+1@2@3",
            "batch/render@-1@2@3",
            "batch/render@x@2@3",
            "bat ch/render@1@2@3",
        ] {
            assert!(junk.parse::<ScavengerPod>().is_err(), "{junk:?}");
        }
    }

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn an_observed_marker_wins() {
        let last = last_checkpoint(
            at(100),
            Some(Duration::from_secs(60)),
            Some(at(130)),
            at(200),
        );
        assert_eq!(last, at(130));
    }

    #[test]
    fn a_marker_from_before_the_start_is_ignored() {
        // A marker older than the pod (left by an earlier run) says nothing of this one.
        let last = last_checkpoint(
            at(100),
            Some(Duration::from_secs(60)),
            Some(at(90)),
            at(200),
        );
        assert_eq!(last, at(160));
    }

    #[test]
    fn without_a_marker_the_window_start_counts() {
        let interval = Some(Duration::from_secs(60));
        assert_eq!(last_checkpoint(at(100), interval, None, at(100)), at(100));
        assert_eq!(last_checkpoint(at(100), interval, None, at(159)), at(100));
        assert_eq!(last_checkpoint(at(100), interval, None, at(160)), at(160));
        assert_eq!(last_checkpoint(at(100), interval, None, at(281)), at(280));
    }

    #[test]
    fn without_marker_or_interval_everything_since_the_start_is_unsaved() {
        assert_eq!(last_checkpoint(at(100), None, None, at(500)), at(100));
        let zero = Some(Duration::ZERO);
        assert_eq!(last_checkpoint(at(100), zero, None, at(500)), at(100));
        assert_eq!(unsaved(at(100), at(500)), Duration::from_secs(400));
    }

    #[test]
    fn clocks_that_disagree_never_give_negative_work() {
        // Started "in the future" (skew between the API server and this node).
        assert_eq!(last_checkpoint(at(300), None, None, at(200)), at(200));
        // A marker from the future is capped at now.
        let last = last_checkpoint(at(100), None, Some(at(900)), at(200));
        assert_eq!(last, at(200));
        assert_eq!(unsaved(at(300), at(200)), Duration::ZERO);
    }

    #[test]
    fn work_before_the_minimum_run_is_not_worth_keeping() {
        let minimum = Some(Duration::from_secs(120));
        // Young pod: its checkpoint is pushed to start + minimum run, so nothing is unsaved yet.
        let young = worth_keeping_from(at(100), at(100), minimum);
        assert_eq!(young, at(220));
        assert_eq!(unsaved(young, at(150)), Duration::ZERO);
        // Past the minimum run, with a checkpoint before it: unsaved since start + minimum run.
        let grown = worth_keeping_from(at(100), at(160), minimum);
        assert_eq!(grown, at(220));
        assert_eq!(unsaved(grown, at(250)), Duration::from_secs(30));
        // A checkpoint after the minimum run counts as is.
        assert_eq!(worth_keeping_from(at(100), at(300), minimum), at(300));
        // No minimum run, or a zero one: the last checkpoint.
        assert_eq!(worth_keeping_from(at(100), at(130), None), at(130));
        assert_eq!(
            worth_keeping_from(at(100), at(130), Some(Duration::ZERO)),
            at(130)
        );
        // An absurd minimum run does not overflow: the last checkpoint stands.
        assert_eq!(
            worth_keeping_from(at(100), at(130), Some(Duration::MAX)),
            at(130)
        );
    }

    #[test]
    fn the_marker_lives_where_the_kubelet_keeps_empty_dirs() {
        let path = checkpoint_file_on_host(Path::new("/var/lib/kubelet"), "u-1");
        assert_eq!(
            path,
            Path::new(
                "/var/lib/kubelet/pods/u-1/volumes/kubernetes.io~empty-dir/telemesh-checkpoint/checkpoint"
            )
        );
        assert_eq!(
            checkpoint_file_in_container(),
            "/var/run/telemesh/checkpoint"
        );
    }
}
