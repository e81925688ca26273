//! ScavengerJobs end to end: sim with its kubelets and controllers, an agent per node and the
//! real telemesh-coordinator running the ScavengerJob controller on its leader.
//!
//! - ScavengerJobs fill idle nodes up to the use threshold and no further; an ordinary
//!   Deployment scaling up makes the real kube-scheduler preempt scavengers, which go
//!   Interrupted, and come back first (ahead of a job that never ran) when room returns.
//!   Skipped, saying so, when the kube-scheduler binary is absent. The same scenario runs on a
//!   real control plane (kube-apiserver, kube-controller-manager and kube-scheduler v1.36),
//!   where preempted pods are deleted gracefully; skipped when its binaries are absent.
//! - A scavenger whose pod fails on its own goes Failed; one whose PVC and ConfigMap are missing
//!   goes Failed naming both; one no node can take is given up after the unschedulable timeout
//!   and waits again, not counted as interrupted (sim's scheduler stand-in places the pods).
//! - A run whose pods are placed but cannot start is given up after the start timeout: for good
//!   when the kubelet's reason cannot clear by itself (an image name that does not parse), its
//!   room then going to the job waiting behind it; else the job waits for another turn (an image
//!   the registry refuses, a Secret volume that is missing with the Secret check off) and runs
//!   once the cause is gone, while a running run is never given up. The same runs on a real
//!   control plane; sim's kubelet stand-ins play the pods that cannot start.
//! - Only the replica holding the leader Lease runs the controller; when it dies, its successor
//!   carries on from the ScavengerJobs' status (an interruption meanwhile counted once).
//! - The CRD's schema refuses what it promises to refuse, and the shipped and documented
//!   examples are valid.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};
use telemesh_core::scavenge::JOB_LABEL;
use telemesh_core::scavenge::crd::{
    CRD_YAML, PRIORITY_CLASS_YAML, Phase, ScavengerJob, ScavengerJobStatus,
};
use telemesh_sim::cluster::kubelet::{Fault, FaultRule};
use telemesh_tests::cluster::{ClusterParts, create_deployment_with, live_pods};
use telemesh_tests::mesh::{Mesh, MeshEnv, log_field};
use telemesh_tests::real::RealEnv;
use telemesh_tests::upstream::{KUBE_SCHEDULER, KubeScheduler};
use telemesh_tests::{SimEnv, eventually};

const NS: &str = "batch";
/// Three sim nodes of 8 CPUs: 24 in all.
const NODES: [&str; 3] = ["sim-node-0", "sim-node-1", "sim-node-2"];
/// Bounds a broken run; not a timing goal.
const WAIT: Duration = Duration::from_secs(90);
const COORDINATOR_ARGS: [&str; 3] = [
    "--leader-lease-duration=3s",
    "--scavenger-admission-interval=200ms",
    "--scavenger-threshold=0.7",
];

/// sim with kubelets and controllers, the ScavengerJob CRD and PriorityClass, namespace
/// [`NS`], an agent per node and one coordinator giving up unschedulable runs after
/// `unschedulable_timeout` (e.g. `60s`).
async fn start(unschedulable_timeout: &str) -> (SimEnv, ClusterParts, Mesh, Client) {
    start_replicas(unschedulable_timeout, 1).await
}

/// [`start`] with `replicas` coordinators.
async fn start_replicas(
    unschedulable_timeout: &str,
    replicas: usize,
) -> (SimEnv, ClusterParts, Mesh, Client) {
    let timeout = format!("--scavenger-unschedulable-timeout={unschedulable_timeout}");
    start_with(&[&timeout], replicas).await
}

/// [`start`] with `replicas` coordinators given `flags` besides [`COORDINATOR_ARGS`].
async fn start_with(flags: &[&str], replicas: usize) -> (SimEnv, ClusterParts, Mesh, Client) {
    telemesh_runtime::telemetry::init(telemesh_runtime::cli::LogFormat::Text, "warn");
    let env = SimEnv::start(NODES.len()).await;
    let parts = ClusterParts::start(&env, NODES.len()).await;
    let client = env.client().await;
    install(&client).await;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let mesh = start_mesh(&env, flags, replicas).await;
    (env, parts, mesh, client)
}

/// [`start`] on a real control plane (its own Job, ReplicaSet and Deployment controllers and
/// garbage collector; pods deleted gracefully): None when its binaries are absent (`test` is
/// then reported skipped).
async fn start_real(
    test: &str,
    unschedulable_timeout: &str,
    replicas: usize,
) -> Option<(RealEnv, Mesh, Client)> {
    let timeout = format!("--scavenger-unschedulable-timeout={unschedulable_timeout}");
    start_real_with(test, &[&timeout], replicas).await
}

