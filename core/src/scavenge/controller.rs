//! The ScavengerJob controller's decisions, as pure functions: the Job a run gets
//! ([`job_for`]), the waiting queue ([`queue`]), admission under the use threshold and the
//! queue mode ([`admission_by`], [`ClusterLoad`], [`QueueMode`]), which waiting jobs an
//! admission poll looks at ([`polled`]) and the reconcile step from
//! what is observed to what to do ([`reconcile`]). The coordinator's `scavenge` module
//! watches, calls and writes.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, Container, EmptyDirVolumeSource, EnvVar as KubeEnvVar,
    PersistentVolumeClaimVolumeSource, Pod, PodSecurityContext, PodSpec, PodTemplateSpec,
    SecretVolumeSource, Volume as KubeVolume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::{Resource as _, ResourceExt as _};

use super::crd::{InvalidSpec, Phase, ScavengerJob, ScavengerJobStatus, VolumeRef};
use super::start::{self, Cause, NotStarted};
use super::{
    CHECKPOINT_FILE_ENV, CHECKPOINT_INTERVAL_ANNOTATION, CHECKPOINT_MOUNT_PATH, CHECKPOINT_VOLUME,
    JOB_LABEL, MINIMUM_RUN_ANNOTATION, PRIORITY_CLASS, checkpoint_file_in_container,
    last_checkpoint,
};
use crate::fit::{self, Resources};

/// The container's name in every scavenger pod.
pub const CONTAINER: &str = "job";

/// The label the Job controller puts on a Job's pods: the Job's name.
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";

/// The name of run `run` (1 for the first)'s Job.
pub fn job_name(scavenger: &str, run: usize) -> String {
    format!("{scavenger}-{run}")
}

