//! The workload controllers (`telemesh_sim::cluster::controllers`) against a running sim, through
//! the kube client only: Deployments get ReplicaSets and pods, scale, roll out new templates and
//! are garbage-collected; Jobs complete and fail. The tests play kubelet by patching pod status.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource as _, ResourceExt as _};
use serde_json::json;
use telemesh_runtime::testing::eventually;
use telemesh_sim::{Sim, SimConfig};
use tokio_util::sync::CancellationToken;

const NS: &str = "default";
const WITHIN: Duration = Duration::from_secs(10);

/// A sim with the controllers running; dropping it stops both.
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
    let sim = Sim::start(SimConfig::default()).await.expect("sim starts");
    let client = sim.client().await.expect("client for sim");
    let stop = CancellationToken::new();
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

fn deployment(name: &str, replicas: i32, image: &str) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}, "annotations": {"note": "from-template"}},
                "spec": {"containers": [{"name": "main", "image": image}]}
            }
        }
    }))
    .unwrap()
}

fn job(name: &str, completions: i32, parallelism: i32, backoff_limit: i32) -> Job {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "completions": completions,
            "parallelism": parallelism,
            "backoffLimit": backoff_limit,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]}
            }
        }
    }))
    .unwrap()
}

fn controlled_by(obj: &impl kube::Resource, uid: &str) -> bool {
    obj.owner_references()
        .iter()
        .any(|r| r.controller == Some(true) && r.uid == uid)
}

/// Returns the pods whose controller is the object with `uid`, not finished, by name.
async fn active_pods_of(c: &Client, uid: &str) -> Vec<Pod> {
    let mut pods: Vec<Pod> = Api::<Pod>::namespaced(c.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| controlled_by(p, uid))
        .filter(|p| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Succeeded" | "Failed"))
        })
        .collect();
    pods.sort_by_key(|p| p.name_any());
    pods
}

async fn replicasets_of(c: &Client, uid: &str) -> Vec<ReplicaSet> {
    Api::<ReplicaSet>::namespaced(c.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|rs| controlled_by(rs, uid))
        .collect()
}

async fn set_pod_status(c: &Client, name: &str, status: serde_json::Value) {
    Api::<Pod>::namespaced(c.clone(), NS)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .unwrap();
}

fn ready_status() -> serde_json::Value {
    json!({
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z"}]
    })
}

/// Creates a Deployment and waits until its single ReplicaSet has `replicas` pods.
async fn deploy(c: &Client, d: Deployment, replicas: usize) -> (Deployment, ReplicaSet, Vec<Pod>) {
    let d = Api::<Deployment>::namespaced(c.clone(), NS)
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    let uid = d.uid().unwrap();
    let (rs, pods) = eventually("a ReplicaSet with its pods", WITHIN, || async {
        let rss = replicasets_of(c, &uid).await;
        let [rs] = rss.as_slice() else { return None };
        let pods = active_pods_of(c, &rs.uid().unwrap()).await;
        (pods.len() == replicas).then(|| (rs.clone(), pods))
    })
    .await;
    (d, rs, pods)
}

