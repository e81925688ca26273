//! The workload model the kubelet stand-ins play, so the work a preemption or an eviction wastes
//! can be measured without containers. A pod annotated `sim.telemesh.io/work: 10m` needs that
//! much running time from scratch; with `sim.telemesh.io/checkpoint-every: 1m` it checkpoints
//! after each minute of running (without it, never). It exits 0 once its work is done.
//!
//! Progress is kept per job across pods and runs, as the job's persistent volume would keep its
//! checkpoint: a ScavengerJob's pods share it (namespace and [`JOB_LABEL`]); other pods share it
//! with their controller's other pods (namespace and owner), or keep it alone. A pod (or a
//! restarted container) resumes from the job's last checkpoint. When a running pod is deleted
//! (preemption, eviction) or its container fails, the work since its last checkpoint is lost:
//! the ledger counts it in seconds and in CPU-seconds (seconds × the pod's CPU request in cores).
//! Parallel pods of one job each run the job's work and share its checkpoint (the furthest one
//! wins): a model of the waste, not of the job's result.
//!
//! At each checkpoint the stand-in touches the pod's checkpoint marker where the kubelet keeps
//! its `emptyDir`
//! ([`checkpoint_file_on_host`](telemesh_core::scavenge::checkpoint_file_on_host) under
//! `<host root>/var/lib/kubelet`) when the pod has the [`CHECKPOINT_VOLUME`] volume and the
//! kubelet was given its node's host root, so agents observe checkpoints as on a real node. The
//! pod's directory goes when the pod does.
//!
//! Figures ([`Report`]) are served as JSON at [`WORKLOADS_PATH`] on sim's address, with the
//! last [`INTERRUPTIONS_KEPT`] interrupted runs one by one (when, which pod on which node, what
//! was lost), to hold a victim choice against the work it really cost.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use parking_lot::Mutex;
use serde::Serialize;
use telemesh_core::scavenge::{CHECKPOINT_VOLUME, DEFAULT_KUBELET_ROOT, JOB_LABEL};

/// Running time a pod's work needs from scratch.
pub const WORK_ANNOTATION: &str = "sim.telemesh.io/work";

/// How often (of running time) a pod checkpoints its work.
pub const CHECKPOINT_EVERY_ANNOTATION: &str = "sim.telemesh.io/checkpoint-every";

/// Where sim serves the [`Report`].
pub const WORKLOADS_PATH: &str = "/sim/workloads";

/// A pod's modelled work, from its annotations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    /// Running time needed from scratch.
    pub work: Duration,
    /// Checkpoint period; `None`: never checkpoints.
    pub checkpoint_every: Option<Duration>,
}

impl Spec {
    /// The model of `pod`, if it is annotated with its work (malformed annotations are logged
    /// and ignored, as the stand-in does with `run-for`).
    pub fn of(pod: &Pod) -> Option<Self> {
        let annotations = pod.annotations();
        let parse = |key: &str| {
            let text = annotations.get(key)?;
            telemesh_runtime::cli::parse_duration(text)
                .inspect_err(|e| {
                    tracing::warn!(pod = %pod.name_any(), annotation = key, error = %e, "ignoring a malformed workload annotation");
                })
                .ok()
        };
        Some(Self {
            work: parse(WORK_ANNOTATION)?,
            checkpoint_every: parse(CHECKPOINT_EVERY_ANNOTATION).filter(|d| !d.is_zero()),
        })
    }
}

/// The job whose progress `pod` shares: `<namespace>/<ScavengerJob>` for scavenger pods,
/// `<namespace>/<owner kind>/<owner name>` for pods with a controller, else
/// `<namespace>/Pod/<name>`.
pub fn job_of(pod: &Pod) -> String {
    let namespace = pod.namespace().unwrap_or_default();
    if let Some(job) = pod.labels().get(JOB_LABEL) {
        return format!("{namespace}/{job}");
    }
    let owner = pod
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true))
        .or_else(|| pod.owner_references().first());
    match owner {
        Some(o) => format!("{namespace}/{}/{}", o.kind, o.name),
        None => format!("{namespace}/Pod/{}", pod.name_any()),
    }
}

