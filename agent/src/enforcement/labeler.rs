//! This node's policy labels: deschedule's `<policy>=violating` and the labeling strategy's
//! `telemetry.aware.scheduling.<policy>/<key>=<value>`, written with server-side apply, and the
//! removal of labels in TAS's namespace that the apply does not remove ([`Labeler::remove`]).
//!
//! Why apply: the agent sends the whole set of labels it wants under its own field manager, and
//! the API server removes those it applied before and no longer sends, unless another manager
//! set the same label too (then the label stays, [`LabelChange::kept`]). After a restart the API
//! server still knows which labels were ours: the first apply cleans up whatever the previous
//! run left behind. The set the agent owns is read back from the Node's managedFields at start,
//! so an unchanged set costs no request at all, and afterwards one apply goes out per change,
//! never one per tick.
//!
//! What apply cannot remove: labels in TAS's namespace that another manager wrote (TAS before
//! Telemesh replaced it, a person, a manager that set the same value as the agent). Under
//! `--label-cleanup tas` (the default) the policy loop decides which of those go
//! ([`crate::enforcement::label_cleanup`]) and [`Labeler::remove`] removes them with a JSON patch that tests
//! each value first, so a label changed since the decision is never removed blindly: the patch
//! fails whole (422), and the labels are read again and the decision made again.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{Patch, PatchParams};

use crate::enforcement::label_cleanup::{self, Removal};

/// The field manager of every label write.
pub const FIELD_MANAGER: &str = "telemesh-agent";

/// How often [`Labeler::remove`] reads the Node again when a label changed under it, before it
/// leaves the rest to the next pass.
const REMOVE_ATTEMPTS: usize = 3;

/// What changed between two label sets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelChange {
    /// Labels that appeared or changed value.
    pub set: Vec<(String, String)>,
    /// Labels that went away.
    pub removed: Vec<String>,
    /// Labels the agent stopped applying that are still on the Node, with their values: another
    /// field manager set them too, so the apply released them without removing them.
    pub kept: Vec<(String, String)>,
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
        Self {
            set,
            removed,
            kept: Vec::new(),
        }
    }

    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.removed.is_empty() && self.kept.is_empty()
    }

    /// Moves the removed labels `labels` (the Node's after the apply) still holds to `kept`.
    fn keep_those_still_on(&mut self, labels: &BTreeMap<String, String>) {
        let (kept, removed): (Vec<String>, Vec<String>) = std::mem::take(&mut self.removed)
            .into_iter()
            .partition(|k| labels.contains_key(k));
        self.removed = removed;
        self.kept = kept
            .into_iter()
            .filter_map(|k| labels.get(&k).map(|v| (k, v.clone())))
            .collect();
    }
}

/// What [`Labeler::sync`] did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Synced {
    /// What changed.
    pub change: LabelChange,
    /// The Node's metadata as the apply left it; `None` when nothing was sent.
    pub node: Option<ObjectMeta>,
}

