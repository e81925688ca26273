//! A kubelet stand-in per simulated node, as KWOK's: it runs no containers, it plays their life
//! in the pod's status. A pod bound to its node becomes Running and Ready (pod IP, container
//! statuses; the QoS class is the API server's, set at create); a pod annotated `sim.telemesh.io/run-for: <duration>` exits 0 after that long
//! (Succeeded, or restarted under `restartPolicy: Always`); and on cue, from [`FaultRule`]s, its
//! containers crash (exit 1), are OOM-killed (exit 137) or the pod fails outright. A crashed
//! container restarts after kubelet's back-off (CrashLoopBackOff, doubling up to a cap), its
//! `restartCount` and `lastState` updated as kubelet reports them. Pods annotated with their
//! work (`sim.telemesh.io/work`) play the [`workload`](super::workload) model: they run until
//! the work is done, checkpoint, resume after interruption, and the ledger counts what is lost.
//!
//! Probes: the stand-in runs no processes, so a probe of any kind (exec such as WAM's test-c
//! `cat /tmp/ready`, httpGet, tcpSocket, grpc) succeeds whenever it runs. As in kubelet, a
//! container with a readinessProbe is not ready until its first probe, `initialDelaySeconds`
//! after the container started (again after each restart); one without is ready once running.
//! Liveness and startup probes never fail (use fault rules to crash containers).
//!
//! Starting: as a kubelet, the stand-in starts a pod's containers only once nothing keeps them
//! ([`container_start`]: a Secret or ConfigMap volume that is missing,
//! an image reference that does not parse or a pod annotated `sim.telemesh.io/image-pull: fail`,
//! an environment variable's missing Secret or ConfigMap). Meanwhile the pod stays `Pending` with
//! its containers waiting (`ContainerCreating`, `InvalidImageName`, `ErrImagePull` then
//! `ImagePullBackOff` until the next pull, `CreateContainerConfigError`), and the stand-in looks
//! again every second (a pull: after the kubelet's image back-off, the crash back-off's).
//! Start fault rules ([`Fault::Sandbox`], [`Fault::Pull`]) make the node itself fail to start
//! matching pods while they hold. Each time what keeps a pod changes, and at each failed pull,
//! the stand-in records the kubelet's Warning Event on the pod (`FailedMount`,
//! `FailedCreatePodSandBox`, `Failed` with "Failed to pull image ...", `InspectFailed`).
//!
//! Each stand-in watches only the pods bound to its node (`spec.nodeName`), as a kubelet does.
//!
//! Graceful deletion: a real API server only marks a deleted pod (`deletionTimestamp`) and
//! waits for its node's kubelet, which stops the containers, reports the terminal status
//! (`Failed`, containers terminated with 143, as after SIGTERM; a pod already finished keeps
//! its phase) and deletes it with grace period 0 and a UID precondition. The stand-in does the
//! same (its containers stop at once): without it a pod stays `Terminating` for ever, on a real
//! control plane as on sim, which marks deleted pods the same way.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{reflector, watcher};
use kube::{Client, Resource as _, ResourceExt as _};
use serde_json::{Value, json};
use telemesh_runtime::backoff::Backoff;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use super::container_start::{self, Blocker};
use super::workload::{End, Run, Workloads};

/// The annotation that makes a pod's containers exit 0 after a while (Job pods).
pub const RUN_FOR_ANNOTATION: &str = "sim.telemesh.io/run-for";

/// What happens to a pod's containers on cue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Fault {
    /// The main container exits 1 (reason `Error`).
    Crash,
    /// The main container is OOM-killed (exit 137, reason `OOMKilled`).
    Oom,
    /// The pod fails for good (phase `Failed`), whatever its restart policy.
    Fail,
    /// A start fault: the node cannot create the sandbox of a new pod (its network plugin
    /// fails; `ContainerCreating`, `FailedCreatePodSandBox` Events) while the rule holds.
    Sandbox,
    /// A start fault: the node cannot pull a new pod's image (its registry lookups time out;
    /// `ErrImagePull`, `ImagePullBackOff`) while the rule holds.
    Pull,
}

impl Fault {
    /// Whether it keeps a new pod from starting (rather than striking a running container; a
    /// start fault's rule ignores `every`).
    pub fn at_start(self) -> bool {
        matches!(self, Self::Sandbox | Self::Pull)
    }
}

/// Pods on `node` whose labels include `selector` suffer `fault` once they have run `every` (a
/// start fault: as they start, while the rule holds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultRule {
    /// The node whose kubelet acts.
    pub node: String,
    /// Labels a pod must carry (all of them); empty matches every pod.
    pub selector: BTreeMap<String, String>,
    /// What happens.
    pub fault: Fault,
    /// How long a container runs before it happens (again).
    pub every: Duration,
}

/// The kubelet's back-off after a crash: 10 s, doubled per restart, capped at 5 min.
pub const CRASH_BACKOFF: Backoff = Backoff::new(Duration::from_secs(10), Duration::from_secs(300));

