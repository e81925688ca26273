//! The Job controller (batch/v1): runs a Job's pods until enough succeed or too many fail, as
//! upstream does, so batch workloads and tests that play kubelet (patching pod phases) see Jobs
//! complete and fail as on a cluster.
//!
//! As upstream: pods get the template's labels plus `batch.kubernetes.io/job-name`, `job-name`,
//! `batch.kubernetes.io/controller-uid` and `controller-uid`, `generateName <job>-` and a
//! controller ownerReference; at most `parallelism` (default 1) pods run, and no more than
//! `completions` (default 1) still needs; with `completions` null (a work queue) the Job is done
//! once any pod succeeded and none is still running; Failed pods count against `backoffLimit`
//! (default 6), and one more failure than that fails the Job (conditions FailureTarget and Failed,
//! reason BackoffLimitExceeded) and deletes its running pods; success writes SuccessCriteriaMet
//! and Complete (reason CompletionsReached) and `completionTime`, and deletes leftover pods;
//! `spec.suspend` deletes running pods and sets Suspended; finished Jobs are left alone. Status
//! (active, ready, succeeded, failed, startTime, conditions) goes through the status
//! subresource when it changes.
//!
//! Simplified: only NonIndexed completion is supported (an Indexed Job gets no pods, and a
//! warning is logged); succeeded and failed are counted from the pods that exist (never going
//! below what status already says), as the controller did before finalizer-based tracking, so
//! `uncountedTerminatedPods` and the `batch.kubernetes.io/job-tracking` finalizer are not used;
//! container restarts under `restartPolicy: OnFailure` do not count against `backoffLimit`;
//! `activeDeadlineSeconds`, `podFailurePolicy`, `successPolicy`, `backoffLimitPerIndex`,
//! `ttlSecondsAfterFinished` and the exponential delay before replacing failed pods are not
//! implemented.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::controller::Action;
use kube::runtime::{Controller, watcher};
use kube::{Api, Client, ResourceExt as _};
use tokio_util::sync::CancellationToken;

use super::Result;
use super::owners::{self, describe};
use super::pods;
use super::runner::{self, Context, RESYNC};

/// Runs the Job controller until `stop` is cancelled.
pub async fn run(client: Client, stop: CancellationToken) {
    let ctx = Context::new(client.clone());
    runner::drive("job", stop, || {
        Controller::new(Api::<Job>::all(client.clone()), watcher::Config::default())
            .owns(Api::<Pod>::all(client.clone()), watcher::Config::default())
            .run(reconcile, runner::error_policy, ctx.clone())
    })
    .await;
}

// === pure decisions ===

/// What a Job's pods add up to. Succeeded and failed never drop below what status recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Pods neither finished nor being deleted, by name.
    pub active: Vec<String>,
    /// Active pods whose Ready condition is True.
    pub ready: i32,
    /// Pods that succeeded.
    pub succeeded: i32,
    /// Pods that failed.
    pub failed: i32,
}

/// Counts the Job's own `pods`, ordered so the active pod to delete first comes first.
pub fn count(job: &Job, pods: &[Pod]) -> Counts {
    let recorded = job.status.clone().unwrap_or_default();
    let n = |phase: &str| {
        i32::try_from(pods.iter().filter(|p| pods::phase(p) == phase).count()).unwrap_or(i32::MAX)
    };
    let mut active: Vec<&Pod> = pods.iter().filter(|p| pods::is_active(p)).collect();
    active.sort_by(|a, b| pods::deletion_order(a, b));
    Counts {
        ready: i32::try_from(active.iter().filter(|p| pods::is_ready(p)).count())
            .unwrap_or(i32::MAX),
        active: active.iter().map(|p| p.name_any()).collect(),
        succeeded: n("Succeeded").max(recorded.succeeded.unwrap_or(0)),
        failed: n("Failed").max(recorded.failed.unwrap_or(0)),
    }
}

