//! WAM's methods and parameter shapes as typed requests, validated with WAM's own messages where
//! WAM has them (reference §1.3). Decoding is as lenient as WAM's Go `encoding/json`: unknown
//! fields are ignored and field names match case-insensitively; an empty namespace means
//! `default` (for Swap's `y` too, where WAM forgot the default and then looked the pod up in
//! namespace `""`).
//!
//! Where Telemesh does more than WAM the message says so: StatefulSets are accepted wherever
//! the action makes sense for them, so Create's kind message names both kinds.

use serde::Deserialize;
use serde_json::Value;

/// The action methods (the part after `action.`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// One more replica of a workload, on a node.
    Create,
    /// Exactly this pod goes and its workload shrinks by one.
    Delete,
    /// Create on the node, wait for Ready, then Delete the old pod.
    Move,
    /// Two moves: x to y's node and y to x's node.
    Swap,
    /// Bind a pending pod no scheduler placed.
    Bind,
    /// Delete a pod so its controller recreates it.
    Redeploy,
    /// Change a workload's container resources.
    UpdateResources,
    /// Set a workload's replica count.
    Scale,
}

impl Method {
    /// Every method, in WAM's order.
    pub const ALL: [Method; 8] = [
        Self::Create,
        Self::Delete,
        Self::Move,
        Self::Swap,
        Self::Bind,
        Self::Redeploy,
        Self::UpdateResources,
        Self::Scale,
    ];

    /// The name as in `action.<Name>` and in the object's `spec.method`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "Create",
            Self::Delete => "Delete",
            Self::Move => "Move",
            Self::Swap => "Swap",
            Self::Bind => "Bind",
            Self::Redeploy => "Redeploy",
            Self::UpdateResources => "UpdateResources",
            Self::Scale => "Scale",
        }
    }

    /// Parses a method name (case-sensitive, as gorilla's RPC is).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == name)
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Params that do not validate; the message is WAM's where WAM has one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidParams(pub String);

fn invalid(message: impl Into<String>) -> InvalidParams {
    InvalidParams(message.into())
}

/// Workload kinds actions accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WorkloadKind {
    /// `apps/v1` Deployment.
    Deployment,
    /// `apps/v1` StatefulSet.
    StatefulSet,
}

impl WorkloadKind {
    /// The kind's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deployment => "Deployment",
            Self::StatefulSet => "StatefulSet",
        }
    }
}

/// A workload by kind, namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkloadRef {
    /// Kind.
    pub kind: WorkloadKind,
    /// Namespace (`default` when the caller gave none).
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl std::fmt::Display for WorkloadRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.kind.as_str(), self.name)
    }
}

/// A pod by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodRef {
    /// Namespace (`default` when the caller gave none).
    pub namespace: String,
    /// Name.
    pub name: String,
}

/// What UpdateResources and Scale act on: a workload, or a pod standing for its workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScaleTarget {
    /// The workload itself.
    Workload(WorkloadRef),
    /// A pod whose owning workload is meant.
    Pod(PodRef),
}

impl ScaleTarget {
    /// The namespace.
    pub fn namespace(&self) -> &str {
        match self {
            Self::Workload(w) => &w.namespace,
            Self::Pod(p) => &p.namespace,
        }
    }
}

/// UpdateResources' `resources`: only the fields given are changed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResourceUpdate {
    /// The container whose resources change.
    pub container_name: String,
    /// New CPU request.
    pub cpu_request: Option<String>,
    /// New CPU limit.
    pub cpu_limit: Option<String>,
    /// New memory request.
    pub memory_request: Option<String>,
    /// New memory limit.
    pub memory_limit: Option<String>,
}

/// A validated action request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActionRequest {
    /// One more replica of `workload` on `node`.
    Create {
        /// The workload.
        workload: WorkloadRef,
        /// The node.
        node: String,
    },
    /// Remove exactly `pod` and shrink its workload by one.
    Delete {
        /// The pod.
        pod: PodRef,
    },
    /// Move `pod` to `node` (make before break).
    Move {
        /// The pod.
        pod: PodRef,
        /// The node.
        node: String,
    },
    /// Move `x` to `y`'s node and `y` to `x`'s.
    Swap {
        /// One pod.
        x: PodRef,
        /// The other.
        y: PodRef,
    },
    /// Bind pending `pod` to `node`.
    Bind {
        /// The pod.
        pod: PodRef,
        /// The node.
        node: String,
    },
    /// Delete `pod` for its controller to recreate.
    Redeploy {
        /// The pod.
        pod: PodRef,
    },
    /// Change container resources of a workload's template.
    UpdateResources {
        /// The workload (or a pod of it).
        target: ScaleTarget,
        /// The change.
        resources: ResourceUpdate,
    },
    /// Set a workload's replicas.
    Scale {
        /// The workload (or a pod of it).
        target: ScaleTarget,
        /// The new count.
        replicas: i32,
    },
}

