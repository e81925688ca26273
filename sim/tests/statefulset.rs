//! The StatefulSet controller against a running sim with its scheduler and kubelets, through the
//! kube client only: ordinal pods created in order (OrderedReady) or all at once (Parallel),
//! scaled up and down through the `/scale` subresource, deleted and failed pods recreated with
//! the same name, a template change rolled out above a partition, and claims from
//! volumeClaimTemplates. Order is checked on a watch of the pods begun before the set exists, so
//! what the controller did, and in what order, is seen event by event rather than sampled.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{
    DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::{Api, Client, ResourceExt as _};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use telemesh_runtime::testing::eventually;
use telemesh_sim::cluster::controllers::statefulset::{
    POD_INDEX_LABEL, POD_NAME_LABEL, REVISION_LABEL,
};
use telemesh_sim::cluster::kubelet::{CRASH_BACKOFF, Kubelet};
use telemesh_sim::cluster::pod_state::{is_running_and_ready, phase};
use telemesh_sim::cluster::scheduler;
use telemesh_sim::{Sim, SimConfig};

const NS: &str = "default";
const WITHIN: Duration = Duration::from_secs(20);
/// A scheduler name nothing serves: such pods stay Pending until bound by hand.
const UNSERVED: &str = "telemesh-unscheduled";

/// A sim with two nodes, their kubelets, the scheduler and the controllers; dropping it stops them.
struct Cluster {
    _sim: Sim,
    client: Client,
    stop: CancellationToken,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn cluster() -> Cluster {
    telemesh_runtime::telemetry::init(telemesh_runtime::cli::LogFormat::Text, "warn");
    let sim = Sim::start(SimConfig::default()).await.unwrap();
    telemesh_sim::nodes::create_nodes(&sim.server, 2).unwrap();
    let client = sim.client().await.unwrap();
    let stop = CancellationToken::new();
    let (_faults_tx, faults) = watch::channel(Vec::new());
    for i in 0..2u8 {
        let kubelet = Kubelet {
            node: format!("sim-node-{i}"),
            index: i,
            backoff: CRASH_BACKOFF,
            host_root: None,
            workloads: sim.workloads.clone(),
        };
        tokio::spawn(kubelet.run(client.clone(), faults.clone(), stop.clone()));
    }
    let (decisions, _) = broadcast::channel(64);
    tokio::spawn(scheduler::run(
        client.clone(),
        scheduler::Settings::default(),
        decisions,
        stop.clone(),
    ));
    tokio::spawn(telemesh_sim::cluster::controllers::run(
        client.clone(),
        stop.clone(),
    ));
    Cluster {
        _sim: sim,
        client,
        stop,
    }
}

/// A StatefulSet `name` of busybox pods labelled `app: name`, with `extra` merged into it.
fn statefulset(name: &str, replicas: i32, extra: Value) -> StatefulSet {
    let mut v = json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}
            }
        }
    });
    json_patch::merge(&mut v, &extra);
    serde_json::from_value(v).unwrap()
}

/// What a watch of the set's pods saw, in order: (event, pod name, pod).
type Log = Arc<Mutex<Vec<(&'static str, String, Pod)>>>;

/// Records every pod event for `app=<name>` from now on.
async fn record_pods(client: &Client, name: &str) -> Log {
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    let selector = format!("app={name}");
    let rv = api
        .list(&ListParams::default().labels(&selector))
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = api
        .watch(&WatchParams::default().labels(&selector).timeout(290), &rv)
        .await
        .unwrap()
        .boxed();
    let log: Log = Arc::default();
    let sink = log.clone();
    tokio::spawn(async move {
        while let Some(Ok(event)) = stream.next().await {
            let (kind, pod) = match event {
                WatchEvent::Added(p) => ("ADDED", p),
                WatchEvent::Modified(p) => ("MODIFIED", p),
                WatchEvent::Deleted(p) => ("DELETED", p),
                _ => continue,
            };
            sink.lock().push((kind, pod.name_any(), pod));
        }
    });
    log
}

/// The names in the order of their `kind` events.
fn names_of(log: &Log, kind: &str) -> Vec<String> {
    log.lock()
        .iter()
        .filter(|(k, _, _)| *k == kind)
        .map(|(_, n, _)| n.clone())
        .collect()
}

/// Waits until the set's pods are exactly `names`, all Running and Ready; returns them by name.
async fn ready_pods(client: &Client, app: &str, names: &[&str]) -> BTreeMap<String, Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    let want: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    eventually(
        &format!("pods {names:?} Running and Ready"),
        WITHIN,
        || async {
            let pods = api
                .list(&ListParams::default().labels(&format!("app={app}")))
                .await
                .ok()?;
            let by_name: BTreeMap<String, Pod> =
                pods.items.into_iter().map(|p| (p.name_any(), p)).collect();
            (by_name.keys().cloned().collect::<Vec<_>>() == want
                && by_name.values().all(is_running_and_ready))
            .then_some(by_name)
        },
    )
    .await
}