/// What the controller does with a Job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Complete or Failed already: nothing to do.
    Finished,
    /// An Indexed Job, which this controller does not run.
    Unsupported,
    /// Too many failures: mark Failed and delete these running pods.
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
    conditions(job)
        .iter()
        .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
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
    if counts.failed > spec.backoff_limit.unwrap_or(6) {
        return Decision::Fail { delete: active };
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
        Decision::Run {
            create: wanted - active.len(),
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

/// Computes the status the Job has after `decision` is carried out, at `now`.
pub fn status(job: &Job, counts: &Counts, decision: &Decision, now: jiff::Timestamp) -> JobStatus {
    let old = job.status.clone().unwrap_or_default();
    let mut conditions = old.conditions.clone().unwrap_or_default();
    let was_suspended = conditions
        .iter()
        .any(|c| c.type_ == "Suspended" && c.status == "True");
    let mut set = |type_: &str, status: &str, reason: &str, message: &str| {
        set_condition(&mut conditions, type_, status, reason, message, now);
    };
    let (active, ready) = match decision {
        Decision::Finished | Decision::Unsupported => {
            let n = i32::try_from(counts.active.len()).unwrap_or(i32::MAX);
            (n, counts.ready)
        }
        Decision::Fail { .. } | Decision::Complete { .. } | Decision::Suspend { .. } => (0, 0),
        Decision::Run { create, delete } => {
            let n = counts.active.len() + create - delete.len().min(counts.active.len());
            (i32::try_from(n).unwrap_or(i32::MAX), counts.ready)
        }
    };
    let mut completion_time = old.completion_time.clone();
    match decision {
        Decision::Fail { .. } => {
            let msg = "Job has reached the specified backoff limit";
            set("FailureTarget", "True", "BackoffLimitExceeded", msg);
            set("Failed", "True", "BackoffLimitExceeded", msg);
        }
        Decision::Complete { .. } => {
            let msg = "Reached expected number of succeeded pods";
            set("SuccessCriteriaMet", "True", "CompletionsReached", msg);
            set("Complete", "True", "CompletionsReached", msg);
            completion_time = completion_time.or(Some(Time(now)));
        }
        Decision::Suspend { .. } => set("Suspended", "True", "JobSuspended", "Job suspended"),
        Decision::Run { .. } => {
            if was_suspended {
                set("Suspended", "False", "JobResumed", "Job resumed");
            }
        }
        Decision::Finished | Decision::Unsupported => {}
    }
    let start_time = match decision {
        Decision::Suspend { .. } | Decision::Unsupported => old.start_time.clone(),
        _ => old.start_time.clone().or(Some(Time(now))),
    };
    JobStatus {
        active: Some(active),
        ready: Some(ready),
        succeeded: Some(counts.succeeded),
        failed: Some(counts.failed),
        start_time,
        completion_time,
        conditions: (!conditions.is_empty()).then_some(conditions),
        ..old
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

/// Reads the Job and its children, acts on the decision, and writes status.
async fn sync(job: &Job, ctx: &Context) -> Result<Action> {
    if is_finished(job) {
        return Ok(Action::await_change());
    }
    let ns = job.namespace().unwrap_or_default();
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
    let pod_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let Some(job) = owners::fresh(&jobs, job).await? else {
        return Ok(Action::await_change());
    };
    if is_finished(&job) || job.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let name = describe(&job);
    let Some(spec) = job.spec.as_ref() else {
        return Ok(Action::await_change());
    };
    let Some(selector) = owners::selector(&job, spec.selector.as_ref())? else {
        tracing::warn!("Job has no selector; it manages no pods");
        return Ok(Action::await_change());
    };
    let owned = owners::list_owned(&pod_api, &selector, &job).await?;
    let counts = count(&job, &owned);
    let decision = decide(&job, &counts);
    match &decision {
        Decision::Finished => return Ok(Action::await_change()),
        Decision::Unsupported => {
            tracing::warn!(
                "Indexed Jobs are not supported by the sim's Job controller; it creates no pods"
            );
            return Ok(Action::await_change());
        }
        Decision::Fail { delete }
        | Decision::Complete { delete }
        | Decision::Suspend { delete } => {
            tracing::info!(decision = ?decision, "job step");
            pods::delete(&pod_api, delete, &name).await?;
        }
        Decision::Run { create, delete } => {
            pods::delete(&pod_api, delete, &name).await?;
            if *create > 0 {
                tracing::info!(count = create, "creating pods");
                let pod = new_pod(&job, &ns);
                let created = pods::create(&pod_api, &pod, *create, &name).await?;
                owners::undo_if_owner_gone(&jobs, &job, &pod_api, &created).await?;
            }
        }
    }
    let new_status = status(&job, &counts, &decision, jiff::Timestamp::now());
    if job.status.as_ref() != Some(&new_status) {
        owners::write_status(&jobs, &job, &new_status).await?;
    }
    Ok(Action::requeue(RESYNC))
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
    pods::from_template(&template, ns, format!("{job_name}-"), owner, &labels)
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
                ..JobSpec::default()
            }),
            ..Job::default()
        }
    }

    fn decide_for(j: &Job, pods: &[Pod]) -> Decision {
        decide(j, &count(j, pods))
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
            pod("a", 0, "Succeeded"),
            pod("b", 1, "Succeeded"),
            pod("c", 2, "Succeeded"),
            pod("d", 3, "Running"),
        ];
        assert_eq!(
            decide_for(&j, &pods),
            Decision::Run {
                create: 1,
                delete: vec![]
            }
        );
        let pods = [
            pod("a", 0, "Succeeded"),
            pod("b", 1, "Succeeded"),
            pod("c", 2, "Succeeded"),
            pod("d", 3, "Succeeded"),
            pod("e", 4, "Running"),
            pod("f", 5, "Running"),
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
        let pods = [pod("a", 0, "Succeeded"), pod("b", 1, "Succeeded")];
        let counts = count(&j, &pods);
        let d = decide(&j, &counts);
        assert_eq!(d, Decision::Complete { delete: vec![] });
        let s = status(&j, &counts, &d, ts(10));
        assert_eq!(
            (s.succeeded, s.active, s.failed),
            (Some(2), Some(0), Some(0))
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
        let pods = [pod("a", 0, "Succeeded"), pod("b", 1, "Running")];
        assert_eq!(
            decide_for(&j, &pods),
            Decision::Run {
                create: 0,
                delete: vec![]
            }
        );
        let pods = [pod("a", 0, "Succeeded"), pod("b", 1, "Failed")];
        assert_eq!(decide_for(&j, &pods), Decision::Complete { delete: vec![] });
    }

    #[test]
    fn failures_beyond_the_backoff_limit_fail_the_job() {
        let j = job(Some(1), 1, 1);
        let pods = [pod("a", 0, "Failed"), pod("b", 1, "Running")];
        assert_eq!(
            decide_for(&j, &pods),
            Decision::Run {
                create: 0,
                delete: vec![]
            }
        );
        let pods = [
            pod("a", 0, "Failed"),
            pod("b", 1, "Failed"),
            pod("c", 2, "Running"),
        ];
        let counts = count(&j, &pods);
        let d = decide(&j, &counts);
        assert_eq!(
            d,
            Decision::Fail {
                delete: vec!["c".into()]
            }
        );
        let s = status(&j, &counts, &d, ts(10));
        assert_eq!((s.failed, s.active), (Some(2), Some(0)));
        let failed = s
            .conditions
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "Failed");
        assert_eq!(
            failed.and_then(|c| c.reason).as_deref(),
            Some("BackoffLimitExceeded")
        );
    }

    #[test]
    fn counts_never_drop_below_recorded_status() {
        let mut j = job(Some(3), 1, 6);
        j.status = Some(JobStatus {
            succeeded: Some(2),
            failed: Some(1),
            ..JobStatus::default()
        });
        let c = count(&j, &[pod("a", 0, "Succeeded")]);
        assert_eq!((c.succeeded, c.failed), (2, 1));
    }

    #[test]
    fn suspended_jobs_have_no_pods_and_finished_ones_are_left_alone() {
        let mut j = job(Some(1), 1, 6);
        if let Some(s) = j.spec.as_mut() {
            s.suspend = Some(true);
        }
        let pods = [pod("a", 0, "Running")];
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
        let suspended = s
            .conditions
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "Suspended");
        assert_eq!(suspended.map(|c| c.status).as_deref(), Some("False"));
        assert_eq!(s.start_time, Some(Time(ts(5))));

        let mut done = job(Some(1), 1, 6);
        let counts = count(&done, &[pod("a", 0, "Succeeded")]);
        done.status = Some(status(
            &done,
            &counts,
            &Decision::Complete { delete: vec![] },
            ts(1),
        ));
        assert_eq!(
            decide_for(&done, &[pod("a", 0, "Succeeded"), pod("b", 0, "Running")]),
            Decision::Finished
        );
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
