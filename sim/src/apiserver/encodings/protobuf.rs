//! Kubernetes protobuf request bodies (the `k8s\0` envelope around `runtime.Unknown`) decoded to
//! JSON.
//!
//! kubectl and client-go send the bodies of typed requests (`kubectl create configmap|secret|
//! namespace|deployment|job|...`, `kubectl auth can-i`, `kubectl create token`, evictions, ...) as
//! [`CONTENT_TYPE`]. The body is the 4 magic bytes `k8s\0` followed by a `runtime.Unknown`
//! message: `typeMeta` (apiVersion, kind), `raw` (the object, encoded with the Kubernetes
//! `generated.proto` schema of its group), `contentEncoding` and `contentType` (both empty). The
//! simulator stores and serves JSON, so [`decode`] turns such a body into the JSON object the same
//! request would have carried as `application/json`.
//!
//! # Schema
//!
//! The decoding is driven by the upstream schemas: the `generated.proto` files of `k8s.io/api`,
//! `k8s.io/apimachinery`, `k8s.io/apiextensions-apiserver` and `k8s.io/kube-aggregator` v0.33
//! (Kubernetes 1.33, the version of the workspace's `k8s-openapi` feature), one for every group
//! version kube-apiserver serves by default, kept verbatim under `sim/proto/` at their import paths
//! and embedded with `include_str!` (`SCHEMAS`). They are compiled once, at first use, by `protox`
//! (a Rust protobuf compiler) into a `prost-reflect` descriptor pool, and bodies are decoded as
//! `prost-reflect` dynamic messages, then walked generically: no per-kind code. To support another
//! group version, add its `generated.proto` (and any file it imports) under `sim/proto/`, to
//! `SCHEMAS` and a line to `GROUP_VERSIONS`.
//!
//! # Mapping to JSON
//!
//! Field names are the proto field names, which Kubernetes keeps equal to the JSON names. The few
//! types whose JSON form is not their proto form are converted as the Go API server does:
//! `resource.Quantity` becomes its string, `metav1.Time` an RFC 3339 timestamp in seconds and
//! `metav1.MicroTime` one in microseconds (both UTC), `intstr.IntOrString` an integer or a string,
//! `runtime.RawExtension` and `metav1.FieldsV1` the JSON document they hold, the `items`-only
//! wrappers such as `ExtraValue` a plain array, and `bytes` (`Secret.data`, `binaryData`) base64.
//!
//! Protobuf cannot tell every empty value from an absent one, so the omitempty rules are:
//! - strings and byte strings that are empty are omitted (Go writes every non-pointer string
//!   even when empty, so an empty one on the wire is almost always an unset field);
//! - numbers and booleans are kept whenever they are on the wire, zero included: a pointer set to
//!   zero (`replicas: 0`, `gracePeriodSeconds: 0`, `automountServiceAccountToken: false`) means
//!   something and must survive, at the price of non-pointer zeros that Go's JSON would have
//!   omitted (`metadata.generation: 0`, a container's `stdin: false`, status counters);
//! - a zero `Time` (Go's `creationTimestamp: null`) and an empty `RawExtension` are omitted;
//! - messages on the wire are kept even when empty (`"resources": {}`, `"emptyDir": {}`), exactly as
//!   Go's JSON keeps them; lists and maps are omitted when empty.
//!
//! Fields this schema does not know (sent by a newer client) are skipped, as the Go API server
//! skips them.

use std::sync::OnceLock;

use base64::Engine as _;
use prost_reflect::{
    DescriptorPool, DynamicMessage, MapKey, MessageDescriptor, ReflectMessage, Value,
};
use serde_json::{Map, Value as Json};

/// The media type of Kubernetes protobuf bodies.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The 4 bytes every Kubernetes protobuf body starts with: `k8s\0`.
const MAGIC: &[u8; 4] = b"k8s\0";

