//! The OpenAPI v2 (Swagger 2.0) document of `GET /openapi/v2`, in JSON and in the gnostic
//! protobuf form, built from the same schemas as the v3 documents.
//!
//! Who reads it: kubectl up to 1.28 fetches it (protobuf first) before every validating `apply`
//! or `create` and for `explain --output=plaintext-openapiv2`, takes the patch metadata of
//! client-side apply from it, and fails outright when it is missing; kubectl 1.20 validates
//! objects against its `definitions`; Helm and older client libraries read it too.
//!
//! How it is built: each served group version's v3 document ([`openapi::v3_group_version`]) is
//! turned into v2 and the results are merged, so built-ins (k8s-openapi through schemars) and
//! custom resources (the CRD's `openAPIV3Schema`) come out as the v3 documents have them, with
//! v2's differences, as kube-apiserver's v2 has them:
//! - `definitions` with `#/definitions/` references (names as upstream: `io.k8s.api.core.v1.Pod`,
//!   `com.example.v1.Widget`), a reference wrapped in v3's one-element `allOf` unwrapped;
//! - schema keywords v2 lacks dropped (`nullable`, `oneOf`, `anyOf`, `not`, a non-reference
//!   `allOf`, `writeOnly`, `deprecated`, ...), and, as apiextensions-apiserver's
//!   `ToStructuralOpenAPIV2` does for CRD schemas, no `type`, `items` or `properties` where a
//!   schema is nullable or preserves unknown fields, and no `type` for `x-kubernetes-int-or-string`
//!   (kubectl's v2 model would reject values those schemas accept);
//! - `paths` whose operations carry v2 `parameters` (the request body as an `in: body`
//!   parameter, query parameters with their `type` inline), `consumes`/`produces`, responses
//!   with a `schema`, and the same `x-kubernetes-action` and `x-kubernetes-group-version-kind`;
//! - `swagger: "2.0"`, `info`, and the `BearerToken` security definition.
//!
//! The protobuf form is gnostic's `openapi.v2.Document` (`sim/proto/openapiv2/OpenAPIv2.proto`,
//! compiled with protox and filled as a `prost-reflect` dynamic message), as kube-openapi's
//! `ToProtoBinary` makes it with gnostic's compiler: keys are the proto fields in snake case
//! (`$ref` is `_ref`), `x-` keys are `vendor_extension`s, objects of named values are lists of
//! `Named*` messages, and every free-form value (`default`, `enum`, extensions) is an `Any` whose
//! `yaml` holds the value (as JSON, which YAML readers read the same).

use std::collections::BTreeMap;

use axum::body::Body;
use axum::response::{IntoResponse as _, Response};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use prost_reflect::prost::Message as _;
use prost_reflect::{DescriptorPool, DynamicMessage, Kind, MessageDescriptor, Value as Field};
use serde_json::{Map, Value, json};

use super::openapi;
use super::table::ResourceInfo;

/// The media type kubectl (client-go's `OpenAPISchema`) asks for first.
pub const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
/// The newer spelling of [`PROTOBUF`], and the Content-Type kube-apiserver answers with for both.
pub const PROTOBUF_SERVED: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

const V3_REF: &str = "#/components/schemas/";
const V2_REF: &str = "#/definitions/";

/// The v2 document in both forms, and its entity tag.
#[derive(Debug)]
pub struct Served {
    /// `application/json`.
    pub json: bytes::Bytes,
    /// gnostic's `openapi.v2.Document`.
    pub protobuf: bytes::Bytes,
    /// kube-openapi's: the SHA-512 of the JSON form in upper-case hex, quoted; the protobuf form
    /// shares it.
    pub etag: String,
}

/// Builds the served document for the resources of every group version (one slice each).
///
/// # Errors
///
/// When the gnostic schema does not compile (a bug here, not in the request).
pub fn serve(group_versions: &[Vec<ResourceInfo>]) -> Result<Served, String> {
    let doc = document(group_versions);
    let json = doc.to_string();
    let mut dropped = Vec::new();
    let protobuf = to_protobuf(&doc, &mut dropped)?;
    if !dropped.is_empty() {
        tracing::warn!(
            keys = ?dropped,
            "OpenAPI v2 keys without a protobuf field were left out of the protobuf form"
        );
    }
    let digest = ring::digest::digest(&ring::digest::SHA512, json.as_bytes());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02X}")).collect();
    Ok(Served {
        json: json.into(),
        protobuf: protobuf.into(),
        etag: format!("\"{hex}\""),
    })
}