fn condition(d: &Deployment, type_: &str) -> Option<(String, Option<String>)> {
    d.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

fn job_condition(j: &Job, type_: &str) -> Option<(String, Option<String>)> {
    j.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

#[tokio::test]
async fn a_deployment_gets_a_replicaset_and_pods_with_labels_owners_and_status() {
    let k = cluster().await;
    let (d, rs, pods) = deploy(&k.client, deployment("web", 3, "nginx:1"), 3).await;

    let hash = rs.labels().get("pod-template-hash").cloned().unwrap();
    assert!(
        !hash.is_empty()
            && hash
                .chars()
                .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit())
    );
    assert_eq!(rs.name_any(), format!("web-{hash}"));
    assert_eq!(rs.labels().get("app").map(String::as_str), Some("web"));
    assert_eq!(
        rs.annotations()
            .get("deployment.kubernetes.io/revision")
            .map(String::as_str),
        Some("1")
    );
    let spec = rs.spec.clone().unwrap();
    assert_eq!(spec.replicas, Some(3));
    let sel = spec.selector.match_labels.unwrap();
    assert_eq!(sel.get("pod-template-hash"), Some(&hash));
    let owner = &rs.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Deployment", "web")
    );
    assert_eq!(
        (owner.controller, owner.block_owner_deletion),
        (Some(true), Some(true))
    );

    for p in &pods {
        assert_eq!(
            p.metadata.generate_name.as_deref(),
            Some(format!("web-{hash}-").as_str())
        );
        assert!(p.name_any().starts_with(&format!("web-{hash}-")));
        assert_eq!(p.namespace().as_deref(), Some(NS));
        assert_eq!(p.labels().get("app").map(String::as_str), Some("web"));
        assert_eq!(p.labels().get("pod-template-hash"), Some(&hash));
        assert_eq!(
            p.annotations().get("note").map(String::as_str),
            Some("from-template")
        );
        let owner = &p.owner_references()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("ReplicaSet", rs.uid().unwrap().as_str())
        );
        assert_eq!(
            (owner.controller, owner.block_owner_deletion),
            (Some(true), Some(true))
        );
        let image = p.spec.as_ref().unwrap().containers[0].image.clone();
        assert_eq!(image.as_deref(), Some("nginx:1"));
    }

    // Play kubelet: the pods run and turn ready; both statuses follow.
    for p in &pods {
        set_pod_status(&k.client, &p.name_any(), ready_status()).await;
    }
    let rss = Api::<ReplicaSet>::namespaced(k.client.clone(), NS);
    eventually("ReplicaSet status counts 3 ready pods", WITHIN, || async {
        let s = rss.get(&rs.name_any()).await.ok()?.status?;
        (s.replicas == 3
            && s.ready_replicas == Some(3)
            && s.available_replicas == Some(3)
            && s.fully_labeled_replicas == Some(3)
            && s.observed_generation == rs.meta().generation)
            .then_some(())
    })
    .await;
    let deploys = Api::<Deployment>::namespaced(k.client.clone(), NS);
    let d = eventually("Deployment available and progressed", WITHIN, || async {
        let got = deploys.get("web").await.ok()?;
        let s = got.status.clone()?;
        (s.replicas == Some(3)
            && s.updated_replicas == Some(3)
            && s.ready_replicas == Some(3)
            && s.available_replicas == Some(3)
            && s.observed_generation == d.meta().generation
            && condition(&got, "Progressing")
                == Some(("True".into(), Some("NewReplicaSetAvailable".into()))))
        .then_some(got)
    })
    .await;
    assert_eq!(
        condition(&d, "Available"),
        Some(("True".into(), Some("MinimumReplicasAvailable".into())))
    );
    assert_eq!(
        d.annotations()
            .get("deployment.kubernetes.io/revision")
            .map(String::as_str),
        Some("1")
    );
}

#[tokio::test]
async fn scaling_up_and_down_converges() {
    let k = cluster().await;
    let (_, rs, _) = deploy(&k.client, deployment("scale", 3, "nginx:1"), 3).await;
    let rs_uid = rs.uid().unwrap();
    let deploys = Api::<Deployment>::namespaced(k.client.clone(), NS);
    let rss = Api::<ReplicaSet>::namespaced(k.client.clone(), NS);
    for replicas in [5usize, 1] {
        deploys
            .patch(
                "scale",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": replicas}})),
            )
            .await
            .unwrap();
        eventually(
            &format!("{replicas} pods and statuses that say so"),
            WITHIN,
            || async {
                let pods = active_pods_of(&k.client, &rs_uid).await;
                let rs_status = rss.get(&rs.name_any()).await.ok()?.status?;
                let d_status = deploys.get("scale").await.ok()?.status?;
                let n = i32::try_from(replicas).unwrap();
                (pods.len() == replicas && rs_status.replicas == n && d_status.replicas == Some(n))
                    .then_some(())
            },
        )
        .await;
    }
    assert_eq!(
        replicasets_of(
            &k.client,
            &deploys.get("scale").await.unwrap().uid().unwrap()
        )
        .await
        .len(),
        1
    );
}