async fn set_status(
    client: &Client,
    name: &str,
    want: impl Fn(&StatefulSet) -> bool,
) -> StatefulSet {
    let api: Api<StatefulSet> = Api::namespaced(client.clone(), NS);
    eventually(&format!("StatefulSet {name}'s status"), WITHIN, || async {
        api.get(name).await.ok().filter(|s| want(s))
    })
    .await
}

#[tokio::test]
async fn ordered_ready_creates_each_ordinal_after_the_previous_is_ready() {
    let c = cluster().await;
    let log = record_pods(&c.client, "web").await;
    let sets: Api<StatefulSet> = Api::namespaced(c.client.clone(), NS);
    sets.create(&PostParams::default(), &statefulset("web", 3, json!({})))
        .await
        .unwrap();
    let pods = ready_pods(&c.client, "web", &["web-0", "web-1", "web-2"]).await;

    assert_eq!(names_of(&log, "ADDED"), ["web-0", "web-1", "web-2"]);
    // When web-i appeared, the last state seen of web-(i-1) was Running and Ready.
    let events = log.lock().clone();
    for i in 1..3 {
        let added = events
            .iter()
            .position(|(k, n, _)| *k == "ADDED" && *n == format!("web-{i}"))
            .unwrap();
        let previous = events[..added]
            .iter()
            .rev()
            .find(|(_, n, _)| *n == format!("web-{}", i - 1))
            .unwrap();
        assert!(
            is_running_and_ready(&previous.2),
            "web-{i} created before web-{} was ready",
            i - 1
        );
    }

    let set = sets.get("web").await.unwrap();
    let web1 = &pods["web-1"];
    let labels = web1.labels();
    assert_eq!(labels[POD_NAME_LABEL], "web-1");
    assert_eq!(labels[POD_INDEX_LABEL], "1");
    let spec = web1.spec.as_ref().unwrap();
    assert_eq!(spec.hostname.as_deref(), Some("web-1"));
    assert_eq!(spec.subdomain.as_deref(), Some("web"));
    let owner = &web1.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("StatefulSet", set.uid().unwrap().as_str(), Some(true))
    );
    let set = set_status(&c.client, "web", |s| {
        s.status.as_ref().and_then(|st| st.ready_replicas) == Some(3)
    })
    .await;
    let status = set.status.unwrap();
    assert_eq!(status.replicas, 3);
    assert_eq!(status.available_replicas, Some(3));
    assert_eq!(status.current_replicas, Some(3));
    assert_eq!(status.updated_replicas, Some(3));
    assert_eq!(status.observed_generation, set.metadata.generation);
    let revision = status.update_revision.unwrap();
    assert_eq!(status.current_revision.as_deref(), Some(revision.as_str()));
    assert_eq!(labels[REVISION_LABEL], revision);
    let revisions: Api<ControllerRevision> = Api::namespaced(c.client.clone(), NS);
    let rev = revisions.get(&revision).await.unwrap();
    assert_eq!(rev.revision, 1);
}

