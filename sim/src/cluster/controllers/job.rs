//! The Job controller (batch/v1): runs a Job's pods until enough succeed or too many fail, as
//! upstream does, so batch workloads and tests that play kubelet (patching pod phases) see Jobs
//! complete and fail as on a cluster.
//!
//! As upstream: pods get the template's labels plus `batch.kubernetes.io/job-name`, `job-name`,
//! `batch.kubernetes.io/controller-uid` and `controller-uid`, `generateName <job>-`, a
//! controller ownerReference and the `batch.kubernetes.io/job-tracking` finalizer; at most
//! `parallelism` (default 1) pods run, and no more than `completions` (default 1) still needs;
//! with `completions` null (a work queue) the Job is done once any pod succeeded and none is
//! still running; failed pods count against `backoffLimit` (default 6), and one more failure
//! than that fails the Job (FailureTarget, reason BackoffLimitExceeded, then Failed) and deletes
//! its running pods; success writes SuccessCriteriaMet (reason CompletionsReached), deletes
//! leftover pods, then Complete and `completionTime`; `spec.suspend` deletes running pods and
//! sets Suspended; finished Jobs are left alone. Status (active, ready, terminating, succeeded,
//! failed, uncountedTerminatedPods, startTime, conditions) goes through the status subresource
//! when it changes.
//!
//! Counting follows upstream's finalizer-based pod tracking (kube-controller-manager v1.32+ with
//! its default feature gates; `pkg/controller/job/job_controller.go`): a pod is counted once,
//! while it still carries the tracking finalizer, so pods that are deleted or garbage-collected
//! afterwards are never lost, and a pod deleted before it succeeded counts as failed
//! ([`is_pod_failed`]): a Job with `backoffLimit: 0` whose running pod is preempted fails rather
//! than starting another pod. Its UID goes to `status.uncountedTerminatedPods` before its
//! finalizer is removed and moves to `succeeded` / `failed` after, so a restart between the two
//! steps neither loses nor double-counts it (`trackJobStatusAndRemoveFinalizers`). Pods the
//! controller deletes itself because they are not wanted (parallelism lowered, suspend,
//! completions reached) lose their finalizer first and are not counted. The terminal condition
//! waits until no pod is left terminating (the JobManagedBy and JobPodReplacementPolicy gates,
//! on by default in v1.32). A second controller removes the finalizer from pods whose Job is
//! gone or finished (upstream's orphan queue, `syncOrphanPod`), woken by a pod's change and,
//! as upstream's `deleteJob` does, by its Job's deletion.
//!
//! Simplified: only NonIndexed completion is supported (an Indexed Job gets no pods, and a
//! warning is logged); container restarts under `restartPolicy: OnFailure` do not count against
//! `backoffLimit`; `activeDeadlineSeconds`, `podFailurePolicy` rules (its presence only makes
//! the Job replace failed pods alone, as upstream's `onlyReplaceFailedPods`), `successPolicy`,
//! `backoffLimitPerIndex`, `managedBy`, `ttlSecondsAfterFinished` and the exponential delay
//! before replacing failed pods are not implemented; pods are not adopted.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::{Stream, StreamExt as _, future, stream};
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus, UncountedTerminatedPods};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, WatchStreamExt as _, watcher};
use kube::{Api, Client, ResourceExt as _};
use tokio_util::sync::CancellationToken;

use super::error::{Error, Result};
use super::owners::{self, describe, is_not_found};
use super::pods;
use super::runner::{self, Context, RESYNC};

/// The finalizer every pod of a Job carries until the Job controller has counted it
/// (upstream's `batch.JobTrackingFinalizer`).
pub const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";

/// Runs the Job controller, and the one releasing the pods of Jobs that are gone, until `stop`
/// is cancelled.
pub async fn run(client: Client, stop: CancellationToken) {
    let ctx = Context::new(client.clone());
    let orphans = Context::new(client.clone());
    tokio::join!(
        runner::drive("job", stop.clone(), || {
            Controller::new(Api::<Job>::all(client.clone()), watcher::Config::default())
                .owns(Api::<Pod>::all(client.clone()), watcher::Config::default())
                .run(reconcile, runner::error_policy, ctx.clone())
        }),
        runner::drive("job-orphan-pods", stop, || {
            let controller =
                Controller::new(Api::<Pod>::all(client.clone()), watcher::Config::default());
            let held = held_by_deleted_jobs(&client, controller.store());
            controller.reconcile_on(held).run(
                reconcile_orphan,
                runner::error_policy,
                orphans.clone(),
            )
        }),
    );
}

/// The pods each deleted Job leaves holding the tracking finalizer, for the orphan release
/// (upstream's `deleteJob` enqueues them): a pod already terminating when its Job goes sees no
/// change of its own (the garbage collector's delete finds it deleted), so without this nothing
/// would ever release it.
fn held_by_deleted_jobs(
    client: &Client,
    pods: Store<Pod>,
) -> impl Stream<Item = ObjectRef<Pod>> + Send + 'static {
    // With backoff, as every watch here: its errors are dropped below, so a watch failing at
    // once (an API server going away) would otherwise be retried in a loop that never returned
    // Pending, holding its worker thread, and a runtime shutting down waited for it forever.
    watcher(Api::<Job>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .filter_map(|event| {
            future::ready(match event {
                Ok(watcher::Event::Delete(job)) => Some(job),
                _ => None,
            })
        })
        .flat_map(move |job| {
            let held: Vec<ObjectRef<Pod>> = job.uid().map_or_else(Vec::new, |uid| {
                pods.state()
                    .iter()
                    .filter(|p| {
                        has_tracking_finalizer(p) && owners::is_controlled_by(p.as_ref(), &uid)
                    })
                    .map(|p| ObjectRef::from_obj(p.as_ref()))
                    .collect()
            });
            stream::iter(held)
        })
}

