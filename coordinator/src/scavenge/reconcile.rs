//! The controller loop: a kube-runtime Controller over every ScavengerJob, owning their Jobs,
//! watching pods labelled [`JOB_LABEL`], and reconciling on the admission poll (the waiting
//! jobs worth a look, [`polled`]), run one reconcile at a time (admission reads the use that
//! the previous start changed) while this replica leads.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::stream::{self, Stream, StreamExt as _};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Node, PersistentVolumeClaim, Pod, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams, PostParams, PropagationPolicy};
use kube::runtime::controller::{Action, Config as ControllerConfig};
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, watcher};
use kube::{Api, Client, Resource as _, ResourceExt as _};
use parking_lot::Mutex;
use telemesh_core::scavenge::JOB_LABEL;
use telemesh_core::scavenge::controller::{
    Admission, ClusterLoad, Decision, Observed, Transition, admission_by, polled, queue,
    reconcile as decide,
};
use telemesh_core::scavenge::crd::{Phase, ScavengerJob, VolumeRef};
use tokio::sync::watch;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use super::load::{cluster_load, holds_capacity};
use super::{Metrics, PhaseLabels, Settings};
use crate::view::ClusterView;

/// How often a waiting job that may not start is reconciled anyway (at least every admission
/// interval). The admission poll reconciles it as soon as it may start or its message is out
/// of date ([`polled`], from the stores), so this requeue only catches what the API alone
/// shows: a volume deleted while it waits (it fails within this rather than at its turn), or
/// a change the watches missed. 30 s: forty waiting jobs cost about one reconcile a second,
/// where each used to cost one per admission interval (80 a second at the replay's 500 ms,
/// enough to keep the one-at-a-time queue busy and a preempted run's notice waiting behind
/// them).
const WAITING_REFRESH: Duration = Duration::from_secs(30);

/// Why a reconcile did not finish (it is retried).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("{what}: {source}")]
    Api {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
}

fn api(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let what = what.into();
    move |source| Error::Api { what, source }
}

/// What every reconcile (and the admission poll) shares.
pub struct Context {
    client: Client,
    settings: Settings,
    metrics: Metrics,
    recorder: Recorder,
    view: ClusterView,
    stale_after: Duration,
    nodes: Store<Node>,
    pods: Store<Pod>,
    jobs: Store<ScavengerJob>,
    /// Jobs started whose new run the store has not shown yet, by UID, as written: their runs
    /// count as load meanwhile, so two admissions in a row never count the same room.
    starting: Mutex<HashMap<String, ScavengerJob>>,
    /// Reconciles so far, by what the job was doing.
    reconciles: [AtomicU64; Reconciled::COUNT],
}

/// What a reconciled ScavengerJob was doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reconciled {
    /// Waiting, and may not start now: it was only told why it waits.
    Waiting,
    /// Waiting, and may start now.
    Admitted,
    /// Running.
    Running,
    /// Finished, being deleted or gone.
    Done,
}

impl Reconciled {
    const COUNT: usize = 4;
}

// === impl Context ===