#[tokio::test]
async fn a_new_template_gets_a_new_replicaset_and_the_old_one_scales_to_zero() {
    let k = cluster().await;
    let (d, old_rs, _) = deploy(&k.client, deployment("roll", 3, "nginx:1"), 3).await;
    let deploys = Api::<Deployment>::namespaced(k.client.clone(), NS);
    deploys
        .patch(
            "roll",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "nginx:2"}]}}}})),
        )
        .await
        .unwrap();
    let d_uid = d.uid().unwrap();
    let old_uid = old_rs.uid().unwrap();
    let (new_rs, pods) = eventually(
        "a new ReplicaSet with 3 pods, the old one empty",
        WITHIN,
        || async {
            let rss = replicasets_of(&k.client, &d_uid).await;
            let new = rss.iter().find(|rs| rs.uid().unwrap() != old_uid)?.clone();
            let old = rss.iter().find(|rs| rs.uid().unwrap() == old_uid)?;
            let new_pods = active_pods_of(&k.client, &new.uid().unwrap()).await;
            let old_pods = active_pods_of(&k.client, &old_uid).await;
            (rss.len() == 2
                && new_pods.len() == 3
                && old_pods.is_empty()
                && old.spec.as_ref()?.replicas == Some(0))
            .then_some((new, new_pods))
        },
    )
    .await;
    assert_ne!(
        new_rs.labels().get("pod-template-hash"),
        old_rs.labels().get("pod-template-hash")
    );
    assert_eq!(
        new_rs
            .annotations()
            .get("deployment.kubernetes.io/revision")
            .map(String::as_str),
        Some("2")
    );
    for p in &pods {
        let image = p.spec.as_ref().unwrap().containers[0].image.clone();
        assert_eq!(image.as_deref(), Some("nginx:2"));
    }
    eventually(
        "Deployment status reports the new ReplicaSet",
        WITHIN,
        || async {
            let got = deploys.get("roll").await.ok()?;
            let s = got.status.clone()?;
            let rev = got
                .annotations()
                .get("deployment.kubernetes.io/revision")
                .cloned();
            (s.replicas == Some(3) && s.updated_replicas == Some(3) && rev.as_deref() == Some("2"))
                .then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn deleted_and_failed_pods_are_replaced() {
    let k = cluster().await;
    let (_, rs, pods) = deploy(&k.client, deployment("heal", 3, "nginx:1"), 3).await;
    let rs_uid = rs.uid().unwrap();
    let victim = pods[0].name_any();
    Api::<Pod>::namespaced(k.client.clone(), NS)
        .delete(&victim, &DeleteParams::default())
        .await
        .unwrap();
    let pods = eventually("the deleted pod replaced", WITHIN, || async {
        let pods = active_pods_of(&k.client, &rs_uid).await;
        (pods.len() == 3 && pods.iter().all(|p| p.name_any() != victim)).then_some(pods)
    })
    .await;

    let failed = pods[0].name_any();
    set_pod_status(&k.client, &failed, json!({"phase": "Failed"})).await;
    eventually("the failed pod deleted and replaced", WITHIN, || async {
        let pods = active_pods_of(&k.client, &rs_uid).await;
        let gone = Api::<Pod>::namespaced(k.client.clone(), NS)
            .get_opt(&failed)
            .await
            .ok()?
            .is_none();
        (gone && pods.len() == 3).then_some(())
    })
    .await;
}

#[tokio::test]
async fn deleting_a_deployment_collects_its_replicasets_and_pods() {
    let k = cluster().await;
    deploy(&k.client, deployment("gone", 2, "nginx:1"), 2).await;
    Api::<Deployment>::namespaced(k.client.clone(), NS)
        .delete("gone", &DeleteParams::default())
        .await
        .unwrap();
    let by_app = ListParams::default().labels("app=gone");
    eventually("no ReplicaSets or pods left", WITHIN, || async {
        let rss = Api::<ReplicaSet>::namespaced(k.client.clone(), NS)
            .list(&by_app)
            .await
            .ok()?;
        let pods = Api::<Pod>::namespaced(k.client.clone(), NS)
            .list(&by_app)
            .await
            .ok()?;
        (rss.items.is_empty() && pods.items.is_empty()).then_some(())
    })
    .await;
}

/// Plays kubelet for a Job until `done` says it finished: every pod still running gets `phase`.
/// Checks on the way that no more than `parallelism` pods run at once.
async fn run_job_until(
    c: &Client,
    name: &str,
    phase: &str,
    parallelism: usize,
    done: fn(&Job) -> bool,
) -> Job {
    let jobs = Api::<Job>::namespaced(c.clone(), NS);
    let uid = jobs.get(name).await.unwrap().uid().unwrap();
    eventually(&format!("Job {name} to finish"), WITHIN, || async {
        let active = active_pods_of(c, &uid).await;
        assert!(
            active.len() <= parallelism,
            "{} pods running, parallelism {parallelism}",
            active.len()
        );
        for p in &active {
            set_pod_status(c, &p.name_any(), json!({"phase": phase})).await;
        }
        let j = jobs.get(name).await.ok()?;
        done(&j).then_some(j)
    })
    .await
}

#[tokio::test]
async fn a_job_completes_once_its_completions_succeed() {
    let k = cluster().await;
    let jobs = Api::<Job>::namespaced(k.client.clone(), NS);
    let created = jobs
        .create(&PostParams::default(), &job("batch", 2, 1, 6))
        .await
        .unwrap();
    let uid = created.uid().unwrap();

    let first = eventually("the Job's first pod", WITHIN, || async {
        active_pods_of(&k.client, &uid).await.into_iter().next()
    })
    .await;
    assert_eq!(first.metadata.generate_name.as_deref(), Some("batch-"));
    for (label, value) in [
        ("batch.kubernetes.io/job-name", "batch"),
        ("job-name", "batch"),
        ("batch.kubernetes.io/controller-uid", uid.as_str()),
        ("controller-uid", uid.as_str()),
        ("app", "batch"),
    ] {
        assert_eq!(
            first.labels().get(label).map(String::as_str),
            Some(value),
            "label {label}"
        );
    }
    let owner = &first.owner_references()[0];
    assert_eq!((owner.kind.as_str(), owner.controller), ("Job", Some(true)));

    let j = run_job_until(&k.client, "batch", "Succeeded", 1, |j| {
        job_condition(j, "Complete").is_some_and(|(s, _)| s == "True")
    })
    .await;
    let s = j.status.clone().unwrap();
    assert_eq!(s.succeeded, Some(2));
    assert_eq!(s.active, Some(0));
    assert!(s.start_time.is_some() && s.completion_time.is_some());
    assert_eq!(
        job_condition(&j, "SuccessCriteriaMet")
            .map(|c| c.0)
            .as_deref(),
        Some("True")
    );
    let all = Api::<Pod>::namespaced(k.client.clone(), NS)
        .list(&ListParams::default().labels(&format!("batch.kubernetes.io/controller-uid={uid}")))
        .await
        .unwrap();
    assert_eq!(all.items.len(), 2, "one pod per completion, none extra");
}

#[tokio::test]
async fn a_job_whose_pods_fail_fails_after_its_backoff_limit() {
    let k = cluster().await;
    let jobs = Api::<Job>::namespaced(k.client.clone(), NS);
    jobs.create(&PostParams::default(), &job("flaky", 1, 1, 2))
        .await
        .unwrap();
    let j = run_job_until(&k.client, "flaky", "Failed", 1, |j| {
        job_condition(j, "Failed").is_some_and(|(s, _)| s == "True")
    })
    .await;
    assert_eq!(
        job_condition(&j, "Failed"),
        Some(("True".into(), Some("BackoffLimitExceeded".into())))
    );
    let s = j.status.clone().unwrap();
    assert_eq!(
        s.failed,
        Some(3),
        "backoffLimit 2 allows 2 failures; the third fails the Job"
    );
    assert_eq!(s.active, Some(0));
    assert!(
        active_pods_of(&k.client, &j.uid().unwrap())
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn a_suspended_job_gets_pods_only_once_resumed() {
    let k = cluster().await;
    let jobs = Api::<Job>::namespaced(k.client.clone(), NS);
    let mut spec = job("later", 1, 1, 6);
    spec.spec.as_mut().unwrap().suspend = Some(true);
    let created = jobs.create(&PostParams::default(), &spec).await.unwrap();
    let uid = created.uid().unwrap();
    eventually("the Job marked Suspended", WITHIN, || async {
        let j = jobs.get("later").await.ok()?;
        (job_condition(&j, "Suspended")?.0 == "True").then_some(())
    })
    .await;
    assert!(active_pods_of(&k.client, &uid).await.is_empty());
    jobs.patch(
        "later",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"suspend": false}})),
    )
    .await
    .unwrap();
    eventually("a pod once resumed", WITHIN, || async {
        (active_pods_of(&k.client, &uid).await.len() == 1).then_some(())
    })
    .await;
}

