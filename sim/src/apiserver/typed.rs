//! Built-in kinds decoded as their upstream types (k8s-openapi), as kube-apiserver decodes a
//! request body into Go structs: a field of the wrong type is an error, and fields the type does
//! not have are found (for `fieldValidation`).

use serde_json::Value;

/// Resource quantity maps: numbers in them are accepted and stored as strings, as upstream
/// canonicalizes `cpu: 1` to `"1"`.
const QUANTITY_MAPS: [&str; 7] = [
    "requests",
    "limits",
    "capacity",
    "allocatable",
    "hard",
    "used",
    "overhead",
];

/// Turns numeric quantities into strings, in place.
pub fn normalize_quantities(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, child) in m.iter_mut() {
                if QUANTITY_MAPS.contains(&k.as_str())
                    && let Value::Object(q) = child
                {
                    for qv in q.values_mut() {
                        if let Value::Number(n) = qv {
                            *qv = Value::String(n.to_string());
                        }
                    }
                }
                normalize_quantities(child);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(normalize_quantities),
        _ => {}
    }
}

macro_rules! typed {
    ($group:expr, $kind:expr, $obj:expr, { $( ($g:literal, $k:literal) => $t:ty ),* $(,)? }) => {
        match ($group, $kind) {
            $( ($g, $k) => roundtrip::<$t>($obj, $k), )*
            _ => Ok(None),
        }
    };
}

/// Decodes a built-in object; returns the paths of fields its type does not have. Unknown
/// kinds pass unchecked.
pub fn check(group: &str, kind: &str, obj: &mut Value) -> Result<Vec<String>, String> {
    use k8s_openapi::api::{
        apps::v1 as apps, batch::v1 as batch, coordination::v1 as coord, core::v1 as core,
        policy::v1 as policy, scheduling::v1 as sched,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
    normalize_quantities(obj);
    let out = typed!(group, kind, obj, {
        ("", "Namespace") => core::Namespace,
        ("", "Node") => core::Node,
        ("", "Pod") => core::Pod,
        ("", "Event") => core::Event,
        ("", "ConfigMap") => core::ConfigMap,
        ("", "Secret") => core::Secret,
        ("", "Service") => core::Service,
        ("", "PersistentVolumeClaim") => core::PersistentVolumeClaim,
        ("", "ServiceAccount") => core::ServiceAccount,
        ("events.k8s.io", "Event") => k8s_openapi::api::events::v1::Event,
        ("apps", "Deployment") => apps::Deployment,
        ("apps", "ReplicaSet") => apps::ReplicaSet,
        ("apps", "StatefulSet") => apps::StatefulSet,
        ("apps", "DaemonSet") => apps::DaemonSet,
        ("batch", "Job") => batch::Job,
        ("coordination.k8s.io", "Lease") => coord::Lease,
        ("scheduling.k8s.io", "PriorityClass") => sched::PriorityClass,
        ("policy", "PodDisruptionBudget") => policy::PodDisruptionBudget,
        ("apiextensions.k8s.io", "CustomResourceDefinition") => apiext::CustomResourceDefinition,
    })?;
    Ok(match out {
        Some(round) => {
            let mut unknown = Vec::new();
            unknown_fields(obj, &round, "", &mut unknown);
            unknown
        }
        None => Vec::new(),
    })
}

fn roundtrip<T: serde::de::DeserializeOwned + serde::Serialize>(
    obj: &Value,
    kind: &str,
) -> Result<Option<Value>, String> {
    let typed: T = serde_json::from_value(obj.clone())
        .map_err(|e| format!("{kind} in version \"v1\" cannot be handled as a {kind}: {e}"))?;
    serde_json::to_value(&typed)
        .map(Some)
        .map_err(|e| format!("{kind} cannot be encoded: {e}"))
}

/// Collects paths present (and not null) in `input` but absent from the decoded form.
fn unknown_fields(input: &Value, decoded: &Value, path: &str, out: &mut Vec<String>) {
    match (input, decoded) {
        (Value::Object(i), Value::Object(d)) => {
            for (k, v) in i {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match d.get(k) {
                    Some(dv) => unknown_fields(v, dv, &p, out),
                    None if v.is_null() => {}
                    // Empty values the type omits on output are not unknown.
                    None if is_empty(v) => {}
                    None => out.push(p),
                }
            }
        }
        (Value::Array(i), Value::Array(d)) => {
            for (n, (iv, dv)) in i.iter().zip(d).enumerate() {
                unknown_fields(iv, dv, &format!("{path}[{n}]"), out);
            }
        }
        // Free-form values (annotations' values, fieldsV1, raw extensions) are compared no further.
        _ => {}
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn unknown_fields_are_found_and_wrong_types_refused() {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "x", "bogus": 1}], "alsoBogus": true}});
        let unknown = check("", "Pod", &mut pod).unwrap();
        assert_eq!(unknown, ["spec.containers[0].bogus", "spec.alsoBogus"]);
        let mut bad = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": "no"}});
        assert!(
            check("", "Pod", &mut bad)
                .unwrap_err()
                .contains("cannot be handled as a Pod")
        );
    }

    #[test]
    fn numeric_quantities_become_strings() {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"cpu": 1, "memory": 1024}}}]}});
        assert!(check("", "Pod", &mut pod).unwrap().is_empty());
        assert_eq!(
            pod["spec"]["containers"][0]["resources"]["limits"]["cpu"],
            "1"
        );
    }
}