/// One simulated node's kubelet.
#[derive(Debug, Clone)]
pub struct Kubelet {
    /// Node name.
    pub node: String,
    /// Third octet of the node's pod IPs (`10.244.<n>.x`).
    pub index: u8,
    /// Crash back-off: the wait before restart number `n` (1 = after the first crash) is its
    /// [`Backoff::nominal`]`(n)` ([`CRASH_BACKOFF`] as the kubelet has it).
    pub backoff: Backoff,
    /// The node's host root (the directory its agent reads with `--host-root`), where the
    /// kubelet keeps pods' `emptyDir`s: checkpoint markers are touched there. None: no files.
    pub host_root: Option<PathBuf>,
    /// The cluster's ledger of modelled work (shared by every kubelet).
    pub workloads: Workloads,
}

/// How often the stand-in looks again at what keeps a pod's containers from starting (a pull
/// waits for the back-off instead).
const LOOK_AGAIN: Duration = Duration::from_secs(1);

/// A container's life as the kubelet plays it.
#[derive(Debug, Clone, PartialEq)]
enum Life {
    /// Not started: `blocker` keeps it (as last looked at, `attempts` pulls so far); looked at
    /// again at `look_again`; `backing_off` once a failed pull has been reported.
    Waiting {
        blocker: Blocker,
        attempts: i32,
        look_again: Instant,
        backing_off: bool,
    },
    Running {
        since: Instant,
        at: String,
    },
    BackOff {
        until: Instant,
    },
    Exited {
        code: i32,
        reason: &'static str,
    },
}

#[derive(Debug, Clone)]
struct Tracked {
    life: Life,
    restarts: i32,
    last_termination: Option<Value>,
    ip: String,
    started_at: String,
    /// The status last written, to write only changes.
    written: Option<Value>,
    /// The current container run's modelled work, while it runs.
    run: Option<Run>,
}

impl Kubelet {
    /// The back-off before try number `n` (a restart after a crash, an image pull again).
    fn backoff_after(&self, n: i32) -> Duration {
        self.backoff.nominal(u32::try_from(n).unwrap_or(0))
    }