impl Context {
    /// Counts a reconcile of a job doing `state`.
    fn reconciled(&self, state: Reconciled) {
        self.reconciles[state as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The reconciles so far of jobs doing `state` (how busy the one-at-a-time queue is kept).
    #[cfg(test)]
    fn reconciles(&self, state: Reconciled) -> u64 {
        self.reconciles[state as usize].load(Ordering::Relaxed)
    }
}

/// What the controller is built from.
#[derive(Clone)]
pub struct Parts {
    /// The client.
    pub client: Client,
    /// Settings.
    pub settings: Settings,
    /// Metrics.
    pub metrics: Metrics,
    /// The gossip view (measured use).
    pub view: ClusterView,
    /// Age beyond which a gossiped figure is unknown.
    pub stale_after: Duration,
    /// This replica's name (the Events' reporting instance).
    pub replica: String,
}

/// Runs the controller while `leading` says this replica holds the leader Lease, until
/// `stop`.
pub async fn run(parts: Parts, leading: watch::Receiver<bool>, stop: CancellationToken) {
    parts.metrics.threshold.set(parts.settings.threshold);
    crate::leader::follow(leading, stop, move |term| {
        let parts = parts.clone();
        async move {
            tracing::info!("leading: running the ScavengerJob controller");
            parts.metrics.leader.set(1);
            let metrics = parts.metrics.clone();
            lead(parts, term).await;
            metrics.leader.set(0);
            tracing::info!("stopped the ScavengerJob controller");
        }
    })
    .await;
}

async fn lead(parts: Parts, term: CancellationToken) {
    let sjs = Api::<ScavengerJob>::all(parts.client.clone());
    // Without the CRD the watches would fail forever: say what to do, and look again.
    loop {
        match sjs.list(&ListParams::default().limit(1)).await {
            Ok(_) => break,
            Err(e) => {
                tracing::warn!(error = %e, "cannot list ScavengerJobs; install deploy/crds/scavengerjobs.telemesh.io.yaml or pass --scavengers=false; trying again in 30s");
                tokio::select! {
                    () = term.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_secs(30)) => {}
                }
            }
        }
    }
    let controller = controller(&parts.client);
    let ctx = context(parts, controller.store(), &term);
    control(controller, ctx, term).await;
}

/// The Controller over every ScavengerJob, owning their Jobs and watching their pods.
fn controller(client: &Client) -> Controller<ScavengerJob> {
    let labelled = watcher::Config::default().labels(JOB_LABEL);
    Controller::new(
        Api::<ScavengerJob>::all(client.clone()),
        watcher::Config::default(),
    )
    .with_config(ControllerConfig::default().concurrency(1))
    .owns(Api::<Job>::all(client.clone()), labelled.clone())
    .watches(Api::<Pod>::all(client.clone()), labelled, |pod: Pod| {
        let name = pod.labels().get(JOB_LABEL)?.clone();
        Some(ObjectRef::<ScavengerJob>::new(&name).within(&pod.namespace()?))
    })
}

/// The context of one term as leader (its node and pod watches running until `term`) over
/// the controller's store of ScavengerJobs.
fn context(parts: Parts, jobs: Store<ScavengerJob>, term: &CancellationToken) -> Arc<Context> {
    let Parts {
        client,
        settings,
        metrics,
        view,
        stale_after,
        replica,
    } = parts;
    Arc::new(Context {
        nodes: crate::leader::reflect(
            Api::<Node>::all(client.clone()),
            "nodes",
            None,
            term.clone(),
        )
        .0,
        pods: crate::leader::reflect(Api::<Pod>::all(client.clone()), "pods", None, term.clone()).0,
        jobs,
        recorder: Recorder::new(
            client.clone(),
            Reporter {
                controller: "telemesh-coordinator".into(),
                instance: Some(replica),
            },
        ),
        client,
        settings,
        metrics,
        view,
        stale_after,
        starting: Mutex::new(HashMap::new()),
        reconciles: Default::default(),
    })
}

/// Runs `controller` until `term`: reconciles when ScavengerJobs, their Jobs or their pods
/// change, and when the admission poll asks. `reconcile_on` is kube-runtime's
/// `unstable-runtime-reconcile-on` feature (enabled in the workspace's Cargo.toml): the one
/// way to add a trigger to a Controller without rebuilding it from its parts.
async fn control(controller: Controller<ScavengerJob>, ctx: Arc<Context>, term: CancellationToken) {
    tokio::select! {
        () = term.cancelled() => return,
        _ = async {
            let _ = ctx.nodes.wait_until_ready().await;
            let _ = ctx.pods.wait_until_ready().await;
        } => {}
    }
    controller
        .reconcile_on(admission_polls(ctx.clone()))
        .graceful_shutdown_on(term.cancelled_owned())
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "ScavengerJob reconcile");
            }
        })
        .await;
}