// === pure decisions ===

/// Returns whether the pod carries the Job tracking finalizer.
pub fn has_tracking_finalizer(pod: &Pod) -> bool {
    pod.finalizers().iter().any(|f| f == TRACKING_FINALIZER)
}

/// Returns whether the Job replaces a pod only once it has failed, not while it terminates:
/// `podReplacementPolicy: Failed`, or any `podFailurePolicy` (upstream's `onlyReplaceFailedPods`).
fn only_replace_failed_pods(job: &Job) -> bool {
    job.spec.as_ref().is_some_and(|s| {
        s.pod_replacement_policy.as_deref() == Some("Failed") || s.pod_failure_policy.is_some()
    })
}

/// Returns whether the Job counts `pod` as failed: its phase is Failed or, unless the Job only
/// replaces failed pods, it is being deleted without having succeeded. Upstream's `isPodFailed`
/// (v1.32 and later, PodDisruptionConditions GA): a preempted or otherwise deleted pod counts
/// as failed at once, when its deletionTimestamp is set, not when it is removed.
pub fn is_pod_failed(pod: &Pod, job: &Job) -> bool {
    let phase = pods::phase(pod);
    if phase == "Failed" {
        return true;
    }
    if only_replace_failed_pods(job) {
        return false;
    }
    pod.metadata.deletion_timestamp.is_some() && phase != "Succeeded"
}

/// Returns whether the pod is being deleted and has not finished (upstream's `IsPodTerminating`).
fn is_terminating(pod: &Pod) -> bool {
    !pods::is_terminal(pod) && pod.metadata.deletion_timestamp.is_some()
}

/// The UIDs in `status.uncountedTerminatedPods`: (succeeded, failed).
fn uncounted(status: &JobStatus) -> (Vec<String>, Vec<String>) {
    let u = status.uncounted_terminated_pods.clone().unwrap_or_default();
    (
        u.succeeded.unwrap_or_default(),
        u.failed.unwrap_or_default(),
    )
}

fn len_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// What a Job's pods add up to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Pods neither finished nor being deleted, by name.
    pub active: Vec<String>,
    /// Active pods whose Ready condition is True.
    pub ready: i32,
    /// Pods being deleted that have not finished.
    pub terminating: i32,
    /// Pods that succeeded: counted in status, uncounted in status, and newly finished.
    pub succeeded: i32,
    /// Pods that failed (see [`is_pod_failed`]), counted the same way.
    pub failed: i32,
}

/// Counts the Job's own `pods`, ordered so the active pod to delete first comes first, as
/// upstream's `syncJob` does: the counters in status, plus the UIDs uncounted in status, plus
/// the finished pods that still carry the tracking finalizer and are not among those UIDs. A pod
/// without the finalizer has been counted already.
pub fn count(job: &Job, pods: &[Pod]) -> Counts {
    let recorded = job.status.clone().unwrap_or_default();
    let (uncounted_succeeded, uncounted_failed) = uncounted(&recorded);
    let new = |listed: &[String], finished: &dyn Fn(&Pod) -> bool| {
        pods.iter()
            .filter(|p| has_tracking_finalizer(p) && finished(p))
            .filter(|p| p.uid().is_none_or(|uid| !listed.contains(&uid)))
            .count()
    };
    let new_succeeded = new(&uncounted_succeeded, &|p| pods::phase(p) == "Succeeded");
    let new_failed = new(&uncounted_failed, &|p| is_pod_failed(p, job));
    let mut active: Vec<&Pod> = pods.iter().filter(|p| pods::is_active(p)).collect();
    active.sort_by(|a, b| pods::deletion_order(a, b));
    Counts {
        ready: len_i32(active.iter().filter(|p| pods::is_ready(p)).count()),
        active: active.iter().map(|p| p.name_any()).collect(),
        terminating: len_i32(pods.iter().filter(|p| is_terminating(p)).count()),
        succeeded: recorded
            .succeeded
            .unwrap_or(0)
            .saturating_add(len_i32(new_succeeded + uncounted_succeeded.len())),
        failed: recorded
            .failed
            .unwrap_or(0)
            .saturating_add(len_i32(new_failed + uncounted_failed.len())),
    }
}

/// What the controller does with a Job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Complete or Failed already: nothing to do.
    Finished,
    /// An Indexed Job, which this controller does not run.
    Unsupported,
    /// Too many failures: mark Failed and delete these running pods (they keep their finalizer
    /// and are counted as failed, as upstream's `deleteActivePods`).
    Fail {
        /// Pods to delete.
        delete: Vec<String>,
    },
    /// Enough successes: mark Complete and delete these leftover pods.
    Complete {
        /// Pods to delete.
        delete: Vec<String>,
    },
    /// Suspended: delete these running pods.
    Suspend {
        /// Pods to delete.
        delete: Vec<String>,
    },
    /// The Job is being deleted: count its pods and release them, create and delete none.
    Deleting,
    /// Keep going: create and delete pods to hold the wanted parallelism.
    Run {
        /// How many pods to create.
        create: usize,
        /// Pods to delete (parallelism was lowered).
        delete: Vec<String>,
    },
}

/// Returns whether the Job has a `Complete` or `Failed` condition that is True.
pub fn is_finished(job: &Job) -> bool {
    has_condition(job, "Complete") || has_condition(job, "Failed")
}

fn has_condition(job: &Job, type_: &str) -> bool {
    find_condition(&conditions(job), type_).is_some_and(|c| c.status == "True")
}

fn find_condition<'a>(conditions: &'a [JobCondition], type_: &str) -> Option<&'a JobCondition> {
    conditions.iter().find(|c| c.type_ == type_)
}