/// The Swagger 2.0 document describing `group_versions` (each the resources of one group
/// version).
pub fn document(group_versions: &[Vec<ResourceInfo>]) -> Value {
    let mut definitions = BTreeMap::new();
    let mut paths = BTreeMap::new();
    for resources in group_versions.iter().filter(|r| !r.is_empty()) {
        let mut v3 = openapi::v3_group_version(resources);
        if let Some(Value::Object(schemas)) = v3.pointer_mut("/components/schemas").map(Value::take)
        {
            for (name, mut schema) in schemas {
                schema_v2(&mut schema);
                definitions.insert(name, schema);
            }
        }
        if let Some(Value::Object(items)) = v3.get_mut("paths").map(Value::take) {
            for (path, item) in items {
                paths.insert(path, path_item_v2(item));
            }
        }
    }
    json!({
        "swagger": "2.0",
        "info": { "title": "Kubernetes", "version": "v1.33.0" },
        "paths": paths,
        "definitions": definitions,
        "securityDefinitions": {
            "BearerToken": {
                "description": "Bearer Token authentication",
                "type": "apiKey",
                "name": "authorization",
                "in": "header",
            },
        },
        "security": [{ "BearerToken": [] }],
    })
}

// === serving ===

/// The answer to `GET /openapi/v2` as kube-openapi's handler gives it: the first media type of
/// the `Accept` header (by quality; none means `*/*`) among JSON and the two protobuf spellings,
/// else 406; `ETag` and `Vary: Accept` on every answer, and 304 when `If-None-Match` names the
/// current tag.
pub fn respond(served: &Served, headers: &HeaderMap) -> Response {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.trim().is_empty())
        .unwrap_or("*/*");
    let offered: [(&str, &str, &bytes::Bytes); 3] = [
        ("application/json", "application/json", &served.json),
        (PROTOBUF, PROTOBUF_SERVED, &served.protobuf),
        (PROTOBUF_SERVED, PROTOBUF_SERVED, &served.protobuf),
    ];
    let chosen = accept_clauses(accept).into_iter().find_map(|(t, sub)| {
        offered.iter().find(|(media, _, _)| {
            let (mt, msub) = media.split_once('/').unwrap_or((media, ""));
            (t == "*" || t == mt) && (sub == "*" || sub == msub)
        })
    });
    let mut response = match chosen {
        None => StatusCode::NOT_ACCEPTABLE.into_response(),
        Some(_) if if_none_match(headers, &served.etag) => StatusCode::NOT_MODIFIED.into_response(),
        Some((_, content_type, body)) => {
            let mut r = Response::new(Body::from(bytes::Bytes::clone(body)));
            r.headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
            r
        }
    };
    let h = response.headers_mut();
    h.insert(header::VARY, HeaderValue::from_static("Accept"));
    if chosen.is_some()
        && let Ok(etag) = HeaderValue::from_str(&served.etag)
    {
        h.insert(header::ETAG, etag);
    }
    response
}

/// `(type, subtype)` of each clause of an `Accept` header, highest quality first (ties keep their
/// order), without the clauses of quality 0.
fn accept_clauses(accept: &str) -> Vec<(&str, &str)> {
    let mut clauses: Vec<(f32, &str, &str)> = accept
        .split(',')
        .filter_map(|clause| {
            let mut parts = clause.split(';');
            let media = parts.next()?.trim();
            let (t, sub) = media.split_once('/').unwrap_or((media, "*"));
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.parse::<f32>().ok())
                .unwrap_or(1.0);
            (q > 0.0).then_some((q, t.trim(), sub.trim()))
        })
        .collect();
    clauses.sort_by(|a, b| b.0.total_cmp(&a.0));
    clauses.into_iter().map(|(_, t, sub)| (t, sub)).collect()
}

/// Whether `If-None-Match` matches `etag` (`*`, or a list holding it, weak tags compared weakly),
/// as Go's `http.ServeContent` checks it.
fn if_none_match(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .any(|tag| tag == "*" || tag.trim_start_matches("W/") == etag)
}

// === schemas ===

/// The keywords a v2 schema may carry (besides `x-` extensions), as gnostic's `Schema` has them.
const SCHEMA_KEYS: &[&str] = &[
    "$ref",
    "format",
    "title",
    "description",
    "default",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxProperties",
    "minProperties",
    "required",
    "enum",
    "additionalProperties",
    "type",
    "items",
    "allOf",
    "properties",
    "discriminator",
    "readOnly",
    "externalDocs",
    "example",
];