/// [`start_real`] with coordinator `flags` besides [`COORDINATOR_ARGS`].
async fn start_real_with(
    test: &str,
    flags: &[&str],
    replicas: usize,
) -> Option<(RealEnv, Mesh, Client)> {
    let env = RealEnv::start(test, NODES.len()).await?;
    // After the start: kube-apiserver's readiness polling logs failures meanwhile.
    telemesh_runtime::telemetry::init(telemesh_runtime::cli::LogFormat::Text, "warn");
    let client = env.client().await;
    install(&client).await;
    env.create_namespace(NS).await;
    let mesh = start_mesh(&env, flags, replicas).await;
    Some((env, mesh, client))
}

/// Installs the ScavengerJob CRD and the scavengers' PriorityClass, and returns once the CRD
/// is served (a real API server takes a moment to establish it; the controller would
/// otherwise look again only 30 s later).
async fn install(client: &Client) {
    let crd: CustomResourceDefinition = serde_yaml_ng::from_str(CRD_YAML).unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    let class: PriorityClass = serde_yaml_ng::from_str(PRIORITY_CLASS_YAML).unwrap();
    Api::<PriorityClass>::all(client.clone())
        .create(&PostParams::default(), &class)
        .await
        .unwrap();
    let sjs = Api::<ScavengerJob>::all(client.clone());
    eventually("the ScavengerJob CRD served", WAIT, || {
        let sjs = sjs.clone();
        async move { sjs.list(&ListParams::default()).await.ok().map(|_| ()) }
    })
    .await;
}

/// An agent per node and `replicas` coordinators against `env`, given [`COORDINATOR_ARGS`] and
/// `flags`.
async fn start_mesh(env: &impl MeshEnv, flags: &[&str], replicas: usize) -> Mesh {
    let nodes: Vec<(&str, &str)> = NODES.iter().map(|n| (*n, "node_metric 1\n")).collect();
    let mut args = COORDINATOR_ARGS.to_vec();
    args.extend_from_slice(flags);
    let mesh = Mesh::start_with(env, &nodes, &[], &args, replicas).await;
    // Not a test of pressure eviction (agent/tests/scavengers.rs is): no agent evicts a scavenger.
    mesh.calm_pressure();
    mesh
}

/// A ScavengerJob of one pod requesting `cpu`, running for `run_for` in sim, with `extra`
/// merged into its spec.
async fn scavenger(client: &Client, name: &str, cpu: &str, run_for: &str, extra: Value) {
    let mut spec = json!({
        "image": "registry.example/work:1",
        "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}},
        "checkpointInterval": "30s",
        "podMetadata": {"annotations": {"sim.telemesh.io/run-for": run_for}}
    });
    for (k, v) in extra.as_object().into_iter().flatten() {
        spec[k] = v.clone();
    }
    let sj: ScavengerJob = serde_json::from_value(json!({
        "apiVersion": "telemesh.io/v1alpha1", "kind": "ScavengerJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec
    }))
    .unwrap();
    Api::<ScavengerJob>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &sj)
        .await
        .unwrap_or_else(|e| panic!("creating ScavengerJob {name}: {e}"));
}

/// Every ScavengerJob's status, by name.
async fn statuses(client: &Client) -> BTreeMap<String, ScavengerJobStatus> {
    Api::<ScavengerJob>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|j| (j.name_any(), j.status.unwrap_or_default()))
        .collect()
}

/// Names of the ScavengerJobs in `phase`.
fn in_phase(all: &BTreeMap<String, ScavengerJobStatus>, phase: Phase) -> Vec<String> {
    all.iter()
        .filter(|(_, s)| s.phase == phase)
        .map(|(n, _)| n.clone())
        .collect()
}

/// Waits until ScavengerJob `name` satisfies `pred`; returns its status.
async fn wait_for(
    client: &Client,
    name: &str,
    what: &str,
    pred: impl Fn(&ScavengerJobStatus) -> bool,
) -> ScavengerJobStatus {
    let api = Api::<ScavengerJob>::namespaced(client.clone(), NS);
    eventually(&format!("ScavengerJob {name} {what}"), WAIT, || {
        let api = api.clone();
        let pred = &pred;
        async move {
            let s = api.get(name).await.ok()?.status?;
            pred(&s).then_some(s)
        }
    })
    .await
}

/// Running pods of ScavengerJob `name`, by name → node.
async fn scavenger_pods(client: &Client, name: &str) -> BTreeMap<String, String> {
    Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client.clone(), NS)
        .list(&ListParams::default().labels(&format!("{JOB_LABEL}={name}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| {
            p.metadata.deletion_timestamp.is_none()
                && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        })
        .map(|p| {
            let node = p.spec.and_then(|s| s.node_name).unwrap_or_default();
            (p.metadata.name.unwrap_or_default(), node)
        })
        .collect()
}

/// The note of an Event with `reason` on each ScavengerJob, by name.
async fn events(client: &Client, reason: &str) -> BTreeMap<String, String> {
    Api::<k8s_openapi::api::events::v1::Event>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter_map(|e| Some((e.regarding?.name?, e.note.unwrap_or_default())))
        .collect()
}