fn conditions(job: &Job) -> Vec<JobCondition> {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
}

/// Decides what to do with `job`, given what its pods add up to.
pub fn decide(job: &Job, counts: &Counts) -> Decision {
    if is_finished(job) {
        return Decision::Finished;
    }
    let spec = job.spec.clone().unwrap_or_default();
    if spec.completion_mode.as_deref() == Some("Indexed") {
        return Decision::Unsupported;
    }
    let active = counts.active.clone();
    // A FailureTarget written by an earlier sync stands, as upstream.
    if has_condition(job, "FailureTarget") || counts.failed > spec.backoff_limit.unwrap_or(6) {
        return Decision::Fail { delete: active };
    }
    if has_condition(job, "SuccessCriteriaMet") {
        return Decision::Complete { delete: active };
    }
    if job.metadata.deletion_timestamp.is_some() {
        return Decision::Deleting;
    }
    let parallelism = spec.parallelism.unwrap_or(1).max(0);
    let wanted = match spec.completions {
        Some(completions) if counts.succeeded >= completions => {
            return Decision::Complete { delete: active };
        }
        Some(completions) => parallelism.min(completions - counts.succeeded),
        // A work queue: once one pod succeeded, no new ones; done when the rest have finished.
        None if counts.succeeded > 0 && active.is_empty() => {
            return Decision::Complete { delete: active };
        }
        None if counts.succeeded > 0 => 0,
        None => parallelism,
    };
    if spec.suspend == Some(true) {
        return Decision::Suspend { delete: active };
    }
    let wanted = usize::try_from(wanted).unwrap_or(0);
    if active.len() < wanted {
        // Under `podReplacementPolicy: Failed` a terminating pod still holds its place.
        let terminating = if only_replace_failed_pods(job) {
            usize::try_from(counts.terminating).unwrap_or(0)
        } else {
            0
        };
        Decision::Run {
            create: wanted
                .saturating_sub(terminating)
                .saturating_sub(active.len()),
            delete: Vec::new(),
        }
    } else {
        // Work-queue pods still running after a success are left to finish, as upstream.
        let keep = if spec.completions.is_none() && counts.succeeded > 0 {
            active.len()
        } else {
            wanted
        };
        Decision::Run {
            create: 0,
            delete: active[..active.len() - keep].to_vec(),
        }
    }
}

/// Returns how many pods `decision` deletes.
fn deleted(decision: &Decision) -> usize {
    match decision {
        Decision::Fail { delete }
        | Decision::Complete { delete }
        | Decision::Suspend { delete }
        | Decision::Run { delete, .. } => delete.len(),
        Decision::Finished | Decision::Unsupported | Decision::Deleting => 0,
    }
}

/// Computes the status the Job has after `decision` is carried out, at `now`, before pod
/// tracking: active, ready, terminating, startTime and Suspended. The counters, the uncounted
/// pods and the finishing conditions are [`track`]'s and [`settle`]'s.
pub fn status(job: &Job, counts: &Counts, decision: &Decision, now: jiff::Timestamp) -> JobStatus {
    let old = job.status.clone().unwrap_or_default();
    let mut conditions = old.conditions.clone().unwrap_or_default();
    let was_suspended = conditions
        .iter()
        .any(|c| c.type_ == "Suspended" && c.status == "True");
    let (active, ready) = match decision {
        Decision::Finished | Decision::Unsupported | Decision::Deleting => {
            (len_i32(counts.active.len()), counts.ready)
        }
        Decision::Fail { .. } | Decision::Complete { .. } | Decision::Suspend { .. } => (0, 0),
        Decision::Run { create, delete } => {
            let n = counts.active.len() + create - delete.len().min(counts.active.len());
            (len_i32(n), counts.ready)
        }
    };
    match decision {
        Decision::Suspend { .. } => set_condition(
            &mut conditions,
            "Suspended",
            "True",
            "JobSuspended",
            "Job suspended",
            now,
        ),
        Decision::Run { .. } if was_suspended => set_condition(
            &mut conditions,
            "Suspended",
            "False",
            "JobResumed",
            "Job resumed",
            now,
        ),
        _ => {}
    }
    let start_time = match decision {
        Decision::Suspend { .. } | Decision::Unsupported => old.start_time.clone(),
        _ => old.start_time.clone().or(Some(Time(now))),
    };
    JobStatus {
        active: Some(active),
        ready: Some(ready),
        // Pods deleted now terminate from now on (upstream adds them to the count).
        terminating: Some(
            counts
                .terminating
                .saturating_add(len_i32(deleted(decision))),
        ),
        succeeded: Some(old.succeeded.unwrap_or(0)),
        failed: Some(old.failed.unwrap_or(0)),
        uncounted_terminated_pods: Some(old.uncounted_terminated_pods.clone().unwrap_or_default()),
        start_time,
        conditions: (!conditions.is_empty()).then_some(conditions),
        ..old
    }
}

/// How a Job finishes, once its pods are counted and none terminates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finish {
    /// `Failed` or `Complete`.
    pub type_: String,
    /// Its reason.
    pub reason: String,
    /// Its message.
    pub message: String,
}

/// What one sync does about pod tracking (upstream's `trackJobStatusAndRemoveFinalizers`).
#[derive(Debug, Clone, PartialEq)]
pub struct Tracking {
    /// The status to write before any finalizer is removed: newly finished pods' UIDs added to
    /// the uncounted lists, and the interim FailureTarget or SuccessCriteriaMet condition.
    pub status: JobStatus,
    /// The pods whose finalizer to remove, by name and UID.
    pub release: Vec<(String, String)>,
    /// The UIDs of the pods that carry the finalizer now.
    pub with_finalizer: BTreeSet<String>,
    /// The terminal condition to set once nothing is uncounted and no pod terminates.
    pub finish: Option<Finish>,
}