/// Every admission interval, asks for reconciles of the waiting jobs worth one now ([`polled`]:
/// the one that may start, and the first whose message is out of date), judged from the
/// stores. The others are left to their long requeue ([`WAITING_REFRESH`]), so that a long
/// queue does not keep the one-at-a-time reconciles busy while running jobs' pods are
/// preempted.
fn admission_polls(ctx: Arc<Context>) -> impl Stream<Item = ObjectRef<ScavengerJob>> + Send {
    let mut every = tokio::time::interval(ctx.settings.admission_interval);
    every.set_missed_tick_behavior(MissedTickBehavior::Delay);
    stream::unfold(every, |mut every| async move {
        every.tick().await;
        Some(((), every))
    })
    .flat_map(move |()| stream::iter(poll(&ctx)))
}

/// The waiting jobs one admission poll reconciles ([`polled`]).
fn poll(ctx: &Context) -> Vec<ObjectRef<ScavengerJob>> {
    let (load, candidates, holding) = survey(ctx);
    let waiting = queue(candidates.iter().map(AsRef::as_ref));
    let holding: Vec<&ScavengerJob> = holding.iter().collect();
    polled(
        ctx.settings.queue,
        &waiting,
        &holding,
        &load,
        ctx.settings.mode,
        ctx.settings.threshold,
    )
    .into_iter()
    .map(ObjectRef::from_obj)
    .collect()
}

fn error_policy(sj: Arc<ScavengerJob>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(
        scavengerjob.namespace = %sj.namespace().unwrap_or_default(),
        scavengerjob.name = %sj.name_any(),
        error = %error,
        "reconcile failed; retrying in 2s"
    );
    Action::requeue(Duration::from_secs(2))
}

/// Whether the object `name` exists in `api`.
async fn exists<K>(api: Api<K>, name: &str) -> Result<bool, Error>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    api.get_opt(name)
        .await
        .map(|o| o.is_some())
        .map_err(self::api(format!("reading {name}")))
}

/// The PVCs, ConfigMaps and Secrets `sj` mounts that do not exist.
async fn missing_volumes(
    ctx: &Context,
    sj: &ScavengerJob,
    ns: &str,
) -> Result<Vec<VolumeRef>, Error> {
    let mut missing = Vec::new();
    for v in &sj.spec.volumes {
        let Some(source) = v.source() else { continue };
        let found = match &source {
            VolumeRef::Claim(n) => {
                exists(
                    Api::<PersistentVolumeClaim>::namespaced(ctx.client.clone(), ns),
                    n,
                )
                .await?
            }
            VolumeRef::ConfigMap(n) => {
                exists(Api::<ConfigMap>::namespaced(ctx.client.clone(), ns), n).await?
            }
            VolumeRef::Secret(n) if ctx.settings.check_secrets => {
                match exists(Api::<Secret>::namespaced(ctx.client.clone(), ns), n).await {
                    // The chart grants Secrets only in the namespaces it lists
                    // (scavengers.secretNamespaces): elsewhere the check is skipped, not failed.
                    Err(Error::Api {
                        source: kube::Error::Api(status),
                        ..
                    }) if status.code == 403 => {
                        tracing::debug!(namespace = ns, secret = %n, "no right to read Secrets here; not checked");
                        true
                    }
                    found => found?,
                }
            }
            VolumeRef::Secret(_) => true,
        };
        if !found && !missing.contains(&source) {
            missing.push(source);
        }
    }
    Ok(missing)
}

/// The cluster load now (running jobs and those being started counted), the jobs that may
/// wait for a turn (not those being started) and the jobs holding room (running, or started and
/// not yet shown so by the watch); updates the use gauge.
fn survey(ctx: &Context) -> (ClusterLoad, Vec<Arc<ScavengerJob>>, Vec<ScavengerJob>) {
    let all = ctx.jobs.state();
    let mut starting = ctx.starting.lock();
    // Kept until the watch shows the run started (or the job gone).
    let runs = |j: &ScavengerJob| j.status.as_ref().map_or(0, |s| s.running_timestamps.len());
    starting.retain(|uid, started| {
        all.iter()
            .find(|j| j.uid().as_deref() == Some(uid.as_str()))
            .is_some_and(|j| runs(j) < runs(started))
    });
    let holding: Vec<ScavengerJob> = all
        .iter()
        .map(AsRef::as_ref)
        .filter(|j| holds_capacity(j))
        .chain(starting.values())
        .cloned()
        .collect();
    let load = cluster_load(
        &ctx.nodes.state(),
        &ctx.pods.state(),
        &holding,
        &ctx.view.load(),
        ctx.view.now_ms(),
        ctx.stale_after,
    );
    ctx.metrics
        .cluster_use
        .set(load.use_with(ctx.settings.mode, &Default::default()));
    let candidates = all
        .into_iter()
        .filter(|j| !starting.contains_key(j.uid().as_deref().unwrap_or_default()))
        .collect();
    (load, candidates, holding)
}