/// Returns the Job of run `run` of `sj`: owned by it (controller reference), labelled
/// [`JOB_LABEL`], `parallelism = completions = spec.parallelism`, NonIndexed, no retries, pods
/// in the scavenger PriorityClass with the checkpoint marker volume and its environment
/// variable, the declared interval (and minimum run) as annotations, `runAsUser`, the volumes
/// and the env.
pub fn job_for(sj: &ScavengerJob, run: usize) -> Result<Job, InvalidSpec> {
    let spec = &sj.spec;
    let interval = spec.checkpoint_interval()?;
    let minimum_run = spec.minimum_run()?;
    let name = sj.name_any();
    let pods = i32::try_from(spec.pods()).unwrap_or(i32::MAX);

    let mut labels = spec
        .pod_metadata
        .as_ref()
        .map(|m| m.labels.clone())
        .unwrap_or_default();
    labels.insert(JOB_LABEL.to_owned(), name.clone());
    let mut annotations = spec
        .pod_metadata
        .as_ref()
        .map(|m| m.annotations.clone())
        .unwrap_or_default();
    annotations.insert(
        CHECKPOINT_INTERVAL_ANNOTATION.to_owned(),
        interval.as_secs().to_string(),
    );
    if let Some(min) = minimum_run {
        annotations.insert(MINIMUM_RUN_ANNOTATION.to_owned(), min.as_secs().to_string());
    }

    let mut volumes = vec![KubeVolume {
        name: CHECKPOINT_VOLUME.to_owned(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Default::default()
    }];
    let mut mounts = vec![VolumeMount {
        name: CHECKPOINT_VOLUME.to_owned(),
        mount_path: CHECKPOINT_MOUNT_PATH.to_owned(),
        ..Default::default()
    }];
    for v in &spec.volumes {
        let mut volume = KubeVolume {
            name: v.name.clone(),
            ..Default::default()
        };
        match v.source() {
            Some(VolumeRef::Claim(claim_name)) => {
                volume.persistent_volume_claim = Some(PersistentVolumeClaimVolumeSource {
                    claim_name,
                    read_only: v.read_only.then_some(true),
                });
            }
            Some(VolumeRef::ConfigMap(name)) => {
                volume.config_map = Some(ConfigMapVolumeSource {
                    name,
                    ..Default::default()
                });
            }
            Some(VolumeRef::Secret(secret_name)) => {
                volume.secret = Some(SecretVolumeSource {
                    secret_name: Some(secret_name),
                    ..Default::default()
                });
            }
            None => return Err(InvalidSpec::VolumeSource(v.name.clone())),
        }
        volumes.push(volume);
        mounts.push(VolumeMount {
            name: v.name.clone(),
            mount_path: v.mount_path.clone(),
            read_only: v.read_only.then_some(true),
            ..Default::default()
        });
    }

    let mut env: Vec<KubeEnvVar> = spec
        .env
        .iter()
        .filter(|e| e.name != CHECKPOINT_FILE_ENV)
        .map(|e| KubeEnvVar {
            name: e.name.clone(),
            value: Some(e.value.clone()),
            value_from: None,
        })
        .collect();
    env.push(KubeEnvVar {
        name: CHECKPOINT_FILE_ENV.to_owned(),
        value: Some(checkpoint_file_in_container()),
        value_from: None,
    });

    let non_empty = |v: &Vec<String>| (!v.is_empty()).then(|| v.clone());
    let container = Container {
        name: CONTAINER.to_owned(),
        image: Some(spec.image.clone()),
        command: non_empty(&spec.command),
        args: non_empty(&spec.args),
        env: Some(env),
        resources: Some(spec.resources.clone()),
        volume_mounts: Some(mounts),
        ..Default::default()
    };
    let job_labels = BTreeMap::from([(JOB_LABEL.to_owned(), name.clone())]);
    Ok(Job {
        metadata: ObjectMeta {
            name: Some(job_name(&name, run)),
            namespace: sj.namespace(),
            labels: Some(job_labels),
            owner_references: sj.controller_owner_ref(&()).map(|r| vec![r]),
            ..Default::default()
        },
        spec: Some(JobSpec {
            parallelism: Some(pods),
            completions: Some(pods),
            completion_mode: Some("NonIndexed".to_owned()),
            backoff_limit: Some(0),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    annotations: Some(annotations),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    restart_policy: Some("Never".to_owned()),
                    priority_class_name: Some(PRIORITY_CLASS.to_owned()),
                    security_context: spec.run_as_user.map(|uid| PodSecurityContext {
                        run_as_user: Some(uid),
                        ..Default::default()
                    }),
                    containers: vec![container],
                    volumes: Some(volumes),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        status: None,
    })
}

/// What all pods of one run of `sj` request together (a limit stands in for a missing
/// request, as for any pod).
pub fn run_requests(sj: &ScavengerJob) -> Resources {
    let pod = Pod {
        spec: Some(PodSpec {
            containers: vec![Container {
                name: CONTAINER.to_owned(),
                resources: Some(sj.spec.resources.clone()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let pods = f64::from(sj.spec.pods());
    fit::pod_requests(&pod)
        .into_iter()
        .map(|(k, v)| (k, v * pods))
        .collect()
}

// === the queue ===

/// The waiting ScavengerJobs in the order they get their turn: most interrupted first ("finish
/// what we started"), then oldest, then by namespace and name.
pub fn queue<'a>(jobs: impl IntoIterator<Item = &'a ScavengerJob>) -> Vec<&'a ScavengerJob> {
    let mut waiting: Vec<&ScavengerJob> = jobs
        .into_iter()
        .filter(|j| j.phase().is_waiting() && j.metadata.deletion_timestamp.is_none())
        .collect();
    waiting.sort_by(|a, b| rank(a, b));
    waiting
}

/// The queue's order between two jobs, waiting or not: most interrupted first, then oldest,
/// then by namespace and name.
fn rank(a: &ScavengerJob, b: &ScavengerJob) -> std::cmp::Ordering {
    b.interrupted_count()
        .cmp(&a.interrupted_count())
        .then_with(|| {
            let created = |j: &ScavengerJob| j.metadata.creation_timestamp.clone().map(|t| t.0);
            created(a).cmp(&created(b))
        })
        .then_with(|| a.namespace().cmp(&b.namespace()))
        .then_with(|| a.name_any().cmp(&b.name_any()))
}

// === admission ===

/// What "cluster use" means for admission (`--scavenger-use`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum UseMode {
    /// Requested resources over allocatable: what kube-scheduler fits pods by and preemption
    /// frees. The default, because a job admitted on any other measure must still fit by
    /// requests: admitted where requests are full, its pods would sit unschedulable until the
    /// timeout sends it back.
    #[default]
    Requested,
    /// Measured use from the agents' gossip (`node_cpu_utilization_ratio`,
    /// `node_memory_utilization_ratio`) plus the candidate's requests: for clusters whose
    /// scavengers request little and burst (limits above requests).
    Measured,
    /// The larger of the two: never above the threshold by either measure.
    Both,
}

/// How waiting jobs take their turn (`--scavenger-queue`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum QueueMode {
    /// Only the head of the queue starts; nothing behind it jumps a head that does not fit, so
    /// a big interrupted job never starves behind a stream of small ones. The default.
    #[default]
    Strict,
    /// The seed's rule ("if no interrupted job fits, one that never ran and fits may start"),
    /// bounded so that the head cannot starve: while the head does not fit, the first job
    /// behind it (in queue order, so interrupted ones before those that never ran) that fits
    /// may start if it also fits beside the head's next start. That start comes, at the latest,
    /// when the room held by jobs the head waits for in any mode has freed (the running jobs
    /// ranked ahead of it, or started before it began to wait); the head, the candidate and
    /// every job that has already jumped the head must then fit under the threshold beside
    /// ordinary demand ([`admission_by`]).
    Backfill,
}

/// The cluster's capacity and load, summed over schedulable nodes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterLoad {
    /// Allocatable CPU (cores) and memory (bytes).
    pub allocatable: Resources,
    /// Requested by bound, unfinished pods plus every running ScavengerJob's declared
    /// requests (so a run counts from the moment it is started, before its pods exist).
    pub requested: Resources,
    /// Measured use as a fraction of allocatable, per resource, over the nodes with fresh
    /// figures; absent when no agent reports.
    pub measured: BTreeMap<String, f64>,
}

/// The resources use is computed over.
pub const USE_RESOURCES: [&str; 2] = ["cpu", "memory"];

impl ClusterLoad {
    /// Use (0..) by `mode` with `extra` requested on top: the largest share over CPU and
    /// memory. No allocatable capacity is full use; no measured figures fall back to requests.
    pub fn use_with(&self, mode: UseMode, extra: &Resources) -> f64 {
        let requested = self.share(extra, |r| self.requested.get(r).copied().unwrap_or(0.0));
        let measured = || {
            if self.measured.is_empty() {
                return requested;
            }
            self.share(extra, |r| {
                self.measured.get(r).copied().unwrap_or(0.0)
                    * self.allocatable.get(r).copied().unwrap_or(0.0)
            })
        };
        match mode {
            UseMode::Requested => requested,
            UseMode::Measured => measured(),
            UseMode::Both => requested.max(measured()),
        }
    }

    /// The load with `freed` no longer requested: running jobs' declared requests taken out
    /// of `requested`, and out of `measured` as if they used what they request (never below
    /// zero).
    pub fn without(&self, freed: &Resources) -> ClusterLoad {
        let mut out = self.clone();
        for (r, v) in freed {
            if let Some(requested) = out.requested.get_mut(r) {
                *requested = (*requested - v).max(0.0);
            }
            let allocatable = self.allocatable.get(r).copied().unwrap_or(0.0);
            match out.measured.get_mut(r) {
                Some(measured) if allocatable > 0.0 => {
                    *measured = (*measured - v / allocatable).max(0.0);
                }
                _ => {}
            }
        }
        out
    }

    fn share(&self, extra: &Resources, base: impl Fn(&str) -> f64) -> f64 {
        USE_RESOURCES
            .iter()
            .map(|r| {
                let allocatable = self.allocatable.get(*r).copied().unwrap_or(0.0);
                let used = base(r) + extra.get(*r).copied().unwrap_or(0.0);
                if allocatable <= 0.0 {
                    if used > 0.0 { f64::INFINITY } else { 0.0 }
                } else {
                    used / allocatable
                }
            })
            .fold(0.0, f64::max)
    }
}

/// Whether a waiting job may start now, and if not, why (its status message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// It is the head of the queue and fits under the threshold.
    Start,
    /// It waits; the reason is shown in its status.
    Wait(String),
}

/// The admission of `sj`, waiting in `queue` ([`queue`]'s order), strictly in order:
/// [`next_to_start`]'s answer, or why not. [`admission_by`] with [`QueueMode::Strict`].
pub fn admission(
    sj: &ScavengerJob,
    queue: &[&ScavengerJob],
    load: &ClusterLoad,
    mode: UseMode,
    threshold: f64,
) -> Admission {
    admission_by(QueueMode::Strict, sj, queue, &[], load, mode, threshold)
}

/// The admission of `sj`, waiting in `queue` ([`queue`]'s order), by `queue_mode`; `running`
/// are the jobs holding room (running or being started), whose declared requests `load`
/// counts. The head starts when use counting it stays at or under `threshold`.
///
/// With [`QueueMode::Backfill`], while the head does not fit, the first job behind it that
/// fits starts too if the head's reservation allows: use without the room of the running jobs
/// the head waits for in strict order too (those ranked ahead of it, and those that started
/// before it began to wait, [`waiting_since`]), with the head's and this job's requests on
/// top, stays at or under the threshold. What stays counted is ordinary demand and the jobs
/// that jumped the head, each admitted under the same bound: so once the room the head was
/// waiting for anyway has freed, it fits beside every job that jumped it, and no stream of
/// later, smaller jobs can push its start further. The reservation is EASY backfilling's,
/// for the head only; without run times, "until the head's room comes" is "until the jobs it
/// waits for free theirs".
pub fn admission_by(
    queue_mode: QueueMode,
    sj: &ScavengerJob,
    queue: &[&ScavengerJob],
    running: &[&ScavengerJob],
    load: &ClusterLoad,
    mode: UseMode,
    threshold: f64,
) -> Admission {
    let same = |j: &ScavengerJob| j.uid() == sj.uid() && j.name_any() == sj.name_any();
    let Some(position) = queue.iter().position(|j| same(j)) else {
        return Admission::Wait("waiting".to_owned());
    };
    // One rule for who starts: the job next_to_start_by names.
    if next_to_start_by(queue_mode, queue, running, load, mode, threshold).is_some_and(same) {
        return Admission::Start;
    }
    Admission::Wait(if position == 0 {
        waiting_for_room(load.use_with(mode, &run_requests(queue[0])), threshold)
    } else {
        waiting_for_turn(position)
    })
}

/// The message of a head that does not fit.
fn waiting_for_room(head_use: f64, threshold: f64) -> String {
    format!(
        "waiting for room: cluster use would be {:.0}% with this job, over the {:.0}% threshold",
        head_use * 100.0,
        threshold * 100.0
    )
}

/// The message of a job `position` places behind the head.
fn waiting_for_turn(position: usize) -> String {
    format!(
        "waiting for its turn: {position} ScavengerJob{} ahead in the queue",
        if position == 1 { "" } else { "s" }
    )
}

/// The job [`QueueMode::Backfill`] starts behind a head that does not fit: the first behind
/// it that fits now and beside the head's reservation ([`admission_by`]), if any.
fn backfill<'a>(
    queue: &[&'a ScavengerJob],
    running: &[&ScavengerJob],
    load: &ClusterLoad,
    mode: UseMode,
    threshold: f64,
) -> Option<&'a ScavengerJob> {
    let head = *queue.first()?;
    let since = waiting_since(head);
    let started = |j: &ScavengerJob| {
        j.status
            .as_ref()
            .and_then(|s| s.current_run_start.as_ref())
            .map(|t| t.0)
    };
    // Room the head waits for in any mode: jobs ranked ahead of it, and jobs that held room
    // before it began to wait (either time unknown: counted as such).
    let waited_on = |j: &ScavengerJob| {
        rank(j, head).is_lt() || started(j).zip(since).is_none_or(|(t, s)| t < s)
    };
    let waited_for = running
        .iter()
        .filter(|j| waited_on(j))
        .fold(Resources::new(), |sum, j| plus(sum, &run_requests(j)));
    let reserved = load.without(&waited_for);
    let backfills = |j: &ScavengerJob| {
        load.use_with(mode, &run_requests(j)) <= threshold
            && reserved.use_with(mode, &plus(run_requests(head), &run_requests(j))) <= threshold
    };
    queue[1..].iter().copied().find(|j| backfills(j))
}

/// Since when `sj` waits: its last interruption, its last run's start (a run given up as
/// unschedulable or not started), or its creation, whichever is latest.
pub fn waiting_since(sj: &ScavengerJob) -> Option<Timestamp> {
    let status = sj.status.as_ref();
    let last = |ts: &[Time]| ts.iter().map(|t| t.0).max();
    [
        sj.metadata.creation_timestamp.as_ref().map(|t| t.0),
        status.and_then(|s| last(&s.interrupted_timestamps)),
        status.and_then(|s| last(&s.running_timestamps)),
    ]
    .into_iter()
    .flatten()
    .max()
}

fn plus(mut sum: Resources, more: &Resources) -> Resources {
    for (r, v) in more {
        *sum.entry(r.clone()).or_default() += v;
    }
    sum
}

/// The job that may start now: the head of `queue` ([`queue`]'s order) when use counting it
/// stays at or under `threshold`. Strictly in order: a later, smaller job never jumps a head
/// that does not fit, or a big interrupted job would starve behind a stream of small ones.
pub fn next_to_start<'a>(
    queue: &[&'a ScavengerJob],
    load: &ClusterLoad,
    mode: UseMode,
    threshold: f64,
) -> Option<&'a ScavengerJob> {
    next_to_start_by(QueueMode::Strict, queue, &[], load, mode, threshold)
}

/// The job that may start now by `queue_mode`: the one job of `queue` to which
/// [`admission_by`] says [`Admission::Start`], if any (the head when it fits, else with
/// [`QueueMode::Backfill`] the first job behind it that fits beside its reservation).
pub fn next_to_start_by<'a>(
    queue_mode: QueueMode,
    queue: &[&'a ScavengerJob],
    running: &[&ScavengerJob],
    load: &ClusterLoad,
    mode: UseMode,
    threshold: f64,
) -> Option<&'a ScavengerJob> {
    let head = *queue.first()?;
    if load.use_with(mode, &run_requests(head)) <= threshold {
        return Some(head);
    }
    match queue_mode {
        QueueMode::Strict => None,
        QueueMode::Backfill => backfill(queue, running, load, mode, threshold),
    }
}