    /// Runs until `stop`, with the fault rules `faults` currently holds.
    pub async fn run(
        self,
        client: Client,
        faults: watch::Receiver<Vec<FaultRule>>,
        stop: CancellationToken,
    ) {
        let api: Api<Pod> = Api::all(client.clone());
        let (pods, writer) = reflector::store::<Pod>();
        let selector = format!("spec.nodeName={}", self.node);
        let stream = reflector(
            writer,
            watcher(api, watcher::Config::default().fields(&selector)),
        );
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: "kubelet".into(),
                instance: Some(self.node.clone()),
            },
        );
        let changed = Arc::new(Notify::new());
        tokio::spawn(super::notify::notify_on_change(
            stream,
            changed.clone(),
            stop.clone(),
        ));
        let mut tracked: HashMap<String, Tracked> = HashMap::new();
        // Terminating pods this kubelet has finished (deleted with grace 0), by UID.
        let mut finished: HashSet<String> = HashSet::new();
        let mut next_ip: u8 = 2;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = changed.notified() => {}
                () = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
            let rules = faults.borrow().clone();
            let now = Instant::now();
            let current = pods.state();
            let gone: Vec<String> = tracked
                .keys()
                .filter(|uid| !current.iter().any(|p| p.uid().as_deref() == Some(*uid)))
                .cloned()
                .collect();
            for uid in gone {
                finished.remove(&uid);
                if let Some(mut t) = tracked.remove(&uid) {
                    self.interrupt(&mut t, now);
                }
                if let Some(root) = &self.host_root {
                    super::workload::remove_pod_dir(root, &uid);
                }
            }
            for pod in current {
                let Some(uid) = pod.uid() else { continue };
                if pod.metadata.deletion_timestamp.is_some() {
                    // Terminating: its containers are stopped, whatever they were doing, and the
                    // pod is finished once that is reported.
                    let mut t = tracked.get_mut(&uid);
                    if let Some(t) = t.as_deref_mut() {
                        self.interrupt(t, now);
                    }
                    if !finished.contains(&uid) && finish(&client, &pod, t, now).await {
                        finished.insert(uid);
                    }
                    continue;
                }
                // What keeps its containers from starting, looked at for a new pod and when a
                // waiting one is due.
                let due = match tracked.get(&uid) {
                    None => !super::pod_state::is_terminal(&pod),
                    Some(t) => {
                        matches!(t.life, Life::Waiting { look_again, .. } if now >= look_again)
                    }
                };
                let found = if due {
                    let found = container_start::blocker(&client, &pod).await;
                    Some(Blocker::first(found, self.start_fault(&pod, &rules)))
                } else {
                    None
                };
                let new = !tracked.contains_key(&uid);
                let t = tracked.entry(uid).or_insert_with(|| {
                    next_ip = next_ip.wrapping_add(1).max(2);
                    Tracked {
                        life: Life::Running {
                            since: now,
                            at: crate::apiserver::objects::lifecycle::now(),
                        },
                        restarts: 0,
                        last_termination: None,
                        ip: format!("10.244.{}.{}", self.index, next_ip),
                        started_at: crate::apiserver::objects::lifecycle::now(),
                        written: None,
                        run: None,
                    }
                });
                if t.written.is_none() && super::pod_state::is_terminal(&pod) {
                    // Finished before this kubelet saw it (a restart of the dev cluster): leave it.
                    continue;
                }
                if (new || matches!(t.life, Life::Waiting { .. }))
                    && let Some(blocker) = self.wait(&pod, t, found, now)
                {
                    record(&recorder, &pod, &blocker).await;
                }
                self.advance(&pod, t, &rules, now);
                let status = status(&pod, t, now);
                if t.written.as_ref() != Some(&status) {
                    let namespace = pod.namespace().unwrap_or_default();
                    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
                    let patch = json!({ "status": status });
                    match api
                        .patch_status(
                            &pod.name_any(),
                            &PatchParams::default(),
                            &Patch::Merge(&patch),
                        )
                        .await
                    {
                        Ok(_) => t.written = Some(status),
                        Err(e) => {
                            tracing::debug!(pod = %pod.name_any(), error = %e, "kubelet status update failed; retrying")
                        }
                    }
                }
            }
        }
    }

    /// Ends the modelled run of a pod whose containers stop at `now` (deleted, evicted):
    /// the work since its last checkpoint is lost.
    fn interrupt(&self, t: &mut Tracked, now: Instant) {
        if let (Some(run), Life::Running { since, .. }) = (t.run.take(), &t.life) {
            self.workloads
                .end(run, now.saturating_duration_since(*since), End::Interrupted);
        }
    }

    /// The blocker a start fault rule of this node makes for `pod`, if one matches.
    fn start_fault(&self, pod: &Pod, rules: &[FaultRule]) -> Option<Blocker> {
        let labels = pod.labels();
        let rule = rules.iter().find(|r| {
            r.node == self.node
                && r.fault.at_start()
                && r.selector.iter().all(|(k, v)| labels.get(k) == Some(v))
        })?;
        match rule.fault {
            Fault::Sandbox => Some(container_start::node_sandbox(pod, self.index)),
            Fault::Pull => container_start::node_pull(pod),
            Fault::Crash | Fault::Oom | Fault::Fail => None,
        }
    }

    /// Moves a pod whose containers have not started on: `found` is what keeps them now when
    /// it was looked at this pass (None inside: nothing, they start), None when not due. A failed
    /// pull is reported once (`ErrImagePull`), then as back-off until the next attempt. Returns
    /// the blocker whose Event the kubelet records now: a new one, or another failed pull.
    fn wait(
        &self,
        pod: &Pod,
        t: &mut Tracked,
        found: Option<Option<Blocker>>,
        now: Instant,
    ) -> Option<Blocker> {
        let (attempts, backing_off, previous) = match &mut t.life {
            Life::Waiting {
                attempts,
                backing_off,
                blocker,
                ..
            } => (*attempts, backing_off, Some(blocker.clone())),
            _ => (0, &mut false, None),
        };
        match found {
            None => {
                *backing_off = true;
                None
            }
            Some(None) => {
                t.life = Life::Running {
                    since: now,
                    at: crate::apiserver::objects::lifecycle::now(),
                };
                t.run = self.workloads.begin(pod, self.host_root.as_deref());
                None
            }
            Some(Some(blocker)) => {
                let record = (blocker.is_pull() || previous.as_ref() != Some(&blocker))
                    .then(|| blocker.clone());
                let (attempts, look_again) = if blocker.is_pull() {
                    (attempts + 1, now + self.backoff_after(attempts + 1))
                } else {
                    (attempts, now + LOOK_AGAIN)
                };
                t.life = Life::Waiting {
                    blocker,
                    attempts,
                    look_again,
                    backing_off: false,
                };
                record
            }
        }
    }

    /// Moves a container's life on: exits, faults, restarts after back-off.
    fn advance(&self, pod: &Pod, t: &mut Tracked, rules: &[FaultRule], now: Instant) {
        let policy = restart_policy(pod);
        match t.life.clone() {
            Life::Exited { .. } | Life::Waiting { .. } => {}
            Life::BackOff { until } => {
                if now >= until {
                    t.life = Life::Running {
                        since: now,
                        at: crate::apiserver::objects::lifecycle::now(),
                    };
                    t.run = self.workloads.begin(pod, self.host_root.as_deref());
                }
            }
            Life::Running { since, at } => {
                let ran = now.saturating_duration_since(since);
                if let Some(run) = &mut t.run {
                    self.workloads.advance(run, ran);
                }
                let labels = pod.labels();
                let fault = rules.iter().find(|r| {
                    r.node == self.node
                        && !r.fault.at_start()
                        && ran >= r.every
                        && r.selector.iter().all(|(k, v)| labels.get(k) == Some(v))
                });
                let exit = match fault {
                    Some(r) => Some(match r.fault {
                        Fault::Crash => (1, "Error", false),
                        Fault::Oom => (137, "OOMKilled", false),
                        Fault::Fail | Fault::Sandbox | Fault::Pull => (1, "Error", true),
                    }),
                    None => run_for(pod)
                        .or_else(|| t.run.as_ref().map(Run::remaining))
                        .filter(|d| ran >= *d)
                        .map(|_| (0, "Completed", false)),
                };
                let Some((code, reason, fatal)) = exit else {
                    return;
                };
                if let Some(run) = t.run.take() {
                    let done = code == 0 && ran >= run.remaining();
                    let end = if done {
                        End::Completed
                    } else {
                        End::Interrupted
                    };
                    self.workloads.end(run, ran, end);
                }
                t.last_termination = Some(json!({"terminated": {
                    "exitCode": code, "reason": reason, "startedAt": at,
                    "finishedAt": crate::apiserver::objects::lifecycle::now(),
                }}));
                let restarts = match policy {
                    "Always" => !fatal,
                    "OnFailure" => !fatal && code != 0,
                    _ => false,
                };
                if restarts {
                    t.restarts += 1;
                    t.life = if code == 0 {
                        t.run = self.workloads.begin(pod, self.host_root.as_deref());
                        Life::Running {
                            since: now,
                            at: crate::apiserver::objects::lifecycle::now(),
                        }
                    } else {
                        Life::BackOff {
                            until: now + self.backoff_after(t.restarts),
                        }
                    };
                } else {
                    t.life = Life::Exited { code, reason };
                }
            }
        }
    }
}

