//! Lists: label and field selectors, pagination with consistent continue tokens,
//! resourceVersion and resourceVersionMatch.

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, VersionMatch};
use serde_json::json;

use super::{code, pod, sim};

fn names<K: kube::Resource>(items: &[K]) -> Vec<String> {
    items
        .iter()
        .map(|o| o.meta().name.clone().unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn label_selectors_support_every_operator() {
    let (_sim, c) = sim().await;
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    for (n, labels) in [
        ("a", vec![("app", "web"), ("tier", "front")]),
        ("b", vec![("app", "db")]),
        ("c", vec![]),
    ] {
        pods.create(&PostParams::default(), &pod(n, &labels))
            .await
            .unwrap();
    }
    let cases = [
        ("app=web", vec!["a"]),
        ("app!=web", vec!["b", "c"]),
        ("app in (web,db)", vec!["a", "b"]),
        ("app notin (web)", vec!["b", "c"]),
        ("tier", vec!["a"]),
        ("!tier", vec!["b", "c"]),
        ("app=web,tier=front", vec!["a"]),
    ];
    for (sel, want) in cases {
        let got = pods.list(&ListParams::default().labels(sel)).await.unwrap();
        assert_eq!(names(&got.items), want, "selector {sel}");
    }
    let e = pods
        .list(&ListParams::default().labels("app in web"))
        .await
        .unwrap_err();
    assert_eq!(code(&e), 400);
}

#[tokio::test]
async fn field_selectors_filter_by_name_namespace_node_and_phase() {
    let (_sim, c) = sim().await;
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    pods.create(&PostParams::default(), &pod("a", &[]))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("b", &[]))
        .await
        .unwrap();
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "a"}, "target": {"kind": "Node", "name": "node-1"}});
    let _: kube::core::Status = pods
        .create_subresource("binding", "a", &PostParams::default(), &binding)
        .await
        .unwrap();
    pods.patch_status(
        "b",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running"}})),
    )
    .await
    .unwrap();
    let all: Api<Pod> = Api::all(c.clone());
    let by = |f: &'static str| ListParams::default().fields(f);
    assert_eq!(
        names(&all.list(&by("spec.nodeName=node-1")).await.unwrap().items),
        ["a"]
    );
    assert_eq!(
        names(&all.list(&by("spec.nodeName=")).await.unwrap().items),
        ["b"]
    );
    assert_eq!(
        names(&all.list(&by("status.phase=Running")).await.unwrap().items),
        ["b"]
    );
    assert_eq!(
        names(&all.list(&by("metadata.name=b")).await.unwrap().items),
        ["b"]
    );
    assert_eq!(
        names(
            &all.list(&by("metadata.namespace=default,status.phase!=Running"))
                .await
                .unwrap()
                .items
        ),
        ["a"]
    );
    let e = all.list(&by("spec.bogus=x")).await.unwrap_err();
    assert_eq!(code(&e), 400, "unsupported field label");
}

#[tokio::test]
async fn pagination_is_consistent_across_pages() {
    let (_sim, c) = sim().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(c.clone());
    for i in 0..7 {
        cms.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": format!("cm-{i}")}})).unwrap(),
        )
        .await
        .unwrap();
    }
    let first = cms.list(&ListParams::default().limit(3)).await.unwrap();
    assert_eq!(names(&first.items), ["cm-0", "cm-1", "cm-2"]);
    let token = first.metadata.continue_.clone().expect("continue token");
    // A change after the first page does not show in later pages of the same list.
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "cm-3a"}})).unwrap(),
    )
    .await
    .unwrap();
    let second = cms
        .list(&ListParams::default().limit(3).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(names(&second.items), ["cm-3", "cm-4", "cm-5"]);
    assert_eq!(
        second.metadata.resource_version,
        first.metadata.resource_version
    );
    let third = cms
        .list(
            &ListParams::default()
                .limit(3)
                .continue_token(second.metadata.continue_.as_ref().unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(names(&third.items), ["cm-6"]);
    assert!(
        third
            .metadata
            .continue_
            .as_deref()
            .unwrap_or_default()
            .is_empty()
    );
}

#[tokio::test]
async fn resource_version_match_exact_serves_that_version_or_410() {
    let (_sim, c) = sim().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(c.clone());
    let rv = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let exact = cms
        .list(&ListParams::default().at(&rv).matching(VersionMatch::Exact))
        .await
        .unwrap();
    assert_eq!(
        exact.metadata.resource_version.as_deref(),
        Some(rv.as_str())
    );
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "later"}})).unwrap(),
    )
    .await
    .unwrap();
    let e = cms
        .list(&ListParams::default().at(&rv).matching(VersionMatch::Exact))
        .await
        .unwrap_err();
    assert_eq!(code(&e), 410);
    let newer = cms
        .list(
            &ListParams::default()
                .at(&rv)
                .matching(VersionMatch::NotOlderThan),
        )
        .await
        .unwrap();
    assert_eq!(names(&newer.items), ["later"]);
    let cm = cms.get("later").await.unwrap();
    assert!(cm.resource_version().is_some());
}

#[tokio::test]
async fn namespaced_lists_only_see_their_namespace() {
    let (_sim, c) = sim().await;
    let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(c.clone());
    ns.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "other"}})).unwrap(),
    )
    .await
    .unwrap();
    Api::<ConfigMap>::namespaced(c.clone(), "other")
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "o"}})).unwrap(),
        )
        .await
        .unwrap();
    Api::<ConfigMap>::default_namespaced(c.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "d"}})).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        names(
            &Api::<ConfigMap>::namespaced(c.clone(), "other")
                .list(&Default::default())
                .await
                .unwrap()
                .items
        ),
        ["o"]
    );
    assert_eq!(
        names(
            &Api::<ConfigMap>::all(c.clone())
                .list(&Default::default())
                .await
                .unwrap()
                .items
        ),
        ["d", "o"]
    );
}