/// The group versions whose kinds can be decoded: `(group, version, proto package)`.
const GROUP_VERSIONS: &[(&str, &str, &str)] = &[
    ("", "v1", "k8s.io.api.core.v1"),
    (
        "admissionregistration.k8s.io",
        "v1",
        "k8s.io.api.admissionregistration.v1",
    ),
    (
        "apiextensions.k8s.io",
        "v1",
        "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1",
    ),
    (
        "apiregistration.k8s.io",
        "v1",
        "k8s.io.kube_aggregator.pkg.apis.apiregistration.v1",
    ),
    ("apps", "v1", "k8s.io.api.apps.v1"),
    (
        "authentication.k8s.io",
        "v1",
        "k8s.io.api.authentication.v1",
    ),
    ("authorization.k8s.io", "v1", "k8s.io.api.authorization.v1"),
    ("autoscaling", "v1", "k8s.io.api.autoscaling.v1"),
    ("autoscaling", "v2", "k8s.io.api.autoscaling.v2"),
    ("batch", "v1", "k8s.io.api.batch.v1"),
    ("certificates.k8s.io", "v1", "k8s.io.api.certificates.v1"),
    ("coordination.k8s.io", "v1", "k8s.io.api.coordination.v1"),
    ("discovery.k8s.io", "v1", "k8s.io.api.discovery.v1"),
    ("events.k8s.io", "v1", "k8s.io.api.events.v1"),
    (
        "flowcontrol.apiserver.k8s.io",
        "v1",
        "k8s.io.api.flowcontrol.v1",
    ),
    ("networking.k8s.io", "v1", "k8s.io.api.networking.v1"),
    ("node.k8s.io", "v1", "k8s.io.api.node.v1"),
    ("policy", "v1", "k8s.io.api.policy.v1"),
    ("rbac.authorization.k8s.io", "v1", "k8s.io.api.rbac.v1"),
    ("scheduling.k8s.io", "v1", "k8s.io.api.scheduling.v1"),
    ("storage.k8s.io", "v1", "k8s.io.api.storage.v1"),
];

/// The meta kind that any group version may carry (the body of a DELETE).
const DELETE_OPTIONS: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions";
/// The envelope.
const UNKNOWN: &str = "k8s.io.apimachinery.pkg.runtime.Unknown";
// The messages whose JSON form is not an object of their fields.
const QUANTITY: &str = "k8s.io.apimachinery.pkg.api.resource.Quantity";
const TIME: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.Time";
const MICRO_TIME: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime";
const FIELDS_V1: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1";
const RAW_EXTENSION: &str = "k8s.io.apimachinery.pkg.runtime.RawExtension";
const INT_OR_STRING: &str = "k8s.io.apimachinery.pkg.util.intstr.IntOrString";
const SCHEMA_JSON: &str = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSON";
const SCHEMA_OR_BOOL: &str =
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrBool";
const SCHEMA_OR_ARRAY: &str =
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrArray";
const SCHEMA_OR_STRING_ARRAY: &str =
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrStringArray";
/// The CRD schema message, whose JSON names (`$ref`, `x-kubernetes-*`) are no proto names.
const SCHEMA_PROPS: &str =
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps";

/// Go structs embedded with `json:",inline"`: a message field on the wire whose fields are the
/// parent's in JSON, as `(message, field)`. Protobuf has no trace of this, so it is listed here,
/// from the Go types; a unit test checks every supported message against `k8s-openapi`'s schemas.
const INLINE: &[(&str, &str)] = &[
    (
        "k8s.io.api.admissionregistration.v1.NamedRuleWithOperations",
        "ruleWithOperations",
    ),
    (
        "k8s.io.api.admissionregistration.v1.RuleWithOperations",
        "rule",
    ),
    (
        "k8s.io.api.core.v1.ConfigMapEnvSource",
        "localObjectReference",
    ),
    (
        "k8s.io.api.core.v1.ConfigMapKeySelector",
        "localObjectReference",
    ),
    (
        "k8s.io.api.core.v1.ConfigMapProjection",
        "localObjectReference",
    ),
    (
        "k8s.io.api.core.v1.ConfigMapVolumeSource",
        "localObjectReference",
    ),
    (
        "k8s.io.api.core.v1.EphemeralContainer",
        "ephemeralContainerCommon",
    ),
    (
        "k8s.io.api.core.v1.PersistentVolumeSpec",
        "persistentVolumeSource",
    ),
    ("k8s.io.api.core.v1.Probe", "handler"),
    ("k8s.io.api.core.v1.SecretEnvSource", "localObjectReference"),
    (
        "k8s.io.api.core.v1.SecretKeySelector",
        "localObjectReference",
    ),
    (
        "k8s.io.api.core.v1.SecretProjection",
        "localObjectReference",
    ),
    ("k8s.io.api.core.v1.Volume", "volumeSource"),
    ("k8s.io.api.networking.v1.IngressRule", "ingressRuleValue"),
];