/// Where a node whose host root is `host_root` keeps `pod_uid`'s checkpoint marker.
pub fn marker_path(host_root: &Path, pod_uid: &str) -> PathBuf {
    telemesh_core::scavenge::checkpoint_file_on_host(&kubelet_root(host_root), pod_uid)
}

/// The kubelet's root directory under `host_root`.
pub fn kubelet_root(host_root: &Path) -> PathBuf {
    host_root.join(DEFAULT_KUBELET_ROOT.trim_start_matches('/'))
}

fn has_checkpoint_volume(pod: &Pod) -> bool {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .any(|v| v.name == CHECKPOINT_VOLUME && v.empty_dir.is_some())
}

/// One container run of a modelled pod.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// The job whose progress it shares.
    pub job: String,
    spec: Spec,
    /// The job's progress when this run started.
    from: Duration,
    /// Checkpoints this run made.
    checkpoints: u32,
    /// The pod's CPU request, cores.
    cores: f64,
    /// The marker to touch at each checkpoint.
    marker: Option<PathBuf>,
    /// The pod, `namespace/name`, and its node.
    pod: String,
    node: String,
}

impl Run {
    /// Running time until the work is done.
    pub fn remaining(&self) -> Duration {
        self.spec.work.saturating_sub(self.from)
    }

    /// Running time at this run's last checkpoint, having run `ran`.
    fn saved_ran(&self, ran: Duration) -> Duration {
        match self.spec.checkpoint_every {
            Some(every) => every.saturating_mul(self.checkpoints_by(ran)),
            None => Duration::ZERO,
        }
    }

    /// Checkpoints due by `ran`: one per period, none at or after completion.
    fn checkpoints_by(&self, ran: Duration) -> u32 {
        let Some(every) = self.spec.checkpoint_every else {
            return 0;
        };
        let ran = ran.min(self.remaining().saturating_sub(Duration::from_nanos(1)));
        u32::try_from(ran.as_nanos() / every.as_nanos()).unwrap_or(u32::MAX)
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The work is done (exit 0).
    Completed,
    /// Deleted, evicted, or the container failed: the work since the last checkpoint is lost.
    Interrupted,
}

/// Counts over ended runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Figures {
    /// Running time of ended runs, seconds.
    pub ran_seconds: f64,
    /// The same in CPU-seconds (× the pod's CPU request).
    pub ran_cpu_seconds: f64,
    /// Running time lost since the last checkpoint by interrupted runs, seconds.
    pub wasted_seconds: f64,
    /// The same in CPU-seconds: what preemption and eviction cost.
    pub wasted_cpu_seconds: f64,
    /// Checkpoints made.
    pub checkpoints: u64,
    /// Runs interrupted before their work was done.
    pub interruptions: u64,
    /// Runs that finished the work.
    pub completions: u64,
}

impl Figures {
    fn add(&mut self, other: &Self) {
        self.ran_seconds += other.ran_seconds;
        self.ran_cpu_seconds += other.ran_cpu_seconds;
        self.wasted_seconds += other.wasted_seconds;
        self.wasted_cpu_seconds += other.wasted_cpu_seconds;
        self.checkpoints += other.checkpoints;
        self.interruptions += other.interruptions;
        self.completions += other.completions;
    }
}

/// One job's state and figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobFigures {
    /// The work the job needs, seconds (as its latest pod declared it).
    pub work_seconds: f64,
    /// Progress kept by its last checkpoint, seconds.
    pub saved_seconds: f64,
    /// Progress the latest run started from, seconds (non-zero: it resumed).
    pub resumed_seconds: f64,
    /// Whether a run finished the work.
    pub done: bool,
    /// Runs currently going.
    pub running: u32,
    /// Counts over its ended runs.
    #[serde(flatten)]
    pub figures: Figures,
}

/// One interrupted run, as the ledger counted it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Interruption {
    /// When it ended, Unix milliseconds.
    pub at_ms: u64,
    /// The job ([`job_of`]).
    pub job: String,
    /// The pod, `namespace/name`.
    pub pod: String,
    /// Its node.
    pub node: String,
    /// How long the run ran, seconds.
    pub ran_seconds: f64,
    /// Running time lost since its last checkpoint, seconds.
    pub wasted_seconds: f64,
    /// Its CPU request, cores.
    pub cores: f64,
}

