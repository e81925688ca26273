//! The executor: on the replica holding the leader Lease ([`crate::leader`]), it runs stored
//! WorkloadActions. One at a time per workload in arrival order ([`queue`]), at most
//! `--action-parallelism` at once, each as steps recorded in status before they act
//! ([`methods`], [`record`]), so a new leader resumes an action where the old one died and no
//! step takes effect twice. Losing the lease stops every task at once (their writes would
//! conflict anyway: each carries the resourceVersion it read).

pub mod cluster;
pub mod failure;
pub mod methods;
pub mod queue;
pub mod record;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use kube::runtime::reflector::Store;
use kube::{Api, Client, Resource as _, ResourceExt as _};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use telemesh_core::action::{
    ActionPhase, ActionRequest, Method, ObjectRef, ScaleTarget, WorkloadAction,
};
use telemesh_runtime::cli::parse_duration;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

pub use self::failure::Failure;
use self::record::Record;
use super::callback;
use super::placements::Placements;

/// Executor flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ExecutorArgs {
    /// Actions on different workloads run in parallel up to this many.
    #[arg(long, env = "TELEMESH_ACTION_PARALLELISM", default_value_t = 16)]
    pub action_parallelism: usize,
    /// How long a step waits for a pod to be Ready (or gone) before the action fails or rolls
    /// back (WAM waited 5 minutes and never rolled back).
    #[arg(long, env = "TELEMESH_ACTION_READY_TIMEOUT", default_value = "5m", value_parser = parse_duration)]
    pub action_ready_timeout: Duration,
    /// How long a new pod may stay unschedulable on the action's node before the action gives up
    /// with the scheduler's reason (room may free up meanwhile).
    #[arg(long, env = "TELEMESH_ACTION_UNSCHEDULABLE_GRACE", default_value = "30s", value_parser = parse_duration)]
    pub action_unschedulable_grace: Duration,
}

/// The executor's validated settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Parallel actions.
    pub parallelism: usize,
    /// Ready wait.
    pub ready_timeout: Duration,
    /// Unschedulable grace.
    pub unschedulable_grace: Duration,
}

impl From<ExecutorArgs> for Settings {
    fn from(a: ExecutorArgs) -> Self {
        Self {
            parallelism: a.action_parallelism.max(1),
            ready_timeout: a.action_ready_timeout,
            unschedulable_grace: a.action_unschedulable_grace,
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Ended {
    method: String,
    phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StepLabel {
    step: String,
}

/// The executor's metrics (prefix `telemesh_coordinator_actions_`).
#[derive(Clone)]
pub struct Metrics {
    ended: Family<Ended, Counter>,
    queued: Gauge,
    running: Gauge,
    leader: Gauge,
    step_seconds: Family<StepLabel, Histogram>,
}

impl Metrics {
    /// Registers the metrics.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self {
            ended: Family::default(),
            queued: Gauge::default(),
            running: Gauge::default(),
            leader: Gauge::default(),
            step_seconds: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.005, 2.0, 16))
            }),
        };
        registry.register(
            "ended",
            "Actions ended, by method and phase",
            m.ended.clone(),
        );
        registry.register(
            "queued",
            "Actions stored and not ended (on the leader)",
            m.queued.clone(),
        );
        registry.register("running", "Actions running now", m.running.clone());
        registry.register(
            "leader",
            "1 while this replica holds the executor Lease",
            m.leader.clone(),
        );
        registry.register(
            "step_seconds",
            "Time from a step's start to its end, by step",
            m.step_seconds.clone(),
        );
        m
    }
}

/// What every action task shares.
pub struct Context {
    /// The client.
    pub client: Client,
    /// Settings.
    pub settings: Settings,
    /// This replica's placements (the executor waits for its own extender to see one).
    pub placements: Placements,
    /// Events.
    pub recorder: Recorder,
    /// Metrics.
    pub metrics: Metrics,
    /// The pod watches the steps' waits share.
    pub pods: cluster::PodWatches,
}

impl Context {
    /// Waits (at most 5 s) until this replica's extender knows the placement of `action`.
    pub async fn placement_visible(&self, action: &str) {
        let wait = self.placements.wait_for(action);
        if tokio::time::timeout(Duration::from_secs(5), wait)
            .await
            .is_err()
        {
            tracing::warn!(
                action,
                "the placement did not reach this replica's watch within 5s; scaling anyway"
            );
        }
    }
}

