//! sim's scheduler and kubelet stand-ins against the API server through the kube client: pods are
//! placed by resource fit, node selectors and taints, then by a real HTTP extender registered in a
//! KubeSchedulerConfiguration (filter with reasons, prioritize, managedResources); unplaceable pods
//! get kube-scheduler's condition and Event, and preempt lower-priority pods as upstream's
//! default preemption does (an extender's preempt verb included); the kubelet runs pods and
//! crashes them on cue.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Json;
use axum::routing::post;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use telemesh_runtime::backoff::Backoff;
use telemesh_runtime::testing::eventually;
use telemesh_sim::cluster::kubelet::{Fault, FaultRule, Kubelet};
use telemesh_sim::cluster::scheduler::{self, Decision, config::SchedulerConfiguration};
use telemesh_sim::{Sim, SimConfig};

const WAIT: Duration = Duration::from_secs(15);

/// An extender that turns sim-node-0 down and prefers sim-node-1, counting its calls.
async fn fake_extender(calls: Arc<AtomicUsize>) -> String {
    let filter_calls = calls.clone();
    let app = axum::Router::new()
        .route(
            "/ext/filter",
            post(move |Json(args): Json<Value>| {
                let calls = filter_calls.clone();
                async move {
                    calls.fetch_add(1, Ordering::SeqCst);
                    let names: Vec<String> = args["NodeNames"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|n| n.as_str().unwrap().to_owned())
                        .filter(|n| n != "sim-node-0")
                        .collect();
                    Json(json!({"NodeNames": names, "FailedNodes": {"sim-node-0": "too hot"}, "Error": ""}))
                }
            }),
        )
        .route(
            "/ext/prioritize",
            post(|Json(args): Json<Value>| async move {
                let scores: Vec<Value> = args["NodeNames"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|n| json!({"Host": n, "Score": if n == "sim-node-1" { 10 } else { 0 }}))
                    .collect();
                Json(scores)
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/ext")
}

fn scheduler_config(url: &str, ignorable: bool) -> SchedulerConfiguration {
    SchedulerConfiguration::parse(&format!(
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
extenders:
- urlPrefix: {url}
  filterVerb: filter
  prioritizeVerb: prioritize
  weight: 5
  nodeCacheCapable: true
  ignorable: {ignorable}
  httpTimeout: 1s
  managedResources:
  - name: telemetry/scheduling
    ignoredByScheduler: true
"
    ))
    .unwrap()
}

struct Cluster {
    _sim: Sim,
    client: Client,
    stop: CancellationToken,
    decisions: broadcast::Receiver<Decision>,
    faults: watch::Sender<Vec<FaultRule>>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn cluster(nodes: usize, config: SchedulerConfiguration) -> Cluster {
    let sim = Sim::start(SimConfig::default()).await.unwrap();
    telemesh_sim::nodes::create_nodes(&sim.server, nodes).unwrap();
    let client = sim.client().await.unwrap();
    let stop = CancellationToken::new();
    let (faults, faults_rx) = watch::channel(Vec::new());
    for i in 0..nodes {
        let kubelet = Kubelet {
            node: format!("sim-node-{i}"),
            index: u8::try_from(i).unwrap(),
            backoff: Backoff::new(Duration::from_millis(300), Duration::from_secs(1)),
            host_root: None,
            workloads: sim.workloads.clone(),
        };
        tokio::spawn(kubelet.run(client.clone(), faults_rx.clone(), stop.clone()));
    }
    let (tx, decisions) = broadcast::channel(64);
    let settings = scheduler::Settings {
        config,
        retry: Duration::from_millis(200),
        ..scheduler::Settings::default()
    };
    tokio::spawn(scheduler::run(client.clone(), settings, tx, stop.clone()));
    Cluster {
        _sim: sim,
        client,
        stop,
        decisions,
        faults,
    }
}

async fn create_pod(client: &Client, name: &str, spec: Value, labels: Value) {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }))
    .unwrap();
    Api::<Pod>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
}

fn container(resources: Value) -> Value {
    json!([{"name": "main", "image": "demo", "resources": resources}])
}

async fn running_on(client: &Client, name: &str) -> Pod {
    let api = Api::<Pod>::namespaced(client.clone(), "default");
    eventually(&format!("pod {name} Running and Ready"), WAIT, || async {
        let pod = api.get(name).await.ok()?;
        let status = pod.status.clone()?;
        let ready = status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        (status.phase.as_deref() == Some("Running") && ready).then_some(pod)
    })
    .await
}

fn node_of(pod: &Pod) -> &str {
    pod.spec.as_ref().unwrap().node_name.as_deref().unwrap()
}

#[tokio::test]
async fn pods_are_placed_by_fit_taints_selectors_and_the_extender() {
    let calls = Arc::new(AtomicUsize::new(0));
    let url = fake_extender(calls.clone()).await;
    let mut c = cluster(3, scheduler_config(&url, false)).await;
    let nodes = Api::<Node>::all(c.client.clone());
    nodes
        .patch(
            "sim-node-2",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]}})),
        )
        .await
        .unwrap();

    // Opted in to the extender: node 0 filtered by it, node 2 tainted, node 1 preferred anyway.
    create_pod(
        &c.client,
        "opted-in",
        json!({"containers": container(json!({"limits": {"telemetry/scheduling": "1"}}))}),
        json!({}),
    )
    .await;
    let pod = running_on(&c.client, "opted-in").await;
    assert_eq!(node_of(&pod), "sim-node-1");
    let status = pod.status.unwrap();
    assert!(status.pod_ip.unwrap().starts_with("10.244.1."));
    assert!(status.container_statuses.unwrap()[0].ready);
    let decision = c.decisions.recv().await.unwrap();
    assert_eq!(
        decision,
        Decision::Placed {
            pod: "default/opted-in".into(),
            node: "sim-node-1".into(),
            filtered: BTreeMap::from([("sim-node-0".into(), "too hot".into())]),
        }
    );
    let after_opted_in = calls.load(Ordering::SeqCst);
    assert_eq!(after_opted_in, 1);

    // Not opted in: the extender is not asked; its nodeSelector takes it to node 0.
    create_pod(
        &c.client,
        "selected",
        json!({"containers": container(json!({})), "nodeSelector": {"kubernetes.io/hostname": "sim-node-0"}}),
        json!({}),
    )
    .await;
    assert_eq!(
        node_of(&running_on(&c.client, "selected").await),
        "sim-node-0"
    );
    assert_eq!(calls.load(Ordering::SeqCst), after_opted_in);

    // A toleration opens the tainted node.
    create_pod(
        &c.client,
        "tolerant",
        json!({"containers": container(json!({})), "nodeSelector": {"kubernetes.io/hostname": "sim-node-2"},
               "tolerations": [{"key": "dedicated", "operator": "Exists"}]}),
        json!({}),
    )
    .await;
    assert_eq!(
        node_of(&running_on(&c.client, "tolerant").await),
        "sim-node-2"
    );

    // Too big for any node: condition and Event as kube-scheduler writes them.
    create_pod(
        &c.client,
        "huge",
        json!({"containers": container(json!({"requests": {"cpu": "100"}}))}),
        json!({}),
    )
    .await;
    let api = Api::<Pod>::namespaced(c.client.clone(), "default");
    let message = eventually("huge marked unschedulable", WAIT, || async {
        let pod = api.get("huge").await.ok()?;
        let cond = pod
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "PodScheduled" && c.status == "False")?;
        assert_eq!(cond.reason.as_deref(), Some("Unschedulable"));
        cond.message
    })
    .await;
    // Word for word what kube-scheduler v1.32 writes in this situation (reasons sorted as
    // "<count> <reason>" strings, then DefaultPreemption's finding per node).
    assert_eq!(
        message,
        "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: x}, 2 Insufficient cpu. \
         preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No \
         preemption victims found for incoming pod."
    );
    let events = Api::<Event>::namespaced(c.client.clone(), "default");
    eventually("FailedScheduling and Scheduled events", WAIT, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        let has = |reason: &str, pod: &str| {
            list.items.iter().any(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pod)
            })
        };
        (has("FailedScheduling", "huge") && has("Scheduled", "opted-in")).then_some(())
    })
    .await;
    assert!(
        api.get("huge")
            .await
            .unwrap()
            .spec
            .unwrap()
            .node_name
            .is_none()
    );
}