/// How many interruptions the ledger keeps ([`Report::interruptions`]).
pub const INTERRUPTIONS_KEPT: usize = 1000;

/// Every job's figures and their totals, as [`WORKLOADS_PATH`] serves them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Sums over every job.
    pub total: Figures,
    /// By job ([`job_of`]).
    pub jobs: BTreeMap<String, JobFigures>,
    /// The last [`INTERRUPTIONS_KEPT`] interrupted runs, oldest first.
    pub interruptions: Vec<Interruption>,
}

/// The cluster's ledger of modelled work, shared by every kubelet stand-in (clones share it).
#[derive(Debug, Clone, Default)]
pub struct Workloads {
    jobs: Arc<Mutex<BTreeMap<String, JobFigures>>>,
    interruptions: Arc<Mutex<std::collections::VecDeque<Interruption>>>,
}

impl Workloads {
    /// Starts a run of `pod` if it is modelled: it resumes from its job's last checkpoint, and
    /// touches its marker under `host_root` (when given and the pod has the marker volume).
    pub fn begin(&self, pod: &Pod, host_root: Option<&Path>) -> Option<Run> {
        let spec = Spec::of(pod)?;
        let job = job_of(pod);
        let mut jobs = self.jobs.lock();
        let entry = jobs.entry(job.clone()).or_default();
        entry.work_seconds = spec.work.as_secs_f64();
        entry.running += 1;
        let from = if entry.done {
            spec.work
        } else {
            Duration::from_secs_f64(entry.saved_seconds).min(spec.work)
        };
        entry.resumed_seconds = from.as_secs_f64();
        let marker = host_root
            .filter(|_| has_checkpoint_volume(pod))
            .zip(pod.uid())
            .map(|(root, uid)| marker_path(root, &uid));
        Some(Run {
            job,
            spec,
            from,
            checkpoints: 0,
            cores: telemesh_core::fit::pod_requests(pod)
                .get("cpu")
                .copied()
                .unwrap_or(0.0),
            marker,
            pod: format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any()),
            node: pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default(),
        })
    }

    /// Makes the checkpoints `run` owes after running `ran`.
    pub fn advance(&self, run: &mut Run, ran: Duration) {
        let due = run.checkpoints_by(ran);
        if due <= run.checkpoints {
            return;
        }
        let made = due - run.checkpoints;
        run.checkpoints = due;
        let progress = run.from + run.saved_ran(ran);
        {
            let mut jobs = self.jobs.lock();
            let entry = jobs.entry(run.job.clone()).or_default();
            entry.saved_seconds = entry.saved_seconds.max(progress.as_secs_f64());
            entry.figures.checkpoints += u64::from(made);
        }
        if let Some(marker) = &run.marker {
            touch(marker, progress);
        }
    }

    /// Ends `run` after running `ran`, the way `end` says.
    pub fn end(&self, mut run: Run, ran: Duration, end: End) {
        self.advance(&mut run, ran);
        let mut jobs = self.jobs.lock();
        let entry = jobs.entry(run.job.clone()).or_default();
        entry.running = entry.running.saturating_sub(1);
        let f = &mut entry.figures;
        f.ran_seconds += ran.as_secs_f64();
        f.ran_cpu_seconds += ran.as_secs_f64() * run.cores;
        match end {
            End::Completed => {
                entry.done = true;
                entry.saved_seconds = entry.work_seconds;
                f.completions += 1;
            }
            End::Interrupted => {
                let lost = ran.saturating_sub(run.saved_ran(ran)).as_secs_f64();
                f.wasted_seconds += lost;
                f.wasted_cpu_seconds += lost * run.cores;
                f.interruptions += 1;
                drop(jobs);
                let mut kept = self.interruptions.lock();
                if kept.len() >= INTERRUPTIONS_KEPT {
                    kept.pop_front();
                }
                kept.push_back(Interruption {
                    at_ms: telemesh_core::gossip::schema::unix_ms(std::time::SystemTime::now()),
                    job: run.job,
                    pod: run.pod,
                    node: run.node,
                    ran_seconds: ran.as_secs_f64(),
                    wasted_seconds: lost,
                    cores: run.cores,
                });
            }
        }
    }

    /// Every job's figures and the totals.
    pub fn report(&self) -> Report {
        let jobs = self.jobs.lock().clone();
        let mut total = Figures::default();
        for job in jobs.values() {
            total.add(&job.figures);
        }
        let interruptions = self.interruptions.lock().iter().cloned().collect();
        Report {
            total,
            jobs,
            interruptions,
        }
    }

    /// Serves [`Workloads::report`] as JSON at `GET` [`WORKLOADS_PATH`].
    pub fn router(&self) -> axum::Router {
        let workloads = self.clone();
        axum::Router::new().route(
            WORKLOADS_PATH,
            axum::routing::get(move || {
                let report = workloads.report();
                async move { axum::Json(report) }
            }),
        )
    }
}

