//! kube-scheduler extender v1 messages (`k8s.io/kube-scheduler/extender/v1`), as the scheduler
//! sends and reads them: the coordinator answers them and sim's scheduler sends them.
//!
//! The Go structs have no JSON tags, so the scheduler writes PascalCase keys (`Pod`, `Nodes`,
//! `NodeNames`, `FailedNodes`, ...) and Go's decoder matches keys case-insensitively. These
//! types serialize PascalCase and accept any ASCII case on input ([`key_is`]): the exact spelling
//! is tried first, so the usual request pays one string comparison per key. As in Go, `null`
//! decodes to the field's zero value and unknown keys are skipped. Nested Kubernetes objects
//! keep their own camelCase JSON (k8s-openapi types).
//!
//! Only the message shapes live here; what the verbs decide is the coordinator's.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::api::core::v1::{Node, Pod};
use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

/// Lowest score an extender gives (`MinExtenderPriority`).
pub const MIN_EXTENDER_PRIORITY: i64 = 0;

/// Highest score an extender gives (`MaxExtenderPriority`); the scheduler multiplies it by the
/// extender's weight and by 10 (`MaxNodeScore / MaxExtenderPriority`).
pub const MAX_EXTENDER_PRIORITY: i64 = 10;

/// The candidate nodes of a full-node request: `{"metadata":{},"items":[...]}` (the scheduler
/// writes no `apiVersion`/`kind`; k8s-openapi writes them and accepts either).
pub type NodeList = k8s_openapi::List<Node>;

/// Whether a received key names the field spelled `pascal`: exactly, or ignoring ASCII case as
/// Go's `encoding/json` does.
#[inline]
pub fn key_is(key: &str, pascal: &str) -> bool {
    key == pascal || key.eq_ignore_ascii_case(pascal)
}

/// A map key, borrowed from the input when it has no escapes.
pub struct Key<'de>(pub Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// Defines a message struct: PascalCase on output, any case and `null` as zero on input.
macro_rules! message {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* $key:literal => $field:ident : $ty:ty ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Default, Serialize)]
        pub struct $name {
            $( $(#[$fmeta])* #[serde(rename = $key)] pub $field: $ty, )*
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct V(PhantomData<$name>);
                impl<'de> Visitor<'de> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str(concat!("a ", stringify!($name), " object"))
                    }
                    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<$name, A::Error> {
                        let mut out = $name::default();
                        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
                            $(
                                if key_is(&key, $key) {
                                    out.$field = map.next_value::<Option<$ty>>()?.unwrap_or_default();
                                    continue;
                                }
                            )*
                            map.next_value::<IgnoredAny>()?;
                        }
                        Ok(out)
                    }
                }
                deserializer.deserialize_map(V(PhantomData))
            }
        }
    };
}

message! {
    /// What filter and prioritize receive. With `nodeCacheCapable: false` the scheduler sends
    /// whole `Nodes`; with `true` only `NodeNames`; the other is `null`.
    pub struct ExtenderArgs {
        /// The pod being scheduled.
        "Pod" => pod: Option<Pod>,
        /// Candidate nodes in full (not nodeCacheCapable).
        "Nodes" => nodes: Option<NodeList>,
        /// Candidate node names (nodeCacheCapable).
        "NodeNames" => node_names: Option<Vec<String>>,
    }
}

message! {
    /// What filter answers. Survivors go in `Nodes` (full-node mode) or `NodeNames`
    /// (nodeCacheCapable); if both are `null`, no node survives.
    pub struct ExtenderFilterResult {
        /// Surviving nodes in full (not nodeCacheCapable).
        "Nodes" => nodes: Option<NodeList>,
        /// Surviving node names (nodeCacheCapable).
        "NodeNames" => node_names: Option<Vec<String>>,
        /// Node → why it cannot take the pod now (preemption may still help).
        "FailedNodes" => failed_nodes: BTreeMap<String, String>,
        /// Node → why it can never take the pod (preemption will not try it).
        "FailedAndUnresolvableNodes" => failed_and_unresolvable_nodes: BTreeMap<String, String>,
        /// Non-empty when the call failed as a whole.
        "Error" => error: String,
    }
}

message! {
    /// One node's score; prioritize answers a JSON array of these.
    pub struct HostPriority {
        /// Node name.
        "Host" => host: String,
        /// 0..=[`MAX_EXTENDER_PRIORITY`].
        "Score" => score: i64,
    }
}

/// What prioritize answers.
pub type HostPriorityList = Vec<HostPriority>;

message! {
    /// What preempt receives: the scheduler's candidate victims per node, in full
    /// (`NodeNameToVictims`) or as UIDs when nodeCacheCapable (`NodeNameToMetaVictims`).
    pub struct ExtenderPreemptionArgs {
        /// The pod that needs room.
        "Pod" => pod: Option<Pod>,
        /// Node → victims in full (not nodeCacheCapable).
        "NodeNameToVictims" => node_name_to_victims: Option<BTreeMap<String, Victims>>,
        /// Node → victims by UID (nodeCacheCapable).
        "NodeNameToMetaVictims" => node_name_to_meta_victims: Option<BTreeMap<String, MetaVictims>>,
    }
}

message! {
    /// What preempt answers, always by UID. Leaving a node out removes it from the candidates.
    pub struct ExtenderPreemptionResult {
        /// Node → victims the extender agrees to.
        "NodeNameToMetaVictims" => node_name_to_meta_victims: Option<BTreeMap<String, MetaVictims>>,
    }
}