#[tokio::test]
async fn a_failing_extender_is_skipped_only_when_ignorable() {
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let url = format!("http://{closed}/ext");
    let opted_in =
        json!({"containers": container(json!({"limits": {"telemetry/scheduling": "1"}}))});

    let ignorable = cluster(2, scheduler_config(&url, true)).await;
    create_pod(&ignorable.client, "p", opted_in.clone(), json!({})).await;
    running_on(&ignorable.client, "p").await;

    let strict = cluster(2, scheduler_config(&url, false)).await;
    create_pod(&strict.client, "p", opted_in, json!({})).await;
    let api = Api::<Pod>::namespaced(strict.client.clone(), "default");
    let message = eventually("p unschedulable for the extender", WAIT, || async {
        let pod = api.get("p").await.ok()?;
        pod.status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "PodScheduled" && c.status == "False")?
            .message
    })
    .await;
    assert!(message.contains(&format!("extender {url}")), "{message}");
}

/// Like kube-scheduler v1.32, a pod an extender rejected is tried again on a cluster event (here
/// a Node annotation, as the agents write on recovery) and not on a timer: the extender is asked
/// nothing more while the cluster stands still, however many queue ticks pass.
#[tokio::test]
async fn an_extender_rejection_is_retried_on_a_cluster_event_not_a_timer() {
    let calls = Arc::new(AtomicUsize::new(0));
    let url = fake_extender(calls.clone()).await;
    // One node, which the extender turns down.
    let c = cluster(1, scheduler_config(&url, false)).await;
    let opted_in =
        json!({"containers": container(json!({"limits": {"telemetry/scheduling": "1"}}))});
    create_pod(&c.client, "p", opted_in, json!({})).await;
    let pods = Api::<Pod>::namespaced(c.client.clone(), "default");
    eventually("p unschedulable for the extender", WAIT, || async {
        let pod = pods.get("p").await.ok()?;
        pod.status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "PodScheduled" && c.status == "False")
    })
    .await;
    let asked = calls.load(Ordering::SeqCst);
    assert!(asked >= 1);
    // Ten of the scheduler's queue ticks (200 ms each in this cluster) with nothing changing.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        calls.load(Ordering::SeqCst),
        asked,
        "retried without a cluster event"
    );
    Api::<Node>::all(c.client.clone())
        .patch(
            "sim-node-0",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"telemesh.io/schedulable-since": "now"}}}),
            ),
        )
        .await
        .unwrap();
    eventually(
        "the extender asked again after the Node changed",
        WAIT,
        || async { (calls.load(Ordering::SeqCst) > asked).then_some(()) },
    )
    .await;
}

