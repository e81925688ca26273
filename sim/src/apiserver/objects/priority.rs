//! Pod priority as kube-apiserver (v1.32) gives it: the Priority admission plugin
//! (plugin/pkg/admission/priority/admission.go) resolves a new pod's `spec.priorityClassName`
//! into `spec.priority` and `spec.preemptionPolicy` and keeps them on updates; PriorityClass
//! validation (pkg/apis/scheduling/validation) reserves the `system-` names and values above one
//! billion, and admission allows one `globalDefault` class; the two system classes exist from
//! the start, as the API server's `scheduling/bootstrap-system-priority-classes` post-start hook
//! creates them.

use serde_json::{Value, json};

use crate::apiserver::requests::error::{ApiError, ApiResult};
use crate::storage::registry::ResourceId;
use crate::storage::store::{ObjKey, Txn};

/// Names that start with this are reserved for the system classes.
pub const SYSTEM_PREFIX: &str = "system-";

/// The highest value a user's PriorityClass may have (`HighestUserDefinablePriority`).
pub const HIGHEST_USER_DEFINABLE: i64 = 1_000_000_000;

/// The preemption policy a pod gets when its class (or the lack of one) says nothing.
pub const PREEMPT_LOWER_PRIORITY: &str = "PreemptLowerPriority";