#[tokio::test]
async fn parallel_creates_every_pod_without_waiting_for_readiness() {
    let c = cluster().await;
    let sets: Api<StatefulSet> = Api::namespaced(c.client.clone(), NS);
    // No scheduler serves these pods, so none is ever ready: only Parallel creates them all.
    let set = statefulset(
        "par",
        3,
        json!({"spec": {"podManagementPolicy": "Parallel",
                        "template": {"spec": {"schedulerName": UNSERVED}}}}),
    );
    sets.create(&PostParams::default(), &set).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), NS);
    eventually("three pending pods", WITHIN, || async {
        let list = pods
            .list(&ListParams::default().labels("app=par"))
            .await
            .ok()?;
        let mut names: Vec<String> = list.items.iter().map(|p| p.name_any()).collect();
        names.sort();
        (names == ["par-0", "par-1", "par-2"]).then_some(())
    })
    .await;
    set_status(&c.client, "par", |s| {
        s.status
            .as_ref()
            .is_some_and(|st| st.replicas == 3 && st.ready_replicas == Some(0))
    })
    .await;
}

#[tokio::test]
async fn scale_subresource_scales_up_in_order_and_down_from_the_highest_ordinal() {
    let c = cluster().await;
    let sets: Api<StatefulSet> = Api::namespaced(c.client.clone(), NS);
    sets.create(&PostParams::default(), &statefulset("db", 2, json!({})))
        .await
        .unwrap();
    ready_pods(&c.client, "db", &["db-0", "db-1"]).await;
    let log = record_pods(&c.client, "db").await;

    let scale = sets
        .patch_scale(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(4));
    ready_pods(&c.client, "db", &["db-0", "db-1", "db-2", "db-3"]).await;
    assert_eq!(names_of(&log, "ADDED"), ["db-2", "db-3"]);
    let scale = sets.get_scale("db").await.unwrap();
    assert_eq!(
        scale.status.as_ref().unwrap().selector.as_deref(),
        Some("app=db")
    );

    let mut scale = sets.get_scale("db").await.unwrap();
    scale.spec.as_mut().unwrap().replicas = Some(1);
    sets.replace_scale("db", &PostParams::default(), &scale)
        .await
        .unwrap();
    ready_pods(&c.client, "db", &["db-0"]).await;
    assert_eq!(names_of(&log, "DELETED"), ["db-3", "db-2", "db-1"]);
    set_status(&c.client, "db", |s| {
        s.status
            .as_ref()
            .is_some_and(|st| st.replicas == 1 && st.ready_replicas == Some(1))
    })
    .await;
}

#[tokio::test]
async fn deleted_and_failed_pods_come_back_with_the_same_name() {
    let c = cluster().await;
    let sets: Api<StatefulSet> = Api::namespaced(c.client.clone(), NS);
    sets.create(&PostParams::default(), &statefulset("kv", 2, json!({})))
        .await
        .unwrap();
    let before = ready_pods(&c.client, "kv", &["kv-0", "kv-1"]).await;
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), NS);

    pods.delete("kv-1", &DeleteParams::default()).await.unwrap();
    let after = ready_pods(&c.client, "kv", &["kv-0", "kv-1"]).await;
    assert_ne!(after["kv-1"].uid(), before["kv-1"].uid(), "a new pod");
    assert_eq!(
        after["kv-0"].uid(),
        before["kv-0"].uid(),
        "the other is untouched"
    );

    // A pod that failed (as the kubelet would report it) is replaced too.
    pods.patch_status(
        "kv-0",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Failed"}})),
    )
    .await
    .unwrap();
    let replaced = eventually("kv-0 replaced", WITHIN, || async {
        let p = pods.get("kv-0").await.ok()?;
        (p.uid() != after["kv-0"].uid() && is_running_and_ready(&p)).then_some(p)
    })
    .await;
    assert_eq!(replaced.labels()[POD_NAME_LABEL], "kv-0");
}