/// Plans the tracking of `pods` (each still with the finalizer it had when listed, except those
/// the controller just released) after `decision`, starting from `status` ([`status`]'s).
pub fn track(
    job: &Job,
    pods: &[Pod],
    decision: &Decision,
    mut status: JobStatus,
    now: jiff::Timestamp,
) -> Tracking {
    let tracked: Vec<(&Pod, String)> = pods
        .iter()
        .filter(|p| has_tracking_finalizer(p))
        .filter_map(|p| Some((p, p.uid()?)))
        .collect();
    let with_finalizer: BTreeSet<String> = tracked.iter().map(|(_, uid)| uid.clone()).collect();
    clean_uncounted(&mut status, &with_finalizer);
    let mut conditions = status.conditions.take().unwrap_or_default();
    let finish = match decision {
        Decision::Fail { .. } => Some(match find_condition(&conditions, "FailureTarget") {
            Some(target) if target.status == "True" => Finish {
                type_: "Failed".into(),
                reason: target.reason.clone().unwrap_or_default(),
                message: target.message.clone().unwrap_or_default(),
            },
            _ => {
                let (reason, message) = (
                    "BackoffLimitExceeded",
                    "Job has reached the specified backoff limit",
                );
                set_condition(
                    &mut conditions,
                    "FailureTarget",
                    "True",
                    reason,
                    message,
                    now,
                );
                Finish {
                    type_: "Failed".into(),
                    reason: reason.into(),
                    message: message.into(),
                }
            }
        }),
        Decision::Complete { .. } => {
            let (reason, message) = (
                "CompletionsReached",
                "Reached expected number of succeeded pods",
            );
            if find_condition(&conditions, "SuccessCriteriaMet").is_none_or(|c| c.status != "True")
            {
                set_condition(
                    &mut conditions,
                    "SuccessCriteriaMet",
                    "True",
                    reason,
                    message,
                    now,
                );
            }
            Some(Finish {
                type_: "Complete".into(),
                reason: reason.into(),
                message: message.into(),
            })
        }
        _ => None,
    };
    let failing = matches!(decision, Decision::Fail { .. });
    let (mut succeeded, mut failed) = uncounted(&status);
    let mut release = Vec::new();
    for (pod, uid) in tracked {
        let considered_failed = is_pod_failed(pod, job);
        let phase_succeeded = pods::phase(pod) == "Succeeded";
        // Upstream's canRemoveFinalizer: a running pod keeps its finalizer until it finishes,
        // is deleted, or the Job finishes or goes.
        let can_release = job.metadata.deletion_timestamp.is_some()
            || finish.is_some()
            || phase_succeeded
            || considered_failed;
        if !can_release {
            continue;
        }
        release.push((pod.name_any(), uid.clone()));
        if phase_succeeded && !failed.contains(&uid) {
            if !succeeded.contains(&uid) {
                succeeded.push(uid);
            }
        } else if (considered_failed || failing) && !failed.contains(&uid) {
            // When the Job fails, every pod not finished counts as failed.
            failed.push(uid);
        }
    }
    status.uncounted_terminated_pods = Some(uncounted_status(succeeded, failed));
    status.conditions = (!conditions.is_empty()).then_some(conditions);
    Tracking {
        status,
        release,
        with_finalizer,
        finish,
    }
}

/// Completes a sync's tracking once finalizers were removed: the uncounted pods that no longer
/// carry the finalizer (`with_finalizer` holds those that still do) move to the counters, and
/// the Job finishes when nothing is left uncounted and `terminating` is 0 (upstream's
/// `cleanUncountedPodsWithoutFinalizers` and `enactJobFinished`).
pub fn settle(
    mut status: JobStatus,
    with_finalizer: &BTreeSet<String>,
    finish: Option<&Finish>,
    terminating: i32,
    now: jiff::Timestamp,
) -> JobStatus {
    clean_uncounted(&mut status, with_finalizer);
    let (succeeded, failed) = uncounted(&status);
    if let Some(f) = finish
        && succeeded.is_empty()
        && failed.is_empty()
        && terminating == 0
    {
        let mut conditions = status.conditions.take().unwrap_or_default();
        set_condition(
            &mut conditions,
            &f.type_,
            "True",
            &f.reason,
            &f.message,
            now,
        );
        status.conditions = Some(conditions);
        if f.type_ == "Complete" {
            status.completion_time = status.completion_time.or(Some(Time(now)));
        }
    }
    status
}

/// Moves the uncounted UIDs not in `with_finalizer` to the counters.
fn clean_uncounted(status: &mut JobStatus, with_finalizer: &BTreeSet<String>) {
    let (succeeded, failed) = uncounted(status);
    let (keep_succeeded, done_succeeded): (Vec<_>, Vec<_>) = succeeded
        .into_iter()
        .partition(|u| with_finalizer.contains(u));
    let (keep_failed, done_failed): (Vec<_>, Vec<_>) =
        failed.into_iter().partition(|u| with_finalizer.contains(u));
    status.succeeded = Some(
        status
            .succeeded
            .unwrap_or(0)
            .saturating_add(len_i32(done_succeeded.len())),
    );
    status.failed = Some(
        status
            .failed
            .unwrap_or(0)
            .saturating_add(len_i32(done_failed.len())),
    );
    status.uncounted_terminated_pods = Some(uncounted_status(keep_succeeded, keep_failed));
}

/// Upstream writes empty lists as absent (`uncountedTerminatedPods: {}`).
fn uncounted_status(succeeded: Vec<String>, failed: Vec<String>) -> UncountedTerminatedPods {
    UncountedTerminatedPods {
        succeeded: (!succeeded.is_empty()).then_some(succeeded),
        failed: (!failed.is_empty()).then_some(failed),
    }
}