/// Turns a v3 schema into its v2 form, in place (see the module documentation).
fn schema_v2(schema: &mut Value) {
    let Value::Object(s) = schema else { return };
    if let Some(Value::String(r)) = s.get_mut("$ref")
        && let Some(name) = r.strip_prefix(V3_REF)
    {
        *r = format!("{V2_REF}{name}");
    }
    // v3 wraps a reference with siblings in a one-element allOf; v2 puts it beside them.
    if let Some(Value::Array(all_of)) = s.get("allOf")
        && let [Value::Object(only)] = all_of.as_slice()
        && only.len() == 1
        && let Some(Value::String(r)) = only.get("$ref")
    {
        let r = r.replacen(V3_REF, V2_REF, 1);
        s.remove("allOf");
        s.insert("$ref".into(), Value::String(r));
    }
    let flag = |s: &Map<String, Value>, key: &str| s.get(key) == Some(&Value::Bool(true));
    if flag(s, "nullable") || flag(s, "x-kubernetes-preserve-unknown-fields") {
        for key in ["type", "items", "properties"] {
            s.remove(key);
        }
    }
    if flag(s, "x-kubernetes-int-or-string") {
        s.remove("type");
    }
    // A nullable property may be null, which `required` would refuse in v2.
    if let (Some(Value::Array(required)), Some(Value::Object(properties))) =
        (s.get("required"), s.get("properties"))
    {
        let nullable = |name: &str| {
            properties
                .get(name)
                .is_some_and(|p| p.get("nullable") == Some(&Value::Bool(true)))
        };
        let kept: Vec<Value> = required
            .iter()
            .filter(|r| !r.as_str().is_some_and(nullable))
            .cloned()
            .collect();
        if kept.is_empty() {
            s.remove("required");
        } else {
            s.insert("required".into(), Value::Array(kept));
        }
    }
    // `type: [t, "null"]` is v3.1's nullable.
    if let Some(Value::Array(types)) = s.get("type") {
        let types: Vec<&Value> = types
            .iter()
            .filter(|t| t.as_str() != Some("null"))
            .collect();
        match types.as_slice() {
            [one] => {
                let one = (*one).clone();
                s.insert("type".into(), one);
            }
            _ => {
                s.remove("type");
            }
        }
    }
    s.retain(|key, _| key.starts_with("x-") || SCHEMA_KEYS.contains(&key.as_str()));
    // Only references survive in allOf (a constraint list v2's readers do not apply).
    if s.contains_key("allOf") {
        s.remove("allOf");
    }
    if let Some(Value::Object(properties)) = s.get_mut("properties") {
        properties.values_mut().for_each(schema_v2);
    }
    if let Some(items) = s.get_mut("items") {
        match items {
            Value::Array(items) => items.iter_mut().for_each(schema_v2),
            items => schema_v2(items),
        }
    }
    if let Some(additional @ Value::Object(_)) = s.get_mut("additionalProperties") {
        schema_v2(additional);
    }
}

// === paths ===

/// Turns a v3 path item into v2: parameters inline, the request body a body parameter, response
/// content a schema.
fn path_item_v2(item: Value) -> Value {
    let Value::Object(item) = item else {
        return item;
    };
    let mut out = Map::new();
    for (key, value) in item {
        let value = match key.as_str() {
            "parameters" => parameters_v2(value),
            "get" | "put" | "post" | "delete" | "options" | "head" | "patch" => operation_v2(value),
            _ => value,
        };
        out.insert(key, value);
    }
    Value::Object(out)
}

fn parameters_v2(parameters: Value) -> Value {
    match parameters {
        Value::Array(params) => Value::Array(params.into_iter().map(parameter_v2).collect()),
        other => other,
    }
}

/// A v3 non-body parameter: the keywords of its `schema` move up beside `name` and `in`.
fn parameter_v2(parameter: Value) -> Value {
    let Value::Object(mut p) = parameter else {
        return parameter;
    };
    if let Some(Value::Object(schema)) = p.remove("schema") {
        for (key, value) in schema {
            p.entry(key).or_insert(value);
        }
    }
    Value::Object(p)
}