/// What [`Labeler::remove`] removed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Removed {
    /// The labels removed, as last decided.
    pub removed: Vec<Removal>,
    /// The Node's metadata afterwards.
    pub node: ObjectMeta,
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
        for k in label_cleanup::labels_in_fields(fields) {
            if let Some(v) = labels.get(k) {
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
    /// changed (empty when nothing did, without any request after the first) and the Node's
    /// metadata when it applied. On error nothing is remembered, so the next call tries again.
    pub async fn sync(
        &mut self,
        desired: &BTreeMap<String, String>,
    ) -> Result<Synced, kube::Error> {
        let owned = match &self.owned {
            Some(owned) => owned.clone(),
            None => {
                let node = self.nodes.get(&self.node_name).await?;
                let owned = owned_labels(&node, FIELD_MANAGER);
                self.owned = Some(owned.clone());
                owned
            }
        };
        let mut change = LabelChange::between(&owned, desired);
        if change.is_empty() {
            return Ok(Synced::default());
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
            .patch_metadata(&self.node_name, &params, &Patch::Apply(&body))
            .await
        {
            Ok(node) => {
                self.owned = Some(desired.clone());
                change
                    .keep_those_still_on(node.metadata.labels.as_ref().unwrap_or(&BTreeMap::new()));
                Ok(Synced {
                    change,
                    node: Some(node.metadata),
                })
            }
            Err(e) => {
                self.owned = None;
                Err(e)
            }
        }
    }

    /// Removes `removals` (decided on `node`, this Node's metadata) with one JSON patch that
    /// tests each label's value before removing it. When a label changed meanwhile (the API
    /// server answers 422 and applies nothing), reads the Node again, asks `decide` afresh and
    /// tries again, up to three times. Never removes a label whose value differs from the one
    /// decided on, so no change made since is lost.
    pub async fn remove(
        &self,
        mut removals: Vec<Removal>,
        mut node: ObjectMeta,
        decide: impl Fn(&ObjectMeta) -> Vec<Removal>,
    ) -> Result<Removed, kube::Error> {
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        let mut attempt = 1;
        loop {
            if removals.is_empty() {
                return Ok(Removed {
                    removed: Vec::new(),
                    node,
                });
            }
            let patch: json_patch::Patch =
                serde_json::from_value(label_cleanup::removal_patch(&removals))
                    .map_err(kube::Error::SerdeError)?;
            match self
                .nodes
                .patch_metadata(&self.node_name, &params, &Patch::Json::<()>(patch))
                .await
            {
                Ok(after) => {
                    return Ok(Removed {
                        removed: label_cleanup::with_managers(removals, &node),
                        node: after.metadata,
                    });
                }
                Err(kube::Error::Api(s)) if s.code == 422 && attempt < REMOVE_ATTEMPTS => {
                    tracing::debug!(node.name = %self.node_name, message = %s.message, "a label changed since the clean-up decision; reading the node again");
                    attempt += 1;
                    node = self.nodes.get_metadata(&self.node_name).await?.metadata;
                    removals = decide(&node);
                }
                Err(e) => return Err(e),
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
        let synced = labeler
            .sync(&map(&[("scheduling-policy", "violating")]))
            .await
            .unwrap();
        assert_eq!(synced.change.set.len(), 1);
        let node = synced.node.unwrap();
        let removal = Removal {
            key: "telemetry.aware.scheduling.gone/k".into(),
            value: "v".into(),
            why: crate::enforcement::label_cleanup::Why::Labeling {
                policy: Some("gone".into()),
                exists: false,
            },
            written_by: Vec::new(),
        };
        labeler
            .remove(vec![removal], node, |_| Vec::new())
            .await
            .unwrap();
        let requests = seen.lock().clone();
        assert_eq!(
            requests.len(),
            3,
            "read, apply, then the clean-up patch: {requests:?}"
        );
        for r in &requests {
            assert!(r.contains(" /api/v1/nodes/node-a "), "{r}");
        }
        assert!(
            requests[1].starts_with("PATCH ") && requests[1].contains(r#""name":"node-a""#),
            "the applied object names its own Node: {}",
            requests[1]
        );
        assert!(
            requests[2].starts_with("PATCH ") && requests[2].contains(r#""op":"test""#),
            "{}",
            requests[2]
        );
    }

    #[test]
    fn labels_another_manager_also_set_are_kept_not_removed() {
        let mut c = LabelChange::between(
            &map(&[("p", "violating"), ("q", "violating")]),
            &BTreeMap::new(),
        );
        c.keep_those_still_on(&map(&[("q", "violating"), ("other", "x")]));
        assert_eq!(c.removed, ["p"]);
        assert_eq!(c.kept, [("q".to_owned(), "violating".to_owned())]);
    }

    /// A label that changed between the decision and the patch: the API server refuses the
    /// whole patch (422), the labeler reads the Node again and sends what `decide` says then.
    #[tokio::test]
    async fn a_label_changed_since_the_decision_is_decided_again() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};

        let patches = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(parking_lot::Mutex::new(Vec::<String>::new()));
        let (count, log) = (patches.clone(), seen.clone());
        let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            let (count, log) = (count.clone(), log.clone());
            async move {
                use http_body_util::BodyExt as _;
                let method = req.method().clone();
                let body = req.into_body().collect().await.unwrap().to_bytes();
                log.lock()
                    .push(format!("{method} {}", String::from_utf8_lossy(&body)));
                let node = serde_json::json!({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": "node-a", "labels": {"p": "other"}}});
                let (status, body) = if method == http::Method::PATCH
                    && count.fetch_add(1, Ordering::SeqCst) == 0
                {
                    let status = serde_json::json!({"kind": "Status", "apiVersion": "v1",
                        "status": "Failure", "code": 422, "reason": "Invalid",
                        "message": "the server rejected our request due to an error in our request"});
                    (422, status)
                } else {
                    (200, node)
                };
                let mut response = http::Response::new(kube::client::Body::from(
                    serde_json::to_vec(&body).unwrap(),
                ));
                *response.status_mut() = http::StatusCode::from_u16(status).unwrap();
                Ok::<_, std::convert::Infallible>(response)
            }
        });
        let labeler = Labeler::new(Api::all(kube::Client::new(service, "default")), "node-a");
        let decided = |value: &str| Removal {
            key: "p".into(),
            value: value.into(),
            why: crate::enforcement::label_cleanup::Why::NotViolated { policy: "p".into() },
            written_by: Vec::new(),
        };
        let removed = labeler
            .remove(vec![decided("violating")], ObjectMeta::default(), |meta| {
                let value = meta.labels.as_ref().unwrap()["p"].clone();
                vec![decided(&value)]
            })
            .await
            .unwrap();
        assert_eq!(removed.removed, [decided("other")]);
        let requests = seen.lock().clone();
        assert_eq!(requests.len(), 3, "patch, read, patch: {requests:?}");
        assert!(
            requests[0].contains(r#""value":"violating""#),
            "{}",
            requests[0]
        );
        assert!(requests[1].starts_with("GET "), "{}", requests[1]);
        assert!(
            requests[2].contains(r#""value":"other""#),
            "{}",
            requests[2]
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