/// Fields whose proto name is not their JSON name, as `(message, proto name, JSON name)`.
const RENAMED: &[(&str, &str, &str)] = &[
    (
        "k8s.io.api.admissionregistration.v1.MutatingWebhookConfiguration",
        "Webhooks",
        "webhooks",
    ),
    (
        "k8s.io.api.admissionregistration.v1.ValidatingWebhookConfiguration",
        "Webhooks",
        "webhooks",
    ),
    (
        "k8s.io.api.admissionregistration.v1.Validation",
        "Expression",
        "expression",
    ),
    (
        "k8s.io.api.admissionregistration.v1.Variable",
        "Expression",
        "expression",
    ),
    (
        "k8s.io.api.admissionregistration.v1.Variable",
        "Name",
        "name",
    ),
    (
        "k8s.io.api.authentication.v1.BoundObjectReference",
        "uID",
        "uid",
    ),
    (SCHEMA_PROPS, "schema", "$schema"),
    (SCHEMA_PROPS, "ref", "$ref"),
    (
        SCHEMA_PROPS,
        "xKubernetesPreserveUnknownFields",
        "x-kubernetes-preserve-unknown-fields",
    ),
    (
        SCHEMA_PROPS,
        "xKubernetesEmbeddedResource",
        "x-kubernetes-embedded-resource",
    ),
    (
        SCHEMA_PROPS,
        "xKubernetesIntOrString",
        "x-kubernetes-int-or-string",
    ),
    (
        SCHEMA_PROPS,
        "xKubernetesListMapKeys",
        "x-kubernetes-list-map-keys",
    ),
    (
        SCHEMA_PROPS,
        "xKubernetesListType",
        "x-kubernetes-list-type",
    ),
    (SCHEMA_PROPS, "xKubernetesMapType", "x-kubernetes-map-type"),
    (
        SCHEMA_PROPS,
        "xKubernetesValidations",
        "x-kubernetes-validations",
    ),
    (
        "k8s.io.api.networking.v1.IngressClassParametersReference",
        "aPIGroup",
        "apiGroup",
    ),
];

/// Why a protobuf body could not be decoded. The messages are meant for the client, in the
/// `message` of the API server's `Status` answer; [`DecodeError::status_code`] gives its code.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The body does not start with `k8s\0`.
    #[error(
        "protobuf body does not start with the Kubernetes magic bytes \"k8s\\x00\" (6b 38 73 00)"
    )]
    BadMagic,
    /// The `runtime.Unknown` envelope after the magic bytes is not valid protobuf.
    #[error("protobuf envelope (runtime.Unknown) is malformed: {0}")]
    BadEnvelope(String),
    /// The envelope says the object is compressed or otherwise encoded.
    #[error("protobuf body has contentEncoding {0:?}; only unencoded bodies are supported")]
    UnsupportedEncoding(String),
    /// The envelope wraps something other than a protobuf object.
    #[error("protobuf body wraps contentType {0:?}; only {CONTENT_TYPE} is supported")]
    UnsupportedContentType(String),
    /// The kind is outside the supported group versions.
    #[error(
        "protobuf bodies are supported for the kinds of {}, and DeleteOptions; \
         send {kind} ({api_version}) as JSON",
        supported_group_versions()
    )]
    UnsupportedKind {
        /// The apiVersion of the body (from its envelope, else from the request).
        api_version: String,
        /// The kind of the body.
        kind: String,
    },
    /// The object is not valid protobuf for its kind.
    #[error("protobuf body is not a valid {kind}: {reason}")]
    BadObject {
        /// The kind the body was decoded as.
        kind: String,
        /// What the protobuf decoder found wrong.
        reason: String,
    },
    /// The object decodes, but a value in it has no JSON form.
    #[error("protobuf body for {kind} has an invalid value at {path}: {reason}")]
    BadValue {
        /// The kind the body was decoded as.
        kind: String,
        /// Where the value is, as `spec.template.metadata.labels[app]`.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The embedded schemas do not compile: a bug in this module, not in the request.
    #[error("the Kubernetes protobuf schemas do not compile: {0}")]
    Schema(String),
}

