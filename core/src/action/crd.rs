//! The `WorkloadAction` custom resource (`telemesh.io/v1alpha1`): one accepted action, its
//! request exactly as received and everything the executor did about it. The API server is the
//! durable queue: the object is written before the caller hears its id, and every step is in
//! `status` before the next one starts, so a new leader resumes where the old one died.
//!
//! The CRD manifest is `deploy/crds/workloadactions.telemesh.io.yaml` ([`CRD_YAML`]), written by
//! hand for its CEL rules and printer columns.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// The CRD manifest, for tests and `telemesh-sim dev` to install.
pub const CRD_YAML: &str = include_str!("../../../deploy/crds/workloadactions.telemesh.io.yaml");

/// `spec`: what was asked, by whom, when. Immutable once created (a CEL rule says so).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[kube(
    group = "telemesh.io",
    version = "v1alpha1",
    kind = "WorkloadAction",
    plural = "workloadactions",
    shortname = "wa",
    namespaced,
    status = "WorkloadActionStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadActionSpec {
    /// `Create`, `Delete`, `Move`, `Swap`, `Bind`, `Redeploy`, `UpdateResources` or `Scale`.
    pub method: String,
    /// The params object exactly as received (WAM's one-element array unwrapped).
    #[serde(default)]
    pub params: serde_json::Value,
    /// What the action acts on, for people: `Deployment/test-a`, `Pod/test-a-5d9c-x2x`.
    #[serde(default)]
    pub target: String,
    /// The node the action places on, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Where to POST the outcome when the action ends.
    #[serde(
        default,
        rename = "callbackURL",
        skip_serializing_if = "Option::is_none"
    )]
    pub callback_url: Option<String>,
    /// The caller's idempotency key: the same key from the same caller gives the same action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// Who asked, as authentication established it.
    #[serde(default)]
    pub requester: Requester,
    /// When the receiving replica accepted it (RFC 3339, microseconds): the arrival order
    /// actions on one workload run in (ties broken by name).
    #[serde(default)]
    pub received_at: String,
}

/// The authenticated caller.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Requester {
    /// User name (`system:anonymous` when the API runs with `--api-auth none`).
    #[serde(default)]
    pub username: String,
    /// User UID, when authentication gave one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Groups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

/// Where an action is in its life.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub enum ActionPhase {
    /// Accepted, waiting for its turn.
    #[default]
    Pending,
    /// The executor is working on it.
    Running,
    /// Done as asked (for placements: the new pod is Running and Ready on the node).
    Succeeded,
    /// Could not be done; `message` says why and what was restored.
    Failed,
    /// Started, then undone on failure or timeout: the workload is as it was.
    RolledBack,
}

impl ActionPhase {
    /// Whether the action has ended (and will never change again).
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::RolledBack)
    }

    /// The phase's name as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Running => "Running",
            Self::Succeeded => "Succeeded",
            Self::Failed => "Failed",
            Self::RolledBack => "RolledBack",
        }
    }
}

/// `status`: written only by the executor on the leader.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct WorkloadActionStatus {
    /// Phase; absent means Pending.
    #[serde(default)]
    pub phase: ActionPhase,
    /// What happened, for a person.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The workloads the action changes, resolved from its params (a pod's owner): actions on
    /// one workload run one at a time, in arrival order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workloads: Vec<ObjectRef>,
    /// Steps done or under way, in order. A step is recorded `Started` (with what it will do)
    /// before it touches anything, and `Done` after; a new leader finding a `Started` step
    /// checks the observed state before redoing it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<Step>,
    /// Where the extender must place the next new pod of a workload while a step waits for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    /// Pods the action created.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods_created: Vec<PodRecord>,
    /// Pods the action removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods_removed: Vec<PodRecord>,
    /// When the executor started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
    /// Whether the callback was delivered (absent: no callback, or not yet ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback: Option<CallbackStatus>,
    /// Standard conditions (`Complete`), for `kubectl wait --for=condition=Complete`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// An object an action touched.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    /// Kind (`Deployment`, `StatefulSet`, `Pod`, ...).
    pub kind: String,
    /// Namespace.
    #[serde(default)]
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID, for a pod a step acts on (a precondition: never another pod of the same name).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