/// Whether `sj` may start now (its turn by the queue mode, and it fits under the threshold),
/// or why it waits.
fn admitted(ctx: &Context, sj: &ScavengerJob) -> Admission {
    let (load, candidates, holding) = survey(ctx);
    let waiting = queue(candidates.iter().map(AsRef::as_ref));
    let holding: Vec<&ScavengerJob> = holding.iter().collect();
    let admission = admission_by(
        ctx.settings.queue,
        sj,
        &waiting,
        &holding,
        &load,
        ctx.settings.mode,
        ctx.settings.threshold,
    );
    if admission == Admission::Start && waiting.first().is_some_and(|head| head.uid() != sj.uid()) {
        tracing::info!(
            head = %waiting.first().map(|h| h.name_any()).unwrap_or_default(),
            "backfilling: the head of the queue does not fit, this job does beside it"
        );
    }
    admission
}

fn count_phases(ctx: &Context) {
    let all = ctx.jobs.state();
    for phase in Phase::ALL {
        let n = all.iter().filter(|j| j.phase() == phase).count();
        ctx.metrics
            .jobs
            .get_or_create(&PhaseLabels {
                phase: phase.into(),
            })
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }
}

#[tracing::instrument(skip_all, fields(
    scavengerjob.namespace = %cached.namespace().unwrap_or_default(),
    scavengerjob.name = %cached.name_any(),
))]
async fn reconcile(cached: Arc<ScavengerJob>, ctx: Arc<Context>) -> Result<Action, Error> {
    count_phases(&ctx);
    let ns = cached.namespace().unwrap_or_default();
    let name = cached.name_any();
    // Read it again: a change of its Job can trigger this before the watch has delivered the
    // status this controller just wrote, and a stale phase would undo that work.
    let Some(sj) = Api::<ScavengerJob>::namespaced(ctx.client.clone(), &ns)
        .get_opt(&name)
        .await
        .map_err(api("reading the ScavengerJob"))?
    else {
        ctx.reconciled(Reconciled::Done);
        return Ok(Action::await_change());
    };
    if sj.phase().is_terminal() || sj.metadata.deletion_timestamp.is_some() {
        ctx.reconciled(Reconciled::Done);
        return Ok(Action::await_change());
    }
    let waiting = sj.phase().is_waiting();
    let missing = if waiting {
        missing_volumes(&ctx, &sj, &ns).await?
    } else {
        Vec::new()
    };
    let admission = if waiting && missing.is_empty() {
        admitted(&ctx, &sj)
    } else {
        // Keeps the use gauge current while nothing waits.
        survey(&ctx);
        Admission::Wait(String::new())
    };
    let admitted = admission == Admission::Start;
    ctx.reconciled(match (waiting, admitted) {
        (false, _) => Reconciled::Running,
        (true, true) => Reconciled::Admitted,
        (true, false) => Reconciled::Waiting,
    });
    // A job that waits and may not start needs only its message: its last run's Job was
    // deleted when it stopped, and leftover pods matter only to a start. So a long queue
    // costs one read per job and interval, not three.
    let jobs_api = Api::<Job>::namespaced(ctx.client.clone(), &ns);
    let (jobs, pods) = if waiting && !admitted {
        (Vec::new(), Vec::new())
    } else {
        let selector = format!("{JOB_LABEL}={name}");
        let owned = |refs: Option<&Vec<_>>| {
            refs.into_iter().flatten().any(
                |r: &k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference| {
                    Some(&r.uid) == sj.uid().as_ref()
                },
            )
        };
        let jobs: Vec<Job> = jobs_api
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(api("listing the Jobs"))?
            .items
            .into_iter()
            .filter(|j| owned(j.metadata.owner_references.as_ref()))
            .collect();
        let pods: Vec<Pod> = Api::<Pod>::namespaced(ctx.client.clone(), &ns)
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(api("listing the pods"))?
            .items;
        (jobs, pods)
    };
    let decision = decide(&Observed {
        sj: &sj,
        jobs: &jobs,
        pods: &pods,
        missing: &missing,
        admission: &admission,
        now: Timestamp::now(),
        unschedulable_timeout: ctx.settings.unschedulable_timeout,
        start_timeout: ctx.settings.start_timeout,
    });
    apply(&ctx, &sj, admitted, &jobs_api, decision).await
}