fn operation_v2(operation: Value) -> Value {
    let Value::Object(op) = operation else {
        return operation;
    };
    let mut out = Map::new();
    let mut parameters = Vec::new();
    let mut consumes = Vec::new();
    let mut produces: Vec<String> = Vec::new();
    for (key, value) in op {
        match key.as_str() {
            "parameters" => {
                if let Value::Array(params) = parameters_v2(value) {
                    parameters.extend(params);
                }
            }
            "requestBody" => {
                let (types, schema) = media_schema(&value);
                consumes = types;
                let mut body = json!({ "name": "body", "in": "body", "required": true });
                if let Some(schema) = schema {
                    body["schema"] = schema;
                }
                parameters.insert(0, body);
            }
            "responses" => {
                let Value::Object(responses) = value else {
                    continue;
                };
                let mut v2 = Map::new();
                for (code, response) in responses {
                    let (types, schema) = media_schema(&response);
                    for t in types {
                        if !produces.contains(&t) {
                            produces.push(t);
                        }
                    }
                    let mut r = json!({
                        "description": response.get("description").cloned().unwrap_or_default(),
                    });
                    if let Some(schema) = schema {
                        r["schema"] = schema;
                    }
                    v2.insert(code, r);
                }
                out.insert("responses".into(), Value::Object(v2));
            }
            _ => {
                out.insert(key, value);
            }
        }
    }
    if !consumes.is_empty() {
        out.insert("consumes".into(), json!(consumes));
    }
    if !produces.is_empty() {
        out.insert("produces".into(), json!(produces));
    }
    if !parameters.is_empty() {
        out.insert("parameters".into(), Value::Array(parameters));
    }
    out.insert("schemes".into(), json!(["https"]));
    Value::Object(out)
}

/// The media types of a v3 request body or response, and the schema of the first (all share
/// one), in v2 form.
fn media_schema(body: &Value) -> (Vec<String>, Option<Value>) {
    let Some(Value::Object(content)) = body.get("content") else {
        return (Vec::new(), None);
    };
    let types = content.keys().cloned().collect();
    let schema = content.values().find_map(|m| m.get("schema")).map(|s| {
        let mut s = s.clone();
        schema_v2(&mut s);
        s
    });
    (types, schema)
}

// === protobuf ===

/// gnostic's `openapi.v2` schema, compiled at first use.
fn pool() -> Result<&'static DescriptorPool, String> {
    static POOL: std::sync::OnceLock<Result<DescriptorPool, String>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        super::protobuf::compile_embedded(&[(
            "openapiv2/OpenAPIv2.proto",
            include_str!("../../../proto/openapiv2/OpenAPIv2.proto"),
        )])
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// Encodes a Swagger 2.0 JSON document as gnostic's `openapi.v2.Document`. Keys with no field
/// in gnostic's schema (which gnostic's compiler would refuse) are left out and listed in
/// `dropped`, by their JSON path.
///
/// # Errors
///
/// When the gnostic schema does not compile.
pub fn to_protobuf(doc: &Value, dropped: &mut Vec<String>) -> Result<Vec<u8>, String> {
    let document = pool()?
        .get_message_by_name("openapi.v2.Document")
        .ok_or("openapi.v2.Document is missing")?;
    Ok(message(&document, doc, "", dropped).encode_to_vec())
}

/// The branch of a gnostic `oneof` wrapper that a JSON value takes, as gnostic's compiler picks
/// it: by `$ref`, by `in`, by `type` (and `flow`), or by being a boolean.
fn branch(wrapper: &str, json: &Value) -> &'static str {
    let s = |key| json.get(key).and_then(Value::as_str).unwrap_or_default();
    match wrapper {
        "AdditionalPropertiesItem" if json.is_boolean() => "boolean",
        "AdditionalPropertiesItem" => "schema",
        "ParametersItem" | "ResponseValue" if json.get("$ref").is_some() => "json_reference",
        "ParametersItem" => "parameter",
        "ResponseValue" => "response",
        "Parameter" if s("in") == "body" => "body_parameter",
        "Parameter" => "non_body_parameter",
        "NonBodyParameter" => match s("in") {
            "header" => "header_parameter_sub_schema",
            "formData" => "form_data_parameter_sub_schema",
            "path" => "path_parameter_sub_schema",
            _ => "query_parameter_sub_schema",
        },
        "SchemaItem" if s("type") == "file" => "file_schema",
        "SchemaItem" => "schema",
        _ => match (s("type"), s("flow")) {
            ("basic", _) => "basic_authentication_security",
            ("oauth2", "implicit") => "oauth2_implicit_security",
            ("oauth2", "password") => "oauth2_password_security",
            ("oauth2", "application") => "oauth2_application_security",
            ("oauth2", _) => "oauth2_access_code_security",
            _ => "api_key_security",
        },
    }
}