impl ObjectRef {
    /// A reference to a kind, namespace and name (no UID).
    pub fn new(kind: &str, namespace: &str, name: &str) -> Self {
        Self {
            kind: kind.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            uid: String::new(),
        }
    }

    /// The same object without its UID (workload identity for ordering).
    pub fn without_uid(&self) -> Self {
        Self {
            uid: String::new(),
            ..self.clone()
        }
    }
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// Whether a step is under way or finished.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub enum StepState {
    /// Recorded before touching anything.
    Started,
    /// Finished.
    Done,
    /// Could not finish.
    Failed,
}

/// One step of an action.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// What the step does (`ScaleUp`, `AwaitReady`, `DeletePod`, ...).
    pub name: String,
    /// State.
    pub state: StepState,
    /// When it was recorded as started.
    pub started_at: String,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// The object it touches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<ObjectRef>,
    /// What it does or did, for people.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// The replica change the step makes, recorded before it is made: a resuming leader finds
    /// `from` (not yet made) or `to` (made) and never applies it twice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<ReplicaChange>,
}

/// A replica count change.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ReplicaChange {
    /// The count before.
    pub from: i32,
    /// The count after.
    pub to: i32,
}

/// A placement the extender enforces: the next pod of `workload` with template hash
/// `pod_template_hash` (and, for a StatefulSet ordinal, exactly `pod`) may go only to `node`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    /// The workload whose new pod is placed.
    pub workload: ObjectRef,
    /// The pod template hash (`pod-template-hash` or `controller-revision-hash` label) of the
    /// pods the placement applies to; empty matches any.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pod_template_hash: String,
    /// Exactly this pod (a StatefulSet ordinal), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// Pods that existed before the placement was made: never the placed pod.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub existing_pods: Vec<String>,
    /// The node.
    pub node: String,
}

/// A pod an action created or removed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PodRecord {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Node it ran on or was placed on.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node: String,
    /// UID.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

/// Delivery of the callback.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CallbackStatus {
    /// Whether the callee answered 2xx.
    pub delivered: bool,
    /// Attempts made.
    pub attempts: u32,
    /// The last error, if any.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_error: String,
}

impl WorkloadAction {
    /// The phase (Pending when there is no status yet).
    pub fn phase(&self) -> ActionPhase {
        self.status.as_ref().map(|s| s.phase).unwrap_or_default()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

    #[test]
    fn the_manifest_names_this_type() {
        let crd: CustomResourceDefinition = serde_yaml_ng::from_str(CRD_YAML).unwrap();
        assert_eq!(crd.spec.group, "telemesh.io");
        assert_eq!(crd.spec.names.kind, "WorkloadAction");
        assert_eq!(crd.spec.names.plural, "workloadactions");
        assert_eq!(crd.spec.versions[0].name, "v1alpha1");
    }

    #[test]
    fn the_manifest_schema_has_the_fields_of_the_rust_types() {
        use crate::crd_parity::{assert_fields_match, schema_of};
        assert_fields_match(
            CRD_YAML,
            schema_of::<WorkloadActionSpec>(),
            schema_of::<WorkloadActionStatus>(),
            &[],
            &[],
        );
    }

    #[test]
    fn status_round_trips_with_camel_case_fields() {
        let status = WorkloadActionStatus {
            phase: ActionPhase::RolledBack,
            pods_created: vec![PodRecord {
                namespace: "ul".into(),
                name: "a-1".into(),
                node: "n1".into(),
                uid: String::new(),
            }],
            ..Default::default()
        };
        let json = serde_json::to_value(&status).unwrap();
        assert_eq!(json["phase"], "RolledBack");
        assert_eq!(json["podsCreated"][0]["name"], "a-1");
        let back: WorkloadActionStatus = serde_json::from_value(json).unwrap();
        assert_eq!(back, status);
    }
}
