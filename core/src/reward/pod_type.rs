//! A pod's type (docs/architecture.md, "Learn"): the `telemesh.io/pod-type` label, else kubeRL's order
//! (`podtype`, `app`, `name` labels), else its owning workload (a ReplicaSet's Deployment, a
//! Job, a StatefulSet, ...), else the pod's own name. Types are per namespace: the result is
//! `<namespace>/<type>`, so two teams' `app: web` never share a reward.

use k8s_openapi::api::core::v1::Pod;

/// The explicit pod-type label.
pub const POD_TYPE_LABEL: &str = "telemesh.io/pod-type";

/// kubeRL's labels, in its order, after ours.
const TYPE_LABELS: [&str; 4] = [POD_TYPE_LABEL, "podtype", "app", "name"];

/// Returns `<namespace>/<type>` for `pod`.
pub fn pod_type(pod: &Pod) -> String {
    let meta = &pod.metadata;
    let namespace = meta.namespace.as_deref().unwrap_or("default");
    let labels = meta.labels.as_ref();
    let from_label = TYPE_LABELS
        .iter()
        .find_map(|l| labels.and_then(|m| m.get(*l)).filter(|v| !v.is_empty()));
    let name = match from_label {
        Some(v) => v.clone(),
        None => owner_workload(pod).unwrap_or_else(|| meta.name.clone().unwrap_or_default()),
    };
    format!("{namespace}/{name}")
}

/// The workload that owns the pod: a ReplicaSet's Deployment (its name less the
/// `-<pod-template-hash>` suffix), else the controller's name.
fn owner_workload(pod: &Pod) -> Option<String> {
    let owner = pod
        .metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true))?;
    if owner.kind == "ReplicaSet"
        && let Some(hash) = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("pod-template-hash"))
        && let Some(deployment) = owner.name.strip_suffix(&format!("-{hash}"))
    {
        return Some(deployment.to_owned());
    }
    Some(owner.name.clone())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn pod(meta: serde_json::Value) -> Pod {
        serde_json::from_value(json!({ "metadata": meta })).unwrap()
    }

    #[test]
    fn labels_win_in_order_then_the_workload_then_the_name() {
        let p = pod(json!({"name": "p", "namespace": "a",
            "labels": {"app": "web", "podtype": "D", "telemesh.io/pod-type": "batch"}}));
        assert_eq!(pod_type(&p), "a/batch");
        let p =
            pod(json!({"name": "p", "namespace": "a", "labels": {"app": "web", "podtype": "D"}}));
        assert_eq!(pod_type(&p), "a/D");
        let p = pod(json!({"name": "p", "labels": {"name": "n", "app": ""}}));
        assert_eq!(pod_type(&p), "default/n", "empty values are skipped");
        let owned = pod(json!({"name": "web-7d9f-x1", "namespace": "b",
            "labels": {"pod-template-hash": "7d9f"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f",
                                 "uid": "u", "controller": true}]}));
        assert_eq!(pod_type(&owned), "b/web");
        let job = pod(json!({"name": "j-abc", "namespace": "b",
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j",
                                 "uid": "u", "controller": true}]}));
        assert_eq!(pod_type(&job), "b/j");
        assert_eq!(
            pod_type(&pod(json!({"name": "lonely", "namespace": "c"}))),
            "c/lonely"
        );
    }
}
