//! Built-in kinds decoded as their upstream types (k8s-openapi), as kube-apiserver decodes a
//! request body into Go structs: a field of the wrong type is an error, and fields the type does
//! not have are found (for `fieldValidation`).

use serde_json::Value;

use crate::storage::builtins::{BuiltinType, TypeVisitor, with_type};

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

/// Decodes a built-in object as its k8s-openapi type and encodes it again.
struct RoundTrip<'a> {
    obj: &'a Value,
}

impl TypeVisitor for RoundTrip<'_> {
    type Output = Result<Value, String>;

    fn visit<T: BuiltinType>(self) -> Self::Output {
        let (kind, version) = (T::KIND, T::VERSION);
        let typed: T = serde_json::from_value(self.obj.clone()).map_err(|e| {
            format!("{kind} in version \"{version}\" cannot be handled as a {kind}: {e}")
        })?;
        serde_json::to_value(&typed).map_err(|e| format!("{kind} cannot be encoded: {e}"))
    }
}

/// Decodes a built-in object; returns the paths of fields its type does not have. Kinds
/// without a built-in type pass unchecked.
pub fn check(
    group: &str,
    version: &str,
    kind: &str,
    obj: &mut Value,
) -> Result<Vec<String>, String> {
    normalize_quantities(obj);
    match with_type(group, version, kind, RoundTrip { obj }).transpose()? {
        Some(round) => {
            let mut unknown = Vec::new();
            unknown_fields(obj, &round, "", &mut unknown);
            Ok(unknown)
        }
        None => Ok(Vec::new()),
    }
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
        let unknown = check("", "v1", "Pod", &mut pod).unwrap();
        assert_eq!(unknown, ["spec.containers[0].bogus", "spec.alsoBogus"]);
        let mut bad = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": "no"}});
        assert!(
            check("", "v1", "Pod", &mut bad)
                .unwrap_err()
                .contains("cannot be handled as a Pod")
        );
    }

    #[test]
    fn numeric_quantities_become_strings() {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"cpu": 1, "memory": 1024}}}]}});
        assert!(check("", "v1", "Pod", &mut pod).unwrap().is_empty());
        assert_eq!(
            pod["spec"]["containers"][0]["resources"]["limits"]["cpu"],
            "1"
        );
    }
}
