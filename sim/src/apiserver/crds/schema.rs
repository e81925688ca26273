//! Custom resource validation against a CRD version's openAPIV3Schema: pruning, defaulting, structural validation and CEL rules.
//!
//! This mirrors what kube-apiserver's apiextensions-apiserver does with a CustomResourceDefinition's
//! structural schema:
//!
//! - [`CompiledSchema::compile`] checks that the schema is structural (the checks of
//!   `ValidateStructural` and of the CRD API validation that matter for serving) and compiles its
//!   `pattern`s and `x-kubernetes-validations` CEL rules, once per CRD version.
//! - [`CompiledSchema::prune`] drops the fields the schema does not declare, and the non-nullable
//!   `null`s without a default, as the request decoder does.
//! - [`CompiledSchema::apply_defaults`] applies `default`s as structural defaulting does.
//! - [`CompiledSchema::validate`] runs the OpenAPI value validation (kube-openapi's messages), the
//!   `x-kubernetes-list-type` uniqueness checks and then the CEL rules, skipping the rules when a
//!   blocking error (type, required, enum, too long, too many) was found, as the registry strategy
//!   does.
//!
//! Error messages follow `field.Error.ErrorBody()` of k8s.io/apimachinery: for instance
//! `Invalid value: "string": spec.replicas in body must be of type integer: "string"`.
//!
//! Not implemented (the real server has them): CEL cost estimation and budgets, validation
//! ratcheting of unchanged values on update, CEL type checking at CRD creation (type errors
//! surface when a rule is evaluated), ObjectMeta validation of embedded resources beyond
//! `apiVersion`/`kind`, and the Kubernetes CEL libraries `quantity`, `url`, `ip`, `cidr`,
//! `semver`, `format` and two-variable comprehensions: a rule calling one of those is compiled
//! but skipped (see [`CompiledSchema::skipped_rules`]).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use telemesh_core::go::{float as go_float, quote as go_quote};

use cel::common::types::CelOptional;
use cel::common::value::Val;
use cel::{Context, Env, ExecutionError, Program, Value as CelValue};
use regex::Regex;
use serde_json::{Map, Value};

use super::expr;

/// The variables of a CRD validation rule.
const SELF_VARIABLES: &[&str] = &["self", "oldSelf"];

/// The schema of one CRD version, checked and compiled once, with its compiled CEL programs.
pub struct CompiledSchema {
    root: Node,
    env: Arc<Env>,
    helpers: Helpers,
    skipped: Vec<String>,
}

impl fmt::Debug for CompiledSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledSchema")
            .field("root", &self.root)
            .field("skipped", &self.skipped)
            .finish_non_exhaustive()
    }
}

/// One validation error, as a `field.Error` of k8s.io/apimachinery: the status cause's `field`,
/// `reason` and `message`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    /// The path of the invalid value, e.g. `spec.replicas` or `spec.items[2].name`; `<nil>` for
    /// the root, as kube-apiserver reports it.
    pub field: String,
    /// Why the value is invalid.
    pub reason: FieldErrorReason,
    /// The message without the field, as `field.Error.ErrorBody()`, e.g. `Required value`.
    pub message: String,
}

/// The reason of a [`FieldError`]: a `metav1.CauseType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldErrorReason {
    /// `FieldValueRequired`.
    Required,
    /// `FieldValueInvalid`.
    Invalid,
    /// `FieldValueTypeInvalid`.
    TypeInvalid,
    /// `FieldValueNotSupported`.
    NotSupported,
    /// `FieldValueTooLong`.
    TooLong,
    /// `FieldValueTooMany`.
    TooMany,
    /// `FieldValueDuplicate`.
    Duplicate,
    /// `FieldValueForbidden`.
    Forbidden,
}

impl FieldErrorReason {
    /// The cause type as it appears in a Status, e.g. `FieldValueRequired`.
    pub fn as_str(&self) -> &'static str {
        match self {
            FieldErrorReason::Required => "FieldValueRequired",
            FieldErrorReason::Invalid => "FieldValueInvalid",
            FieldErrorReason::TypeInvalid => "FieldValueTypeInvalid",
            FieldErrorReason::NotSupported => "FieldValueNotSupported",
            FieldErrorReason::TooLong => "FieldValueTooLong",
            FieldErrorReason::TooMany => "FieldValueTooMany",
            FieldErrorReason::Duplicate => "FieldValueDuplicate",
            FieldErrorReason::Forbidden => "FieldValueForbidden",
        }
    }

    /// The human prefix of a message of this reason, e.g. `Required value`.
    fn title(&self) -> &'static str {
        match self {
            FieldErrorReason::Required => "Required value",
            FieldErrorReason::Invalid | FieldErrorReason::TypeInvalid => "Invalid value",
            FieldErrorReason::NotSupported => "Unsupported value",
            FieldErrorReason::TooLong => "Too long",
            FieldErrorReason::TooMany => "Too many",
            FieldErrorReason::Duplicate => "Duplicate value",
            FieldErrorReason::Forbidden => "Forbidden",
        }
    }

    fn from_cause(s: &str) -> Option<Self> {
        Some(match s {
            "FieldValueInvalid" => FieldErrorReason::Invalid,
            "FieldValueForbidden" => FieldErrorReason::Forbidden,
            "FieldValueRequired" => FieldErrorReason::Required,
            "FieldValueDuplicate" => FieldErrorReason::Duplicate,
            _ => return None,
        })
    }
}

impl fmt::Display for FieldErrorReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FieldError {
    /// An error whose message is built as `ErrorBody()` does: the reason's title, the bad value
    /// (already rendered, left out for the reasons that never show it) and the detail.
    fn new(field: &str, reason: FieldErrorReason, bad: Option<String>, detail: &str) -> Self {
        FieldError {
            field: display_path(field),
            reason,
            message: error_body(reason, bad, detail),
        }
    }
}

fn error_body(reason: FieldErrorReason, bad: Option<String>, detail: &str) -> String {
    let mut s = match (reason, bad) {
        (
            FieldErrorReason::Required | FieldErrorReason::Forbidden | FieldErrorReason::TooLong,
            _,
        )
        | (_, None) => reason.title().to_string(),
        (_, Some(bad)) => format!("{}: {bad}", reason.title()),
    };
    if !detail.is_empty() {
        s.push_str(": ");
        s.push_str(detail);
    }
    s
}

// ---------------------------------------------------------------------------------------------
// Paths and Go-style rendering of values
// ---------------------------------------------------------------------------------------------

/// `field.Path` renders an empty (nil) path as `<nil>`.
fn display_path(p: &str) -> String {
    if p.is_empty() {
        "<nil>".to_string()
    } else {
        p.to_string()
    }
}

fn child(p: &str, name: &str) -> String {
    if p.is_empty() {
        name.to_string()
    } else {
        format!("{p}.{name}")
    }
}

fn index(p: &str, i: usize) -> String {
    format!("{p}[{i}]")
}

fn key(p: &str, k: &str) -> String {
    format!("{p}[{k}]")
}

fn go_number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        i.to_string()
    } else {
        go_float(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// How `ErrorBody()` renders a bad value decoded from JSON (apimachinery 1.36): `null`
/// unquoted, scalars as `%v` (strings quoted), lists and maps as JSON (`{"name":"a"}`).
fn bad_json(v: &Value) -> String {
    match v {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_number(n),
        Value::String(s) => go_quote(s),
        other => go_json(other),
    }
}

/// Go's `json.Marshal` of a value decoded into `interface{}`: map keys sorted, no spaces, and
/// `<`, `>`, `&` escaped as Go's HTML-safe encoder does.
fn go_json(v: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&m[k])))
                        .collect(),
                )
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(v)
        .to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

fn json_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) => {
            if n.is_f64() {
                "number"
            } else {
                "integer"
            }
        }
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Canonical JSON with sorted keys, tagged by scalar kind as Go compares `interface{}` keys.
fn identity(v: &Value) -> String {
    fn canon(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    canon(m.get(k).unwrap_or(&Value::Null), out);
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    canon(x, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut s = String::from(match v {
        Value::Number(n) if n.is_f64() => "f:",
        Value::Number(_) => "i:",
        Value::String(_) => "s:",
        Value::Bool(_) => "b:",
        Value::Null => "n:",
        _ => "j:",
    });
    canon(v, &mut s);
    s
}

fn json_number_eq(a: &serde_json::Number, b: &serde_json::Number) -> bool {
    match (a.as_i64(), b.as_i64()) {
        (Some(x), Some(y)) => x == y,
        _ => a.as_f64() == b.as_f64(),
    }
}

/// Equality of JSON values where numbers compare by value (1 == 1.0), as enum matching does
/// after Go's type conversion.
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => json_number_eq(x, y),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

// ---------------------------------------------------------------------------------------------
// The compiled schema tree
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Default)]
enum Additional {
    #[default]
    Unset,
    Bool(bool),
    Schema(Box<Node>),
}

#[derive(Debug, Default)]
struct Node {
    ty: Option<String>,
    nullable: bool,
    /// The supported format, normalized without dashes (`datetime`), and as written.
    format: Option<(String, String)>,
    /// An integer's format as written (`int32`, `int64`): named by the type error of a
    /// fraction and by the range check.
    integer_format: Option<String>,
    properties: Vec<(String, Node)>,
    required: Vec<String>,
    additional: Additional,
    items: Option<Box<Node>>,
    enumeration: Option<Vec<Value>>,
    maximum: Option<f64>,
    exclusive_maximum: bool,
    minimum: Option<f64>,
    exclusive_minimum: bool,
    multiple_of: Option<f64>,
    max_length: Option<u64>,
    min_length: Option<u64>,
    pattern: Option<(String, Regex)>,
    max_items: Option<u64>,
    min_items: Option<u64>,
    max_properties: Option<u64>,
    min_properties: Option<u64>,
    all_of: Vec<Node>,
    any_of: Vec<Node>,
    one_of: Vec<Node>,
    not: Option<Box<Node>>,
    preserve_unknown: bool,
    int_or_string: bool,
    embedded: bool,
    list_type: Option<String>,
    list_map_keys: Vec<String>,
    default: Option<Value>,
    rules: Vec<Rule>,
    /// Whether this node or a node below it has CEL rules.
    has_rules: bool,
}

impl Node {
    fn property(&self, name: &str) -> Option<&Node> {
        self.properties
            .iter()
            .find_map(|(k, n)| (k == name).then_some(n))
    }

    fn additional_schema(&self) -> Option<&Node> {
        match &self.additional {
            Additional::Schema(n) => Some(n),
            _ => None,
        }
    }

    /// The schema type as the CEL validator reports it as the bad value of a rule failure.
    fn type_name(&self) -> &str {
        self.ty.as_deref().unwrap_or("")
    }

    /// The types the value may have, for the type check: `None` when anything goes.
    fn types(&self) -> Option<Vec<&str>> {
        if self.int_or_string {
            Some(vec!["integer", "string"])
        } else {
            self.ty.as_deref().map(|t| vec![t])
        }
    }
}

#[derive(Debug)]
struct Rule {
    rule: String,
    program: Program,
    message: Option<String>,
    message_expression: Option<Program>,
    reason: FieldErrorReason,
    field_path: Option<String>,
    optional_old_self: bool,
    uses_old_self: bool,
    /// The Kubernetes CEL function this rule calls that is not implemented: the rule is skipped.
    unsupported: Option<String>,
}

impl Rule {
    /// `ruleErrorString`: the message if any, else the rule.
    fn error_string(&self) -> &str {
        self.message.as_deref().unwrap_or(self.rule.trim())
    }
}

/// Programs that convert strings into CEL timestamps and durations with the CEL library itself.
struct Helpers {
    timestamp: Option<Program>,
    duration: Option<Program>,
}

// ---------------------------------------------------------------------------------------------
// Compilation
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

#[derive(Clone)]
struct Scope {
    level: Level,
    /// Inside allOf/anyOf/oneOf/not: value validation only.
    nested: bool,
    /// The path of the first ancestor that cannot correlate old and new values.
    uncorrelatable: Option<String>,
    /// Why a default is not allowed here.
    no_defaults: Option<String>,
    inside_meta: bool,
    /// The node is the root of a resource (the root or an embedded resource).
    resource_root: bool,
    /// The node is a branch of the int-or-string pattern `anyOf: [{type: integer}, {type: string}]`.
    allow_type: bool,
}

impl Scope {
    /// The scope of a child node (a property, the items, additionalProperties or a branch).
    fn sub(&self) -> Scope {
        Scope {
            allow_type: false,
            ..self.clone()
        }
    }
}

fn is_int_or_string_pattern(v: Option<&Value>) -> bool {
    v == Some(&serde_json::json!([{"type": "integer"}, {"type": "string"}]))
}

struct Compiler<'a> {
    env: &'a Env,
    errors: Vec<String>,
    skipped: Vec<String>,
}

const TYPES: [&str; 6] = ["array", "boolean", "integer", "number", "object", "string"];

/// Formats validated by kube-apiserver for string schemas (normalized without dashes).
const STRING_FORMATS: [&str; 27] = [
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
    "quantity",
    "k8sshortname",
    "k8slongname",
];

