//! Subresources: pods/binding, pods/eviction with PodDisruptionBudgets, */status and */scale.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, EvictParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::{code, pod, reason, sim};

async fn bind(pods: &Api<Pod>, name: &str, node: &str) -> Result<kube::core::Status, kube::Error> {
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
    pods.create_subresource("binding", name, &PostParams::default(), &binding)
        .await
}

async fn make_running_ready(pods: &Api<Pod>, name: &str) {
    let status = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
}

#[tokio::test]
async fn binding_assigns_a_node_once() {
    let (_sim, c) = sim().await;
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    pods.create(&PostParams::default(), &pod("p", &[]))
        .await
        .unwrap();
    bind(&pods, "p", "node-1").await.unwrap();
    let p = pods.get("p").await.unwrap();
    assert_eq!(p.spec.unwrap().node_name.as_deref(), Some("node-1"));
    let scheduled = p
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "PodScheduled")
        .unwrap();
    assert_eq!(scheduled.status, "True");
    let e = bind(&pods, "p", "node-2").await.unwrap_err();
    assert_eq!(code(&e), 409, "already bound");
    assert_eq!(
        code(&bind(&pods, "missing", "node-1").await.unwrap_err()),
        404
    );
}

#[tokio::test]
async fn eviction_honours_disruption_budgets() {
    let (sim, _) = sim().await;
    // kube-rs retries 429s 15 times by default; this test wants to see the first one.
    let mut config = sim.kube_config().await.unwrap();
    config.default_retry = false;
    let c = kube::Client::try_from(config).unwrap();
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    for n in ["a", "b"] {
        pods.create(&PostParams::default(), &pod(n, &[("app", "db")]))
            .await
            .unwrap();
        make_running_ready(&pods, n).await;
    }
    pods.create(&PostParams::default(), &pod("free", &[("app", "web")]))
        .await
        .unwrap();
    make_running_ready(&pods, "free").await;
    let pdbs: Api<PodDisruptionBudget> = Api::default_namespaced(c.clone());
    pdbs.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "db"}, "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "db"}}}})).unwrap())
        .await
        .unwrap();
    // Evicting a covered pod would leave 1 < 2 healthy: 429.
    let e = pods.evict("a", &EvictParams::default()).await.unwrap_err();
    assert_eq!((code(&e), reason(&e)), (429, "TooManyRequests".to_string()));
    assert!(pods.get("a").await.is_ok(), "the pod stays");
    // A pod no budget covers is evicted.
    pods.evict("free", &EvictParams::default()).await.unwrap();
    assert_eq!(code(&pods.get("free").await.unwrap_err()), 404);
    // Relaxing the budget lets the eviction through.
    pdbs.patch(
        "db",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"minAvailable": 1}})),
    )
    .await
    .unwrap();
    pods.evict("a", &EvictParams::default()).await.unwrap();
    assert_eq!(code(&pods.get("a").await.unwrap_err()), 404);
    // A pending pod ignores the budget.
    pods.create(&PostParams::default(), &pod("pending", &[("app", "db")]))
        .await
        .unwrap();
    pods.evict("pending", &EvictParams::default())
        .await
        .unwrap();
}

#[tokio::test]
async fn status_subresource_reads_and_writes_status_only() {
    let (_sim, c) = sim().await;
    let deploys: Api<Deployment> = Api::default_namespaced(c.clone());
    let d: Deployment = serde_json::from_value(json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"app": "x"}},
        "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}})).unwrap();
    deploys.create(&PostParams::default(), &d).await.unwrap();
    let out = deploys
        .patch_status(
            "d",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"replicas": 9}, "status": {"replicas": 2, "readyReplicas": 2}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(out.status.as_ref().unwrap().ready_replicas, Some(2));
    assert_eq!(
        out.spec.as_ref().unwrap().replicas,
        Some(1),
        "spec is not written through status"
    );
    let got = deploys.get_status("d").await.unwrap();
    assert_eq!(got.status.unwrap().replicas, Some(2));
}

#[tokio::test]
async fn scale_subresource_reads_and_sets_replicas() {
    let (_sim, c) = sim().await;
    let deploys: Api<Deployment> = Api::default_namespaced(c.clone());
    let d: Deployment = serde_json::from_value(json!({"metadata": {"name": "d"}, "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "x"}},
        "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}})).unwrap();
    deploys.create(&PostParams::default(), &d).await.unwrap();
    let scale = deploys.get_scale("d").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(2));
    assert_eq!(scale.status.unwrap().selector.as_deref(), Some("app=x"));
    deploys
        .patch_scale(
            "d",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .unwrap();
    assert_eq!(
        deploys.get("d").await.unwrap().spec.unwrap().replicas,
        Some(5)
    );
    let mut s = deploys.get_scale("d").await.unwrap();
    s.spec.as_mut().unwrap().replicas = Some(0);
    deploys
        .replace_scale("d", &PostParams::default(), &s)
        .await
        .unwrap();
    assert_eq!(
        deploys.get("d").await.unwrap().spec.unwrap().replicas,
        Some(0)
    );
}
