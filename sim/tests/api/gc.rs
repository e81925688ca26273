//! Deletion: finalizers and deletionTimestamp, background/foreground/orphan propagation to
//! owned objects, deletecollection and namespace deletion.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, PropagationPolicy};
use serde_json::json;

use super::{code, eventually, pod, sim};

async fn owner_with_pods(c: &kube::Client, n: usize) -> String {
    let cms: Api<ConfigMap> = Api::default_namespaced(c.clone());
    let owner = cms
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "owner"}})).unwrap(),
        )
        .await
        .unwrap();
    let uid = owner.uid().unwrap();
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    for i in 0..n {
        let mut p = pod(&format!("child-{i}"), &[]);
        p.metadata.owner_references = Some(vec![
            serde_json::from_value(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}),
            )
            .unwrap(),
        ]);
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
    uid
}

async fn pod_count(c: &kube::Client) -> usize {
    Api::<Pod>::default_namespaced(c.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .len()
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let (_sim, c) = sim().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(c.clone());
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(
            json!({"metadata": {"name": "f", "finalizers": ["example.com/hold"]}}),
        )
        .unwrap(),
    )
    .await
    .unwrap();
    let res = cms.delete("f", &DeleteParams::default()).await.unwrap();
    let held = res.left().expect("the object is still there");
    assert!(held.metadata.deletion_timestamp.is_some());
    let e = cms
        .patch(
            "f",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"finalizers": ["example.com/hold", "example.com/other"]}}),
            ),
        )
        .await
        .unwrap_err();
    assert_eq!(code(&e), 422, "no new finalizers while deleting");
    cms.patch(
        "f",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(code(&cms.get("f").await.unwrap_err()), 404);
}

#[tokio::test]
async fn background_deletion_collects_dependents() {
    let (_sim, c) = sim().await;
    owner_with_pods(&c, 3).await;
    Api::<ConfigMap>::default_namespaced(c.clone())
        .delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    eventually("dependents deleted", Duration::from_secs(5), || {
        let c = c.clone();
        async move { (pod_count(&c).await == 0).then_some(()) }
    })
    .await;
}

#[tokio::test]
async fn orphan_deletion_keeps_dependents_without_the_owner_reference() {
    let (_sim, c) = sim().await;
    owner_with_pods(&c, 2).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(c.clone());
    cms.delete("owner", &DeleteParams::orphan()).await.unwrap();
    eventually("owner gone", Duration::from_secs(5), || {
        let cms = cms.clone();
        async move { cms.get("owner").await.is_err().then_some(()) }
    })
    .await;
    let pods = Api::<Pod>::default_namespaced(c.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(pods.items.len(), 2);
    assert!(pods.items.iter().all(|p| p.owner_references().is_empty()));
}

#[tokio::test]
async fn foreground_deletion_removes_dependents_first() {
    let (_sim, c) = sim().await;
    owner_with_pods(&c, 2).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(c.clone());
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Foreground),
        ..Default::default()
    };
    let res = cms.delete("owner", &dp).await.unwrap();
    assert!(
        res.left()
            .is_some_and(|o| o.finalizers().iter().any(|f| f == "foregroundDeletion"))
    );
    eventually("owner gone after its dependents", Duration::from_secs(5), || {
        let (cms, c) = (cms.clone(), c.clone());
        async move { (cms.get("owner").await.is_err() && pod_count(&c).await == 0).then_some(()) }
    })
    .await;
}

#[tokio::test]
async fn a_dependent_with_another_live_owner_survives() {
    let (_sim, c) = sim().await;
    let uid = owner_with_pods(&c, 1).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(c.clone());
    let other = cms
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "other"}})).unwrap(),
        )
        .await
        .unwrap();
    let refs = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}, {"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "uid": other.uid()}]);
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    pods.patch(
        "child-0",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"ownerReferences": refs}})),
    )
    .await
    .unwrap();
    cms.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    let p = eventually(
        "reference to the deleted owner dropped",
        Duration::from_secs(5),
        || {
            let pods = pods.clone();
            async move {
                pods.get("child-0")
                    .await
                    .ok()
                    .filter(|p| p.owner_references().len() == 1)
            }
        },
    )
    .await;
    assert_eq!(p.owner_references()[0].name, "other");
}

#[tokio::test]
async fn deletecollection_deletes_what_the_selector_matches() {
    let (_sim, c) = sim().await;
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    pods.create(&PostParams::default(), &pod("a", &[("x", "1")]))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("b", &[("x", "1")]))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("keep", &[]))
        .await
        .unwrap();
    pods.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("x=1"),
    )
    .await
    .unwrap();
    let left: Vec<String> = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|p| p.name_any())
        .collect();
    assert_eq!(left, ["keep"]);
}

#[tokio::test]
async fn deleting_a_namespace_empties_it_then_removes_it() {
    let (_sim, c) = sim().await;
    let nss: Api<Namespace> = Api::all(c.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "doomed"}})).unwrap(),
    )
    .await
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "doomed");
    pods.create(&PostParams::default(), &pod("p", &[]))
        .await
        .unwrap();
    nss.delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "namespace and its pods gone",
        Duration::from_secs(5),
        || {
            let (nss, pods) = (nss.clone(), pods.clone());
            async move {
                (nss.get("doomed").await.is_err() && pods.get("p").await.is_err()).then_some(())
            }
        },
    )
    .await;
}