impl Compiler<'_> {
    fn err(&mut self, path: &str, reason: FieldErrorReason, bad: Option<String>, detail: &str) {
        self.errors
            .push(format!("{path}: {}", error_body(reason, bad, detail)));
    }

    fn get_str<'v>(&mut self, m: &'v Map<String, Value>, k: &str, path: &str) -> Option<&'v str> {
        match m.get(k)? {
            Value::String(s) => Some(s),
            other => {
                self.type_err(path, k, other, "a string");
                None
            }
        }
    }

    fn get_bool(&mut self, m: &Map<String, Value>, k: &str, path: &str) -> Option<bool> {
        match m.get(k)? {
            Value::Bool(b) => Some(*b),
            other => {
                self.type_err(path, k, other, "a boolean");
                None
            }
        }
    }

    fn get_f64(&mut self, m: &Map<String, Value>, k: &str, path: &str) -> Option<f64> {
        match m.get(k)? {
            Value::Number(n) => n.as_f64(),
            other => {
                self.type_err(path, k, other, "a number");
                None
            }
        }
    }

    fn get_u64(&mut self, m: &Map<String, Value>, k: &str, path: &str) -> Option<u64> {
        match m.get(k)? {
            Value::Number(n) if n.as_u64().is_some() => n.as_u64(),
            other => {
                self.type_err(path, k, other, "a non-negative integer");
                None
            }
        }
    }

    fn get_strings(&mut self, m: &Map<String, Value>, k: &str, path: &str) -> Vec<String> {
        match m.get(k) {
            None => Vec::new(),
            Some(Value::Array(a)) if a.iter().all(Value::is_string) => a
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            Some(other) => {
                self.type_err(path, k, other, "a list of strings");
                Vec::new()
            }
        }
    }

    fn type_err(&mut self, path: &str, k: &str, v: &Value, what: &str) {
        self.err(
            &child(path, k),
            FieldErrorReason::Invalid,
            Some(bad_json(v)),
            &format!("must be {what}"),
        );
    }

    fn nested_list(
        &mut self,
        m: &Map<String, Value>,
        k: &str,
        path: &str,
        scope: &Scope,
    ) -> Vec<Node> {
        match m.get(k) {
            None => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let mut sc = scope.sub();
                    sc.nested = true;
                    sc.allow_type = k == "anyOf" && is_int_or_string_pattern(m.get(k));
                    self.node(s, &index(&child(path, k), i), &sc)
                })
                .collect(),
            Some(other) => {
                self.type_err(path, k, other, "a list of schemas");
                Vec::new()
            }
        }
    }

    /// Parses and checks one schema node.
    fn node(&mut self, schema: &Value, path: &str, scope: &Scope) -> Node {
        let Value::Object(m) = schema else {
            self.err(
                path,
                FieldErrorReason::Invalid,
                Some(bad_json(schema)),
                "must be a schema object",
            );
            return Node {
                preserve_unknown: true,
                ..Node::default()
            };
        };
        let mut n = Node::default();
        let forbid = |c: &mut Self, k: &str, detail: &str| {
            if m.contains_key(k) {
                c.err(&child(path, k), FieldErrorReason::Forbidden, None, detail);
            }
        };
        forbid(self, "id", "id is not supported");
        forbid(self, "additionalItems", "additionalItems is not supported");
        forbid(
            self,
            "patternProperties",
            "patternProperties is not supported",
        );
        forbid(self, "definitions", "definitions is not supported");
        forbid(self, "dependencies", "dependencies is not supported");
        forbid(self, "$ref", "$ref is not supported");

        if let Some(t) = self.get_str(m, "type", path) {
            if t == "null" {
                self.err(
                    &child(path, "type"),
                    FieldErrorReason::Forbidden,
                    None,
                    "type cannot be set to null, use nullable as an alternative",
                );
            } else if !TYPES.contains(&t) {
                let supported: Vec<String> = TYPES.iter().map(|s| go_quote(s)).collect();
                self.err(
                    &child(path, "type"),
                    FieldErrorReason::NotSupported,
                    Some(go_quote(t)),
                    &format!("supported values: {}", supported.join(", ")),
                );
            }
            // An unsupported type is reported above; keeping it avoids a second "empty type" error.
            if !t.is_empty() {
                n.ty = Some(t.to_string());
            }
        }
        n.nullable = self.get_bool(m, "nullable", path).unwrap_or(false);
        if let Some(f) = self.get_str(m, "format", path) {
            let supported = match n.ty.as_deref() {
                None | Some("string") => STRING_FORMATS.contains(&f.replace('-', "").as_str()),
                _ => false,
            };
            if supported {
                n.format = Some((f.replace('-', ""), f.to_string()));
            }
            if n.ty.as_deref() == Some("integer") && !f.is_empty() {
                n.integer_format = Some(f.to_string());
            }
        }
        n.maximum = self.get_f64(m, "maximum", path);
        n.exclusive_maximum = self.get_bool(m, "exclusiveMaximum", path).unwrap_or(false);
        n.minimum = self.get_f64(m, "minimum", path);
        n.exclusive_minimum = self.get_bool(m, "exclusiveMinimum", path).unwrap_or(false);
        n.multiple_of = self.get_f64(m, "multipleOf", path);
        if let Some(f) = n.multiple_of
            && f <= 0.0
        {
            self.err(
                &child(path, "multipleOf"),
                FieldErrorReason::Invalid,
                Some(go_float(f)),
                "must be greater than zero",
            );
            n.multiple_of = None;
        }
        n.max_length = self.get_u64(m, "maxLength", path);
        n.min_length = self.get_u64(m, "minLength", path);
        n.max_items = self.get_u64(m, "maxItems", path);
        n.min_items = self.get_u64(m, "minItems", path);
        n.max_properties = self.get_u64(m, "maxProperties", path);
        n.min_properties = self.get_u64(m, "minProperties", path);
        if let Some(p) = self.get_str(m, "pattern", path) {
            match Regex::new(p) {
                Ok(re) => n.pattern = Some((p.to_string(), re)),
                Err(e) => self.err(
                    &child(path, "pattern"),
                    FieldErrorReason::Invalid,
                    Some(go_quote(p)),
                    &format!("must be a valid regular expression, but isn't: {e}"),
                ),
            }
        }
        if self.get_bool(m, "uniqueItems", path) == Some(true) {
            self.err(
                &child(path, "uniqueItems"),
                FieldErrorReason::Forbidden,
                None,
                "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
            );
        }
        match m.get("enum") {
            None => {}
            Some(Value::Array(a)) => n.enumeration = Some(a.clone()),
            Some(other) => self.type_err(path, "enum", other, "a list"),
        }
        n.required = self.get_strings(m, "required", path);
        if let Some(p) = self.get_bool(m, "x-kubernetes-preserve-unknown-fields", path) {
            if !p && !scope.nested {
                self.err(
                    &child(path, "x-kubernetes-preserve-unknown-fields"),
                    FieldErrorReason::Invalid,
                    Some("false".to_string()),
                    "must be true or undefined",
                );
            }
            n.preserve_unknown = p;
        }
        n.int_or_string = self
            .get_bool(m, "x-kubernetes-int-or-string", path)
            .unwrap_or(false);
        n.embedded = self
            .get_bool(m, "x-kubernetes-embedded-resource", path)
            .unwrap_or(false);
        if let Some(lt) = self.get_str(m, "x-kubernetes-list-type", path) {
            n.list_type = Some(lt.to_string());
        }
        n.list_map_keys = self.get_strings(m, "x-kubernetes-list-map-keys", path);
        let map_type = self
            .get_str(m, "x-kubernetes-map-type", path)
            .map(str::to_string);
        n.default = m.get("default").cloned();

        let resource_root = scope.resource_root || n.embedded;

        // properties
        match m.get("properties") {
            None => {}
            Some(Value::Object(props)) => {
                for (name, p) in props {
                    let mut sc = scope.sub();
                    sc.level = Level::Field;
                    sc.resource_root = false;
                    if !scope.nested && resource_root && is_meta_field(name) {
                        sc.inside_meta = true;
                        if scope.level == Level::Root {
                            sc.no_defaults = Some(format!("in top-level {name}"));
                        }
                    }
                    let pp = key(&child(path, "properties"), name);
                    let node = self.node(p, &pp, &sc);
                    n.properties.push((name.clone(), node));
                }
            }
            Some(other) => self.type_err(path, "properties", other, "an object"),
        }
        // additionalProperties
        match m.get("additionalProperties") {
            None => {}
            Some(Value::Bool(b)) => n.additional = Additional::Bool(*b),
            Some(s @ Value::Object(_)) => {
                let mut sc = scope.sub();
                sc.level = Level::Field;
                sc.resource_root = false;
                if sc.inside_meta {
                    sc.no_defaults =
                        Some("inside additionalProperties applying to object metadata".into());
                }
                let node = self.node(s, &child(path, "additionalProperties"), &sc);
                n.additional = Additional::Schema(Box::new(node));
            }
            Some(other) => {
                self.type_err(path, "additionalProperties", other, "a schema or a boolean")
            }
        }
        // items
        match m.get("items") {
            None => {}
            Some(Value::Array(_)) => self.err(
                &child(path, "items"),
                FieldErrorReason::Forbidden,
                None,
                "items must be a schema object and not an array",
            ),
            Some(s) => {
                let mut sc = scope.sub();
                sc.level = Level::Item;
                sc.resource_root = false;
                if n.list_type.as_deref() != Some("map") && sc.uncorrelatable.is_none() {
                    sc.uncorrelatable = Some(path.to_string());
                }
                let node = self.node(s, &child(path, "items"), &sc);
                n.items = Some(Box::new(node));
            }
        }
        // value validations
        n.all_of = self.nested_list(m, "allOf", path, scope);
        n.any_of = self.nested_list(m, "anyOf", path, scope);
        n.one_of = self.nested_list(m, "oneOf", path, scope);
        if let Some(s) = m.get("not") {
            let mut sc = scope.sub();
            sc.nested = true;
            n.not = Some(Box::new(self.node(s, &child(path, "not"), &sc)));
        }

        if scope.nested {
            self.check_nested(m, &n, path, scope);
        } else {
            self.check_structural(m, &n, path, scope, map_type.as_deref());
        }

        // x-kubernetes-validations
        match m.get("x-kubernetes-validations") {
            None => {}
            Some(Value::Array(rules)) if !scope.nested => {
                let mut sc = scope.sub();
                sc.resource_root = resource_root;
                for (i, r) in rules.iter().enumerate() {
                    let rp = index(&child(path, "x-kubernetes-validations"), i);
                    if let Some(rule) = self.rule(r, &rp, &n, &sc) {
                        n.rules.push(rule);
                    }
                }
            }
            Some(Value::Array(_)) => {}
            Some(other) => self.type_err(path, "x-kubernetes-validations", other, "a list"),
        }
        n.has_rules = !n.rules.is_empty()
            || n.properties.iter().any(|(_, p)| p.has_rules)
            || n.additional_schema().is_some_and(|a| a.has_rules)
            || n.items.as_ref().is_some_and(|i| i.has_rules);
        n
    }

    /// `validateNestedValueValidation`: what allOf/anyOf/oneOf/not may not specify.
    fn check_nested(&mut self, m: &Map<String, Value>, n: &Node, path: &str, scope: &Scope) {
        let checks: [(&str, bool, &str); 12] = [
            ("type", n.ty.is_some(), "must be empty to be structural"),
            (
                "additionalProperties",
                m.contains_key("additionalProperties"),
                "must be undefined to be structural",
            ),
            (
                "default",
                n.default.is_some(),
                "must be undefined to be structural",
            ),
            (
                "title",
                m.contains_key("title"),
                "must be empty to be structural",
            ),
            (
                "description",
                m.contains_key("description"),
                "must be empty to be structural",
            ),
            ("nullable", n.nullable, "must be false to be structural"),
            (
                "x-kubernetes-preserve-unknown-fields",
                n.preserve_unknown,
                "must be false to be structural",
            ),
            (
                "x-kubernetes-embedded-resource",
                n.embedded,
                "must be false to be structural",
            ),
            (
                "x-kubernetes-int-or-string",
                n.int_or_string,
                "must be false to be structural",
            ),
            (
                "x-kubernetes-list-map-keys",
                !n.list_map_keys.is_empty(),
                "must be empty to be structural",
            ),
            (
                "x-kubernetes-list-type",
                n.list_type.is_some(),
                "must be undefined to be structural",
            ),
            (
                "x-kubernetes-validations",
                m.contains_key("x-kubernetes-validations"),
                "must be empty to be structural",
            ),
        ];
        for (k, bad, detail) in checks {
            // The int-or-string pattern `anyOf: [{type: integer}, {type: string}]` may specify types.
            if k == "type" && scope.allow_type {
                continue;
            }
            if bad {
                self.err(&child(path, k), FieldErrorReason::Forbidden, None, detail);
            }
        }
        if m.contains_key("x-kubernetes-map-type") {
            self.err(
                &child(path, "x-kubernetes-map-type"),
                FieldErrorReason::Forbidden,
                None,
                "must be undefined to be structural",
            );
        }
        if n.property("metadata").is_some() {
            self.err(
                &key(&child(path, "properties"), "metadata"),
                FieldErrorReason::Forbidden,
                None,
                "must not be specified in a nested context",
            );
        }
    }

    /// The structural invariants of a node of the structural spine, and the CRD API checks.
    fn check_structural(
        &mut self,
        m: &Map<String, Value>,
        n: &Node,
        path: &str,
        scope: &Scope,
        map_type: Option<&str>,
    ) {
        let type_path = child(path, "type");
        let ty = n.ty.as_deref();
        if scope.level == Level::Root && n.nullable {
            self.err(
                &child(path, "nullable"),
                FieldErrorReason::Forbidden,
                None,
                "nullable cannot be true at the root",
            );
        }
        if ty == Some("array") && n.items.is_none() {
            self.err(
                &child(path, "items"),
                FieldErrorReason::Required,
                None,
                "must be specified",
            );
        }
        if !matches!(n.additional, Additional::Unset) {
            if scope.level == Level::Root {
                self.err(
                    &child(path, "additionalProperties"),
                    FieldErrorReason::Forbidden,
                    None,
                    "must not be used at the root",
                );
            }
            if !n.properties.is_empty() && !matches!(n.additional, Additional::Bool(true)) {
                self.err(
                    &child(path, "additionalProperties"),
                    FieldErrorReason::Forbidden,
                    None,
                    "additionalProperties and properties are mutual exclusive",
                );
            }
            if n.embedded {
                self.err(
                    &child(path, "additionalProperties"),
                    FieldErrorReason::Forbidden,
                    None,
                    "must not be used if x-kubernetes-embedded-resource is set",
                );
            }
        }
        if n.int_or_string && n.preserve_unknown {
            self.err(
                &child(path, "x-kubernetes-preserve-unknown-fields"),
                FieldErrorReason::Invalid,
                Some("true".into()),
                "must be false if x-kubernetes-int-or-string is true",
            );
        }
        if n.int_or_string && n.embedded {
            self.err(
                &child(path, "x-kubernetes-embedded-resource"),
                FieldErrorReason::Invalid,
                Some("true".into()),
                "must be false if x-kubernetes-int-or-string is true",
            );
        }
        if n.embedded && ty != Some("object") {
            match ty {
                None => self.err(
                    &type_path,
                    FieldErrorReason::Required,
                    None,
                    "must be object if x-kubernetes-embedded-resource is true",
                ),
                Some(t) => self.err(
                    &type_path,
                    FieldErrorReason::Invalid,
                    Some(go_quote(t)),
                    "must be object if x-kubernetes-embedded-resource is true",
                ),
            }
        } else if ty.is_none() && !n.int_or_string && !n.preserve_unknown {
            let detail = match scope.level {
                Level::Root => "must not be empty at the root",
                Level::Item => "must not be empty for specified array items",
                Level::Field => "must not be empty for specified object fields",
            };
            self.err(&type_path, FieldErrorReason::Required, None, detail);
        }
        if scope.level == Level::Root
            && let Some(t) = ty
            && t != "object"
        {
            self.err(
                &type_path,
                FieldErrorReason::Invalid,
                Some(go_quote(t)),
                "must be object at the root",
            );
        }
        if n.embedded && !n.preserve_unknown && n.properties.is_empty() {
            self.err(
                &child(path, "properties"),
                FieldErrorReason::Required,
                None,
                "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
            );
        }
        if scope.inside_meta && n.embedded {
            self.err(
                &child(path, "x-kubernetes-embedded-resource"),
                FieldErrorReason::Forbidden,
                None,
                "must not be used inside of resource meta",
            );
        }
        if n.default.is_some()
            && let Some(reason) = &scope.no_defaults
        {
            self.err(
                &child(path, "default"),
                FieldErrorReason::Forbidden,
                None,
                &format!("must not be set {reason}"),
            );
        }
        // metadata, kind and apiVersion at a resource root
        let check_meta = scope.level == Level::Root || n.embedded;
        if check_meta {
            for f in ["kind", "apiVersion"] {
                if let Some(p) = n.property(f)
                    && p.ty.as_deref() != Some("string")
                {
                    self.err(
                        &child(&key(&child(path, "properties"), f), "type"),
                        FieldErrorReason::Invalid,
                        Some(go_quote(p.type_name())),
                        "must be string",
                    );
                }
            }
        }
        if let Some(meta) = n.property("metadata") {
            let mp = key(&child(path, "properties"), "metadata");
            if check_meta && meta.ty.as_deref() != Some("object") {
                self.err(
                    &child(&mp, "type"),
                    FieldErrorReason::Invalid,
                    Some(go_quote(meta.type_name())),
                    "must be object",
                );
            }
            if scope.level == Level::Root {
                let only_names = meta
                    .properties
                    .iter()
                    .all(|(k, _)| k == "name" || k == "generateName");
                let raw = m
                    .get("properties")
                    .and_then(|p| p.get("metadata"))
                    .and_then(Value::as_object);
                let extra_keys = raw.is_some_and(|r| {
                    r.keys().any(|k| {
                        !matches!(
                            k.as_str(),
                            "type" | "properties" | "description" | "default"
                        )
                    })
                });
                if !only_names || extra_keys {
                    self.err(
                        &mp,
                        FieldErrorReason::Forbidden,
                        None,
                        "must not specify anything other than name and generateName, but metadata is implicitly specified",
                    );
                }
            }
        }
        // map and list types
        if let Some(mt) = map_type {
            if ty != Some("object") {
                match ty {
                    None => self.err(
                        &type_path,
                        FieldErrorReason::Required,
                        None,
                        "must be object if x-kubernetes-map-type is specified",
                    ),
                    Some(t) => self.err(
                        &type_path,
                        FieldErrorReason::Invalid,
                        Some(go_quote(t)),
                        "must be object if x-kubernetes-map-type is specified",
                    ),
                }
            }
            if mt != "atomic" && mt != "granular" {
                self.err(
                    &child(path, "x-kubernetes-map-type"),
                    FieldErrorReason::NotSupported,
                    Some(go_quote(mt)),
                    "supported values: \"atomic\", \"granular\"",
                );
            }
        }
        let lt_path = child(path, "x-kubernetes-list-type");
        if let Some(lt) = n.list_type.as_deref() {
            if ty != Some("array") {
                match ty {
                    None => self.err(
                        &type_path,
                        FieldErrorReason::Required,
                        None,
                        "must be array if x-kubernetes-list-type is specified",
                    ),
                    Some(t) => self.err(
                        &type_path,
                        FieldErrorReason::Invalid,
                        Some(go_quote(t)),
                        "must be array if x-kubernetes-list-type is specified",
                    ),
                }
            }
            if !matches!(lt, "atomic" | "set" | "map") {
                self.err(
                    &lt_path,
                    FieldErrorReason::NotSupported,
                    Some(go_quote(lt)),
                    "supported values: \"atomic\", \"set\", \"map\"",
                );
            }
        }
        if !n.list_map_keys.is_empty() {
            match n.list_type.as_deref() {
                None => self.err(
                    &lt_path,
                    FieldErrorReason::Required,
                    None,
                    "must be map if x-kubernetes-list-map-keys is non-empty",
                ),
                Some("map") => {}
                Some(t) => self.err(
                    &lt_path,
                    FieldErrorReason::Invalid,
                    Some(go_quote(t)),
                    "must be map if x-kubernetes-list-map-keys is non-empty",
                ),
            }
        }
        if let (Some(lt), Some(items)) = (n.list_type.as_deref(), n.items.as_deref())
            && (lt == "set" || lt == "map")
            && items.nullable
        {
            self.err(
                &child(&child(path, "items"), "nullable"),
                FieldErrorReason::Forbidden,
                None,
                &format!("cannot be nullable when x-kubernetes-list-type is {lt}"),
            );
        }
        if n.list_type.as_deref() == Some("map") {
            let keys_path = child(path, "x-kubernetes-list-map-keys");
            if n.list_map_keys.is_empty() {
                self.err(
                    &keys_path,
                    FieldErrorReason::Required,
                    None,
                    "must not be empty if x-kubernetes-list-type is map",
                );
            }
            match n.items.as_deref() {
                None => self.err(
                    &child(path, "items"),
                    FieldErrorReason::Required,
                    None,
                    "must have a schema if x-kubernetes-list-type is map",
                ),
                Some(items) if items.ty.as_deref() != Some("object") => self.err(
                    &child(&child(path, "items"), "type"),
                    FieldErrorReason::Invalid,
                    Some(go_quote(items.type_name())),
                    "must be object if parent array's x-kubernetes-list-type is map",
                ),
                Some(items) => {
                    let keys_bad = Some(format!(
                        "[]string{{{}}}",
                        n.list_map_keys
                            .iter()
                            .map(|k| go_quote(k))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                    for (i, k) in n.list_map_keys.iter().enumerate() {
                        let prop_path = key(&child(&child(path, "items"), "properties"), k);
                        match items.property(k) {
                            Some(p) => {
                                if matches!(p.ty.as_deref(), Some("array" | "object")) {
                                    self.err(
                                        &child(&prop_path, "type"),
                                        FieldErrorReason::Invalid,
                                        Some(go_quote("object")),
                                        "must be a scalar type if parent array's x-kubernetes-list-type is map",
                                    );
                                }
                                if !items.required.contains(k) && p.default.is_none() {
                                    self.err(
                                        &child(&prop_path, "default"),
                                        FieldErrorReason::Required,
                                        None,
                                        "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
                                    );
                                }
                                if p.nullable {
                                    self.err(
                                        &child(&prop_path, "nullable"),
                                        FieldErrorReason::Forbidden,
                                        None,
                                        "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                                    );
                                }
                            }
                            None => self.err(
                                &keys_path,
                                FieldErrorReason::Invalid,
                                keys_bad.clone(),
                                "entries must all be names of item properties",
                            ),
                        }
                        if n.list_map_keys[..i].contains(k) {
                            self.err(
                                &keys_path,
                                FieldErrorReason::Invalid,
                                keys_bad.clone(),
                                "must not contain duplicate entries",
                            );
                        }
                    }
                }
            }
        }
    }

    /// Compiles one `x-kubernetes-validations` entry.
    fn rule(&mut self, r: &Value, path: &str, n: &Node, scope: &Scope) -> Option<Rule> {
        let Value::Object(m) = r else {
            self.err(
                path,
                FieldErrorReason::Invalid,
                Some(bad_json(r)),
                "must be a validation rule object",
            );
            return None;
        };
        let before = self.errors.len();
        let src = self.get_str(m, "rule", path).unwrap_or("").to_string();
        let message = self.get_str(m, "message", path).map(str::to_string);
        let message_expression = self
            .get_str(m, "messageExpression", path)
            .map(str::to_string);
        let reason = self.get_str(m, "reason", path).map(str::to_string);
        let field_path = self.get_str(m, "fieldPath", path).map(str::to_string);
        let optional_old_self = self.get_bool(m, "optionalOldSelf", path);

        let trimmed_msg = message.as_deref().map(str::trim);
        if src.trim().is_empty() {
            self.err(
                &child(path, "rule"),
                FieldErrorReason::Required,
                None,
                "rule is not specified",
            );
        } else if let (Some(raw), Some("")) = (message.as_deref(), trimmed_msg) {
            self.err(
                &child(path, "message"),
                FieldErrorReason::Invalid,
                Some(go_quote(raw)),
                "message must be non-empty if specified",
            );
        } else if let Some(t) = trimmed_msg.filter(|t| t.contains(['\n', '\r'])) {
            self.err(
                &child(path, "message"),
                FieldErrorReason::Invalid,
                Some(go_quote(t)),
                "message must not contain line breaks",
            );
        } else if src.trim().contains(['\n', '\r']) && trimmed_msg.is_none_or(str::is_empty) {
            self.err(
                &child(path, "message"),
                FieldErrorReason::Required,
                None,
                "message must be specified if rule contains line breaks",
            );
        }
        if message_expression
            .as_deref()
            .is_some_and(|e| e.trim().is_empty())
        {
            self.err(
                &child(path, "messageExpression"),
                FieldErrorReason::Required,
                None,
                "messageExpression must be non-empty if specified",
            );
        }
        let reason = match reason.as_deref() {
            None => FieldErrorReason::Invalid,
            Some(r) => match FieldErrorReason::from_cause(r) {
                Some(reason) => reason,
                None => {
                    self.err(
                        &child(path, "reason"),
                        FieldErrorReason::NotSupported,
                        Some(go_quote(r)),
                        "supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\"",
                    );
                    FieldErrorReason::Invalid
                }
            },
        };
        let mut normalized_field_path = None;
        if let Some(fp) = field_path.as_deref() {
            let fpp = child(path, "fieldPath");
            if fp.trim().is_empty() {
                self.err(
                    &fpp,
                    FieldErrorReason::Invalid,
                    Some(go_quote(fp)),
                    "fieldPath must be non-empty if specified",
                );
            } else if fp.contains(['\n', '\r']) {
                self.err(
                    &fpp,
                    FieldErrorReason::Invalid,
                    Some(go_quote(fp)),
                    "fieldPath must not contain line breaks",
                );
            } else {
                match valid_field_path(fp, n) {
                    Some(p) => normalized_field_path = Some(p),
                    None => self.err(
                        &fpp,
                        FieldErrorReason::Invalid,
                        Some(go_quote(fp)),
                        "fieldPath must be a valid path",
                    ),
                }
            }
        }
        if self.errors.len() > before {
            return None;
        }

        let rule_path = child(path, "rule");
        let program = match expr::compile(self.env, &src) {
            Ok(p) => p,
            Err(e) => {
                self.err(
                    &rule_path,
                    FieldErrorReason::Invalid,
                    Some(go_quote(&src)),
                    &format!("compilation failed: {e}"),
                );
                return None;
            }
        };
        let refs = expr::references(&program, &src, SELF_VARIABLES);
        let uses_old_self = refs.used.contains("oldSelf");
        if let Some(e) = refs.undeclared {
            self.err(
                &rule_path,
                FieldErrorReason::Invalid,
                Some(go_quote(&src)),
                &format!("compilation failed: {e}"),
            );
            return None;
        }
        if uses_old_self {
            if let Some(p) = &scope.uncorrelatable {
                self.err(
                    &rule_path,
                    FieldErrorReason::Invalid,
                    Some(go_quote(&src)),
                    &format!(
                        "oldSelf cannot be used on the uncorrelatable portion of the schema within {p}"
                    ),
                );
                return None;
            }
        } else if let Some(o) = optional_old_self {
            self.err(
                &child(path, "optionalOldSelf"),
                FieldErrorReason::Invalid,
                Some(o.to_string()),
                "may not be set if oldSelf is not used in rule",
            );
            return None;
        }
        let mut message_program = None;
        if let Some(expr) = message_expression.as_deref() {
            let mp = child(path, "messageExpression");
            let compiled = expr::compile(self.env, expr).map_err(|e| e.to_string());
            let compiled = compiled.and_then(|p| {
                let r = expr::references(&p, expr, SELF_VARIABLES);
                match r.undeclared {
                    Some(e) => Err(e),
                    None if r.unsupported.is_some() => Ok(None),
                    None => Ok(Some(p)),
                }
            });
            match compiled {
                Ok(p) => message_program = p,
                Err(e) => {
                    self.err(
                        &mp,
                        FieldErrorReason::Invalid,
                        Some(go_quote(expr)),
                        &format!("messageExpression compilation failed: {e}"),
                    );
                    return None;
                }
            }
        }
        if let Some(f) = &refs.unsupported {
            self.skipped.push(format!(
                "{rule_path}: rule {} skipped: the Kubernetes CEL function {f:?} is not implemented",
                go_quote(&src)
            ));
        }
        Some(Rule {
            rule: src,
            program,
            message: trimmed_msg.map(str::to_string),
            message_expression: message_program,
            reason,
            field_path: normalized_field_path,
            optional_old_self: optional_old_self.unwrap_or(false),
            uses_old_self,
            unsupported: refs.unsupported,
        })
    }
}

fn is_meta_field(name: &str) -> bool {
    matches!(name, "apiVersion" | "kind" | "metadata")
}

/// `ValidFieldPath`: a JSON path of field (`.a`) and map key (`['a']`) accessors valid for the
/// schema, normalized as a field path (`a.b`, `a[b]`).
fn valid_field_path(fp: &str, schema: &Node) -> Option<String> {
    let mut out = String::new();
    let mut node = schema;
    let chars: Vec<char> = fp.chars().collect();
    let mut i = 0;
    let step = |name: String, out: &mut String, node: &mut &Node| -> Option<()> {
        if !node.properties.is_empty() {
            *node = node.property(&name)?;
            *out = child(out, &name);
        } else if let Some(a) = node.additional_schema() {
            *node = a;
            *out = key(out, &name);
        } else {
            return None;
        }
        Some(())
    };
    while i < chars.len() {
        match chars[i] {
            '.' => {
                let start = i + 1;
                let mut j = start;
                while j < chars.len() && chars[j] != '.' && chars[j] != '[' {
                    j += 1;
                }
                if j == start {
                    return None;
                }
                step(chars[start..j].iter().collect(), &mut out, &mut node)?;
                i = j;
            }
            '[' => {
                if chars.get(i + 1) != Some(&'\'') {
                    return None;
                }
                let mut j = i + 2;
                let mut name = String::new();
                loop {
                    match chars.get(j)? {
                        '\\' => {
                            let c = chars.get(j + 1)?;
                            name.push(match c {
                                'n' => '\n',
                                't' => '\t',
                                'r' => '\r',
                                '\'' => '\'',
                                '\\' => '\\',
                                _ => return None,
                            });
                            j += 2;
                        }
                        '\'' => break,
                        c => {
                            name.push(*c);
                            j += 1;
                        }
                    }
                }
                if chars.get(j + 1) != Some(&']') {
                    return None;
                }
                step(name, &mut out, &mut node)?;
                i = j + 2;
            }
            _ => return None,
        }
    }
    (!out.is_empty()).then_some(out)
}

// ---------------------------------------------------------------------------------------------
// CEL: values
// ---------------------------------------------------------------------------------------------

const CEL_RESERVED: [&str; 21] = [
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// The CEL name of a property: Kubernetes' `Escape`, or `None` if it cannot be accessed.
fn escape_property(name: &str) -> Option<String> {
    let first = name.chars().next()?;
    if first.is_ascii_digit() {
        return None;
    }
    if CEL_RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut out = String::with_capacity(name.len());
    let chars: Vec<char> = name.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '_' if chars.get(i + 1) == Some(&'_') => {
                out.push_str("__underscores__");
                i += 2;
                continue;
            }
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
        i += 1;
    }
    Some(out)
}

/// Base64 (standard alphabet, padded) as Go's `base64.StdEncoding.DecodeString`.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let bytes = s.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        })
    };
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    let chunks = bytes.chunks(4).collect::<Vec<_>>();
    for (ci, chunk) in chunks.iter().enumerate() {
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && ci + 1 != chunks.len()) {
            return None;
        }
        let mut n: u32 = 0;
        for &c in &chunk[..4 - pad] {
            n = (n << 6) | val(c)?;
        }
        n <<= 6 * pad as u32;
        let b = n.to_be_bytes();
        out.extend_from_slice(&b[1..4 - pad]);
    }
    Some(out)
}