// Interrupted jobs may start again while the preemptors still hold the room: a long
// unschedulable timeout (60s) keeps such a run waiting for it instead of sending it back to
// the queue.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scavengers_fill_to_the_threshold_yield_to_others_and_come_back_first() {
    let Some(binary) =
        KUBE_SCHEDULER.find("scavengers_fill_to_the_threshold_yield_to_others_and_come_back_first")
    else {
        return;
    };
    let (env, _parts, mesh, client) = start("60s").await;
    let _scheduler = KubeScheduler::start(&binary, &env, &mesh.coordinators[0].url_prefix(), true);
    fill_yield_and_come_back(&client, &mesh).await;
}

/// [`scavengers_fill_to_the_threshold_yield_to_others_and_come_back_first`] on a real control
/// plane with its kube-scheduler (v1.36): victims are marked `DisruptionTarget` and deleted
/// gracefully, stay Terminating until their kubelet reports the end, and keep the Job
/// controller's `batch.kubernetes.io/job-tracking` finalizer until it has counted them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scavengers_fill_yield_and_come_back_first_on_a_real_control_plane() {
    let Some((mut env, mesh, client)) = start_real(
        "scavengers_fill_yield_and_come_back_first_on_a_real_control_plane",
        "60s",
        1,
    )
    .await
    else {
        return;
    };
    env.start_scheduler(&mesh.coordinators[0].url_prefix(), true);
    let seen = Seen::watch(&client);
    let interrupted = fill_yield_and_come_back(&client, &mesh).await;
    // The scenario went through graceful deletion: each victim (its first run's pod) was seen
    // marked by the scheduler, Terminating and held by the Job controller's finalizer.
    let seen = seen.pods.lock().clone();
    for name in &interrupted {
        let (pod, how) = seen
            .iter()
            .find(|(pod, _)| pod.starts_with(&format!("{name}-1-")))
            .unwrap_or_else(|| panic!("no pod of {name}'s first run seen: {seen:?}"));
        assert!(
            how.terminating && how.disruption_target && how.job_tracking,
            "{pod}: {how:?}"
        );
    }
}

/// How a watch saw one scavenger pod, at any time of its life.
#[derive(Debug, Clone, Default)]
struct PodSeen {
    /// `deletionTimestamp` set (Terminating).
    terminating: bool,
    /// The `DisruptionTarget` condition True.
    disruption_target: bool,
    /// The Job controller's `batch.kubernetes.io/job-tracking` finalizer, while Terminating.
    job_tracking: bool,
}

/// Every scavenger pod of [`NS`] a watch has seen, by name; the watch ends on drop.
struct Seen {
    pods: std::sync::Arc<parking_lot::Mutex<BTreeMap<String, PodSeen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Seen {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Seen {
    fn watch(client: &Client) -> Self {
        use futures::StreamExt as _;
        use kube::runtime::{WatchStreamExt as _, watcher};
        let pods = std::sync::Arc::new(parking_lot::Mutex::new(BTreeMap::new()));
        let api = Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client.clone(), NS);
        let stream = watcher(api, watcher::Config::default().labels(JOB_LABEL)).touched_objects();
        let record = pods.clone();
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                let Ok(pod) = event else { continue };
                let mut all = record.lock();
                let seen: &mut PodSeen = all.entry(pod.name_any()).or_default();
                let terminating = pod.metadata.deletion_timestamp.is_some();
                seen.terminating |= terminating;
                seen.job_tracking |= terminating
                    && pod
                        .finalizers()
                        .iter()
                        .any(|f| f == "batch.kubernetes.io/job-tracking");
                seen.disruption_target |= pod
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c.type_ == "DisruptionTarget" && c.status == "True")
                    });
            }
        });
        Self { pods, task }
    }
}