/// `camelCase` (and `$ref`) to the snake-case field names gnostic gives the keys.
fn field_name(key: &str) -> String {
    if key == "$ref" {
        return "_ref".to_owned();
    }
    let mut out = String::with_capacity(key.len() + 4);
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The gnostic message of type `descriptor` for `json` (at JSON path `at`).
fn message(
    descriptor: &MessageDescriptor,
    json: &Value,
    at: &str,
    dropped: &mut Vec<String>,
) -> DynamicMessage {
    let mut out = DynamicMessage::new(descriptor.clone());
    let fields: Vec<_> = descriptor.fields().collect();
    let name = descriptor.name();

    // A free-form value.
    if descriptor.full_name() == "openapi.v2.Any" {
        out.set_field_by_name("yaml", Field::String(json.to_string()));
        return out;
    }
    // A oneof wrapper: every field in the one oneof.
    if let Some(oneof) = descriptor.oneofs().next()
        && oneof.fields().count() == fields.len()
    {
        if let Some(field) = descriptor.get_field_by_name(branch(name, json)) {
            set(&mut out, &field, json, at, dropped);
        }
        return out;
    }
    // An object of named values: a repeated `Named*` field (plus `vendor_extension` for x- keys).
    let named = fields
        .iter()
        .find(|f| f.name() != "vendor_extension" && named_value(f).is_some());
    if let (Some(named), Value::Object(object)) = (named, json) {
        let extensions = descriptor.get_field_by_name("vendor_extension");
        for (key, value) in object {
            // `x-` keys are extensions where the object has them (`paths`); elsewhere (a
            // schema's `properties`) they are names like any other.
            let field = match &extensions {
                Some(extensions) if key.starts_with("x-") => extensions,
                _ => named,
            };
            push_named(&mut out, field, key, value, at, dropped);
        }
        return out;
    }
    // A list of one type (`TypeItem`, `ItemsItem`, `StringArray`): a single value or an array.
    if let [only] = fields.as_slice()
        && only.is_list()
    {
        let items = match json {
            Value::Array(items) => items.clone(),
            single => vec![single.clone()],
        };
        set(&mut out, only, &Value::Array(items), at, dropped);
        return out;
    }
    // A plain object: each key to its field.
    let Value::Object(object) = json else {
        dropped.push(at.to_owned());
        return out;
    };
    for (key, value) in object {
        if key.starts_with("x-")
            && let Some(field) = descriptor.get_field_by_name("vendor_extension")
        {
            push_named(&mut out, &field, key, value, at, dropped);
            continue;
        }
        match descriptor.get_field_by_name(&field_name(key)) {
            Some(field) => set(&mut out, &field, value, &format!("{at}/{key}"), dropped),
            None => dropped.push(format!("{at}/{key}")),
        }
    }
    out
}

/// The value message of a repeated `Named*` field (`NamedSchema` has `name` and `value`).
fn named_value(field: &prost_reflect::FieldDescriptor) -> Option<prost_reflect::FieldDescriptor> {
    match field.kind() {
        Kind::Message(m) if field.is_list() && m.name().starts_with("Named") => {
            m.get_field_by_name("value")
        }
        _ => None,
    }
}

/// Appends `{name: key, value}` to the repeated `Named*` `field`.
fn push_named(
    out: &mut DynamicMessage,
    field: &prost_reflect::FieldDescriptor,
    key: &str,
    value: &Value,
    at: &str,
    dropped: &mut Vec<String>,
) {
    let (Kind::Message(named), Some(value_field)) = (field.kind(), named_value(field)) else {
        return;
    };
    let mut entry = DynamicMessage::new(named);
    entry.set_field_by_name("name", Field::String(key.to_owned()));
    set(
        &mut entry,
        &value_field,
        value,
        &format!("{at}/{key}"),
        dropped,
    );
    if let Field::List(list) = out.get_field_mut(field) {
        list.push(Field::Message(entry));
    }
}

/// Sets `field` of `out` from `json`: scalars as they are, messages recursively, lists
/// element by element.
fn set(
    out: &mut DynamicMessage,
    field: &prost_reflect::FieldDescriptor,
    json: &Value,
    at: &str,
    dropped: &mut Vec<String>,
) {
    if field.is_list() {
        let Value::Array(items) = json else {
            dropped.push(at.to_owned());
            return;
        };
        let values: Vec<Field> = items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| single(field, item, &format!("{at}/{i}"), dropped))
            .collect();
        out.set_field(field, Field::List(values));
    } else if let Some(value) = single(field, json, at, dropped) {
        out.set_field(field, value);
    }
}