/// Returns the waiting jobs of `queue` that an admission poll reconciles (arguments as for
/// [`admission_by`]): the one that may start now ([`next_to_start_by`]), and the first in queue
/// order whose status message is not the one [`admission_by`] gives it (or that has no status
/// yet). Any other waiting job would only be told again why it waits, so it is left alone: a
/// long queue then costs no reconciles while nothing changes, and after the queue moves, the
/// messages catch up one job per poll instead of in a burst that would delay the reconciles of
/// running jobs.
pub fn polled<'a>(
    queue_mode: QueueMode,
    queue: &[&'a ScavengerJob],
    running: &[&ScavengerJob],
    load: &ClusterLoad,
    mode: UseMode,
    threshold: f64,
) -> Vec<&'a ScavengerJob> {
    let start = next_to_start_by(queue_mode, queue, running, load, mode, threshold);
    let Some(head) = queue.first() else {
        return Vec::new();
    };
    let head_use = load.use_with(mode, &run_requests(head));
    // The message `admission_by` gives each job but the one that starts.
    let out_of_date = queue.iter().enumerate().find(|&(position, j)| {
        if start.is_some_and(|s| std::ptr::eq(s, *j)) {
            return false;
        }
        let why = if position == 0 {
            waiting_for_room(head_use, threshold)
        } else {
            waiting_for_turn(position)
        };
        j.status.as_ref().is_none_or(|s| s.message != why)
    });
    start
        .into_iter()
        .chain(out_of_date.map(|(_, j)| *j))
        .collect()
}