/// Six ScavengerJobs fill the cluster to the threshold; a Deployment scaling up makes
/// kube-scheduler preempt some (the extender ranking the victims), which go Interrupted once
/// each, their Job deleted once; when the Deployment scales down they run again, ahead of the
/// one that never ran; the leader's metrics count it all.
/// Returns the ScavengerJobs interrupted.
async fn fill_yield_and_come_back(client: &Client, mesh: &Mesh) -> Vec<String> {
    let client = client.clone();
    // Six jobs of 3 CPUs on 24: five fit under 70 % (15/24 = 62.5 %), a sixth would make 75 %.
    let names: Vec<String> = (0..6).map(|i| format!("sj-{i}")).collect();
    for name in &names {
        scavenger(&client, name, "3", "1h", json!({})).await;
    }
    let first_five = &names[..5];
    for name in first_five {
        wait_for(&client, name, "Running with its pod", |s| {
            s.phase == Phase::Running && !s.pods.is_empty()
        })
        .await;
    }
    let last = wait_for(&client, "sj-5", "waiting for room", |s| {
        s.message.contains("over the 70% threshold")
    })
    .await;
    assert_eq!(last.phase, Phase::Pending, "{last:?}");
    assert_eq!(
        last.message,
        "waiting for room: cluster use would be 75% with this job, over the 70% threshold"
    );
    let all = statuses(&client).await;
    assert_eq!(in_phase(&all, Phase::Running), first_five, "{all:?}");
    for name in first_five {
        eventually(&format!("{name}'s pod running"), WAIT, || async {
            (scavenger_pods(&client, name).await.len() == 1).then_some(())
        })
        .await;
    }

    // Three ordinary pods of 3 CPUs: at most one finds room (the scavengers leave 9 CPUs, but
    // spread over the nodes), the others need preemption, which only scavengers can suffer.
    create_deployment_with(
        &client,
        NS,
        "web",
        3,
        json!({"resources": {"requests": {"cpu": "3", "memory": "64Mi"}}}),
    )
    .await;
    let running = |pods: &BTreeMap<String, String>| pods.values().filter(|n| !n.is_empty()).count();
    eventually("web's three pods placed", WAIT, || async {
        (running(&live_pods(&client, NS, "web").await) == 3).then_some(())
    })
    .await;
    // Settled: each of the five either still runs its pod or was interrupted (a victim's
    // ScavengerJob may already be waiting again, so the count tells, not the phase).
    let all = eventually("the victims' ScavengerJobs interrupted", WAIT, || async {
        let all = statuses(&client).await;
        for name in first_five {
            let s = &all[name];
            let runs = s.phase == Phase::Running && scavenger_pods(&client, name).await.len() == 1;
            if s.interrupted_count == 0 && !runs {
                return None;
            }
        }
        Some(all)
    })
    .await;
    let interrupted: Vec<String> = all
        .iter()
        .filter(|(_, s)| s.interrupted_count > 0)
        .map(|(n, _)| n.clone())
        .collect();
    assert!(!interrupted.is_empty(), "web needed room: {all:?}");
    for name in &interrupted {
        let s = &all[name];
        assert_eq!(s.interrupted_count, 1, "{name}: {s:?}");
        assert_eq!(s.interrupted_timestamps.len(), 1, "{name}: {s:?}");
        assert!(
            first_five.contains(name),
            "only running jobs are interrupted"
        );
    }
    assert_ne!(
        all["sj-5"].phase,
        Phase::Running,
        "no room was made for sj-5"
    );
    let notes = eventually("an Interrupted Event on each victim", WAIT, || async {
        let notes = events(&client, "Interrupted").await;
        interrupted
            .iter()
            .all(|n| notes.contains_key(n))
            .then_some(notes)
    })
    .await;
    for name in &interrupted {
        let note = &notes[name];
        assert!(
            note.contains("was removed before it finished") || note.contains("was preempted"),
            "{name}: {note}"
        );
    }

    // Room returns: the interrupted jobs start again before sj-5, which never ran.
    Api::<Deployment>::namespaced(client.clone(), NS)
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 0}})),
        )
        .await
        .unwrap();
    for name in &interrupted {
        let s = wait_for(&client, name, "running again", |s| {
            s.phase == Phase::Running && s.running_timestamps.len() == 2
        })
        .await;
        assert_eq!(s.interrupted_count, 1);
    }
    let all = statuses(&client).await;
    let back = interrupted.len();
    assert_eq!(in_phase(&all, Phase::Running).len(), 5, "{all:?}");
    // Five are running again at 62.5 %: sj-5, which never ran, still waits for room.
    let s = wait_for(&client, "sj-5", "still waiting for room", |s| {
        s.message.contains("over the 70% threshold")
    })
    .await;
    assert_eq!(s.phase, Phase::Pending);
    assert!(s.running_timestamps.is_empty());

    // Each interrupted run's Job was deleted once, however long its pods took to go (on a
    // real API server they stay Terminating, then held by the Job controller's finalizer).
    let mut deleted: BTreeMap<String, usize> = BTreeMap::new();
    for line in mesh.coordinators[0].process.output() {
        if let Some(job) = log_field(&line, "deleted the Job", "job") {
            *deleted.entry(job).or_default() += 1;
        }
    }
    for name in &interrupted {
        assert_eq!(deleted.get(&format!("{name}-1")), Some(&1), "{deleted:?}");
    }
    assert!(deleted.values().all(|n| *n == 1), "{deleted:?}");

    // The leader's /metrics count what happened.
    let metrics = mesh.coordinators[0].metrics().await;
    assert!(
        metrics.contains(&format!(
            "telemesh_coordinator_scavengers_interruptions_total {back}"
        )),
        "{metrics}"
    );
    assert!(metrics.contains("telemesh_coordinator_scavengers_jobs{phase=\"Running\"} 5"));
    assert!(metrics.contains("telemesh_coordinator_scavengers_threshold_ratio 0.7"));
    // Five runs of 3 CPUs on 24, nothing else: 62.5 % requested.
    assert!(
        metrics.contains("telemesh_coordinator_scavengers_cluster_use_ratio 0.625"),
        "{metrics}"
    );
    // The waste estimate: what each interrupted job recorded, summed.
    let recorded: f64 = statuses(&client)
        .await
        .values()
        .map(|s| s.wasted_cpu_seconds)
        .sum();
    let counted: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("telemesh_coordinator_scavengers_wasted_cpu_seconds_total "))
        .unwrap_or_else(|| panic!("no waste metric: {metrics}"))
        .parse()
        .unwrap();
    assert!(recorded > 0.0, "work was lost at the interruptions");
    assert!((counted - recorded).abs() < 1e-6, "{counted} vs {recorded}");
    interrupted
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_scavenger_fails_a_missing_pvc_is_named_and_an_unplaceable_one_waits_again() {
    let (env, parts, mesh, client) = start("2s").await;
    parts
        .start_scheduler(&env, &mesh.coordinators[0].url_prefix())
        .await;

    // Its pod fails on its own (sim's kubelet fault rule), not by preemption.
    parts.set_faults(
        NODES
            .iter()
            .map(|node| FaultRule {
                node: (*node).to_owned(),
                selector: BTreeMap::from([(JOB_LABEL.to_owned(), "broken".to_owned())]),
                fault: Fault::Fail,
                every: Duration::from_millis(300),
            })
            .collect(),
    );
    scavenger(&client, "broken", "100m", "1h", json!({})).await;
    let s = wait_for(&client, "broken", "Failed", |s| s.phase == Phase::Failed).await;
    assert!(s.message.starts_with("pod broken-1-"), "{s:?}");
    assert!(s.message.contains("failed"), "{s:?}");
    assert_eq!(s.interrupted_count, 0);
    assert!(s.finished_timestamp.is_some());
    assert!(
        s.conditions
            .iter()
            .any(|c| c.type_ == "Failed" && c.status == "True")
    );

    // A PVC and a ConfigMap that do not exist: Failed before any Job, naming both.
    scavenger(
        &client,
        "orphan",
        "100m",
        "1h",
        json!({"volumes": [
            {"name": "work", "mountPath": "/work", "persistentVolumeClaim": {"claimName": "nowhere"}},
            {"name": "conf", "mountPath": "/conf", "configMap": {"name": "absent"}}
        ]}),
    )
    .await;
    let s = wait_for(&client, "orphan", "Failed", |s| s.phase == Phase::Failed).await;
    assert!(
        s.message
            .contains("PersistentVolumeClaim nowhere, ConfigMap absent"),
        "{s:?}"
    );
    assert!(s.running_timestamps.is_empty(), "it never ran");
    let jobs = Api::<k8s_openapi::api::batch::v1::Job>::namespaced(client.clone(), NS)
        .list(&ListParams::default().labels(&format!("{JOB_LABEL}=orphan")))
        .await
        .unwrap();
    assert!(jobs.items.is_empty());

    // 9 CPUs in one pod: admitted (9 of 24 is under 70 %) but no node of 8 can take it. After
    // the timeout its Job is removed and it waits for another turn, not counted as interrupted.
    scavenger(&client, "giant", "9", "1h", json!({})).await;
    let notes = eventually("an Unschedulable Event on giant", WAIT, || async {
        events(&client, "Unschedulable").await.remove("giant")
    })
    .await;
    assert!(notes.contains("0/3 nodes are available"), "{notes}");
    let s = wait_for(&client, "giant", "given another turn", |s| {
        s.running_timestamps.len() >= 2
    })
    .await;
    assert_eq!(s.interrupted_count, 0, "{s:?}");

    // And one that works, for contrast: it runs to the end.
    scavenger(&client, "fine", "100m", "1s", json!({"parallelism": 2})).await;
    let s = wait_for(&client, "fine", "Succeeded", |s| {
        s.phase == Phase::Succeeded
    })
    .await;
    assert_eq!(s.running_timestamps.len(), 1);

    // Each transition is an Event on its ScavengerJob.
    let events = Api::<k8s_openapi::api::events::v1::Event>::namespaced(client.clone(), NS);
    eventually("the Failed and Succeeded events", WAIT, || async {
        let reasons: Vec<(String, String)> = events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|e| Some((e.regarding?.name?, e.reason.unwrap_or_default())))
            .collect();
        let has = |n: &str, r: &str| reasons.iter().any(|(a, b)| a == n && b == r);
        (has("broken", "Started")
            && has("broken", "Failed")
            && has("orphan", "Failed")
            && has("fine", "Succeeded"))
        .then_some(())
    })
    .await;
}