impl DecodeError {
    /// The HTTP status to answer with: 415 Unsupported Media Type for bodies that are well formed
    /// but that this server does not read as protobuf (the client can send JSON instead), 500 for
    /// [`DecodeError::Schema`], and 400 Bad Request for malformed bodies.
    pub fn status_code(&self) -> u16 {
        match self {
            Self::UnsupportedEncoding(_)
            | Self::UnsupportedContentType(_)
            | Self::UnsupportedKind { .. } => 415,
            Self::Schema(_) => 500,
            Self::BadMagic
            | Self::BadEnvelope(_)
            | Self::BadObject { .. }
            | Self::BadValue { .. } => 400,
        }
    }
}

/// Decodes a protobuf body for (`group`, `version`, `kind`) into JSON with `apiVersion` and
/// `kind` set, field names as in the JSON API and omitempty semantics as described in the module
/// documentation.
///
/// The envelope's `typeMeta` names the object's type, as it does for the Go API server; `group`,
/// `version` and `kind` (those of the request's resource) stand in for the parts it leaves empty.
/// The JSON carries the envelope's type, so a body of another kind than the resource's is caught
/// by the same checks as a JSON body of another kind. `DeleteOptions` is accepted under any group
/// version, as Kubernetes registers it in all of them.
///
/// # Errors
///
/// [`DecodeError`] when the body is not a Kubernetes protobuf body, is compressed, is of a kind
/// outside the supported group versions, or does not decode.
pub fn decode(body: &[u8], group: &str, version: &str, kind: &str) -> Result<Json, DecodeError> {
    let envelope = body.strip_prefix(MAGIC).ok_or(DecodeError::BadMagic)?;
    let pool = pool()?;
    let unknown = pool
        .get_message_by_name(UNKNOWN)
        .ok_or_else(|| DecodeError::Schema(format!("{UNKNOWN} is missing")))?;
    let unknown = DynamicMessage::decode(unknown, envelope)
        .map_err(|e| DecodeError::BadEnvelope(e.to_string()))?;

    let encoding = string_field(&unknown, "contentEncoding");
    if !encoding.is_empty() {
        return Err(DecodeError::UnsupportedEncoding(encoding.to_owned()));
    }
    let content_type = string_field(&unknown, "contentType");
    if !content_type.is_empty() && content_type != CONTENT_TYPE {
        return Err(DecodeError::UnsupportedContentType(content_type.to_owned()));
    }

    let type_meta = unknown.get_field_by_name("typeMeta");
    let type_meta = type_meta.as_deref().and_then(Value::as_message);
    let declared = |name| type_meta.map_or("", |m| string_field(m, name));
    let api_version = match declared("apiVersion") {
        "" if group.is_empty() => version.to_owned(),
        "" => format!("{group}/{version}"),
        declared => declared.to_owned(),
    };
    let kind = match declared("kind") {
        "" => kind,
        declared => declared,
    };

    let descriptor = message_descriptor(pool, &api_version, kind).ok_or_else(|| {
        DecodeError::UnsupportedKind {
            api_version: api_version.clone(),
            kind: kind.to_owned(),
        }
    })?;
    let raw = bytes_field(&unknown, "raw");
    let object = DynamicMessage::decode(descriptor, raw).map_err(|e| DecodeError::BadObject {
        kind: kind.to_owned(),
        reason: e.to_string(),
    })?;

    let mut json = Map::new();
    json.insert("apiVersion".to_owned(), Json::String(api_version));
    json.insert("kind".to_owned(), Json::String(kind.to_owned()));
    fields_json(&object, &mut json).map_err(|e| DecodeError::BadValue {
        kind: kind.to_owned(),
        path: e.path(),
        reason: e.reason,
    })?;
    Ok(Json::Object(json))
}