/// Builds the executor's context.
pub fn context(
    client: Client,
    settings: Settings,
    placements: Placements,
    replica: &str,
    metrics: Metrics,
) -> Arc<Context> {
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "telemesh-coordinator".into(),
            instance: Some(replica.to_string()),
        },
    );
    Arc::new(Context {
        client,
        settings,
        placements,
        recorder,
        metrics,
        pods: cluster::PodWatches::default(),
    })
}

/// Runs actions while `leading` says this replica holds the leader Lease ([`crate::leader`]),
/// until `stop`.
pub async fn run(ctx: Arc<Context>, leading: watch::Receiver<bool>, stop: CancellationToken) {
    crate::leader::follow(leading, stop, move |term| {
        let ctx = ctx.clone();
        async move {
            tracing::info!("leading: running workload actions");
            ctx.metrics.leader.set(1);
            lead(ctx.clone(), term.clone()).await;
            ctx.pods.close_all();
            ctx.metrics.leader.set(0);
            ctx.metrics.running.set(0);
            tracing::info!("stopped running workload actions");
        }
    })
    .await;
}

/// Leads until `term`: follows every WorkloadAction and starts what may start.
async fn lead(ctx: Arc<Context>, term: CancellationToken) {
    // The reflector fills the store as it is polled; a task polls it and wakes the loop.
    let changed = Arc::new(tokio::sync::Notify::new());
    let (store, follow) = crate::leader::reflect(
        Api::<WorkloadAction>::all(ctx.client.clone()),
        "WorkloadActions",
        Some(changed.clone()),
        term.clone(),
    );
    let mut tasks: JoinSet<(String, Result<(), Failure>)> = JoinSet::new();
    let mut running: HashMap<String, tokio::task::AbortHandle> = HashMap::new();
    let mut not_before: HashMap<String, (tokio::time::Instant, u32)> = HashMap::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tokio::select! {
        () = term.cancelled() => { follow.abort(); return; }
        ready = store.wait_until_ready() => if ready.is_err() { follow.abort(); return; },
    }
    loop {
        tokio::select! {
            () = term.cancelled() => break,
            _ = tick.tick() => ctx.pods.close_idle(),
            () = changed.notified() => {}
            done = tasks.join_next(), if !tasks.is_empty() => {
                if let Some(Ok((key, result))) = done {
                    running.remove(&key);
                    match result {
                        Err(e) => {
                            let (_, tries) = not_before.get(&key).copied().unwrap_or((tokio::time::Instant::now(), 0));
                            let wait = Duration::from_millis(250 << tries.min(7));
                            tracing::warn!(action = %key, error = %e, retry_in = ?wait, "action interrupted; it resumes from its last step");
                            not_before.insert(key, (tokio::time::Instant::now() + wait, tries + 1));
                        }
                        Ok(()) => { not_before.remove(&key); }
                    }
                }
            }
        }
        schedule(&ctx, &store, &mut tasks, &mut running, &not_before).await;
    }
    tasks.abort_all();
    follow.abort();
}

/// Resolves new actions' workloads and starts what the queue allows.
async fn schedule(
    ctx: &Arc<Context>,
    store: &Store<WorkloadAction>,
    tasks: &mut JoinSet<(String, Result<(), Failure>)>,
    running: &mut HashMap<String, tokio::task::AbortHandle>,
    not_before: &HashMap<String, (tokio::time::Instant, u32)>,
) {
    let now = tokio::time::Instant::now();
    let mut open: Vec<Arc<WorkloadAction>> = store
        .state()
        .into_iter()
        .filter(|a| needs_work(a))
        .collect();
    open.sort_by_key(|a| (queue::received_ns(&a.spec.received_at), a.name_any()));
    ctx.metrics
        .queued
        .set(i64::try_from(open.len()).unwrap_or(i64::MAX));
    let mut queued = Vec::with_capacity(open.len());
    for action in open {
        let key = key_of(&action);
        let workloads = match action.status.as_ref().map(|s| &s.workloads) {
            // An ended action owing its callback holds no workload.
            _ if action.phase().is_terminal() => Vec::new(),
            Some(w) if !w.is_empty() => w.clone(),
            _ => {
                // Resolve once, in arrival order; the status write comes back through the watch.
                if running.contains_key(&key) {
                    continue;
                }
                match resolve(ctx, &action).await {
                    Ok(workloads) => workloads,
                    Err(e) if e.is_final() => {
                        end_unstarted(ctx, &action, &e).await;
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(action = %key, error = %e, "cannot resolve the action's workload yet");
                        continue;
                    }
                }
            }
        };
        let waiting = not_before.get(&key).is_some_and(|(t, _)| *t > now);
        queued.push(queue::Queued {
            running: running.contains_key(&key) || waiting,
            key,
            received_ns: queue::received_ns(&action.spec.received_at),
            workloads,
        });
    }
    for key in queue::runnable(queued, ctx.settings.parallelism) {
        let Some((namespace, name)) = key.split_once('/') else {
            continue;
        };
        let (ctx2, ns, n, k) = (
            ctx.clone(),
            namespace.to_string(),
            name.to_string(),
            key.clone(),
        );
        let handle = tasks.spawn(async move {
            let result = run_action(&ctx2, &ns, &n).await;
            (k, result)
        });
        running.insert(key, handle);
    }
    ctx.metrics
        .running
        .set(i64::try_from(running.len()).unwrap_or(i64::MAX));
}