/// The start-timeout tests' coordinator flags: runs given up 2 s after a pod was placed without
/// starting, Secrets not checked before a start (the chart's default), the unschedulable timeout
/// out of the way.
const START_FLAGS: [&str; 3] = [
    "--scavenger-start-timeout=2s",
    "--scavenger-check-secrets=false",
    "--scavenger-unschedulable-timeout=60s",
];
const START_TIMEOUT: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_whose_pods_cannot_start_are_given_up_after_the_start_timeout() {
    let (env, parts, mesh, client) = start_with(&START_FLAGS, 1).await;
    parts
        .start_scheduler(&env, &mesh.coordinators[0].url_prefix())
        .await;
    cannot_start(&client).await;
}

/// [`runs_whose_pods_cannot_start_are_given_up_after_the_start_timeout`] on a real control
/// plane: kube-apiserver binds the pods, kube-controller-manager's Job controller and garbage
/// collector make and remove them, and the kubelet stand-ins finish the given-up pods, which never
/// started (`ContainerStatusUnknown`), as a kubelet does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_whose_pods_cannot_start_are_given_up_on_a_real_control_plane() {
    let Some((mut env, mesh, client)) = start_real_with(
        "runs_whose_pods_cannot_start_are_given_up_on_a_real_control_plane",
        &START_FLAGS,
        1,
    )
    .await
    else {
        return;
    };
    env.start_scheduler(&mesh.coordinators[0].url_prefix(), true);
    cannot_start(&client).await;
}

