//! Label clean-up: which labels in TAS's namespace this agent removes from its own Node although
//! they are not, or not only, its own, and the JSON patch that removes them. Pure: the labeler
//! ([`crate::enforcement::labeler::Labeler::remove`]) sends the patch and the policy loop
//! ([`crate::enforcement`]) decides once per pass.
//!
//! TAS owns its label namespace: every pass it removes each `telemetry.aware.scheduling.*` label
//! no labeling policy sets now and the `<policy>` key of every deschedule policy a node does not
//! violate, and on a policy's deletion `<policy>=violating` and the policy's prefixed labels,
//! whoever wrote them. Server-side apply alone removes only what the agent applied, so labels TAS
//! left behind when Telemesh replaced it, labels set by hand and labels another manager also set
//! (an apply of the same value shares the field) would stay for ever, and a stale
//! `<policy>=violating` keeps the descheduler evicting linked pods from a healthy node. Hence
//! [`LabelCleanup::Tas`], the default, and [`LabelCleanup::Own`] for clusters where another tool
//! writes in that namespace. Why `tas` by default: Telemesh replaces TAS, and a cluster that ran
//! TAS already had every label in that namespace removed by it whoever wrote it, so the default
//! changes nothing for a tool there, while `own` by default would silently keep what TAS left
//! (pods evicted from, and kept off, healthy nodes) with nothing to tell an operator why.
//!
//! Which keys count as TAS's, on this agent's node only (each agent cleans its own Node; TAS
//! cleaned every node centrally), and only while no current policy sets the key on this node
//! (those stay, with the value the agent applies):
//!
//! - every key that starts with `telemetry.aware.scheduling.`, whatever its value and whether
//!   or not the policy it names exists (TAS's labeling Enforce and Cleanup; a key without
//!   `/<key>` too, as in TAS's own tests). TAS cleans these only while some labeling policy
//!   exists; we always do, as the namespace is TAS's either way;
//! - `<name>`, whatever its value, where `<name>` is a current policy with a `deschedule`
//!   strategy in its spec, in any namespace (the key is the bare name): TAS's deschedule Enforce
//!   removes the key of every registered deschedule strategy a node does not violate, value `""`
//!   included. A policy without `deschedule` does not claim its name, as in TAS;
//! - `<name>=violating` where `<name>` had a `deschedule` strategy at an earlier pass of this
//!   agent and has none now: the policy was deleted or lost that strategy (TAS's Cleanup on
//!   deletion, which selects `<name>=violating` and so leaves other values). The agent forgets
//!   the name once its Node no longer carries `<name>=violating` ([`PolicyNames::settle`]), so
//!   this is a one-off as in TAS, not a ban on the key. A policy deleted while no agent of this
//!   node ran is not known to it, and a bare `<name>=violating` TAS left for it stays: nothing
//!   tells it from a label anyone else may own.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ObjectMeta};
use telemesh_core::policy::{LABELING_PREFIX, StrategyKind, TASPolicy, VIOLATING};

/// Which labels the agent removes from its Node (`--label-cleanup`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LabelCleanup {
    /// As TAS: every label in TAS's namespace that no current policy sets on this node,
    /// whoever wrote it (the default).
    #[default]
    Tas,
    /// Only the labels this agent applied (server-side apply ownership), for clusters where
    /// another tool writes in TAS's namespace.
    Own,
}

/// The policy names the clean-up needs, kept from pass to pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyNames {
    /// Every current policy's name (any namespace).
    all: BTreeSet<String>,
    /// Current policies with a `deschedule` strategy.
    deschedule: BTreeSet<String>,
    /// Names that had a `deschedule` strategy at an earlier pass and have none now.
    gone: BTreeSet<String>,
}

// === impl PolicyNames ===

