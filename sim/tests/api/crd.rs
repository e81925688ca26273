//! Custom resources: a CRD registered at run time serves its kind through `Api`, `watcher` and
//! `Controller`, with status and scale subresources, printer columns, schema and CEL
//! validation, several served versions, and removal with the CRD.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{CustomResource, CustomResourceExt, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{code, eventually, sim};

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "test.telemesh.io",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus",
    shortname = "wg"
)]
#[kube(scale(
    spec_replicas_path = ".spec.size",
    status_replicas_path = ".status.observed"
))]
#[kube(printcolumn(name = "Size", type_ = "integer", json_path = ".spec.size"))]
pub struct WidgetSpec {
    size: i32,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
pub struct WidgetStatus {
    observed: i32,
}

async fn install(c: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    let crd = crds
        .create(&PostParams::default(), &Widget::crd())
        .await
        .unwrap();
    let established = crd
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .any(|c| c.type_ == "Established" && c.status == "True");
    assert!(established);
}

fn widget(name: &str, size: i32) -> Widget {
    Widget::new(name, WidgetSpec { size })
}

#[tokio::test]
async fn a_crd_serves_its_kind_with_status_and_scale() {
    let (_sim, c) = sim().await;
    install(&c).await;
    let widgets: Api<Widget> = Api::default_namespaced(c.clone());
    let w = widgets
        .create(&PostParams::default(), &widget("w1", 3))
        .await
        .unwrap();
    assert_eq!(w.metadata.generation, Some(1));
    assert_eq!(
        widgets
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    let out = widgets
        .patch_status(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"observed": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(out.status.unwrap().observed, 3);
    let scale = widgets.get_scale("w1").await.unwrap();
    assert_eq!(
        (scale.spec.unwrap().replicas, scale.status.unwrap().replicas),
        (Some(3), 3)
    );
    widgets
        .patch_scale(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 7}})),
        )
        .await
        .unwrap();
    let w = widgets.get("w1").await.unwrap();
    assert_eq!(w.spec.size, 7);
    assert_eq!(w.metadata.generation, Some(2));
    // Custom resources refuse updates without a resourceVersion, and strategic merge patches.
    let mut blind = w.clone();
    blind.metadata.resource_version = None;
    assert_eq!(
        code(
            &widgets
                .replace("w1", &PostParams::default(), &blind)
                .await
                .unwrap_err()
        ),
        422
    );
    let e = widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"size": 1}})),
        )
        .await
        .unwrap_err();
    assert_eq!(code(&e), 415);
}

#[tokio::test]
async fn a_controller_reconciles_custom_resources() {
    let (_sim, c) = sim().await;
    install(&c).await;
    let widgets: Api<Widget> = Api::default_namespaced(c.clone());
    async fn reconcile(w: Arc<Widget>, api: Arc<Api<Widget>>) -> Result<Action, kube::Error> {
        let status = json!({"status": {"observed": w.spec.size}});
        api.patch_status(
            &w.name_any(),
            &PatchParams::default(),
            &Patch::Merge(status),
        )
        .await?;
        Ok(Action::await_change())
    }
    fn on_error(_: Arc<Widget>, _: &kube::Error, _: Arc<Api<Widget>>) -> Action {
        Action::requeue(Duration::from_millis(100))
    }
    let ctl = Controller::new(widgets.clone(), watcher::Config::default())
        .run(reconcile, on_error, Arc::new(widgets.clone()))
        .for_each(|_| async {});
    let task = tokio::spawn(ctl);
    widgets
        .create(&PostParams::default(), &widget("a", 4))
        .await
        .unwrap();
    eventually(
        "controller wrote the status",
        Duration::from_secs(10),
        || {
            let widgets = widgets.clone();
            async move {
                widgets
                    .get("a")
                    .await
                    .ok()
                    .and_then(|w| w.status)
                    .filter(|s| s.observed == 4)
            }
        },
    )
    .await;
    widgets
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 9}})),
        )
        .await
        .unwrap();
    eventually("controller saw the change", Duration::from_secs(10), || {
        let widgets = widgets.clone();
        async move {
            widgets
                .get("a")
                .await
                .ok()
                .and_then(|w| w.status)
                .filter(|s| s.observed == 9)
        }
    })
    .await;
    task.abort();
}