/// Rewrites the marker (its modification time is the signal; the content, the progress in
/// seconds, is for people).
fn touch(marker: &Path, progress: Duration) {
    let written = marker
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(marker, format!("{}\n", progress.as_secs_f64())));
    if let Err(e) = written {
        tracing::warn!(marker = %marker.display(), error = %e, "cannot touch the checkpoint marker");
    }
}

/// Removes what the kubelet kept on the node for `pod_uid` (its `emptyDir` volumes), as the
/// kubelet does once a pod is gone.
pub fn remove_pod_dir(host_root: &Path, pod_uid: &str) {
    let dir = kubelet_root(host_root).join("pods").join(pod_uid);
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot remove a gone pod's directory")
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn pod(name: &str, labels: serde_json::Value, annotations: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "batch", "uid": format!("uid-{name}"),
                         "labels": labels, "annotations": annotations},
            "spec": {"containers": [{"name": "main", "image": "demo",
                "resources": {"requests": {"cpu": "500m"}}}],
                "volumes": [{"name": CHECKPOINT_VOLUME, "emptyDir": {}}]}
        }))
        .unwrap()
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn scavenger(name: &str) -> Pod {
        pod(
            name,
            json!({JOB_LABEL: "render"}),
            json!({WORK_ANNOTATION: "100s", CHECKPOINT_EVERY_ANNOTATION: "30s"}),
        )
    }

    #[test]
    fn jobs_are_the_scavenger_job_the_owner_or_the_pod() {
        assert_eq!(job_of(&scavenger("a")), "batch/render");
        let mut owned = pod("b", json!({}), json!({}));
        owned.metadata.owner_references = Some(vec![
            serde_json::from_value(json!({"apiVersion": "batch/v1", "kind": "Job",
                "name": "j", "uid": "x", "controller": true}))
            .unwrap(),
        ]);
        assert_eq!(job_of(&owned), "batch/Job/j");
        assert_eq!(job_of(&pod("c", json!({}), json!({}))), "batch/Pod/c");
        assert_eq!(Spec::of(&pod("c", json!({}), json!({}))), None);
        let bad = pod("d", json!({}), json!({WORK_ANNOTATION: "soon"}));
        assert_eq!(Spec::of(&bad), None, "malformed work is ignored");
    }

    #[test]
    fn an_interrupted_job_resumes_from_its_last_checkpoint_and_counts_the_loss() {
        let w = Workloads::default();
        let mut run = w.begin(&scavenger("a"), None).unwrap();
        assert_eq!(run.remaining(), secs(100));
        w.advance(&mut run, secs(29));
        assert_eq!(w.report().jobs["batch/render"].figures.checkpoints, 0);
        w.advance(&mut run, secs(65));
        w.end(run, secs(70), End::Interrupted);
        let r = w.report();
        let job = &r.jobs["batch/render"];
        assert_eq!(job.saved_seconds, 60.0);
        assert_eq!(job.figures.checkpoints, 2);
        assert_eq!(job.figures.wasted_seconds, 10.0);
        assert_eq!(job.figures.wasted_cpu_seconds, 5.0, "10 s × 0.5 cores");
        assert_eq!(job.figures.interruptions, 1);
        assert_eq!(job.running, 0);
        let [ended] = r.interruptions.as_slice() else {
            panic!("one interruption: {:?}", r.interruptions)
        };
        assert_eq!(
            (ended.job.as_str(), ended.pod.as_str(), ended.node.as_str()),
            ("batch/render", "batch/a", "")
        );
        assert_eq!(
            (ended.ran_seconds, ended.wasted_seconds, ended.cores),
            (70.0, 10.0, 0.5)
        );
        // The next pod resumes at 60 s and needs 40 s more: one checkpoint (at 90) on the way.
        let mut run = w.begin(&scavenger("b"), None).unwrap();
        assert_eq!(run.remaining(), secs(40));
        assert_eq!(w.report().jobs["batch/render"].resumed_seconds, 60.0);
        w.advance(&mut run, secs(39));
        w.end(run, secs(40), End::Completed);
        let r = w.report();
        let job = &r.jobs["batch/render"];
        assert!(job.done);
        assert_eq!(job.saved_seconds, 100.0);
        assert_eq!(job.figures.checkpoints, 3);
        assert_eq!(job.figures.completions, 1);
        assert_eq!(r.total.ran_seconds, 110.0);
        assert_eq!(r.total.ran_cpu_seconds, 55.0);
        assert_eq!(r.total.wasted_cpu_seconds, 5.0);
        // A pod of a finished job has nothing left to do.
        let run = w.begin(&scavenger("c"), None).unwrap();
        assert_eq!(run.remaining(), Duration::ZERO);
    }

    #[test]
    fn no_checkpoint_at_completion_and_none_without_a_period() {
        let w = Workloads::default();
        let exact = pod(
            "e",
            json!({}),
            json!({WORK_ANNOTATION: "60s", CHECKPOINT_EVERY_ANNOTATION: "30s"}),
        );
        let mut run = w.begin(&exact, None).unwrap();
        w.advance(&mut run, secs(60));
        assert_eq!(
            run.checkpoints, 1,
            "at 30 s; the end at 60 s is no checkpoint"
        );
        let never = pod("n", json!({}), json!({WORK_ANNOTATION: "60s"}));
        let mut run = w.begin(&never, None).unwrap();
        w.advance(&mut run, secs(50));
        w.end(run, secs(50), End::Interrupted);
        let r = w.report();
        assert_eq!(r.jobs["batch/Pod/n"].figures.wasted_seconds, 50.0);
        assert_eq!(r.jobs["batch/Pod/n"].figures.checkpoints, 0);
        let value = serde_json::to_value(&r).unwrap();
        assert_eq!(value["total"]["wastedCpuSeconds"], 25.0);
        assert_eq!(value["jobs"]["batch/Pod/n"]["wastedSeconds"], 50.0);
        assert_eq!(value["jobs"]["batch/Pod/e"]["running"], 1);
    }

    #[test]
    fn checkpoints_touch_the_marker_where_the_kubelet_keeps_empty_dirs() {
        let root = tempfile::tempdir().unwrap();
        let w = Workloads::default();
        let mut run = w.begin(&scavenger("a"), Some(root.path())).unwrap();
        let marker = root.path().join(
            "var/lib/kubelet/pods/uid-a/volumes/kubernetes.io~empty-dir/telemesh-checkpoint/checkpoint",
        );
        assert_eq!(run.marker.as_deref(), Some(marker.as_path()));
        w.advance(&mut run, secs(10));
        assert!(!marker.exists(), "no checkpoint yet");
        w.advance(&mut run, secs(31));
        assert_eq!(std::fs::read_to_string(&marker).unwrap(), "30\n");
        remove_pod_dir(root.path(), "uid-a");
        assert!(!root.path().join("var/lib/kubelet/pods/uid-a").exists());
        // Without the volume, no marker.
        let mut bare = scavenger("b");
        bare.spec.as_mut().unwrap().volumes = None;
        assert_eq!(w.begin(&bare, Some(root.path())).unwrap().marker, None);
    }
}
