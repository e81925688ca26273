//! Discovery through kube-rs, the aggregated form, and OpenAPI v3.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt as _;
use kube::api::{Api, PostParams};
use kube::discovery::{Discovery, Scope, verbs};

use super::sim;

#[tokio::test]
async fn kube_discovery_finds_builtins_with_scope_verbs_and_subresources() {
    let (_sim, c) = sim().await;
    let discovery = Discovery::new(c.clone()).run().await.unwrap();
    let (ar, caps) = discovery
        .resolve_gvk(&kube::api::GroupVersionKind::gvk(
            "apps",
            "v1",
            "Deployment",
        ))
        .expect("deployments discovered");
    assert_eq!(ar.plural, "deployments");
    assert_eq!(caps.scope, Scope::Namespaced);
    assert!(caps.supports_operation(verbs::WATCH));
    assert!(
        caps.subresources
            .iter()
            .any(|(s, _)| s.plural == "deployments/scale" || s.plural == "scale")
    );
    let (_, node_caps) = discovery
        .resolve_gvk(&kube::api::GroupVersionKind::gvk("", "v1", "Node"))
        .expect("nodes");
    assert_eq!(node_caps.scope, Scope::Cluster);
    for g in [
        "policy",
        "batch",
        "coordination.k8s.io",
        "scheduling.k8s.io",
        "apiextensions.k8s.io",
        "events.k8s.io",
    ] {
        assert!(discovery.has_group(g), "group {g} discovered");
    }
}

#[tokio::test]
async fn a_new_crd_appears_in_discovery() {
    let (_sim, c) = sim().await;
    Api::<CustomResourceDefinition>::all(c.clone())
        .create(&PostParams::default(), &super::crd::Widget::crd())
        .await
        .unwrap();
    let discovery = Discovery::new(c.clone()).run().await.unwrap();
    assert!(
        discovery
            .resolve_gvk(&kube::api::GroupVersionKind::gvk(
                "test.telemesh.io",
                "v1",
                "Widget"
            ))
            .is_some()
    );
}

#[tokio::test]
async fn aggregated_discovery_is_served_when_asked_and_plain_otherwise() {
    let (sim, c) = sim().await;
    let get = |accept: &'static str| {
        http::Request::get(format!("{}/apis", sim.url()))
            .header("Accept", accept)
            .body(Vec::new())
            .unwrap()
    };
    let agg: serde_json::Value = serde_json::from_str(
        &c.request_text(get(
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
        ))
        .await
        .unwrap(),
    )
    .unwrap();
    assert_eq!(agg["kind"], "APIGroupDiscoveryList");
    assert_eq!(agg["apiVersion"], "apidiscovery.k8s.io/v2");
    let plain: serde_json::Value =
        serde_json::from_str(&c.request_text(get("application/json")).await.unwrap()).unwrap();
    assert_eq!(plain["kind"], "APIGroupList");
}

#[tokio::test]
async fn openapi_v3_lists_group_versions_and_serves_schemas() {
    let (sim, c) = sim().await;
    let index: serde_json::Value = serde_json::from_str(
        &c.request_text(
            http::Request::get(format!("{}/openapi/v3", sim.url()))
                .body(Vec::new())
                .unwrap(),
        )
        .await
        .unwrap(),
    )
    .unwrap();
    let url = index["paths"]["api/v1"]["serverRelativeURL"]
        .as_str()
        .expect("core group in the index")
        .to_owned();
    let doc: serde_json::Value = serde_json::from_str(
        &c.request_text(
            http::Request::get(format!("{}{url}", sim.url()))
                .body(Vec::new())
                .unwrap(),
        )
        .await
        .unwrap(),
    )
    .unwrap();
    assert!(
        doc["components"]["schemas"]["io.k8s.api.core.v1.Pod"].is_object(),
        "Pod schema present"
    );
}

/// Every built-in sim serves is discovered with the type's scope and lists through its path;
/// every one that can be listed also watches (the scheduler's informers need both).
#[tokio::test]
async fn every_builtin_is_discovered_listed_and_watched() {
    use kube::api::{DynamicObject, ListParams, WatchParams};
    use telemesh_sim::storage::builtins::{BUILTINS, Verbs};

    let (_sim, c) = sim().await;
    let discovery = Discovery::new(c.clone()).run().await.unwrap();
    for b in BUILTINS {
        let gvk = kube::api::GroupVersionKind::gvk(b.group, b.version, b.kind);
        let (ar, caps) = discovery
            .resolve_gvk(&gvk)
            .unwrap_or_else(|| panic!("{gvk:?} not discovered"));
        assert_eq!(ar.plural, b.plural);
        let scope = if b.namespaced {
            Scope::Namespaced
        } else {
            Scope::Cluster
        };
        assert_eq!(caps.scope, scope, "{}", b.plural);
        if !matches!(b.extra.verbs, Verbs::All | Verbs::NoDeleteCollection) {
            continue;
        }
        let api: Api<DynamicObject> = Api::all_with(c.clone(), &ar);
        let list = api
            .list(&ListParams::default())
            .await
            .unwrap_or_else(|e| panic!("list {}: {e}", b.plural));
        let rv = list.metadata.resource_version.unwrap();
        // The stream opens (200) only once the server accepted the watch.
        let _events = api
            .watch(&WatchParams::default(), &rv)
            .await
            .unwrap_or_else(|e| panic!("watch {}: {e}", b.plural));
    }
}