// Wire shapes, decoded after keys are lower-cased (Go's case-insensitive field matching).
#[derive(Deserialize, Default)]
#[serde(default)]
struct WireWorkload {
    namespace: Option<String>,
    kind: Option<String>,
    name: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireName {
    namespace: Option<String>,
    name: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireResources {
    container_name: Option<String>,
    cpu_request: Option<String>,
    cpu_limit: Option<String>,
    memory_request: Option<String>,
    memory_limit: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireParams {
    workload: Option<WireWorkload>,
    node: Option<WireName>,
    pod: Option<WireName>,
    x: Option<WireName>,
    y: Option<WireName>,
    resources: Option<WireResources>,
    replicas: Option<Value>,
}

fn lower_keys(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.to_ascii_lowercase(), lower_keys(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(lower_keys).collect()),
        other => other.clone(),
    }
}

fn namespace_or_default(ns: Option<String>) -> String {
    match ns {
        Some(ns) if !ns.is_empty() => ns,
        _ => "default".to_string(),
    }
}

fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
}

fn pod(wire: Option<WireName>, missing: &str) -> Result<PodRef, InvalidParams> {
    let wire = wire.unwrap_or_default();
    let name = non_empty(wire.name).ok_or_else(|| invalid(missing))?;
    Ok(PodRef {
        namespace: namespace_or_default(wire.namespace),
        name,
    })
}

fn node(wire: Option<WireName>) -> Result<String, InvalidParams> {
    non_empty(wire.and_then(|n| n.name)).ok_or_else(|| invalid("node name is required"))
}

fn kind(name: &str) -> Option<WorkloadKind> {
    match name {
        "Deployment" => Some(WorkloadKind::Deployment),
        "StatefulSet" => Some(WorkloadKind::StatefulSet),
        _ => None,
    }
}

/// UpdateResources' and Scale's target: `Pod`, `Deployment` or `StatefulSet`.
fn scale_target(wire: Option<WireWorkload>) -> Result<ScaleTarget, InvalidParams> {
    let wire = wire.unwrap_or_default();
    let kind_name =
        non_empty(wire.kind).ok_or_else(|| invalid("workload's kind must be specified"))?;
    let name = non_empty(wire.name).ok_or_else(|| invalid("workload's name must be specified"))?;
    let namespace = namespace_or_default(wire.namespace);
    if kind_name == "Pod" {
        return Ok(ScaleTarget::Pod(PodRef { namespace, name }));
    }
    let kind = kind(&kind_name)
        .ok_or_else(|| invalid("workload's kind must be 'Pod', 'Deployment' or 'StatefulSet'"))?;
    Ok(ScaleTarget::Workload(WorkloadRef {
        kind,
        namespace,
        name,
    }))
}

fn quantity(field: &str, value: Option<String>) -> Result<Option<String>, InvalidParams> {
    match non_empty(value) {
        None => Ok(None),
        Some(v) => {
            let parsed: Result<kube_quantity::ParsedQuantity, _> = v.as_str().try_into();
            match parsed {
                Ok(_) => Ok(Some(v)),
                Err(_) => Err(invalid(format!(
                    "{field} {v:?} is not a quantity (e.g. \"100m\", \"512Mi\")"
                ))),
            }
        }
    }
}

impl ActionRequest {
    /// Validates `params` (the args object, WAM's array already unwrapped) for `method`.
    pub fn parse(method: Method, params: &Value) -> Result<Self, InvalidParams> {
        if !params.is_object() {
            return Err(invalid(format!(
                "params must be an object (or a one-element array holding one), not {params}"
            )));
        }
        let wire: WireParams = serde_json::from_value(lower_keys(params))
            .map_err(|e| invalid(format!("params do not decode: {e}")))?;
        match method {
            Method::Create => {
                let w = wire.workload.unwrap_or_default();
                let kind = w.kind.as_deref().and_then(kind).ok_or_else(|| {
                    invalid("only Deployment and StatefulSet kinds are supported")
                })?;
                let name = non_empty(w.name).ok_or_else(|| invalid("workload name is required"))?;
                let node = node(wire.node)?;
                Ok(Self::Create {
                    workload: WorkloadRef {
                        kind,
                        namespace: namespace_or_default(w.namespace),
                        name,
                    },
                    node,
                })
            }
            Method::Delete => Ok(Self::Delete {
                pod: pod(wire.pod, "pod's name must be specified")?,
            }),
            Method::Redeploy => Ok(Self::Redeploy {
                pod: pod(wire.pod, "pod's name must be specified")?,
            }),
            Method::Move | Method::Bind => {
                let pod = pod(wire.pod, "pod's name must be specified")?;
                let node = node(wire.node)?;
                Ok(if method == Method::Move {
                    Self::Move { pod, node }
                } else {
                    Self::Bind { pod, node }
                })
            }
            Method::Swap => {
                let x = pod(wire.x, "x pod's name must be specified")?;
                let y = pod(wire.y, "y pod's name must be specified")?;
                if x == y {
                    return Err(invalid("x and y are the same pod; a swap needs two"));
                }
                Ok(Self::Swap { x, y })
            }
            Method::UpdateResources => {
                let target = scale_target(wire.workload)?;
                let r = wire.resources.unwrap_or_default();
                let container_name = non_empty(r.container_name).ok_or_else(|| {
                    invalid("container name of which resources will be updated must be specified")
                })?;
                let resources = ResourceUpdate {
                    container_name,
                    cpu_request: quantity("cpu_request", r.cpu_request)?,
                    cpu_limit: quantity("cpu_limit", r.cpu_limit)?,
                    memory_request: quantity("memory_request", r.memory_request)?,
                    memory_limit: quantity("memory_limit", r.memory_limit)?,
                };
                if resources.cpu_request.is_none()
                    && resources.cpu_limit.is_none()
                    && resources.memory_request.is_none()
                    && resources.memory_limit.is_none()
                {
                    return Err(invalid("no resources were provided to be updated"));
                }
                Ok(Self::UpdateResources { target, resources })
            }
            Method::Scale => {
                let target = scale_target(wire.workload)?;
                let replicas = wire
                    .replicas
                    .as_ref()
                    .and_then(Value::as_i64)
                    .and_then(|r| i32::try_from(r).ok())
                    .filter(|r| *r >= 0)
                    .ok_or_else(|| invalid("replicas is required and must be >= 0"))?;
                Ok(Self::Scale { target, replicas })
            }
        }
    }