/// Returns every pod the Job with `uid` controls, finished or not, terminating or not.
async fn all_pods_of(c: &Client, uid: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(c.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| controlled_by(p, uid))
        .collect()
}

/// Creates a one-pod Job with `backoff_limit`, waits for its pod, plays kubelet to make it
/// Running and Ready, and deletes it (as kube-scheduler's preemption does). Returns the Job's
/// UID and the deleted pod's name.
async fn delete_the_running_pod(c: &Client, name: &str, backoff_limit: i32) -> (String, String) {
    let created = Api::<Job>::namespaced(c.clone(), NS)
        .create(&PostParams::default(), &job(name, 1, 1, backoff_limit))
        .await
        .unwrap();
    let uid = created.uid().unwrap();
    let pod = eventually("the Job's pod", WITHIN, || async {
        active_pods_of(c, &uid).await.into_iter().next()
    })
    .await;
    assert!(
        pod.finalizers()
            .iter()
            .any(|f| f == "batch.kubernetes.io/job-tracking"),
        "the pod carries the tracking finalizer: {:?}",
        pod.finalizers()
    );
    let victim = pod.name_any();
    set_pod_status(c, &victim, ready_status()).await;
    Api::<Pod>::namespaced(c.clone(), NS)
        .delete(&victim, &DeleteParams::default())
        .await
        .unwrap();
    (uid, victim)
}