impl PolicyNames {
    /// Takes in this pass's policies: a name whose `deschedule` strategy went away since the
    /// previous pass is gone, one that has it again is not.
    pub fn observe<'a>(&mut self, policies: impl IntoIterator<Item = &'a TASPolicy>) {
        let mut all = BTreeSet::new();
        let mut deschedule = BTreeSet::new();
        for p in policies {
            let Some(name) = p.metadata.name.clone() else {
                continue;
            };
            if p.spec
                .strategies
                .contains_key(StrategyKind::Deschedule.as_str())
            {
                deschedule.insert(name.clone());
            }
            all.insert(name);
        }
        self.gone
            .extend(self.deschedule.difference(&deschedule).cloned());
        self.gone.retain(|n| !deschedule.contains(n));
        self.all = all;
        self.deschedule = deschedule;
    }

    /// Forgets the gone names the Node no longer carries as `<name>=violating`: their clean-up
    /// is done.
    pub fn settle(&mut self, labels: &BTreeMap<String, String>) {
        self.gone
            .retain(|n| labels.get(n).map(String::as_str) == Some(VIOLATING));
    }

    /// Names gone and not yet cleaned up.
    pub fn gone(&self) -> impl Iterator<Item = &str> {
        self.gone.iter().map(String::as_str)
    }
}

/// Why a label is removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// A `telemetry.aware.scheduling.*` key no current policy sets on this node; `policy` is
    /// the name in the key, if it has the form `<prefix><policy>/<key>`.
    Labeling {
        /// The policy the key names.
        policy: Option<String>,
        /// Whether a policy of that name exists now.
        exists: bool,
    },
    /// The key of a current deschedule policy this node does not violate.
    NotViolated {
        /// The policy.
        policy: String,
    },
    /// `<policy>=violating` of a policy deleted (or whose deschedule strategy was removed).
    Gone {
        /// The policy.
        policy: String,
        /// Whether a policy of that name still exists (without a deschedule strategy).
        exists: bool,
    },
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Labeling {
                policy: Some(p),
                exists: true,
            } => write!(f, "labeling policy {p} does not set it on this node"),
            Self::Labeling {
                policy: Some(p),
                exists: false,
            } => write!(f, "no policy {p} exists"),
            Self::Labeling { policy: None, .. } => {
                write!(f, "no labeling policy sets it on this node")
            }
            Self::NotViolated { policy } => {
                write!(f, "this node does not violate deschedule policy {policy}")
            }
            Self::Gone {
                policy,
                exists: false,
            } => write!(f, "deschedule policy {policy} was deleted"),
            Self::Gone {
                policy,
                exists: true,
            } => write!(f, "policy {policy} no longer has a deschedule strategy"),
        }
    }
}

/// One label to remove from the Node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removal {
    /// The label key.
    pub key: String,
    /// Its value when decided: the patch removes it only if it still has this value.
    pub value: String,
    /// Why.
    pub why: Why,
    /// The field managers that set it, from the Node's managedFields (empty when unknown).
    pub written_by: Vec<String>,
}