// === reconcile ===

/// What the controller knows of one ScavengerJob when it reconciles it (read from the API
/// server in that reconcile, not from caches, so a just-created Job is never missed).
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    /// The ScavengerJob.
    pub sj: &'a ScavengerJob,
    /// Jobs labelled with its name (owned by it).
    pub jobs: &'a [Job],
    /// Pods labelled with its name.
    pub pods: &'a [Pod],
    /// Referenced PVCs, ConfigMaps and Secrets that do not exist (checked while waiting).
    pub missing: &'a [VolumeRef],
    /// Admission, for a waiting job ([`admission`]).
    pub admission: &'a Admission,
    /// The controller's clock.
    pub now: Timestamp,
    /// How long a run's pods may stay unschedulable before the run is given up.
    pub unschedulable_timeout: Duration,
    /// How long a run's pod may stay placed on a node without starting before the run is given
    /// up ([`start::not_started`]; counted from when the pod was placed).
    pub start_timeout: Duration,
}

/// A phase change, for Events and metrics.
#[derive(Debug, Clone, PartialEq)]
pub enum Transition {
    /// Run `run` started (its Job created).
    Started {
        /// The run, 1 for the first.
        run: usize,
    },
    /// Preempted or evicted: every pod stopped.
    Interrupted {
        /// Why, for people.
        reason: String,
        /// CPU-seconds lost, estimated: CPU requests × pods × time since the checkpoint
        /// window's start.
        wasted_cpu_seconds: f64,
    },
    /// Pods stayed unschedulable too long: the Job is removed, the job waits again.
    Unschedulable {
        /// The scheduler's last word.
        reason: String,
    },
    /// A pod placed on a node did not start within the start timeout, for a cause that may
    /// clear by itself: the Job is removed, the job waits again. (A permanent cause is
    /// [`Transition::Failed`].)
    NotStarted {
        /// The pod, its node and the kubelet's last word.
        reason: String,
    },
    /// Every pod finished.
    Succeeded,
    /// Failed for good.
    Failed {
        /// Why.
        reason: String,
    },
}