/// The system PriorityClasses: name, value and description, as upstream defines them
/// (`SystemPriorityClasses` in pkg/apis/scheduling/types.go and helpers.go).
pub const SYSTEM_CLASSES: [(&str, i64, &str); 2] = [
    (
        "system-node-critical",
        2_000_001_000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    (
        "system-cluster-critical",
        2_000_000_000,
        "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    ),
];

/// The system classes as objects, for the server to create at start.
pub fn system_class_objects() -> Vec<Value> {
    SYSTEM_CLASSES
        .iter()
        .map(|(name, value, description)| {
            json!({
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
                "description": description,
                "preemptionPolicy": PREEMPT_LOWER_PRIORITY,
            })
        })
        .collect()
}

fn classes() -> ResourceId {
    ResourceId::new("scheduling.k8s.io", "priorityclasses")
}

/// The `globalDefault` class; with more than one (a race upstream tolerates), the lowest value.
fn default_class(txn: &Txn<'_>) -> Option<Value> {
    txn.objects(&classes())
        .values()
        .map(|s| s.value())
        .filter(|pc| pc.get("globalDefault").and_then(Value::as_bool) == Some(true))
        .min_by_key(|pc| pc.get("value").and_then(Value::as_i64).unwrap_or(0))
}

/// `admission.NewForbidden`: `<resource> "<name>" is forbidden: <why>`.
fn forbidden(group: &str, plural: &str, name: &str, why: &str) -> ApiError {
    let resource = if group.is_empty() {
        plural.to_owned()
    } else {
        format!("{plural}.{group}")
    };
    let mut details = json!({"name": name, "kind": plural});
    if !group.is_empty() {
        details["group"] = json!(group);
    }
    ApiError::forbidden(format!("{resource} {name:?} is forbidden: {why}")).with_details(details)
}

/// Admits a new pod (`admitPod` on Create): its class (by name, else the global default, else
/// none: priority 0) sets `spec.priority` and `spec.preemptionPolicy`, and the class name of the
/// default is written in. An unknown class, or a priority or policy the pod sets itself that
/// differs from what the class says, is 403 Forbidden with upstream's message.
pub fn admit_new_pod(txn: &Txn<'_>, pod: &mut Value) -> ApiResult<()> {
    let name = pod
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    let class_name = spec
        .get("priorityClassName")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let class = if class_name.is_empty() {
        default_class(txn)
    } else {
        match txn.get(&classes(), &ObjKey::new("", &class_name)) {
            Some(pc) => Some(pc.value()),
            None => {
                return Err(forbidden(
                    "",
                    "pods",
                    &name,
                    &format!("no PriorityClass with name {class_name} was found"),
                ));
            }
        }
    };
    let (class_name, priority, policy) = match &class {
        Some(pc) => (
            pc.pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            pc.get("value").and_then(Value::as_i64).unwrap_or(0),
            pc.get("preemptionPolicy")
                .and_then(Value::as_str)
                .map(str::to_owned),
        ),
        None => (String::new(), 0, Some(PREEMPT_LOWER_PRIORITY.to_owned())),
    };
    if let Some(given) = spec.get("priority").and_then(Value::as_i64)
        && given != priority
    {
        return Err(forbidden(
            "",
            "pods",
            &name,
            &format!(
                "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name"
            ),
        ));
    }
    spec.insert("priority".into(), json!(priority));
    if !class_name.is_empty() {
        spec.insert("priorityClassName".into(), json!(class_name));
    }
    if let Some(policy) = policy {
        if let Some(given) = spec.get("preemptionPolicy").and_then(Value::as_str)
            && given != policy
        {
            return Err(forbidden(
                "",
                "pods",
                &name,
                &format!(
                    "the string value of PreemptionPolicy ({given}) must not be provided in pod spec; priority admission controller computed {policy} from the given PriorityClass name"
                ),
            ));
        }
        spec.insert("preemptionPolicy".into(), json!(policy));
    }
    Ok(())
}

/// Keeps a pod's priority and preemption policy when an update leaves them out (`admitPod` on
/// Update), so validation sees them unchanged.
pub fn keep_on_update(old: &Value, new: &mut Value) {
    let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for field in ["priority", "preemptionPolicy"] {
        if spec.get(field).is_none_or(Value::is_null)
            && let Some(kept) = old
                .pointer(&format!("/spec/{field}"))
                .filter(|v| !v.is_null())
        {
            spec.insert(field.into(), kept.clone());
        }
    }
}

/// PriorityClass validation (`ValidatePriorityClass`, and `ValidatePriorityClassUpdate` when
/// `old` is given): the field errors, as (field, reason, message) for a 422.
pub fn class_causes(pc: &Value, old: Option<&Value>) -> Vec<(String, &'static str, String)> {
    let mut causes = Vec::new();
    let name = pc
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let value = pc.get("value").and_then(Value::as_i64).unwrap_or(0);
    let global_default = pc.get("globalDefault").and_then(Value::as_bool) == Some(true);
    if name.starts_with(SYSTEM_PREFIX) {
        let known = SYSTEM_CLASSES.iter().find(|(n, _, _)| *n == name);
        let error = match known {
            None => Some(format!("{name} is not a known system priority class")),
            Some((n, v, _)) if *v != value => {
                Some(format!("value of {n} PriorityClass must be {v}"))
            }
            Some((n, _, _)) if global_default => {
                Some(format!("globalDefault of {n} PriorityClass must be false"))
            }
            Some(_) => None,
        };
        if let Some(error) = error {
            causes.push((
                "metadata.name".into(),
                "FieldValueForbidden",
                format!(
                    "Forbidden: priority class names with '{SYSTEM_PREFIX}' prefix are reserved for system use only. error: {error}"
                ),
            ));
        }
    } else if value > HIGHEST_USER_DEFINABLE {
        causes.push((
            "value".into(),
            "FieldValueForbidden",
            format!(
                "Forbidden: maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE}"
            ),
        ));
    }
    if let Some(old) = old {
        if old.get("value") != pc.get("value") {
            causes.push((
                "value".into(),
                "FieldValueForbidden",
                "Forbidden: may not be changed in an update.".into(),
            ));
        }
        if old.get("preemptionPolicy") != pc.get("preemptionPolicy") {
            causes.push((
                "preemptionPolicy".into(),
                "FieldValueInvalid",
                format!(
                    "Invalid value: {}: field is immutable",
                    pc.get("preemptionPolicy")
                        .and_then(Value::as_str)
                        .map_or_else(|| "null".to_owned(), |p| format!("{p:?}"))
                ),
            ));
        }
    }
    causes
}

/// Admission's check of a PriorityClass being created or updated (`validatePriorityClass`): at
/// most one `globalDefault` class.
pub fn admit_class(txn: &Txn<'_>, pc: &Value) -> ApiResult<()> {
    if pc.get("globalDefault").and_then(Value::as_bool) != Some(true) {
        return Ok(());
    }
    let name = pc
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if let Some(existing) = default_class(txn) {
        let existing = existing
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if existing != name {
            return Err(forbidden(
                "scheduling.k8s.io",
                "priorityclasses",
                name,
                &format!(
                    "PriorityClass {existing} is already marked as default. Only one default can exist"
                ),
            ));
        }
    }
    Ok(())
}