// Upstream's Job controller (finalizer tracking, `isPodFailed`) counts a pod deleted before it
// succeeded as failed: with backoffLimit 0 the Job fails instead of starting another pod.
#[tokio::test]
async fn a_job_with_backoff_limit_0_fails_when_its_running_pod_is_deleted() {
    let k = cluster().await;
    let jobs = Api::<Job>::namespaced(k.client.clone(), NS);
    let (uid, victim) = delete_the_running_pod(&k.client, "once", 0).await;
    let j = eventually("the Job Failed", WITHIN, || async {
        let j = jobs.get("once").await.ok()?;
        (job_condition(&j, "Failed")?.0 == "True").then_some(j)
    })
    .await;
    assert_eq!(
        job_condition(&j, "Failed"),
        Some(("True".into(), Some("BackoffLimitExceeded".into())))
    );
    assert_eq!(
        job_condition(&j, "FailureTarget"),
        Some(("True".into(), Some("BackoffLimitExceeded".into())))
    );
    let s = j.status.clone().unwrap();
    assert_eq!(
        (s.failed, s.succeeded, s.active, s.terminating),
        (Some(1), Some(0), Some(0), Some(0))
    );
    assert_eq!(
        s.uncounted_terminated_pods.unwrap_or_default(),
        Default::default()
    );
    // No second pod was created, and the deleted one, released, is gone.
    let left = eventually("the deleted pod removed", WITHIN, || async {
        let all = all_pods_of(&k.client, &uid).await;
        all.iter().all(|p| p.name_any() != victim).then_some(all)
    })
    .await;
    assert!(left.is_empty(), "no pod besides the deleted one: {left:?}");
}