impl Transition {
    /// The Event reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Started { .. } => "Started",
            Self::Interrupted { .. } => "Interrupted",
            Self::Unschedulable { .. } => "Unschedulable",
            Self::NotStarted { .. } => "NotStarted",
            Self::Succeeded => "Succeeded",
            Self::Failed { .. } => "Failed",
        }
    }

    /// Whether the Event is a warning.
    pub fn is_warning(&self) -> bool {
        !matches!(self, Self::Started { .. } | Self::Succeeded)
    }
}

/// What to do.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decision {
    /// Jobs to delete (with their pods), by name.
    pub delete: Vec<String>,
    /// The Job to create (before the status is written: a run whose status write failed
    /// leaves a Job the next reconcile deletes, never a run without its Job).
    pub create: Option<Job>,
    /// The status to write, when it changes.
    pub status: Option<ScavengerJobStatus>,
    /// The phase change, if any.
    pub transition: Option<Transition>,
    /// Look again after this long (a timeout or window boundary), if nothing happens before.
    pub requeue_after: Option<Duration>,
}

/// Whether a scavenger `pod` is on its way out before finishing its work: marked for
/// disruption (`DisruptionTarget`: preemption, the Eviction API, taint manager, node-pressure
/// eviction), evicted by its kubelet, or terminating without having succeeded. Its run is
/// interrupted: the controller deletes the rest of it.
pub fn leaving(pod: &Pod) -> bool {
    disrupted(pod)
        || evicted(pod)
        || (pod.metadata.deletion_timestamp.is_some() && phase_of(pod) != "Succeeded")
}