/// Does what `decision` says: Jobs deleted and created, status written, the Event recorded;
/// says when to look again (`admitted`: a waiting `sj` may start now).
async fn apply(
    ctx: &Context,
    sj: &ScavengerJob,
    admitted: bool,
    jobs_api: &Api<Job>,
    decision: Decision,
) -> Result<Action, Error> {
    let Decision {
        delete,
        create,
        status,
        transition,
        requeue_after,
    } = decision;
    for name in &delete {
        // Background: the garbage collector removes the pods; a new run waits until they are
        // gone.
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..Default::default()
        };
        match jobs_api.delete(name, &params).await {
            Ok(_) => tracing::info!(job = %name, "deleted the Job"),
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(api(format!("deleting Job {name}"))(e)),
        }
    }
    // The Job first: if the status write then fails, the next reconcile finds the Job of a
    // run that never started and deletes it, instead of finding a run without its Job.
    if let Some(job) = &create {
        match jobs_api.create(&PostParams::default(), job).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(api(format!("creating Job {}", job.name_any()))(e)),
        }
    }
    let mut updated = sj.clone();
    if let Some(status) = status {
        updated.status = Some(status);
        Api::<ScavengerJob>::namespaced(ctx.client.clone(), &sj.namespace().unwrap_or_default())
            .replace_status(&sj.name_any(), &PostParams::default(), &updated)
            .await
            .map_err(api("writing the status"))?;
    }
    if create.is_some()
        && let Some(uid) = sj.uid()
    {
        ctx.starting.lock().insert(uid, updated);
    }
    if let Some(t) = transition {
        record(ctx, sj, &t).await;
    }
    Ok(if !sj.phase().is_waiting() || create.is_some() {
        Action::requeue(requeue_after.unwrap_or(Duration::from_secs(60)))
    } else if admitted {
        // Its turn, but its last run's Job or pods are not gone yet.
        Action::requeue(ctx.settings.admission_interval)
    } else {
        Action::requeue(WAITING_REFRESH.max(ctx.settings.admission_interval))
    })
}

/// Records `t` as an Event on `sj`, in the log and in the metrics.
async fn record(ctx: &Context, sj: &ScavengerJob, t: &Transition) {
    let note = match t {
        Transition::Started { run } => format!("run {run} started"),
        Transition::Interrupted {
            reason,
            wasted_cpu_seconds,
        } => {
            ctx.metrics.interruptions.inc();
            ctx.metrics.wasted_cpu_seconds.inc_by(*wasted_cpu_seconds);
            format!(
                "{reason}; about {wasted_cpu_seconds:.0} CPU-seconds since the last checkpoint lost"
            )
        }
        Transition::Unschedulable { reason } => {
            format!("pods stayed unschedulable ({reason}); waiting for another turn")
        }
        Transition::NotStarted { reason } => {
            format!(
                "pods did not start within the start timeout ({reason}); waiting for another turn"
            )
        }
        Transition::Succeeded => "every pod finished".to_owned(),
        Transition::Failed { reason } => reason.clone(),
    };
    tracing::info!(reason = t.reason(), note = %note, "ScavengerJob transition");
    let event = KubeEvent {
        type_: if t.is_warning() {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: t.reason().to_owned(),
        note: Some(note.chars().take(1000).collect()),
        action: "Reconcile".to_owned(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &sj.object_ref(&())).await {
        tracing::debug!(error = %e, "cannot record an Event");
    }
}

#[cfg(test)]
#[path = "reconcile_tests.rs"]
mod tests;