#[tokio::test]
async fn the_kubelet_crashes_pods_on_cue_and_completes_jobs() {
    let c = cluster(2, SchedulerConfiguration::default()).await;
    c.faults.send_replace(vec![FaultRule {
        node: "sim-node-0".into(),
        selector: BTreeMap::from([("app".into(), "d".into())]),
        fault: Fault::Crash,
        every: Duration::from_millis(300),
    }]);
    for (name, node) in [("d-on-0", "sim-node-0"), ("d-on-1", "sim-node-1")] {
        create_pod(
            &c.client,
            name,
            json!({"containers": container(json!({})), "nodeName": node}),
            json!({"app": "d"}),
        )
        .await;
    }
    create_pod(
        &c.client,
        "other-on-0",
        json!({"containers": container(json!({})), "nodeName": "sim-node-0"}),
        json!({"app": "e"}),
    )
    .await;
    let api = Api::<Pod>::namespaced(c.client.clone(), "default");
    let restarts = |pod: &Pod| {
        pod.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .map_or(0, |c| c[0].restart_count)
    };
    let crashed = eventually("d-on-0 restarted twice", WAIT, || async {
        let pod = api.get("d-on-0").await.ok()?;
        (restarts(&pod) >= 2).then_some(pod)
    })
    .await;
    let last = crashed.status.unwrap().container_statuses.unwrap()[0]
        .last_state
        .clone()
        .unwrap()
        .terminated
        .unwrap();
    assert_eq!((last.exit_code, last.reason.as_deref()), (1, Some("Error")));
    // The same type on a healthy node, and another type on the faulty node, never crash.
    assert_eq!(restarts(&api.get("d-on-1").await.unwrap()), 0);
    assert_eq!(restarts(&api.get("other-on-0").await.unwrap()), 0);

    create_pod(
        &c.client,
        "job-pod",
        json!({"containers": container(json!({})), "restartPolicy": "Never", "nodeName": "sim-node-1"}),
        json!({}),
    )
    .await;
    api.patch(
        "job-pod",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"sim.telemesh.io/run-for": "200ms"}}})),
    )
    .await
    .unwrap();
    eventually("job-pod Succeeded", WAIT, || async {
        let pod = api.get("job-pod").await.ok()?;
        (pod.status?.phase.as_deref() == Some("Succeeded")).then_some(())
    })
    .await;
}