/// Whether `pod` carries the `DisruptionTarget` condition (preemption, eviction, taint
/// manager, node-pressure eviction all set it before removing a pod).
fn disrupted(pod: &Pod) -> bool {
    pod_condition(pod, "DisruptionTarget").is_some_and(|c| c.status == "True")
}

fn pod_condition<'a>(
    pod: &'a Pod,
    type_: &str,
) -> Option<&'a k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

fn phase_of(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// Why a pod failed, for the message: the kubelet's reason, else the container's.
fn failure_of(pod: &Pod) -> String {
    let status = pod.status.as_ref();
    let terminated = status
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .find_map(|c| c.state.as_ref()?.terminated.as_ref());
    let mut why = match terminated {
        Some(t) => format!(
            "exit code {}{}",
            t.exit_code,
            t.reason
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        ),
        None => status
            .and_then(|s| s.reason.clone())
            .unwrap_or_else(|| "no reason given".to_owned()),
    };
    if let Some(m) = status
        .and_then(|s| s.message.as_deref())
        .filter(|m| !m.is_empty())
    {
        why.push_str(": ");
        why.push_str(m);
    }
    format!("pod {} failed: {why}", pod.name_any())
}

fn job_condition(job: &Job, type_: &str) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

fn since(now: Timestamp, then: &Time) -> Duration {
    now.duration_since(then.0)
        .try_into()
        .unwrap_or(Duration::ZERO)
}

fn system_time(t: Timestamp) -> SystemTime {
    SystemTime::from(t)
}

fn timestamp(t: SystemTime) -> Timestamp {
    Timestamp::try_from(t).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// Sets condition `type_` (one per type), changing `lastTransitionTime` only when its status
/// changes.
fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: Timestamp,
) {
    let status = if status { "True" } else { "False" };
    let new = Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        observed_generation: generation,
        last_transition_time: Time(now),
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) if c.status == status => {
            c.reason = new.reason;
            c.message = new.message;
            c.observed_generation = generation;
        }
        Some(c) => *c = new,
        None => conditions.push(new),
    }
}

/// The conditions for `phase`: `Running`, `Complete` and `Failed`.
fn conditions_for(
    mut conditions: Vec<Condition>,
    phase: Phase,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: Timestamp,
) -> Vec<Condition> {
    for (type_, on) in [
        ("Running", phase == Phase::Running),
        ("Complete", phase == Phase::Succeeded),
        ("Failed", phase == Phase::Failed),
    ] {
        let (reason, message) = if on {
            (reason, message)
        } else {
            (phase.as_str(), "")
        };
        set_condition(&mut conditions, type_, on, reason, message, generation, now);
    }
    conditions
}

/// Builds the status for a transition to `phase` from `old`.
fn moved(
    old: &ScavengerJobStatus,
    o: &Observed<'_>,
    phase: Phase,
    message: String,
) -> ScavengerJobStatus {
    let reason = phase.as_str();
    ScavengerJobStatus {
        phase,
        message: message.clone(),
        conditions: conditions_for(
            old.conditions.clone(),
            phase,
            reason,
            &message,
            o.sj.metadata.generation,
            o.now,
        ),
        ..old.clone()
    }
}

