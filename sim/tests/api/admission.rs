//! ValidatingAdmissionPolicies through kube-rs: a policy and its binding, created as an
//! administrator would, refuse another user's writes with kube-apiserver's status (code and
//! reason from the validation, `ValidatingAdmissionPolicy '<p>' with binding '<b>' denied
//! request: <message>`), dry runs included; the eviction subresource is admitted with the
//! Eviction as its object; deletes see only the old object; a policy that does not compile is
//! refused at creation; the sim's own writes are not admitted.

use std::collections::HashMap;

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, EvictParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use telemesh_sim::apiserver::requests::auth::PodBinding;
use telemesh_sim::{Auth, SimConfig, UserInfo};

use super::{code, reason, sim_with};

fn auth() -> Auth {
    let admin = UserInfo {
        username: "admin".into(),
        groups: vec!["system:masters".into()],
        ..UserInfo::default()
    };
    let worker = UserInfo::service_account("kube-system", "worker").bound_to_pod(&PodBinding {
        pod_name: "worker-1".into(),
        pod_uid: "pod-uid".into(),
        node_name: "node-a".into(),
        node_uid: "node-uid".into(),
    });
    Auth {
        tokens: HashMap::from([
            ("admin-token".to_owned(), admin),
            ("worker-token".to_owned(), worker),
        ]),
        rules: Vec::new(),
    }
}

/// The policy under test: the worker may write only the Node its token is bound to, may not
/// evict pods named `keep-*`, and may delete only pods labelled `disposable`.
fn policy() -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "worker-scope"},
        "spec": {
            "matchConstraints": {"resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["nodes"]},
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods/eviction"]},
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["DELETE"], "resources": ["pods"]}
            ]},
            "matchConditions": [{"name": "worker", "expression": "request.userInfo.username == 'system:serviceaccount:kube-system:worker'"}],
            "variables": [{"name": "node", "expression": "request.userInfo.extra['authentication.kubernetes.io/node-name'][0]"}],
            "validations": [
                {"expression": "request.resource.resource != 'nodes' || object.metadata.name == variables.node",
                 "messageExpression": "'a worker on ' + variables.node + ' may not write Node ' + object.metadata.name",
                 "reason": "Forbidden"},
                {"expression": "request.resource.resource != 'pods' || request.operation != 'CREATE' || !object.metadata.name.startsWith('keep-')",
                 "message": "keep-* pods stay"},
                {"expression": "request.operation != 'DELETE' || (has(oldObject.metadata.labels) && 'disposable' in oldObject.metadata.labels)",
                 "message": "only disposable pods may be deleted", "reason": "Forbidden"}
            ]
        }
    })
}

fn binding() -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "worker-scope-binding"},
        "spec": {"policyName": "worker-scope", "validationActions": ["Deny"]}
    })
}

async fn install(admin: &kube::Client) {
    let vaps: Api<ValidatingAdmissionPolicy> = Api::all(admin.clone());
    vaps.create(
        &PostParams::default(),
        &serde_json::from_value(policy()).unwrap(),
    )
    .await
    .unwrap();
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(admin.clone());
    bindings
        .create(
            &PostParams::default(),
            &serde_json::from_value(binding()).unwrap(),
        )
        .await
        .unwrap();
}

fn label(key: &str) -> Patch<Value> {
    Patch::Merge(json!({"metadata": {"labels": {key: "x"}}}))
}