    /// The method.
    pub fn method(&self) -> Method {
        match self {
            Self::Create { .. } => Method::Create,
            Self::Delete { .. } => Method::Delete,
            Self::Move { .. } => Method::Move,
            Self::Swap { .. } => Method::Swap,
            Self::Bind { .. } => Method::Bind,
            Self::Redeploy { .. } => Method::Redeploy,
            Self::UpdateResources { .. } => Method::UpdateResources,
            Self::Scale { .. } => Method::Scale,
        }
    }

    /// The namespace the action object lives in: its target's (Swap: x's).
    pub fn namespace(&self) -> &str {
        match self {
            Self::Create { workload, .. } => &workload.namespace,
            Self::Delete { pod }
            | Self::Move { pod, .. }
            | Self::Bind { pod, .. }
            | Self::Redeploy { pod } => &pod.namespace,
            Self::Swap { x, .. } => &x.namespace,
            Self::UpdateResources { target, .. } | Self::Scale { target, .. } => target.namespace(),
        }
    }

    /// What the action acts on, for people (`Deployment/test-a`, `Pod/a-1`, `Pod/a-1,Pod/b-2`).
    pub fn target(&self) -> String {
        match self {
            Self::Create { workload, .. } => workload.to_string(),
            Self::Delete { pod }
            | Self::Move { pod, .. }
            | Self::Bind { pod, .. }
            | Self::Redeploy { pod } => format!("Pod/{}", pod.name),
            Self::Swap { x, y } => format!("Pod/{},Pod/{}", x.name, y.name),
            Self::UpdateResources { target, .. } | Self::Scale { target, .. } => match target {
                ScaleTarget::Workload(w) => w.to_string(),
                ScaleTarget::Pod(p) => format!("Pod/{}", p.name),
            },
        }
    }