fn validated_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.test.telemesh.io"},
        "spec": {"group": "test.telemesh.io", "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "required": ["replicas"],
                        "x-kubernetes-validations": [{"rule": "self.replicas <= self.maxReplicas", "message": "replicas must not exceed maxReplicas"}],
                        "properties": {"replicas": {"type": "integer", "minimum": 0}, "maxReplicas": {"type": "integer", "default": 10},
                                       "mode": {"type": "string", "enum": ["fast", "safe"]}}}}}},
                 "additionalPrinterColumns": [{"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}]},
                {"name": "v2", "served": true, "storage": false, "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}
            ]}
    }))
    .unwrap()
}

#[tokio::test]
async fn schemas_prune_default_and_validate_with_cel() {
    let (_sim, c) = sim().await;
    Api::<CustomResourceDefinition>::all(c.clone())
        .create(&PostParams::default(), &validated_crd())
        .await
        .unwrap();
    let ar = kube::discovery::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("test.telemesh.io", "v1", "Gadget"),
        "gadgets",
    );
    let gadgets: Api<kube::api::DynamicObject> = Api::default_namespaced_with(c.clone(), &ar);
    let obj = |spec: serde_json::Value| -> kube::api::DynamicObject {
        serde_json::from_value(json!({"apiVersion": "test.telemesh.io/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": spec})).unwrap()
    };
    let created = gadgets
        .create(
            &PostParams::default(),
            &obj(json!({"replicas": 2, "unknown": true})),
        )
        .await
        .unwrap();
    assert_eq!(
        created.data["spec"],
        json!({"replicas": 2, "maxReplicas": 10}),
        "pruned and defaulted"
    );
    for (bad, why) in [
        (json!({"replicas": "two"}), "wrong type"),
        (json!({}), "missing required"),
        (json!({"replicas": -1}), "below minimum"),
        (json!({"replicas": 1, "mode": "slow"}), "not in enum"),
        (json!({"replicas": 20}), "CEL rule"),
    ] {
        let mut o = obj(bad);
        o.metadata.name = Some("bad".into());
        let e = gadgets
            .create(&PostParams::default(), &o)
            .await
            .unwrap_err();
        assert_eq!(code(&e), 422, "{why}");
        if why == "CEL rule"
            && let kube::Error::Api(s) = &e
        {
            assert!(
                s.message.contains("replicas must not exceed maxReplicas"),
                "{}",
                s.message
            );
        }
    }
    // Served in v2 too: same object, other apiVersion.
    let ar2 = kube::discovery::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("test.telemesh.io", "v2", "Gadget"),
        "gadgets",
    );
    let v2: Api<kube::api::DynamicObject> = Api::default_namespaced_with(c.clone(), &ar2);
    let g = v2.get("g").await.unwrap();
    assert_eq!(g.types.unwrap().api_version, "test.telemesh.io/v2");
}

#[tokio::test]
async fn printer_columns_render_in_tables() {
    let (sim, c) = sim().await;
    Api::<CustomResourceDefinition>::all(c.clone())
        .create(&PostParams::default(), &validated_crd())
        .await
        .unwrap();
    let req = http::Request::get(format!(
        "{}/apis/test.telemesh.io/v1/namespaces/default/gadgets",
        sim.url()
    ))
    .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
    .body(Vec::new())
    .unwrap();
    let table: serde_json::Value =
        serde_json::from_str(&c.request_text(req).await.unwrap()).unwrap();
    assert_eq!(table["kind"], "Table");
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    // As upstream: with printer columns, Age appears only if the CRD lists it.
    assert_eq!(columns, ["Name", "Replicas"]);
}

#[tokio::test]
async fn deleting_the_crd_removes_its_objects_and_endpoints() {
    let (_sim, c) = sim().await;
    install(&c).await;
    let widgets: Api<Widget> = Api::default_namespaced(c.clone());
    widgets
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();
    Api::<CustomResourceDefinition>::all(c.clone())
        .delete("widgets.test.telemesh.io", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "custom resources no longer served",
        Duration::from_secs(5),
        || {
            let widgets = widgets.clone();
            async move {
                widgets
                    .list(&ListParams::default())
                    .await
                    .err()
                    .filter(|e| code(e) == 404)
                    .map(|_| ())
            }
        },
    )
    .await;
    // Re-creating the CRD starts empty.
    install(&c).await;
    assert!(
        widgets
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn invalid_crds_are_rejected() {
    let (_sim, c) = sim().await;
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    let mut crd = Widget::crd();
    crd.metadata.name = Some("wrong.name".into());
    assert_eq!(
        code(&crds.create(&PostParams::default(), &crd).await.unwrap_err()),
        422
    );
    let mut crd = Widget::crd();
    crd.spec.versions[0].storage = false;
    assert_eq!(
        code(&crds.create(&PostParams::default(), &crd).await.unwrap_err()),
        422
    );
}