#[tokio::test]
async fn job_completions_default_as_upstream() {
    let sim = Sim::start(SimConfig::default()).await.unwrap();
    let api =
        Api::<k8s_openapi::api::batch::v1::Job>::namespaced(sim.client().await.unwrap(), "default");
    let job = |name: &str, spec: Value| -> k8s_openapi::api::batch::v1::Job {
        let mut spec = spec;
        spec["template"] = json!({"spec": {"restartPolicy": "Never",
            "containers": [{"name": "main", "image": "demo"}]}});
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
    };
    let plain = api
        .create(&PostParams::default(), &job("plain", json!({})))
        .await
        .unwrap();
    let spec = plain.spec.unwrap();
    assert_eq!((spec.completions, spec.parallelism), (Some(1), Some(1)));
    // parallelism alone: a work queue, completions stays null.
    let queue = api
        .create(
            &PostParams::default(),
            &job("queue", json!({"parallelism": 2})),
        )
        .await
        .unwrap();
    let spec = queue.spec.unwrap();
    assert_eq!((spec.completions, spec.parallelism), (None, Some(2)));
}

#[tokio::test]
async fn pods_naming_a_scheduler_nobody_runs_stay_pending_until_bound() {
    let mut c = cluster(2, SchedulerConfiguration::default()).await;
    let api = Api::<Pod>::namespaced(c.client.clone(), "default");
    // WAM's test-c pods name a scheduler that is not running.
    create_pod(
        &c.client,
        "unserved",
        json!({"containers": container(json!({})), "schedulerName": "telemesh-unscheduled"}),
        json!({}),
    )
    .await;
    create_pod(
        &c.client,
        "served",
        json!({"containers": container(json!({}))}),
        json!({}),
    )
    .await;
    // The scheduler takes pods oldest first: had it served the older pod, it would have decided
    // on it before the newer one.
    match c.decisions.recv().await.unwrap() {
        Decision::Placed { pod, .. } if pod == "default/served" => {}
        other => panic!("unexpected decision {other:?}"),
    }
    let unserved = api.get("unserved").await.unwrap();
    assert_eq!(unserved.spec.as_ref().unwrap().node_name, None);
    let status = unserved.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    assert!(
        status.conditions.unwrap_or_default().is_empty(),
        "no PodScheduled condition: no scheduler looked at it"
    );

    // POST pods/unserved/binding places it; the kubelet then runs it.
    let binding = |node: &str| {
        json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": "unserved"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}
        })
    };
    let _: Value = api
        .create_subresource(
            "binding",
            "unserved",
            &PostParams::default(),
            &binding("sim-node-1"),
        )
        .await
        .unwrap();
    assert_eq!(
        node_of(&running_on(&c.client, "unserved").await),
        "sim-node-1"
    );
    // A second binding is refused as kube-apiserver refuses it.
    let err = api
        .create_subresource::<Value, Value>(
            "binding",
            "unserved",
            &PostParams::default(),
            &binding("sim-node-0"),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("expected an API error, got {err:?}")
    };
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        status.message,
        "Operation cannot be fulfilled on pods/binding \"unserved\": pod unserved is already assigned to node \"sim-node-1\""
    );
}

#[tokio::test]
async fn a_readiness_probe_holds_ready_until_its_first_probe() {
    let c = cluster(1, SchedulerConfiguration::default()).await;
    let api = Api::<Pod>::namespaced(c.client.clone(), "default");
    let rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut watch = api
        .watch(
            &kube::api::WatchParams::default().fields("metadata.name=probed"),
            &rv,
        )
        .await
        .unwrap()
        .boxed();
    // test-c's probe: an exec probe, which the kubelet stand-in counts as passing when it runs.
    create_pod(
        &c.client,
        "probed",
        json!({"containers": [{"name": "test", "image": "busybox",
            "readinessProbe": {"exec": {"command": ["cat", "/tmp/ready"]},
                               "initialDelaySeconds": 1, "periodSeconds": 5}}]}),
        json!({}),
    )
    .await;
    let seen_not_ready_first = tokio::time::timeout(WAIT, async {
        let mut running_not_ready = false;
        while let Some(event) = watch.next().await {
            let (kube::api::WatchEvent::Added(pod) | kube::api::WatchEvent::Modified(pod)) =
                event.unwrap()
            else {
                continue;
            };
            let status = pod.status.unwrap_or_default();
            let ready = status
                .conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == "Ready")
                .map(|c| c.status == "True");
            match (status.phase.as_deref(), ready) {
                (Some("Running"), Some(false)) => running_not_ready = true,
                (Some("Running"), Some(true)) => {
                    assert!(status.container_statuses.unwrap()[0].ready);
                    return running_not_ready;
                }
                _ => {}
            }
        }
        panic!("the watch ended before the pod became ready");
    })
    .await
    .expect("the probed pod becomes Ready");
    assert!(
        seen_not_ready_first,
        "Ready before the probe's initial delay"
    );
}