impl CompiledSchema {
    /// Compiles a JSONSchemaProps given as JSON (the CRD's spec.versions[].schema.openAPIV3Schema).
    /// Errors (a list of messages naming the path) when the schema is not structural enough to use or a CEL rule does not compile: the server then rejects the CRD with 422.
    ///
    /// The paths start at `openAPIV3Schema`; see [`CompiledSchema::compile_at`] to name the
    /// version, e.g. `spec.versions[0].schema.openAPIV3Schema`.
    pub fn compile(schema: &Value) -> Result<Self, Vec<String>> {
        Self::compile_at(schema, "openAPIV3Schema")
    }

    /// [`CompiledSchema::compile`] with the error paths starting at `path`.
    pub fn compile_at(schema: &Value, path: &str) -> Result<Self, Vec<String>> {
        let env = expr::environment().map_err(|e| vec![format!("{path}: Internal error: {e}")])?;
        let mut c = Compiler {
            env: &env,
            errors: Vec::new(),
            skipped: Vec::new(),
        };
        let scope = Scope {
            level: Level::Root,
            nested: false,
            uncorrelatable: None,
            no_defaults: None,
            inside_meta: false,
            resource_root: true,
            allow_type: false,
        };
        let root = c.node(schema, path, &scope);
        let mut errors = c.errors;
        let skipped = c.skipped;
        let helpers = Helpers {
            timestamp: env.compile("timestamp(s)").ok(),
            duration: env.compile("duration(s)").ok(),
        };
        let compiled = CompiledSchema {
            root,
            env: Arc::new(env),
            helpers,
            skipped,
        };
        if errors.is_empty() {
            Self::check_defaults(&compiled.root, path, &mut errors);
        }
        if errors.is_empty() {
            Ok(compiled)
        } else {
            Err(errors)
        }
    }

    /// The rules that are compiled but never evaluated because they call a Kubernetes CEL
    /// function this module does not implement, one message each naming the rule's path.
    pub fn skipped_rules(&self) -> &[String] {
        &self.skipped
    }

    /// `ValidateDefaults`: every default must validate against its schema and be pruned.
    fn check_defaults(node: &Node, spath: &str, errors: &mut Vec<String>) {
        if let Some(d) = &node.default {
            let dp = child(spath, "default");
            let mut pruned = d.clone();
            prune_value(&mut pruned, Some(node), false, "", &mut Vec::new());
            if &pruned != d {
                errors.push(format!(
                    "{dp}: {}",
                    error_body(
                        FieldErrorReason::Invalid,
                        Some(bad_json(d)),
                        "must not have unknown fields"
                    )
                ));
            }
            // As `ValidateCustomResource(fldPath.Child("default"), ...)`: the default is
            // validated as a whole object, its error paths appended to the schema path.
            let mut errs = Vec::new();
            openapi_validate(d, node, "", false, &mut errs);
            embedded_validate(d, node, "", false, &mut errs);
            for e in errs {
                let field = if e.field == "<nil>" {
                    dp.clone()
                } else {
                    child(&dp, &e.field)
                };
                errors.push(format!("{field}: {}", e.message));
            }
        }
        for (k, p) in &node.properties {
            Self::check_defaults(p, &key(&child(spath, "properties"), k), errors);
        }
        if let Some(a) = node.additional_schema() {
            Self::check_defaults(a, &child(spath, "additionalProperties"), errors);
        }
        if let Some(i) = &node.items {
            Self::check_defaults(i, &child(spath, "items"), errors);
        }
    }