message! {
    /// Victims on one node, in full.
    pub struct Victims {
        /// The pods.
        "Pods" => pods: Vec<Pod>,
        /// PodDisruptionBudgets their eviction would violate.
        "NumPDBViolations" => num_pdb_violations: i64,
    }
}

message! {
    /// Victims on one node, by UID.
    pub struct MetaVictims {
        /// The pods.
        "Pods" => pods: Vec<MetaPod>,
        /// PodDisruptionBudgets their eviction would violate.
        "NumPDBViolations" => num_pdb_violations: i64,
    }
}

message! {
    /// A pod by UID.
    pub struct MetaPod {
        /// `metadata.uid`.
        "UID" => uid: String,
    }
}

message! {
    /// What bind receives (an extender with a bindVerb binds the pod itself).
    pub struct ExtenderBindingArgs {
        /// Pod name.
        "PodName" => pod_name: String,
        /// Pod namespace.
        "PodNamespace" => pod_namespace: String,
        /// Pod UID.
        "PodUID" => pod_uid: String,
        /// Target node.
        "Node" => node: String,
    }
}

message! {
    /// What bind answers.
    pub struct ExtenderBindingResult {
        /// Non-empty when binding failed.
        "Error" => error: String,
    }
}

// === impl Victims ===

impl Victims {
    /// The same victims by UID (pods without a UID are left out: the scheduler could not match
    /// them anyway).
    pub fn to_meta(&self) -> MetaVictims {
        MetaVictims {
            pods: self
                .pods
                .iter()
                .filter_map(|p| p.metadata.uid.clone())
                .map(|uid| MetaPod { uid })
                .collect(),
            num_pdb_violations: self.num_pdb_violations,
        }
    }
}

// === impl ExtenderFilterResult ===

impl ExtenderFilterResult {
    /// A reply that fails the whole call with `message`.
    pub fn error(message: impl Into<String>) -> Self {
        Self {
            error: message.into(),
            ..Self::default()
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn node(name: &str) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn pod() -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                uid: Some("u-1".into()),
                labels: Some([("telemetry-policy".to_owned(), "pol".to_owned())].into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn messages_round_trip_in_pascal_case() {
        let args = ExtenderArgs {
            pod: Some(pod()),
            nodes: Some(NodeList {
                items: vec![node("n1"), node("n2")],
                metadata: Default::default(),
            }),
            node_names: None,
        };
        let text = serde_json::to_string(&args).unwrap();
        assert!(text.starts_with(r#"{"Pod":{"#), "{text}");
        assert!(text.contains(r#""Nodes":{"#) && text.contains(r#""NodeNames":null"#));
        assert_eq!(serde_json::from_str::<ExtenderArgs>(&text).unwrap(), args);

        let result = ExtenderFilterResult {
            node_names: Some(vec!["n1".into()]),
            failed_nodes: [("n2".to_owned(), "too hot".to_owned())].into(),
            ..Default::default()
        };
        let text = serde_json::to_string(&result).unwrap();
        assert_eq!(
            text,
            r#"{"Nodes":null,"NodeNames":["n1"],"FailedNodes":{"n2":"too hot"},"FailedAndUnresolvableNodes":{},"Error":""}"#
        );
        assert_eq!(
            serde_json::from_str::<ExtenderFilterResult>(&text).unwrap(),
            result
        );

        let victims = ExtenderPreemptionArgs {
            pod: Some(pod()),
            node_name_to_victims: Some(
                [(
                    "n1".to_owned(),
                    Victims {
                        pods: vec![pod()],
                        num_pdb_violations: 1,
                    },
                )]
                .into(),
            ),
            node_name_to_meta_victims: None,
        };
        let text = serde_json::to_string(&victims).unwrap();
        assert_eq!(
            serde_json::from_str::<ExtenderPreemptionArgs>(&text).unwrap(),
            victims
        );
        let meta = victims.node_name_to_victims.unwrap()["n1"].to_meta();
        assert_eq!(
            serde_json::to_string(&meta).unwrap(),
            r#"{"Pods":[{"UID":"u-1"}],"NumPDBViolations":1}"#
        );
    }

    #[test]
    fn keys_are_matched_in_any_case_and_null_is_zero() {
        let text = r#"{"host":"n1","SCORE":7,"extra":{"ignored":[1,2]}}"#;
        let hp: HostPriority = serde_json::from_str(text).unwrap();
        assert_eq!(
            hp,
            HostPriority {
                host: "n1".into(),
                score: 7
            }
        );
        let text = r#"{"nodenames":["a"],"failedNodes":null,"error":null}"#;
        let r: ExtenderFilterResult = serde_json::from_str(text).unwrap();
        assert_eq!(r.node_names, Some(vec!["a".to_owned()]));
        assert!(r.failed_nodes.is_empty() && r.error.is_empty());
        let list: HostPriorityList = serde_json::from_str(r#"[{"Host":"a","Score":1}]"#).unwrap();
        assert_eq!(list.len(), 1);
    }

    #[test]
    fn malformed_messages_are_errors_not_panics() {
        for bad in [
            "",
            "[]",
            "{",
            r#"{"Pod":7}"#,
            r#"{"NodeNames":"n1"}"#,
            r#"{"Nodes":{"items":{}}}"#,
        ] {
            assert!(serde_json::from_str::<ExtenderArgs>(bad).is_err(), "{bad}");
        }
    }
}