/// One value of `field`'s type from `json`, or `None` (listed in `dropped`) when it does not fit.
fn single(
    field: &prost_reflect::FieldDescriptor,
    json: &Value,
    at: &str,
    dropped: &mut Vec<String>,
) -> Option<Field> {
    let value = match (field.kind(), json) {
        (Kind::Message(m), json) => Some(Field::Message(message(&m, json, at, dropped))),
        (Kind::String, Value::String(s)) => Some(Field::String(s.clone())),
        (Kind::Bool, Value::Bool(b)) => Some(Field::Bool(*b)),
        (Kind::Double, Value::Number(n)) => n.as_f64().map(Field::F64),
        (Kind::Int64, Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
            .map(Field::I64),
        _ => None,
    };
    if value.is_none() {
        dropped.push(at.to_owned());
    }
    value
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::apiserver::requests::kit::resource_info;
    use crate::storage::registry::Registry;

    /// Every built-in group version, and a custom resource whose schema has what v2 lacks.
    fn group_versions() -> Vec<Vec<ResourceInfo>> {
        let registry = Registry::with_builtins();
        let mut all: Vec<Vec<ResourceInfo>> = registry
            .groups()
            .iter()
            .flat_map(|(g, vs)| vs.iter().map(move |v| (g.clone(), v.clone())))
            .map(|(g, v)| {
                registry
                    .resources(&g, &v)
                    .iter()
                    .map(|d| resource_info(d))
                    .collect()
            })
            .collect();
        all.push(vec![ResourceInfo {
            group: "example.com".into(),
            version: "v1".into(),
            kind: "Widget".into(),
            plural: "widgets".into(),
            namespaced: true,
            verbs: Vec::new(),
            subresources: vec!["status".into(), "scale".into()],
            printer_columns: Vec::new(),
            schema: Some(json!({
                "type": "object",
                "properties": {
                    "spec": {
                        "type": "object",
                        "required": ["size", "note"],
                        "properties": {
                            "size": {"type": "integer", "description": "How big."},
                            "note": {"type": "string", "nullable": true},
                            "port": {"x-kubernetes-int-or-string": true,
                                     "anyOf": [{"type": "integer"}, {"type": "string"}]},
                            "mode": {"type": "string", "oneOf": [{"enum": ["a"]}, {"enum": ["b"]}],
                                     "default": "a", "enum": ["a", "b"]},
                            "tags": {"type": "array", "items": {"type": "string"},
                                     "x-kubernetes-list-type": "set"},
                            "template": {"type": "object",
                                         "x-kubernetes-embedded-resource": true,
                                         "x-kubernetes-preserve-unknown-fields": true,
                                         "properties": {"a": {"type": "string"}}},
                            "labels": {"type": "object",
                                       "additionalProperties": {"type": "string"}},
                        },
                    },
                },
            })),
        }]);
        all
    }

    /// Walks every schema under `v`, calling `check` with its JSON path.
    fn each_schema(v: &Value, at: &str, check: &mut dyn FnMut(&str, &Map<String, Value>)) {
        let Value::Object(s) = v else { return };
        check(at, s);
        if let Some(Value::Object(props)) = s.get("properties") {
            for (name, p) in props {
                each_schema(p, &format!("{at}.{name}"), check);
            }
        }
        if let Some(items) = s.get("items") {
            each_schema(items, &format!("{at}[]"), check);
        }
        if let Some(additional) = s.get("additionalProperties") {
            each_schema(additional, &format!("{at}{{}}"), check);
        }
    }

    /// The document holds only what Swagger 2.0 and kubectl's v2 reader (kube-openapi's
    /// `proto.NewOpenAPIData`) accept: references that resolve to definitions, one type per
    /// schema, arrays with one item schema, no v3 keyword.
    #[test]
    fn document_is_swagger_2_that_kubectls_reader_accepts() {
        let doc = document(&group_versions());
        assert_eq!(doc["swagger"], "2.0");
        let definitions = doc["definitions"].as_object().unwrap();
        assert!(definitions.len() > 250, "{} definitions", definitions.len());
        let mut problems = Vec::new();
        let mut untyped = Vec::new();
        let mut check = |at: &str, s: &Map<String, Value>| {
            if let Some(r) = s.get("$ref") {
                let name = r.as_str().and_then(|r| r.strip_prefix(V2_REF));
                if !name.is_some_and(|n| definitions.contains_key(n)) {
                    problems.push(format!("{at}: unresolved $ref {r}"));
                }
            }
            for key in s.keys() {
                if !key.starts_with("x-") && !SCHEMA_KEYS.contains(&key.as_str()) {
                    problems.push(format!("{at}: {key} is not a v2 keyword"));
                }
            }
            match s.get("type") {
                None => {}
                Some(Value::String(t))
                    if t == "array" && !s.get("items").is_some_and(Value::is_object) =>
                {
                    problems.push(format!("{at}: array without one item schema"));
                }
                Some(Value::String(t))
                    if ["array", "object", "string", "integer", "number", "boolean"]
                        .contains(&t.as_str()) => {}
                Some(t) => problems.push(format!("{at}: type {t}")),
            }
        };
        for (name, schema) in definitions {
            each_schema(schema, name, &mut check);
        }
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                for p in op["parameters"].as_array().into_iter().flatten() {
                    if let Some(schema) = p.get("schema") {
                        each_schema(schema, &format!("{path} {method} body"), &mut check);
                    } else if p.get("type").is_none() {
                        untyped.push(format!("{path} {method}: parameter {p} has no type"));
                    }
                }
                for (code, r) in op["responses"].as_object().into_iter().flatten() {
                    if let Some(schema) = r.get("schema") {
                        each_schema(schema, &format!("{path} {method} {code}"), &mut check);
                    }
                }
            }
        }
        problems.extend(untyped);
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    /// Built-in and custom kinds are named and shaped as kube-apiserver's v2 has them.
    #[test]
    fn definitions_and_paths_are_upstreams() {
        let doc = document(&group_versions());
        let pod = &doc["definitions"]["io.k8s.api.core.v1.Pod"];
        assert_eq!(
            pod["x-kubernetes-group-version-kind"],
            json!([{"group": "", "kind": "Pod", "version": "v1"}])
        );
        assert_eq!(
            pod["properties"]["metadata"]["$ref"],
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
        assert!(
            doc["definitions"]["io.k8s.api.apps.v1.DeploymentList"].is_object(),
            "list kinds are definitions too"
        );

        let spec = &doc["definitions"]["com.example.v1.Widget"]["properties"]["spec"];
        assert_eq!(spec["properties"]["size"]["description"], "How big.");
        // Nullable: no type, and not required (null is a value).
        assert_eq!(spec["required"], json!(["size"]));
        assert_eq!(spec["properties"]["note"], json!({}));
        assert_eq!(
            spec["properties"]["port"],
            json!({"x-kubernetes-int-or-string": true})
        );
        assert_eq!(
            spec["properties"]["mode"],
            json!({"type": "string", "default": "a", "enum": ["a", "b"]})
        );
        assert_eq!(
            spec["properties"]["template"],
            json!({"required": ["kind", "apiVersion"],
                   "x-kubernetes-embedded-resource": true,
                   "x-kubernetes-preserve-unknown-fields": true})
        );

        let item = &doc["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"];
        let patch = &item["patch"];
        assert_eq!(patch["x-kubernetes-action"], "patch");
        assert_eq!(
            patch["x-kubernetes-group-version-kind"],
            json!({"group": "example.com", "kind": "Widget", "version": "v1"})
        );
        let params = patch["parameters"].as_array().unwrap();
        assert_eq!(params[0]["in"], "body");
        assert_eq!(
            params[0]["schema"]["$ref"],
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
        );
        let validation = params
            .iter()
            .find(|p| p["name"] == "fieldValidation")
            .unwrap();
        assert_eq!(validation["in"], "query");
        assert_eq!(validation["type"], "string");
        assert!(
            patch["consumes"]
                .as_array()
                .unwrap()
                .contains(&json!("application/merge-patch+json"))
        );
        assert_eq!(
            patch["responses"]["200"]["schema"]["$ref"],
            "#/definitions/com.example.v1.Widget"
        );
        assert_eq!(item["parameters"][0]["in"], "path");
        assert_eq!(item["parameters"][0]["type"], "string");
    }

    /// The protobuf form carries every key of the JSON form, where kubectl reads them.
    #[test]
    fn protobuf_form_is_gnostics_document() {
        let doc = document(&group_versions());
        let mut dropped = Vec::new();
        let bytes = to_protobuf(&doc, &mut dropped).unwrap();
        assert!(dropped.is_empty(), "left out: {dropped:?}");

        let descriptor = pool()
            .unwrap()
            .get_message_by_name("openapi.v2.Document")
            .unwrap();
        let decoded = DynamicMessage::decode(descriptor, bytes.as_slice()).unwrap();
        // prost-reflect's JSON view of the message, by proto field names.
        let options = prost_reflect::SerializeOptions::new().use_proto_field_name(true);
        let mut serializer = serde_json::Serializer::new(Vec::new());
        decoded
            .serialize_with_options(&mut serializer, &options)
            .unwrap();
        let view: Value = serde_json::from_slice(&serializer.into_inner()).unwrap();
        assert_eq!(view["swagger"], "2.0");

        let named = |list: &Value, name: &str| -> Value {
            list.as_array()
                .unwrap()
                .iter()
                .find(|e| e["name"] == name)
                .map(|e| e["value"].clone())
                .unwrap_or_else(|| panic!("no {name}"))
        };
        let pod = named(
            &view["definitions"]["additional_properties"],
            "io.k8s.api.core.v1.Pod",
        );
        assert_eq!(pod["type"]["value"], json!(["object"]));
        let gvk = named(&pod["vendor_extension"], "x-kubernetes-group-version-kind");
        let gvk: Value = serde_json::from_str(gvk["yaml"].as_str().unwrap()).unwrap();
        assert_eq!(gvk, json!([{"group": "", "kind": "Pod", "version": "v1"}]));
        let metadata = named(&pod["properties"]["additional_properties"], "metadata");
        assert_eq!(
            metadata["_ref"],
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );

        let item = named(
            &view["paths"]["path"],
            "/api/v1/namespaces/{namespace}/pods/{name}",
        );
        let params = item["patch"]["parameters"].as_array().unwrap();
        assert!(
            params.iter().any(
                |p| p["parameter"]["non_body_parameter"]["query_parameter_sub_schema"]["name"]
                    == "fieldValidation"
            ),
            "{params:?}"
        );
        assert_eq!(
            params[0]["parameter"]["body_parameter"]["schema"]["_ref"],
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
        );
        let ok = named(&item["get"]["responses"]["response_code"], "200");
        assert_eq!(
            ok["response"]["schema"]["schema"]["_ref"],
            "#/definitions/io.k8s.api.core.v1.Pod"
        );
        let widget = named(
            &view["definitions"]["additional_properties"],
            "com.example.v1.Widget",
        );
        let spec = named(&widget["properties"]["additional_properties"], "spec");
        let labels = named(&spec["properties"]["additional_properties"], "labels");
        assert_eq!(
            labels["additional_properties"]["schema"]["type"]["value"],
            json!(["string"])
        );
    }

    #[test]
    fn negotiation_etag_and_not_modified() {
        let served = serve(&group_versions()).unwrap();
        assert!(served.etag.starts_with('"') && served.etag.len() == 130);
        let get = |headers: &[(&'static str, &str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in headers {
                map.append(*name, HeaderValue::from_str(value).unwrap());
            }
            respond(&served, &map)
        };
        let content_type = |r: &Response| {
            r.headers()
                .get(header::CONTENT_TYPE)
                .map(|v| v.to_str().unwrap().to_owned())
        };

        let r = get(&[]);
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(content_type(&r).as_deref(), Some("application/json"));
        assert_eq!(r.headers()[header::ETAG], served.etag.as_str());
        assert_eq!(r.headers()[header::VARY], "Accept");
        for accept in [
            PROTOBUF,
            PROTOBUF_SERVED,
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf, application/json",
        ] {
            let r = get(&[("accept", accept)]);
            assert_eq!(
                content_type(&r).as_deref(),
                Some(PROTOBUF_SERVED),
                "{accept}"
            );
        }
        let r = get(&[(
            "accept",
            "application/json;q=0.9, application/com.github.proto-openapi.spec.v2.v1.0+protobuf;q=0.1",
        )]);
        assert_eq!(content_type(&r).as_deref(), Some("application/json"));
        let r = get(&[("accept", "application/yaml")]);
        assert_eq!(r.status(), StatusCode::NOT_ACCEPTABLE);

        for tag in [
            served.etag.as_str(),
            "*",
            &format!("\"x\", W/{}", served.etag),
        ] {
            let r = get(&[("accept", PROTOBUF), ("if-none-match", tag)]);
            assert_eq!(r.status(), StatusCode::NOT_MODIFIED, "{tag}");
            assert_eq!(r.headers()[header::ETAG], served.etag.as_str());
        }
        let r = get(&[("if-none-match", "\"stale\"")]);
        assert_eq!(r.status(), StatusCode::OK);
    }
}
