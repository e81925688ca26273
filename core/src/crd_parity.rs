//! Test support: a hand-written CRD's `openAPIV3Schema` against the schema schemars derives from
//! the Rust types that read and write its objects, field by field and both ways. A field only
//! the CRD has is one the binaries drop on read (and never write); a field only the Rust type has
//! is one the API server prunes from what they write. Names and nesting are compared (every
//! property path, through arrays and maps), not types or validation, which the CRDs keep by hand
//! (CEL rules, enums, patterns) and the sim and real-control-plane tests check.

use std::collections::BTreeSet;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Value, json};

/// `T`'s schema as kube-derive generates one (OpenAPI v3, subschemas inlined), as JSON.
pub fn schema_of<T: JsonSchema>() -> Value {
    let schema = SchemaSettings::openapi3()
        .with(|s| s.inline_subschemas = true)
        .into_generator()
        .into_root_schema_for::<T>();
    schema.to_value()
}

/// Every property path under `schema` (`spec.requester.username`, `spec.env[].name`,
/// `status.nodes.*.since`), `prefix` first.
pub fn fields(schema: &Value, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    walk(schema, prefix, &mut out);
    out
}

fn walk(schema: &Value, path: &str, out: &mut BTreeSet<String>) {
    // `true` (anything) has no fields.
    let Value::Object(o) = schema else { return };
    assert!(
        !o.contains_key("$ref"),
        "{path}: a $ref left in an inlined schema: {schema}"
    );
    for combinator in ["allOf", "anyOf", "oneOf"] {
        for sub in o
            .get(combinator)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            walk(sub, path, out);
        }
    }
    for (name, sub) in o
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let field = if path.is_empty() {
            name.clone()
        } else {
            format!("{path}.{name}")
        };
        out.insert(field.clone());
        walk(sub, &field, out);
    }
    if let Some(items) = o.get("items") {
        walk(items, &format!("{path}[]"), out);
    }
    if let Some(values) = o.get("additionalProperties") {
        walk(values, &format!("{path}.*"), out);
    }
}

/// A field one side has on purpose: its path and why.
pub type Allowed<'a> = (&'a str, &'a str);

/// Asserts that `crd_yaml`'s (first version's) schema has exactly the fields of an object made of
/// `spec` and `status` (schemas from [`schema_of`]), apart from the fields in `only_crd` and
/// `only_rust` (each with its reason), which must still differ, so a stale entry fails too.
pub fn assert_fields_match(
    crd_yaml: &str,
    spec: Value,
    status: Value,
    only_crd: &[Allowed<'_>],
    only_rust: &[Allowed<'_>],
) {
    let crd: CustomResourceDefinition =
        serde_yaml_ng::from_str(crd_yaml).expect("the CRD manifest parses");
    let manifest = crd.spec.versions[0]
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .map(|s| serde_json::to_value(s).expect("a JSONSchemaProps serializes"))
        .expect("the CRD has an openAPIV3Schema");
    let rust = json!({"properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": spec,
        "status": status,
    }});
    let manifest = fields(&manifest, "");
    let rust = fields(&rust, "");
    let name = crd.metadata.name.as_deref().unwrap_or("the CRD");
    for (side, extra, allowed) in [
        ("the CRD", &manifest - &rust, only_crd),
        ("the Rust type", &rust - &manifest, only_rust),
    ] {
        let allowed: BTreeSet<String> = allowed.iter().map(|(p, _)| (*p).to_owned()).collect();
        // An allowed field's children differ with it.
        let unexplained: Vec<&String> = extra
            .iter()
            .filter(|f| {
                !allowed.iter().any(|a| {
                    f == &a || f.starts_with(&format!("{a}.")) || f.starts_with(&format!("{a}["))
                })
            })
            .collect();
        assert!(
            unexplained.is_empty(),
            "{name}: fields only {side} has: {unexplained:?}; add them to the other side \
             (deploy/crds/ and the helm chart's copy, or the Rust type)"
        );
        let stale: Vec<&String> = allowed.iter().filter(|a| !extra.contains(*a)).collect();
        assert!(
            stale.is_empty(),
            "{name}: fields allowed only on {side} that are no longer different: {stale:?}"
        );
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn fields_go_through_arrays_maps_and_combinators() {
        let schema = json!({"properties": {
            "a": {"type": "array", "items": {"properties": {"b": {"type": "string"}}}},
            "m": {"additionalProperties": {"properties": {"c": {}}}},
            "o": {"anyOf": [{"properties": {"d": {}}}, {"type": "null"}]},
            "any": true,
        }});
        assert_eq!(
            fields(&schema, "spec").into_iter().collect::<Vec<_>>(),
            [
                "spec.a",
                "spec.a[].b",
                "spec.any",
                "spec.m",
                "spec.m.*.c",
                "spec.o",
                "spec.o.d"
            ]
        );
    }

    #[derive(schemars::JsonSchema)]
    #[allow(dead_code)]
    #[serde(rename_all = "camelCase")]
    struct Spec {
        image: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run_as_user: Option<i64>,
    }

    const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: things.example.com}
spec:
  group: example.com
  names: {kind: Thing, plural: things}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          apiVersion: {type: string}
          kind: {type: string}
          metadata: {type: object}
          spec:
            type: object
            properties:
              image: {type: string}
              runAsUser: {type: integer}
              extra: {type: string}
          status: {type: object}
"#;

    #[test]
    fn a_field_on_one_side_only_fails_unless_allowed() {
        let spec = || schema_of::<Spec>();
        let status = || json!({"type": "object"});
        let missing = std::panic::catch_unwind(|| {
            assert_fields_match(CRD, spec(), status(), &[], &[]);
        });
        assert!(missing.is_err(), "spec.extra is only in the CRD");
        assert_fields_match(CRD, spec(), status(), &[("spec.extra", "test")], &[]);
        let stale = std::panic::catch_unwind(|| {
            assert_fields_match(
                CRD,
                spec(),
                status(),
                &[("spec.extra", "test")],
                &[("spec.gone", "test")],
            );
        });
        assert!(stale.is_err(), "spec.gone differs no more");
    }
}