/// Creates PriorityClasses `name=value` (`Never` in the name: `preemptionPolicy: Never`).
async fn priority_classes(client: &Client, classes: &[(&str, i32)]) {
    let api = Api::<k8s_openapi::api::scheduling::v1::PriorityClass>::all(client.clone());
    for (name, value) in classes {
        let policy = if name.contains("never") {
            "Never"
        } else {
            "PreemptLowerPriority"
        };
        let pc = serde_json::from_value(json!({
            "metadata": {"name": name}, "value": value, "preemptionPolicy": policy,
        }))
        .unwrap();
        api.create(&PostParams::default(), &pc).await.unwrap();
    }
}

/// A pod of PriorityClass `class` asking for 4 of a sim node's 8 CPUs, on `node` if given.
fn half_node(class: &str, node: Option<&str>) -> Value {
    let mut spec = json!({
        "priorityClassName": class,
        "containers": container(json!({"requests": {"cpu": "4"}})),
    });
    if let Some(node) = node {
        spec["nodeSelector"] = json!({"kubernetes.io/hostname": node});
    }
    spec
}

async fn unschedulable_message(client: &Client, name: &str) -> String {
    let api = Api::<Pod>::namespaced(client.clone(), "default");
    eventually(&format!("{name} marked unschedulable"), WAIT, || async {
        api.get(name)
            .await
            .ok()?
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "PodScheduled" && c.status == "False")?
            .message
    })
    .await
}

/// Follows `victim` until it is deleted; returns the conditions it had last.
async fn conditions_when_deleted(
    mut events: impl futures::Stream<Item = Result<kube::api::WatchEvent<Pod>, kube::Error>> + Unpin,
    victim: &str,
) -> Vec<k8s_openapi::api::core::v1::PodCondition> {
    let mut last = Vec::new();
    tokio::time::timeout(WAIT, async {
        while let Some(Ok(event)) = events.next().await {
            match event {
                kube::api::WatchEvent::Modified(p)
                    if p.metadata.name.as_deref() == Some(victim) =>
                {
                    last = p.status.and_then(|s| s.conditions).unwrap_or_default();
                }
                kube::api::WatchEvent::Deleted(p) if p.metadata.name.as_deref() == Some(victim) => {
                    return;
                }
                _ => {}
            }
        }
        panic!("the pod watch ended before {victim} was deleted");
    })
    .await
    .unwrap_or_else(|_| panic!("{victim} was not deleted within {WAIT:?}"));
    last
}