    /// Removes fields the schema does not declare (unless x-kubernetes-preserve-unknown-fields), like the real server; returns the pruned paths (e.g. "spec.foo") so the caller can reject them under fieldValidation=Strict. apiVersion, kind and metadata are never pruned at the root (metadata is validated by the server itself; only name/generateName checks are the caller's).
    ///
    /// As the request decoder does right after pruning, it also drops `null` values of
    /// non-nullable fields that have no default (those are not reported as pruned).
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        let mut pruned = Vec::new();
        prune_value(obj, Some(&self.root), true, "", &mut pruned);
        prune_nulls(obj, Some(&self.root));
        pruned
    }

    /// Applies `default` values (structural defaulting, in the real order: defaults apply to absent fields, nested after parents).
    ///
    /// A `null` in a non-nullable field with a default is replaced by the default too.
    pub fn apply_defaults(&self, obj: &mut Value) {
        default_value(obj, &self.root);
    }

    /// Validates; `old` is the stored object on update (None on create), used by CEL transition rules (those referencing oldSelf, evaluated only when an old value exists at that path).
    ///
    /// Runs [`CompiledSchema::validate_schema`] and, unless it found a blocking error (required,
    /// type, enum, too long, too many), [`CompiledSchema::validate_rules`]; otherwise it adds
    /// the server's `some validation rules were not checked` error instead of the rules' errors.
    pub fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let mut errs = self.validate_schema(obj);
        if self.root.has_rules {
            if errs.iter().any(FieldError::is_blocking) {
                errs.push(FieldError::rules_not_checked());
            } else {
                errs.extend(self.validate_rules(obj, old));
            }
        }
        errs
    }

    /// The OpenAPI value validation (as kube-openapi's validator), the checks of embedded
    /// resources' `apiVersion` and `kind`, and the `x-kubernetes-list-type` set/map uniqueness.
    /// The root `metadata` is left to the caller.
    pub fn validate_schema(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        openapi_validate(obj, &self.root, "", true, &mut errs);
        embedded_validate(obj, &self.root, "", true, &mut errs);
        list_type_validate(obj, &self.root, "", &mut errs);
        errs
    }

    /// Evaluates the `x-kubernetes-validations` rules. A caller that merges its own errors (e.g.
    /// metadata) should skip this when [`FieldError::is_blocking`] holds for one of them, and
    /// report [`FieldError::rules_not_checked`] instead, as the real server does.
    pub fn validate_rules(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let mut errs = Vec::new();
        self.cel_validate(&self.root, obj, old, "", true, &mut errs);
        errs
    }

    // --- CEL evaluation ----------------------------------------------------------------------

    fn cel_validate(
        &self,
        node: &Node,
        v: &Value,
        old: Option<&Value>,
        path: &str,
        resource_root: bool,
        errs: &mut Vec<FieldError>,
    ) {
        if !node.has_rules || v.is_null() {
            return;
        }
        let old = old.filter(|o| !o.is_null());
        if !node.rules.is_empty() {
            self.eval_rules(node, v, old, path, resource_root || node.embedded, errs);
        }
        match v {
            Value::Object(m) => {
                let old_map = old.and_then(Value::as_object);
                for (k, val) in m {
                    let sub = if let Some(p) = node.property(k) {
                        (p, child(path, k))
                    } else if let Some(a) = node.additional_schema() {
                        (a, key(path, k))
                    } else {
                        continue;
                    };
                    let old_v = old_map.and_then(|o| o.get(k));
                    self.cel_validate(sub.0, val, old_v, &sub.1, false, errs);
                }
            }
            Value::Array(a) => {
                let Some(items) = node.items.as_deref() else {
                    return;
                };
                let old_items = old.and_then(Value::as_array);
                for (i, item) in a.iter().enumerate() {
                    let old_item = match (node.list_type.as_deref(), old_items) {
                        (Some("map"), Some(olds)) => olds
                            .iter()
                            .find(|o| same_map_keys(o, item, &node.list_map_keys)),
                        _ => None,
                    };
                    self.cel_validate(items, item, old_item, &index(path, i), false, errs);
                }
            }
            _ => {}
        }
    }

    fn eval_rules(
        &self,
        node: &Node,
        v: &Value,
        old: Option<&Value>,
        path: &str,
        resource_root: bool,
        errs: &mut Vec<FieldError>,
    ) {
        let self_val = self.to_cel(v, Some(node), resource_root);
        let old_val = old.map(|o| self.to_cel(o, Some(node), resource_root));
        let bad_type = Some(go_quote(node.type_name()));
        for rule in &node.rules {
            if rule.unsupported.is_some() {
                continue;
            }
            if rule.uses_old_self && old_val.is_none() && !rule.optional_old_self {
                continue;
            }
            let old_binding = if rule.optional_old_self {
                OldSelf::Optional(old_val.as_ref())
            } else {
                old_val.as_ref().map_or(OldSelf::Unbound, OldSelf::Value)
            };
            let result = self
                .context(&self_val, old_binding)
                .and_then(|ctx| expr::run(&rule.program, &ctx));
            let ok = match result {
                Ok(CelValue::Bool(b)) => b,
                Ok(other) => {
                    errs.push(FieldError::new(
                        path,
                        FieldErrorReason::Invalid,
                        bad_type.clone(),
                        &format!(
                            "rule evaluated to {} instead of bool evaluating rule: {}",
                            other.type_of(),
                            rule.error_string()
                        ),
                    ));
                    continue;
                }
                Err(e) => {
                    let (overload, msg) = expr::describe_error(&e);
                    let detail = if overload {
                        format!(
                            "'{msg}': call arguments did not match a supported operator, function or macro signature for rule: {}",
                            rule.error_string()
                        )
                    } else {
                        format!("{msg} evaluating rule: {}", rule.error_string())
                    };
                    errs.push(FieldError::new(
                        path,
                        FieldErrorReason::Invalid,
                        bad_type.clone(),
                        &detail,
                    ));
                    continue;
                }
            };
            if ok {
                continue;
            }
            let field = match &rule.field_path {
                Some(fp) => child(path, fp),
                None => path.to_string(),
            };
            // messageExpression sees oldSelf as a plain value, as in the real validator.
            let msg_binding = old_val.as_ref().map_or(OldSelf::Unbound, OldSelf::Value);
            let expressed = rule.message_expression.as_ref().and_then(|p| {
                match self
                    .context(&self_val, msg_binding)
                    .and_then(|c| expr::run(p, &c))
                {
                    Ok(CelValue::String(s)) => {
                        let t = s.trim();
                        (!t.is_empty() && !t.contains('\n') && t.len() <= 5120)
                            .then(|| t.to_string())
                    }
                    _ => None,
                }
            });
            let message_expressed = expressed.is_some();
            let detail = expressed.unwrap_or_else(|| match &rule.message {
                Some(m) => m.clone(),
                None => format!("failed rule: {}", rule.rule.trim()),
            });
            // kube-apiserver 1.36 (`fieldErrorForReason`): the value itself, left out when it
            // is a list or a map, or when a messageExpression gave the message (it embeds the
            // value if it wants to).
            let shown = match v {
                _ if message_expressed => None,
                Value::Object(_) | Value::Array(_) => None,
                scalar => Some(bad_json(scalar)),
            };
            let err = match rule.reason {
                FieldErrorReason::Duplicate => {
                    FieldError::new(&field, FieldErrorReason::Duplicate, Some(bad_json(v)), "")
                }
                FieldErrorReason::Forbidden => {
                    FieldError::new(&field, FieldErrorReason::Forbidden, None, &detail)
                }
                FieldErrorReason::Required => {
                    FieldError::new(&field, FieldErrorReason::Required, None, &detail)
                }
                _ => FieldError::new(&field, FieldErrorReason::Invalid, shown, &detail),
            };
            errs.push(err);
        }
    }

    /// A context binding `self` and, if bound, `oldSelf`.
    fn context(
        &self,
        self_val: &CelValue,
        old: OldSelf<'_>,
    ) -> Result<Context<'static, 'static>, ExecutionError> {
        let boxed = |v: &CelValue| -> Result<Box<dyn Val>, ExecutionError> { v.clone().try_into() };
        let mut ctx = Context::with_env(Arc::clone(&self.env));
        ctx.add_variable_as_val("self", boxed(self_val)?);
        match old {
            OldSelf::Unbound => {}
            OldSelf::Value(o) => ctx.add_variable_as_val("oldSelf", boxed(o)?),
            OldSelf::Optional(o) => {
                let opt = match o {
                    Some(o) => CelOptional::of(boxed(o)?),
                    None => CelOptional::none(),
                };
                ctx.add_variable_as_val("oldSelf", Box::new(opt));
            }
        }
        Ok(ctx)
    }

    /// Converts a JSON value to its CEL value as typed by the schema: `number` is a double,
    /// `integer` an int, `int-or-string` either, strings of format `byte` are bytes, `date` and
    /// `date-time` timestamps, `duration` durations; objects with properties only expose their
    /// declared (escaped) properties, plus `apiVersion`, `kind` and `metadata.name` /
    /// `metadata.generateName` at a resource root.
    fn to_cel(&self, v: &Value, node: Option<&Node>, resource_root: bool) -> CelValue {
        let Some(node) = node else {
            return expr::from_json(v);
        };
        let node = Some(node);
        match v {
            Value::Null => CelValue::Null,
            Value::Bool(b) => CelValue::Bool(*b),
            Value::Number(n) => {
                let ty = node.and_then(|n| n.ty.as_deref());
                let float = || CelValue::Float(n.as_f64().unwrap_or(f64::NAN));
                match ty {
                    Some("number") => float(),
                    _ => {
                        if let Some(i) = n.as_i64() {
                            CelValue::Int(i)
                        } else if let Some(u) = n.as_u64() {
                            CelValue::UInt(u)
                        } else {
                            match n.as_f64() {
                                Some(f)
                                    if ty == Some("integer")
                                        && f.fract() == 0.0
                                        && f.abs() < 9.2e18 =>
                                {
                                    CelValue::Int(f as i64)
                                }
                                _ => float(),
                            }
                        }
                    }
                }
            }
            Value::String(s) => {
                let format = node.and_then(|n| n.format.as_ref()).map(|f| f.0.as_str());
                let string = || CelValue::String(Arc::new(s.clone()));
                match format {
                    Some("byte") => match base64_decode(s) {
                        Some(b) => CelValue::Bytes(Arc::new(b)),
                        None => string(),
                    },
                    Some("datetime") => self
                        .convert(&self.helpers.timestamp, s)
                        .unwrap_or_else(string),
                    Some("date") => self
                        .convert(&self.helpers.timestamp, &format!("{s}T00:00:00Z"))
                        .unwrap_or_else(string),
                    Some("duration") => self
                        .convert(&self.helpers.duration, s)
                        .unwrap_or_else(string),
                    _ => string(),
                }
            }
            Value::Array(a) => {
                let items = node.and_then(|n| n.items.as_deref());
                CelValue::List(Arc::new(
                    a.iter()
                        .map(|x| self.to_cel(x, items, items.is_some_and(|i| i.embedded)))
                        .collect(),
                ))
            }
            Value::Object(m) => {
                let Some(node) = node else {
                    return expr::map(
                        m.iter()
                            .map(|(k, x)| (k.clone(), self.to_cel(x, None, false)))
                            .collect(),
                    );
                };
                if let Some(a) = node.additional_schema()
                    && node.properties.is_empty()
                {
                    return expr::map(
                        m.iter()
                            .map(|(k, x)| (k.clone(), self.to_cel(x, Some(a), a.embedded)))
                            .collect(),
                    );
                }
                if node.properties.is_empty() && !resource_root {
                    // x-kubernetes-preserve-unknown-fields or additionalProperties: true
                    return expr::map(
                        m.iter()
                            .map(|(k, x)| (k.clone(), self.to_cel(x, None, false)))
                            .collect(),
                    );
                }
                let mut entries = Vec::new();
                for (k, x) in m {
                    if resource_root && is_meta_field(k) && node.property(k).is_none() {
                        let val = if k == "metadata" {
                            let meta = x.as_object();
                            expr::map(
                                ["name", "generateName"]
                                    .into_iter()
                                    .filter_map(|f| {
                                        meta.and_then(|m| m.get(f))
                                            .map(|v| (f.to_string(), self.to_cel(v, None, false)))
                                    })
                                    .collect(),
                            )
                        } else {
                            self.to_cel(x, None, false)
                        };
                        entries.push((k.clone(), val));
                        continue;
                    }
                    let Some(p) = node.property(k) else {
                        continue;
                    };
                    if let Some(name) = escape_property(k) {
                        entries.push((name, self.to_cel(x, Some(p), p.embedded)));
                    }
                }
                expr::map(entries)
            }
        }
    }

    fn convert(&self, program: &Option<Program>, s: &str) -> Option<CelValue> {
        let program = program.as_ref()?;
        let mut ctx = Context::with_env(Arc::clone(&self.env));
        let b: Box<dyn Val> = CelValue::String(Arc::new(s.to_string())).try_into().ok()?;
        ctx.add_variable_as_val("s", b);
        expr::run(program, &ctx).ok()
    }
}

/// How `oldSelf` is bound for a rule.
#[derive(Clone, Copy)]
enum OldSelf<'a> {
    Unbound,
    Value(&'a CelValue),
    /// `optionalOldSelf: true`: an optional, empty when there is no old value.
    Optional(Option<&'a CelValue>),
}

fn same_map_keys(a: &Value, b: &Value, keys: &[String]) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return false;
    };
    keys.iter().all(|k| match (a.get(k), b.get(k)) {
        (Some(x), Some(y)) => json_eq(x, y),
        (None, None) => true,
        _ => false,
    })
}

impl FieldError {
    /// Whether this error stops the CEL rules from running (`hasBlockingErr` of the registry
    /// strategy): required, type, enum, too long and too many violations.
    pub fn is_blocking(&self) -> bool {
        matches!(
            self.reason,
            FieldErrorReason::NotSupported
                | FieldErrorReason::Required
                | FieldErrorReason::TooLong
                | FieldErrorReason::TooMany
                | FieldErrorReason::TypeInvalid
        )
    }

