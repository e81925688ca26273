//! The real kube-scheduler (v1.32.5, `$TELEMESH_KUBE_SCHEDULER`, default ../shared/tools/)
//! with the shipped dev configuration (deploy/scheduler/kube-scheduler-config.dev.yaml, rendered
//! only for this run's kubeconfig and coordinator address) against sim with its kubelets and
//! controllers (sim's own scheduler off), a real telemesh-agent per node with scripted
//! telemetry and a real telemesh-coordinator, under deploy/examples/scheduling-policy.yaml.
//!
//! - placement, in both nodeCacheCapable modes: linked pods never land on the node that breaks
//!   `dontschedule`, `scheduleonmetric` steers them all to the best node, and with the
//!   coordinator down the `ignorable` extender lets scheduling go on;
//! - with TAS's opt-in (`managedResources`, the chart's `scheduler.pods: optedIn`), only pods
//!   carrying `telemetry/scheduling` reach the extender;
//! - a pod no node takes reads as upstream words it, `kubectl describe pod` shows its
//!   FailedScheduling Event, sim's scheduler stand-in words it identically, and once a node
//!   recovers the pod is bound within seconds (the figure is printed: telemetry file change to
//!   pod bound);
//! - preemption never acts on a node the pod's policy refuses (both modes), and still acts on
//!   an allowed node when that makes room;
//! - kube-scheduler's preemption through sim (PriorityClasses, the victim's DisruptionTarget
//!   status patch, its deletion and Preempted Event, the preemptor's nominatedNodeName), and
//!   sim's stand-in doing the same in the same words.
//!
//! Skipped, saying so, when the kube-scheduler binary is absent.
#![allow(clippy::unwrap_used)]

use std::io::Write as _;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::{Value, json};
use telemesh_sim::cluster::scheduler::{self, config::SchedulerConfiguration};
use telemesh_tests::SimEnv;
use telemesh_tests::cluster::{ClusterParts, POLICY_NAMESPACE, install_example_policy};
use telemesh_tests::mesh::{Mesh, metric_value};
use telemesh_tests::upstream::{KUBE_SCHEDULER, KubeScheduler};
use tokio_util::sync::CancellationToken;

/// Generous: scheduling takes well under a second once caches are synced; this bounds a
/// broken run, it is not a timing goal.
const WAIT: Duration = Duration::from_secs(60);
const NODES: [&str; 3] = ["sim-node-0", "sim-node-1", "sim-node-2"];
/// The message a pod gets when all three nodes break the example policy's dontschedule rule
/// with node_metric 5 (issue 15).
const ALL_REFUSED: &str = "0/3 nodes are available: 3 policy health-metric-demo/scheduling-policy dontschedule: node_metric LessThan 10 (value 5)";

fn metric(value: f64) -> String {
    format!("node_metric {value}\n")
}

/// sim, its cluster parts, the mesh and kube-scheduler, with `node_metric` per node as given.
struct Scene {
    env: SimEnv,
    _parts: ClusterParts,
    mesh: Mesh,
    scheduler: KubeScheduler,
    pods: Api<Pod>,
}

impl Scene {
    async fn start(test: &str, metrics: [f64; 3], node_cache_capable: bool) -> Option<Self> {
        Self::start_with(test, metrics, node_cache_capable, false).await
    }

    /// [`Scene::start`], kube-scheduler with TAS's opt-in when `opted_in`.
    async fn start_with(
        test: &str,
        metrics: [f64; 3],
        node_cache_capable: bool,
        opted_in: bool,
    ) -> Option<Self> {
        let binary = KUBE_SCHEDULER.find(test)?;
        telemesh_runtime::telemetry::init(telemesh_runtime::cli::LogFormat::Text, "warn");
        let env = SimEnv::start(NODES.len()).await;
        let parts = ClusterParts::start(&env, NODES.len()).await;
        let client = env.client().await;
        install_example_policy(&client).await;
        for (name, value) in [("high", 1000), ("low", 10)] {
            let class: PriorityClass =
                serde_json::from_value(json!({"metadata": {"name": name}, "value": value}))
                    .unwrap();
            Api::<PriorityClass>::all(client.clone())
                .create(&PostParams::default(), &class)
                .await
                .unwrap();
        }
        let texts: Vec<String> = metrics.iter().map(|v| metric(*v)).collect();
        let nodes: Vec<(&str, &str)> = NODES
            .iter()
            .zip(&texts)
            .map(|(n, t)| (*n, t.as_str()))
            .collect();
        let mesh = Mesh::start(&env, &nodes, &[], 1).await;
        for (node, value) in NODES.iter().zip(metrics) {
            mesh.wait_metric(node, "node_metric", value).await;
        }
        let scheduler = KubeScheduler::start_with(
            &binary,
            &env,
            &mesh.coordinators[0].url_prefix(),
            node_cache_capable,
            opted_in,
        );
        let pods = Api::namespaced(client, POLICY_NAMESPACE);
        Some(Self {
            env,
            _parts: parts,
            mesh,
            scheduler,
            pods,
        })
    }