/// The descriptor pool of [`SCHEMAS`], compiled at first use.
fn pool() -> Result<&'static DescriptorPool, DecodeError> {
    static POOL: OnceLock<Result<DescriptorPool, String>> = OnceLock::new();
    POOL.get_or_init(|| compile_embedded(SCHEMAS))
        .as_ref()
        .map_err(|e| DecodeError::Schema(e.clone()))
}

/// Serves embedded `.proto` files, as `(import path, source)`, to the compiler by file name.
struct Embedded(&'static [(&'static str, &'static str)]);

impl protox::file::FileResolver for Embedded {
    fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
        match self.0.iter().find(|(file, _)| *file == name) {
            Some((file, source)) => protox::file::File::from_source(file, source),
            None => Err(protox::Error::file_not_found(name)),
        }
    }
}

/// Compiles embedded `.proto` files, as `(import path, source)`, with everything they import
/// from among them or from protobuf's well-known types (`google/protobuf/*.proto`).
pub(in crate::apiserver) fn compile_embedded(
    files: &'static [(&'static str, &'static str)],
) -> Result<DescriptorPool, String> {
    let mut resolver = protox::file::ChainFileResolver::new();
    resolver.add(Embedded(files));
    resolver.add(protox::file::GoogleFileResolver::new());
    let mut compiler = protox::Compiler::with_file_resolver(resolver);
    compiler.include_imports(true);
    compiler
        .open_files(files.iter().map(|(file, _)| *file))
        .map_err(|e| e.to_string())?;
    Ok(compiler.descriptor_pool())
}

/// The message of `kind` in `api_version`, if that group version is supported.
fn message_descriptor(
    pool: &DescriptorPool,
    api_version: &str,
    kind: &str,
) -> Option<MessageDescriptor> {
    if kind.is_empty() || !kind.chars().all(|c| c.is_ascii_alphanumeric()) {
        return None;
    }
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let name = if kind == "DeleteOptions" {
        DELETE_OPTIONS.to_owned()
    } else {
        let (_, _, package) = GROUP_VERSIONS
            .iter()
            .find(|(g, v, _)| *g == group && *v == version)?;
        format!("{package}.{kind}")
    };
    pool.get_message_by_name(&name)
}

/// The supported group versions, as apiVersions, for error messages.
fn supported_group_versions() -> String {
    let names: Vec<String> = GROUP_VERSIONS
        .iter()
        .map(|(group, version, _)| match group {
            &"" => (*version).to_owned(),
            group => format!("{group}/{version}"),
        })
        .collect();
    names.join(", ")
}

/// A value with no JSON form, and where it is (innermost first, as errors unwind).
#[derive(Debug)]
struct ValueError {
    path: Vec<String>,
    reason: String,
}

impl ValueError {
    fn new(reason: impl Into<String>) -> Self {
        Self {
            path: Vec::new(),
            reason: reason.into(),
        }
    }

    fn at(mut self, segment: String) -> Self {
        self.path.push(segment);
        self
    }

    /// The path, outermost first: `spec.containers[0].ports`, `data[key]`.
    fn path(&self) -> String {
        let mut path = String::new();
        for segment in self.path.iter().rev() {
            if !segment.starts_with('[') && !path.is_empty() {
                path.push('.');
            }
            path.push_str(segment);
        }
        path
    }
}

/// Adds the fields of `message` that are on the wire to `json`, by the module's omitempty rules.
fn fields_json(message: &DynamicMessage, json: &mut Map<String, Json>) -> Result<(), ValueError> {
    let descriptor = message.descriptor();
    let message_name = descriptor.full_name();
    for field in descriptor.fields() {
        if !message.has_field(&field) {
            continue;
        }
        let name = json_name(message_name, field.name());
        let value = message.get_field(&field);
        if is_inline(message_name, field.name()) {
            if let Value::Message(inlined) = value.as_ref() {
                fields_json(inlined, json)?;
            }
            continue;
        }
        let converted = match value.as_ref() {
            Value::List(items) => list_json(items),
            Value::Map(entries) => map_json(entries),
            Value::String(s) if s.is_empty() => Ok(None),
            Value::Bytes(b) if b.is_empty() => Ok(None),
            single => element_json(single),
        }
        .map_err(|e| e.at(name.to_owned()))?;
        if let Some(converted) = converted {
            json.insert(name.to_owned(), converted);
        }
    }
    Ok(())
}