/// The pod-priority-preemption page's behaviour through the API: `preemptionPolicy: Never`
/// waits without preempting; a higher-priority pod evicts the fewest, lowest pods, sparing one a
/// PodDisruptionBudget guards while another victim will do; victims get the DisruptionTarget
/// condition and a Preempted Event; the preemptor is nominated and then placed there, and a pod
/// of its priority that was waiting longer does not take the room it made.
#[tokio::test]
async fn a_higher_priority_pod_preempts_the_fewest_and_lowest_pods_it_needs() {
    let c = cluster(2, SchedulerConfiguration::default()).await;
    priority_classes(
        &c.client,
        &[
            ("low", 10),
            ("mid", 20),
            ("high", 1000),
            ("high-never", 1000),
        ],
    )
    .await;
    let pdbs = Api::<k8s_openapi::api::policy::v1::PodDisruptionBudget>::namespaced(
        c.client.clone(),
        "default",
    );
    let pdb = serde_json::from_value(json!({
        "metadata": {"name": "guarded"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
    }))
    .unwrap();
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    // What the disruption controller would write: nothing may go. (Made first, so the
    // scheduler has long seen it when the preemptor comes; a budget without status allows
    // nothing either.)
    pdbs.patch_status(
        "guarded",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"status": {"disruptionsAllowed": 0, "currentHealthy": 1,
                                        "desiredHealthy": 1, "expectedPods": 1}}),
        ),
    )
    .await
    .unwrap();
    let pods = Api::<Pod>::namespaced(c.client.clone(), "default");
    // sim-node-0: a guarded low pod and a mid pod; sim-node-1: two high pods (no victims).
    create_pod(
        &c.client,
        "guarded",
        half_node("low", Some("sim-node-0")),
        json!({"app": "guarded"}),
    )
    .await;
    create_pod(
        &c.client,
        "mid",
        half_node("mid", Some("sim-node-0")),
        json!({"app": "mid"}),
    )
    .await;
    create_pod(
        &c.client,
        "keep-1",
        half_node("high", Some("sim-node-1")),
        json!({}),
    )
    .await;
    create_pod(
        &c.client,
        "keep-2",
        half_node("high", Some("sim-node-1")),
        json!({}),
    )
    .await;
    for name in ["guarded", "mid", "keep-1", "keep-2"] {
        running_on(&c.client, name).await;
    }
    // preemptionPolicy: Never waits for room and evicts nobody.
    create_pod(
        &c.client,
        "patient",
        half_node("high-never", None),
        json!({}),
    )
    .await;
    assert_eq!(
        unschedulable_message(&c.client, "patient").await,
        "0/2 nodes are available: 2 Insufficient cpu. \
         preemption: not eligible due to preemptionPolicy=Never."
    );

    let list = pods.list(&ListParams::default()).await.unwrap();
    let watch = pods
        .watch(
            &kube::api::WatchParams::default(),
            list.metadata.resource_version.as_deref().unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    create_pod(&c.client, "urgent", half_node("high", None), json!({})).await;
    // Without the budget the lowest pod (guarded) would go; with it, the mid one does.
    let conditions = conditions_when_deleted(watch, "mid").await;
    let target = conditions
        .iter()
        .find(|c| c.type_ == "DisruptionTarget")
        .expect("the victim got DisruptionTarget before deletion");
    assert_eq!(target.status, "True");
    assert_eq!(target.reason.as_deref(), Some("PreemptionByScheduler"));
    assert_eq!(
        target.message.as_deref(),
        Some("default-scheduler: preempting to accommodate a higher priority pod")
    );
    let urgent = running_on(&c.client, "urgent").await;
    assert_eq!(node_of(&urgent), "sim-node-0");
    assert_eq!(
        urgent.status.unwrap().nominated_node_name.as_deref(),
        Some("sim-node-0")
    );
    let urgent_uid = urgent.metadata.uid.unwrap();
    let events = Api::<Event>::namespaced(c.client.clone(), "default");
    eventually("the Preempted event on the victim", WAIT, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("Preempted")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("mid")
                && e.related.as_ref().and_then(|r| r.name.as_deref()) == Some("urgent")
                && e.note.as_deref()
                    == Some(format!("Preempted by pod {urgent_uid} on node sim-node-0").as_str())
        })
    })
    .await;
    // Nobody else went, and the patient pod (same priority, older) did not take the room.
    for name in ["guarded", "keep-1", "keep-2"] {
        running_on(&c.client, name).await;
    }
    let patient = pods.get("patient").await.unwrap();
    assert!(patient.spec.unwrap().node_name.is_none());
    assert!(patient.status.unwrap().nominated_node_name.is_none());
}

/// An extender with a preemptVerb reviews the candidates as kube-scheduler sends them (victims
/// by UID to a nodeCacheCapable extender, whole pods otherwise) and its answer decides: the node
/// it drops is not used, the victims it names are the ones evicted, and no node means no
/// preemption.
#[tokio::test]
async fn an_extenders_preempt_answer_replaces_the_candidates_node_names() {
    extender_preempt_answer_replaces_the_candidates(true).await;
}

#[tokio::test]
async fn an_extenders_preempt_answer_replaces_the_candidates_full_pods() {
    extender_preempt_answer_replaces_the_candidates(false).await;
}