/// Whether an action still needs the executor: not ended, or ended with its callback owed.
fn needs_work(a: &WorkloadAction) -> bool {
    let Some(status) = &a.status else {
        return true;
    };
    !status.phase.is_terminal()
        || (a.spec.callback_url.is_some()
            && status
                .callback
                .as_ref()
                .is_none_or(|c| !c.delivered && c.attempts == 0))
}

fn key_of(a: &WorkloadAction) -> String {
    format!("{}/{}", a.namespace().unwrap_or_default(), a.name_any())
}

/// The workloads an action changes, written to its status: what the queue orders it by.
async fn resolve(ctx: &Context, action: &WorkloadAction) -> Result<Vec<ObjectRef>, Failure> {
    let request = request_of(action)?;
    let pod_owner = |namespace: String, name: String| async move {
        let pod = cluster::pod(&ctx.client, &namespace, &name)
            .await?
            .ok_or_else(|| Failure::NotFound(format!("pod {namespace}/{name} does not exist")))?;
        Ok::<_, Failure>(
            cluster::owner_of(&pod).unwrap_or_else(|| ObjectRef::new("Pod", &namespace, &name)),
        )
    };
    let mut workloads = match &request {
        ActionRequest::Create { workload, .. } => vec![ObjectRef::new(
            workload.kind.as_str(),
            &workload.namespace,
            &workload.name,
        )],
        ActionRequest::Delete { pod }
        | ActionRequest::Move { pod, .. }
        | ActionRequest::Bind { pod, .. }
        | ActionRequest::Redeploy { pod } => {
            vec![pod_owner(pod.namespace.clone(), pod.name.clone()).await?]
        }
        ActionRequest::Swap { x, y } => vec![
            pod_owner(x.namespace.clone(), x.name.clone()).await?,
            pod_owner(y.namespace.clone(), y.name.clone()).await?,
        ],
        ActionRequest::UpdateResources { target, .. } | ActionRequest::Scale { target, .. } => {
            match target {
                ScaleTarget::Workload(w) => {
                    vec![ObjectRef::new(w.kind.as_str(), &w.namespace, &w.name)]
                }
                ScaleTarget::Pod(p) => vec![pod_owner(p.namespace.clone(), p.name.clone()).await?],
            }
        }
    };
    workloads.sort();
    workloads.dedup();
    let mut rec = Record::load(
        &ctx.client,
        &action.namespace().unwrap_or_default(),
        &action.name_any(),
    )
    .await?;
    if rec.action.phase() != ActionPhase::Pending {
        return Ok(workloads);
    }
    rec.status().workloads = workloads.clone();
    rec.save().await?;
    Ok(workloads)
}

fn request_of(action: &WorkloadAction) -> Result<ActionRequest, Failure> {
    let method = Method::parse(&action.spec.method)
        .ok_or_else(|| Failure::Unsupported(format!("unknown method {:?}", action.spec.method)))?;
    ActionRequest::parse(method, &action.spec.params).map_err(|e| Failure::Unsupported(e.0))
}

/// Ends an action that failed before it started (its pod does not exist, ...).
async fn end_unstarted(ctx: &Context, action: &WorkloadAction, why: &Failure) {
    let ns = action.namespace().unwrap_or_default();
    let Ok(mut rec) = Record::load(&ctx.client, &ns, &action.name_any()).await else {
        return;
    };
    if rec.action.phase().is_terminal() {
        return;
    }
    rec.end(ActionPhase::Failed, why.to_string());
    if let Err(e) = rec.save().await {
        tracing::warn!(error = %e, "cannot record the action's failure; retrying");
        return;
    }
    ended(ctx, &rec).await;
}