    /// The node the action places on, if any.
    pub fn node(&self) -> Option<&str> {
        match self {
            Self::Create { node, .. } | Self::Move { node, .. } | Self::Bind { node, .. } => {
                Some(node)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(method: Method, params: Value) -> Result<ActionRequest, String> {
        ActionRequest::parse(method, &params).map_err(|e| e.0)
    }

    #[test]
    fn the_seed_calls_parse() {
        let create = parse(
            Method::Create,
            json!({"workload": {"namespace": "ul", "kind": "Deployment", "name": "test-a"}, "node": {"name": "k3d-aces-agent-7"}}),
        )
        .unwrap();
        assert_eq!(
            create,
            ActionRequest::Create {
                workload: WorkloadRef {
                    kind: WorkloadKind::Deployment,
                    namespace: "ul".into(),
                    name: "test-a".into()
                },
                node: "k3d-aces-agent-7".into()
            }
        );
        assert_eq!(create.target(), "Deployment/test-a");
        let swap = parse(
            Method::Swap,
            json!({"x": {"namespace": "ul", "name": "a"}, "y": {"namespace": "ul", "name": "b"}}),
        )
        .unwrap();
        assert_eq!(swap.namespace(), "ul");
        let update = parse(
            Method::UpdateResources,
            json!({"workload":{"namespace":"ul","kind":"Deployment","name":"pending-test"},"resources":{"container_name":"example-container","cpu_request":"50m","cpu_limit":"200m"}}),
        )
        .unwrap();
        let ActionRequest::UpdateResources { resources, .. } = update else {
            panic!("wrong method")
        };
        assert_eq!(resources.cpu_limit.as_deref(), Some("200m"));
        assert_eq!(resources.memory_limit, None);
        assert_eq!(
            parse(
                Method::Scale,
                json!({"workload":{"namespace":"ul","kind":"Deployment","name":"scheduled-test"}, "replicas": 4})
            )
            .unwrap(),
            ActionRequest::Scale {
                target: ScaleTarget::Workload(WorkloadRef {
                    kind: WorkloadKind::Deployment,
                    namespace: "ul".into(),
                    name: "scheduled-test".into()
                }),
                replicas: 4
            }
        );
    }

    #[test]
    fn wam_messages_for_bad_params() {
        let cases = [
            (
                Method::Create,
                json!({"workload": {"kind": "DaemonSet", "name": "a"}, "node": {"name": "n"}}),
                "only Deployment and StatefulSet kinds are supported",
            ),
            (
                Method::Create,
                json!({"workload": {"kind": "Deployment"}, "node": {"name": "n"}}),
                "workload name is required",
            ),
            (
                Method::Create,
                json!({"workload": {"kind": "Deployment", "name": "a"}}),
                "node name is required",
            ),
            (
                Method::Delete,
                json!({"pod": {}}),
                "pod's name must be specified",
            ),
            (
                Method::Move,
                json!({"pod": {"name": "p"}, "node": {"name": ""}}),
                "node name is required",
            ),
            (
                Method::Swap,
                json!({"x": {"name": "p"}}),
                "y pod's name must be specified",
            ),
            (
                Method::UpdateResources,
                json!({"workload": {"kind": "Job", "name": "j"}, "resources": {"container_name": "c", "cpu_limit": "1"}}),
                "workload's kind must be 'Pod', 'Deployment' or 'StatefulSet'",
            ),
            (
                Method::UpdateResources,
                json!({"workload": {"kind": "Deployment", "name": "d"}, "resources": {"cpu_limit": "1"}}),
                "container name of which resources will be updated must be specified",
            ),
            (
                Method::UpdateResources,
                json!({"workload": {"kind": "Deployment", "name": "d"}, "resources": {"container_name": "c"}}),
                "no resources were provided to be updated",
            ),
            (
                Method::Scale,
                json!({"workload": {"kind": "Deployment", "name": "d"}, "replicas": -1}),
                "replicas is required and must be >= 0",
            ),
            (
                Method::Scale,
                json!({"workload": {"kind": "Deployment", "name": "d"}}),
                "replicas is required and must be >= 0",
            ),
        ];
        for (method, params, message) in cases {
            assert_eq!(
                parse(method, params.clone()),
                Err(message.to_string()),
                "{method} {params}"
            );
        }
    }

    #[test]
    fn decoding_is_as_lenient_as_go() {
        // Case-insensitive names, unknown fields ignored, empty namespaces defaulted (y too).
        let swap = parse(
            Method::Swap,
            json!({"X": {"Name": "a", "extra": 1}, "y": {"name": "b", "namespace": ""}, "other": true}),
        )
        .unwrap();
        assert_eq!(
            swap,
            ActionRequest::Swap {
                x: PodRef {
                    namespace: "default".into(),
                    name: "a".into()
                },
                y: PodRef {
                    namespace: "default".into(),
                    name: "b".into()
                }
            }
        );
    }

    #[test]
    fn bad_quantities_and_non_objects_are_refused_with_a_reason() {
        let err = parse(
            Method::UpdateResources,
            json!({"workload": {"kind": "Pod", "name": "p"}, "resources": {"container_name": "c", "cpu_limit": "lots"}}),
        )
        .unwrap_err();
        assert!(
            err.contains("cpu_limit \"lots\" is not a quantity"),
            "{err}"
        );
        let err = parse(Method::Delete, json!("pod-1")).unwrap_err();
        assert!(err.contains("params must be an object"), "{err}");
    }
}