#[tokio::test]
async fn a_template_change_rolls_out_above_the_partition_highest_ordinal_first() {
    let c = cluster().await;
    let sets: Api<StatefulSet> = Api::namespaced(c.client.clone(), NS);
    let set = statefulset(
        "roll",
        3,
        json!({"spec": {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}}}),
    );
    sets.create(&PostParams::default(), &set).await.unwrap();
    let old_pods = ready_pods(&c.client, "roll", &["roll-0", "roll-1", "roll-2"]).await;
    let old = old_pods["roll-0"].labels()[REVISION_LABEL].clone();
    let log = record_pods(&c.client, "roll").await;

    let image = json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "busybox:1.37"}]}}}});
    sets.patch("roll", &PatchParams::default(), &Patch::Strategic(image))
        .await
        .unwrap();
    let set = set_status(&c.client, "roll", |s| {
        s.status
            .as_ref()
            .is_some_and(|st| st.updated_replicas == Some(2) && st.ready_replicas == Some(3))
    })
    .await;
    let status = set.status.unwrap();
    let new = status.update_revision.clone().unwrap();
    assert_ne!(new, old, "a new revision");
    assert_eq!(
        status.current_revision.as_deref(),
        Some(old.as_str()),
        "not complete below the partition"
    );
    assert_eq!(status.current_replicas, Some(1));
    let pods = ready_pods(&c.client, "roll", &["roll-0", "roll-1", "roll-2"]).await;
    let revision_of = |n: &str| pods[n].labels()[REVISION_LABEL].clone();
    assert_eq!(
        [
            revision_of("roll-0"),
            revision_of("roll-1"),
            revision_of("roll-2")
        ],
        [old.clone(), new.clone(), new.clone()]
    );
    let image_of = |p: &Pod| {
        p.spec.as_ref().unwrap().containers[0]
            .image
            .clone()
            .unwrap()
    };
    assert_eq!(image_of(&pods["roll-0"]), "busybox:1.36");
    assert_eq!(image_of(&pods["roll-2"]), "busybox:1.37");
    assert_eq!(names_of(&log, "DELETED"), ["roll-2", "roll-1"]);
    let revisions: Api<ControllerRevision> = Api::namespaced(c.client.clone(), NS);
    assert_eq!(revisions.get(&new).await.unwrap().revision, 2);

    // A pod below the partition that is deleted comes back at the current (old) revision. (As
    // upstream counts only the pods that exist, the sync that recreates it also finds every pod
    // updated and advances currentRevision, so the final check below waits for all three.)
    Api::<Pod>::namespaced(c.client.clone(), NS)
        .delete("roll-0", &DeleteParams::default())
        .await
        .unwrap();
    let pods = eventually("roll-0 recreated", WITHIN, || async {
        let pods = ready_pods(&c.client, "roll", &["roll-0", "roll-1", "roll-2"]).await;
        (pods["roll-0"].uid() != old_pods["roll-0"].uid()).then_some(pods)
    })
    .await;
    assert_eq!(pods["roll-0"].labels()[REVISION_LABEL], old);

    // Partition 0 finishes the rollout and the current revision catches up.
    sets.patch(
        "roll",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}})),
    )
    .await
    .unwrap();
    set_status(&c.client, "roll", |s| {
        s.status.as_ref().is_some_and(|st| {
            st.current_revision.as_deref() == Some(new.as_str())
                && st.current_replicas == Some(3)
                && st.ready_replicas == Some(3)
        })
    })
    .await;
    let pods = ready_pods(&c.client, "roll", &["roll-0", "roll-1", "roll-2"]).await;
    assert!(pods.values().all(|p| p.labels()[REVISION_LABEL] == new));
}

