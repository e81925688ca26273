//! Patches through kube-rs: JSON merge, strategic merge, JSON patch and server-side apply.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use super::{code, sim};

fn deployment() -> Deployment {
    serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
            {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}]},
            {"name": "sidecar", "image": "side:1"}]}}}}))
    .unwrap()
}

#[tokio::test]
async fn merge_patch_sets_and_deletes_keys() {
    let (_sim, c) = sim().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(c.clone());
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "m"}, "data": {"a": "1", "b": "2"}}))
            .unwrap(),
    )
    .await
    .unwrap();
    let out = cms
        .patch(
            "m",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": null, "c": "3"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        out.data.unwrap(),
        [
            ("b".to_string(), "2".to_string()),
            ("c".to_string(), "3".to_string())
        ]
        .into()
    );
}

#[tokio::test]
async fn strategic_merge_merges_containers_by_name() {
    let (_sim, c) = sim().await;
    let deploys: Api<Deployment> = Api::default_namespaced(c.clone());
    deploys
        .create(&PostParams::default(), &deployment())
        .await
        .unwrap();
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "app:2", "env": [{"name": "B", "value": "2"}]}]}}}});
    let out = deploys
        .patch("web", &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap();
    let containers = out.spec.unwrap().template.spec.unwrap().containers;
    assert_eq!(containers.len(), 2, "the sidecar stays");
    assert_eq!(containers[0].image.as_deref(), Some("app:2"));
    let env: Vec<String> = containers[0]
        .env
        .clone()
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    // Merged by name, not replaced; as upstream, patch items come before items only the server had.
    assert_eq!(env, ["B", "A"], "env merges by name");
}

#[tokio::test]
async fn json_patch_applies_operations_and_test_failures_are_rejected() {
    let (_sim, c) = sim().await;
    let deploys: Api<Deployment> = Api::default_namespaced(c.clone());
    deploys
        .create(&PostParams::default(), &deployment())
        .await
        .unwrap();
    let ops: json_patch::Patch =
        serde_json::from_value(json!([{"op": "replace", "path": "/spec/replicas", "value": 3}]))
            .unwrap();
    let out = deploys
        .patch("web", &PatchParams::default(), &Patch::Json::<()>(ops))
        .await
        .unwrap();
    assert_eq!(out.spec.unwrap().replicas, Some(3));
    let failing: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/spec/replicas", "value": 9}]))
            .unwrap();
    let e = deploys
        .patch("web", &PatchParams::default(), &Patch::Json::<()>(failing))
        .await
        .unwrap_err();
    assert_eq!(code(&e), 422);
}

#[tokio::test]
async fn server_side_apply_creates_updates_removes_and_detects_conflicts() {
    let (_sim, c) = sim().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(c.clone());
    let applied = |data: serde_json::Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": data});
    let created = cms
        .patch(
            "ssa",
            &PatchParams::apply("alice"),
            &Patch::Apply(applied(json!({"a": "1", "b": "1"}))),
        )
        .await
        .unwrap();
    assert_eq!(
        created.managed_fields().first().map(|m| m.manager.clone()),
        Some(Some("alice".into()))
    );
    // Dropping a field from the applied config removes it.
    let out = cms
        .patch(
            "ssa",
            &PatchParams::apply("alice"),
            &Patch::Apply(applied(json!({"a": "1"}))),
        )
        .await
        .unwrap();
    assert_eq!(out.data.unwrap().keys().collect::<Vec<_>>(), ["a"]);
    // Another manager setting alice's field to another value conflicts...
    let e = cms
        .patch(
            "ssa",
            &PatchParams::apply("bob"),
            &Patch::Apply(applied(json!({"a": "2"}))),
        )
        .await
        .unwrap_err();
    assert_eq!(code(&e), 409);
    // ...unless forced, which takes ownership.
    let out = cms
        .patch(
            "ssa",
            &PatchParams::apply("bob").force(),
            &Patch::Apply(applied(json!({"a": "2"}))),
        )
        .await
        .unwrap();
    assert_eq!(out.data.unwrap()["a"], "2");
}

#[tokio::test]
async fn patching_a_missing_object_is_not_found_but_apply_creates_it() {
    let (_sim, c) = sim().await;
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    let e = pods
        .patch(
            "ghost",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap_err();
    assert_eq!(code(&e), 404);
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ghost"}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let created = pods
        .patch("ghost", &PatchParams::apply("me"), &Patch::Apply(pod))
        .await
        .unwrap();
    assert_eq!(created.name_any(), "ghost");
}