/// Pods placed that cannot start, as the kubelet (stand-in) reports them, under a 2 s start
/// timeout:
/// - `misspelt`'s image name does not parse (InvalidImageName): Failed, with the kubelet's word in
///   its message and a Failed Event; its 10 CPUs go to `next`, which waited behind it (10 + 8 of
///   24 CPUs would be 75 %, over the 70 % threshold);
/// - `unpullable`'s image is refused by the registry (ErrImagePull, ImagePullBackOff) and
///   `secretless` mounts a Secret that does not exist (ContainerCreating; not checked before the
///   start): each run is given up with a NotStarted Event and the job gets another turn, never
///   Failed nor counted as interrupted; once the Secret exists, `secretless` runs;
/// - `next`, running all along, is never given up.
async fn cannot_start(client: &Client) {
    let client = client.clone();
    scavenger(
        &client,
        "misspelt",
        "5",
        "1h",
        json!({"image": "registry.example/Work:1", "parallelism": 2}),
    )
    .await;
    // Behind misspelt in the queue (younger, or as old and later by name).
    scavenger(&client, "next", "4", "1h", json!({"parallelism": 2})).await;
    let failed = wait_for(&client, "misspelt", "Failed", |s| s.phase == Phase::Failed).await;
    for part in [
        "has not started",
        "InvalidImageName",
        "repository name (Work) must be lowercase",
        "this does not clear by itself: fix it, then create the ScavengerJob anew",
    ] {
        assert!(failed.message.contains(part), "{part}: {failed:?}");
    }
    assert_eq!(
        (failed.running_timestamps.len(), failed.interrupted_count),
        (1, 0),
        "{failed:?}"
    );
    assert!(
        failed
            .conditions
            .iter()
            .any(|c| c.type_ == "Failed" && c.status == "True")
    );
    let note = eventually("a Failed Event on misspelt", WAIT, || async {
        events(&client, "Failed").await.remove("misspelt")
    })
    .await;
    assert!(note.contains("InvalidImageName"), "{note}");
    let jobs = Api::<k8s_openapi::api::batch::v1::Job>::namespaced(client.clone(), NS);
    eventually("misspelt's Job deleted", WAIT, || async {
        let listed = jobs
            .list(&ListParams::default().labels(&format!("{JOB_LABEL}=misspelt")))
            .await
            .ok()?;
        listed.items.is_empty().then_some(())
    })
    .await;
    // The room it held goes to next, which could not start beside it.
    let next = wait_for(&client, "next", "Running", |s| s.phase == Phase::Running).await;
    let given_up = failed.finished_timestamp.clone().unwrap();
    assert!(
        next.running_timestamps[0].0 >= given_up.0,
        "next started at {:?}, before misspelt gave its room up at {:?}",
        next.running_timestamps[0],
        given_up
    );
    eventually("next's two pods running", WAIT, || async {
        (scavenger_pods(&client, "next").await.len() == 2).then_some(())
    })
    .await;

    // An image the registry refuses: given up, another turn, and again.
    scavenger(
        &client,
        "unpullable",
        "100m",
        "1h",
        json!({"podMetadata": {"annotations": {
            "sim.telemesh.io/image-pull": "fail", "sim.telemesh.io/run-for": "1h"
        }}}),
    )
    .await;
    let note = eventually("a NotStarted Event on unpullable", WAIT, || async {
        events(&client, "NotStarted").await.remove("unpullable")
    })
    .await;
    assert!(
        note.contains("ImagePullBackOff") || note.contains("ErrImagePull"),
        "{note}"
    );
    assert!(note.contains("waiting for another turn"), "{note}");
    let s = wait_for(&client, "unpullable", "given another turn", |s| {
        s.running_timestamps.len() >= 2
    })
    .await;
    assert_eq!(s.interrupted_count, 0, "{s:?}");
    assert_ne!(s.phase, Phase::Failed, "{s:?}");
    Api::<ScavengerJob>::namespaced(client.clone(), NS)
        .delete("unpullable", &Default::default())
        .await
        .unwrap();

    // A Secret volume whose Secret does not exist (not checked before the start): the pods
    // wait in ContainerCreating, which may clear by itself; it does once the Secret exists.
    scavenger(
        &client,
        "secretless",
        "100m",
        "1h",
        json!({"volumes": [
            {"name": "token", "mountPath": "/var/token", "secret": {"secretName": "token"}}
        ]}),
    )
    .await;
    let note = eventually("a NotStarted Event on secretless", WAIT, || async {
        events(&client, "NotStarted").await.remove("secretless")
    })
    .await;
    assert!(note.contains("ContainerCreating"), "{note}");
    let s = wait_for(&client, "secretless", "given another turn", |s| {
        s.running_timestamps.len() >= 2
    })
    .await;
    assert_eq!(s.interrupted_count, 0, "{s:?}");
    assert_ne!(s.phase, Phase::Failed, "{s:?}");
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
        "metadata": {"name": "token", "namespace": NS},
        "stringData": {"token": "t"}
    }))
    .unwrap();
    Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    eventually("secretless's pod running", WAIT, || async {
        (scavenger_pods(&client, "secretless").await.len() == 1).then_some(())
    })
    .await;

    // next ran all along, for longer than the start timeout many times over: never given up.
    let s = statuses(&client).await.remove("next").unwrap();
    assert_eq!(
        (s.phase, s.running_timestamps.len()),
        (Phase::Running, 1),
        "{s:?}"
    );
    let ran = k8s_openapi::jiff::Timestamp::now().duration_since(s.running_timestamps[0].0);
    assert!(
        ran > k8s_openapi::jiff::SignedDuration::try_from(START_TIMEOUT * 2).unwrap(),
        "next ran {ran:?}"
    );
    assert_eq!(scavenger_pods(&client, "next").await.len(), 2);
    for reason in ["NotStarted", "Failed"] {
        assert!(
            !events(&client, reason).await.contains_key("next"),
            "{reason} on next"
        );
    }
}