/// Returns the labels of `labels` (the Node's) to remove under `mode`: those in TAS's namespace
/// (module doc) that `desired` (every label current policies set on this node) does not hold,
/// in key order. Nothing under [`LabelCleanup::Own`].
pub fn stale(
    labels: &BTreeMap<String, String>,
    desired: &BTreeMap<String, String>,
    names: &PolicyNames,
    mode: LabelCleanup,
) -> Vec<Removal> {
    if mode == LabelCleanup::Own {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (key, value) in labels {
        if desired.contains_key(key) {
            continue;
        }
        let why = if let Some(rest) = key.strip_prefix(LABELING_PREFIX) {
            let policy = rest.split_once('/').map(|(p, _)| p.to_owned());
            let exists = policy.as_ref().is_some_and(|p| names.all.contains(p));
            Why::Labeling { policy, exists }
        } else if names.deschedule.contains(key) {
            Why::NotViolated {
                policy: key.clone(),
            }
        } else if names.gone.contains(key) && value == VIOLATING {
            Why::Gone {
                policy: key.clone(),
                exists: names.all.contains(key),
            }
        } else {
            continue;
        };
        out.push(Removal {
            key: key.clone(),
            value: value.clone(),
            why,
            written_by: Vec::new(),
        });
    }
    out
}

/// Fills in each removal's `written_by` from `meta`'s managedFields.
pub fn with_managers(mut removals: Vec<Removal>, meta: &ObjectMeta) -> Vec<Removal> {
    let managers = label_managers(meta);
    for r in &mut removals {
        r.written_by = managers.get(&r.key).cloned().unwrap_or_default();
    }
    removals
}

/// The JSON patch (RFC 6902) that removes `removals` from a Node, each behind a `test` of the
/// value it was decided on: if any label changed meanwhile, the API server applies none of it
/// and answers 422, and nothing anyone wrote since the decision is lost.
pub fn removal_patch(removals: &[Removal]) -> serde_json::Value {
    let mut ops = Vec::with_capacity(2 * removals.len());
    for r in removals {
        let path = format!("/metadata/labels/{}", escape_pointer(&r.key));
        ops.push(serde_json::json!({"op": "test", "path": path, "value": r.value}));
        ops.push(serde_json::json!({"op": "remove", "path": path}));
    }
    serde_json::Value::Array(ops)
}

/// Escapes one JSON pointer token (RFC 6901): `~` as `~0`, `/` as `~1`.
fn escape_pointer(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// The label keys a managedFields entry's fields name (`f:metadata` → `f:labels` → `f:<key>`).
pub fn labels_in_fields(fields: &FieldsV1) -> impl Iterator<Item = &str> {
    fields
        .0
        .get("f:metadata")
        .and_then(|m| m.get("f:labels"))
        .and_then(|l| l.as_object())
        .into_iter()
        .flat_map(|o| o.keys())
        .filter_map(|k| k.strip_prefix("f:"))
}

/// Each label's field managers, from `meta`'s managedFields, in the entries' order.
pub fn label_managers(meta: &ObjectMeta) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for entry in meta.managed_fields.iter().flatten() {
        let (Some(manager), Some(fields)) = (&entry.manager, &entry.fields_v1) else {
            continue;
        };
        for key in labels_in_fields(fields) {
            let managers = out.entry(key.to_owned()).or_default();
            if !managers.contains(manager) {
                managers.push(manager.clone());
            }
        }
    }
    out
}

/// `meta`'s managedFields cut down to what [`label_managers`] reads (entries that set labels,
/// with only their label fields): what a store of the Node keeps.
pub fn keep_label_fields(meta: &mut ObjectMeta) {
    let Some(entries) = meta.managed_fields.take() else {
        return;
    };
    let kept: Vec<_> = entries
        .into_iter()
        .filter_map(|mut entry| {
            let labels = entry
                .fields_v1
                .as_ref()?
                .0
                .get("f:metadata")?
                .get("f:labels")?
                .clone();
            entry.fields_v1 = Some(FieldsV1(
                serde_json::json!({"f:metadata": {"f:labels": labels}}),
            ));
            Some(entry)
        })
        .collect();
    meta.managed_fields = (!kept.is_empty()).then_some(kept);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    //! The tables mirror TAS's own tests of its clean-up (telemetry-aware-scheduling/pkg/
    //! strategies/labeling/enforce_test.go, deschedule/enforce_test.go, deschedule_test.go):
    //! each case names the TAS test and case it follows.

    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    fn policy(name: &str, strategies: &[&str]) -> TASPolicy {
        let strategies: serde_json::Map<String, serde_json::Value> = strategies
            .iter()
            .map(|s| {
                (
                    (*s).to_owned(),
                    serde_json::json!({"rules": [{"metricname": "m", "operator": "GreaterThan", "target": 1}]}),
                )
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "apiVersion": "telemetry.intel.com/v1alpha1", "kind": "TASPolicy",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"strategies": strategies}
        }))
        .unwrap()
    }

    fn names(policies: &[TASPolicy]) -> PolicyNames {
        let mut n = PolicyNames::default();
        n.observe(policies);
        n
    }

    /// The labels left on the node after the removals.
    fn after(labels: &BTreeMap<String, String>, removals: &[Removal]) -> BTreeMap<String, String> {
        let mut out = labels.clone();
        for r in removals {
            out.remove(&r.key);
        }
        out
    }

    /// Node labels, then what the agent applies: the node after both, as TAS's tests read it.
    fn pass(
        labels: &BTreeMap<String, String>,
        desired: &BTreeMap<String, String>,
        names: &PolicyNames,
    ) -> BTreeMap<String, String> {
        let mut out = after(labels, &stale(labels, desired, names, LabelCleanup::Tas));
        out.extend(desired.clone());
        out
    }

    #[test]
    fn labeling_enforce_replaces_stale_prefixed_labels_with_the_violated_ones() {
        let n = names(&[policy("labeling-test", &["labeling"])]);
        let node = map(&[("telemetry.aware.scheduling.labeling-test", "")]);
        // "node labelled": memory 2000 > 99 sets gpu-card1=false.
        let desired = map(&[(
            "telemetry.aware.scheduling.labeling-test/gpu-card1",
            "false",
        )]);
        assert_eq!(pass(&node, &desired, &n), desired);
        // "node labelled two different metrics".
        let two = map(&[
            (
                "telemetry.aware.scheduling.labeling-test/gpu-card1",
                "false",
            ),
            ("telemetry.aware.scheduling.labeling-test/gpu-card2", "true"),
        ]);
        assert_eq!(pass(&node, &two, &n), two);
        // "node unlabeled test": memory 2000 is not > 3000, so no label, and the stale one goes.
        assert_eq!(pass(&node, &BTreeMap::new(), &n), BTreeMap::new());
        let removals = stale(&node, &BTreeMap::new(), &n, LabelCleanup::Tas);
        assert_eq!(
            removals[0].why,
            Why::Labeling {
                policy: None,
                exists: false
            }
        );
    }

    #[test]
    fn labeling_enforce_removes_a_prefixed_label_whose_value_no_policy_sets() {
        // The agent applies card0 (the min-max winner); a card1 left by someone else under
        // another key goes, one of the same key is overwritten by the apply.
        let n = names(&[policy("labeling-test", &["labeling"])]);
        let node = map(&[
            (
                "telemetry.aware.scheduling.labeling-test/gpu-device",
                "card1",
            ),
            ("telemetry.aware.scheduling.labeling-test/old", "x"),
        ]);
        let desired = map(&[(
            "telemetry.aware.scheduling.labeling-test/gpu-device",
            "card0",
        )]);
        let removals = stale(&node, &desired, &n, LabelCleanup::Tas);
        assert_eq!(
            removals
                .iter()
                .map(|r| (r.key.as_str(), r.value.as_str()))
                .collect::<Vec<_>>(),
            [("telemetry.aware.scheduling.labeling-test/old", "x")]
        );
        assert_eq!(
            removals[0].why.to_string(),
            "labeling policy labeling-test does not set it on this node"
        );
        assert_eq!(pass(&node, &desired, &n), desired);
    }

    #[test]
    fn labeling_cleanup_removes_every_label_of_a_deleted_policy() {
        // TestLabelingStrategy_Cleanup: labels set, then the policy deleted: none stay.
        let mut n = names(&[policy("unlabeling-test", &["labeling"])]);
        let node = map(&[
            (
                "telemetry.aware.scheduling.unlabeling-test/gpu-card1",
                "false",
            ),
            (
                "telemetry.aware.scheduling.unlabeling-test/gpu-card2",
                "true",
            ),
            ("telemetry.aware.scheduling.unlabeling-test", ""),
        ]);
        n.observe(&[]);
        assert_eq!(pass(&node, &BTreeMap::new(), &n), BTreeMap::new());
        let why = &stale(&node, &BTreeMap::new(), &n, LabelCleanup::Tas)[1].why;
        assert_eq!(why.to_string(), "no policy unlabeling-test exists");
    }

    #[test]
    fn deschedule_enforce_removes_the_key_from_nodes_that_do_not_violate() {
        // TestDescheduleStrategy_Enforce "node label test": node-1 does not violate and loses
        // `deschedule-test: ""`; node-2 violates and keeps `violating`; node-3 violates and
        // gets it; other labels stay.
        let n = names(&[policy("deschedule-test", &["deschedule"])]);
        let violating = map(&[("deschedule-test", "violating")]);
        let node1 = map(&[("deschedule-test", ""), ("node-1-label", "test")]);
        assert_eq!(
            pass(&node1, &BTreeMap::new(), &n),
            map(&[("node-1-label", "test")])
        );
        let node2 = map(&[("deschedule-test", "violating"), ("node-2-label", "test")]);
        assert!(stale(&node2, &violating, &n, LabelCleanup::Tas).is_empty());
        assert_eq!(pass(&node2, &violating, &n), node2);
        let node3 = map(&[("node-3-label", "test")]);
        assert_eq!(
            pass(&node3, &violating, &n),
            map(&[("deschedule-test", "violating"), ("node-3-label", "test")])
        );
        // "node unlabel test": neither node violates any more.
        let removals = stale(&node2, &BTreeMap::new(), &n, LabelCleanup::Tas);
        assert_eq!(removals.len(), 1);
        assert_eq!(
            removals[0].why.to_string(),
            "this node does not violate deschedule policy deschedule-test"
        );
    }

    #[test]
    fn deschedule_cleanup_removes_only_violating_values_of_a_deleted_policy() {
        // TestDescheduleStrategy_Cleanup and TestDeschedule_Cleanup: on deletion the key goes
        // where it is `violating` and stays with any other value ("", "null").
        let mut n = names(&[policy("deschedule-test", &["deschedule"])]);
        n.observe(&[]);
        assert_eq!(n.gone().collect::<Vec<_>>(), ["deschedule-test"]);
        let node1 = map(&[("deschedule-test", "violating"), ("node-1-label", "test")]);
        let removals = stale(&node1, &BTreeMap::new(), &n, LabelCleanup::Tas);
        assert_eq!(after(&node1, &removals), map(&[("node-1-label", "test")]));
        assert_eq!(
            removals[0].why.to_string(),
            "deschedule policy deschedule-test was deleted"
        );
        for value in ["", "null"] {
            let node2 = map(&[("deschedule-test", value), ("node-2-label", "test")]);
            assert!(stale(&node2, &BTreeMap::new(), &n, LabelCleanup::Tas).is_empty());
        }
    }

    #[test]
    fn a_deleted_policys_name_is_forgotten_once_the_node_no_longer_carries_it() {
        let mut n = names(&[policy("p", &["deschedule"])]);
        n.observe(&[]);
        let node = map(&[("p", "violating")]);
        n.settle(&node);
        assert_eq!(n.gone().count(), 1, "still to remove");
        n.settle(&BTreeMap::new());
        assert_eq!(n.gone().count(), 0);
        // Later hand-set labels of that name are nobody's business of ours.
        assert!(stale(&node, &BTreeMap::new(), &n, LabelCleanup::Tas).is_empty());
    }

    #[test]
    fn a_policy_that_comes_back_or_keeps_a_namesake_is_not_gone() {
        let mut n = names(&[policy("p", &["deschedule"])]);
        n.observe(&[]);
        n.observe(&[policy("p", &["deschedule"])]);
        assert_eq!(n.gone().count(), 0);
        // Losing only the deschedule strategy counts as gone, with its own reason.
        n.observe(&[policy("p", &["dontschedule"])]);
        let removals = stale(
            &map(&[("p", "violating")]),
            &BTreeMap::new(),
            &n,
            LabelCleanup::Tas,
        );
        assert_eq!(
            removals[0].why.to_string(),
            "policy p no longer has a deschedule strategy"
        );
    }

    #[test]
    fn names_of_policies_without_deschedule_and_unrelated_labels_stay() {
        let n = names(&[policy("hot", &["dontschedule", "labeling"])]);
        let node = map(&[
            ("hot", "violating"),
            ("other-policy", "violating"),
            ("kubernetes.io/hostname", "n"),
            ("telemetry.aware.schedulingx/y", "z"),
        ]);
        assert!(stale(&node, &BTreeMap::new(), &n, LabelCleanup::Tas).is_empty());
    }

    #[test]
    fn the_conservative_mode_removes_nothing() {
        let mut n = names(&[policy("p", &["deschedule"])]);
        n.observe(&[]);
        let node = map(&[("p", "violating"), ("telemetry.aware.scheduling.p/k", "v")]);
        assert!(stale(&node, &BTreeMap::new(), &n, LabelCleanup::Own).is_empty());
        assert_eq!(
            stale(&node, &BTreeMap::new(), &n, LabelCleanup::Tas).len(),
            2
        );
    }

    #[test]
    fn the_patch_tests_each_value_before_removing_it() {
        let removals = vec![
            Removal {
                key: "telemetry.aware.scheduling.p/a~b".into(),
                value: "x".into(),
                why: Why::NotViolated { policy: "p".into() },
                written_by: Vec::new(),
            },
            Removal {
                key: "p".into(),
                value: "violating".into(),
                why: Why::NotViolated { policy: "p".into() },
                written_by: Vec::new(),
            },
        ];
        assert_eq!(
            removal_patch(&removals),
            serde_json::json!([
                {"op": "test", "path": "/metadata/labels/telemetry.aware.scheduling.p~1a~0b", "value": "x"},
                {"op": "remove", "path": "/metadata/labels/telemetry.aware.scheduling.p~1a~0b"},
                {"op": "test", "path": "/metadata/labels/p", "value": "violating"},
                {"op": "remove", "path": "/metadata/labels/p"},
            ])
        );
        // The patch applies as the API server applies it, and a changed value fails it whole.
        let node = serde_json::json!({"metadata": {"labels": {
            "telemetry.aware.scheduling.p/a~b": "x", "p": "violating", "keep": "1"}}});
        let patch: json_patch::Patch = serde_json::from_value(removal_patch(&removals)).unwrap();
        let mut done = node.clone();
        json_patch::patch(&mut done, &patch).unwrap();
        assert_eq!(
            done,
            serde_json::json!({"metadata": {"labels": {"keep": "1"}}})
        );
        let mut changed = node.clone();
        changed["metadata"]["labels"]["p"] = "".into();
        let mut attempt = changed.clone();
        assert!(json_patch::patch(&mut attempt, &patch).is_err());
    }

    #[test]
    fn managers_are_read_from_label_fields_and_kept_alone() {
        let mut meta: ObjectMeta = serde_json::from_value(serde_json::json!({
            "name": "n",
            "labels": {"p": "violating", "q": "1"},
            "managedFields": [
                {"manager": "telemesh-agent", "operation": "Apply", "apiVersion": "v1",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {"f:p": {}}}}},
                {"manager": "kubectl", "operation": "Update", "apiVersion": "v1",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {"f:p": {}, "f:q": {}}}}},
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:images": {}}}}
            ]
        }))
        .unwrap();
        let before = label_managers(&meta);
        assert_eq!(before["p"], ["telemesh-agent", "kubectl"]);
        assert_eq!(before["q"], ["kubectl"]);
        keep_label_fields(&mut meta);
        assert_eq!(
            meta.managed_fields.as_ref().unwrap().len(),
            2,
            "kubelet's entry dropped"
        );
        assert_eq!(label_managers(&meta), before);
        let removals = with_managers(
            stale(
                meta.labels.as_ref().unwrap(),
                &BTreeMap::new(),
                &names(&[policy("p", &["deschedule"])]),
                LabelCleanup::Tas,
            ),
            &meta,
        );
        assert_eq!(removals[0].written_by, ["telemesh-agent", "kubectl"]);
    }
}