#[tokio::test]
async fn a_job_with_backoff_limit_2_counts_a_deleted_pod_failed_and_replaces_it() {
    let k = cluster().await;
    let jobs = Api::<Job>::namespaced(k.client.clone(), NS);
    let (uid, victim) = delete_the_running_pod(&k.client, "again", 2).await;
    let (j, replacement) = eventually("the deleted pod counted and replaced", WITHIN, || async {
        let j = jobs.get("again").await.ok()?;
        let s = j.status.clone()?;
        let active = active_pods_of(&k.client, &uid).await;
        let [replacement] = active.as_slice() else {
            return None;
        };
        (s.failed == Some(1) && s.active == Some(1) && replacement.name_any() != victim)
            .then(|| (j, replacement.clone()))
    })
    .await;
    assert_eq!(job_condition(&j, "Failed"), None);
    assert_eq!(job_condition(&j, "FailureTarget"), None);
    eventually("the deleted pod removed", WITHIN, || async {
        let all = all_pods_of(&k.client, &uid).await;
        (all.len() == 1 && all[0].name_any() == replacement.name_any()).then_some(())
    })
    .await;
    // Counted once: the replacement succeeding completes the Job with one failure on record.
    let j = run_job_until(&k.client, "again", "Succeeded", 1, |j| {
        job_condition(j, "Complete").is_some_and(|(s, _)| s == "True")
    })
    .await;
    let s = j.status.clone().unwrap();
    assert_eq!((s.failed, s.succeeded), (Some(1), Some(1)));
}

// A Job deleted with its pods orphaned (batch/v1's default propagation) leaves no pod held by
// the tracking finalizer: the orphaned pods are released, so deleting them works.
#[tokio::test]
async fn pods_of_a_deleted_job_are_released() {
    let k = cluster().await;
    let jobs = Api::<Job>::namespaced(k.client.clone(), NS);
    let created = jobs
        .create(&PostParams::default(), &job("left", 2, 2, 6))
        .await
        .unwrap();
    let uid = created.uid().unwrap();
    eventually("the Job's pods", WITHIN, || async {
        (active_pods_of(&k.client, &uid).await.len() == 2).then_some(())
    })
    .await;
    jobs.delete("left", &DeleteParams::default()).await.unwrap();
    let pods = Api::<Pod>::namespaced(k.client.clone(), NS);
    let by_app = ListParams::default().labels("app=left");
    eventually("the orphaned pods released", WITHIN, || async {
        let all = pods.list(&by_app).await.ok()?.items;
        (all.len() == 2 && all.iter().all(|p| p.finalizers().is_empty())).then_some(())
    })
    .await;
    pods.delete_collection(&DeleteParams::default(), &by_app)
        .await
        .unwrap();
    eventually("the released pods deleted", WITHIN, || async {
        pods.list(&by_app)
            .await
            .ok()?
            .items
            .is_empty()
            .then_some(())
    })
    .await;
}

// A Job deleted (background propagation, as the ScavengerJob controller does) while its pod
// is already terminating: the garbage collector's delete of that pod changes nothing, so only
// the Job's deletion can wake the release. Upstream's `deleteJob` enqueues the Job's pods that
// still carry the tracking finalizer for `syncOrphanPod`; without that the pod would be held
// by the finalizer for good.
#[tokio::test]
async fn a_terminating_pod_of_a_deleted_job_is_released() {
    let k = cluster().await;
    let (uid, victim) = delete_the_running_pod(&k.client, "gone", 6).await;
    let pods = Api::<Pod>::namespaced(k.client.clone(), NS);
    let held = pods.get(&victim).await.unwrap();
    assert!(
        held.metadata.deletion_timestamp.is_some() && !held.finalizers().is_empty(),
        "terminating and held: {:?}",
        held.metadata
    );
    Api::<Job>::namespaced(k.client.clone(), NS)
        .delete(
            "gone",
            &DeleteParams {
                propagation_policy: Some(kube::api::PropagationPolicy::Background),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    eventually("the terminating pod released", WITHIN, || async {
        let all = all_pods_of(&k.client, &uid).await;
        let pod = all.iter().find(|p| p.name_any() == victim);
        pod.is_none_or(|p| p.finalizers().is_empty()).then_some(())
    })
    .await;
}