#[tokio::test]
async fn claims_from_templates_are_created_for_each_pod_and_retained() {
    let c = cluster().await;
    let sets: Api<StatefulSet> = Api::namespaced(c.client.clone(), NS);
    let set = statefulset(
        "vol",
        2,
        json!({"spec": {"volumeClaimTemplates": [{
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
        }]}}),
    );
    let log = record_pods(&c.client, "vol").await;
    sets.create(&PostParams::default(), &set).await.unwrap();
    let pods = ready_pods(&c.client, "vol", &["vol-0", "vol-1"]).await;
    let rv = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        // sim's resourceVersions are one counter, as etcd's revisions are.
        meta.resource_version
            .as_deref()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(c.client.clone(), NS);
    for (pod, claim) in [("vol-0", "data-vol-0"), ("vol-1", "data-vol-1")] {
        let volumes = pods[pod].spec.as_ref().unwrap().volumes.clone().unwrap();
        let data = volumes.iter().find(|v| v.name == "data").unwrap();
        assert_eq!(
            data.persistent_volume_claim.as_ref().unwrap().claim_name,
            claim
        );
        let pvc = claims.get(claim).await.unwrap();
        assert_eq!(pvc.labels()["app"], "vol");
        let added = log
            .lock()
            .iter()
            .find(|(k, n, _)| *k == "ADDED" && n == pod)
            .map(|(_, _, p)| rv(&p.metadata))
            .unwrap();
        assert!(rv(&pvc.metadata) < added, "{claim} created before {pod}");
        assert!(
            pvc.metadata.owner_references.is_none(),
            "Retain: claims are not owned"
        );
    }
    let claim_uid = claims.get("data-vol-1").await.unwrap().uid();

    // Scaling down keeps the claim; scaling up again reuses it.
    sets.patch_scale(
        "vol",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .unwrap();
    ready_pods(&c.client, "vol", &["vol-0"]).await;
    assert_eq!(claims.get("data-vol-1").await.unwrap().uid(), claim_uid);
    sets.patch_scale(
        "vol",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 2}})),
    )
    .await
    .unwrap();
    ready_pods(&c.client, "vol", &["vol-0", "vol-1"]).await;
    assert_eq!(claims.get("data-vol-1").await.unwrap().uid(), claim_uid);
}

#[tokio::test]
async fn unscheduled_ordered_pods_wait_for_a_bind_as_wams_test_c() {
    let c = cluster().await;
    let sets: Api<StatefulSet> = Api::namespaced(c.client.clone(), NS);
    // WAM's test-c: pods naming a scheduler nobody runs, an exec readiness probe, a claim.
    let set = statefulset(
        "test-c",
        2,
        json!({"spec": {
            "template": {"spec": {"schedulerName": UNSERVED, "containers": [{
                "name": "test", "image": "registry.k8s.io/busybox:1.27.2",
                "readinessProbe": {"exec": {"command": ["cat", "/tmp/ready"]},
                                   "initialDelaySeconds": 1, "periodSeconds": 5}}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]
        }}),
    );
    sets.create(&PostParams::default(), &set).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), NS);
    let pending = eventually("test-c-0 pending", WITHIN, || async {
        pods.get_opt("test-c-0").await.ok().flatten()
    })
    .await;
    assert_eq!(pending.spec.as_ref().unwrap().node_name, None);
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(c.client.clone(), NS);
    claims.get("data-test-c-0").await.unwrap();

    let log = record_pods(&c.client, "test-c").await;
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "test-c-0"},
                         "target": {"apiVersion": "v1", "kind": "Node", "name": "sim-node-1"}});
    let _: Value = pods
        .create_subresource("binding", "test-c-0", &PostParams::default(), &binding)
        .await
        .unwrap();
    let next = eventually("test-c-1 created", WITHIN, || async {
        pods.get_opt("test-c-1").await.ok().flatten()
    })
    .await;
    assert_eq!(
        next.spec.as_ref().unwrap().node_name,
        None,
        "test-c-1 waits for its own bind"
    );
    // test-c-1 came only once test-c-0 was Running and Ready, after its probe's initial delay.
    let events = log.lock().clone();
    let added = events
        .iter()
        .position(|(k, n, _)| *k == "ADDED" && n == "test-c-1")
        .unwrap();
    let before: Vec<&Pod> = events[..added]
        .iter()
        .filter(|(_, n, _)| n == "test-c-0")
        .map(|(_, _, p)| p)
        .collect();
    assert!(before.last().is_some_and(|p| is_running_and_ready(p)));
    assert!(
        before
            .iter()
            .any(|p| phase(p) == "Running" && !is_running_and_ready(p)),
        "test-c-0 ran unready until its first probe"
    );
}