/// Records the kubelet's Warning Event for what keeps `pod` from starting.
async fn record(recorder: &Recorder, pod: &Pod, blocker: &Blocker) {
    let (reason, note) = blocker.event();
    let event = Event {
        type_: EventType::Warning,
        reason: reason.into(),
        note: Some(note),
        action: "Starting".into(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&event, &pod.object_ref(&())).await {
        tracing::debug!(pod = %pod.name_any(), error = %e, "recording a kubelet event failed");
    }
}

/// Finishes a terminating pod as kubelet does once its containers have stopped: the terminal
/// status first (the Job controller and the descheduler read it), then the deletion with grace
/// period 0, only of this pod (UID precondition: a pod of the same name made since is not
/// ours). A pod this kubelet never started (`t` None) has no status to report. Returns whether
/// the pod is finished (deleted, or already gone); false: try again at the next pass.
async fn finish(client: &Client, pod: &Pod, t: Option<&mut Tracked>, now: Instant) -> bool {
    let (name, namespace, uid) = (pod.name_any(), pod.namespace(), pod.uid());
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace.as_deref().unwrap_or_default());
    if let Some(t) = t
        && !super::pod_state::is_terminal(pod)
    {
        if let Life::Running { at, .. } = &t.life {
            t.last_termination = Some(json!({"terminated": {
                "exitCode": 143, "reason": "Error", "startedAt": at,
                "finishedAt": crate::apiserver::objects::lifecycle::now(),
            }}));
        }
        t.life = if matches!(t.life, Life::Waiting { .. }) {
            // Never started: the kubelet has no container to stop or report.
            t.last_termination = Some(json!({"terminated": {
                "exitCode": 137, "reason": "ContainerStatusUnknown",
                "message": "The container could not be located when the pod was terminated",
            }}));
            Life::Exited {
                code: 137,
                reason: "ContainerStatusUnknown",
            }
        } else {
            Life::Exited {
                code: 143,
                reason: "Error",
            }
        };
        let patch = json!({ "status": status(pod, t, now) });
        if let Err(e) = api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            tracing::debug!(pod = %name, error = %e, "kubelet could not report a terminating pod's end; retrying");
            return matches!(e, kube::Error::Api(ref s) if s.code == 404);
        }
    }
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid,
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&name, &params).await {
        Ok(_) => true,
        // Gone already, or another pod now has the name (the precondition failed).
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => true,
        Err(e) => {
            tracing::debug!(pod = %name, error = %e, "kubelet could not delete a terminated pod; retrying");
            false
        }
    }
}

fn restart_policy(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always")
}

fn run_for(pod: &Pod) -> Option<Duration> {
    let text = pod.annotations().get(RUN_FOR_ANNOTATION)?;
    match telemesh_runtime::cli::parse_duration(text) {
        Ok(d) => Some(d),
        Err(e) => {
            tracing::warn!(pod = %pod.name_any(), annotation = RUN_FOR_ANNOTATION, error = %e, "ignoring a malformed run-for annotation");
            None
        }
    }
}

/// How long after starting the container is first ready: its readinessProbe's
/// `initialDelaySeconds` (the first probe, which always succeeds here), zero without a probe.
fn readiness_delay(container: &k8s_openapi::api::core::v1::Container) -> Duration {
    let secs = container
        .readiness_probe
        .as_ref()
        .and_then(|p| p.initial_delay_seconds)
        .unwrap_or(0);
    Duration::from_secs(u64::try_from(secs).unwrap_or(0))
}

/// When a running container started at `at` (RFC 3339) and ready after `delay` became ready.
fn ready_time(at: &str, delay: Duration) -> Option<String> {
    let start: jiff::Timestamp = at.parse().ok()?;
    let ready = start
        .checked_add(jiff::SignedDuration::try_from(delay).ok()?)
        .ok()?;
    Some(ready.to_string())
}

/// The pod conditions kubelet owns and writes; any other is someone else's and kept.
const KUBELET_CONDITIONS: [&str; 5] = [
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
    "PodScheduled",
];

