//! `/openapi/v2`: the Swagger 2.0 document older kubectl, Helm and client libraries read,
//! following CRDs as they come, change and go, with kube-apiserver's ETag and negotiation.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, PostParams};
use kube::client::Body;
use serde_json::{Value, json};
use telemesh_sim::Sim;
use telemesh_sim::apiserver::encodings::openapi_v2::{PROTOBUF, PROTOBUF_SERVED};

use super::sim;

/// One answer of `GET /openapi/v2`: status, Content-Type, ETag and body.
struct Answer {
    status: u16,
    content_type: String,
    etag: String,
    body: bytes::Bytes,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

async fn get(sim: &Sim, c: &kube::Client, headers: &[(&str, &str)]) -> Answer {
    let mut req = http::Request::get(format!("{}/openapi/v2", sim.url()));
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let resp = c.send(req.body(Body::empty()).unwrap()).await.unwrap();
    let header = |name| {
        resp.headers()
            .get(name)
            .map(|v: &http::HeaderValue| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    let (status, content_type, etag) = (
        resp.status().as_u16(),
        header(http::header::CONTENT_TYPE),
        header(http::header::ETAG),
    );
    let body = resp.into_body().collect_bytes().await.unwrap();
    Answer {
        status,
        content_type,
        etag,
        body,
    }
}

fn gadget_crd(properties: Value) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": properties},
                }}},
            }],
        },
    }))
    .unwrap()
}

/// The properties of `Gadget.spec` in a v2 document, if it has the kind.
fn gadget_spec(doc: &Value) -> Option<&Value> {
    doc.pointer("/definitions/com.example.v1.Gadget/properties/spec/properties")
}

#[tokio::test]
async fn crds_show_in_openapi_v2_and_change_its_etag() {
    let (sim, c) = sim().await;
    let before = get(&sim, &c, &[("accept", "application/json")]).await;
    assert_eq!(before.status, 200);
    assert_eq!(before.content_type, "application/json");
    let doc = before.json();
    assert_eq!(doc["swagger"], "2.0");
    assert!(doc["definitions"]["io.k8s.api.core.v1.Pod"].is_object());
    assert!(gadget_spec(&doc).is_none());
    // Unchanged, the document is not sent again.
    let again = get(&sim, &c, &[("if-none-match", &before.etag)]).await;
    assert_eq!(again.status, 304);
    assert!(again.body.is_empty());

    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    let size = json!({"size": {"type": "integer", "description": "How big."}});
    crds.create(&PostParams::default(), &gadget_crd(size.clone()))
        .await
        .unwrap();
    let added = get(&sim, &c, &[("if-none-match", &before.etag)]).await;
    assert_eq!(added.status, 200);
    assert_ne!(added.etag, before.etag);
    let doc = added.json();
    assert_eq!(
        gadget_spec(&doc).unwrap()["size"],
        json!({"type": "integer", "description": "How big."})
    );
    assert_eq!(
        doc["definitions"]["com.example.v1.Gadget"]["x-kubernetes-group-version-kind"],
        json!([{"group": "example.com", "kind": "Gadget", "version": "v1"}])
    );
    assert!(
        doc["paths"]["/apis/example.com/v1/namespaces/{namespace}/gadgets/{name}"]["patch"]
            .is_object()
    );

    // A changed schema is a changed document.
    let mut crd = crds.get("gadgets.example.com").await.unwrap();
    crd.spec.versions[0].schema = gadget_crd(json!({
        "size": {"type": "integer", "description": "How big."},
        "color": {"type": "string"},
    }))
    .spec
    .versions[0]
        .schema
        .clone();
    crds.replace("gadgets.example.com", &PostParams::default(), &crd)
        .await
        .unwrap();
    let changed = get(&sim, &c, &[("if-none-match", &added.etag)]).await;
    assert_eq!(changed.status, 200);
    assert_ne!(changed.etag, added.etag);
    assert_eq!(
        gadget_spec(&changed.json()).unwrap()["color"],
        json!({"type": "string"})
    );
    // The protobuf form is the same document: same tag, kube-apiserver's Content-Type.
    let protobuf = get(&sim, &c, &[("accept", PROTOBUF)]).await;
    assert_eq!(protobuf.status, 200);
    assert_eq!(protobuf.content_type, PROTOBUF_SERVED);
    assert_eq!(protobuf.etag, changed.etag);
    assert!(
        protobuf
            .body
            .windows(b"com.example.v1.Gadget".len())
            .any(|w| w == b"com.example.v1.Gadget")
    );

    crds.delete("gadgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    let removed = get(&sim, &c, &[]).await;
    assert_ne!(removed.etag, changed.etag);
    assert!(gadget_spec(&removed.json()).is_none());
}

#[tokio::test]
async fn openapi_v2_negotiates_like_kube_apiserver() {
    let (sim, c) = sim().await;
    let old_spelling = get(&sim, &c, &[("accept", PROTOBUF_SERVED)]).await;
    assert_eq!(old_spelling.status, 200);
    assert_eq!(old_spelling.content_type, PROTOBUF_SERVED);
    let yaml = get(&sim, &c, &[("accept", "application/yaml")]).await;
    assert_eq!(yaml.status, 406);
}