    /// The error the server reports instead of the CEL rules' errors when a blocking error was
    /// found.
    pub fn rules_not_checked() -> FieldError {
        FieldError::new(
            "",
            FieldErrorReason::Invalid,
            Some(bad_json(&Value::Null)),
            "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Pruning and defaulting
// ---------------------------------------------------------------------------------------------

fn prune_value(
    v: &mut Value,
    node: Option<&Node>,
    keep_meta: bool,
    path: &str,
    pruned: &mut Vec<String>,
) {
    if let Some(n) = node
        && n.preserve_unknown
    {
        skip_prune(v, n, keep_meta, path, pruned);
        return;
    }
    match v {
        Value::Object(m) => {
            let Some(n) = node else {
                for k in m.keys() {
                    pruned.push(child(path, k));
                }
                m.clear();
                return;
            };
            let keep_meta = keep_meta || n.embedded;
            let mut remove = Vec::new();
            for (k, x) in m.iter_mut() {
                if keep_meta && is_meta_field(k) {
                    continue;
                }
                let p = child(path, k);
                if let Some(prop) = n.property(k) {
                    prune_value(x, Some(prop), prop.embedded, &p, pruned);
                } else if !matches!(n.additional, Additional::Unset) {
                    let a = n.additional_schema();
                    prune_value(x, a, a.is_some_and(|a| a.embedded), &p, pruned);
                } else {
                    pruned.push(p);
                    remove.push(k.clone());
                }
            }
            for k in remove {
                m.shift_remove(&k);
            }
        }
        Value::Array(a) => {
            let items = node.and_then(|n| n.items.as_deref());
            for (i, x) in a.iter_mut().enumerate() {
                prune_value(
                    x,
                    items,
                    items.is_some_and(|i| i.embedded),
                    &index(path, i),
                    pruned,
                );
            }
        }
        _ => {}
    }
}

fn skip_prune(v: &mut Value, n: &Node, keep_meta: bool, path: &str, pruned: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            let keep_meta = keep_meta || n.embedded;
            for (k, x) in m.iter_mut() {
                if keep_meta && is_meta_field(k) {
                    continue;
                }
                let p = child(path, k);
                if let Some(prop) = n.property(k) {
                    prune_value(x, Some(prop), prop.embedded, &p, pruned);
                } else if !matches!(n.additional, Additional::Unset) {
                    let a = n.additional_schema();
                    prune_value(x, a, a.is_some_and(|a| a.embedded), &p, pruned);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = n.items.as_deref() {
                for (i, x) in a.iter_mut().enumerate() {
                    skip_prune(x, items, items.embedded, &index(path, i), pruned);
                }
            }
        }
        _ => {}
    }
}

/// `PruneNonNullableNullsWithoutDefaults`.
fn prune_nulls(v: &mut Value, node: Option<&Node>) {
    match v {
        Value::Object(m) => {
            let Some(n) = node else {
                return;
            };
            m.retain(|k, x| {
                let sub = n.property(k).or_else(|| n.additional_schema());
                match sub {
                    Some(s) if x.is_null() && !s.nullable && s.default.is_none() => false,
                    _ => {
                        prune_nulls(x, sub);
                        true
                    }
                }
            });
        }
        Value::Array(a) => {
            let items = node.and_then(|n| n.items.as_deref());
            for x in a {
                prune_nulls(x, items);
            }
        }
        _ => {}
    }
}

fn default_value(v: &mut Value, node: &Node) {
    match v {
        Value::Object(m) => {
            for (k, p) in &node.properties {
                let Some(d) = &p.default else {
                    continue;
                };
                let absent_or_null = match m.get(k) {
                    None => true,
                    Some(x) => x.is_null() && !p.nullable,
                };
                if absent_or_null {
                    m.insert(k.clone(), d.clone());
                }
            }
            for (k, x) in m.iter_mut() {
                if let Some(p) = node.property(k) {
                    default_value(x, p);
                } else if let Some(a) = node.additional_schema() {
                    if x.is_null()
                        && !a.nullable
                        && let Some(d) = &a.default
                    {
                        *x = d.clone();
                    }
                    default_value(x, a);
                }
            }
        }
        Value::Array(a) => {
            let Some(items) = node.items.as_deref() else {
                return;
            };
            for x in a {
                if x.is_null()
                    && !items.nullable
                    && let Some(d) = &items.default
                {
                    *x = d.clone();
                }
                default_value(x, items);
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// OpenAPI validation (kube-openapi's SchemaValidator)
// ---------------------------------------------------------------------------------------------

fn in_body(path: &str) -> String {
    format!("{path} in body")
}

/// Validates `v` against `node`. `path` is kube-openapi's path (`spec.items[0].name`, map values
/// as `spec.labels.key`); `root` skips the root's metadata.
fn openapi_validate(v: &Value, node: &Node, path: &str, root: bool, errs: &mut Vec<FieldError>) {
    // type
    if let Some(types) = node.types() {
        let actual = json_type_name(v);
        let ok = match v {
            Value::Null => node.nullable,
            Value::Number(n) => {
                types.contains(&actual)
                    || (actual == "number"
                        && types.contains(&"integer")
                        && n.as_f64().is_some_and(|f| f.fract() == 0.0))
                    || (actual == "integer" && types.contains(&"number"))
            }
            _ => types.contains(&actual),
        };
        // kube-openapi's type validator names a format a number misses before the type, with
        // the Go type the JSON decoder gave the value (`float64` for a fraction).
        let fraction = v
            .as_number()
            .is_some_and(|n| n.as_f64().is_some_and(|f| f.fract() != 0.0));
        let (expected, got) = match &node.integer_format {
            Some(format) if fraction => (format.clone(), "float64"),
            _ => (types.join(","), actual),
        };
        if !ok {
            errs.push(FieldError::new(
                path,
                FieldErrorReason::TypeInvalid,
                Some(go_quote(got)),
                &format!(
                    "{} must be of type {expected}: {}",
                    in_body(path),
                    go_quote(got)
                ),
            ));
        }
        // And its number validator checks the value fits the integer format (a plain error:
        // the root's field, an empty value).
        if fraction && types.contains(&"integer") {
            let format = node.integer_format.as_ref().map_or_else(
                || "(default format)".to_owned(),
                |f| format!("with format {f}"),
            );
            errs.push(composite(format!(
                "Checked value must be of type integer {format} in {path}"
            )));
        }
    }
    if v.is_null() {
        enum_validate(v, node, path, errs);
        return;
    }
    composition_validate(v, node, path, errs);
    if let Value::String(s) = v {
        string_validate(s, node, path, errs);
        if let Some((format, written)) = &node.format
            && !format_ok(format, s)
        {
            errs.push(FieldError::new(
                path,
                FieldErrorReason::TypeInvalid,
                Some(go_quote(s)),
                &format!(
                    "{} must be of type {written}: {}",
                    in_body(path),
                    go_quote(s)
                ),
            ));
        }
    }
    if let Value::Number(n) = v {
        number_validate(n, node, path, errs);
    }
    if let Value::Array(a) = v {
        if let Some(items) = node.items.as_deref() {
            for (i, x) in a.iter().enumerate() {
                openapi_validate(x, items, &index(path, i), false, errs);
            }
        }
        let size = a.len() as u64;
        if let Some(min) = node.min_items
            && size < min
        {
            errs.push(FieldError::new(
                path,
                FieldErrorReason::Invalid,
                Some(size.to_string()),
                &format!("{} should have at least {min} items", in_body(path)),
            ));
        }
        if let Some(max) = node.max_items
            && size > max
        {
            errs.push(too_many(path, size, max));
        }
    }
    enum_validate(v, node, path, errs);
    if let Value::Object(m) = v {
        object_validate(m, node, path, root, errs);
    }
}

fn too_many(path: &str, actual: u64, max: u64) -> FieldError {
    let unit = if max == 1 { "item" } else { "items" };
    FieldError::new(
        path,
        FieldErrorReason::TooMany,
        Some(actual.to_string()),
        &format!("must have at most {max} {unit}"),
    )
}

fn enum_validate(v: &Value, node: &Node, path: &str, errs: &mut Vec<FieldError>) {
    let Some(values) = &node.enumeration else {
        return;
    };
    if values.is_empty() || (!v.is_null() && values.iter().any(|e| json_eq(e, v))) {
        return;
    }
    let supported: Vec<String> = values
        .iter()
        .map(|e| match e {
            Value::String(s) => go_quote(s),
            other => go_quote(&other.to_string()),
        })
        .collect();
    errs.push(FieldError::new(
        path,
        FieldErrorReason::NotSupported,
        Some(bad_json(v)),
        &format!("supported values: {}", supported.join(", ")),
    ));
}

fn string_validate(s: &str, node: &Node, path: &str, errs: &mut Vec<FieldError>) {
    let len = s.chars().count() as u64;
    if let Some(max) = node.max_length
        && len > max
    {
        let unit = if max == 1 { "byte" } else { "bytes" };
        errs.push(FieldError::new(
            path,
            FieldErrorReason::TooLong,
            None,
            &format!("may not be more than {max} {unit}"),
        ));
        return;
    }
    if let Some(min) = node.min_length
        && len < min
    {
        errs.push(FieldError::new(
            path,
            FieldErrorReason::Invalid,
            Some(go_quote(s)),
            &format!("{} should be at least {min} chars long", in_body(path)),
        ));
        return;
    }
    if let Some((src, re)) = &node.pattern
        && !re.is_match(s)
    {
        errs.push(FieldError::new(
            path,
            FieldErrorReason::Invalid,
            Some(go_quote(s)),
            &format!("{} should match '{src}'", in_body(path)),
        ));
    }
}

fn number_validate(n: &serde_json::Number, node: &Node, path: &str, errs: &mut Vec<FieldError>) {
    let int = n.as_i64();
    let f = n.as_f64().unwrap_or(f64::NAN);
    let bad = Some(go_number(n));
    if let Some(m) = node.multiple_of {
        let ok = match int {
            Some(i) if m >= 1.0 && m.fract() == 0.0 => i % (m as i64) == 0,
            _ => {
                let q = if m < 1.0 { 1.0 / m * f } else { f / m };
                q.fract() == 0.0 && q.is_finite()
            }
        };
        if !ok {
            let factor = match int {
                Some(_) if m >= 1.0 => (m as i64).to_string(),
                _ => go_float(m),
            };
            errs.push(FieldError::new(
                path,
                FieldErrorReason::Invalid,
                bad.clone(),
                &format!("{} should be a multiple of {factor}", in_body(path)),
            ));
        }
    }
    let bound = |b: f64| match int {
        Some(_) => (b as i64).to_string(),
        None => go_float(b),
    };
    if let Some(min) = node.minimum {
        let below = match int {
            Some(i) => {
                let m = min as i64;
                if node.exclusive_minimum {
                    i <= m
                } else {
                    i < m
                }
            }
            None => {
                if node.exclusive_minimum {
                    f <= min
                } else {
                    f < min
                }
            }
        };
        if below {
            let rel = if node.exclusive_minimum {
                "greater than"
            } else {
                "greater than or equal to"
            };
            errs.push(FieldError::new(
                path,
                FieldErrorReason::Invalid,
                bad.clone(),
                &format!("{} should be {rel} {}", in_body(path), bound(min)),
            ));
        }
    }
    if let Some(max) = node.maximum {
        let above = match int {
            Some(i) => {
                let m = max as i64;
                if node.exclusive_maximum {
                    i >= m
                } else {
                    i > m
                }
            }
            None => {
                if node.exclusive_maximum {
                    f >= max
                } else {
                    f > max
                }
            }
        };
        if above {
            let rel = if node.exclusive_maximum {
                "less than"
            } else {
                "less than or equal to"
            };
            errs.push(FieldError::new(
                path,
                FieldErrorReason::Invalid,
                bad,
                &format!("{} should be {rel} {}", in_body(path), bound(max)),
            ));
        }
    }
}

/// kube-openapi's composite errors are not `*errors.Validation`: the server reports them at
/// the root of the object (`<nil>`) with an empty bad value; the message names the path.
fn composite(detail: String) -> FieldError {
    FieldError::new("", FieldErrorReason::Invalid, Some(go_quote("")), &detail)
}

fn composition_validate(v: &Value, node: &Node, path: &str, errs: &mut Vec<FieldError>) {
    let run = |n: &Node| {
        let mut e = Vec::new();
        openapi_validate(v, n, path, false, &mut e);
        e
    };
    if !node.any_of.is_empty() {
        let results: Vec<Vec<FieldError>> = node.any_of.iter().map(run).collect();
        if !results.iter().any(Vec::is_empty) {
            errs.push(composite(format!(
                "{} must validate at least one schema (anyOf)",
                go_quote(path)
            )));
            if let Some(best) = results.into_iter().min_by_key(Vec::len) {
                errs.extend(best);
            }
        }
    }
    if !node.one_of.is_empty() {
        let results: Vec<Vec<FieldError>> = node.one_of.iter().map(run).collect();
        let valid = results.iter().filter(|r| r.is_empty()).count();
        if valid != 1 {
            let extra = if valid == 0 {
                "Found none valid".to_string()
            } else {
                format!("Found {valid} valid alternatives")
            };
            errs.push(composite(format!(
                "{} must validate one and only one schema (oneOf). {extra}",
                go_quote(path)
            )));
            if valid == 0
                && let Some(best) = results.into_iter().min_by_key(Vec::len)
            {
                errs.extend(best);
            }
        }
    }
    if !node.all_of.is_empty() {
        let mut valid = 0;
        for n in &node.all_of {
            let r = run(n);
            if r.is_empty() {
                valid += 1;
            }
            errs.extend(r);
        }
        if valid != node.all_of.len() {
            let extra = if valid == 0 { ". None validated" } else { "" };
            errs.push(composite(format!(
                "{} must validate all the schemas (allOf){extra}",
                go_quote(path)
            )));
        }
    }
    if let Some(not) = &node.not
        && run(not).is_empty()
    {
        errs.push(composite(format!(
            "{} must not validate the schema (not)",
            go_quote(path)
        )));
    }
}

fn object_validate(
    m: &Map<String, Value>,
    node: &Node,
    path: &str,
    root: bool,
    errs: &mut Vec<FieldError>,
) {
    let size = m.len() as u64;
    if let Some(min) = node.min_properties
        && size < min
    {
        errs.push(FieldError::new(
            path,
            FieldErrorReason::Invalid,
            Some(size.to_string()),
            &format!("{} should have at least {min} properties", in_body(path)),
        ));
        return;
    }
    if let Some(max) = node.max_properties
        && size > max
    {
        errs.push(too_many(path, size, max));
        return;
    }
    match &node.additional {
        Additional::Bool(false) => {
            for k in m.keys() {
                if node.property(k).is_none() {
                    errs.push(FieldError::new(
                        path,
                        FieldErrorReason::Invalid,
                        Some(go_quote(k)),
                        &format!("{path}.{k} in body is a forbidden property"),
                    ));
                }
            }
        }
        Additional::Schema(a) => {
            for (k, x) in m {
                if node.property(k).is_none() {
                    openapi_validate(x, a, &format!("{path}.{k}"), false, errs);
                }
            }
        }
        _ => {}
    }
    for (k, p) in &node.properties {
        if root && k == "metadata" {
            continue;
        }
        if let Some(x) = m.get(k) {
            openapi_validate(x, p, &child(path, k), false, errs);
        }
    }
    for k in &node.required {
        if root && k == "metadata" {
            continue;
        }
        if !m.contains_key(k) {
            errs.push(FieldError::new(
                &child(path, k),
                FieldErrorReason::Required,
                None,
                "",
            ));
        }
    }
}

/// The `apiVersion` and `kind` checks of embedded resources (`validateEmbeddedResource`).
fn embedded_validate(v: &Value, node: &Node, path: &str, root: bool, errs: &mut Vec<FieldError>) {
    match v {
        Value::Object(m) => {
            if node.embedded && !root {
                for f in ["apiVersion", "kind"] {
                    let p = child(path, f);
                    match m.get(f) {
                        None => errs.push(FieldError::new(
                            &p,
                            FieldErrorReason::Required,
                            None,
                            "must not be empty",
                        )),
                        Some(Value::String(s)) if s.is_empty() => errs.push(FieldError::new(
                            &p,
                            FieldErrorReason::Invalid,
                            Some(go_quote(s)),
                            "must not be empty",
                        )),
                        Some(Value::String(_)) => {}
                        Some(other) => errs.push(FieldError::new(
                            &p,
                            FieldErrorReason::Invalid,
                            Some(bad_json(other)),
                            "must be a string",
                        )),
                    }
                }
            }
            for (k, x) in m {
                if let Some(p) = node.property(k) {
                    embedded_validate(x, p, &child(path, k), false, errs);
                } else if let Some(a) = node.additional_schema() {
                    embedded_validate(x, a, &key(path, k), false, errs);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = node.items.as_deref() {
                for (i, x) in a.iter().enumerate() {
                    embedded_validate(x, items, &index(path, i), false, errs);
                }
            }
        }
        _ => {}
    }
}

/// `ValidateListSetsAndMaps`: uniqueness of `x-kubernetes-list-type: set` items and of the keys
/// of `x-kubernetes-list-type: map` items.
fn list_type_validate(v: &Value, node: &Node, path: &str, errs: &mut Vec<FieldError>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if let Some(p) = node.property(k) {
                    list_type_validate(x, p, &child(path, k), errs);
                } else if let Some(a) = node.additional_schema() {
                    list_type_validate(x, a, &key(path, k), errs);
                }
            }
        }
        Value::Array(a) => {
            match node.list_type.as_deref() {
                Some("set") => {
                    for i in duplicates(a.iter().map(identity)) {
                        errs.push(FieldError::new(
                            &index(path, i),
                            FieldErrorReason::Duplicate,
                            Some(bad_json(&a[i])),
                            "",
                        ));
                    }
                }
                Some("map") => list_map_validate(a, node, path, errs),
                _ => {}
            }
            if let Some(items) = node.items.as_deref() {
                for (i, x) in a.iter().enumerate() {
                    list_type_validate(x, items, &index(path, i), errs);
                }
            }
        }
        _ => {}
    }
}

fn list_map_validate(a: &[Value], node: &Node, path: &str, errs: &mut Vec<FieldError>) {
    for (i, x) in a.iter().enumerate() {
        if !x.is_null() && !x.is_object() {
            errs.push(FieldError::new(
                &index(path, i),
                FieldErrorReason::Invalid,
                Some(bad_json(x)),
                "must be an object for an array of list-type map",
            ));
            return;
        }
    }
    let keys: Vec<Map<String, Value>> = a
        .iter()
        .map(|x| {
            let mut k = Map::new();
            if let Some(o) = x.as_object() {
                for f in &node.list_map_keys {
                    if let Some(v) = o.get(f) {
                        k.insert(f.clone(), v.clone());
                    }
                }
            }
            k
        })
        .collect();
    let ids = keys.iter().map(|k| {
        if node.list_map_keys.len() == 1 {
            k.values()
                .next()
                .map_or_else(|| "unspecified".to_string(), identity)
        } else {
            identity(&Value::Object(k.clone()))
        }
    });
    for i in duplicates(ids) {
        errs.push(FieldError::new(
            &index(path, i),
            FieldErrorReason::Duplicate,
            Some(bad_json(&Value::Object(keys[i].clone()))),
            "",
        ));
    }
}

/// The index of the second occurrence of each repeated identity.
fn duplicates(ids: impl Iterator<Item = String>) -> Vec<usize> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    for (i, id) in ids.enumerate() {
        let count = seen.entry(id).or_insert(0);
        *count += 1;
        if *count == 2 {
            out.push(i);
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Formats (kube-openapi's strfmt registry, as far as CRDs use it)
// ---------------------------------------------------------------------------------------------

fn is_leap(y: u32) -> bool {
    (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400)
}

fn digits(s: &str) -> Option<u32> {
    (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

/// `2006-01-02`.
fn is_date(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    let [y, m, d] = parts.as_slice() else {
        return false;
    };
    if y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return false;
    }
    let (Some(y), Some(m), Some(d)) = (digits(y), digits(m), digits(d)) else {
        return false;
    };
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(y) => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&d)
}

/// strfmt's `IsDateTime`: an RFC 3339 date-time with seconds and a zone.
fn is_date_time(s: &str) -> bool {
    let lower = s.to_ascii_lowercase();
    let Some((date, time)) = lower.split_once('t') else {
        return false;
    };
    if !is_date(date) {
        return false;
    }
    let (clock, zone) = if let Some(t) = time.strip_suffix('z') {
        (t, None)
    } else if let Some(i) = time.rfind(['+', '-']) {
        (&time[..i], Some(&time[i + 1..]))
    } else {
        return false;
    };
    let (hms, frac) = match clock.split_once('.') {
        Some((h, f)) => (h, Some(f)),
        None => (clock, None),
    };
    if frac.is_some_and(|f| f.is_empty() || !f.bytes().all(|b| b.is_ascii_digit())) {
        return false;
    }
    let hms: Vec<&str> = hms.split(':').collect();
    let [h, mi, se] = hms.as_slice() else {
        return false;
    };
    let two = |x: &str, max: u32| x.len() == 2 && digits(x).is_some_and(|v| v <= max);
    if !(two(h, 23) && two(mi, 59) && two(se, 60)) {
        return false;
    }
    match zone {
        None => true,
        Some(z) => match z.split_once(':') {
            Some((zh, zm)) => two(zh, 23) && two(zm, 59),
            None => false,
        },
    }
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn is_uuid(s: &str, version: Option<char>) -> bool {
    let compact: String = s.chars().filter(|&c| c != '-').collect();
    let dashed = s.len() == 36;
    if dashed {
        let b = s.as_bytes();
        if [8, 13, 18, 23].iter().any(|&i| b[i] != b'-') {
            return false;
        }
    } else if s.contains('-') {
        // dashes are optional, but only at their places
        let groups: Vec<&str> = s.split('-').collect();
        let lens: Vec<usize> = groups.iter().map(|g| g.len()).collect();
        if lens.iter().sum::<usize>() != 32 {
            return false;
        }
    }
    if !is_hex(&compact, 32) {
        return false;
    }
    match version {
        None => true,
        Some(v) => {
            let c = compact.as_bytes();
            let variant_ok =
                v == '3' || matches!(c[16].to_ascii_lowercase(), b'8' | b'9' | b'a' | b'b');
            c[12] as char == v && variant_ok
        }
    }
}

fn is_mac(s: &str) -> bool {
    let groups: Vec<&str> = if s.contains(':') {
        s.split(':').collect()
    } else if s.contains('-') {
        s.split('-').collect()
    } else {
        let g: Vec<&str> = s.split('.').collect();
        return matches!(g.len(), 3 | 4 | 10) && g.iter().all(|x| is_hex(x, 4));
    };
    matches!(groups.len(), 6 | 8 | 20) && groups.iter().all(|x| is_hex(x, 2))
}

fn is_dns_label(s: &str, max: usize) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= max
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

fn is_hostname(s: &str) -> bool {
    if s.is_empty() || s.len() > 255 {
        return false;
    }
    let labels: Vec<&str> = s.split('.').collect();
    labels.iter().all(|l| {
        let b: Vec<char> = l.chars().collect();
        !b.is_empty()
            && b.len() <= 63
            && b.iter().all(|c| c.is_alphanumeric() || *c == '-')
            && b[0] != '-'
            && b[b.len() - 1] != '-'
    }) && (labels.len() == 1
        || labels
            .last()
            .is_some_and(|t| t.chars().all(char::is_alphabetic) && t.chars().count() >= 2))
}

fn is_duration(s: &str) -> bool {
    // Go's time.ParseDuration, or strfmt's "3 days"-like units.
    let go = |s: &str| -> bool {
        let s = s.strip_prefix(['+', '-']).unwrap_or(s);
        if s == "0" {
            return true;
        }
        let mut rest = s;
        if rest.is_empty() {
            return false;
        }
        while !rest.is_empty() {
            let num_len = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(rest.len());
            if num_len == 0 || rest[..num_len] == *"." {
                return false;
            }
            rest = &rest[num_len..];
            let unit_len = rest
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .unwrap_or(rest.len());
            if !matches!(
                &rest[..unit_len],
                "ns" | "us" | "µs" | "μs" | "ms" | "s" | "m" | "h"
            ) {
                return false;
            }
            rest = &rest[unit_len..];
        }
        true
    };
    if go(s) {
        return true;
    }
    let mut any = false;
    let mut words = s.split_whitespace().peekable();
    while let Some(w) = words.next() {
        let num_len = w.find(|c: char| !c.is_ascii_digit()).unwrap_or(w.len());
        let (num, mut unit) = (&w[..num_len], &w[num_len..]);
        if num.is_empty() {
            return false;
        }
        if unit.is_empty() {
            unit = words.next().unwrap_or("");
        }
        let unit = unit
            .strip_suffix('s')
            .filter(|u| u.len() > 1)
            .unwrap_or(unit);
        if !matches!(
            unit,
            "ns" | "us"
                | "µs"
                | "ms"
                | "s"
                | "sec"
                | "m"
                | "min"
                | "h"
                | "hr"
                | "hour"
                | "d"
                | "day"
                | "w"
                | "wk"
                | "week"
        ) {
            return false;
        }
        any = true;
    }
    any
}

fn is_quantity(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let num_len = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(num_len);
    if num.is_empty() || num == "." || num.matches('.').count() > 1 {
        return false;
    }
    matches!(
        suffix,
        "" | "n"
            | "u"
            | "m"
            | "k"
            | "M"
            | "G"
            | "T"
            | "P"
            | "E"
            | "Ki"
            | "Mi"
            | "Gi"
            | "Ti"
            | "Pi"
            | "Ei"
    ) || ((suffix.starts_with('e') || suffix.starts_with('E'))
        && suffix[1..]
            .strip_prefix(['+', '-'])
            .unwrap_or(&suffix[1..])
            .bytes()
            .all(|b| b.is_ascii_digit())
        && suffix.len() > 1)
}

/// Validates a string against a supported format (normalized without dashes).
fn format_ok(format: &str, s: &str) -> bool {
    match format {
        "datetime" => is_date_time(s),
        "date" => is_date(s),
        "byte" => base64_decode(s).is_some(),
        "uuid" => is_uuid(s, None),
        "uuid3" => is_uuid(s, Some('3')),
        "uuid4" => is_uuid(s, Some('4')),
        "uuid5" => is_uuid(s, Some('5')),
        "ipv4" => s.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => s.contains(':') && s.parse::<std::net::Ipv6Addr>().is_ok(),
        "cidr" => s.split_once('/').is_some_and(|(ip, bits)| {
            let bits: Option<u32> = digits(bits);
            match (ip.parse::<std::net::IpAddr>(), bits) {
                (Ok(std::net::IpAddr::V4(_)), Some(b)) => b <= 32,
                (Ok(std::net::IpAddr::V6(_)), Some(b)) => b <= 128,
                _ => false,
            }
        }),
        "mac" => is_mac(s),
        "hostname" => is_hostname(s),
        "email" => s.split_once('@').is_some_and(|(l, d)| {
            !l.is_empty() && !d.is_empty() && !d.contains('@') && !s.contains(char::is_whitespace)
        }),
        "uri" => {
            s.starts_with('/')
                || s.split_once(':').is_some_and(|(scheme, _)| {
                    let mut c = scheme.chars();
                    c.next().is_some_and(|f| f.is_ascii_alphabetic())
                        && c.all(|x| x.is_ascii_alphanumeric() || matches!(x, '+' | '-' | '.'))
                })
        }
        "duration" => is_duration(s),
        "hexcolor" => {
            let h = s.strip_prefix('#').unwrap_or(s);
            is_hex(h, 3) || is_hex(h, 6)
        }
        "rgbcolor" => s
            .strip_prefix("rgb(")
            .and_then(|r| r.strip_suffix(')'))
            .is_some_and(|inner| {
                let parts: Vec<&str> = inner.split(',').map(str::trim).collect();
                parts.len() == 3 && parts.iter().all(|p| p.len() <= 3 && digits(p).is_some())
            }),
        "bsonobjectid" => is_hex(s, 24),
        "ssn" => {
            let d: String = s.chars().filter(|c| *c != '-' && *c != ' ').collect();
            d.len() == 9 && d.bytes().all(|b| b.is_ascii_digit()) && s.len() <= 11
        }
        "quantity" => is_quantity(s),
        "k8sshortname" => is_dns_label(s, 63),
        "k8slongname" => s.len() <= 253 && s.split('.').all(|l| is_dns_label(l, usize::MAX)),
        // password, isbn, isbn10, isbn13, creditcard: accepted as any string
        _ => true,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn compile(schema: Value) -> CompiledSchema {
        match CompiledSchema::compile(&schema) {
            Ok(s) => s,
            Err(e) => panic!("schema does not compile: {e:#?}"),
        }
    }

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    fn spec_schema(spec: Value) -> CompiledSchema {
        compile(json!({"type": "object", "properties": {"spec": spec}}))
    }

    fn obj(spec: Value) -> Value {
        json!({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "a"}, "spec": spec})
    }

    #[test]
    fn reason_strings_match_cause_types() {
        assert_eq!(FieldErrorReason::Required.as_str(), "FieldValueRequired");
        assert_eq!(
            FieldErrorReason::TypeInvalid.as_str(),
            "FieldValueTypeInvalid"
        );
        assert_eq!(
            FieldErrorReason::NotSupported.as_str(),
            "FieldValueNotSupported"
        );
        assert_eq!(FieldErrorReason::TooLong.as_str(), "FieldValueTooLong");
        assert_eq!(FieldErrorReason::TooMany.as_str(), "FieldValueTooMany");
        assert_eq!(FieldErrorReason::Duplicate.as_str(), "FieldValueDuplicate");
        assert_eq!(FieldErrorReason::Forbidden.as_str(), "FieldValueForbidden");
        assert_eq!(FieldErrorReason::Invalid.as_str(), "FieldValueInvalid");
    }

    #[test]
    fn compiled_schema_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<CompiledSchema>();
    }

    // --- compile ------------------------------------------------------------------------------

    #[test]
    fn compile_rejects_property_without_type() {
        let err = CompiledSchema::compile(&json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {"foo": {"description": "x"}}}}
        }))
        .unwrap_err();
        assert_eq!(
            err,
            vec![
                "openAPIV3Schema.properties[spec].properties[foo].type: Required value: must not be empty for specified object fields"
            ]
        );
    }

    #[test]
    fn compile_at_names_the_version_path() {
        let err = CompiledSchema::compile_at(
            &json!({"type": "string"}),
            "spec.versions[0].schema.openAPIV3Schema",
        )
        .unwrap_err();
        assert_eq!(
            err,
            vec![
                "spec.versions[0].schema.openAPIV3Schema.type: Invalid value: \"string\": must be object at the root"
            ]
        );
    }

    #[test]
    fn compile_rejects_array_without_items_and_unique_items() {
        let err = CompiledSchema::compile(&json!({
            "type": "object",
            "properties": {"tags": {"type": "array", "uniqueItems": true}}
        }))
        .unwrap_err();
        assert_eq!(
            err,
            vec![
                "openAPIV3Schema.properties[tags].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
                "openAPIV3Schema.properties[tags].items: Required value: must be specified",
            ]
        );
    }

    #[test]
    fn compile_rejects_invalid_pattern_and_unknown_type() {
        let err = CompiledSchema::compile(&json!({
            "type": "object",
            "properties": {
                "a": {"type": "string", "pattern": "(["},
                "b": {"type": "text"}
            }
        }))
        .unwrap_err();
        assert_eq!(err.len(), 2);
        assert!(
            err[0].starts_with(
                "openAPIV3Schema.properties[a].pattern: Invalid value: \"([\": must be a valid regular expression, but isn't: "
            ),
            "{err:?}"
        );
        assert_eq!(
            err[1],
            "openAPIV3Schema.properties[b].type: Unsupported value: \"text\": supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\""
        );
    }

    #[test]
    fn compile_rejects_types_in_value_validations_except_int_or_string_pattern() {
        let err = CompiledSchema::compile(&json!({
            "type": "object",
            "properties": {"a": {"type": "string", "allOf": [{"type": "string", "minLength": 1}]}}
        }))
        .unwrap_err();
        assert_eq!(
            err,
            vec![
                "openAPIV3Schema.properties[a].allOf[0].type: Forbidden: must be empty to be structural"
            ]
        );
        compile(json!({
            "type": "object",
            "properties": {"port": {
                "x-kubernetes-int-or-string": true,
                "anyOf": [{"type": "integer"}, {"type": "string"}]
            }}
        }));
    }

    #[test]
    fn compile_rejects_list_map_key_that_is_neither_required_nor_defaulted() {
        let err = CompiledSchema::compile(&json!({
            "type": "object",
            "properties": {"ports": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}}}
            }}
        }))
        .unwrap_err();
        assert_eq!(
            err,
            vec![
                "openAPIV3Schema.properties[ports].items.properties[name].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"
            ]
        );
    }

    #[test]
    fn compile_rejects_default_that_does_not_validate() {
        let err = CompiledSchema::compile(&json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "replicas": {"type": "integer", "default": "one"}
            }}}
        }))
        .unwrap_err();
        assert_eq!(
            err,
            vec![
                "openAPIV3Schema.properties[spec].properties[replicas].default: Invalid value: \"string\":  in body must be of type integer: \"string\""
            ]
        );
    }

    #[test]
    fn compile_rejects_metadata_schema_beyond_name() {
        let err = CompiledSchema::compile(&json!({
            "type": "object",
            "properties": {"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}
        }))
        .unwrap_err();
        assert_eq!(
            err,
            vec![
                "openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"
            ]
        );
    }

    #[test]
    fn compile_rejects_rule_with_syntax_error() {
        let err = CompiledSchema::compile(&json!({
            "type": "object",
            "properties": {"spec": {
                "type": "object",
                "properties": {"replicas": {"type": "integer"}},
                "x-kubernetes-validations": [{"rule": "self.replicas >"}]
            }}
        }))
        .unwrap_err();
        assert_eq!(err.len(), 1);
        assert!(
            err[0].starts_with(
                "openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: \"self.replicas >\": compilation failed: ERROR: <input>:1:16: Syntax error:"
            ),
            "{err:?}"
        );
    }

    #[test]
    fn compile_rejects_rule_with_undeclared_reference() {
        let err = CompiledSchema::compile(&json!({
            "type": "object",
            "x-kubernetes-validations": [{"rule": "spec.replicas > 0 && self.spec.all(k, k != '')"}],
            "properties": {"spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}
        }))
        .unwrap_err();
        assert_eq!(
            err,
            vec![
                "openAPIV3Schema.x-kubernetes-validations[0].rule: Invalid value: \"spec.replicas > 0 && self.spec.all(k, k != '')\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'spec' (in container '')\n| spec.replicas > 0 && self.spec.all(k, k != '')\n| ^"
            ]
        );
    }

    #[test]
    fn compile_rejects_old_self_under_list_that_is_not_a_map() {
        let err = CompiledSchema::compile(&json!({
            "type": "object",
            "properties": {"items": {
                "type": "array",
                "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}
            }}
        }))
        .unwrap_err();
        assert_eq!(
            err,
            vec![
                "openAPIV3Schema.properties[items].items.x-kubernetes-validations[0].rule: Invalid value: \"self == oldSelf\": oldSelf cannot be used on the uncorrelatable portion of the schema within openAPIV3Schema.properties[items]"
            ]
        );
    }

    #[test]
    fn compile_rejects_bad_reason_field_path_and_optional_old_self() {
        let err = CompiledSchema::compile(&json!({
            "type": "object",
            "properties": {"spec": {
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "x-kubernetes-validations": [
                    {"rule": "true", "reason": "FieldValueWrong"},
                    {"rule": "true", "fieldPath": ".b"},
                    {"rule": "true", "optionalOldSelf": true}
                ]
            }}
        }))
        .unwrap_err();
        assert_eq!(
            err,
            vec![
                "openAPIV3Schema.properties[spec].x-kubernetes-validations[0].reason: Unsupported value: \"FieldValueWrong\": supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\"",
                "openAPIV3Schema.properties[spec].x-kubernetes-validations[1].fieldPath: Invalid value: \".b\": fieldPath must be a valid path",
                "openAPIV3Schema.properties[spec].x-kubernetes-validations[2].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule",
            ]
        );
    }

    #[test]
    fn compile_skips_rules_calling_unimplemented_kubernetes_functions() {
        let s = compile(json!({
            "type": "object",
            "properties": {"spec": {
                "type": "object",
                "properties": {"cpu": {"type": "string"}},
                "x-kubernetes-validations": [{"rule": "quantity(self.cpu).isLessThan(quantity('1'))"}]
            }}
        }));
        assert_eq!(
            s.skipped_rules(),
            [
                "openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: rule \"quantity(self.cpu).isLessThan(quantity('1'))\" skipped: the Kubernetes CEL function \"quantity\" is not implemented"
            ]
        );
        assert_eq!(s.validate(&obj(json!({"cpu": "2"})), None), vec![]);

        let s = compile(json!({
            "type": "object",
            "properties": {"labels": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "x-kubernetes-validations": [{"rule": "self.all(k, v, k.size() < 10 && v.size() < 10)"}]
            }}
        }));
        assert_eq!(
            s.skipped_rules(),
            [
                "openAPIV3Schema.properties[labels].x-kubernetes-validations[0].rule: rule \"self.all(k, v, k.size() < 10 && v.size() < 10)\" skipped: the Kubernetes CEL function \"all\" is not implemented"
            ]
        );
    }

    // --- pruning ------------------------------------------------------------------------------

    #[test]
    fn prune_removes_undeclared_fields_at_every_level_and_keeps_root_meta() {
        let s = spec_schema(json!({
            "type": "object",
            "properties": {
                "replicas": {"type": "integer"},
                "template": {"type": "object", "properties": {"image": {"type": "string"}}},
                "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}}
            }
        }));
        let mut o = json!({
            "apiVersion": "example.com/v1", "kind": "Thing",
            "metadata": {"name": "a", "labels": {"x": "y"}},
            "spec": {
                "replicas": 1, "foo": true,
                "template": {"image": "busybox", "bar": 2},
                "items": [{"name": "a"}, {"name": "b", "extra": 1}]
            },
            "status": {"ready": true}
        });
        let pruned = s.prune(&mut o);
        assert_eq!(
            pruned,
            vec![
                "spec.foo",
                "spec.template.bar",
                "spec.items[1].extra",
                "status"
            ]
        );
        assert_eq!(
            o,
            json!({
                "apiVersion": "example.com/v1", "kind": "Thing",
                "metadata": {"name": "a", "labels": {"x": "y"}},
                "spec": {"replicas": 1, "template": {"image": "busybox"}, "items": [{"name": "a"}, {"name": "b"}]}
            })
        );
    }

    #[test]
    fn prune_keeps_unknown_fields_under_preserve_unknown_fields_but_prunes_declared_children() {
        let s = spec_schema(json!({
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
            "properties": {"known": {"type": "object", "properties": {"a": {"type": "string"}}}}
        }));
        let mut o = obj(json!({"anything": {"deep": [1, 2]}, "known": {"a": "x", "b": "y"}}));
        assert_eq!(s.prune(&mut o), vec!["spec.known.b"]);
        assert_eq!(
            o["spec"],
            json!({"anything": {"deep": [1, 2]}, "known": {"a": "x"}})
        );
    }

    #[test]
    fn prune_keeps_embedded_resource_type_and_object_meta() {
        let s = spec_schema(json!({
            "type": "object",
            "properties": {"template": {
                "type": "object",
                "x-kubernetes-embedded-resource": true,
                "properties": {"spec": {"type": "object", "properties": {"x": {"type": "string"}}}}
            }}
        }));
        let mut o = obj(json!({"template": {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}},
            "spec": {"x": "1", "y": "2"}, "status": {}
        }}));
        assert_eq!(
            s.prune(&mut o),
            vec!["spec.template.spec.y", "spec.template.status"]
        );
        assert_eq!(
            o["spec"]["template"],
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}}, "spec": {"x": "1"}})
        );
    }

    #[test]
    fn prune_inside_additional_properties_and_drops_non_nullable_nulls() {
        let s = spec_schema(json!({
            "type": "object",
            "properties": {
                "labels": {"type": "object", "additionalProperties": {
                    "type": "object", "properties": {"v": {"type": "string"}}
                }},
                "a": {"type": "string"},
                "b": {"type": "string", "nullable": true},
                "c": {"type": "string", "default": "x"}
            }
        }));
        let mut o = obj(json!({
            "labels": {"k": {"v": "1", "w": "2"}},
            "a": null, "b": null, "c": null
        }));
        assert_eq!(s.prune(&mut o), vec!["spec.labels.k.w"]);
        assert_eq!(
            o["spec"],
            json!({"labels": {"k": {"v": "1"}}, "b": null, "c": null})
        );
    }

    // --- defaulting ---------------------------------------------------------------------------

    #[test]
    fn defaults_apply_to_absent_fields_with_nested_defaults_after_parents() {
        let s = compile(json!({
            "type": "object",
            "properties": {"spec": {
                "type": "object",
                "default": {},
                "properties": {
                    "replicas": {"type": "integer", "default": 1},
                    "mode": {"type": "string", "default": "Once"},
                    "ports": {"type": "array", "items": {
                        "type": "object",
                        "properties": {"protocol": {"type": "string", "default": "TCP"}, "port": {"type": "integer"}}
                    }}
                }
            }}
        }));
        let mut o = json!({"apiVersion": "v", "kind": "K", "metadata": {"name": "a"}});
        s.apply_defaults(&mut o);
        assert_eq!(o["spec"], json!({"replicas": 1, "mode": "Once"}));

        let mut o = obj(
            json!({"replicas": 3, "mode": null, "ports": [{"port": 80}, {"port": 53, "protocol": "UDP"}]}),
        );
        s.apply_defaults(&mut o);
        assert_eq!(
            o["spec"],
            json!({"replicas": 3, "mode": "Once", "ports": [{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]})
        );
    }

    // --- OpenAPI validation -------------------------------------------------------------------

    #[test]
    fn wrong_type_is_type_invalid_with_kube_openapi_message() {
        let s =
            spec_schema(json!({"type": "object", "properties": {"replicas": {"type": "integer"}}}));
        let errs = s.validate(&obj(json!({"replicas": "abc"})), None);
        assert_eq!(
            errs,
            vec![FieldError {
                field: "spec.replicas".into(),
                reason: FieldErrorReason::TypeInvalid,
                message: "Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"".into(),
            }]
        );
    }

    #[test]
    fn integer_accepts_integral_floats_and_number_accepts_integers() {
        let s = spec_schema(json!({"type": "object", "properties": {
            "i": {"type": "integer"}, "n": {"type": "number"}, "b": {"type": "boolean"}
        }}));
        assert_eq!(
            s.validate(&obj(json!({"i": 2.0, "n": 2, "b": false})), None),
            vec![]
        );
        assert_eq!(
            messages(&s.validate(&obj(json!({"i": 2.5, "b": "yes"})), None)),
            vec![
                "spec.i: Invalid value: \"number\": spec.i in body must be of type integer: \"number\"",
                "<nil>: Invalid value: \"\": Checked value must be of type integer (default format) in spec.i",
                "spec.b: Invalid value: \"string\": spec.b in body must be of type boolean: \"string\"",
            ]
        );
    }

    #[test]
    fn null_is_accepted_only_when_nullable() {
        let s = spec_schema(json!({"type": "object", "properties": {
            "a": {"type": "string", "nullable": true}, "b": {"type": "string"}
        }}));
        assert_eq!(
            messages(&s.validate(&obj(json!({"a": null, "b": null})), None)),
            vec![
                "spec.b: Invalid value: \"null\": spec.b in body must be of type string: \"null\""
            ]
        );
    }

    #[test]
    fn missing_required_field_is_required_value() {
        let s = spec_schema(
            json!({"type": "object", "required": ["image"], "properties": {"image": {"type": "string"}}}),
        );
        let errs = s.validate(&obj(json!({})), None);
        assert_eq!(
            errs,
            vec![FieldError {
                field: "spec.image".into(),
                reason: FieldErrorReason::Required,
                message: "Required value".into()
            }]
        );
        let s = compile(
            json!({"type": "object", "required": ["spec"], "properties": {"spec": {"type": "object"}}}),
        );
        assert_eq!(
            messages(&s.validate(
                &json!({"apiVersion": "v", "kind": "K", "metadata": {}}),
                None
            )),
            vec!["spec: Required value"]
        );
    }

    #[test]
    fn enum_violation_lists_supported_values() {
        let s = spec_schema(json!({"type": "object", "properties": {
            "mode": {"type": "string", "enum": ["a", "b"]}, "level": {"type": "integer", "enum": [1, 2]}
        }}));
        assert_eq!(
            s.validate(&obj(json!({"mode": "a", "level": 2.0})), None),
            vec![]
        );
        let errs = s.validate(&obj(json!({"mode": "x", "level": 3})), None);
        assert_eq!(
            messages(&errs),
            vec![
                "spec.mode: Unsupported value: \"x\": supported values: \"a\", \"b\"",
                "spec.level: Unsupported value: 3: supported values: \"1\", \"2\"",
            ]
        );
        assert_eq!(errs[0].reason, FieldErrorReason::NotSupported);
    }

    #[test]
    fn numeric_bounds_and_multiple_of() {
        let s = spec_schema(json!({"type": "object", "properties": {
            "min": {"type": "integer", "minimum": 1},
            "xmin": {"type": "number", "minimum": 0.5, "exclusiveMinimum": true},
            "max": {"type": "integer", "maximum": 2147483647},
            "xmax": {"type": "integer", "maximum": 10, "exclusiveMaximum": true},
            "fmax": {"type": "number", "maximum": 1000000},
            "mul": {"type": "integer", "multipleOf": 5},
            "fmul": {"type": "number", "multipleOf": 0.5}
        }}));
        assert_eq!(
            s.validate(&obj(json!({"min": 1, "xmin": 0.6, "max": 5, "xmax": 9, "fmax": 1.5, "mul": 10, "fmul": 1.5})), None),
            vec![]
        );
        assert_eq!(
            messages(&s.validate(
                &obj(json!({"min": 0, "xmin": 0.5, "max": 2147483648i64, "xmax": 10, "fmax": 1000000.5, "mul": 7, "fmul": 0.7})),
                None
            )),
            vec![
                "spec.min: Invalid value: 0: spec.min in body should be greater than or equal to 1",
                "spec.xmin: Invalid value: 0.5: spec.xmin in body should be greater than 0.5",
                "spec.max: Invalid value: 2147483648: spec.max in body should be less than or equal to 2147483647",
                "spec.xmax: Invalid value: 10: spec.xmax in body should be less than 10",
                "spec.fmax: Invalid value: 1.0000005e+06: spec.fmax in body should be less than or equal to 1e+06",
                "spec.mul: Invalid value: 7: spec.mul in body should be a multiple of 5",
                "spec.fmul: Invalid value: 0.7: spec.fmul in body should be a multiple of 0.5",
            ]
        );
    }

    #[test]
    fn string_length_and_pattern() {
        let s = spec_schema(json!({"type": "object", "properties": {
            "short": {"type": "string", "maxLength": 3},
            "long": {"type": "string", "minLength": 2},
            "name": {"type": "string", "pattern": "^[a-z]+$"}
        }}));
        assert_eq!(
            s.validate(
                &obj(json!({"short": "äöü", "long": "ab", "name": "abc"})),
                None
            ),
            vec![]
        );
        let errs = s.validate(
            &obj(json!({"short": "abcd", "long": "a", "name": "A1"})),
            None,
        );
        assert_eq!(
            messages(&errs),
            vec![
                "spec.short: Too long: may not be more than 3 bytes",
                "spec.long: Invalid value: \"a\": spec.long in body should be at least 2 chars long",
                "spec.name: Invalid value: \"A1\": spec.name in body should match '^[a-z]+$'",
            ]
        );
        assert_eq!(errs[0].reason, FieldErrorReason::TooLong);
    }

    #[test]
    fn formats_are_checked_and_unknown_formats_ignored() {
        let s = spec_schema(json!({"type": "object", "properties": {
            "at": {"type": "string", "format": "date-time"},
            "day": {"type": "string", "format": "date"},
            "data": {"type": "string", "format": "byte"},
            "id": {"type": "string", "format": "uuid"},
            "ip": {"type": "string", "format": "ipv4"},
            "n": {"type": "integer", "format": "int32"},
            "other": {"type": "string", "format": "my-format"}
        }}));
        assert_eq!(
            s.validate(&obj(json!({
                "at": "2024-02-29T10:00:00.5Z", "day": "2024-02-29", "data": "aGVsbG8=",
                "id": "123e4567-e89b-12d3-a456-426614174000", "ip": "10.0.0.1", "n": 5, "other": "whatever"
            })), None),
            vec![]
        );
        let errs = s.validate(
            &obj(json!({"at": "yesterday", "day": "2023-02-29", "data": "a", "id": "xyz", "ip": "10.0.0"})),
            None,
        );
        assert_eq!(
            messages(&errs),
            vec![
                "spec.at: Invalid value: \"yesterday\": spec.at in body must be of type date-time: \"yesterday\"",
                "spec.day: Invalid value: \"2023-02-29\": spec.day in body must be of type date: \"2023-02-29\"",
                "spec.data: Invalid value: \"a\": spec.data in body must be of type byte: \"a\"",
                "spec.id: Invalid value: \"xyz\": spec.id in body must be of type uuid: \"xyz\"",
                "spec.ip: Invalid value: \"10.0.0\": spec.ip in body must be of type ipv4: \"10.0.0\"",
            ]
        );
        assert_eq!(errs[0].reason, FieldErrorReason::TypeInvalid);
    }

    #[test]
    fn item_and_property_counts() {
        let s = spec_schema(json!({"type": "object", "properties": {
            "few": {"type": "array", "minItems": 2, "items": {"type": "string"}},
            "many": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
            "one": {"type": "array", "maxItems": 1, "items": {"type": "string"}},
            "props": {"type": "object", "minProperties": 1, "additionalProperties": {"type": "string"}},
            "maxprops": {"type": "object", "maxProperties": 1, "additionalProperties": {"type": "string"}}
        }}));
        let errs = s.validate(
            &obj(json!({
                "few": ["a"], "many": ["a", "b", "c"], "one": ["a", "b"],
                "props": {}, "maxprops": {"a": "1", "b": "2"}
            })),
            None,
        );
        assert_eq!(
            messages(&errs),
            vec![
                "spec.few: Invalid value: 1: spec.few in body should have at least 2 items",
                "spec.many: Too many: 3: must have at most 2 items",
                "spec.one: Too many: 2: must have at most 1 item",
                "spec.props: Invalid value: 0: spec.props in body should have at least 1 properties",
                "spec.maxprops: Too many: 2: must have at most 1 item",
            ]
        );
        assert_eq!(errs[1].reason, FieldErrorReason::TooMany);
    }

    #[test]
    fn additional_properties_validate_values_or_forbid_keys() {
        let s = spec_schema(json!({"type": "object", "properties": {
            "limits": {"type": "object", "additionalProperties": {"type": "integer"}},
            "closed": {"type": "object", "additionalProperties": false}
        }}));
        assert_eq!(
            messages(&s.validate(
                &obj(json!({"limits": {"cpu": 1, "mem": "x"}, "closed": {"k": 1}})),
                None
            )),
            vec![
                "spec.limits.mem: Invalid value: \"string\": spec.limits.mem in body must be of type integer: \"string\"",
                "spec.closed: Invalid value: \"k\": spec.closed.k in body is a forbidden property",
            ]
        );
    }

    #[test]
    fn all_of_any_of_one_of_and_not() {
        let s = spec_schema(json!({"type": "object", "properties": {
            "all": {"type": "string", "allOf": [{"minLength": 2}, {"maxLength": 3}]},
            "any": {"type": "string", "anyOf": [{"pattern": "^a"}, {"pattern": "^b"}]},
            "one": {"type": "string", "oneOf": [{"pattern": "^a"}, {"pattern": "b$"}]},
            "not": {"type": "string", "not": {"enum": ["forbidden"]}}
        }}));
        assert_eq!(
            s.validate(
                &obj(json!({"all": "ab", "any": "bx", "one": "ax", "not": "fine"})),
                None
            ),
            vec![]
        );
        assert_eq!(
            messages(&s.validate(
                &obj(json!({"all": "abcd", "any": "c", "one": "ab", "not": "forbidden"})),
                None
            )),
            vec![
                "spec.all: Too long: may not be more than 3 bytes",
                "<nil>: Invalid value: \"\": \"spec.all\" must validate all the schemas (allOf)",
                "<nil>: Invalid value: \"\": \"spec.any\" must validate at least one schema (anyOf)",
                "spec.any: Invalid value: \"c\": spec.any in body should match '^a'",
                "<nil>: Invalid value: \"\": \"spec.one\" must validate one and only one schema (oneOf). Found 2 valid alternatives",
                "<nil>: Invalid value: \"\": \"spec.not\" must not validate the schema (not)",
            ]
        );
    }

    #[test]
    fn int_or_string_accepts_integers_and_strings_only() {
        let s = spec_schema(json!({"type": "object", "properties": {
            "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}
        }}));
        assert_eq!(s.validate(&obj(json!({"port": 80})), None), vec![]);
        assert_eq!(s.validate(&obj(json!({"port": "http"})), None), vec![]);
        let errs = s.validate(&obj(json!({"port": true})), None);
        assert_eq!(
            messages(&errs),
            vec![
                "spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\"",
                "<nil>: Invalid value: \"\": \"spec.port\" must validate at least one schema (anyOf)",
                "spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer: \"boolean\"",
            ]
        );
    }

    #[test]
    fn embedded_resource_needs_api_version_and_kind() {
        let s = spec_schema(json!({"type": "object", "properties": {"template": {
            "type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true
        }}}));
        assert_eq!(
            s.validate(
                &obj(json!({"template": {"apiVersion": "v1", "kind": "Pod"}})),
                None
            ),
            vec![]
        );
        assert_eq!(
            messages(&s.validate(&obj(json!({"template": {"kind": ""}})), None)),
            vec![
                "spec.template.apiVersion: Required value: must not be empty",
                "spec.template.kind: Invalid value: \"\": must not be empty",
            ]
        );
    }

    #[test]
    fn list_type_set_reports_duplicate_items() {
        let s = spec_schema(json!({"type": "object", "properties": {"tags": {
            "type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}
        }}}));
        let errs = s.validate(&obj(json!({"tags": ["a", "b", "a", "a", "b"]})), None);
        assert_eq!(
            messages(&errs),
            vec![
                "spec.tags[2]: Duplicate value: \"a\"",
                "spec.tags[4]: Duplicate value: \"b\""
            ]
        );
        assert_eq!(errs[0].reason, FieldErrorReason::Duplicate);
    }

    #[test]
    fn list_type_map_reports_duplicate_keys() {
        let s = spec_schema(json!({"type": "object", "properties": {
            "ports": {
                "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "required": ["name"], "properties": {
                    "name": {"type": "string"}, "port": {"type": "integer"}
                }}
            },
            "routes": {
                "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["host", "port"],
                "items": {"type": "object", "required": ["host", "port"], "properties": {
                    "host": {"type": "string"}, "port": {"type": "integer"}
                }}
            }
        }}));
        let errs = s.validate(
            &obj(json!({
                "ports": [{"name": "http", "port": 80}, {"name": "http", "port": 8080}],
                "routes": [{"host": "a", "port": 1}, {"host": "a", "port": 2}, {"host": "a", "port": 1}]
            })),
            None,
        );
        assert_eq!(
            messages(&errs),
            vec![
                "spec.ports[1]: Duplicate value: {\"name\":\"http\"}",
                "spec.routes[2]: Duplicate value: {\"host\":\"a\",\"port\":1}",
            ]
        );
    }

    // --- CEL ----------------------------------------------------------------------------------

    fn replicas_schema(rule: Value) -> CompiledSchema {
        spec_schema(json!({
            "type": "object",
            "properties": {"replicas": {"type": "integer"}, "minReplicas": {"type": "integer"}},
            "x-kubernetes-validations": [rule]
        }))
    }

    #[test]
    fn cel_rule_passes_and_fails_with_default_message() {
        let s = replicas_schema(json!({"rule": "self.minReplicas <= self.replicas"}));
        assert_eq!(
            s.validate(&obj(json!({"replicas": 3, "minReplicas": 1})), None),
            vec![]
        );
        assert_eq!(
            s.validate(&obj(json!({"replicas": 1, "minReplicas": 3})), None),
            vec![FieldError {
                field: "spec".into(),
                reason: FieldErrorReason::Invalid,
                message: "Invalid value: failed rule: self.minReplicas <= self.replicas".into(),
            }]
        );
    }

    #[test]
    fn cel_failure_uses_message_then_message_expression() {
        let s = replicas_schema(
            json!({"rule": "self.minReplicas <= self.replicas", "message": "too few replicas"}),
        );
        assert_eq!(
            messages(&s.validate(&obj(json!({"replicas": 1, "minReplicas": 3})), None)),
            vec!["spec: Invalid value: too few replicas"]
        );
        let s = replicas_schema(json!({
            "rule": "self.minReplicas <= self.replicas",
            "message": "too few replicas",
            "messageExpression": "'replicas ' + string(self.replicas) + ' is below ' + string(self.minReplicas)"
        }));
        assert_eq!(
            messages(&s.validate(&obj(json!({"replicas": 1, "minReplicas": 3})), None)),
            vec!["spec: Invalid value: replicas 1 is below 3"]
        );
        // a message expression that does not evaluate falls back to the message
        let s = replicas_schema(json!({
            "rule": "self.minReplicas <= self.replicas",
            "message": "too few replicas",
            "messageExpression": "'missing ' + self.nothing"
        }));
        assert_eq!(
            messages(&s.validate(&obj(json!({"replicas": 1, "minReplicas": 3})), None)),
            vec!["spec: Invalid value: too few replicas"]
        );
    }

    #[test]
    fn cel_reason_and_field_path_shape_the_error() {
        let s = replicas_schema(json!({
            "rule": "self.replicas >= 0", "message": "must not be negative",
            "reason": "FieldValueForbidden", "fieldPath": ".replicas"
        }));
        assert_eq!(
            s.validate(&obj(json!({"replicas": -1})), None),
            vec![FieldError {
                field: "spec.replicas".into(),
                reason: FieldErrorReason::Forbidden,
                message: "Forbidden: must not be negative".into(),
            }]
        );
        let s = replicas_schema(
            json!({"rule": "has(self.replicas)", "reason": "FieldValueRequired", "fieldPath": "['replicas']"}),
        );
        assert_eq!(
            messages(&s.validate(&obj(json!({})), None)),
            vec!["spec.replicas: Required value: failed rule: has(self.replicas)"]
        );
    }

    #[test]
    fn transition_rule_is_skipped_on_create_and_enforced_on_update() {
        let s = spec_schema(json!({
            "type": "object",
            "properties": {"image": {"type": "string", "x-kubernetes-validations": [
                {"rule": "self == oldSelf", "message": "Value is immutable"}
            ]}}
        }));
        let new = obj(json!({"image": "b"}));
        assert_eq!(s.validate(&new, None), vec![]);
        assert_eq!(s.validate(&new, Some(&obj(json!({"image": "b"})))), vec![]);
        assert_eq!(
            messages(&s.validate(&new, Some(&obj(json!({"image": "a"}))))),
            vec!["spec.image: Invalid value: \"b\": Value is immutable"]
        );
        // no old value at that path: skipped
        assert_eq!(s.validate(&new, Some(&obj(json!({})))), vec![]);
    }

    #[test]
    fn optional_old_self_rule_runs_on_create_with_an_absent_old_value() {
        let s = spec_schema(json!({
            "type": "object",
            "properties": {"size": {"type": "integer"}},
            "x-kubernetes-validations": [{
                "rule": "oldSelf.hasValue() ? self.size >= oldSelf.value().size : self.size <= 10",
                "message": "size may only grow, from at most 10",
                "optionalOldSelf": true
            }]
        }));
        assert_eq!(s.validate(&obj(json!({"size": 5})), None), vec![]);
        assert_eq!(
            messages(&s.validate(&obj(json!({"size": 11})), None)),
            vec!["spec: Invalid value: size may only grow, from at most 10"]
        );
        assert_eq!(
            s.validate(&obj(json!({"size": 20})), Some(&obj(json!({"size": 11})))),
            vec![]
        );
        assert_eq!(
            s.validate(&obj(json!({"size": 3})), Some(&obj(json!({"size": 4}))))
                .len(),
            1
        );
    }

    #[test]
    fn transition_rule_in_list_map_items_correlates_by_key() {
        let s = spec_schema(json!({"type": "object", "properties": {"ports": {
            "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "items": {
                "type": "object", "required": ["name"],
                "properties": {"name": {"type": "string"}, "port": {"type": "integer"}},
                "x-kubernetes-validations": [{"rule": "self.port == oldSelf.port", "message": "port is immutable"}]
            }
        }}}));
        let old = obj(json!({"ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}]}));
        let new = obj(
            json!({"ports": [{"name": "b", "port": 2}, {"name": "a", "port": 5}, {"name": "c", "port": 9}]}),
        );
        assert_eq!(
            messages(&s.validate(&new, Some(&old))),
            vec!["spec.ports[1]: Invalid value: port is immutable"]
        );
    }

    #[test]
    fn cel_evaluation_error_is_invalid_naming_the_rule() {
        let s = replicas_schema(json!({"rule": "self.minReplicas <= self.replicas"}));
        assert_eq!(
            messages(&s.validate(&obj(json!({"replicas": 1})), None)),
            vec![
                "spec: Invalid value: \"object\": no such key: minReplicas evaluating rule: self.minReplicas <= self.replicas"
            ]
        );
        let s = replicas_schema(
            json!({"rule": "self.replicas / self.minReplicas > 0", "message": "ratio"}),
        );
        assert_eq!(
            messages(&s.validate(&obj(json!({"replicas": 1, "minReplicas": 0})), None)),
            vec!["spec: Invalid value: \"object\": division by zero evaluating rule: ratio"]
        );
        let s = spec_schema(json!({"type": "object", "properties": {
            "v": {"x-kubernetes-int-or-string": true, "x-kubernetes-validations": [{"rule": "self > 1"}]}
        }}));
        assert_eq!(
            messages(&s.validate(&obj(json!({"v": "x"})), None)),
            vec![
                "spec.v: Invalid value: \"\": 'no such overload': call arguments did not match a supported operator, function or macro signature for rule: self > 1"
            ]
        );
    }

    #[test]
    fn blocking_schema_errors_skip_cel_rules() {
        let s = replicas_schema(json!({"rule": "self.minReplicas <= self.replicas"}));
        assert_eq!(
            messages(&s.validate(&obj(json!({"replicas": "x", "minReplicas": 3})), None)),
            vec![
                "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"",
                "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
            ]
        );
    }

    #[test]
    fn root_rule_sees_type_and_object_meta_and_reports_nil_field() {
        let s = compile(json!({
            "type": "object",
            "x-kubernetes-validations": [{
                "rule": "self.kind == 'Thing' && self.metadata.name.startsWith('a') && !has(self.metadata.labels) && has(self.spec)",
                "message": "bad root"
            }],
            "properties": {"spec": {"type": "object"}}
        }));
        assert_eq!(s.validate(&obj(json!({})), None), vec![]);
        let mut o = obj(json!({}));
        o["metadata"]["name"] = json!("b");
        assert_eq!(
            messages(&s.validate(&o, None)),
            vec!["<nil>: Invalid value: bad root"]
        );
    }

    #[test]
    fn cel_sees_schema_types_escaped_names_and_formats() {
        let s = spec_schema(json!({
            "type": "object",
            "properties": {
                "ratio": {"type": "number"},
                "x-y": {"type": "string"},
                "namespace": {"type": "string"},
                "start": {"type": "string", "format": "date-time"},
                "day": {"type": "string", "format": "date"},
                "end": {"type": "string", "format": "date-time"},
                "timeout": {"type": "string", "format": "duration"},
                "data": {"type": "string", "format": "byte"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}
            },
            "x-kubernetes-validations": [
                {"rule": "self.ratio == 1.0 && type(self.ratio) == double"},
                {"rule": "self.x__dash__y == 'a' && self.__namespace__ == 'ns'"},
                {"rule": "self.end > self.start && self.end - self.start == duration('1h')"},
                {"rule": "self.day < self.start && self.day.getDayOfMonth() == 30"},
                {"rule": "self.timeout < duration('1m') && self.data == b'hi'"},
                {"rule": "self.labels['app.kubernetes.io/name'] == 'x'"}
            ]
        }));
        assert_eq!(
            s.validate(
                &obj(json!({
                    "ratio": 1, "x-y": "a", "namespace": "ns",
                    "start": "2024-01-01T00:00:00Z", "end": "2024-01-01T01:00:00Z", "day": "2023-12-31",
                    "timeout": "30s", "data": "aGk=", "labels": {"app.kubernetes.io/name": "x"}
                })),
                None
            ),
            vec![]
        );
    }

    #[test]
    fn cel_standard_and_kubernetes_functions() {
        let rules = [
            "size(self.items) == 3 && self.items.size() == 3",
            "self.items.all(i, i > 0) && self.items.exists(i, i == 2) && self.items.exists_one(i, i == 3)",
            "self.items.map(i, i * 2).sum() == 12 && self.items.filter(i, i > 1).size() == 2",
            "self.items.isSorted() && self.items.sum() == 6 && self.items.min() == 1 && self.items.max() == 3",
            "self.items.indexOf(1) == 0 && self.items.lastIndexOf(5) == -1",
            "self.name.startsWith('web') && self.name.endsWith('01') && self.name.contains('-')",
            "self.name.matches('^[a-z]+-[0-9]+$') && self.name.find('[0-9]+') == '01' && self.name.findAll('[a-z]') == ['w', 'e', 'b']",
            "self.name.upperAscii() == 'WEB-01' && 'ABC'.lowerAscii() == 'abc' && self.name.indexOf('-') == 3",
            "self.name.split('-') == ['web', '01'] && self.name.substring(4) == '01' && ' x '.trim() == 'x'",
            "sets.contains(self.items, [1, 3]) && sets.intersects(self.items, [3, 9]) && !sets.equivalent(self.items, [1])",
            "cel.bind(total, self.items.sum(), total > 5 && total < 7)",
            "math.greatest(self.items) == 3 && math.least(1, 2) == 1",
            "self.?missing.orValue('dflt') == 'dflt' && has(self.name) && !has(self.missing)",
            "int('5') + 1 == 6 && string(1.5) == '1.5' && double(self.items[0]) == 1.0",
        ];
        let s = spec_schema(json!({
            "type": "object",
            "properties": {
                "items": {"type": "array", "items": {"type": "integer"}},
                "name": {"type": "string"},
                "missing": {"type": "string"}
            },
            "x-kubernetes-validations": rules.iter().map(|r| json!({"rule": r})).collect::<Vec<_>>()
        }));
        assert_eq!(
            s.validate(&obj(json!({"items": [1, 2, 3], "name": "web-01"})), None),
            vec![]
        );
        assert_eq!(
            messages(&s.validate(&obj(json!({"items": [1, 3, 2], "name": "web-01"})), None)),
            vec![
                "spec: Invalid value: failed rule: self.items.isSorted() && self.items.sum() == 6 && self.items.min() == 1 && self.items.max() == 3"
            ]
        );
    }

    #[test]
    fn realistic_scavenger_job_crd() {
        let s = CompiledSchema::compile_at(
            &json!({
                "type": "object",
                "properties": {
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string"},
                    "metadata": {"type": "object"},
                    "spec": {
                        "type": "object",
                        "required": ["image"],
                        "properties": {
                            "image": {"type": "string", "minLength": 1},
                            "parallelism": {"type": "integer", "format": "int32", "minimum": 1, "default": 1},
                            "schedule": {"type": "string"},
                            "mode": {"type": "string", "enum": ["Once", "Continuous"], "default": "Once"},
                            "deadline": {"type": "string", "format": "date-time"},
                            "limits": {
                                "type": "object",
                                "nullable": true,
                                "properties": {
                                    "cpu": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                                    "maxRetries": {"type": "integer", "minimum": 0}
                                }
                            },
                            "targets": {
                                "type": "array",
                                "maxItems": 8,
                                "x-kubernetes-list-type": "map",
                                "x-kubernetes-list-map-keys": ["name"],
                                "items": {
                                    "type": "object",
                                    "required": ["name"],
                                    "properties": {
                                        "name": {"type": "string"},
                                        "weight": {"type": "integer", "minimum": 0, "default": 1}
                                    }
                                }
                            }
                        },
                        "x-kubernetes-validations": [
                            {
                                "rule": "!has(self.limits) || self.limits == null || !has(self.limits.maxRetries) || self.limits.maxRetries <= self.parallelism * 10",
                                "message": "limits.maxRetries must not exceed 10 per worker",
                                "fieldPath": ".limits.maxRetries"
                            },
                            {
                                "rule": "self.mode == 'Once' || has(self.schedule)",
                                "messageExpression": "'mode ' + self.mode + ' requires a schedule'",
                                "reason": "FieldValueRequired",
                                "fieldPath": ".schedule"
                            },
                            {"rule": "self.image == oldSelf.image", "message": "image is immutable"}
                        ]
                    },
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                }
            }),
            "spec.versions[0].schema.openAPIV3Schema",
        )
        .unwrap();
        assert_eq!(s.skipped_rules(), Vec::<String>::new());

        // create: prune, default, validate
        let mut job = json!({
            "apiVersion": "telemesh.io/v1alpha1", "kind": "ScavengerJob",
            "metadata": {"name": "nightly", "namespace": "default"},
            "spec": {"image": "scavenger:1.2", "targets": [{"name": "logs"}], "limits": null, "extra": 1},
            "status": {"phase": "Pending"}
        });
        assert_eq!(s.prune(&mut job), vec!["spec.extra"]);
        s.apply_defaults(&mut job);
        assert_eq!(
            job["spec"],
            json!({"image": "scavenger:1.2", "targets": [{"name": "logs", "weight": 1}], "limits": null, "parallelism": 1, "mode": "Once"})
        );
        assert_eq!(s.validate(&job, None), vec![]);

        // an invalid create
        let bad = json!({
            "apiVersion": "telemesh.io/v1alpha1", "kind": "ScavengerJob", "metadata": {"name": "bad"},
            "spec": {
                "image": "scavenger:1.2", "parallelism": 2, "mode": "Continuous",
                "limits": {"cpu": "500m", "maxRetries": 50},
                "targets": [{"name": "a", "weight": 1}, {"name": "a", "weight": 2}]
            }
        });
        assert_eq!(
            messages(&s.validate(&bad, None)),
            vec![
                "spec.targets[1]: Duplicate value: {\"name\":\"a\"}",
                "spec.limits.maxRetries: Invalid value: limits.maxRetries must not exceed 10 per worker",
                "spec.schedule: Required value: mode Continuous requires a schedule",
            ]
        );
        let zero = json!({
            "apiVersion": "telemesh.io/v1alpha1", "kind": "ScavengerJob", "metadata": {"name": "zero"},
            "spec": {"image": "", "parallelism": 0, "mode": "Sometimes", "deadline": "soon"}
        });
        assert_eq!(
            messages(&s.validate(&zero, None)),
            vec![
                "spec.image: Invalid value: \"\": spec.image in body should be at least 1 chars long",
                "spec.parallelism: Invalid value: 0: spec.parallelism in body should be greater than or equal to 1",
                "spec.mode: Unsupported value: \"Sometimes\": supported values: \"Once\", \"Continuous\"",
                "spec.deadline: Invalid value: \"soon\": spec.deadline in body must be of type date-time: \"soon\"",
                "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
            ]
        );

        // update: the transition rule applies
        let mut updated = job.clone();
        updated["spec"]["image"] = json!("scavenger:2.0");
        assert_eq!(
            messages(&s.validate(&updated, Some(&job))),
            vec!["spec: Invalid value: image is immutable"]
        );
        updated["spec"]["image"] = json!("scavenger:1.2");
        updated["spec"]["parallelism"] = json!(4);
        assert_eq!(s.validate(&updated, Some(&job)), vec![]);
    }
}