/// The pod status the kubelet reports for `t` at `now`: phase, conditions and one status per
/// container (every container shares the main container's life; readiness waits for each
/// container's first readiness probe).
fn status(pod: &Pod, t: &Tracked, now: Instant) -> Value {
    let containers_spec: Vec<&k8s_openapi::api::core::v1::Container> =
        pod.spec.iter().flat_map(|s| &s.containers).collect();
    let slowest = containers_spec
        .iter()
        .map(|c| readiness_delay(c))
        .max()
        .unwrap_or_default();
    let (running_for, running_at) = match &t.life {
        Life::Running { since, at } => (Some(now.saturating_duration_since(*since)), Some(at)),
        _ => (None, None),
    };
    let container_ready = |c: &k8s_openapi::api::core::v1::Container| {
        running_for.is_some_and(|ran| ran >= readiness_delay(c))
    };
    let (phase, ready, state) = match &t.life {
        Life::Waiting {
            blocker,
            backing_off,
            ..
        } => {
            let (reason, message) = blocker.waiting(*backing_off);
            let mut waiting = json!({"reason": reason});
            if let Some(m) = message {
                waiting["message"] = json!(m);
            }
            ("Pending", false, json!({ "waiting": waiting }))
        }
        Life::Running { at, .. } => (
            "Running",
            running_for.is_some_and(|ran| ran >= slowest),
            json!({"running": {"startedAt": at}}),
        ),
        Life::BackOff { .. } => (
            "Running",
            false,
            json!({"waiting": {"reason": "CrashLoopBackOff",
                "message": format!("back-off restarting failed container (restarts: {})", t.restarts)}}),
        ),
        Life::Exited { code, reason } => (
            if *code == 0 { "Succeeded" } else { "Failed" },
            false,
            t.last_termination
                .clone()
                .unwrap_or_else(|| json!({"terminated": {"exitCode": code, "reason": reason}})),
        ),
    };
    let containers: Vec<Value> = containers_spec
        .iter()
        .map(|c| {
            let mut s = json!({
                "name": c.name,
                "image": c.image.clone().unwrap_or_default(),
                "imageID": format!("sim://{}", c.image.clone().unwrap_or_default()),
                "containerID": format!("sim://{}-{}", pod.uid().unwrap_or_default(), c.name),
                "ready": container_ready(c),
                "started": matches!(t.life, Life::Running { .. }),
                "restartCount": t.restarts,
                "state": state,
            });
            if let Some(last) = &t.last_termination
                && !matches!(t.life, Life::Exited { .. })
            {
                s["lastState"] = last.clone();
            }
            if matches!(t.life, Life::Waiting { .. }) {
                // Never created: no container ID, no image pulled.
                s["imageID"] = json!("");
                if let Some(s) = s.as_object_mut() {
                    s.remove("containerID");
                }
            }
            s
        })
        .collect();
    let flag = |b: bool| if b { "True" } else { "False" };
    let condition = |type_: &str, ok: bool| {
        json!({"type": type_, "status": flag(ok), "lastProbeTime": null,
               "lastTransitionTime": t.started_at})
    };
    // A container held back by its first readiness probe turned ready when that probe ran.
    let ready_condition = |type_: &str| {
        let mut c = condition(type_, ready);
        if let Some(at) = running_at.filter(|_| ready && !slowest.is_zero())
            && let Some(time) = ready_time(at, slowest)
        {
            c["lastTransitionTime"] = json!(time);
        }
        c
    };
    // No sandbox (and no IP) while a volume is not mounted.
    let sandbox = !matches!(&t.life, Life::Waiting { blocker, .. } if !blocker.has_sandbox());
    let mut status = json!({
        "phase": phase,
        "hostIP": "127.0.0.1",
        "hostIPs": [{"ip": "127.0.0.1"}],
        "podIP": t.ip,
        "podIPs": [{"ip": t.ip}],
        "startTime": t.started_at,
        "conditions": [
            condition("PodReadyToStartContainers", sandbox),
            condition("Initialized", true),
            ready_condition("Ready"),
            ready_condition("ContainersReady"),
            condition("PodScheduled", true),
        ],
        "containerStatuses": containers,
    });
    if !sandbox && let Some(s) = status.as_object_mut() {
        s.remove("podIP");
        s.remove("podIPs");
    }
    // Conditions others own (the scheduler's DisruptionTarget, a readiness gate's) stay, as
    // kubelet's status manager keeps them: the merge patch replaces the whole list.
    let theirs = pod
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .filter(|c| !KUBELET_CONDITIONS.contains(&c.type_.as_str()));
    for c in theirs {
        if let (Some(list), Ok(c)) = (status["conditions"].as_array_mut(), serde_json::to_value(c))
        {
            list.push(c);
        }
    }
    if let Life::Exited { code, .. } = t.life
        && code != 0
    {
        status["reason"] = json!("Error");
    }
    status
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn pod(restart: &str, labels: Value, annotations: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "uid": "u1", "labels": labels, "annotations": annotations},
            "spec": {"nodeName": "n1", "restartPolicy": restart,
                     "containers": [{"name": "main", "image": "demo"}]}
        }))
        .unwrap()
    }

    fn fresh(now: Instant) -> Tracked {
        Tracked {
            life: Life::Running {
                since: now,
                at: "t0".into(),
            },
            restarts: 0,
            last_termination: None,
            ip: "10.244.0.3".into(),
            started_at: "t0".into(),
            written: None,
            run: None,
        }
    }

    fn kubelet() -> Kubelet {
        Kubelet {
            node: "n1".into(),
            index: 0,
            backoff: Backoff::new(Duration::from_secs(10), Duration::from_secs(40)),
            host_root: None,
            workloads: Workloads::default(),
        }
    }

    fn crash_rule(node: &str, fault: Fault) -> FaultRule {
        FaultRule {
            node: node.into(),
            selector: BTreeMap::from([("app".into(), "d".into())]),
            fault,
            every: Duration::from_secs(5),
        }
    }

    #[test]
    fn conditions_others_own_are_kept() {
        let mut p = pod("Never", json!({}), json!({}));
        p.status = serde_json::from_value(json!({"conditions": [
            {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"},
            {"type": "Ready", "status": "True"}
        ]}))
        .unwrap();
        let t0 = Instant::now();
        let s = status(&p, &fresh(t0), t0);
        let types: Vec<&str> = s["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["type"].as_str())
            .collect();
        assert_eq!(
            types,
            [
                "PodReadyToStartContainers",
                "Initialized",
                "Ready",
                "ContainersReady",
                "PodScheduled",
                "DisruptionTarget"
            ]
        );
    }

    #[test]
    fn a_crash_restarts_after_back_off_and_counts() {
        let k = kubelet();
        let p = pod("Always", json!({"app": "d"}), json!({}));
        let t0 = Instant::now();
        let mut t = fresh(t0);
        let rules = [crash_rule("n1", Fault::Crash)];
        k.advance(&p, &mut t, &rules, t0 + Duration::from_secs(4));
        assert!(matches!(t.life, Life::Running { .. }), "not yet");
        k.advance(&p, &mut t, &rules, t0 + Duration::from_secs(5));
        assert_eq!(t.restarts, 1);
        let s = status(&p, &t, t0);
        assert_eq!(s["phase"], "Running");
        let c = &s["containerStatuses"][0];
        assert_eq!(c["ready"], false);
        assert_eq!(c["restartCount"], 1);
        assert_eq!(c["state"]["waiting"]["reason"], "CrashLoopBackOff");
        assert_eq!(c["lastState"]["terminated"]["exitCode"], 1);
        // Back-off 10 s, then running again.
        k.advance(&p, &mut t, &rules, t0 + Duration::from_secs(14));
        assert!(matches!(t.life, Life::BackOff { .. }));
        k.advance(&p, &mut t, &rules, t0 + Duration::from_secs(15));
        let s = status(&p, &t, t0);
        assert_eq!(s["containerStatuses"][0]["ready"], true);
        assert_eq!(
            s["containerStatuses"][0]["lastState"]["terminated"]["reason"],
            "Error"
        );
        assert_eq!(k.backoff_after(2), Duration::from_secs(20));
        assert_eq!(k.backoff_after(9), Duration::from_secs(40), "capped");
    }

    #[test]
    fn faults_respect_node_selector_and_restart_policy() {
        let k = kubelet();
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(60);
        let other_type = pod("Always", json!({"app": "e"}), json!({}));
        let mut t = fresh(t0);
        k.advance(
            &other_type,
            &mut t,
            &[crash_rule("n1", Fault::Crash)],
            later,
        );
        assert_eq!(t.restarts, 0, "selector does not match");
        let p = pod("Always", json!({"app": "d"}), json!({}));
        k.advance(&p, &mut t, &[crash_rule("n2", Fault::Crash)], later);
        assert_eq!(t.restarts, 0, "another node's rule");

        let never = pod("Never", json!({"app": "d"}), json!({}));
        let mut t = fresh(t0);
        k.advance(&never, &mut t, &[crash_rule("n1", Fault::Oom)], later);
        let s = status(&never, &t, t0);
        assert_eq!(s["phase"], "Failed");
        assert_eq!(
            s["containerStatuses"][0]["state"]["terminated"]["reason"],
            "OOMKilled"
        );
        assert_eq!(
            s["containerStatuses"][0]["state"]["terminated"]["exitCode"],
            137
        );

        let mut t = fresh(t0);
        k.advance(&p, &mut t, &[crash_rule("n1", Fault::Fail)], later);
        assert_eq!(
            status(&p, &t, t0)["phase"],
            "Failed",
            "Fail ignores restartPolicy"
        );
    }

    #[test]
    fn readiness_waits_for_the_first_probe_after_its_initial_delay() {
        let k = kubelet();
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": "test-c-0", "uid": "u1"},
            "spec": {"nodeName": "n1", "containers": [
                {"name": "test", "image": "busybox",
                 "readinessProbe": {"exec": {"command": ["cat", "/tmp/ready"]},
                                    "initialDelaySeconds": 5, "periodSeconds": 5}},
                {"name": "sidecar", "image": "pause"}]}
        }))
        .unwrap();
        let t0 = Instant::now();
        let mut t = fresh(t0);
        t.life = Life::Running {
            since: t0,
            at: "2026-11-24T20:00:00Z".into(),
        };
        k.advance(&p, &mut t, &[], t0 + Duration::from_secs(4));
        let s = status(&p, &t, t0 + Duration::from_secs(4));
        assert_eq!(s["phase"], "Running");
        assert_eq!(s["conditions"][2]["type"], "Ready");
        assert_eq!(s["conditions"][2]["status"], "False");
        assert_eq!(s["containerStatuses"][0]["ready"], false, "probed, not yet");
        assert_eq!(s["containerStatuses"][1]["ready"], true, "no probe");
        let s = status(&p, &t, t0 + Duration::from_secs(5));
        assert_eq!(s["conditions"][2]["status"], "True");
        assert_eq!(
            s["conditions"][2]["lastTransitionTime"],
            "2026-11-24T20:00:05Z"
        );
        assert_eq!(s["conditions"][3]["type"], "ContainersReady");
        assert_eq!(s["conditions"][3]["status"], "True");
        assert_eq!(s["containerStatuses"][0]["ready"], true);
    }

    #[test]
    fn modelled_work_checkpoints_resumes_after_a_crash_and_completes() {
        let k = kubelet();
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let p = pod(
            "OnFailure",
            json!({"app": "d"}),
            json!({"sim.telemesh.io/work": "100s", "sim.telemesh.io/checkpoint-every": "30s"}),
        );
        let mut t = fresh(t0);
        t.run = k.workloads.begin(&p, None);
        let rules = [FaultRule {
            every: Duration::from_secs(45),
            ..crash_rule("n1", Fault::Crash)
        }];
        k.advance(&p, &mut t, &rules, at(45));
        let job = |k: &Kubelet| k.workloads.report().jobs["/Pod/p"].clone();
        assert_eq!(
            job(&k).figures.wasted_seconds,
            15.0,
            "crashed 15 s after the checkpoint at 30 s"
        );
        assert!(t.run.is_none(), "nothing runs during back-off");
        // Back-off 10 s, then the container resumes from 30 s: 70 s left.
        k.advance(&p, &mut t, &[], at(55));
        assert_eq!(
            t.run.as_ref().map(Run::remaining),
            Some(Duration::from_secs(70))
        );
        k.advance(&p, &mut t, &[], at(55 + 69));
        assert_eq!(status(&p, &t, at(124))["phase"], "Running");
        k.advance(&p, &mut t, &[], at(55 + 70));
        assert_eq!(status(&p, &t, at(125))["phase"], "Succeeded");
        let done = job(&k);
        assert!(done.done);
        assert_eq!(done.resumed_seconds, 30.0);
        assert_eq!(done.figures.checkpoints, 1 + 2, "30; then 60 and 90");
        assert_eq!(
            (done.figures.interruptions, done.figures.completions),
            (1, 1)
        );
        assert_eq!(done.figures.ran_seconds, 45.0 + 70.0);
    }

    #[test]
    fn a_deleted_pod_loses_its_work_since_the_last_checkpoint() {
        let k = kubelet();
        let t0 = Instant::now();
        let p = pod(
            "Never",
            json!({}),
            json!({"sim.telemesh.io/work": "100s", "sim.telemesh.io/checkpoint-every": "30s"}),
        );
        let mut t = fresh(t0);
        t.run = k.workloads.begin(&p, None);
        k.advance(&p, &mut t, &[], t0 + Duration::from_secs(65));
        k.interrupt(&mut t, t0 + Duration::from_secs(70));
        k.interrupt(&mut t, t0 + Duration::from_secs(80));
        let report = k.workloads.report();
        assert_eq!(report.total.wasted_seconds, 10.0, "counted once");
        assert_eq!(report.total.interruptions, 1);
        assert_eq!(report.jobs["/Pod/p"].saved_seconds, 60.0);
    }

    #[test]
    fn a_refused_image_fails_to_pull_backs_off_and_is_pulled_again() {
        let k = kubelet();
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let p = pod(
            "Never",
            json!({}),
            json!({container_start::IMAGE_PULL_ANNOTATION: "fail"}),
        );
        let refused = || container_start::blocker_in(&p, &Default::default());
        let mut t = fresh(t0);
        k.wait(&p, &mut t, Some(refused()), t0);
        let waiting = |t: &Tracked, now| status(&p, t, now)["containerStatuses"][0].clone();
        let s = status(&p, &t, t0);
        assert_eq!(s["phase"], "Pending");
        assert_eq!(s["podIP"], "10.244.0.3", "the sandbox exists");
        let c = waiting(&t, t0);
        assert_eq!(c["state"]["waiting"]["reason"], "ErrImagePull");
        assert_eq!((&c["started"], &c["ready"]), (&json!(false), &json!(false)));
        assert_eq!(c["imageID"], "");
        assert!(c.get("containerID").is_none(), "never created");
        // The next pass, inside the 10 s back-off: reported as back-off.
        k.wait(&p, &mut t, None, at(1));
        let c = waiting(&t, at(1));
        assert_eq!(c["state"]["waiting"]["reason"], "ImagePullBackOff");
        assert_eq!(
            c["state"]["waiting"]["message"],
            "Back-off pulling image \"demo\""
        );
        assert!(
            matches!(t.life, Life::Waiting { look_again, attempts: 1, .. } if look_again == at(10))
        );
        // The second attempt fails too: back-off doubles.
        k.wait(&p, &mut t, Some(refused()), at(10));
        assert_eq!(
            waiting(&t, at(10))["state"]["waiting"]["reason"],
            "ErrImagePull"
        );
        assert!(
            matches!(t.life, Life::Waiting { look_again, attempts: 2, .. } if look_again == at(30))
        );
        // Pulled at last: the container starts.
        k.wait(&p, &mut t, Some(None), at(30));
        let s = status(&p, &t, at(30));
        assert_eq!(s["phase"], "Running");
        assert!(s["containerStatuses"][0]["state"]["running"].is_object());
    }

    #[test]
    fn a_missing_volume_leaves_no_sandbox_until_it_appears() {
        let k = kubelet();
        let t0 = Instant::now();
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "uid": "u1", "namespace": "batch"},
            "spec": {"nodeName": "n1", "restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "demo"}],
                     "volumes": [{"name": "token", "secret": {"secretName": "token"}}]}
        }))
        .unwrap();
        let missing = container_start::Objects::from([(
            (container_start::Kind::Secret, "token".to_owned()),
            container_start::Found::Missing,
        )]);
        let mut t = fresh(t0);
        k.wait(
            &p,
            &mut t,
            Some(container_start::blocker_in(&p, &missing)),
            t0,
        );
        let s = status(&p, &t, t0);
        assert_eq!(s["phase"], "Pending");
        assert!(s.get("podIP").is_none() && s.get("podIPs").is_none());
        assert_eq!(s["conditions"][0]["type"], "PodReadyToStartContainers");
        assert_eq!(s["conditions"][0]["status"], "False");
        assert_eq!(s["conditions"][4]["type"], "PodScheduled");
        assert_eq!(s["conditions"][4]["status"], "True");
        let w = &s["containerStatuses"][0]["state"]["waiting"];
        assert_eq!(w["reason"], "ContainerCreating");
        assert!(w.get("message").is_none());
        // Looked at again a second later: still missing, still waiting.
        assert!(
            matches!(t.life, Life::Waiting { look_again, .. } if look_again == t0 + LOOK_AGAIN)
        );
        // The Secret is created: the next look starts the container.
        k.wait(&p, &mut t, Some(None), t0 + LOOK_AGAIN);
        let s = status(&p, &t, t0 + LOOK_AGAIN);
        assert_eq!(s["phase"], "Running");
        assert_eq!(s["podIP"], "10.244.0.3");
        assert_eq!(s["conditions"][0]["status"], "True");
    }

    #[test]
    fn start_faults_keep_new_pods_from_starting_and_each_failure_is_recorded_once() {
        let k = kubelet();
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let rule = |fault| FaultRule {
            every: Duration::ZERO,
            ..crash_rule("n1", fault)
        };
        let p = pod("Always", json!({"app": "d"}), json!({}));
        let sandbox = [rule(Fault::Sandbox)];
        assert_eq!(
            k.start_fault(&pod("Always", json!({"app": "e"}), json!({})), &sandbox),
            None
        );
        assert!(
            k.start_fault(&p, &[crash_rule("n1", Fault::Sandbox)])
                .is_some(),
            "a start fault's rule ignores `every`"
        );
        let look = |rules: &[FaultRule]| Some(Blocker::first(None, k.start_fault(&p, rules)));
        let mut t = fresh(t0);
        let recorded = k.wait(&p, &mut t, look(&sandbox), t0);
        assert_eq!(
            recorded.map(|b| b.event().0),
            Some("FailedCreatePodSandBox")
        );
        let s = status(&p, &t, t0);
        assert_eq!(s["phase"], "Pending");
        assert!(s.get("podIP").is_none(), "no sandbox, no IP");
        assert_eq!(
            s["containerStatuses"][0]["state"]["waiting"]["reason"],
            "ContainerCreating"
        );
        assert_eq!(
            k.wait(&p, &mut t, look(&sandbox), at(1)),
            None,
            "the same: not again"
        );
        // A running pod is not struck by a start fault.
        let mut running = fresh(t0);
        k.advance(&p, &mut running, &sandbox, at(60));
        assert_eq!(running.restarts, 0);
        assert!(matches!(running.life, Life::Running { .. }));

        // The fault changes to pulls: a new Event, and one per failed pull.
        let pull = [rule(Fault::Pull)];
        let recorded = k.wait(&p, &mut t, look(&pull), at(2)).unwrap();
        let (reason, message) = recorded.event();
        assert_eq!(reason, "Failed");
        assert!(
            message.contains("lookup docker.io: i/o timeout"),
            "{message}"
        );
        assert_eq!(
            status(&p, &t, at(2))["containerStatuses"][0]["state"]["waiting"]["reason"],
            "ErrImagePull"
        );
        assert_eq!(k.wait(&p, &mut t, None, at(3)), None, "backing off");
        assert!(
            k.wait(&p, &mut t, look(&pull), at(12)).is_some(),
            "pulled again"
        );
        // The fault is cleared: it starts.
        assert_eq!(k.wait(&p, &mut t, look(&[]), at(40)), None);
        assert_eq!(status(&p, &t, at(40))["phase"], "Running");
    }

    #[test]
    fn run_for_completes_jobs_and_restarts_always_pods() {
        let k = kubelet();
        let t0 = Instant::now();
        let job = pod("Never", json!({}), json!({RUN_FOR_ANNOTATION: "3s"}));
        let mut t = fresh(t0);
        k.advance(&job, &mut t, &[], t0 + Duration::from_secs(2));
        assert_eq!(status(&job, &t, t0)["phase"], "Running");
        k.advance(&job, &mut t, &[], t0 + Duration::from_secs(3));
        let s = status(&job, &t, t0);
        assert_eq!(s["phase"], "Succeeded");
        assert_eq!(
            s["containerStatuses"][0]["state"]["terminated"]["reason"],
            "Completed"
        );
        let always = pod("Always", json!({}), json!({RUN_FOR_ANNOTATION: "3s"}));
        let mut t = fresh(t0);
        k.advance(&always, &mut t, &[], t0 + Duration::from_secs(3));
        assert_eq!(t.restarts, 1);
        assert_eq!(
            status(&always, &t, t0)["containerStatuses"][0]["ready"],
            true
        );
    }
}