/// Whether `field` of `message` is an embedded Go struct, inlined in JSON.
fn is_inline(message: &str, field: &str) -> bool {
    INLINE.iter().any(|&(m, f)| m == message && f == field)
}

/// The JSON name of `field` of `message`: its proto name, except for the few in [`RENAMED`].
fn json_name<'a>(message: &str, field: &'a str) -> &'a str {
    RENAMED
        .iter()
        .find(|&&(m, f, _)| m == message && f == field)
        .map_or(field, |&(_, _, json)| json)
}

/// A repeated field: an array, or nothing when empty. An element with no JSON value (a zero
/// `Time`) is `null`, as Go writes it.
fn list_json(items: &[Value]) -> Result<Option<Json>, ValueError> {
    if items.is_empty() {
        return Ok(None);
    }
    let mut array = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let element = element_json(item).map_err(|e| e.at(format!("[{i}]")))?;
        array.push(element.unwrap_or(Json::Null));
    }
    Ok(Some(Json::Array(array)))
}

/// A map field: an object with its keys sorted (as Go writes maps), or nothing when empty.
fn map_json(
    entries: &std::collections::HashMap<MapKey, Value>,
) -> Result<Option<Json>, ValueError> {
    if entries.is_empty() {
        return Ok(None);
    }
    let mut sorted: Vec<(String, &Value)> = entries
        .iter()
        .map(|(key, value)| (map_key(key), value))
        .collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut object = Map::new();
    for (key, value) in sorted {
        let element = element_json(value).map_err(|e| e.at(format!("[{key}]")))?;
        object.insert(key, element.unwrap_or(Json::Null));
    }
    Ok(Some(Json::Object(object)))
}

fn map_key(key: &MapKey) -> String {
    match key {
        MapKey::String(s) => s.clone(),
        MapKey::Bool(b) => b.to_string(),
        MapKey::I32(n) => n.to_string(),
        MapKey::I64(n) => n.to_string(),
        MapKey::U32(n) => n.to_string(),
        MapKey::U64(n) => n.to_string(),
    }
}

/// One value (a singular field, a list element or a map value). `None` when the value has no
/// JSON form of its own: a zero `Time`, an empty `RawExtension`.
fn element_json(value: &Value) -> Result<Option<Json>, ValueError> {
    Ok(Some(match value {
        Value::Bool(b) => Json::Bool(*b),
        Value::I32(n) => Json::from(*n),
        Value::I64(n) => Json::from(*n),
        Value::U32(n) => Json::from(*n),
        Value::U64(n) => Json::from(*n),
        Value::EnumNumber(n) => Json::from(*n),
        Value::F32(f) => float_json(f64::from(*f))?,
        Value::F64(f) => float_json(*f)?,
        Value::String(s) => Json::String(s.clone()),
        Value::Bytes(b) => Json::String(base64::engine::general_purpose::STANDARD.encode(b)),
        Value::Message(message) => return message_json(message),
        Value::List(items) => list_json(items)?.unwrap_or_else(|| Json::Array(Vec::new())),
        Value::Map(entries) => map_json(entries)?.unwrap_or_else(|| Json::Object(Map::new())),
    }))
}

fn float_json(f: f64) -> Result<Json, ValueError> {
    serde_json::Number::from_f64(f)
        .map(Json::Number)
        .ok_or_else(|| ValueError::new(format!("{f} is not a JSON number")))
}