#[tokio::test]
async fn policies_refuse_writes_with_kube_apiservers_status() {
    let config = SimConfig {
        auth: auth(),
        kubeconfig_token: Some("admin-token".into()),
        ..Default::default()
    };
    let (sim, admin) = sim_with(config).await;
    let nodes: Api<Node> = Api::all(admin.clone());
    for n in ["node-a", "node-b"] {
        nodes
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": n}})).unwrap(),
            )
            .await
            .unwrap();
    }
    install(&admin).await;
    let worker = sim.client_with_token("worker-token").await.unwrap();
    let worker_nodes: Api<Node> = Api::all(worker.clone());

    worker_nodes
        .patch("node-a", &PatchParams::default(), &label("own"))
        .await
        .unwrap();
    let e = worker_nodes
        .patch("node-b", &PatchParams::default(), &label("other"))
        .await
        .unwrap_err();
    assert_eq!((code(&e), reason(&e).as_str()), (403, "Forbidden"));
    let kube::Error::Api(status) = &e else {
        unreachable!()
    };
    assert_eq!(
        status.message,
        "nodes \"node-b\" is forbidden: ValidatingAdmissionPolicy 'worker-scope' with binding \
         'worker-scope-binding' denied request: a worker on node-a may not write Node node-b"
    );
    // A dry run is admitted too; the administrator is not the worker.
    let dry = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    let e = worker_nodes
        .patch("node-b", &dry, &label("other"))
        .await
        .unwrap_err();
    assert_eq!(code(&e), 403);
    nodes
        .patch("node-b", &PatchParams::default(), &label("admin"))
        .await
        .unwrap();
    let b = nodes.get("node-b").await.unwrap();
    assert!(!b.metadata.labels.unwrap_or_default().contains_key("other"));

    // Evictions: the object is the Eviction (its name), not the Pod; the default reason is
    // Invalid (422).
    let pods: Api<Pod> = Api::default_namespaced(admin.clone());
    for name in ["keep-me", "go-1", "go-2"] {
        let labels: &[(&str, &str)] = if name == "go-2" {
            &[("disposable", "yes")]
        } else {
            &[]
        };
        pods.create(&PostParams::default(), &super::pod(name, labels))
            .await
            .unwrap();
    }
    let worker_pods: Api<Pod> = Api::default_namespaced(worker.clone());
    let e = worker_pods
        .evict("keep-me", &EvictParams::default())
        .await
        .unwrap_err();
    assert_eq!((code(&e), reason(&e).as_str()), (422, "Invalid"));
    assert!(
        e.to_string().contains("denied request: keep-* pods stay"),
        "{e}"
    );
    pods.get("keep-me").await.unwrap();
    worker_pods
        .evict("go-1", &EvictParams::default())
        .await
        .unwrap();

    // Deletes: the policy sees the old object.
    let e = worker_pods
        .delete("keep-me", &DeleteParams::default())
        .await
        .unwrap_err();
    assert_eq!(code(&e), 403, "{e}");
    worker_pods
        .delete("go-2", &DeleteParams::default())
        .await
        .unwrap();
}

#[tokio::test]
async fn policies_that_do_not_compile_are_refused_and_sim_writes_are_not_admitted() {
    let config = SimConfig {
        auth: auth(),
        kubeconfig_token: Some("admin-token".into()),
        ..Default::default()
    };
    let (sim, admin) = sim_with(config).await;
    let vaps: Api<ValidatingAdmissionPolicy> = Api::all(admin.clone());
    let mut bad = policy();
    bad["spec"]["validations"][1]["expression"] = json!("object.metadata.name ==");
    let e = vaps
        .create(
            &PostParams::default(),
            &serde_json::from_value(bad).unwrap(),
        )
        .await
        .unwrap_err();
    assert_eq!(code(&e), 422);
    assert!(
        e.to_string().contains("spec.validations[1].expression"),
        "{e}"
    );
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(admin.clone());
    let mut no_actions = binding();
    no_actions["spec"]["validationActions"] = json!([]);
    let e = bindings
        .create(
            &PostParams::default(),
            &serde_json::from_value(no_actions).unwrap(),
        )
        .await
        .unwrap_err();
    assert_eq!(code(&e), 422, "{e}");

    // A policy denying every Node write applies to clients, not to the sim's own writes.
    install(&admin).await;
    let deny_all: Value = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "no-node-writes"},
        "spec": {"matchConstraints": {"resourceRules": [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["*"], "resources": ["nodes"]}]},
            "validations": [{"expression": "false"}]}
    });
    vaps.create(
        &PostParams::default(),
        &serde_json::from_value(deny_all).unwrap(),
    )
    .await
    .unwrap();
    let mut b = binding();
    b["metadata"]["name"] = json!("no-node-writes");
    b["spec"]["policyName"] = json!("no-node-writes");
    bindings
        .create(&PostParams::default(), &serde_json::from_value(b).unwrap())
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(admin.clone());
    let e = nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "n"}})).unwrap(),
        )
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("ValidatingAdmissionPolicy 'no-node-writes' with binding 'no-node-writes' denied request: failed expression: false"),
        "{e}"
    );
    telemesh_sim::nodes::create_nodes(&sim.server, 1).unwrap();
    nodes.get("sim-node-0").await.unwrap();
}
