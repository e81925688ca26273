//! This node's policy labels: deschedule's `<policy>=violating` and the labeling strategy's
//! `telemetry.aware.scheduling.<policy>/<key>=<value>`, written with server-side apply.
//!
//! Why apply: the agent sends the whole set of labels it wants under its own field manager, and
//! the API server removes those it applied before and no longer sends. So only labels this agent
//! wrote are ever removed (TAS deletes every label with its prefix, whoever wrote it), a label
//! another manager also set survives, and after a restart the API server still knows which
//! labels were ours: the first apply cleans up whatever the previous run left behind. The set the
//! agent owns is read back from the Node's managedFields at start, so an unchanged set costs no
//! request at all, and afterwards one apply goes out per change, never one per tick.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};

/// The field manager of every label write.
pub const FIELD_MANAGER: &str = "telemesh-agent";

/// What changed between two label sets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelChange {
    /// Labels that appeared or changed value.
    pub set: Vec<(String, String)>,
    /// Labels that went away.
    pub removed: Vec<String>,
}

impl LabelChange {
    /// Computes the change from `old` to `new`.
    pub fn between(old: &BTreeMap<String, String>, new: &BTreeMap<String, String>) -> Self {
        let set = new
            .iter()
            .filter(|(k, v)| old.get(*k) != Some(*v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let removed = old
            .keys()
            .filter(|k| !new.contains_key(*k))
            .cloned()
            .collect();
        Self { set, removed }
    }

    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.removed.is_empty()
    }
}

/// Returns the labels `manager` applied on `node`, with their current values, from its
/// managedFields (`f:metadata` → `f:labels` → `f:<key>`).
pub fn owned_labels(node: &Node, manager: &str) -> BTreeMap<String, String> {
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let mut out = BTreeMap::new();
    for entry in node.metadata.managed_fields.iter().flatten() {
        if entry.manager.as_deref() != Some(manager) || entry.operation.as_deref() != Some("Apply")
        {
            continue;
        }
        let Some(fields) = &entry.fields_v1 else {
            continue;
        };
        let owned = fields
            .0
            .get("f:metadata")
            .and_then(|m| m.get("f:labels"))
            .and_then(|l| l.as_object());
        for key in owned.into_iter().flat_map(|o| o.keys()) {
            if let Some(k) = key.strip_prefix("f:")
                && let Some(v) = labels.get(k)
            {
                out.insert(k.to_owned(), v.clone());
            }
        }
    }
    out
}

/// Writes this node's policy labels; remembers what it last wrote.
pub struct Labeler {
    nodes: Api<Node>,
    node_name: String,
    /// What this agent owns now; `None` until read from the Node.
    owned: Option<BTreeMap<String, String>>,
}

impl Labeler {
    /// A labeler for `node_name`.
    pub fn new(nodes: Api<Node>, node_name: &str) -> Self {
        Self {
            nodes,
            node_name: node_name.to_owned(),
            owned: None,
        }
    }

    /// Whether [`Self::sync`] with `desired` would send a request (it reads the node when it
    /// does not know its labels yet, and patches only a change).
    pub fn needs_request(&self, desired: &BTreeMap<String, String>) -> bool {
        self.owned
            .as_ref()
            .is_none_or(|owned| !LabelChange::between(owned, desired).is_empty())
    }

    /// Makes the node carry exactly `desired` among the labels this agent owns; returns what
    /// changed (empty when nothing did, without any request after the first). On error nothing
    /// is remembered, so the next call tries again.
    pub async fn sync(
        &mut self,
        desired: &BTreeMap<String, String>,
    ) -> Result<LabelChange, kube::Error> {
        let owned = match &self.owned {
            Some(owned) => owned.clone(),
            None => {
                let node = self.nodes.get(&self.node_name).await?;
                let owned = owned_labels(&node, FIELD_MANAGER);
                self.owned = Some(owned.clone());
                owned
            }
        };
        let change = LabelChange::between(&owned, desired);
        if change.is_empty() {
            return Ok(change);
        }
        let mut metadata = serde_json::json!({ "name": self.node_name });
        if !desired.is_empty() {
            metadata["labels"] = serde_json::json!(desired);
        }
        let body = serde_json::json!({ "apiVersion": "v1", "kind": "Node", "metadata": metadata });
        // Force: these keys are the agent's to decide; a stale value someone else wrote for
        // `<policy>=violating` must not block the truth.
        let params = PatchParams::apply(FIELD_MANAGER).force();
        match self
            .nodes
            .patch(&self.node_name, &params, &Patch::Apply(&body))
            .await
        {
            Ok(_) => {
                self.owned = Some(desired.clone());
                Ok(change)
            }
            Err(e) => {
                self.owned = None;
                Err(e)
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn changes_name_set_and_removed_labels() {
        let old = map(&[("a", "violating"), ("p/k", "1"), ("same", "x")]);
        let new = map(&[("p/k", "2"), ("same", "x"), ("b", "violating")]);
        let c = LabelChange::between(&old, &new);
        assert_eq!(
            c.set,
            vec![("b".into(), "violating".into()), ("p/k".into(), "2".into())]
        );
        assert_eq!(c.removed, vec!["a".to_string()]);
        assert!(LabelChange::between(&new, &new).is_empty());
    }

    #[tokio::test]
    async fn the_labeler_writes_its_own_node_only() {
        let (client, seen) = crate::test_client::recording();
        let mut labeler = Labeler::new(Api::all(client), "node-a");
        let change = labeler
            .sync(&map(&[("scheduling-policy", "violating")]))
            .await
            .unwrap();
        assert_eq!(change.set.len(), 1);
        let requests = seen.lock().clone();
        assert_eq!(requests.len(), 2, "read, then apply: {requests:?}");
        for r in &requests {
            assert!(r.contains(" /api/v1/nodes/node-a "), "{r}");
        }
        assert!(
            requests[1].starts_with("PATCH ") && requests[1].contains(r#""name":"node-a""#),
            "the applied object names its own Node: {}",
            requests[1]
        );
    }

    #[test]
    fn owned_labels_come_from_the_managers_apply_entry() {
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "n",
                "labels": {"p": "violating", "other": "x", "kubernetes.io/hostname": "n"},
                "managedFields": [
                    {"manager": FIELD_MANAGER, "operation": "Apply", "apiVersion": "v1",
                     "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {"f:p": {}}}}},
                    {"manager": "kubectl", "operation": "Update", "apiVersion": "v1",
                     "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {"f:other": {}}}}}
                ]
            }
        }))
        .unwrap();
        assert_eq!(
            owned_labels(&node, FIELD_MANAGER),
            map(&[("p", "violating")])
        );
        assert!(owned_labels(&node, "someone-else").is_empty());
    }
}