/// The step for one ScavengerJob: from what is observed to what to do.
pub fn reconcile(o: &Observed<'_>) -> Decision {
    let old = o.sj.status.clone().unwrap_or_default();
    let phase = old.phase;
    if phase.is_terminal() {
        return Decision::default();
    }
    let current = old.job_name.as_deref();
    // Jobs of earlier runs (an interrupted or requeued run whose deletion did not finish).
    let stale: Vec<String> = o
        .jobs
        .iter()
        .map(|j| j.name_any())
        .filter(|n| Some(n.as_str()) != current || phase != Phase::Running)
        .collect();

    let fail = |message: String, delete: Vec<String>| {
        let mut status = moved(&old, o, Phase::Failed, message.clone());
        status.finished_timestamp = Some(Time(o.now));
        status.current_run_start = None;
        Decision {
            delete,
            status: Some(status),
            transition: Some(Transition::Failed { reason: message }),
            ..Default::default()
        }
    };
    let interval = match o.sj.spec.checkpoint_interval() {
        Ok(i) => i,
        Err(e) => return fail(e.to_string(), o.jobs.iter().map(|j| j.name_any()).collect()),
    };

    if phase.is_waiting() {
        if !o.missing.is_empty() {
            let names: Vec<String> = o.missing.iter().map(ToString::to_string).collect();
            return fail(
                format!(
                    "missing volume source{}: {}; create {} and the ScavengerJob anew",
                    if names.len() == 1 { "" } else { "s" },
                    names.join(", "),
                    if names.len() == 1 { "it" } else { "them" }
                ),
                stale,
            );
        }
        // A new run starts only once the last one's Job and pods are gone: all pods of a
        // ScavengerJob run (and are interrupted) together, never two runs at once.
        let wait = match o.admission {
            _ if !stale.is_empty() || !o.pods.is_empty() => None,
            Admission::Wait(why) => Some(why.clone()),
            Admission::Start => None,
        };
        if !stale.is_empty() || !o.pods.is_empty() || wait.is_some() {
            // Say why it waits (writing only a changed message; a first status says Pending).
            let status = wait
                .filter(|why| *why != old.message || o.sj.status.is_none())
                .map(|why| ScavengerJobStatus {
                    message: why,
                    ..old.clone()
                });
            return Decision {
                delete: stale,
                status,
                ..Default::default()
            };
        }
        let run = old.running_timestamps.len() + 1;
        let job = match job_for(o.sj, run) {
            Ok(job) => job,
            Err(e) => return fail(e.to_string(), Vec::new()),
        };
        let message = format!("run {run} started as Job {}", job.name_any());
        let mut status = moved(&old, o, Phase::Running, message);
        status.running_timestamps.push(Time(o.now));
        status.current_run_start = Some(Time(o.now));
        status.checkpoint_window_start = Some(Time(o.now));
        status.job_name = Some(job.name_any());
        status.pods = Vec::new();
        status.unschedulable_since = None;
        return Decision {
            create: Some(job),
            status: Some(status),
            transition: Some(Transition::Started { run }),
            requeue_after: Some(interval),
            ..Default::default()
        };
    }

    // Running.
    let job = current.and_then(|name| o.jobs.iter().find(|j| j.name_any() == name));
    let run_pods: Vec<&Pod> = o
        .pods
        .iter()
        .filter(|p| {
            current.is_some() && p.labels().get(JOB_NAME_LABEL).map(String::as_str) == current
        })
        .collect();
    let run_start = old.current_run_start.clone().map_or(o.now, |t| t.0);

    if job.is_some_and(|j| job_condition(j, "Complete")) {
        let mut status = moved(&old, o, Phase::Succeeded, "every pod finished".to_owned());
        status.finished_timestamp = Some(Time(o.now));
        status.current_run_start = None;
        return Decision {
            delete: stale,
            status: Some(status),
            transition: Some(Transition::Succeeded),
            ..Default::default()
        };
    }

    // A pod that failed on its own (not removed by preemption, eviction or deletion) fails the
    // job. A deleted pod's kubelet reports it Failed (exit 143 after SIGTERM) once its
    // containers stop, and a real API server keeps it, Terminating, until then and while the
    // Job controller's finalizer holds it: that is an interruption, not a failure.
    if let Some(pod) = run_pods
        .iter()
        .find(|p| phase_of(p) == "Failed" && !leaving(p))
    {
        let mut delete = stale;
        delete.extend(current.map(str::to_owned));
        return fail(failure_of(pod), delete);
    }

    // Removed by preemption or eviction: marked, terminating, or gone before finishing.
    let present: Vec<String> = run_pods.iter().map(|p| p.name_any()).collect();
    let removed = run_pods
        .iter()
        .find(|p| leaving(p))
        .map(|p| format!("pod {} was preempted or evicted", p.name_any()))
        .or_else(|| {
            old.pods
                .iter()
                .find(|name| !present.contains(name))
                .map(|name| format!("pod {name} was removed before it finished"))
        })
        .or_else(|| {
            job.is_none()
                .then(|| "its Job was removed before it finished".to_owned())
        })
        .or_else(|| {
            // Upstream's Job controller counts a deleted pod as failed and fails the Job.
            job.filter(|j| job_condition(j, "Failed"))
                .map(|j| format!("Job {} failed with no pod failing on its own", j.name_any()))
        });
    if let Some(reason) = removed {
        // CPU requests of every pod × time since the checkpoint window's start.
        let cpu = run_requests(o.sj).get("cpu").copied().unwrap_or(0.0);
        let window = last_checkpoint(
            system_time(run_start),
            Some(interval),
            None,
            system_time(o.now),
        );
        let lost = super::unsaved(window, system_time(o.now)).as_secs_f64();
        let wasted = cpu * lost;
        let count = old.interrupted_count + 1;
        let mut status = moved(
            &old,
            o,
            Phase::Interrupted,
            format!("interrupted ({count} so far): {reason}; waiting for another turn"),
        );
        status.interrupted_count = count;
        status.interrupted_timestamps.push(Time(o.now));
        status.current_run_start = None;
        status.checkpoint_window_start = None;
        status.job_name = None;
        status.pods = Vec::new();
        status.unschedulable_since = None;
        status.wasted_cpu_seconds += wasted;
        let mut delete = stale;
        delete.extend(job.map(|j| j.name_any()));
        return Decision {
            delete,
            status: Some(status),
            transition: Some(Transition::Interrupted {
                reason,
                wasted_cpu_seconds: wasted,
            }),
            ..Default::default()
        };
    }

    // Placed but not started after the start timeout: give the room back, for good when the
    // cause cannot clear by itself. The clock of each pod starts when it was placed (never
    // before the run started: an API server clock behind ours does not shorten the wait).
    let waited = |s: &NotStarted| {
        let placed = s.placed.map_or(run_start, |p| p.max(run_start));
        since(o.now, &Time(placed))
    };
    let stuck: Vec<NotStarted> = run_pods
        .iter()
        .filter_map(|p| start::not_started(p))
        .collect();
    let due: Vec<&NotStarted> = stuck
        .iter()
        .filter(|s| waited(s) >= o.start_timeout)
        .collect();
    if let Some(s) = due
        .iter()
        .find(|s| s.cause() == Cause::Permanent)
        .or(due.first())
    {
        let what = format!(
            "pod {} has not started {}s after it was placed on {} ({})",
            s.pod,
            waited(s).as_secs(),
            s.node,
            s.why()
        );
        let mut delete = stale;
        delete.extend(job.map(|j| j.name_any()));
        if s.cause() == Cause::Permanent {
            return fail(
                format!(
                    "{what}; this does not clear by itself: fix it, then create the ScavengerJob anew"
                ),
                delete,
            );
        }
        let mut status = moved(
            &old,
            o,
            Phase::Pending,
            format!("{what}; waiting for another turn"),
        );
        status.current_run_start = None;
        status.checkpoint_window_start = None;
        status.job_name = None;
        status.pods = Vec::new();
        status.unschedulable_since = None;
        return Decision {
            delete,
            status: Some(status),
            transition: Some(Transition::NotStarted {
                reason: format!("pod {} on {}: {}", s.pod, s.node, s.why()),
            }),
            ..Default::default()
        };
    }
    let start_requeue = stuck
        .iter()
        .map(|s| o.start_timeout.saturating_sub(waited(s)))
        .min();

    // Still unschedulable after the timeout: give the room back and wait for another turn.
    let unschedulable = run_pods.iter().find_map(|p| {
        pod_condition(p, "PodScheduled")
            .filter(|c| c.status == "False")
            .map(|c| c.message.clone().unwrap_or_default())
    });
    let mut status = old.clone();
    let mut requeue = None;
    match (&unschedulable, &old.unschedulable_since) {
        (Some(why), Some(from)) if since(o.now, from) >= o.unschedulable_timeout => {
            let message = format!(
                "pods unschedulable for {}s ({why}); waiting for another turn",
                since(o.now, from).as_secs()
            );
            let mut status = moved(&old, o, Phase::Pending, message);
            status.current_run_start = None;
            status.checkpoint_window_start = None;
            status.job_name = None;
            status.pods = Vec::new();
            status.unschedulable_since = None;
            let mut delete = stale;
            delete.extend(job.map(|j| j.name_any()));
            return Decision {
                delete,
                status: Some(status),
                transition: Some(Transition::Unschedulable {
                    reason: why.clone(),
                }),
                ..Default::default()
            };
        }
        (Some(_), Some(from)) => {
            requeue = Some(o.unschedulable_timeout.saturating_sub(since(o.now, from)));
        }
        (Some(_), None) => {
            status.unschedulable_since = Some(Time(o.now));
            requeue = Some(o.unschedulable_timeout);
        }
        (None, _) => status.unschedulable_since = None,
    }
    // Remember the run's pods, so one that vanishes is known to have been removed.
    for name in present {
        if !status.pods.contains(&name) {
            status.pods.push(name);
        }
    }
    let window = timestamp(last_checkpoint(
        system_time(run_start),
        Some(interval),
        None,
        system_time(o.now),
    ));
    status.checkpoint_window_start = Some(Time(window));
    let next_window = interval.saturating_sub(since(o.now, &Time(window)));
    let requeue_after = [requeue, start_requeue]
        .into_iter()
        .flatten()
        .fold(next_window, Duration::min);
    Decision {
        delete: stale,
        status: (status != old).then_some(status),
        requeue_after: Some(requeue_after),
        ..Default::default()
    }
}

/// Whether the kubelet evicted `pod` (node pressure): phase Failed, reason Evicted.
fn evicted(pod: &Pod) -> bool {
    phase_of(pod) == "Failed"
        && pod
            .status
            .as_ref()
            .and_then(|s| s.reason.as_deref())
            .is_some_and(|r| r == "Evicted")
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