/// A message: the special types in their JSON form, any other as an object of its fields.
fn message_json(message: &DynamicMessage) -> Result<Option<Json>, ValueError> {
    let descriptor = message.descriptor();
    let json = match descriptor.full_name() {
        QUANTITY => match string_field(message, "string") {
            "" => Json::String("0".to_owned()),
            quantity => Json::String(quantity.to_owned()),
        },
        TIME => return time_json(message, false),
        MICRO_TIME => return time_json(message, true),
        INT_OR_STRING => int_or_string_json(message)?,
        RAW_EXTENSION | FIELDS_V1 | SCHEMA_JSON => {
            // `raw`, `Raw` and `raw`: field 1 in all three.
            let raw = match message.get_field_by_number(1) {
                Some(std::borrow::Cow::Borrowed(Value::Bytes(raw))) => raw.as_ref(),
                _ => &[],
            };
            if raw.is_empty() {
                return Ok(None);
            }
            serde_json::from_slice(raw)
                .map_err(|e| ValueError::new(format!("raw is not a JSON document: {e}")))?
        }
        SCHEMA_OR_BOOL | SCHEMA_OR_ARRAY | SCHEMA_OR_STRING_ARRAY => {
            return schema_or_json(message);
        }
        _ => {
            if let Some(items) = string_list_wrapper(&descriptor) {
                let value = message.get_field(&items);
                return Ok(Some(match value.as_ref() {
                    Value::List(list) => {
                        list_json(list)?.unwrap_or_else(|| Json::Array(Vec::new()))
                    }
                    _ => Json::Array(Vec::new()),
                }));
            }
            let mut object = Map::new();
            fields_json(message, &mut object)?;
            Json::Object(object)
        }
    };
    Ok(Some(json))
}

/// The CRD schema unions (`JSONSchemaPropsOrBool`, `...OrArray`, `...OrStringArray`), written as
/// their Go `MarshalJSON` writes them: the schema when there is one, else the other member (a
/// list wins over a schema in the two array forms, and a bare `OrBool` is its `allows`).
fn schema_or_json(message: &DynamicMessage) -> Result<Option<Json>, ValueError> {
    let field = |name: &str| {
        message
            .descriptor()
            .get_field_by_name(name)
            .filter(|field| message.has_field(field))
            .map(|field| message.get_field(&field).into_owned())
    };
    // Field 2 of OrArray (`jSONSchemas`) and OrStringArray (`property`) is the list.
    let list = message
        .descriptor()
        .get_field(2)
        .filter(|field| field.is_list() && message.has_field(field))
        .map(|field| message.get_field(&field).into_owned());
    if let Some(Value::List(items)) = &list {
        return list_json(items);
    }
    if let Some(schema) = field("schema") {
        return element_json(&schema);
    }
    if message.descriptor().full_name() == SCHEMA_OR_BOOL {
        let allows = matches!(field("allows"), Some(Value::Bool(true)));
        return Ok(Some(Json::Bool(allows)));
    }
    Ok(None)
}

/// The `items` field of a message that is a Go `[]string` type with a message of its own on the
/// wire (`ExtraValue`, `Verbs`): a plain array in JSON. Other single-`items` messages, such as
/// `DownwardAPIProjection`, hold messages and stay objects.
fn string_list_wrapper(descriptor: &MessageDescriptor) -> Option<prost_reflect::FieldDescriptor> {
    let mut fields = descriptor.fields();
    let items = fields.next()?;
    let only = fields.next().is_none();
    (only
        && items.name() == "items"
        && items.is_list()
        && items.kind() == prost_reflect::Kind::String)
        .then_some(items)
}

/// `metav1.Time` (RFC 3339, seconds) or `metav1.MicroTime` (RFC 3339, microseconds), in UTC;
/// `None` for the zero time, which Go sends as an empty message.
fn time_json(message: &DynamicMessage, micro: bool) -> Result<Option<Json>, ValueError> {
    let (seconds, nanos) = match (int_field(message, "seconds"), int_field(message, "nanos")) {
        (None, None) => return Ok(None),
        (seconds, nanos) => (seconds.unwrap_or(0), nanos.unwrap_or(0)),
    };
    if !(0..1_000_000_000).contains(&nanos) {
        return Err(ValueError::new(format!(
            "{nanos} is out of range for nanos"
        )));
    }
    let t = jiff::Timestamp::from_second(seconds)
        .map_err(|e| ValueError::new(format!("{seconds} seconds is not a time: {e}")))?
        .to_zoned(jiff::tz::TimeZone::UTC);
    if t.year() < 0 {
        return Err(ValueError::new(format!(
            "{seconds} seconds is before year 0"
        )));
    }
    let fraction = if micro {
        format!(".{:06}", nanos / 1000)
    } else {
        String::new()
    };
    Ok(Some(Json::String(format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}{fraction}Z",
        t.year(),
        t.month(),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    ))))
}