/// Sets a condition, keeping its times when its status is unchanged.
fn set_condition(
    conditions: &mut Vec<JobCondition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: jiff::Timestamp,
) {
    let new = JobCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) if c.status == status => {
            c.reason = new.reason;
            c.message = new.message;
        }
        Some(c) => *c = new,
        None => conditions.push(new),
    }
}

// === reconcile ===

#[tracing::instrument(skip_all, fields(job.namespace = %job.namespace().unwrap_or_default(), job.name = %job.name_any()))]
async fn reconcile(job: Arc<Job>, ctx: Arc<Context>) -> Result<Action> {
    let result = sync(&job, &ctx).await;
    ctx.record(job.as_ref(), result)
}

/// Reads the Job and its children, acts on the decision, counts finished pods and writes status.
async fn sync(job: &Job, ctx: &Context) -> Result<Action> {
    let ns = job.namespace().unwrap_or_default();
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
    let pod_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let Some(job) = owners::fresh(&jobs, job).await? else {
        return Ok(Action::await_change());
    };
    let name = describe(&job);
    let Some(spec) = job.spec.as_ref() else {
        return Ok(Action::await_change());
    };
    let Some(selector) = owners::selector(&job, spec.selector.as_ref())? else {
        tracing::warn!("Job has no selector; it manages no pods");
        return Ok(Action::await_change());
    };
    let owned = owners::list_owned(&pod_api, &selector, &job).await?;
    if is_finished(&job) {
        // Pods left with the finalizer are released (upstream's cleanupPodFinalizers).
        for pod in owned.iter().filter(|p| has_tracking_finalizer(p)) {
            release(&pod_api, &pod.name_any(), &name).await?;
        }
        return Ok(Action::await_change());
    }
    let counts = count(&job, &owned);
    let decision = decide(&job, &counts);
    // Pods released before they were deleted, not to be counted (upstream's deleteJobPods).
    let mut released: Vec<String> = Vec::new();
    match &decision {
        Decision::Finished => return Ok(Action::await_change()),
        Decision::Unsupported => {
            tracing::warn!(
                "Indexed Jobs are not supported by the sim's Job controller; it creates no pods"
            );
            return Ok(Action::await_change());
        }
        Decision::Deleting => {}
        Decision::Fail { delete } => {
            tracing::info!(decision = ?decision, "job step");
            pods::delete(&pod_api, delete, &name).await?;
        }
        Decision::Complete { delete } | Decision::Suspend { delete } => {
            tracing::info!(decision = ?decision, "job step");
            release_and_delete(&pod_api, delete, &name).await?;
            released.clone_from(delete);
        }
        Decision::Run { create, delete } => {
            release_and_delete(&pod_api, delete, &name).await?;
            released.clone_from(delete);
            if *create > 0 {
                tracing::info!(count = create, "creating pods");
                let pod = new_pod(&job, &ns);
                let created = pods::create(&pod_api, &pod, *create, &name).await?;
                owners::undo_if_owner_gone(&jobs, &job, &pod_api, &created).await?;
            }
        }
    }
    let now = jiff::Timestamp::now();
    let base = status(&job, &counts, &decision, now);
    let terminating = base.terminating.unwrap_or(0);
    let still_tracked: Vec<Pod> = owned
        .into_iter()
        .filter(|p| !released.contains(&p.name_any()))
        .collect();
    let plan = track(&job, &still_tracked, &decision, base, now);
    // The uncounted UIDs are recorded before any finalizer goes: a pod is then counted exactly
    // once, whatever fails or restarts between the steps.
    let Some(job) = write_status(&jobs, &job, plan.status.clone()).await? else {
        return Ok(Action::await_change());
    };
    let mut with_finalizer = plan.with_finalizer;
    let mut failure = None;
    for (pod, uid) in &plan.release {
        match release(&pod_api, pod, &name).await {
            Ok(()) => {
                with_finalizer.remove(uid);
            }
            Err(e) => failure = failure.or(Some(e)),
        }
    }
    let settled = settle(
        job.status.clone().unwrap_or_default(),
        &with_finalizer,
        plan.finish.as_ref(),
        terminating,
        now,
    );
    write_status(&jobs, &job, settled).await?;
    match failure {
        Some(e) => Err(e),
        None => Ok(Action::requeue(RESYNC)),
    }
}

/// Replaces the Job's status with `status` when it differs, with the Job's resourceVersion as
/// precondition (upstream's `UpdateStatus`): a conflict fails the sync, which reads again.
/// Returns the Job as written, `None` when it is gone.
async fn write_status(jobs: &Api<Job>, job: &Job, status: JobStatus) -> Result<Option<Job>> {
    if job.status.as_ref() == Some(&status) {
        return Ok(Some(job.clone()));
    }
    let mut updated = job.clone();
    updated.status = Some(status);
    match jobs
        .replace_status(&job.name_any(), &PostParams::default(), &updated)
        .await
    {
        Ok(written) => Ok(Some(written)),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(Error::api(format!(
            "writing the status of {}",
            describe(job)
        ))(e)),
    }
}

/// Removes the tracking finalizer from a pod (upstream's `removeTrackingFinalizerPatch`, a
/// strategic merge patch); a pod already gone is fine.
async fn release(api: &Api<Pod>, pod: &str, owner: &str) -> Result<()> {
    let patch = Patch::Strategic(serde_json::json!({
        "metadata": {"$deleteFromPrimitiveList/finalizers": [TRACKING_FINALIZER]}
    }));
    match api.patch(pod, &PatchParams::default(), &patch).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(Error::api(format!(
            "removing the Job tracking finalizer of pod {pod} of {owner}"
        ))(e)),
    }
}