    async fn create(&self, pod: Value) {
        let pod: Pod = serde_json::from_value(pod).unwrap();
        self.pods
            .create(&PostParams::default(), &pod)
            .await
            .unwrap();
    }

    /// Polls `probe` until it answers, failing with kube-scheduler's recent output if it does
    /// not within [`WAIT`].
    async fn until<T>(&self, what: &str, mut probe: impl AsyncFnMut() -> Option<T>) -> T {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some(v) = probe().await {
                return v;
            }
            if tokio::time::Instant::now() >= deadline {
                let out = self.scheduler.process.output();
                let tail = &out[out.len().saturating_sub(60)..];
                panic!(
                    "timed out after {WAIT:?} waiting for {what}; kube-scheduler's last lines:\n{}",
                    tail.join("\n")
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn get(&self, name: &str) -> Option<Pod> {
        self.pods.get_opt(name).await.unwrap()
    }

    /// Waits until `name` is bound; returns its node.
    async fn bound(&self, name: &str) -> String {
        self.until(&format!("{name} bound"), async || {
            node_of(&self.get(name).await?)
        })
        .await
    }

    /// Waits until kube-scheduler has marked `name` unschedulable; returns the message.
    async fn unschedulable(&self, name: &str) -> String {
        self.until(&format!("{name} marked unschedulable"), async || {
            let pod = self.get(name).await?;
            pod.status?
                .conditions?
                .into_iter()
                .find(|c| {
                    c.type_ == "PodScheduled"
                        && c.status == "False"
                        && c.reason.as_deref() == Some("Unschedulable")
                })?
                .message
        })
        .await
    }
}

fn node_of(pod: &Pod) -> Option<String> {
    pod.spec
        .as_ref()?
        .node_name
        .clone()
        .filter(|n| !n.is_empty())
}

/// A pod linked to scheduling-policy that opts in to the extender as TAS pods do.
fn linked(name: &str, cpu: &str, class: Option<&str>) -> Value {
    json!({
        "metadata": {"name": name, "labels": {"telemetry-policy": "scheduling-policy"}},
        "spec": {
            "priorityClassName": class,
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": cpu}, "limits": {"telemetry/scheduling": "1"}}}]
        }
    })
}

/// A pod placed on `node` directly (no scheduler), taking `cpu`.
fn pinned(name: &str, node: &str, cpu: &str, class: &str) -> Value {
    json!({
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "priorityClassName": class,
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": cpu}}}]
        }
    })
}

/// Prints a measured figure past the test harness's capture, so it shows in a passing run.
fn figure(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

async fn placement(test: &str, node_cache_capable: bool) {
    // sim-node-0 is the best by scheduleonmetric (highest node_metric), sim-node-1 breaks
    // dontschedule (node_metric < 10), sim-node-2 is allowed but worse.
    let Some(mut scene) = Scene::start(test, [50.0, 5.0, 20.0], node_cache_capable).await else {
        return;
    };
    let names: Vec<String> = (0..6).map(|i| format!("linked-{i}")).collect();
    for name in &names {
        scene.create(linked(name, "100m", None)).await;
    }
    for name in &names {
        assert_eq!(
            scene.bound(name).await,
            "sim-node-0",
            "{name}: scheduleonmetric steers every linked pod to the best node"
        );
    }

    // The coordinator down: the extender is ignorable, so scheduling goes on without it.
    scene.mesh.kill_coordinators().await;
    scene
        .create(linked("without-coordinator", "100m", None))
        .await;
    let node = scene.bound("without-coordinator").await;
    assert!(NODES.contains(&node.as_str()), "{node}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn linked_pods_go_to_the_best_allowed_node_node_names() {
    placement("linked_pods_go_to_the_best_allowed_node_node_names", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn linked_pods_go_to_the_best_allowed_node_full_nodes() {
    placement("linked_pods_go_to_the_best_allowed_node_full_nodes", false).await;
}

/// Filter calls the coordinator has answered, whatever their outcome.
async fn filter_calls(scene: &Scene) -> f64 {
    scene.mesh.coordinators[0]
        .metrics()
        .await
        .lines()
        .filter(|l| l.starts_with("telemesh_coordinator_extender_decisions_total{verb=\"Filter\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// TAS's opt-in (the chart's `scheduler.pods: optedIn`): kube-scheduler calls the extender only
/// for pods that request or limit `telemetry/scheduling`. A linked pod that carries it keeps off
/// the refused nodes; one that carries only the policy label is placed with no filter call, as
/// TAS placed it: the label alone does not steer a pod there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_opt_in_only_pods_that_opt_in_reach_the_extender() {
    let test = "with_the_opt_in_only_pods_that_opt_in_reach_the_extender";
    // Only sim-node-0 is allowed: the others break dontschedule.
    let Some(scene) = Scene::start_with(test, [50.0, 5.0, 5.0], true, true).await else {
        return;
    };
    let names: Vec<String> = (0..3).map(|i| format!("opted-in-{i}")).collect();
    for name in &names {
        scene.create(linked(name, "100m", None)).await;
    }
    for name in &names {
        assert_eq!(scene.bound(name).await, "sim-node-0", "{name}");
    }
    // A call precedes the binding it allows, so once a pod is bound its calls are counted.
    let calls = filter_calls(&scene).await;
    assert!(
        calls >= 3.0,
        "one filter call per opted-in pod at least: {calls}"
    );
    let mut label_only = linked("label-only", "100m", None);
    label_only["spec"]["containers"][0]["resources"]
        .as_object_mut()
        .unwrap()
        .remove("limits");
    scene.create(label_only).await;
    let node = scene.bound("label-only").await;
    assert!(NODES.contains(&node.as_str()), "{node}");
    assert_eq!(
        filter_calls(&scene).await,
        calls,
        "kube-scheduler asked the extender about a pod that does not opt in"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_pod_reads_as_upstream_and_is_bound_soon_after_a_node_recovers() {
    let test = "a_refused_pod_reads_as_upstream_and_is_bound_soon_after_a_node_recovers";
    let Some(scene) = Scene::start(test, [5.0, 5.0, 5.0], true).await else {
        return;
    };
    scene.create(linked("waiting", "100m", None)).await;
    let message = scene.unschedulable("waiting").await;
    assert!(
        message.starts_with(ALL_REFUSED),
        "PodScheduled message:\n  {message}\nexpected it to start with:\n  {ALL_REFUSED}"
    );

    // The node recovers; kube-scheduler must retry the pod at once, not at its 5-minute flush.
    let recovered = Instant::now();
    scene.mesh.script("sim-node-2", &metric(50.0));
    let node = scene.bound("waiting").await;
    let took = recovered.elapsed();
    assert_eq!(node, "sim-node-2", "the only node that recovered");
    // The recovery flipped sim-node-2's dontschedule verdict: its agent pushed that publication
    // to the coordinator at once (the real policy watch, the sealed UDP transport).
    let pushes = metric_value(
        &scene.mesh.metrics_of("sim-node-2").await,
        "telemesh_agent_gossip_verdict_pushes_total",
    );
    assert!(
        pushes >= 1.0,
        "sim-node-2's agent pushed no verdict flip to the coordinator"
    );
    figure(&format!(
        "recovery-to-bind (telemetry file change -> pod bound, real kube-scheduler): {:.2} s",
        took.as_secs_f64()
    ));
}

/// The same refusal from kube-scheduler and from sim's scheduler stand-in (run beside it under
/// another scheduler name with the same configuration): the stand-in must word its PodScheduled
/// condition identically.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sims_stand_in_words_a_refusal_as_kube_scheduler_does() {
    let test = "sims_stand_in_words_a_refusal_as_kube_scheduler_does";
    let Some(scene) = Scene::start(test, [5.0, 5.0, 5.0], true).await else {
        return;
    };
    scene.create(linked("refused", "100m", None)).await;
    let message = scene.unschedulable("refused").await;

    let config = std::fs::read_to_string(&scene.scheduler.config).unwrap();
    let mut config = SchedulerConfiguration::parse(&config).unwrap();
    // kube-scheduler's profiles, served under another name: the stand-in serves its profiles'
    // scheduler names, as kube-scheduler does.
    for profile in &mut config.profiles {
        profile.scheduler_name = Some("sim-stand-in".into());
    }
    let settings = scheduler::Settings {
        scheduler_name: "sim-stand-in".into(),
        config,
        ..scheduler::Settings::default()
    };
    let stop = CancellationToken::new();
    let _stop_on_drop = stop.clone().drop_guard();
    let (decisions, _) = tokio::sync::broadcast::channel(16);
    tokio::spawn(scheduler::run(
        scene.env.client().await,
        settings,
        decisions,
        stop,
    ));
    let mut by_stand_in = linked("refused-by-stand-in", "100m", None);
    by_stand_in["spec"]["schedulerName"] = json!("sim-stand-in");
    scene.create(by_stand_in).await;
    assert_eq!(
        scene.unschedulable("refused-by-stand-in").await,
        message,
        "sim's stand-in words the refusal as kube-scheduler does"
    );
}

/// `kubectl describe pod` of a pod the extender refused shows kube-scheduler's FailedScheduling
/// Event, which it records through events.k8s.io/v1 while describe reads core v1 Events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_describe_shows_the_extenders_refusal() {
    let test = "kubectl_describe_shows_the_extenders_refusal";
    let Some(scene) = Scene::start(test, [5.0, 5.0, 5.0], true).await else {
        return;
    };
    scene.create(linked("refused", "100m", None)).await;
    let message = scene.unschedulable("refused").await;
    let kubectl = scene.env.kubectl();
    let described = scene
        .until(
            "kubectl describe to show the FailedScheduling Event",
            async || {
                let out = kubectl
                    .run(&["describe", "pod", "refused", "-n", POLICY_NAMESPACE])
                    .await;
                let events = out.split_once("\nEvents:")?.1.to_owned();
                events.contains("FailedScheduling").then_some(events)
            },
        )
        .await;
    assert!(
        described.contains("default-scheduler") && described.contains(ALL_REFUSED),
        "describe's Events section:\n{described}\n(the condition reads: {message})"
    );
}

/// Two nodes full of high-priority pods; the third breaks dontschedule and holds one
/// low-priority pod. A high-priority linked pod fits nowhere: preempting the low-priority pod
/// would make room only on a node its policy refuses, so nothing may be preempted.
async fn no_preemption_on_a_refused_node(test: &str, node_cache_capable: bool) {
    let Some(scene) = Scene::start(test, [50.0, 50.0, 5.0], node_cache_capable).await else {
        return;
    };
    scene
        .create(pinned("full-0", "sim-node-0", "8", "high"))
        .await;
    scene
        .create(pinned("full-1", "sim-node-1", "8", "high"))
        .await;
    scene.create(pinned("low", "sim-node-2", "8", "low")).await;
    let low_uid = scene.get("low").await.unwrap().metadata.uid;

    scene.create(linked("preemptor", "4", Some("high"))).await;
    // Written after kube-scheduler's PostFilter (preemption) ran for this attempt, so a victim
    // it chose would already be deleted and the pod nominated.
    let message = scene.unschedulable("preemptor").await;
    let low = scene.get("low").await;
    assert_eq!(
        low.as_ref().and_then(|p| p.metadata.uid.clone()),
        low_uid,
        "the low-priority pod on the refused node must survive; condition: {message}"
    );
    assert!(
        low.and_then(|p| p.metadata.deletion_timestamp).is_none(),
        "the low-priority pod is not being deleted"
    );
    let nominated = scene
        .get("preemptor")
        .await
        .and_then(|p| p.status?.nominated_node_name);
    assert_eq!(nominated, None, "no node nominated; condition: {message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_preemption_on_a_refused_node_node_names() {
    no_preemption_on_a_refused_node("no_preemption_on_a_refused_node_node_names", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_preemption_on_a_refused_node_full_nodes() {
    no_preemption_on_a_refused_node("no_preemption_on_a_refused_node_full_nodes", false).await;
}

/// sim-node-0 (allowed) and sim-node-2 (refused) each hold a low-priority pod, sim-node-1 is
/// full of high-priority pods: the high-priority linked pod preempts on sim-node-0 only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preemption_makes_room_on_an_allowed_node() {
    let test = "preemption_makes_room_on_an_allowed_node";
    let Some(scene) = Scene::start(test, [50.0, 50.0, 5.0], true).await else {
        return;
    };
    scene
        .create(pinned("low-0", "sim-node-0", "8", "low"))
        .await;
    scene
        .create(pinned("full-1", "sim-node-1", "8", "high"))
        .await;
    scene
        .create(pinned("low-2", "sim-node-2", "8", "low"))
        .await;
    let low2_uid = scene.get("low-2").await.unwrap().metadata.uid;

    scene.create(linked("preemptor", "4", Some("high"))).await;
    assert_eq!(scene.bound("preemptor").await, "sim-node-0");
    assert!(
        scene.get("low-0").await.is_none(),
        "the victim on the allowed node was preempted"
    );
    assert_eq!(
        scene.get("low-2").await.and_then(|p| p.metadata.uid),
        low2_uid,
        "the low-priority pod on the refused node survives"
    );
}

/// What a watch saw of one preemption: the victim's conditions when it was deleted, and the
/// preemptor's nomination with the PodScheduled message written with it.
#[derive(Debug)]
struct Preemption {
    victim_conditions: Vec<k8s_openapi::api::core::v1::PodCondition>,
    nominated: String,
    message: String,
}

impl Scene {
    /// Creates `preemptor` and follows the pod watch until `victim` is deleted and `preemptor`
    /// nominated.
    async fn preempt(&self, preemptor: Value, victim: &str) -> Preemption {
        let name = preemptor["metadata"]["name"].as_str().unwrap().to_owned();
        let rv = self.pods.list(&ListParams::default()).await.unwrap();
        let rv = rv.metadata.resource_version.unwrap();
        let mut events = self
            .pods
            .watch(&WatchParams::default(), &rv)
            .await
            .unwrap()
            .boxed();
        self.create(preemptor).await;
        // kube-scheduler nominates once it has asked for the victims' deletion: a victim on a
        // node is then Terminating (deletionTimestamp set) until its kubelet finishes it.
        let (mut conditions, mut deleted) = (None, false);
        let follow = async {
            while let Some(event) = events.next().await {
                match event.unwrap() {
                    WatchEvent::Modified(p) if p.metadata.name.as_deref() == Some(victim) => {
                        deleted |= p.metadata.deletion_timestamp.is_some();
                        conditions = p.status.and_then(|s| s.conditions);
                    }
                    WatchEvent::Deleted(p) if p.metadata.name.as_deref() == Some(victim) => {
                        deleted = true;
                    }
                    WatchEvent::Modified(p) if p.metadata.name.as_deref() == Some(&name) => {
                        let status = p.status.unwrap_or_default();
                        if let Some(node) = status.nominated_node_name {
                            assert!(deleted, "{name} nominated before {victim} was deleted");
                            let message = status
                                .conditions
                                .into_iter()
                                .flatten()
                                .find(|c| c.type_ == "PodScheduled")
                                .and_then(|c| c.message)
                                .unwrap_or_default();
                            return (node, message);
                        }
                    }
                    _ => {}
                }
            }
            panic!("the pod watch ended");
        };
        let Ok((nominated, message)) = tokio::time::timeout(WAIT, follow).await else {
            let out = self.scheduler.process.output();
            panic!(
                "no preemption of {victim} for {name} within {WAIT:?}; kube-scheduler's last lines:\n{}",
                out[out.len().saturating_sub(60)..].join("\n")
            );
        };
        Preemption {
            victim_conditions: conditions.unwrap_or_default(),
            nominated,
            message,
        }
    }

    /// The `Preempted` Event on `victim`: (note, related pod's name, reporting controller).
    async fn preempted_event(&self, victim: &str) -> (String, String, String) {
        let events: Api<Event> = Api::namespaced(self.env.client().await, POLICY_NAMESPACE);
        self.until(&format!("the Preempted Event on {victim}"), async || {
            let list = events.list(&ListParams::default()).await.ok()?;
            list.items.into_iter().find_map(|e| {
                let regarding = e.regarding.as_ref()?.name.as_deref()?;
                (e.reason.as_deref() == Some("Preempted") && regarding == victim).then(|| {
                    (
                        e.note.clone().unwrap_or_default(),
                        e.related.and_then(|r| r.name).unwrap_or_default(),
                        e.reporting_controller.unwrap_or_default(),
                    )
                })
            })
        })
        .await
    }
}

fn disruption_target(
    conditions: &[k8s_openapi::api::core::v1::PodCondition],
) -> (String, Option<String>, Option<String>) {
    let c = conditions
        .iter()
        .find(|c| c.type_ == "DisruptionTarget")
        .expect("the victim got DisruptionTarget before it was deleted");
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

/// The real kube-scheduler preempts a low-priority pod for a high-priority one through sim:
/// the victim gets DisruptionTarget through the status subresource, is deleted and gets the
/// Preempted Event; the preemptor is nominated, then bound. sim's stand-in, run beside it on the
/// same cluster and configuration (extender preempt verb included), does the same in the same
/// words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_scheduler_preempts_through_sim_as_sims_stand_in_does() {
    let test = "kube_scheduler_preempts_through_sim_as_sims_stand_in_does";
    let Some(scene) = Scene::start(test, [50.0, 50.0, 50.0], true).await else {
        return;
    };
    scene
        .create(pinned("low-0", "sim-node-0", "8", "low"))
        .await;
    scene
        .create(pinned("full-1", "sim-node-1", "8", "high"))
        .await;
    scene
        .create(pinned("full-2", "sim-node-2", "8", "high"))
        .await;

    let upstream = scene
        .preempt(linked("preemptor", "4", Some("high")), "low-0")
        .await;
    assert_eq!(upstream.nominated, "sim-node-0");
    assert_eq!(
        disruption_target(&upstream.victim_conditions),
        (
            "True".to_owned(),
            Some("PreemptionByScheduler".to_owned()),
            Some("default-scheduler: preempting to accommodate a higher priority pod".to_owned())
        )
    );
    assert_eq!(scene.bound("preemptor").await, "sim-node-0");
    let preemptor_uid = scene.get("preemptor").await.unwrap().metadata.uid.unwrap();
    let (note, related, _) = scene.preempted_event("low-0").await;
    assert_eq!(
        note,
        format!("Preempted by pod {preemptor_uid} on node sim-node-0")
    );
    assert_eq!(related, "preemptor");

    // The same again with sim's stand-in under another scheduler name.
    scene
        .create(pinned("low-again", "sim-node-0", "4", "low"))
        .await;
    let config = std::fs::read_to_string(&scene.scheduler.config).unwrap();
    let mut config = SchedulerConfiguration::parse(&config).unwrap();
    for profile in &mut config.profiles {
        profile.scheduler_name = Some("sim-stand-in".into());
    }
    let settings = scheduler::Settings {
        scheduler_name: "sim-stand-in".into(),
        config,
        ..scheduler::Settings::default()
    };
    let stop = CancellationToken::new();
    let _stop_on_drop = stop.clone().drop_guard();
    let (decisions, _) = tokio::sync::broadcast::channel(16);
    tokio::spawn(scheduler::run(
        scene.env.client().await,
        settings,
        decisions,
        stop,
    ));
    let mut by_stand_in = linked("preemptor-2", "4", Some("high"));
    by_stand_in["spec"]["schedulerName"] = json!("sim-stand-in");
    let stand_in = scene.preempt(by_stand_in, "low-again").await;
    assert_eq!(stand_in.nominated, "sim-node-0");
    assert_eq!(
        stand_in.message, upstream.message,
        "the PodScheduled message written with the nomination"
    );
    assert_eq!(
        disruption_target(&stand_in.victim_conditions),
        (
            "True".to_owned(),
            Some("PreemptionByScheduler".to_owned()),
            Some("sim-stand-in: preempting to accommodate a higher priority pod".to_owned())
        )
    );
    assert_eq!(scene.bound("preemptor-2").await, "sim-node-0");
    let uid = scene
        .get("preemptor-2")
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    let (note, related, _) = scene.preempted_event("low-again").await;
    assert_eq!(note, format!("Preempted by pod {uid} on node sim-node-0"));
    assert_eq!(related, "preemptor-2");

    // preemptionPolicy: Never outranks everything here and still preempts nobody, in the same
    // words from both.
    let never: PriorityClass = serde_json::from_value(
        json!({"metadata": {"name": "top-never"}, "value": 5000, "preemptionPolicy": "Never"}),
    )
    .unwrap();
    Api::<PriorityClass>::all(scene.env.client().await)
        .create(&PostParams::default(), &never)
        .await
        .unwrap();
    scene
        .create(linked("patient", "4", Some("top-never")))
        .await;
    let mut patient = linked("patient-2", "4", Some("top-never"));
    patient["spec"]["schedulerName"] = json!("sim-stand-in");
    scene.create(patient).await;
    let upstream = scene.unschedulable("patient").await;
    assert!(
        upstream.ends_with(" preemption: not eligible due to preemptionPolicy=Never."),
        "{upstream}"
    );
    assert_eq!(scene.unschedulable("patient-2").await, upstream);
    for name in ["preemptor", "preemptor-2", "full-1", "full-2"] {
        assert!(scene.get(name).await.is_some(), "{name} was not preempted");
    }
}