/// `intstr.IntOrString`: its `intVal` when `type` is 0, its `strVal` when it is 1.
fn int_or_string_json(message: &DynamicMessage) -> Result<Json, ValueError> {
    match int_field(message, "type").unwrap_or(0) {
        0 => Ok(Json::from(int_field(message, "intVal").unwrap_or(0))),
        1 => Ok(Json::String(string_field(message, "strVal").to_owned())),
        other => Err(ValueError::new(format!(
            "IntOrString of unknown type {other}"
        ))),
    }
}

/// A singular string field of `message`, `""` when unset.
fn string_field<'a>(message: &'a DynamicMessage, name: &str) -> &'a str {
    message
        .get_field_by_name(name)
        .and_then(|value| match value {
            std::borrow::Cow::Borrowed(Value::String(s)) => Some(s.as_str()),
            _ => None,
        })
        .unwrap_or("")
}

/// A singular bytes field of `message`, empty when unset.
fn bytes_field<'a>(message: &'a DynamicMessage, name: &str) -> &'a [u8] {
    message
        .get_field_by_name(name)
        .and_then(|value| match value {
            std::borrow::Cow::Borrowed(Value::Bytes(b)) => Some(b.as_ref()),
            _ => None,
        })
        .unwrap_or(&[])
}

/// A singular integer field of `message`, `None` when not on the wire.
fn int_field(message: &DynamicMessage, name: &str) -> Option<i64> {
    let field = message.descriptor().get_field_by_name(name)?;
    if !message.has_field(&field) {
        return None;
    }
    match message.get_field(&field).as_ref() {
        Value::I32(n) => Some(i64::from(*n)),
        Value::I64(n) => Some(*n),
        _ => None,
    }
}

/// `(import path, source)` of a schema kept under `sim/proto/` at its import path.
macro_rules! upstream {
    ($path:literal) => {
        ($path, include_str!(concat!("../../../proto/", $path)))
    };
}

/// The upstream schemas, as `(import path, source)`: the `generated.proto` files of
/// `k8s.io/apimachinery`, `k8s.io/api`, `k8s.io/apiextensions-apiserver` and
/// `k8s.io/kube-aggregator` v0.33 (Kubernetes 1.33, Apache-2.0, Copyright The Kubernetes Authors),
/// kept verbatim under `sim/proto/` at their import paths (see the README there).
const SCHEMAS: &[(&str, &str)] = &[
    upstream!("k8s.io/apimachinery/pkg/runtime/schema/generated.proto"),
    upstream!("k8s.io/apimachinery/pkg/runtime/generated.proto"),
    upstream!("k8s.io/apimachinery/pkg/util/intstr/generated.proto"),
    upstream!("k8s.io/apimachinery/pkg/api/resource/generated.proto"),
    upstream!("k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto"),
    upstream!("k8s.io/api/core/v1/generated.proto"),
    upstream!("k8s.io/api/admissionregistration/v1/generated.proto"),
    upstream!("k8s.io/api/apps/v1/generated.proto"),
    upstream!("k8s.io/api/authentication/v1/generated.proto"),
    upstream!("k8s.io/api/authorization/v1/generated.proto"),
    upstream!("k8s.io/api/autoscaling/v1/generated.proto"),
    upstream!("k8s.io/api/autoscaling/v2/generated.proto"),
    upstream!("k8s.io/api/batch/v1/generated.proto"),
    upstream!("k8s.io/api/certificates/v1/generated.proto"),
    upstream!("k8s.io/api/coordination/v1/generated.proto"),
    upstream!("k8s.io/api/discovery/v1/generated.proto"),
    upstream!("k8s.io/api/events/v1/generated.proto"),
    upstream!("k8s.io/api/flowcontrol/v1/generated.proto"),
    upstream!("k8s.io/api/networking/v1/generated.proto"),
    upstream!("k8s.io/api/node/v1/generated.proto"),
    upstream!("k8s.io/api/policy/v1/generated.proto"),
    upstream!("k8s.io/api/rbac/v1/generated.proto"),
    upstream!("k8s.io/api/scheduling/v1/generated.proto"),
    upstream!("k8s.io/api/storage/v1/generated.proto"),
    upstream!("k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1/generated.proto"),
    upstream!("k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/generated.proto"),
];

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