/// Runs one action to its end (or until an interruption it resumes from).
#[tracing::instrument(skip(ctx), fields(action.namespace = %namespace, action.name = %name))]
async fn run_action(ctx: &Context, namespace: &str, name: &str) -> Result<(), Failure> {
    let mut rec = Record::load(&ctx.client, namespace, name).await?;
    if rec.action.phase().is_terminal() {
        // Ended under a previous leader, whose callback was not recorded as made.
        return call_back(&mut rec).await;
    }
    let request = match request_of(&rec.action) {
        Ok(r) => r,
        Err(e) => {
            rec.end(ActionPhase::Failed, e.to_string());
            rec.save().await?;
            ended(ctx, &rec).await;
            return call_back(&mut rec).await;
        }
    };
    if rec.action.phase() == ActionPhase::Pending {
        // Stored with the first step's start (every method begins with a step before it acts).
        let status = rec.status();
        status.phase = ActionPhase::Running;
        status.started_at = Some(record::now());
    }
    let outcome = methods::run(ctx, &mut rec, &request).await;
    match outcome {
        Ok(message) => rec.end(ActionPhase::Succeeded, message),
        Err(Failure::RolledBack(message)) => rec.end(ActionPhase::RolledBack, message),
        Err(e) if e.is_final() => rec.end(ActionPhase::Failed, e.to_string()),
        Err(e) => return Err(e),
    }
    rec.save().await?;
    ended(ctx, &rec).await;
    call_back(&mut rec).await
}

/// POSTs an ended action to its callback URL, if it has one and no attempt is recorded, and
/// records the outcome. The action's workloads are free meanwhile (the queue ignores the
/// workloads of ended actions), so a slow callee delays nobody.
async fn call_back(rec: &mut Record) -> Result<(), Failure> {
    let Some(url) = rec.action.spec.callback_url.clone() else {
        return Ok(());
    };
    if rec
        .action
        .status
        .as_ref()
        .and_then(|s| s.callback.as_ref())
        .is_some_and(|c| c.delivered || c.attempts > 0)
    {
        return Ok(());
    }
    let outcome = callback::deliver(&url, &rec.action).await;
    if !outcome.delivered {
        tracing::warn!(action = %rec.key(), url, attempts = outcome.attempts, error = %outcome.last_error, "the action's callback was not delivered");
    }
    rec.status().callback = Some(outcome);
    rec.save().await
}

/// After an action ends: metrics, Events on it and its workloads.
async fn ended(ctx: &Context, rec: &Record) {
    let action = &rec.action;
    let Some(status) = &action.status else {
        return;
    };
    let phase = status.phase;
    ctx.metrics
        .ended
        .get_or_create(&Ended {
            method: action.spec.method.clone(),
            phase: phase.as_str().to_string(),
        })
        .inc();
    let mut durations: BTreeMap<&str, f64> = BTreeMap::new();
    for step in &status.steps {
        let (Ok(start), Some(Ok(end))) = (
            step.started_at.parse::<jiff::Timestamp>(),
            step.finished_at
                .as_deref()
                .map(str::parse::<jiff::Timestamp>),
        ) else {
            continue;
        };
        let base = step.name.rsplit('.').next().unwrap_or(&step.name);
        *durations.entry(base).or_default() += end.duration_since(start).as_secs_f64().max(0.0);
    }
    for (step, secs) in durations {
        ctx.metrics
            .step_seconds
            .get_or_create(&StepLabel {
                step: step.to_string(),
            })
            .observe(secs);
    }
    let type_ = if phase == ActionPhase::Succeeded {
        EventType::Normal
    } else {
        EventType::Warning
    };
    let note: String = status.message.chars().take(1000).collect();
    let event = KubeEvent {
        type_,
        reason: phase.as_str().to_string(),
        note: Some(format!(
            "{} {}: {note}",
            action.spec.method,
            action.name_any()
        )),
        action: action.spec.method.clone(),
        secondary: None,
    };
    let mut references = vec![action.object_ref(&())];
    references.extend(status.workloads.iter().map(|w| ObjectReference {
        api_version: Some(if w.kind == "Pod" { "v1" } else { "apps/v1" }.to_string()),
        kind: Some(w.kind.clone()),
        namespace: Some(w.namespace.clone()),
        name: Some(w.name.clone()),
        ..Default::default()
    }));
    for reference in references {
        if let Err(e) = ctx.recorder.publish(&event, &reference).await {
            tracing::debug!(error = %e, "cannot record an Event");
        }
    }
    tracing::info!(
        action = %rec.key(),
        method = %action.spec.method,
        phase = phase.as_str(),
        message = %status.message,
        "action ended"
    );
}