/// Releases, then deletes, pods the Job no longer wants: they are not counted.
async fn release_and_delete(api: &Api<Pod>, names: &[String], owner: &str) -> Result<()> {
    for pod in names {
        release(api, pod, owner).await?;
    }
    pods::delete(api, names, owner).await
}

/// Returns the pod the Job creates.
fn new_pod(job: &Job, ns: &str) -> Pod {
    let template = job
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let job_name = job.name_any();
    let uid = job.uid().unwrap_or_default();
    let labels: BTreeMap<String, String> = [
        ("batch.kubernetes.io/job-name", job_name.as_str()),
        ("job-name", job_name.as_str()),
        ("batch.kubernetes.io/controller-uid", uid.as_str()),
        ("controller-uid", uid.as_str()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    // The server fills in the uid on create; a stored Job always has one.
    let owner = owners::controller_ref(job).unwrap_or_default();
    let mut pod = pods::from_template(&template, ns, format!("{job_name}-"), owner, &labels);
    let finalizers = pod.metadata.finalizers.get_or_insert_with(Vec::new);
    if !finalizers.iter().any(|f| f == TRACKING_FINALIZER) {
        finalizers.push(TRACKING_FINALIZER.to_owned());
    }
    pod
}

// === orphan pods ===

#[tracing::instrument(skip_all, fields(pod.namespace = %pod.namespace().unwrap_or_default(), pod.name = %pod.name_any()))]
async fn reconcile_orphan(pod: Arc<Pod>, ctx: Arc<Context>) -> Result<Action> {
    let result = release_orphan(&pod, &ctx).await;
    ctx.record(pod.as_ref(), result)
}

/// Removes the tracking finalizer from a pod whose Job will not: it has no controller, or its
/// controlling Job is gone, replaced or finished (upstream's `syncOrphanPod`). A pod controlled
/// by anything but a batch/v1 Job is left alone.
async fn release_orphan(pod: &Pod, ctx: &Context) -> Result<Action> {
    if !has_tracking_finalizer(pod) {
        return Ok(Action::await_change());
    }
    let ns = pod.namespace().unwrap_or_default();
    let owner = pod
        .owner_references()
        .iter()
        .find(|r| r.controller == Some(true));
    let job_name = match owner {
        Some(r) if r.kind != "Job" || r.api_version != "batch/v1" => {
            return Ok(Action::await_change());
        }
        Some(r) => {
            let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
            let job = jobs
                .get_opt(&r.name)
                .await
                .map_err(Error::api(format!("reading Job {ns}/{}", r.name)))?;
            if job.is_some_and(|j| j.uid().as_deref() == Some(r.uid.as_str()) && !is_finished(&j)) {
                // Its Job counts it and removes the finalizer.
                return Ok(Action::await_change());
            }
            format!("Job {ns}/{}", r.name)
        }
        None => "no Job".to_owned(),
    };
    tracing::debug!(owner = %job_name, "releasing an orphaned Job pod");
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    release(&api, &pod.name_any(), &job_name).await?;
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::controllers::pods::tests::{pod, ts};
    use k8s_openapi::api::batch::v1::JobSpec;

    fn job(completions: Option<i32>, parallelism: i32, backoff: i32) -> Job {
        Job {
            spec: Some(JobSpec {
                completions,
                parallelism: Some(parallelism),
                backoff_limit: Some(backoff),
                pod_replacement_policy: Some("TerminatingOrFailed".into()),
                ..JobSpec::default()
            }),
            ..Job::default()
        }
    }

    /// A pod of the Job, as the controller creates it: its UID is its name, with the finalizer.
    fn tracked(name: &str, created_sec: i64, phase: &str) -> Pod {
        let mut p = pod(name, created_sec, phase);
        p.metadata.uid = Some(name.into());
        p.metadata.finalizers = Some(vec![TRACKING_FINALIZER.into()]);
        p
    }

    fn deleting(mut p: Pod) -> Pod {
        p.metadata.deletion_timestamp = Some(Time(ts(50)));
        p
    }

    fn decide_for(j: &Job, pods: &[Pod]) -> Decision {
        decide(j, &count(j, pods))
    }

    fn condition(s: &JobStatus, type_: &str) -> Option<(String, Option<String>)> {
        s.conditions
            .as_ref()?
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| (c.status.clone(), c.reason.clone()))
    }

    /// One sync's status writes, every finalizer removal succeeding and the released pods that
    /// were not terminating gone: returns the status after `settle`.
    fn sync_status(j: &Job, pods: &[Pod], now: jiff::Timestamp) -> (Decision, Tracking, JobStatus) {
        let counts = count(j, pods);
        let d = decide(j, &counts);
        let base = status(j, &counts, &d, now);
        let terminating = base.terminating.unwrap_or(0);
        let plan = track(j, pods, &d, base, now);
        let mut left = plan.with_finalizer.clone();
        for (_, uid) in &plan.release {
            left.remove(uid);
        }
        let settled = settle(
            plan.status.clone(),
            &left,
            plan.finish.as_ref(),
            terminating,
            now,
        );
        (d, plan, settled)
    }

    #[test]
    fn runs_parallelism_pods_but_no_more_than_completions_need() {
        let j = job(Some(5), 2, 6);
        assert_eq!(
            decide_for(&j, &[]),
            Decision::Run {
                create: 2,
                delete: vec![]
            }
        );
        let pods = [
            tracked("a", 0, "Succeeded"),
            tracked("b", 1, "Succeeded"),
            tracked("c", 2, "Succeeded"),
            tracked("d", 3, "Running"),
        ];
        assert_eq!(
            decide_for(&j, &pods),
            Decision::Run {
                create: 1,
                delete: vec![]
            }
        );
        let pods = [
            tracked("a", 0, "Succeeded"),
            tracked("b", 1, "Succeeded"),
            tracked("c", 2, "Succeeded"),
            tracked("d", 3, "Succeeded"),
            tracked("e", 4, "Running"),
            tracked("f", 5, "Running"),
        ];
        assert_eq!(
            decide_for(&j, &pods),
            Decision::Run {
                create: 0,
                delete: vec!["f".into()]
            }
        );
    }

    #[test]
    fn completes_when_completions_succeeded() {
        let j = job(Some(2), 1, 6);
        let pods = [tracked("a", 0, "Succeeded"), tracked("b", 1, "Succeeded")];
        let (d, plan, s) = sync_status(&j, &pods, ts(10));
        assert_eq!(d, Decision::Complete { delete: vec![] });
        // Written first: both UIDs uncounted, SuccessCriteriaMet but not Complete yet.
        let first = &plan.status;
        assert_eq!(
            first
                .uncounted_terminated_pods
                .clone()
                .unwrap_or_default()
                .succeeded,
            Some(vec!["a".into(), "b".into()])
        );
        assert_eq!(first.succeeded, Some(0));
        assert_eq!(condition(first, "Complete"), None);
        assert_eq!(
            (s.succeeded, s.active, s.failed),
            (Some(2), Some(0), Some(0))
        );
        assert_eq!(
            s.uncounted_terminated_pods,
            Some(UncountedTerminatedPods::default())
        );
        assert_eq!(s.completion_time, Some(Time(ts(10))));
        let types: Vec<_> = s
            .conditions
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.type_, c.status))
            .collect();
        assert_eq!(
            types,
            [
                ("SuccessCriteriaMet".into(), "True".into()),
                ("Complete".into(), "True".into())
            ]
        );
    }

    #[test]
    fn work_queue_completes_after_a_success_once_the_rest_finish() {
        let j = job(None, 2, 6);
        assert_eq!(
            decide_for(&j, &[]),
            Decision::Run {
                create: 2,
                delete: vec![]
            }
        );
        let pods = [tracked("a", 0, "Succeeded"), tracked("b", 1, "Running")];
        assert_eq!(
            decide_for(&j, &pods),
            Decision::Run {
                create: 0,
                delete: vec![]
            }
        );
        let pods = [tracked("a", 0, "Succeeded"), tracked("b", 1, "Failed")];
        assert_eq!(decide_for(&j, &pods), Decision::Complete { delete: vec![] });
    }

    #[test]
    fn failures_beyond_the_backoff_limit_fail_the_job() {
        let j = job(Some(1), 1, 1);
        let pods = [tracked("a", 0, "Failed"), tracked("b", 1, "Running")];
        assert_eq!(
            decide_for(&j, &pods),
            Decision::Run {
                create: 0,
                delete: vec![]
            }
        );
        let pods = [
            tracked("a", 0, "Failed"),
            tracked("b", 1, "Failed"),
            tracked("c", 2, "Running"),
        ];
        let (d, plan, s) = sync_status(&j, &pods, ts(10));
        assert_eq!(
            d,
            Decision::Fail {
                delete: vec!["c".into()]
            }
        );
        // The running pod, deleted, counts as failed too (upstream: when the Job fails every
        // pod not finished does); it terminates, so Failed waits for the next sync.
        assert_eq!(
            condition(&plan.status, "FailureTarget"),
            Some(("True".into(), Some("BackoffLimitExceeded".into())))
        );
        assert_eq!(
            (s.failed, s.active, s.terminating),
            (Some(3), Some(0), Some(1))
        );
        assert_eq!(condition(&s, "Failed"), None);

        let mut j = j;
        j.status = Some(s);
        let (d, _, s) = sync_status(&j, &[], ts(11));
        assert_eq!(d, Decision::Fail { delete: vec![] });
        assert_eq!(
            condition(&s, "Failed"),
            Some(("True".into(), Some("BackoffLimitExceeded".into())))
        );
        assert_eq!(s.failed, Some(3));
    }

    #[test]
    fn a_pod_deleted_before_it_succeeded_counts_as_failed() {
        // backoffLimit 0: the deleted pod fails the Job instead of being replaced.
        let j = job(Some(1), 1, 0);
        let pods = [deleting(tracked("a", 0, "Running"))];
        assert_eq!(count(&j, &pods).failed, 1);
        let (d, plan, s) = sync_status(&j, &pods, ts(10));
        assert_eq!(d, Decision::Fail { delete: vec![] });
        assert_eq!(
            plan.status
                .uncounted_terminated_pods
                .clone()
                .unwrap_or_default()
                .failed,
            Some(vec!["a".into()])
        );
        assert_eq!(plan.release, [("a".to_owned(), "a".to_owned())]);
        assert_eq!((s.failed, s.terminating), (Some(1), Some(1)));

        // backoffLimit 2: counted, and replaced at once (podReplacementPolicy
        // TerminatingOrFailed, the default without a podFailurePolicy).
        let j = job(Some(1), 1, 2);
        let (d, _, s) = sync_status(&j, &pods, ts(10));
        assert_eq!(
            d,
            Decision::Run {
                create: 1,
                delete: vec![]
            }
        );
        assert_eq!((s.failed, s.active), (Some(1), Some(1)));

        // A pod deleted after it succeeded is a success.
        let done = [deleting(tracked("a", 0, "Succeeded"))];
        assert_eq!(count(&j, &done).failed, 0);
        assert_eq!(count(&j, &done).succeeded, 1);
    }

    #[test]
    fn under_replacement_policy_failed_a_terminating_pod_waits_for_its_phase() {
        let mut j = job(Some(1), 1, 0);
        if let Some(s) = j.spec.as_mut() {
            s.pod_replacement_policy = Some("Failed".into());
        }
        let pods = [deleting(tracked("a", 0, "Running"))];
        let counts = count(&j, &pods);
        assert_eq!((counts.failed, counts.terminating), (0, 1));
        assert_eq!(
            decide(&j, &counts),
            Decision::Run {
                create: 0,
                delete: vec![]
            }
        );
        let failed = [deleting(tracked("a", 0, "Failed"))];
        assert!(matches!(decide_for(&j, &failed), Decision::Fail { .. }));
    }

    #[test]
    fn pods_are_counted_once_across_steps_and_restarts() {
        let j = job(Some(3), 1, 6);
        let a = tracked("a", 0, "Succeeded");
        // The first write recorded "a" as uncounted, then the controller stopped before its
        // finalizer went: it is still counted once.
        let mut j1 = j.clone();
        j1.status = Some(
            track(
                &j,
                std::slice::from_ref(&a),
                &Decision::Deleting,
                JobStatus::default(),
                ts(1),
            )
            .status,
        );
        assert_eq!(count(&j1, std::slice::from_ref(&a)).succeeded, 1);
        let (_, plan, s) = sync_status(&j1, std::slice::from_ref(&a), ts(2));
        assert_eq!(plan.release.len(), 1);
        assert_eq!(s.succeeded, Some(1));
        // The finalizer went but the counters were not written: "a" is gone or untracked.
        let mut released = a.clone();
        released.metadata.finalizers = None;
        for pods in [vec![], vec![released.clone()]] {
            assert_eq!(count(&j1, &pods).succeeded, 1);
            let (_, _, s) = sync_status(&j1, &pods, ts(3));
            assert_eq!(s.succeeded, Some(1));
            assert_eq!(
                s.uncounted_terminated_pods,
                Some(UncountedTerminatedPods::default())
            );
        }
        // Counted: a pod without the finalizer adds nothing, a removed one loses nothing.
        let mut j2 = j.clone();
        j2.status = Some(JobStatus {
            succeeded: Some(1),
            failed: Some(1),
            ..JobStatus::default()
        });
        let c = count(&j2, &[released]);
        assert_eq!((c.succeeded, c.failed), (1, 1));
        let c = count(&j2, &[]);
        assert_eq!((c.succeeded, c.failed), (1, 1));
    }

    #[test]
    fn pods_deleted_because_unwanted_are_not_counted() {
        // Parallelism lowered: the extra pod is released before it is deleted, so the sync
        // that deletes it does not count it (sync leaves it out of tracking).
        let j = job(Some(5), 1, 0);
        let pods = [tracked("a", 0, "Running"), tracked("b", 1, "Running")];
        let d = decide_for(&j, &pods);
        let Decision::Run { delete, .. } = &d else {
            panic!("{d:?}")
        };
        assert_eq!(delete.len(), 1);
        let left: Vec<Pod> = pods
            .iter()
            .filter(|p| !delete.contains(&p.name_any()))
            .cloned()
            .collect();
        let plan = track(
            &j,
            &left,
            &d,
            status(&j, &count(&j, &pods), &d, ts(1)),
            ts(1),
        );
        assert!(plan.release.is_empty());
        assert_eq!(plan.status.failed, Some(0));
    }

    #[test]
    fn suspended_jobs_have_no_pods_and_finished_ones_are_left_alone() {
        let mut j = job(Some(1), 1, 6);
        if let Some(s) = j.spec.as_mut() {
            s.suspend = Some(true);
        }
        let pods = [tracked("a", 0, "Running")];
        let counts = count(&j, &pods);
        let d = decide(&j, &counts);
        assert_eq!(
            d,
            Decision::Suspend {
                delete: vec!["a".into()]
            }
        );
        let s = status(&j, &counts, &d, ts(0));
        assert_eq!(s.start_time, None);
        j.status = Some(s);
        if let Some(s) = j.spec.as_mut() {
            s.suspend = Some(false);
        }
        let d = decide(&j, &count(&j, &[]));
        let s = status(&j, &count(&j, &[]), &d, ts(5));
        assert_eq!(
            condition(&s, "Suspended").map(|c| c.0).as_deref(),
            Some("False")
        );
        assert_eq!(s.start_time, Some(Time(ts(5))));

        let mut done = job(Some(1), 1, 6);
        let (_, _, s) = sync_status(&done, &[tracked("a", 0, "Succeeded")], ts(1));
        done.status = Some(s);
        assert!(is_finished(&done));
        assert_eq!(
            decide_for(
                &done,
                &[pod("a", 0, "Succeeded"), tracked("b", 0, "Running")]
            ),
            Decision::Finished
        );
    }

    #[test]
    fn a_deleting_job_releases_its_pods_and_creates_none() {
        let mut j = job(Some(2), 2, 6);
        j.metadata.deletion_timestamp = Some(Time(ts(1)));
        let pods = [tracked("a", 0, "Running")];
        let (d, plan, s) = sync_status(&j, &pods, ts(2));
        assert_eq!(d, Decision::Deleting);
        assert_eq!(plan.release.len(), 1);
        // Released but neither finished nor deleted: not counted.
        assert_eq!((s.failed, s.succeeded), (Some(0), Some(0)));
    }

    #[test]
    fn new_pods_carry_the_tracking_finalizer() {
        let mut j = job(Some(1), 1, 6);
        j.metadata.name = Some("batch".into());
        j.metadata.uid = Some("u1".into());
        let p = new_pod(&j, "ns");
        assert_eq!(p.finalizers(), [TRACKING_FINALIZER]);
    }

    #[test]
    fn indexed_jobs_are_not_run() {
        let mut j = job(Some(3), 3, 6);
        if let Some(s) = j.spec.as_mut() {
            s.completion_mode = Some("Indexed".into());
        }
        assert_eq!(decide_for(&j, &[]), Decision::Unsupported);
    }
}