/// The replica holding the leader Lease, once one does.
async fn leader(client: &Client) -> String {
    let leases =
        Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(client.clone(), "default");
    eventually("a replica to hold the leader Lease", WAIT, || {
        let leases = leases.clone();
        async move {
            let lease = leases.get_opt("telemesh-coordinator").await.ok()??;
            lease.spec?.holder_identity.filter(|h| !h.is_empty())
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_runs_the_controller_and_its_successor_carries_on() {
    let (env, parts, mut mesh, client) = start_replicas("60s", 2).await;
    parts
        .start_scheduler(&env, &mesh.coordinators[0].url_prefix())
        .await;
    leader_and_successor(&client, &mut mesh).await;
}

/// [`only_the_leader_runs_the_controller_and_its_successor_carries_on`] on a real control
/// plane with its kube-scheduler: the pod deleted meanwhile stays Terminating, reported Failed
/// (exit 143) by its kubelet while the Job controller's finalizer holds it, which is an
/// interruption, not a failure of the job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_runs_the_controller_on_a_real_control_plane() {
    let Some((mut env, mut mesh, client)) = start_real(
        "only_the_leader_runs_the_controller_on_a_real_control_plane",
        "60s",
        2,
    )
    .await
    else {
        return;
    };
    // The extender is ignorable: with coordinator-0 killed, pods are placed without it.
    env.start_scheduler(&mesh.coordinators[0].url_prefix(), true);
    leader_and_successor(&client, &mut mesh).await;
}

/// One replica (the Lease holder) runs the controller; killed while a run loses its pod, its
/// successor counts the interruption once from the status and runs a new job to the end.
async fn leader_and_successor(client: &Client, mesh: &mut Mesh) {
    let client = client.clone();
    scavenger(&client, "long", "100m", "1h", json!({})).await;
    let s = wait_for(&client, "long", "Running with its pod", |s| {
        s.phase == Phase::Running && !s.pods.is_empty()
    })
    .await;
    let victim = s.pods[0].clone();

    // One replica runs the controller: the Lease holder.
    let holder = leader(&client).await;
    let (lead, standby) = if holder == "coordinator-0" {
        (0, 1)
    } else {
        (1, 0)
    };
    let gauge = "telemesh_coordinator_scavengers_leader ";
    let leading = |text: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(gauge))
            .map(str::to_owned)
    };
    assert_eq!(
        leading(&mesh.coordinators[lead].metrics().await).as_deref(),
        Some("1")
    );
    assert_eq!(
        leading(&mesh.coordinators[standby].metrics().await).as_deref(),
        Some("0")
    );

    // The leader dies (SIGKILL: the Lease is not released) and the run loses its pod
    // meanwhile: the successor, from the status alone, counts the interruption and starts the
    // job again; a new job runs to the end under it.
    mesh.coordinators[lead].process.kill().await;
    Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client.clone(), NS)
        .delete(&victim, &Default::default())
        .await
        .unwrap();
    scavenger(&client, "after", "100m", "1s", json!({})).await;
    let successor = format!("coordinator-{standby}");
    eventually("the standby to take the Lease", WAIT, || async {
        (leader(&client).await == successor).then_some(())
    })
    .await;
    let s = wait_for(&client, "long", "interrupted once and running again", |s| {
        s.phase == Phase::Running && s.running_timestamps.len() == 2
    })
    .await;
    assert_eq!(s.interrupted_count, 1, "{s:?}");
    wait_for(&client, "after", "Succeeded", |s| {
        s.phase == Phase::Succeeded
    })
    .await;
    assert_eq!(
        leading(&mesh.coordinators[standby].metrics().await).as_deref(),
        Some("1")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schema_refuses_what_it_promises_to() {
    let env = SimEnv::start(1).await;
    let kubectl = env.kubectl();
    let crd = env.write_file("crd.yaml", CRD_YAML);
    kubectl.run(&["apply", "-f", crd.to_str().unwrap()]).await;
    kubectl.run(&["create", "namespace", NS]).await;
    let example =
        telemesh_tests::upstream::workspace_root().join("deploy/examples/scavengerjob.yaml");
    eventually("the CRD serving the example", WAIT, || {
        let kubectl = kubectl.clone();
        let example = example.clone();
        async move {
            kubectl
                .output(&["apply", "-f", example.to_str().unwrap()], None)
                .await
                .status
                .success()
                .then_some(())
        }
    })
    .await;
    // The manifest docs/scavenger-jobs.md shows is valid too.
    let docs = std::fs::read_to_string(
        telemesh_tests::upstream::workspace_root().join("docs/scavenger-jobs.md"),
    )
    .unwrap();
    let shown = docs
        .split("```yaml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a YAML block in docs/scavenger-jobs.md");
    let shown = env.write_file("docs-example.yaml", shown);
    kubectl.run(&["apply", "-f", shown.to_str().unwrap()]).await;
    let table = kubectl.run(&["get", "sj", "-n", NS]).await;
    assert_eq!(
        telemesh_tests::header(&table),
        ["NAME", "PHASE", "INTERRUPTED", "RUNNING-FOR", "AGE"]
    );

    let base = json!({
        "apiVersion": "telemesh.io/v1alpha1", "kind": "ScavengerJob",
        "metadata": {"name": "bad", "namespace": NS},
        "spec": {"image": "x", "checkpointInterval": "1m"}
    });
    for (what, patch, message) in [
        (
            "two sources",
            json!({"volumes": [{"name": "v", "mountPath": "/v",
                "configMap": {"name": "a"}, "secret": {"secretName": "b"}}]}),
            "exactly one of persistentVolumeClaim, configMap or secret",
        ),
        (
            "no source",
            json!({"volumes": [{"name": "v", "mountPath": "/v"}]}),
            "exactly one of persistentVolumeClaim, configMap or secret",
        ),
        ("no pods", json!({"parallelism": 0}), "spec.parallelism"),
        (
            "a duration that is not Go's",
            json!({"checkpointInterval": "ten minutes"}),
            "spec.checkpointInterval",
        ),
        (
            "a zero interval",
            json!({"checkpointInterval": "0s"}),
            "checkpointInterval must be at least 1s",
        ),
        (
            "the marker's mount path",
            json!({"volumes": [{"name": "v", "mountPath": "/var/run/telemesh",
                "configMap": {"name": "a"}}]}),
            "where the controller mounts the checkpoint marker",
        ),
    ] {
        let mut doc = base.clone();
        for (k, v) in patch.as_object().unwrap() {
            doc["spec"][k] = v.clone();
        }
        let file = env.write_file("bad.yaml", &serde_yaml_ng::to_string(&doc).unwrap());
        let err = kubectl.fail(&["apply", "-f", file.to_str().unwrap()]).await;
        assert!(err.contains(message), "{what}: {err}");
    }

    // The spec is immutable.
    let err = kubectl
        .fail(&[
            "patch",
            "sj",
            "render-frames",
            "-n",
            NS,
            "--type=merge",
            "-p",
            r#"{"spec":{"parallelism":8}}"#,
        ])
        .await;
    assert!(err.contains("spec is immutable"), "{err}");
}