async fn extender_preempt_answer_replaces_the_candidates(node_cache_capable: bool) {
    let sent: Arc<std::sync::Mutex<Option<Value>>> = Arc::default();
    let answer: Arc<std::sync::Mutex<Value>> = Arc::new(std::sync::Mutex::new(json!({})));
    let app = {
        let (sent, answer) = (sent.clone(), answer.clone());
        axum::Router::new().route(
            "/ext/preempt",
            post(move |Json(args): Json<Value>| {
                let (sent, answer) = (sent.clone(), answer.clone());
                async move {
                    *sent.lock().unwrap() = Some(args);
                    let answer = answer.lock().unwrap().clone();
                    Json(json!({"NodeNameToMetaVictims": answer}))
                }
            }),
        )
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let config = SchedulerConfiguration::parse(&format!(
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
extenders:
- urlPrefix: http://{addr}/ext
  preemptVerb: preempt
  nodeCacheCapable: {node_cache_capable}
  httpTimeout: 1s
"
    ))
    .unwrap();
    let c = cluster(2, config).await;
    priority_classes(&c.client, &[("low", 10), ("mid", 20), ("high", 1000)]).await;
    create_pod(
        &c.client,
        "x",
        half_node("low", Some("sim-node-0")),
        json!({}),
    )
    .await;
    create_pod(
        &c.client,
        "keep",
        half_node("high", Some("sim-node-0")),
        json!({}),
    )
    .await;
    create_pod(
        &c.client,
        "y-low",
        half_node("low", Some("sim-node-1")),
        json!({}),
    )
    .await;
    create_pod(
        &c.client,
        "y-mid",
        half_node("mid", Some("sim-node-1")),
        json!({}),
    )
    .await;
    let mut uid = BTreeMap::new();
    for name in ["x", "keep", "y-low", "y-mid"] {
        let pod = running_on(&c.client, name).await;
        uid.insert(name, pod.metadata.uid.unwrap());
    }
    // The extender drops sim-node-0 and would rather lose y-mid than y-low.
    *answer.lock().unwrap() =
        json!({"sim-node-1": {"Pods": [{"UID": uid["y-mid"]}], "NumPDBViolations": 0}});
    create_pod(&c.client, "urgent", half_node("high", None), json!({})).await;
    let urgent = running_on(&c.client, "urgent").await;
    assert_eq!(node_of(&urgent), "sim-node-1");
    let args = sent.lock().unwrap().clone().unwrap();
    assert_eq!(args["Pod"]["metadata"]["name"], "urgent");
    let sent_victims = if node_cache_capable {
        assert!(args["NodeNameToVictims"].is_null(), "{args}");
        args["NodeNameToMetaVictims"].clone()
    } else {
        assert!(args["NodeNameToMetaVictims"].is_null(), "{args}");
        // Whole pods: compared by UID after checking they are pods.
        let full = args["NodeNameToVictims"].as_object().unwrap();
        let by_uid: serde_json::Map<String, Value> = full
            .iter()
            .map(|(node, v)| {
                let pods: Vec<Value> = v["Pods"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| {
                        assert!(p["spec"]["containers"].is_array(), "a whole pod: {p}");
                        json!({"UID": p["metadata"]["uid"]})
                    })
                    .collect();
                let victims = json!({"Pods": pods, "NumPDBViolations": v["NumPDBViolations"]});
                (node.clone(), victims)
            })
            .collect();
        Value::Object(by_uid)
    };
    assert_eq!(
        sent_victims,
        json!({
            "sim-node-0": {"Pods": [{"UID": uid["x"]}], "NumPDBViolations": 0},
            "sim-node-1": {"Pods": [{"UID": uid["y-low"]}], "NumPDBViolations": 0},
        })
    );
    let pods = Api::<Pod>::namespaced(c.client.clone(), "default");
    eventually("y-mid deleted", WAIT, || async {
        pods.get_opt("y-mid").await.ok()?.is_none().then_some(())
    })
    .await;
    for name in ["x", "keep", "y-low"] {
        assert!(
            pods.get_opt(name).await.unwrap().is_some(),
            "{name} survived"
        );
    }

    // An empty answer means no preemption at all.
    *answer.lock().unwrap() = json!({});
    create_pod(&c.client, "also-urgent", half_node("high", None), json!({})).await;
    assert_eq!(
        unschedulable_message(&c.client, "also-urgent").await,
        "0/2 nodes are available: 2 Insufficient cpu. \
         preemption: no candidate node for preemption"
    );
    for name in ["x", "keep", "y-low", "urgent"] {
        assert!(
            pods.get_opt(name).await.unwrap().is_some(),
            "{name} survived"
        );
    }
}
