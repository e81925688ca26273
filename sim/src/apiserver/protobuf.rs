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
//! The decoding is driven by the upstream schemas: the `generated.proto` files of `k8s.io/api` and
//! `k8s.io/apimachinery` v0.33 (Kubernetes 1.33, the version of the workspace's `k8s-openapi`
//! feature) for the group versions in `SCHEMAS`, with comments, blank lines and `option` lines
//! removed and nothing else changed. They are compiled once, at first use, by `protox` (a Rust
//! protobuf compiler) into a `prost-reflect` descriptor pool, and bodies are decoded as
//! `prost-reflect` dynamic messages, then walked generically: no per-kind code. To support another
//! group version, add its `generated.proto` (and any file it imports) to `SCHEMAS` and a line to
//! `GROUP_VERSIONS`.
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
    ("apps", "v1", "k8s.io.api.apps.v1"),
    ("batch", "v1", "k8s.io.api.batch.v1"),
    ("policy", "v1", "k8s.io.api.policy.v1"),
    ("autoscaling", "v1", "k8s.io.api.autoscaling.v1"),
    ("autoscaling", "v2", "k8s.io.api.autoscaling.v2"),
    ("scheduling.k8s.io", "v1", "k8s.io.api.scheduling.v1"),
    ("coordination.k8s.io", "v1", "k8s.io.api.coordination.v1"),
    ("events.k8s.io", "v1", "k8s.io.api.events.v1"),
    ("authorization.k8s.io", "v1", "k8s.io.api.authorization.v1"),
    (
        "authentication.k8s.io",
        "v1",
        "k8s.io.api.authentication.v1",
    ),
    ("rbac.authorization.k8s.io", "v1", "k8s.io.api.rbac.v1"),
    ("networking.k8s.io", "v1", "k8s.io.api.networking.v1"),
    ("certificates.k8s.io", "v1", "k8s.io.api.certificates.v1"),
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

/// Go structs embedded with `json:",inline"`: a message field on the wire whose fields are the
/// parent's in JSON, as `(message, field)`. Protobuf has no trace of this, so it is listed here,
/// from the Go types; a unit test checks every supported message against `k8s-openapi`'s schemas.
const INLINE: &[(&str, &str)] = &[
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
        "k8s.io.api.authentication.v1.BoundObjectReference",
        "uID",
        "uid",
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
    POOL.get_or_init(compile)
        .as_ref()
        .map_err(|e| DecodeError::Schema(e.clone()))
}

/// Serves [`SCHEMAS`] to the compiler by file name.
struct Schemas;

impl protox::file::FileResolver for Schemas {
    fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
        match SCHEMAS.iter().find(|(file, _)| *file == name) {
            Some((file, source)) => protox::file::File::from_source(file, source),
            None => Err(protox::Error::file_not_found(name)),
        }
    }
}

fn compile() -> Result<DescriptorPool, String> {
    let mut compiler = protox::Compiler::with_file_resolver(Schemas);
    compiler.include_imports(true);
    compiler
        .open_files(SCHEMAS.iter().map(|(file, _)| *file))
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
        RAW_EXTENSION | FIELDS_V1 => {
            // `raw` in one, `Raw` in the other: field 1 in both.
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

/// The upstream schemas, as `(import path, source)`: the `generated.proto` files of
/// `k8s.io/apimachinery` and `k8s.io/api` v0.33 (Kubernetes 1.33, Apache-2.0, Copyright The
/// Kubernetes Authors) with comments, blank lines and `option` lines removed. Regenerate by
/// copying the files of the wanted release and stripping them the same way.
const SCHEMAS: &[(&str, &str)] = &[
    (
        "k8s.io/apimachinery/pkg/runtime/schema/generated.proto",
        r#"syntax = "proto2";
package k8s.io.apimachinery.pkg.runtime.schema;
"#,
    ),
    (
        "k8s.io/apimachinery/pkg/runtime/generated.proto",
        r#"syntax = "proto2";
package k8s.io.apimachinery.pkg.runtime;
message RawExtension {
  optional bytes raw = 1;
}
message TypeMeta {
  optional string apiVersion = 1;
  optional string kind = 2;
}
message Unknown {
  optional TypeMeta typeMeta = 1;
  optional bytes raw = 2;
  optional string contentEncoding = 3;
  optional string contentType = 4;
}
"#,
    ),
    (
        "k8s.io/apimachinery/pkg/util/intstr/generated.proto",
        r#"syntax = "proto2";
package k8s.io.apimachinery.pkg.util.intstr;
message IntOrString {
  optional int64 type = 1;
  optional int32 intVal = 2;
  optional string strVal = 3;
}
"#,
    ),
    (
        "k8s.io/apimachinery/pkg/api/resource/generated.proto",
        r#"syntax = "proto2";
package k8s.io.apimachinery.pkg.api.resource;
message Quantity {
  optional string string = 1;
}
message QuantityValue {
  optional string string = 1;
}
"#,
    ),
    (
        "k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto",
        r#"syntax = "proto2";
package k8s.io.apimachinery.pkg.apis.meta.v1;
import "k8s.io/apimachinery/pkg/runtime/generated.proto";
import "k8s.io/apimachinery/pkg/runtime/schema/generated.proto";
message APIGroup {
  optional string name = 1;
  repeated GroupVersionForDiscovery versions = 2;
  optional GroupVersionForDiscovery preferredVersion = 3;
  repeated ServerAddressByClientCIDR serverAddressByClientCIDRs = 4;
}
message APIGroupList {
  repeated APIGroup groups = 1;
}
message APIResource {
  optional string name = 1;
  optional string singularName = 6;
  optional bool namespaced = 2;
  optional string group = 8;
  optional string version = 9;
  optional string kind = 3;
  optional Verbs verbs = 4;
  repeated string shortNames = 5;
  repeated string categories = 7;
  optional string storageVersionHash = 10;
}
message APIResourceList {
  optional string groupVersion = 1;
  repeated APIResource resources = 2;
}
message APIVersions {
  repeated string versions = 1;
  repeated ServerAddressByClientCIDR serverAddressByClientCIDRs = 2;
}
message ApplyOptions {
  repeated string dryRun = 1;
  optional bool force = 2;
  optional string fieldManager = 3;
}
message Condition {
  optional string type = 1;
  optional string status = 2;
  optional int64 observedGeneration = 3;
  optional Time lastTransitionTime = 4;
  optional string reason = 5;
  optional string message = 6;
}
message CreateOptions {
  repeated string dryRun = 1;
  optional string fieldManager = 3;
  optional string fieldValidation = 4;
}
message DeleteOptions {
  optional int64 gracePeriodSeconds = 1;
  optional Preconditions preconditions = 2;
  optional bool orphanDependents = 3;
  optional string propagationPolicy = 4;
  repeated string dryRun = 5;
  optional bool ignoreStoreReadErrorWithClusterBreakingPotential = 6;
}
message Duration {
  optional int64 duration = 1;
}
message FieldSelectorRequirement {
  optional string key = 1;
  optional string operator = 2;
  repeated string values = 3;
}
message FieldsV1 {
  optional bytes Raw = 1;
}
message GetOptions {
  optional string resourceVersion = 1;
}
message GroupKind {
  optional string group = 1;
  optional string kind = 2;
}
message GroupResource {
  optional string group = 1;
  optional string resource = 2;
}
message GroupVersion {
  optional string group = 1;
  optional string version = 2;
}
message GroupVersionForDiscovery {
  optional string groupVersion = 1;
  optional string version = 2;
}
message GroupVersionKind {
  optional string group = 1;
  optional string version = 2;
  optional string kind = 3;
}
message GroupVersionResource {
  optional string group = 1;
  optional string version = 2;
  optional string resource = 3;
}
message LabelSelector {
  map<string, string> matchLabels = 1;
  repeated LabelSelectorRequirement matchExpressions = 2;
}
message LabelSelectorRequirement {
  optional string key = 1;
  optional string operator = 2;
  repeated string values = 3;
}
message List {
  optional ListMeta metadata = 1;
  repeated k8s.io.apimachinery.pkg.runtime.RawExtension items = 2;
}
message ListMeta {
  optional string selfLink = 1;
  optional string resourceVersion = 2;
  optional string continue = 3;
  optional int64 remainingItemCount = 4;
}
message ListOptions {
  optional string labelSelector = 1;
  optional string fieldSelector = 2;
  optional bool watch = 3;
  optional bool allowWatchBookmarks = 9;
  optional string resourceVersion = 4;
  optional string resourceVersionMatch = 10;
  optional int64 timeoutSeconds = 5;
  optional int64 limit = 7;
  optional string continue = 8;
  optional bool sendInitialEvents = 11;
}
message ManagedFieldsEntry {
  optional string manager = 1;
  optional string operation = 2;
  optional string apiVersion = 3;
  optional Time time = 4;
  optional string fieldsType = 6;
  optional FieldsV1 fieldsV1 = 7;
  optional string subresource = 8;
}
message MicroTime {
  optional int64 seconds = 1;
  optional int32 nanos = 2;
}
message ObjectMeta {
  optional string name = 1;
  optional string generateName = 2;
  optional string namespace = 3;
  optional string selfLink = 4;
  optional string uid = 5;
  optional string resourceVersion = 6;
  optional int64 generation = 7;
  optional Time creationTimestamp = 8;
  optional Time deletionTimestamp = 9;
  optional int64 deletionGracePeriodSeconds = 10;
  map<string, string> labels = 11;
  map<string, string> annotations = 12;
  repeated OwnerReference ownerReferences = 13;
  repeated string finalizers = 14;
  repeated ManagedFieldsEntry managedFields = 17;
}
message OwnerReference {
  optional string apiVersion = 5;
  optional string kind = 1;
  optional string name = 3;
  optional string uid = 4;
  optional bool controller = 6;
  optional bool blockOwnerDeletion = 7;
}
message PartialObjectMetadata {
  optional ObjectMeta metadata = 1;
}
message PartialObjectMetadataList {
  optional ListMeta metadata = 1;
  repeated PartialObjectMetadata items = 2;
}
message Patch {
}
message PatchOptions {
  repeated string dryRun = 1;
  optional bool force = 2;
  optional string fieldManager = 3;
  optional string fieldValidation = 4;
}
message Preconditions {
  optional string uid = 1;
  optional string resourceVersion = 2;
}
message RootPaths {
  repeated string paths = 1;
}
message ServerAddressByClientCIDR {
  optional string clientCIDR = 1;
  optional string serverAddress = 2;
}
message Status {
  optional ListMeta metadata = 1;
  optional string status = 2;
  optional string message = 3;
  optional string reason = 4;
  optional StatusDetails details = 5;
  optional int32 code = 6;
}
message StatusCause {
  optional string reason = 1;
  optional string message = 2;
  optional string field = 3;
}
message StatusDetails {
  optional string name = 1;
  optional string group = 2;
  optional string kind = 3;
  optional string uid = 6;
  repeated StatusCause causes = 4;
  optional int32 retryAfterSeconds = 5;
}
message TableOptions {
  optional string includeObject = 1;
}
message Time {
  optional int64 seconds = 1;
  optional int32 nanos = 2;
}
message Timestamp {
  optional int64 seconds = 1;
  optional int32 nanos = 2;
}
message TypeMeta {
  optional string kind = 1;
  optional string apiVersion = 2;
}
message UpdateOptions {
  repeated string dryRun = 1;
  optional string fieldManager = 2;
  optional string fieldValidation = 3;
}
message Verbs {
  repeated string items = 1;
}
message WatchEvent {
  optional string type = 1;
  optional k8s.io.apimachinery.pkg.runtime.RawExtension object = 2;
}
"#,
    ),
    (
        "k8s.io/api/core/v1/generated.proto",
        r#"syntax = "proto2";
package k8s.io.api.core.v1;
import "k8s.io/apimachinery/pkg/api/resource/generated.proto";
import "k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto";
import "k8s.io/apimachinery/pkg/runtime/generated.proto";
import "k8s.io/apimachinery/pkg/runtime/schema/generated.proto";
import "k8s.io/apimachinery/pkg/util/intstr/generated.proto";
message AWSElasticBlockStoreVolumeSource {
  optional string volumeID = 1;
  optional string fsType = 2;
  optional int32 partition = 3;
  optional bool readOnly = 4;
}
message Affinity {
  optional NodeAffinity nodeAffinity = 1;
  optional PodAffinity podAffinity = 2;
  optional PodAntiAffinity podAntiAffinity = 3;
}
message AppArmorProfile {
  optional string type = 1;
  optional string localhostProfile = 2;
}
message AttachedVolume {
  optional string name = 1;
  optional string devicePath = 2;
}
message AvoidPods {
  repeated PreferAvoidPodsEntry preferAvoidPods = 1;
}
message AzureDiskVolumeSource {
  optional string diskName = 1;
  optional string diskURI = 2;
  optional string cachingMode = 3;
  optional string fsType = 4;
  optional bool readOnly = 5;
  optional string kind = 6;
}
message AzureFilePersistentVolumeSource {
  optional string secretName = 1;
  optional string shareName = 2;
  optional bool readOnly = 3;
  optional string secretNamespace = 4;
}
message AzureFileVolumeSource {
  optional string secretName = 1;
  optional string shareName = 2;
  optional bool readOnly = 3;
}
message Binding {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional ObjectReference target = 2;
}
message CSIPersistentVolumeSource {
  optional string driver = 1;
  optional string volumeHandle = 2;
  optional bool readOnly = 3;
  optional string fsType = 4;
  map<string, string> volumeAttributes = 5;
  optional SecretReference controllerPublishSecretRef = 6;
  optional SecretReference nodeStageSecretRef = 7;
  optional SecretReference nodePublishSecretRef = 8;
  optional SecretReference controllerExpandSecretRef = 9;
  optional SecretReference nodeExpandSecretRef = 10;
}
message CSIVolumeSource {
  optional string driver = 1;
  optional bool readOnly = 2;
  optional string fsType = 3;
  map<string, string> volumeAttributes = 4;
  optional LocalObjectReference nodePublishSecretRef = 5;
}
message Capabilities {
  repeated string add = 1;
  repeated string drop = 2;
}
message CephFSPersistentVolumeSource {
  repeated string monitors = 1;
  optional string path = 2;
  optional string user = 3;
  optional string secretFile = 4;
  optional SecretReference secretRef = 5;
  optional bool readOnly = 6;
}
message CephFSVolumeSource {
  repeated string monitors = 1;
  optional string path = 2;
  optional string user = 3;
  optional string secretFile = 4;
  optional LocalObjectReference secretRef = 5;
  optional bool readOnly = 6;
}
message CinderPersistentVolumeSource {
  optional string volumeID = 1;
  optional string fsType = 2;
  optional bool readOnly = 3;
  optional SecretReference secretRef = 4;
}
message CinderVolumeSource {
  optional string volumeID = 1;
  optional string fsType = 2;
  optional bool readOnly = 3;
  optional LocalObjectReference secretRef = 4;
}
message ClientIPConfig {
  optional int32 timeoutSeconds = 1;
}
message ClusterTrustBundleProjection {
  optional string name = 1;
  optional string signerName = 2;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelector labelSelector = 3;
  optional bool optional = 5;
  optional string path = 4;
}
message ComponentCondition {
  optional string type = 1;
  optional string status = 2;
  optional string message = 3;
  optional string error = 4;
}
message ComponentStatus {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  repeated ComponentCondition conditions = 2;
}
message ComponentStatusList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated ComponentStatus items = 2;
}
message ConfigMap {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional bool immutable = 4;
  map<string, string> data = 2;
  map<string, bytes> binaryData = 3;
}
message ConfigMapEnvSource {
  optional LocalObjectReference localObjectReference = 1;
  optional bool optional = 2;
}
message ConfigMapKeySelector {
  optional LocalObjectReference localObjectReference = 1;
  optional string key = 2;
  optional bool optional = 3;
}
message ConfigMapList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated ConfigMap items = 2;
}
message ConfigMapNodeConfigSource {
  optional string namespace = 1;
  optional string name = 2;
  optional string uid = 3;
  optional string resourceVersion = 4;
  optional string kubeletConfigKey = 5;
}
message ConfigMapProjection {
  optional LocalObjectReference localObjectReference = 1;
  repeated KeyToPath items = 2;
  optional bool optional = 4;
}
message ConfigMapVolumeSource {
  optional LocalObjectReference localObjectReference = 1;
  repeated KeyToPath items = 2;
  optional int32 defaultMode = 3;
  optional bool optional = 4;
}
message Container {
  optional string name = 1;
  optional string image = 2;
  repeated string command = 3;
  repeated string args = 4;
  optional string workingDir = 5;
  repeated ContainerPort ports = 6;
  repeated EnvFromSource envFrom = 19;
  repeated EnvVar env = 7;
  optional ResourceRequirements resources = 8;
  repeated ContainerResizePolicy resizePolicy = 23;
  optional string restartPolicy = 24;
  repeated VolumeMount volumeMounts = 9;
  repeated VolumeDevice volumeDevices = 21;
  optional Probe livenessProbe = 10;
  optional Probe readinessProbe = 11;
  optional Probe startupProbe = 22;
  optional Lifecycle lifecycle = 12;
  optional string terminationMessagePath = 13;
  optional string terminationMessagePolicy = 20;
  optional string imagePullPolicy = 14;
  optional SecurityContext securityContext = 15;
  optional bool stdin = 16;
  optional bool stdinOnce = 17;
  optional bool tty = 18;
}
message ContainerImage {
  repeated string names = 1;
  optional int64 sizeBytes = 2;
}
message ContainerPort {
  optional string name = 1;
  optional int32 hostPort = 2;
  optional int32 containerPort = 3;
  optional string protocol = 4;
  optional string hostIP = 5;
}
message ContainerResizePolicy {
  optional string resourceName = 1;
  optional string restartPolicy = 2;
}
message ContainerState {
  optional ContainerStateWaiting waiting = 1;
  optional ContainerStateRunning running = 2;
  optional ContainerStateTerminated terminated = 3;
}
message ContainerStateRunning {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time startedAt = 1;
}
message ContainerStateTerminated {
  optional int32 exitCode = 1;
  optional int32 signal = 2;
  optional string reason = 3;
  optional string message = 4;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time startedAt = 5;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time finishedAt = 6;
  optional string containerID = 7;
}
message ContainerStateWaiting {
  optional string reason = 1;
  optional string message = 2;
}
message ContainerStatus {
  optional string name = 1;
  optional ContainerState state = 2;
  optional ContainerState lastState = 3;
  optional bool ready = 4;
  optional int32 restartCount = 5;
  optional string image = 6;
  optional string imageID = 7;
  optional string containerID = 8;
  optional bool started = 9;
  map<string, k8s.io.apimachinery.pkg.api.resource.Quantity> allocatedResources = 10;
  optional ResourceRequirements resources = 11;
  repeated VolumeMountStatus volumeMounts = 12;
  optional ContainerUser user = 13;
  repeated ResourceStatus allocatedResourcesStatus = 14;
  optional string stopSignal = 15;
}
message ContainerUser {
  optional LinuxContainerUser linux = 1;
}
message DaemonEndpoint {
  optional int32 Port = 1;
}
message DownwardAPIProjection {
  repeated DownwardAPIVolumeFile items = 1;
}
message DownwardAPIVolumeFile {
  optional string path = 1;
  optional ObjectFieldSelector fieldRef = 2;
  optional ResourceFieldSelector resourceFieldRef = 3;
  optional int32 mode = 4;
}
message DownwardAPIVolumeSource {
  repeated DownwardAPIVolumeFile items = 1;
  optional int32 defaultMode = 2;
}
message EmptyDirVolumeSource {
  optional string medium = 1;
  optional k8s.io.apimachinery.pkg.api.resource.Quantity sizeLimit = 2;
}
message EndpointAddress {
  optional string ip = 1;
  optional string hostname = 3;
  optional string nodeName = 4;
  optional ObjectReference targetRef = 2;
}
message EndpointPort {
  optional string name = 1;
  optional int32 port = 2;
  optional string protocol = 3;
  optional string appProtocol = 4;
}
message EndpointSubset {
  repeated EndpointAddress addresses = 1;
  repeated EndpointAddress notReadyAddresses = 2;
  repeated EndpointPort ports = 3;
}
message Endpoints {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  repeated EndpointSubset subsets = 2;
}
message EndpointsList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated Endpoints items = 2;
}
message EnvFromSource {
  optional string prefix = 1;
  optional ConfigMapEnvSource configMapRef = 2;
  optional SecretEnvSource secretRef = 3;
}
message EnvVar {
  optional string name = 1;
  optional string value = 2;
  optional EnvVarSource valueFrom = 3;
}
message EnvVarSource {
  optional ObjectFieldSelector fieldRef = 1;
  optional ResourceFieldSelector resourceFieldRef = 2;
  optional ConfigMapKeySelector configMapKeyRef = 3;
  optional SecretKeySelector secretKeyRef = 4;
}
message EphemeralContainer {
  optional EphemeralContainerCommon ephemeralContainerCommon = 1;
  optional string targetContainerName = 2;
}
message EphemeralContainerCommon {
  optional string name = 1;
  optional string image = 2;
  repeated string command = 3;
  repeated string args = 4;
  optional string workingDir = 5;
  repeated ContainerPort ports = 6;
  repeated EnvFromSource envFrom = 19;
  repeated EnvVar env = 7;
  optional ResourceRequirements resources = 8;
  repeated ContainerResizePolicy resizePolicy = 23;
  optional string restartPolicy = 24;
  repeated VolumeMount volumeMounts = 9;
  repeated VolumeDevice volumeDevices = 21;
  optional Probe livenessProbe = 10;
  optional Probe readinessProbe = 11;
  optional Probe startupProbe = 22;
  optional Lifecycle lifecycle = 12;
  optional string terminationMessagePath = 13;
  optional string terminationMessagePolicy = 20;
  optional string imagePullPolicy = 14;
  optional SecurityContext securityContext = 15;
  optional bool stdin = 16;
  optional bool stdinOnce = 17;
  optional bool tty = 18;
}
message EphemeralVolumeSource {
  optional PersistentVolumeClaimTemplate volumeClaimTemplate = 1;
}
message Event {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional ObjectReference involvedObject = 2;
  optional string reason = 3;
  optional string message = 4;
  optional EventSource source = 5;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time firstTimestamp = 6;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time lastTimestamp = 7;
  optional int32 count = 8;
  optional string type = 9;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime eventTime = 10;
  optional EventSeries series = 11;
  optional string action = 12;
  optional ObjectReference related = 13;
  optional string reportingComponent = 14;
  optional string reportingInstance = 15;
}
message EventList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated Event items = 2;
}
message EventSeries {
  optional int32 count = 1;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime lastObservedTime = 2;
}
message EventSource {
  optional string component = 1;
  optional string host = 2;
}
message ExecAction {
  repeated string command = 1;
}
message FCVolumeSource {
  repeated string targetWWNs = 1;
  optional int32 lun = 2;
  optional string fsType = 3;
  optional bool readOnly = 4;
  repeated string wwids = 5;
}
message FlexPersistentVolumeSource {
  optional string driver = 1;
  optional string fsType = 2;
  optional SecretReference secretRef = 3;
  optional bool readOnly = 4;
  map<string, string> options = 5;
}
message FlexVolumeSource {
  optional string driver = 1;
  optional string fsType = 2;
  optional LocalObjectReference secretRef = 3;
  optional bool readOnly = 4;
  map<string, string> options = 5;
}
message FlockerVolumeSource {
  optional string datasetName = 1;
  optional string datasetUUID = 2;
}
message GCEPersistentDiskVolumeSource {
  optional string pdName = 1;
  optional string fsType = 2;
  optional int32 partition = 3;
  optional bool readOnly = 4;
}
message GRPCAction {
  optional int32 port = 1;
  optional string service = 2;
}
message GitRepoVolumeSource {
  optional string repository = 1;
  optional string revision = 2;
  optional string directory = 3;
}
message GlusterfsPersistentVolumeSource {
  optional string endpoints = 1;
  optional string path = 2;
  optional bool readOnly = 3;
  optional string endpointsNamespace = 4;
}
message GlusterfsVolumeSource {
  optional string endpoints = 1;
  optional string path = 2;
  optional bool readOnly = 3;
}
message HTTPGetAction {
  optional string path = 1;
  optional k8s.io.apimachinery.pkg.util.intstr.IntOrString port = 2;
  optional string host = 3;
  optional string scheme = 4;
  repeated HTTPHeader httpHeaders = 5;
}
message HTTPHeader {
  optional string name = 1;
  optional string value = 2;
}
message HostAlias {
  optional string ip = 1;
  repeated string hostnames = 2;
}
message HostIP {
  optional string ip = 1;
}
message HostPathVolumeSource {
  optional string path = 1;
  optional string type = 2;
}
message ISCSIPersistentVolumeSource {
  optional string targetPortal = 1;
  optional string iqn = 2;
  optional int32 lun = 3;
  optional string iscsiInterface = 4;
  optional string fsType = 5;
  optional bool readOnly = 6;
  repeated string portals = 7;
  optional bool chapAuthDiscovery = 8;
  optional bool chapAuthSession = 11;
  optional SecretReference secretRef = 10;
  optional string initiatorName = 12;
}
message ISCSIVolumeSource {
  optional string targetPortal = 1;
  optional string iqn = 2;
  optional int32 lun = 3;
  optional string iscsiInterface = 4;
  optional string fsType = 5;
  optional bool readOnly = 6;
  repeated string portals = 7;
  optional bool chapAuthDiscovery = 8;
  optional bool chapAuthSession = 11;
  optional LocalObjectReference secretRef = 10;
  optional string initiatorName = 12;
}
message ImageVolumeSource {
  optional string reference = 1;
  optional string pullPolicy = 2;
}
message KeyToPath {
  optional string key = 1;
  optional string path = 2;
  optional int32 mode = 3;
}
message Lifecycle {
  optional LifecycleHandler postStart = 1;
  optional LifecycleHandler preStop = 2;
  optional string stopSignal = 3;
}
message LifecycleHandler {
  optional ExecAction exec = 1;
  optional HTTPGetAction httpGet = 2;
  optional TCPSocketAction tcpSocket = 3;
  optional SleepAction sleep = 4;
}
message LimitRange {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional LimitRangeSpec spec = 2;
}
message LimitRangeItem {
  optional string type = 1;
  map<string, k8s.io.apimachinery.pkg.api.resource.Quantity> max = 2;
  map<string, k8s.io.apimachinery.pkg.api.resource.Quantity> min = 3;
  map<string, k8s.io.apimachinery.pkg.api.resource.Quantity> default = 4;
  map<string, k8s.io.apimachinery.pkg.api.resource.Quantity> defaultRequest = 5;
  map<string, k8s.io.apimachinery.pkg.api.resource.Quantity> maxLimitRequestRatio = 6;
}
message LimitRangeList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated LimitRange items = 2;
}
message LimitRangeSpec {
  repeated LimitRangeItem limits = 1;
}
message LinuxContainerUser {
  optional int64 uid = 1;
  optional int64 gid = 2;
  repeated int64 supplementalGroups = 3;
}
message List {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated k8s.io.apimachinery.pkg.runtime.RawExtension items = 2;
}
message LoadBalancerIngress {
  optional string ip = 1;
  optional string hostname = 2;
  optional string ipMode = 3;
  repeated PortStatus ports = 4;
}
message LoadBalancerStatus {
  repeated LoadBalancerIngress ingress = 1;
}
message LocalObjectReference {
  optional string name = 1;
}
message LocalVolumeSource {
  optional string path = 1;
  optional string fsType = 2;
}
message ModifyVolumeStatus {
  optional string targetVolumeAttributesClassName = 1;
  optional string status = 2;
}
message NFSVolumeSource {
  optional string server = 1;
  optional string path = 2;
  optional bool readOnly = 3;
}
message Namespace {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional NamespaceSpec spec = 2;
  optional NamespaceStatus status = 3;
}
message NamespaceCondition {
  optional string type = 1;
  optional string status = 2;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time lastTransitionTime = 4;
  optional string reason = 5;
  optional string message = 6;
}
message NamespaceList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated Namespace items = 2;
}
message NamespaceSpec {
  repeated string finalizers = 1;
}
message NamespaceStatus {
  optional string phase = 1;
  repeated NamespaceCondition conditions = 2;
}
message Node {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional NodeSpec spec = 2;
  optional NodeStatus status = 3;
}
message NodeAddress {
  optional string type = 1;
  optional string address = 2;
}
message NodeAffinity {
  optional NodeSelector requiredDuringSchedulingIgnoredDuringExecution = 1;
  repeated PreferredSchedulingTerm preferredDuringSchedulingIgnoredDuringExecution = 2;
}
message NodeCondition {
  optional string type = 1;
  optional string status = 2;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time lastHeartbeatTime = 3;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time lastTransitionTime = 4;
  optional string reason = 5;
  optional string message = 6;
}
message NodeConfigSource {
  optional ConfigMapNodeConfigSource configMap = 2;
}
message NodeConfigStatus {
  optional NodeConfigSource assigned = 1;
  optional NodeConfigSource active = 2;
  optional NodeConfigSource lastKnownGood = 3;
  optional string error = 4;
}
message NodeDaemonEndpoints {
  optional DaemonEndpoint kubeletEndpoint = 1;
}
message NodeFeatures {
  optional bool supplementalGroupsPolicy = 1;
}
message NodeList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated Node items = 2;
}
message NodeProxyOptions {
  optional string path = 1;
}
message NodeRuntimeHandler {
  optional string name = 1;
  optional NodeRuntimeHandlerFeatures features = 2;
}
message NodeRuntimeHandlerFeatures {
  optional bool recursiveReadOnlyMounts = 1;
  optional bool userNamespaces = 2;
}
message NodeSelector {
  repeated NodeSelectorTerm nodeSelectorTerms = 1;
}
message NodeSelectorRequirement {
  optional string key = 1;
  optional string operator = 2;
  repeated string values = 3;
}
message NodeSelectorTerm {
  repeated NodeSelectorRequirement matchExpressions = 1;
  repeated NodeSelectorRequirement matchFields = 2;
}
message NodeSpec {
  optional string podCIDR = 1;
  repeated string podCIDRs = 7;
  optional string providerID = 3;
  optional bool unschedulable = 4;
  repeated Taint taints = 5;
  optional NodeConfigSource configSource = 6;
  optional string externalID = 2;
}
message NodeStatus {
  map<string, k8s.io.apimachinery.pkg.api.resource.Quantity> capacity = 1;
  map<string, k8s.io.apimachinery.pkg.api.resource.Quantity> allocatable = 2;
  optional string phase = 3;
  repeated NodeCondition conditions = 4;
  repeated NodeAddress addresses = 5;
  optional NodeDaemonEndpoints daemonEndpoints = 6;
  optional NodeSystemInfo nodeInfo = 7;
  repeated ContainerImage images = 8;
  repeated string volumesInUse = 9;
  repeated AttachedVolume volumesAttached = 10;
  optional NodeConfigStatus config = 11;
  repeated NodeRuntimeHandler runtimeHandlers = 12;
  optional NodeFeatures features = 13;
}
message NodeSwapStatus {
  optional int64 capacity = 1;
}
message NodeSystemInfo {
  optional string machineID = 1;
  optional string systemUUID = 2;
  optional string bootID = 3;
  optional string kernelVersion = 4;
  optional string osImage = 5;
  optional string containerRuntimeVersion = 6;
  optional string kubeletVersion = 7;
  optional string kubeProxyVersion = 8;
  optional string operatingSystem = 9;
  optional string architecture = 10;
  optional NodeSwapStatus swap = 11;
}
message ObjectFieldSelector {
  optional string apiVersion = 1;
  optional string fieldPath = 2;
}
message ObjectReference {
  optional string kind = 1;
  optional string namespace = 2;
  optional string name = 3;
  optional string uid = 4;
  optional string apiVersion = 5;
  optional string resourceVersion = 6;
  optional string fieldPath = 7;
}
message PersistentVolume {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional PersistentVolumeSpec spec = 2;
  optional PersistentVolumeStatus status = 3;
}
message PersistentVolumeClaim {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional PersistentVolumeClaimSpec spec = 2;
  optional PersistentVolumeClaimStatus status = 3;
}
message PersistentVolumeClaimCondition {
  optional string type = 1;
  optional string status = 2;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time lastProbeTime = 3;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time lastTransitionTime = 4;
  optional string reason = 5;
  optional string message = 6;
}
message PersistentVolumeClaimList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated PersistentVolumeClaim items = 2;
}
message PersistentVolumeClaimSpec {
  repeated string accessModes = 1;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelector selector = 4;
  optional VolumeResourceRequirements resources = 2;
  optional string volumeName = 3;
  optional string storageClassName = 5;
  optional string volumeMode = 6;
  optional TypedLocalObjectReference dataSource = 7;
  optional TypedObjectReference dataSourceRef = 8;
  optional string volumeAttributesClassName = 9;
}
message PersistentVolumeClaimStatus {
  optional string phase = 1;
  repeated string accessModes = 2;
  map<string, k8s.io.apimachinery.pkg.api.resource.Quantity> capacity = 3;
  repeated PersistentVolumeClaimCondition conditions = 4;
  map<string, k8s.io.apimachinery.pkg.api.resource.Quantity> allocatedResources = 5;
  map<string, string> allocatedResourceStatuses = 7;
  optional string currentVolumeAttributesClassName = 8;
  optional ModifyVolumeStatus modifyVolumeStatus = 9;
}
message PersistentVolumeClaimTemplate {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional PersistentVolumeClaimSpec spec = 2;
}
message PersistentVolumeClaimVolumeSource {
  optional string claimName = 1;
  optional bool readOnly = 2;
}
message PersistentVolumeList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated PersistentVolume items = 2;
}
message PersistentVolumeSource {
  optional GCEPersistentDiskVolumeSource gcePersistentDisk = 1;
  optional AWSElasticBlockStoreVolumeSource awsElasticBlockStore = 2;
  optional HostPathVolumeSource hostPath = 3;
  optional GlusterfsPersistentVolumeSource glusterfs = 4;
  optional NFSVolumeSource nfs = 5;
  optional RBDPersistentVolumeSource rbd = 6;
  optional ISCSIPersistentVolumeSource iscsi = 7;
  optional CinderPersistentVolumeSource cinder = 8;
  optional CephFSPersistentVolumeSource cephfs = 9;
  optional FCVolumeSource fc = 10;
  optional FlockerVolumeSource flocker = 11;
  optional FlexPersistentVolumeSource flexVolume = 12;
  optional AzureFilePersistentVolumeSource azureFile = 13;
  optional VsphereVirtualDiskVolumeSource vsphereVolume = 14;
  optional QuobyteVolumeSource quobyte = 15;
  optional AzureDiskVolumeSource azureDisk = 16;
  optional PhotonPersistentDiskVolumeSource photonPersistentDisk = 17;
  optional PortworxVolumeSource portworxVolume = 18;
  optional ScaleIOPersistentVolumeSource scaleIO = 19;
  optional LocalVolumeSource local = 20;
  optional StorageOSPersistentVolumeSource storageos = 21;
  optional CSIPersistentVolumeSource csi = 22;
}
message PersistentVolumeSpec {
  map<string, k8s.io.apimachinery.pkg.api.resource.Quantity> capacity = 1;
  optional PersistentVolumeSource persistentVolumeSource = 2;
  repeated string accessModes = 3;
  optional ObjectReference claimRef = 4;
  optional string persistentVolumeReclaimPolicy = 5;
  optional string storageClassName = 6;
  repeated string mountOptions = 7;
  optional string volumeMode = 8;
  optional VolumeNodeAffinity nodeAffinity = 9;
  optional string volumeAttributesClassName = 10;
}
message PersistentVolumeStatus {
  optional string phase = 1;
  optional string message = 2;
  optional string reason = 3;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time lastPhaseTransitionTime = 4;
}
message PhotonPersistentDiskVolumeSource {
  optional string pdID = 1;
  optional string fsType = 2;
}
message Pod {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional PodSpec spec = 2;
  optional PodStatus status = 3;
}
message PodAffinity {
  repeated PodAffinityTerm requiredDuringSchedulingIgnoredDuringExecution = 1;
  repeated WeightedPodAffinityTerm preferredDuringSchedulingIgnoredDuringExecution = 2;
}
message PodAffinityTerm {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelector labelSelector = 1;
  repeated string namespaces = 2;
  optional string topologyKey = 3;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelector namespaceSelector = 4;
  repeated string matchLabelKeys = 5;
  repeated string mismatchLabelKeys = 6;
}
message PodAntiAffinity {
  repeated PodAffinityTerm requiredDuringSchedulingIgnoredDuringExecution = 1;
  repeated WeightedPodAffinityTerm preferredDuringSchedulingIgnoredDuringExecution = 2;
}
message PodAttachOptions {
  optional bool stdin = 1;
  optional bool stdout = 2;
  optional bool stderr = 3;
  optional bool tty = 4;
  optional string container = 5;
}
message PodCondition {
  optional string type = 1;
  optional int64 observedGeneration = 7;
  optional string status = 2;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time lastProbeTime = 3;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time lastTransitionTime = 4;
  optional string reason = 5;
  optional string message = 6;
}
message PodDNSConfig {
  repeated string nameservers = 1;
  repeated string searches = 2;
  repeated PodDNSConfigOption options = 3;
}
message PodDNSConfigOption {
  optional string name = 1;
  optional string value = 2;
}
message PodExecOptions {
  optional bool stdin = 1;
  optional bool stdout = 2;
  optional bool stderr = 3;
  optional bool tty = 4;
  optional string container = 5;
  repeated string command = 6;
}
message PodIP {
  optional string ip = 1;
}
message PodList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated Pod items = 2;
}
message PodLogOptions {
  optional string container = 1;
  optional bool follow = 2;
  optional bool previous = 3;
  optional int64 sinceSeconds = 4;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time sinceTime = 5;
  optional bool timestamps = 6;
  optional int64 tailLines = 7;
  optional int64 limitBytes = 8;
  optional bool insecureSkipTLSVerifyBackend = 9;
  optional string stream = 10;
}
message PodOS {
  optional string name = 1;
}
message PodPortForwardOptions {
  repeated int32 ports = 1;
}
message PodProxyOptions {
  optional string path = 1;
}
message PodReadinessGate {
  optional string conditionType = 1;
}
message PodResourceClaim {
  optional string name = 1;
  optional string resourceClaimName = 3;
  optional string resourceClaimTemplateName = 4;
}
message PodResourceClaimStatus {
  optional string name = 1;
  optional string resourceClaimName = 2;
}
message PodSchedulingGate {
  optional string name = 1;
}
message PodSecurityContext {
  optional SELinuxOptions seLinuxOptions = 1;
  optional WindowsSecurityContextOptions windowsOptions = 8;
  optional int64 runAsUser = 2;
  optional int64 runAsGroup = 6;
  optional bool runAsNonRoot = 3;
  repeated int64 supplementalGroups = 4;
  optional string supplementalGroupsPolicy = 12;
  optional int64 fsGroup = 5;
  repeated Sysctl sysctls = 7;
  optional string fsGroupChangePolicy = 9;
  optional SeccompProfile seccompProfile = 10;
  optional AppArmorProfile appArmorProfile = 11;
  optional string seLinuxChangePolicy = 13;
}
message PodSignature {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.OwnerReference podController = 1;
}
message PodSpec {
  repeated Volume volumes = 1;
  repeated Container initContainers = 20;
  repeated Container containers = 2;
  repeated EphemeralContainer ephemeralContainers = 34;
  optional string restartPolicy = 3;
  optional int64 terminationGracePeriodSeconds = 4;
  optional int64 activeDeadlineSeconds = 5;
  optional string dnsPolicy = 6;
  map<string, string> nodeSelector = 7;
  optional string serviceAccountName = 8;
  optional string serviceAccount = 9;
  optional bool automountServiceAccountToken = 21;
  optional string nodeName = 10;
  optional bool hostNetwork = 11;
  optional bool hostPID = 12;
  optional bool hostIPC = 13;
  optional bool shareProcessNamespace = 27;
  optional PodSecurityContext securityContext = 14;
  repeated LocalObjectReference imagePullSecrets = 15;
  optional string hostname = 16;
  optional string subdomain = 17;
  optional Affinity affinity = 18;
  optional string schedulerName = 19;
  repeated Toleration tolerations = 22;
  repeated HostAlias hostAliases = 23;
  optional string priorityClassName = 24;
  optional int32 priority = 25;
  optional PodDNSConfig dnsConfig = 26;
  repeated PodReadinessGate readinessGates = 28;
  optional string runtimeClassName = 29;
  optional bool enableServiceLinks = 30;
  optional string preemptionPolicy = 31;
  map<string, k8s.io.apimachinery.pkg.api.resource.Quantity> overhead = 32;
  repeated TopologySpreadConstraint topologySpreadConstraints = 33;
  optional bool setHostnameAsFQDN = 35;
  optional PodOS os = 36;
  optional bool hostUsers = 37;
  repeated PodSchedulingGate schedulingGates = 38;
  repeated PodResourceClaim resourceClaims = 39;
  optional ResourceRequirements resources = 40;
}
message PodStatus {
  optional int64 observedGeneration = 17;
  optional string phase = 1;
  repeated PodCondition conditions = 2;
  optional string message = 3;
  optional string reason = 4;
  optional string nominatedNodeName = 11;
  optional string hostIP = 5;
  repeated HostIP hostIPs = 16;
  optional string podIP = 6;
  repeated PodIP podIPs = 12;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time startTime = 7;
  repeated ContainerStatus initContainerStatuses = 10;
  repeated ContainerStatus containerStatuses = 8;
  optional string qosClass = 9;
  repeated ContainerStatus ephemeralContainerStatuses = 13;
  optional string resize = 14;
  repeated PodResourceClaimStatus resourceClaimStatuses = 15;
}
message PodStatusResult {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional PodStatus status = 2;
}
message PodTemplate {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional PodTemplateSpec template = 2;
}
message PodTemplateList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated PodTemplate items = 2;
}
message PodTemplateSpec {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional PodSpec spec = 2;
}
message PortStatus {
  optional int32 port = 1;
  optional string protocol = 2;
  optional string error = 3;
}
message PortworxVolumeSource {
  optional string volumeID = 1;
  optional string fsType = 2;
  optional bool readOnly = 3;
}
message Preconditions {
  optional string uid = 1;
}
message PreferAvoidPodsEntry {
  optional PodSignature podSignature = 1;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time evictionTime = 2;
  optional string reason = 3;
  optional string message = 4;
}
message PreferredSchedulingTerm {
  optional int32 weight = 1;
  optional NodeSelectorTerm preference = 2;
}
message Probe {
  optional ProbeHandler handler = 1;
  optional int32 initialDelaySeconds = 2;
  optional int32 timeoutSeconds = 3;
  optional int32 periodSeconds = 4;
  optional int32 successThreshold = 5;
  optional int32 failureThreshold = 6;
  optional int64 terminationGracePeriodSeconds = 7;
}
message ProbeHandler {
  optional ExecAction exec = 1;
  optional HTTPGetAction httpGet = 2;
  optional TCPSocketAction tcpSocket = 3;
  optional GRPCAction grpc = 4;
}
message ProjectedVolumeSource {
  repeated VolumeProjection sources = 1;
  optional int32 defaultMode = 2;
}
message QuobyteVolumeSource {
  optional string registry = 1;
  optional string volume = 2;
  optional bool readOnly = 3;
  optional string user = 4;
  optional string group = 5;
  optional string tenant = 6;
}
message RBDPersistentVolumeSource {
  repeated string monitors = 1;
  optional string image = 2;
  optional string fsType = 3;
  optional string pool = 4;
  optional string user = 5;
  optional string keyring = 6;
  optional SecretReference secretRef = 7;
  optional bool readOnly = 8;
}
message RBDVolumeSource {
  repeated string monitors = 1;
  optional string image = 2;
  optional string fsType = 3;
  optional string pool = 4;
  optional string user = 5;
  optional string keyring = 6;
  optional LocalObjectReference secretRef = 7;
  optional bool readOnly = 8;
}
message RangeAllocation {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional string range = 2;
  optional bytes data = 3;
}
message ReplicationController {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional ReplicationControllerSpec spec = 2;
  optional ReplicationControllerStatus status = 3;
}
message ReplicationControllerCondition {
  optional string type = 1;
  optional string status = 2;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time lastTransitionTime = 3;
  optional string reason = 4;
  optional string message = 5;
}
message ReplicationControllerList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated ReplicationController items = 2;
}
message ReplicationControllerSpec {
  optional int32 replicas = 1;
  optional int32 minReadySeconds = 4;
  map<string, string> selector = 2;
  optional PodTemplateSpec template = 3;
}
message ReplicationControllerStatus {
  optional int32 replicas = 1;
  optional int32 fullyLabeledReplicas = 2;
  optional int32 readyReplicas = 4;
  optional int32 availableReplicas = 5;
  optional int64 observedGeneration = 3;
  repeated ReplicationControllerCondition conditions = 6;
}
message ResourceClaim {
  optional string name = 1;
  optional string request = 2;
}
message ResourceFieldSelector {
  optional string containerName = 1;
  optional string resource = 2;
  optional k8s.io.apimachinery.pkg.api.resource.Quantity divisor = 3;
}
message ResourceHealth {
  optional string resourceID = 1;
  optional string health = 2;
}
message ResourceQuota {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional ResourceQuotaSpec spec = 2;
  optional ResourceQuotaStatus status = 3;
}
message ResourceQuotaList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated ResourceQuota items = 2;
}
message ResourceQuotaSpec {
  map<string, k8s.io.apimachinery.pkg.api.resource.Quantity> hard = 1;
  repeated string scopes = 2;
  optional ScopeSelector scopeSelector = 3;
}
message ResourceQuotaStatus {
  map<string, k8s.io.apimachinery.pkg.api.resource.Quantity> hard = 1;
  map<string, k8s.io.apimachinery.pkg.api.resource.Quantity> used = 2;
}
message ResourceRequirements {
  map<string, k8s.io.apimachinery.pkg.api.resource.Quantity> limits = 1;
  map<string, k8s.io.apimachinery.pkg.api.resource.Quantity> requests = 2;
  repeated ResourceClaim claims = 3;
}
message ResourceStatus {
  optional string name = 1;
  repeated ResourceHealth resources = 2;
}
message SELinuxOptions {
  optional string user = 1;
  optional string role = 2;
  optional string type = 3;
  optional string level = 4;
}
message ScaleIOPersistentVolumeSource {
  optional string gateway = 1;
  optional string system = 2;
  optional SecretReference secretRef = 3;
  optional bool sslEnabled = 4;
  optional string protectionDomain = 5;
  optional string storagePool = 6;
  optional string storageMode = 7;
  optional string volumeName = 8;
  optional string fsType = 9;
  optional bool readOnly = 10;
}
message ScaleIOVolumeSource {
  optional string gateway = 1;
  optional string system = 2;
  optional LocalObjectReference secretRef = 3;
  optional bool sslEnabled = 4;
  optional string protectionDomain = 5;
  optional string storagePool = 6;
  optional string storageMode = 7;
  optional string volumeName = 8;
  optional string fsType = 9;
  optional bool readOnly = 10;
}
message ScopeSelector {
  repeated ScopedResourceSelectorRequirement matchExpressions = 1;
}
message ScopedResourceSelectorRequirement {
  optional string scopeName = 1;
  optional string operator = 2;
  repeated string values = 3;
}
message SeccompProfile {
  optional string type = 1;
  optional string localhostProfile = 2;
}
message Secret {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional bool immutable = 5;
  map<string, bytes> data = 2;
  map<string, string> stringData = 4;
  optional string type = 3;
}
message SecretEnvSource {
  optional LocalObjectReference localObjectReference = 1;
  optional bool optional = 2;
}
message SecretKeySelector {
  optional LocalObjectReference localObjectReference = 1;
  optional string key = 2;
  optional bool optional = 3;
}
message SecretList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated Secret items = 2;
}
message SecretProjection {
  optional LocalObjectReference localObjectReference = 1;
  repeated KeyToPath items = 2;
  optional bool optional = 4;
}
message SecretReference {
  optional string name = 1;
  optional string namespace = 2;
}
message SecretVolumeSource {
  optional string secretName = 1;
  repeated KeyToPath items = 2;
  optional int32 defaultMode = 3;
  optional bool optional = 4;
}
message SecurityContext {
  optional Capabilities capabilities = 1;
  optional bool privileged = 2;
  optional SELinuxOptions seLinuxOptions = 3;
  optional WindowsSecurityContextOptions windowsOptions = 10;
  optional int64 runAsUser = 4;
  optional int64 runAsGroup = 8;
  optional bool runAsNonRoot = 5;
  optional bool readOnlyRootFilesystem = 6;
  optional bool allowPrivilegeEscalation = 7;
  optional string procMount = 9;
  optional SeccompProfile seccompProfile = 11;
  optional AppArmorProfile appArmorProfile = 12;
}
message SerializedReference {
  optional ObjectReference reference = 1;
}
message Service {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional ServiceSpec spec = 2;
  optional ServiceStatus status = 3;
}
message ServiceAccount {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  repeated ObjectReference secrets = 2;
  repeated LocalObjectReference imagePullSecrets = 3;
  optional bool automountServiceAccountToken = 4;
}
message ServiceAccountList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated ServiceAccount items = 2;
}
message ServiceAccountTokenProjection {
  optional string audience = 1;
  optional int64 expirationSeconds = 2;
  optional string path = 3;
}
message ServiceList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated Service items = 2;
}
message ServicePort {
  optional string name = 1;
  optional string protocol = 2;
  optional string appProtocol = 6;
  optional int32 port = 3;
  optional k8s.io.apimachinery.pkg.util.intstr.IntOrString targetPort = 4;
  optional int32 nodePort = 5;
}
message ServiceProxyOptions {
  optional string path = 1;
}
message ServiceSpec {
  repeated ServicePort ports = 1;
  map<string, string> selector = 2;
  optional string clusterIP = 3;
  repeated string clusterIPs = 18;
  optional string type = 4;
  repeated string externalIPs = 5;
  optional string sessionAffinity = 7;
  optional string loadBalancerIP = 8;
  repeated string loadBalancerSourceRanges = 9;
  optional string externalName = 10;
  optional string externalTrafficPolicy = 11;
  optional int32 healthCheckNodePort = 12;
  optional bool publishNotReadyAddresses = 13;
  optional SessionAffinityConfig sessionAffinityConfig = 14;
  repeated string ipFamilies = 19;
  optional string ipFamilyPolicy = 17;
  optional bool allocateLoadBalancerNodePorts = 20;
  optional string loadBalancerClass = 21;
  optional string internalTrafficPolicy = 22;
  optional string trafficDistribution = 23;
}
message ServiceStatus {
  optional LoadBalancerStatus loadBalancer = 1;
  repeated k8s.io.apimachinery.pkg.apis.meta.v1.Condition conditions = 2;
}
message SessionAffinityConfig {
  optional ClientIPConfig clientIP = 1;
}
message SleepAction {
  optional int64 seconds = 1;
}
message StorageOSPersistentVolumeSource {
  optional string volumeName = 1;
  optional string volumeNamespace = 2;
  optional string fsType = 3;
  optional bool readOnly = 4;
  optional ObjectReference secretRef = 5;
}
message StorageOSVolumeSource {
  optional string volumeName = 1;
  optional string volumeNamespace = 2;
  optional string fsType = 3;
  optional bool readOnly = 4;
  optional LocalObjectReference secretRef = 5;
}
message Sysctl {
  optional string name = 1;
  optional string value = 2;
}
message TCPSocketAction {
  optional k8s.io.apimachinery.pkg.util.intstr.IntOrString port = 1;
  optional string host = 2;
}
message Taint {
  optional string key = 1;
  optional string value = 2;
  optional string effect = 3;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time timeAdded = 4;
}
message Toleration {
  optional string key = 1;
  optional string operator = 2;
  optional string value = 3;
  optional string effect = 4;
  optional int64 tolerationSeconds = 5;
}
message TopologySelectorLabelRequirement {
  optional string key = 1;
  repeated string values = 2;
}
message TopologySelectorTerm {
  repeated TopologySelectorLabelRequirement matchLabelExpressions = 1;
}
message TopologySpreadConstraint {
  optional int32 maxSkew = 1;
  optional string topologyKey = 2;
  optional string whenUnsatisfiable = 3;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelector labelSelector = 4;
  optional int32 minDomains = 5;
  optional string nodeAffinityPolicy = 6;
  optional string nodeTaintsPolicy = 7;
  repeated string matchLabelKeys = 8;
}
message TypedLocalObjectReference {
  optional string apiGroup = 1;
  optional string kind = 2;
  optional string name = 3;
}
message TypedObjectReference {
  optional string apiGroup = 1;
  optional string kind = 2;
  optional string name = 3;
  optional string namespace = 4;
}
message Volume {
  optional string name = 1;
  optional VolumeSource volumeSource = 2;
}
message VolumeDevice {
  optional string name = 1;
  optional string devicePath = 2;
}
message VolumeMount {
  optional string name = 1;
  optional bool readOnly = 2;
  optional string recursiveReadOnly = 7;
  optional string mountPath = 3;
  optional string subPath = 4;
  optional string mountPropagation = 5;
  optional string subPathExpr = 6;
}
message VolumeMountStatus {
  optional string name = 1;
  optional string mountPath = 2;
  optional bool readOnly = 3;
  optional string recursiveReadOnly = 4;
}
message VolumeNodeAffinity {
  optional NodeSelector required = 1;
}
message VolumeProjection {
  optional SecretProjection secret = 1;
  optional DownwardAPIProjection downwardAPI = 2;
  optional ConfigMapProjection configMap = 3;
  optional ServiceAccountTokenProjection serviceAccountToken = 4;
  optional ClusterTrustBundleProjection clusterTrustBundle = 5;
}
message VolumeResourceRequirements {
  map<string, k8s.io.apimachinery.pkg.api.resource.Quantity> limits = 1;
  map<string, k8s.io.apimachinery.pkg.api.resource.Quantity> requests = 2;
}
message VolumeSource {
  optional HostPathVolumeSource hostPath = 1;
  optional EmptyDirVolumeSource emptyDir = 2;
  optional GCEPersistentDiskVolumeSource gcePersistentDisk = 3;
  optional AWSElasticBlockStoreVolumeSource awsElasticBlockStore = 4;
  optional GitRepoVolumeSource gitRepo = 5;
  optional SecretVolumeSource secret = 6;
  optional NFSVolumeSource nfs = 7;
  optional ISCSIVolumeSource iscsi = 8;
  optional GlusterfsVolumeSource glusterfs = 9;
  optional PersistentVolumeClaimVolumeSource persistentVolumeClaim = 10;
  optional RBDVolumeSource rbd = 11;
  optional FlexVolumeSource flexVolume = 12;
  optional CinderVolumeSource cinder = 13;
  optional CephFSVolumeSource cephfs = 14;
  optional FlockerVolumeSource flocker = 15;
  optional DownwardAPIVolumeSource downwardAPI = 16;
  optional FCVolumeSource fc = 17;
  optional AzureFileVolumeSource azureFile = 18;
  optional ConfigMapVolumeSource configMap = 19;
  optional VsphereVirtualDiskVolumeSource vsphereVolume = 20;
  optional QuobyteVolumeSource quobyte = 21;
  optional AzureDiskVolumeSource azureDisk = 22;
  optional PhotonPersistentDiskVolumeSource photonPersistentDisk = 23;
  optional ProjectedVolumeSource projected = 26;
  optional PortworxVolumeSource portworxVolume = 24;
  optional ScaleIOVolumeSource scaleIO = 25;
  optional StorageOSVolumeSource storageos = 27;
  optional CSIVolumeSource csi = 28;
  optional EphemeralVolumeSource ephemeral = 29;
  optional ImageVolumeSource image = 30;
}
message VsphereVirtualDiskVolumeSource {
  optional string volumePath = 1;
  optional string fsType = 2;
  optional string storagePolicyName = 3;
  optional string storagePolicyID = 4;
}
message WeightedPodAffinityTerm {
  optional int32 weight = 1;
  optional PodAffinityTerm podAffinityTerm = 2;
}
message WindowsSecurityContextOptions {
  optional string gmsaCredentialSpecName = 1;
  optional string gmsaCredentialSpec = 2;
  optional string runAsUserName = 3;
  optional bool hostProcess = 4;
}
"#,
    ),
    (
        "k8s.io/api/apps/v1/generated.proto",
        r#"syntax = "proto2";
package k8s.io.api.apps.v1;
import "k8s.io/api/core/v1/generated.proto";
import "k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto";
import "k8s.io/apimachinery/pkg/runtime/generated.proto";
import "k8s.io/apimachinery/pkg/runtime/schema/generated.proto";
import "k8s.io/apimachinery/pkg/util/intstr/generated.proto";
message ControllerRevision {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional k8s.io.apimachinery.pkg.runtime.RawExtension data = 2;
  optional int64 revision = 3;
}
message ControllerRevisionList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated ControllerRevision items = 2;
}
message DaemonSet {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional DaemonSetSpec spec = 2;
  optional DaemonSetStatus status = 3;
}
message DaemonSetCondition {
  optional string type = 1;
  optional string status = 2;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time lastTransitionTime = 3;
  optional string reason = 4;
  optional string message = 5;
}
message DaemonSetList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated DaemonSet items = 2;
}
message DaemonSetSpec {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelector selector = 1;
  optional k8s.io.api.core.v1.PodTemplateSpec template = 2;
  optional DaemonSetUpdateStrategy updateStrategy = 3;
  optional int32 minReadySeconds = 4;
  optional int32 revisionHistoryLimit = 6;
}
message DaemonSetStatus {
  optional int32 currentNumberScheduled = 1;
  optional int32 numberMisscheduled = 2;
  optional int32 desiredNumberScheduled = 3;
  optional int32 numberReady = 4;
  optional int64 observedGeneration = 5;
  optional int32 updatedNumberScheduled = 6;
  optional int32 numberAvailable = 7;
  optional int32 numberUnavailable = 8;
  optional int32 collisionCount = 9;
  repeated DaemonSetCondition conditions = 10;
}
message DaemonSetUpdateStrategy {
  optional string type = 1;
  optional RollingUpdateDaemonSet rollingUpdate = 2;
}
message Deployment {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional DeploymentSpec spec = 2;
  optional DeploymentStatus status = 3;
}
message DeploymentCondition {
  optional string type = 1;
  optional string status = 2;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time lastUpdateTime = 6;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time lastTransitionTime = 7;
  optional string reason = 4;
  optional string message = 5;
}
message DeploymentList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated Deployment items = 2;
}
message DeploymentSpec {
  optional int32 replicas = 1;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelector selector = 2;
  optional k8s.io.api.core.v1.PodTemplateSpec template = 3;
  optional DeploymentStrategy strategy = 4;
  optional int32 minReadySeconds = 5;
  optional int32 revisionHistoryLimit = 6;
  optional bool paused = 7;
  optional int32 progressDeadlineSeconds = 9;
}
message DeploymentStatus {
  optional int64 observedGeneration = 1;
  optional int32 replicas = 2;
  optional int32 updatedReplicas = 3;
  optional int32 readyReplicas = 7;
  optional int32 availableReplicas = 4;
  optional int32 unavailableReplicas = 5;
  optional int32 terminatingReplicas = 9;
  repeated DeploymentCondition conditions = 6;
  optional int32 collisionCount = 8;
}
message DeploymentStrategy {
  optional string type = 1;
  optional RollingUpdateDeployment rollingUpdate = 2;
}
message ReplicaSet {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional ReplicaSetSpec spec = 2;
  optional ReplicaSetStatus status = 3;
}
message ReplicaSetCondition {
  optional string type = 1;
  optional string status = 2;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time lastTransitionTime = 3;
  optional string reason = 4;
  optional string message = 5;
}
message ReplicaSetList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated ReplicaSet items = 2;
}
message ReplicaSetSpec {
  optional int32 replicas = 1;
  optional int32 minReadySeconds = 4;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelector selector = 2;
  optional k8s.io.api.core.v1.PodTemplateSpec template = 3;
}
message ReplicaSetStatus {
  optional int32 replicas = 1;
  optional int32 fullyLabeledReplicas = 2;
  optional int32 readyReplicas = 4;
  optional int32 availableReplicas = 5;
  optional int32 terminatingReplicas = 7;
  optional int64 observedGeneration = 3;
  repeated ReplicaSetCondition conditions = 6;
}
message RollingUpdateDaemonSet {
  optional k8s.io.apimachinery.pkg.util.intstr.IntOrString maxUnavailable = 1;
  optional k8s.io.apimachinery.pkg.util.intstr.IntOrString maxSurge = 2;
}
message RollingUpdateDeployment {
  optional k8s.io.apimachinery.pkg.util.intstr.IntOrString maxUnavailable = 1;
  optional k8s.io.apimachinery.pkg.util.intstr.IntOrString maxSurge = 2;
}
message RollingUpdateStatefulSetStrategy {
  optional int32 partition = 1;
  optional k8s.io.apimachinery.pkg.util.intstr.IntOrString maxUnavailable = 2;
}
message StatefulSet {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional StatefulSetSpec spec = 2;
  optional StatefulSetStatus status = 3;
}
message StatefulSetCondition {
  optional string type = 1;
  optional string status = 2;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time lastTransitionTime = 3;
  optional string reason = 4;
  optional string message = 5;
}
message StatefulSetList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated StatefulSet items = 2;
}
message StatefulSetOrdinals {
  optional int32 start = 1;
}
message StatefulSetPersistentVolumeClaimRetentionPolicy {
  optional string whenDeleted = 1;
  optional string whenScaled = 2;
}
message StatefulSetSpec {
  optional int32 replicas = 1;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelector selector = 2;
  optional k8s.io.api.core.v1.PodTemplateSpec template = 3;
  repeated k8s.io.api.core.v1.PersistentVolumeClaim volumeClaimTemplates = 4;
  optional string serviceName = 5;
  optional string podManagementPolicy = 6;
  optional StatefulSetUpdateStrategy updateStrategy = 7;
  optional int32 revisionHistoryLimit = 8;
  optional int32 minReadySeconds = 9;
  optional StatefulSetPersistentVolumeClaimRetentionPolicy persistentVolumeClaimRetentionPolicy = 10;
  optional StatefulSetOrdinals ordinals = 11;
}
message StatefulSetStatus {
  optional int64 observedGeneration = 1;
  optional int32 replicas = 2;
  optional int32 readyReplicas = 3;
  optional int32 currentReplicas = 4;
  optional int32 updatedReplicas = 5;
  optional string currentRevision = 6;
  optional string updateRevision = 7;
  optional int32 collisionCount = 9;
  repeated StatefulSetCondition conditions = 10;
  optional int32 availableReplicas = 11;
}
message StatefulSetUpdateStrategy {
  optional string type = 1;
  optional RollingUpdateStatefulSetStrategy rollingUpdate = 2;
}
"#,
    ),
    (
        "k8s.io/api/batch/v1/generated.proto",
        r#"syntax = "proto2";
package k8s.io.api.batch.v1;
import "k8s.io/api/core/v1/generated.proto";
import "k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto";
import "k8s.io/apimachinery/pkg/runtime/generated.proto";
import "k8s.io/apimachinery/pkg/runtime/schema/generated.proto";
message CronJob {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional CronJobSpec spec = 2;
  optional CronJobStatus status = 3;
}
message CronJobList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated CronJob items = 2;
}
message CronJobSpec {
  optional string schedule = 1;
  optional string timeZone = 8;
  optional int64 startingDeadlineSeconds = 2;
  optional string concurrencyPolicy = 3;
  optional bool suspend = 4;
  optional JobTemplateSpec jobTemplate = 5;
  optional int32 successfulJobsHistoryLimit = 6;
  optional int32 failedJobsHistoryLimit = 7;
}
message CronJobStatus {
  repeated k8s.io.api.core.v1.ObjectReference active = 1;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time lastScheduleTime = 4;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time lastSuccessfulTime = 5;
}
message Job {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional JobSpec spec = 2;
  optional JobStatus status = 3;
}
message JobCondition {
  optional string type = 1;
  optional string status = 2;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time lastProbeTime = 3;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time lastTransitionTime = 4;
  optional string reason = 5;
  optional string message = 6;
}
message JobList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated Job items = 2;
}
message JobSpec {
  optional int32 parallelism = 1;
  optional int32 completions = 2;
  optional int64 activeDeadlineSeconds = 3;
  optional PodFailurePolicy podFailurePolicy = 11;
  optional SuccessPolicy successPolicy = 16;
  optional int32 backoffLimit = 7;
  optional int32 backoffLimitPerIndex = 12;
  optional int32 maxFailedIndexes = 13;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelector selector = 4;
  optional bool manualSelector = 5;
  optional k8s.io.api.core.v1.PodTemplateSpec template = 6;
  optional int32 ttlSecondsAfterFinished = 8;
  optional string completionMode = 9;
  optional bool suspend = 10;
  optional string podReplacementPolicy = 14;
  optional string managedBy = 15;
}
message JobStatus {
  repeated JobCondition conditions = 1;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time startTime = 2;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time completionTime = 3;
  optional int32 active = 4;
  optional int32 succeeded = 5;
  optional int32 failed = 6;
  optional int32 terminating = 11;
  optional string completedIndexes = 7;
  optional string failedIndexes = 10;
  optional UncountedTerminatedPods uncountedTerminatedPods = 8;
  optional int32 ready = 9;
}
message JobTemplateSpec {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional JobSpec spec = 2;
}
message PodFailurePolicy {
  repeated PodFailurePolicyRule rules = 1;
}
message PodFailurePolicyOnExitCodesRequirement {
  optional string containerName = 1;
  optional string operator = 2;
  repeated int32 values = 3;
}
message PodFailurePolicyOnPodConditionsPattern {
  optional string type = 1;
  optional string status = 2;
}
message PodFailurePolicyRule {
  optional string action = 1;
  optional PodFailurePolicyOnExitCodesRequirement onExitCodes = 2;
  repeated PodFailurePolicyOnPodConditionsPattern onPodConditions = 3;
}
message SuccessPolicy {
  repeated SuccessPolicyRule rules = 1;
}
message SuccessPolicyRule {
  optional string succeededIndexes = 1;
  optional int32 succeededCount = 2;
}
message UncountedTerminatedPods {
  repeated string succeeded = 1;
  repeated string failed = 2;
}
"#,
    ),
    (
        "k8s.io/api/policy/v1/generated.proto",
        r#"syntax = "proto2";
package k8s.io.api.policy.v1;
import "k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto";
import "k8s.io/apimachinery/pkg/runtime/generated.proto";
import "k8s.io/apimachinery/pkg/runtime/schema/generated.proto";
import "k8s.io/apimachinery/pkg/util/intstr/generated.proto";
message Eviction {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions deleteOptions = 2;
}
message PodDisruptionBudget {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional PodDisruptionBudgetSpec spec = 2;
  optional PodDisruptionBudgetStatus status = 3;
}
message PodDisruptionBudgetList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated PodDisruptionBudget items = 2;
}
message PodDisruptionBudgetSpec {
  optional k8s.io.apimachinery.pkg.util.intstr.IntOrString minAvailable = 1;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelector selector = 2;
  optional k8s.io.apimachinery.pkg.util.intstr.IntOrString maxUnavailable = 3;
  optional string unhealthyPodEvictionPolicy = 4;
}
message PodDisruptionBudgetStatus {
  optional int64 observedGeneration = 1;
  map<string, k8s.io.apimachinery.pkg.apis.meta.v1.Time> disruptedPods = 2;
  optional int32 disruptionsAllowed = 3;
  optional int32 currentHealthy = 4;
  optional int32 desiredHealthy = 5;
  optional int32 expectedPods = 6;
  repeated k8s.io.apimachinery.pkg.apis.meta.v1.Condition conditions = 7;
}
"#,
    ),
    (
        "k8s.io/api/scheduling/v1/generated.proto",
        r#"syntax = "proto2";
package k8s.io.api.scheduling.v1;
import "k8s.io/api/core/v1/generated.proto";
import "k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto";
import "k8s.io/apimachinery/pkg/runtime/generated.proto";
import "k8s.io/apimachinery/pkg/runtime/schema/generated.proto";
message PriorityClass {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional int32 value = 2;
  optional bool globalDefault = 3;
  optional string description = 4;
  optional string preemptionPolicy = 5;
}
message PriorityClassList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated PriorityClass items = 2;
}
"#,
    ),
    (
        "k8s.io/api/coordination/v1/generated.proto",
        r#"syntax = "proto2";
package k8s.io.api.coordination.v1;
import "k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto";
import "k8s.io/apimachinery/pkg/runtime/generated.proto";
import "k8s.io/apimachinery/pkg/runtime/schema/generated.proto";
message Lease {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional LeaseSpec spec = 2;
}
message LeaseList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated Lease items = 2;
}
message LeaseSpec {
  optional string holderIdentity = 1;
  optional int32 leaseDurationSeconds = 2;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime acquireTime = 3;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime renewTime = 4;
  optional int32 leaseTransitions = 5;
  optional string strategy = 6;
  optional string preferredHolder = 7;
}
"#,
    ),
    (
        "k8s.io/api/events/v1/generated.proto",
        r#"syntax = "proto2";
package k8s.io.api.events.v1;
import "k8s.io/api/core/v1/generated.proto";
import "k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto";
import "k8s.io/apimachinery/pkg/runtime/generated.proto";
import "k8s.io/apimachinery/pkg/runtime/schema/generated.proto";
message Event {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime eventTime = 2;
  optional EventSeries series = 3;
  optional string reportingController = 4;
  optional string reportingInstance = 5;
  optional string action = 6;
  optional string reason = 7;
  optional k8s.io.api.core.v1.ObjectReference regarding = 8;
  optional k8s.io.api.core.v1.ObjectReference related = 9;
  optional string note = 10;
  optional string type = 11;
  optional k8s.io.api.core.v1.EventSource deprecatedSource = 12;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time deprecatedFirstTimestamp = 13;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time deprecatedLastTimestamp = 14;
  optional int32 deprecatedCount = 15;
}
message EventList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated Event items = 2;
}
message EventSeries {
  optional int32 count = 1;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime lastObservedTime = 2;
}
"#,
    ),
    (
        "k8s.io/api/authorization/v1/generated.proto",
        r#"syntax = "proto2";
package k8s.io.api.authorization.v1;
import "k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto";
import "k8s.io/apimachinery/pkg/runtime/generated.proto";
import "k8s.io/apimachinery/pkg/runtime/schema/generated.proto";
message ExtraValue {
  repeated string items = 1;
}
message FieldSelectorAttributes {
  optional string rawSelector = 1;
  repeated k8s.io.apimachinery.pkg.apis.meta.v1.FieldSelectorRequirement requirements = 2;
}
message LabelSelectorAttributes {
  optional string rawSelector = 1;
  repeated k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelectorRequirement requirements = 2;
}
message LocalSubjectAccessReview {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional SubjectAccessReviewSpec spec = 2;
  optional SubjectAccessReviewStatus status = 3;
}
message NonResourceAttributes {
  optional string path = 1;
  optional string verb = 2;
}
message NonResourceRule {
  repeated string verbs = 1;
  repeated string nonResourceURLs = 2;
}
message ResourceAttributes {
  optional string namespace = 1;
  optional string verb = 2;
  optional string group = 3;
  optional string version = 4;
  optional string resource = 5;
  optional string subresource = 6;
  optional string name = 7;
  optional FieldSelectorAttributes fieldSelector = 8;
  optional LabelSelectorAttributes labelSelector = 9;
}
message ResourceRule {
  repeated string verbs = 1;
  repeated string apiGroups = 2;
  repeated string resources = 3;
  repeated string resourceNames = 4;
}
message SelfSubjectAccessReview {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional SelfSubjectAccessReviewSpec spec = 2;
  optional SubjectAccessReviewStatus status = 3;
}
message SelfSubjectAccessReviewSpec {
  optional ResourceAttributes resourceAttributes = 1;
  optional NonResourceAttributes nonResourceAttributes = 2;
}
message SelfSubjectRulesReview {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional SelfSubjectRulesReviewSpec spec = 2;
  optional SubjectRulesReviewStatus status = 3;
}
message SelfSubjectRulesReviewSpec {
  optional string namespace = 1;
}
message SubjectAccessReview {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional SubjectAccessReviewSpec spec = 2;
  optional SubjectAccessReviewStatus status = 3;
}
message SubjectAccessReviewSpec {
  optional ResourceAttributes resourceAttributes = 1;
  optional NonResourceAttributes nonResourceAttributes = 2;
  optional string user = 3;
  repeated string groups = 4;
  map<string, ExtraValue> extra = 5;
  optional string uid = 6;
}
message SubjectAccessReviewStatus {
  optional bool allowed = 1;
  optional bool denied = 4;
  optional string reason = 2;
  optional string evaluationError = 3;
}
message SubjectRulesReviewStatus {
  repeated ResourceRule resourceRules = 1;
  repeated NonResourceRule nonResourceRules = 2;
  optional bool incomplete = 3;
  optional string evaluationError = 4;
}
"#,
    ),
    (
        "k8s.io/api/authentication/v1/generated.proto",
        r#"syntax = "proto2";
package k8s.io.api.authentication.v1;
import "k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto";
import "k8s.io/apimachinery/pkg/runtime/generated.proto";
import "k8s.io/apimachinery/pkg/runtime/schema/generated.proto";
message BoundObjectReference {
  optional string kind = 1;
  optional string apiVersion = 2;
  optional string name = 3;
  optional string uID = 4;
}
message ExtraValue {
  repeated string items = 1;
}
message SelfSubjectReview {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional SelfSubjectReviewStatus status = 2;
}
message SelfSubjectReviewStatus {
  optional UserInfo userInfo = 1;
}
message TokenRequest {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional TokenRequestSpec spec = 2;
  optional TokenRequestStatus status = 3;
}
message TokenRequestSpec {
  repeated string audiences = 1;
  optional int64 expirationSeconds = 4;
  optional BoundObjectReference boundObjectRef = 3;
}
message TokenRequestStatus {
  optional string token = 1;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time expirationTimestamp = 2;
}
message TokenReview {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional TokenReviewSpec spec = 2;
  optional TokenReviewStatus status = 3;
}
message TokenReviewSpec {
  optional string token = 1;
  repeated string audiences = 2;
}
message TokenReviewStatus {
  optional bool authenticated = 1;
  optional UserInfo user = 2;
  repeated string audiences = 4;
  optional string error = 3;
}
message UserInfo {
  optional string username = 1;
  optional string uid = 2;
  repeated string groups = 3;
  map<string, ExtraValue> extra = 4;
}
"#,
    ),
    (
        "k8s.io/api/rbac/v1/generated.proto",
        r#"syntax = "proto2";
package k8s.io.api.rbac.v1;
import "k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto";
import "k8s.io/apimachinery/pkg/runtime/generated.proto";
import "k8s.io/apimachinery/pkg/runtime/schema/generated.proto";
message AggregationRule {
  repeated k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelector clusterRoleSelectors = 1;
}
message ClusterRole {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  repeated PolicyRule rules = 2;
  optional AggregationRule aggregationRule = 3;
}
message ClusterRoleBinding {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  repeated Subject subjects = 2;
  optional RoleRef roleRef = 3;
}
message ClusterRoleBindingList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated ClusterRoleBinding items = 2;
}
message ClusterRoleList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated ClusterRole items = 2;
}
message PolicyRule {
  repeated string verbs = 1;
  repeated string apiGroups = 2;
  repeated string resources = 3;
  repeated string resourceNames = 4;
  repeated string nonResourceURLs = 5;
}
message Role {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  repeated PolicyRule rules = 2;
}
message RoleBinding {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  repeated Subject subjects = 2;
  optional RoleRef roleRef = 3;
}
message RoleBindingList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated RoleBinding items = 2;
}
message RoleList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated Role items = 2;
}
message RoleRef {
  optional string apiGroup = 1;
  optional string kind = 2;
  optional string name = 3;
}
message Subject {
  optional string kind = 1;
  optional string apiGroup = 2;
  optional string name = 3;
  optional string namespace = 4;
}
"#,
    ),
    (
        "k8s.io/api/networking/v1/generated.proto",
        r#"syntax = "proto2";
package k8s.io.api.networking.v1;
import "k8s.io/api/core/v1/generated.proto";
import "k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto";
import "k8s.io/apimachinery/pkg/runtime/generated.proto";
import "k8s.io/apimachinery/pkg/runtime/schema/generated.proto";
import "k8s.io/apimachinery/pkg/util/intstr/generated.proto";
message HTTPIngressPath {
  optional string path = 1;
  optional string pathType = 3;
  optional IngressBackend backend = 2;
}
message HTTPIngressRuleValue {
  repeated HTTPIngressPath paths = 1;
}
message IPAddress {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional IPAddressSpec spec = 2;
}
message IPAddressList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated IPAddress items = 2;
}
message IPAddressSpec {
  optional ParentReference parentRef = 1;
}
message IPBlock {
  optional string cidr = 1;
  repeated string except = 2;
}
message Ingress {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional IngressSpec spec = 2;
  optional IngressStatus status = 3;
}
message IngressBackend {
  optional IngressServiceBackend service = 4;
  optional k8s.io.api.core.v1.TypedLocalObjectReference resource = 3;
}
message IngressClass {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional IngressClassSpec spec = 2;
}
message IngressClassList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated IngressClass items = 2;
}
message IngressClassParametersReference {
  optional string aPIGroup = 1;
  optional string kind = 2;
  optional string name = 3;
  optional string scope = 4;
  optional string namespace = 5;
}
message IngressClassSpec {
  optional string controller = 1;
  optional IngressClassParametersReference parameters = 2;
}
message IngressList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated Ingress items = 2;
}
message IngressLoadBalancerIngress {
  optional string ip = 1;
  optional string hostname = 2;
  repeated IngressPortStatus ports = 4;
}
message IngressLoadBalancerStatus {
  repeated IngressLoadBalancerIngress ingress = 1;
}
message IngressPortStatus {
  optional int32 port = 1;
  optional string protocol = 2;
  optional string error = 3;
}
message IngressRule {
  optional string host = 1;
  optional IngressRuleValue ingressRuleValue = 2;
}
message IngressRuleValue {
  optional HTTPIngressRuleValue http = 1;
}
message IngressServiceBackend {
  optional string name = 1;
  optional ServiceBackendPort port = 2;
}
message IngressSpec {
  optional string ingressClassName = 4;
  optional IngressBackend defaultBackend = 1;
  repeated IngressTLS tls = 2;
  repeated IngressRule rules = 3;
}
message IngressStatus {
  optional IngressLoadBalancerStatus loadBalancer = 1;
}
message IngressTLS {
  repeated string hosts = 1;
  optional string secretName = 2;
}
message NetworkPolicy {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional NetworkPolicySpec spec = 2;
}
message NetworkPolicyEgressRule {
  repeated NetworkPolicyPort ports = 1;
  repeated NetworkPolicyPeer to = 2;
}
message NetworkPolicyIngressRule {
  repeated NetworkPolicyPort ports = 1;
  repeated NetworkPolicyPeer from = 2;
}
message NetworkPolicyList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated NetworkPolicy items = 2;
}
message NetworkPolicyPeer {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelector podSelector = 1;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelector namespaceSelector = 2;
  optional IPBlock ipBlock = 3;
}
message NetworkPolicyPort {
  optional string protocol = 1;
  optional k8s.io.apimachinery.pkg.util.intstr.IntOrString port = 2;
  optional int32 endPort = 3;
}
message NetworkPolicySpec {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelector podSelector = 1;
  repeated NetworkPolicyIngressRule ingress = 2;
  repeated NetworkPolicyEgressRule egress = 3;
  repeated string policyTypes = 4;
}
message ParentReference {
  optional string group = 1;
  optional string resource = 2;
  optional string namespace = 3;
  optional string name = 4;
}
message ServiceBackendPort {
  optional string name = 1;
  optional int32 number = 2;
}
message ServiceCIDR {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional ServiceCIDRSpec spec = 2;
  optional ServiceCIDRStatus status = 3;
}
message ServiceCIDRList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated ServiceCIDR items = 2;
}
message ServiceCIDRSpec {
  repeated string cidrs = 1;
}
message ServiceCIDRStatus {
  repeated k8s.io.apimachinery.pkg.apis.meta.v1.Condition conditions = 1;
}
"#,
    ),
    (
        "k8s.io/api/autoscaling/v1/generated.proto",
        r#"syntax = "proto2";
package k8s.io.api.autoscaling.v1;
import "k8s.io/api/core/v1/generated.proto";
import "k8s.io/apimachinery/pkg/api/resource/generated.proto";
import "k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto";
import "k8s.io/apimachinery/pkg/runtime/generated.proto";
import "k8s.io/apimachinery/pkg/runtime/schema/generated.proto";
message ContainerResourceMetricSource {
  optional string name = 1;
  optional int32 targetAverageUtilization = 2;
  optional k8s.io.apimachinery.pkg.api.resource.Quantity targetAverageValue = 3;
  optional string container = 5;
}
message ContainerResourceMetricStatus {
  optional string name = 1;
  optional int32 currentAverageUtilization = 2;
  optional k8s.io.apimachinery.pkg.api.resource.Quantity currentAverageValue = 3;
  optional string container = 4;
}
message CrossVersionObjectReference {
  optional string kind = 1;
  optional string name = 2;
  optional string apiVersion = 3;
}
message ExternalMetricSource {
  optional string metricName = 1;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelector metricSelector = 2;
  optional k8s.io.apimachinery.pkg.api.resource.Quantity targetValue = 3;
  optional k8s.io.apimachinery.pkg.api.resource.Quantity targetAverageValue = 4;
}
message ExternalMetricStatus {
  optional string metricName = 1;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelector metricSelector = 2;
  optional k8s.io.apimachinery.pkg.api.resource.Quantity currentValue = 3;
  optional k8s.io.apimachinery.pkg.api.resource.Quantity currentAverageValue = 4;
}
message HorizontalPodAutoscaler {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional HorizontalPodAutoscalerSpec spec = 2;
  optional HorizontalPodAutoscalerStatus status = 3;
}
message HorizontalPodAutoscalerCondition {
  optional string type = 1;
  optional string status = 2;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time lastTransitionTime = 3;
  optional string reason = 4;
  optional string message = 5;
}
message HorizontalPodAutoscalerList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated HorizontalPodAutoscaler items = 2;
}
message HorizontalPodAutoscalerSpec {
  optional CrossVersionObjectReference scaleTargetRef = 1;
  optional int32 minReplicas = 2;
  optional int32 maxReplicas = 3;
  optional int32 targetCPUUtilizationPercentage = 4;
}
message HorizontalPodAutoscalerStatus {
  optional int64 observedGeneration = 1;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time lastScaleTime = 2;
  optional int32 currentReplicas = 3;
  optional int32 desiredReplicas = 4;
  optional int32 currentCPUUtilizationPercentage = 5;
}
message MetricSpec {
  optional string type = 1;
  optional ObjectMetricSource object = 2;
  optional PodsMetricSource pods = 3;
  optional ResourceMetricSource resource = 4;
  optional ContainerResourceMetricSource containerResource = 7;
  optional ExternalMetricSource external = 5;
}
message MetricStatus {
  optional string type = 1;
  optional ObjectMetricStatus object = 2;
  optional PodsMetricStatus pods = 3;
  optional ResourceMetricStatus resource = 4;
  optional ContainerResourceMetricStatus containerResource = 7;
  optional ExternalMetricStatus external = 5;
}
message ObjectMetricSource {
  optional CrossVersionObjectReference target = 1;
  optional string metricName = 2;
  optional k8s.io.apimachinery.pkg.api.resource.Quantity targetValue = 3;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelector selector = 4;
  optional k8s.io.apimachinery.pkg.api.resource.Quantity averageValue = 5;
}
message ObjectMetricStatus {
  optional CrossVersionObjectReference target = 1;
  optional string metricName = 2;
  optional k8s.io.apimachinery.pkg.api.resource.Quantity currentValue = 3;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelector selector = 4;
  optional k8s.io.apimachinery.pkg.api.resource.Quantity averageValue = 5;
}
message PodsMetricSource {
  optional string metricName = 1;
  optional k8s.io.apimachinery.pkg.api.resource.Quantity targetAverageValue = 2;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelector selector = 3;
}
message PodsMetricStatus {
  optional string metricName = 1;
  optional k8s.io.apimachinery.pkg.api.resource.Quantity currentAverageValue = 2;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelector selector = 3;
}
message ResourceMetricSource {
  optional string name = 1;
  optional int32 targetAverageUtilization = 2;
  optional k8s.io.apimachinery.pkg.api.resource.Quantity targetAverageValue = 3;
}
message ResourceMetricStatus {
  optional string name = 1;
  optional int32 currentAverageUtilization = 2;
  optional k8s.io.apimachinery.pkg.api.resource.Quantity currentAverageValue = 3;
}
message Scale {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional ScaleSpec spec = 2;
  optional ScaleStatus status = 3;
}
message ScaleSpec {
  optional int32 replicas = 1;
}
message ScaleStatus {
  optional int32 replicas = 1;
  optional string selector = 2;
}
"#,
    ),
    (
        "k8s.io/api/autoscaling/v2/generated.proto",
        r#"syntax = "proto2";
package k8s.io.api.autoscaling.v2;
import "k8s.io/api/core/v1/generated.proto";
import "k8s.io/apimachinery/pkg/api/resource/generated.proto";
import "k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto";
import "k8s.io/apimachinery/pkg/runtime/generated.proto";
import "k8s.io/apimachinery/pkg/runtime/schema/generated.proto";
message ContainerResourceMetricSource {
  optional string name = 1;
  optional MetricTarget target = 2;
  optional string container = 3;
}
message ContainerResourceMetricStatus {
  optional string name = 1;
  optional MetricValueStatus current = 2;
  optional string container = 3;
}
message CrossVersionObjectReference {
  optional string kind = 1;
  optional string name = 2;
  optional string apiVersion = 3;
}
message ExternalMetricSource {
  optional MetricIdentifier metric = 1;
  optional MetricTarget target = 2;
}
message ExternalMetricStatus {
  optional MetricIdentifier metric = 1;
  optional MetricValueStatus current = 2;
}
message HPAScalingPolicy {
  optional string type = 1;
  optional int32 value = 2;
  optional int32 periodSeconds = 3;
}
message HPAScalingRules {
  optional int32 stabilizationWindowSeconds = 3;
  optional string selectPolicy = 1;
  repeated HPAScalingPolicy policies = 2;
  optional k8s.io.apimachinery.pkg.api.resource.Quantity tolerance = 4;
}
message HorizontalPodAutoscaler {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional HorizontalPodAutoscalerSpec spec = 2;
  optional HorizontalPodAutoscalerStatus status = 3;
}
message HorizontalPodAutoscalerBehavior {
  optional HPAScalingRules scaleUp = 1;
  optional HPAScalingRules scaleDown = 2;
}
message HorizontalPodAutoscalerCondition {
  optional string type = 1;
  optional string status = 2;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time lastTransitionTime = 3;
  optional string reason = 4;
  optional string message = 5;
}
message HorizontalPodAutoscalerList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated HorizontalPodAutoscaler items = 2;
}
message HorizontalPodAutoscalerSpec {
  optional CrossVersionObjectReference scaleTargetRef = 1;
  optional int32 minReplicas = 2;
  optional int32 maxReplicas = 3;
  repeated MetricSpec metrics = 4;
  optional HorizontalPodAutoscalerBehavior behavior = 5;
}
message HorizontalPodAutoscalerStatus {
  optional int64 observedGeneration = 1;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time lastScaleTime = 2;
  optional int32 currentReplicas = 3;
  optional int32 desiredReplicas = 4;
  repeated MetricStatus currentMetrics = 5;
  repeated HorizontalPodAutoscalerCondition conditions = 6;
}
message MetricIdentifier {
  optional string name = 1;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelector selector = 2;
}
message MetricSpec {
  optional string type = 1;
  optional ObjectMetricSource object = 2;
  optional PodsMetricSource pods = 3;
  optional ResourceMetricSource resource = 4;
  optional ContainerResourceMetricSource containerResource = 7;
  optional ExternalMetricSource external = 5;
}
message MetricStatus {
  optional string type = 1;
  optional ObjectMetricStatus object = 2;
  optional PodsMetricStatus pods = 3;
  optional ResourceMetricStatus resource = 4;
  optional ContainerResourceMetricStatus containerResource = 7;
  optional ExternalMetricStatus external = 5;
}
message MetricTarget {
  optional string type = 1;
  optional k8s.io.apimachinery.pkg.api.resource.Quantity value = 2;
  optional k8s.io.apimachinery.pkg.api.resource.Quantity averageValue = 3;
  optional int32 averageUtilization = 4;
}
message MetricValueStatus {
  optional k8s.io.apimachinery.pkg.api.resource.Quantity value = 1;
  optional k8s.io.apimachinery.pkg.api.resource.Quantity averageValue = 2;
  optional int32 averageUtilization = 3;
}
message ObjectMetricSource {
  optional CrossVersionObjectReference describedObject = 1;
  optional MetricTarget target = 2;
  optional MetricIdentifier metric = 3;
}
message ObjectMetricStatus {
  optional MetricIdentifier metric = 1;
  optional MetricValueStatus current = 2;
  optional CrossVersionObjectReference describedObject = 3;
}
message PodsMetricSource {
  optional MetricIdentifier metric = 1;
  optional MetricTarget target = 2;
}
message PodsMetricStatus {
  optional MetricIdentifier metric = 1;
  optional MetricValueStatus current = 2;
}
message ResourceMetricSource {
  optional string name = 1;
  optional MetricTarget target = 2;
}
message ResourceMetricStatus {
  optional string name = 1;
  optional MetricValueStatus current = 2;
}
"#,
    ),
    (
        "k8s.io/api/certificates/v1/generated.proto",
        r#"syntax = "proto2";
package k8s.io.api.certificates.v1;
import "k8s.io/api/core/v1/generated.proto";
import "k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto";
import "k8s.io/apimachinery/pkg/runtime/generated.proto";
import "k8s.io/apimachinery/pkg/runtime/schema/generated.proto";
message CertificateSigningRequest {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  optional CertificateSigningRequestSpec spec = 2;
  optional CertificateSigningRequestStatus status = 3;
}
message CertificateSigningRequestCondition {
  optional string type = 1;
  optional string status = 6;
  optional string reason = 2;
  optional string message = 3;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time lastUpdateTime = 4;
  optional k8s.io.apimachinery.pkg.apis.meta.v1.Time lastTransitionTime = 5;
}
message CertificateSigningRequestList {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta metadata = 1;
  repeated CertificateSigningRequest items = 2;
}
message CertificateSigningRequestSpec {
  optional bytes request = 1;
  optional string signerName = 7;
  optional int32 expirationSeconds = 8;
  repeated string usages = 5;
  optional string username = 2;
  optional string uid = 3;
  repeated string groups = 4;
  map<string, ExtraValue> extra = 6;
}
message CertificateSigningRequestStatus {
  repeated CertificateSigningRequestCondition conditions = 1;
  optional bytes certificate = 2;
}
message ExtraValue {
  repeated string items = 1;
}
"#,
    ),
];

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    //! The fixtures in `tests/fixtures/protobuf` are request bodies recorded from kubectl 1.32
    //! (see the README there); the other bodies are built here from the same schemas.

    use std::collections::BTreeSet;

    use prost_reflect::prost::Message as _;
    use serde_json::json;

    use super::*;

    macro_rules! fixture {
        ($name:literal) => {
            include_bytes!(concat!("../../tests/fixtures/protobuf/", $name, ".bin")).as_slice()
        };
    }

    /// Checks `decoded` against the JSON body kubectl sends for the same request (its
    /// `--dry-run=client -o json` output) by the module's rules: what kubectl sends as `null` or
    /// `""` is absent, what kubectl omits is absent or a zero number or `false` (or an object of
    /// those), and everything else is equal.
    fn assert_like_kubectl(decoded: &Json, kubectl: &Json, path: &str) {
        fn zero(value: &Json) -> bool {
            match value {
                Json::Bool(b) => !b,
                Json::Number(n) => n.as_f64() == Some(0.0),
                Json::Object(o) => o.values().all(zero),
                _ => false,
            }
        }
        match (decoded, kubectl) {
            (Json::Object(d), Json::Object(k)) => {
                for (key, kv) in k {
                    match (d.get(key), kv) {
                        (None, Json::Null) => {}
                        (None, Json::String(s)) if s.is_empty() => {}
                        (None, _) => panic!("{path}.{key} is missing; kubectl sends {kv}"),
                        (Some(dv), _) => assert_like_kubectl(dv, kv, &format!("{path}.{key}")),
                    }
                }
                for (key, dv) in d {
                    assert!(
                        k.contains_key(key) || zero(dv),
                        "{path}.{key} is {dv}, which kubectl does not send"
                    );
                }
            }
            (Json::Array(d), Json::Array(k)) => {
                assert_eq!(d.len(), k.len(), "{path} has another length");
                for (i, (dv, kv)) in d.iter().zip(k).enumerate() {
                    assert_like_kubectl(dv, kv, &format!("{path}[{i}]"));
                }
            }
            _ => assert_eq!(decoded, kubectl, "{path} differs"),
        }
    }

    #[test]
    fn configmap_from_kubectl() {
        let decoded = decode(fixture!("configmap"), "", "v1", "ConfigMap").unwrap();
        assert_eq!(
            decoded,
            json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "cm1", "generation": 0},
                "data": {"a": "b", "key2": "value2"}
            })
        );
        let kubectl = json!({"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm1","creationTimestamp":null},"data":{"a":"b","key2":"value2"}});
        assert_like_kubectl(&decoded, &kubectl, "");
    }

    #[test]
    fn binary_data_and_secret_data_are_base64() {
        let decoded = decode(fixture!("configmap-from-files"), "", "v1", "ConfigMap").unwrap();
        assert_eq!(decoded["data"], json!({"greeting.txt": "hello\nworld\n"}));
        assert_eq!(decoded["binaryData"], json!({"blob": "YmluAP/+AQ=="}));
        let decoded = decode(fixture!("secret-generic"), "", "v1", "Secret").unwrap();
        assert_eq!(
            decoded,
            json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "s1", "generation": 0},
                "data": {"pass": "cEBzcyB3MHJkIQ==", "user": "YWRtaW4="}
            })
        );
    }

    #[test]
    fn deployment_from_kubectl_keeps_zero_replicas() {
        let decoded = decode(fixture!("deployment"), "apps", "v1", "Deployment").unwrap();
        assert_eq!(
            decoded,
            json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "generation": 0, "labels": {"app": "web"}},
                "spec": {
                    "replicas": 0,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {
                        "metadata": {"generation": 0, "labels": {"app": "web"}},
                        "spec": {
                            "containers": [{
                                "name": "nginx", "image": "nginx:1.27",
                                "ports": [{"hostPort": 0, "containerPort": 8080}],
                                "resources": {}, "stdin": false, "stdinOnce": false, "tty": false
                            }],
                            "hostNetwork": false, "hostPID": false, "hostIPC": false
                        }
                    },
                    "strategy": {}, "minReadySeconds": 0, "paused": false
                },
                "status": {
                    "observedGeneration": 0, "replicas": 0, "updatedReplicas": 0,
                    "availableReplicas": 0, "unavailableReplicas": 0, "readyReplicas": 0
                }
            })
        );
    }

    #[test]
    fn selfsubjectaccessreview_from_kubectl_auth_can_i() {
        let decoded = decode(
            fixture!("selfsubjectaccessreview"),
            "authorization.k8s.io",
            "v1",
            "SelfSubjectAccessReview",
        )
        .unwrap();
        assert_eq!(
            decoded,
            json!({
                "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "metadata": {"generation": 0},
                "spec": {"resourceAttributes": {"namespace": "default", "verb": "list", "resource": "pods"}},
                "status": {"allowed": false, "denied": false}
            })
        );
    }

    /// Every recorded body, against the JSON kubectl sends for the same command.
    #[test]
    fn every_kubectl_fixture_matches_its_json_body() {
        let cases: &[(&str, &[u8], Json)] = &[
            (
                "namespace",
                fixture!("namespace"),
                json!({"kind":"Namespace","apiVersion":"v1","metadata":{"name":"ns1","creationTimestamp":null},"spec":{},"status":{}}),
            ),
            (
                "configmap-from-files",
                fixture!("configmap-from-files"),
                json!({"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm2","creationTimestamp":null},"data":{"greeting.txt":"hello\nworld\n"},"binaryData":{"blob":"YmluAP/+AQ=="}}),
            ),
            (
                "deployment",
                fixture!("deployment"),
                json!({"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web","creationTimestamp":null,"labels":{"app":"web"}},"spec":{"replicas":0,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"creationTimestamp":null,"labels":{"app":"web"}},"spec":{"containers":[{"name":"nginx","image":"nginx:1.27","ports":[{"containerPort":8080}],"resources":{}}]}},"strategy":{}},"status":{}}),
            ),
            (
                "deployment-two-images",
                fixture!("deployment-two-images"),
                json!({"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web2","creationTimestamp":null,"labels":{"app":"web2"}},"spec":{"replicas":1,"selector":{"matchLabels":{"app":"web2"}},"template":{"metadata":{"creationTimestamp":null,"labels":{"app":"web2"}},"spec":{"containers":[{"name":"nginx","image":"nginx:1.27","resources":{}},{"name":"busybox","image":"busybox:1.36","resources":{}}]}},"strategy":{}},"status":{}}),
            ),
            (
                "secret-generic",
                fixture!("secret-generic"),
                json!({"kind":"Secret","apiVersion":"v1","metadata":{"name":"s1","creationTimestamp":null},"data":{"pass":"cEBzcyB3MHJkIQ==","user":"YWRtaW4="}}),
            ),
            (
                "secret-docker-registry",
                fixture!("secret-docker-registry"),
                json!({"kind":"Secret","apiVersion":"v1","metadata":{"name":"reg1","creationTimestamp":null},"data":{".dockerconfigjson":"eyJhdXRocyI6eyJyLmV4YW1wbGUiOnsidXNlcm5hbWUiOiJ1IiwicGFzc3dvcmQiOiJwIiwiYXV0aCI6ImRUcHcifX19"},"type":"kubernetes.io/dockerconfigjson"}),
            ),
            (
                "job",
                fixture!("job"),
                json!({"kind":"Job","apiVersion":"batch/v1","metadata":{"name":"j1","creationTimestamp":null},"spec":{"template":{"metadata":{"creationTimestamp":null},"spec":{"containers":[{"name":"j1","image":"busybox:1.36","command":["echo","hello"],"resources":{}}],"restartPolicy":"Never"}}},"status":{}}),
            ),
            (
                "cronjob",
                fixture!("cronjob"),
                json!({"kind":"CronJob","apiVersion":"batch/v1","metadata":{"name":"cj1","creationTimestamp":null},"spec":{"schedule":"*/5 * * * *","jobTemplate":{"metadata":{"name":"cj1","creationTimestamp":null},"spec":{"template":{"metadata":{"creationTimestamp":null},"spec":{"containers":[{"name":"cj1","image":"busybox:1.36","command":["date"],"resources":{}}],"restartPolicy":"OnFailure"}}}}},"status":{}}),
            ),
            (
                "selfsubjectaccessreview",
                fixture!("selfsubjectaccessreview"),
                json!({"kind":"SelfSubjectAccessReview","apiVersion":"authorization.k8s.io/v1","metadata":{"creationTimestamp":null},"spec":{"resourceAttributes":{"namespace":"default","verb":"list","resource":"pods"}},"status":{"allowed":false}}),
            ),
            (
                "selfsubjectaccessreview-subresource",
                fixture!("selfsubjectaccessreview-subresource"),
                json!({"kind":"SelfSubjectAccessReview","apiVersion":"authorization.k8s.io/v1","metadata":{"creationTimestamp":null},"spec":{"resourceAttributes":{"namespace":"kube-system","verb":"create","group":"apps","resource":"deployments","subresource":"scale"}},"status":{"allowed":false}}),
            ),
            (
                "service-clusterip",
                fixture!("service-clusterip"),
                json!({"kind":"Service","apiVersion":"v1","metadata":{"name":"svc1","creationTimestamp":null,"labels":{"app":"svc1"}},"spec":{"ports":[{"name":"80-8080","protocol":"TCP","port":80,"targetPort":8080},{"name":"443","protocol":"TCP","port":443,"targetPort":443}],"selector":{"app":"svc1"},"type":"ClusterIP"},"status":{"loadBalancer":{}}}),
            ),
            (
                "serviceaccount",
                fixture!("serviceaccount"),
                json!({"kind":"ServiceAccount","apiVersion":"v1","metadata":{"name":"sa1","creationTimestamp":null}}),
            ),
            (
                "priorityclass",
                fixture!("priorityclass"),
                json!({"kind":"PriorityClass","apiVersion":"scheduling.k8s.io/v1","metadata":{"name":"pc1","creationTimestamp":null},"value":1000,"description":"high prio","preemptionPolicy":"Never"}),
            ),
            (
                "poddisruptionbudget-min-available",
                fixture!("poddisruptionbudget-min-available"),
                json!({"kind":"PodDisruptionBudget","apiVersion":"policy/v1","metadata":{"name":"pdb1","creationTimestamp":null},"spec":{"minAvailable":"50%","selector":{"matchLabels":{"app":"web"}}},"status":{"disruptionsAllowed":0,"currentHealthy":0,"desiredHealthy":0,"expectedPods":0}}),
            ),
            (
                "poddisruptionbudget-max-unavailable",
                fixture!("poddisruptionbudget-max-unavailable"),
                json!({"kind":"PodDisruptionBudget","apiVersion":"policy/v1","metadata":{"name":"pdb2","creationTimestamp":null},"spec":{"selector":{"matchLabels":{"app":"web"}},"maxUnavailable":0},"status":{"disruptionsAllowed":0,"currentHealthy":0,"desiredHealthy":0,"expectedPods":0}}),
            ),
            (
                "resourcequota",
                fixture!("resourcequota"),
                json!({"kind":"ResourceQuota","apiVersion":"v1","metadata":{"name":"q1","creationTimestamp":null},"spec":{"hard":{"cpu":"1","memory":"1Gi","pods":"10"}},"status":{}}),
            ),
            (
                "role",
                fixture!("role"),
                json!({"kind":"Role","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"r1","creationTimestamp":null},"rules":[{"verbs":["get","list"],"apiGroups":[""],"resources":["pods"]}]}),
            ),
            (
                "clusterrolebinding",
                fixture!("clusterrolebinding"),
                json!({"kind":"ClusterRoleBinding","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"crb1","creationTimestamp":null},"subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"alice"},{"kind":"Group","apiGroup":"rbac.authorization.k8s.io","name":"devs"},{"kind":"ServiceAccount","name":"sa1","namespace":"default"}],"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"}}),
            ),
            (
                "ingress",
                fixture!("ingress"),
                json!({"kind":"Ingress","apiVersion":"networking.k8s.io/v1","metadata":{"name":"ing1","creationTimestamp":null},"spec":{"rules":[{"host":"foo.com","http":{"paths":[{"path":"/bar","pathType":"Exact","backend":{"service":{"name":"svc1","port":{"number":80}}}}]}}]},"status":{"loadBalancer":{}}}),
            ),
            (
                "tokenrequest",
                fixture!("tokenrequest"),
                json!({"kind":"TokenRequest","apiVersion":"authentication.k8s.io/v1","metadata":{"creationTimestamp":null},"spec":{"audiences":["api"],"expirationSeconds":600,"boundObjectRef":null},"status":{"token":"","expirationTimestamp":null}}),
            ),
            (
                "tokenrequest-bound",
                fixture!("tokenrequest-bound"),
                json!({"kind":"TokenRequest","apiVersion":"authentication.k8s.io/v1","metadata":{"creationTimestamp":null},"spec":{"audiences":null,"expirationSeconds":3600,"boundObjectRef":{"kind":"Pod","apiVersion":"v1","name":"p1","uid":"1234-abcd"}},"status":{"token":"","expirationTimestamp":null}}),
            ),
            (
                "horizontalpodautoscaler",
                fixture!("horizontalpodautoscaler"),
                json!({"kind":"HorizontalPodAutoscaler","apiVersion":"autoscaling/v1","metadata":{"name":"web","creationTimestamp":null},"spec":{"scaleTargetRef":{"kind":"Deployment","name":"web","apiVersion":"apps/v1"},"minReplicas":2,"maxReplicas":5,"targetCPUUtilizationPercentage":80},"status":{"currentReplicas":0,"desiredReplicas":0}}),
            ),
            (
                "certificatesigningrequest-approval",
                fixture!("certificatesigningrequest-approval"),
                json!({"kind":"CertificateSigningRequest","apiVersion":"certificates.k8s.io/v1","metadata":{"name":"csr1","uid":"c1","resourceVersion":"7","creationTimestamp":"2024-05-06T07:08:09Z"},"spec":{"request":"LS0tLS1CRUdJTg==","signerName":"kubernetes.io/kube-apiserver-client","expirationSeconds":3600,"usages":["client auth"],"username":"alice","groups":["devs","system:authenticated"],"extra":{"scopes":["a","b"]}},"status":{"conditions":[{"type":"Approved","status":"True","reason":"KubectlApprove","message":"This CSR was approved by kubectl certificate approve.","lastUpdateTime":"2026-11-22T00:42:11Z","lastTransitionTime":null}]}}),
            ),
        ];
        for (name, body, kubectl) in cases {
            let api_version = kubectl["apiVersion"].as_str().unwrap();
            let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
            let kind = kubectl["kind"].as_str().unwrap();
            let decoded =
                decode(body, group, version, kind).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_like_kubectl(&decoded, kubectl, name);
        }
    }

    // Bodies built from the schemas, for what kubectl's generators do not send.

    fn message(name: &str, fields: Vec<(&str, Value)>) -> DynamicMessage {
        let descriptor = pool()
            .unwrap()
            .get_message_by_name(&format!("k8s.io.{name}"))
            .unwrap_or_else(|| panic!("no message {name}"));
        let mut message = DynamicMessage::new(descriptor);
        for (field, value) in fields {
            message
                .try_set_field_by_name(field, value)
                .unwrap_or_else(|e| panic!("{name}.{field}: {e:?}"));
        }
        message
    }

    fn m(name: &str, fields: Vec<(&str, Value)>) -> Value {
        Value::Message(message(name, fields))
    }

    fn s(value: &str) -> Value {
        Value::String(value.to_owned())
    }

    fn map(entries: Vec<(&str, Value)>) -> Value {
        Value::Map(
            entries
                .into_iter()
                .map(|(key, value)| (MapKey::String(key.to_owned()), value))
                .collect(),
        )
    }

    fn time(name: &str, seconds: i64, nanos: i32) -> Value {
        m(
            &format!("apimachinery.pkg.apis.meta.v1.{name}"),
            vec![
                ("seconds", Value::I64(seconds)),
                ("nanos", Value::I32(nanos)),
            ],
        )
    }

    fn quantity(value: &str) -> Value {
        m(
            "apimachinery.pkg.api.resource.Quantity",
            vec![("string", s(value))],
        )
    }

    fn int_or_string(int: Option<i32>, string: &str) -> Value {
        m(
            "apimachinery.pkg.util.intstr.IntOrString",
            match int {
                Some(i) => vec![("type", Value::I64(0)), ("intVal", Value::I32(i))],
                None => vec![("type", Value::I64(1)), ("strVal", s(string))],
            },
        )
    }

    /// The body client-go sends for `object`: magic, then a `runtime.Unknown` wrapping it.
    fn body_with(
        type_meta: Option<(&str, &str)>,
        object: &DynamicMessage,
        encoding: &str,
        content_type: &str,
    ) -> Vec<u8> {
        let mut fields = vec![
            ("raw", Value::Bytes(object.encode_to_vec().into())),
            ("contentEncoding", s(encoding)),
            ("contentType", s(content_type)),
        ];
        if let Some((api_version, kind)) = type_meta {
            fields.push((
                "typeMeta",
                m(
                    "apimachinery.pkg.runtime.TypeMeta",
                    vec![("apiVersion", s(api_version)), ("kind", s(kind))],
                ),
            ));
        }
        let unknown = message("apimachinery.pkg.runtime.Unknown", fields);
        [MAGIC.as_slice(), &unknown.encode_to_vec()].concat()
    }

    fn body(api_version: &str, kind: &str, object: &DynamicMessage) -> Vec<u8> {
        body_with(Some((api_version, kind)), object, "", "")
    }

    const CORE: &str = "api.core.v1";

    fn core(name: &str, fields: Vec<(&str, Value)>) -> Value {
        m(&format!("{CORE}.{name}"), fields)
    }

    fn local_ref(name: &str) -> (&'static str, Value) {
        (
            "localObjectReference",
            core("LocalObjectReference", vec![("name", s(name))]),
        )
    }

    fn pod() -> DynamicMessage {
        let meta = m(
            "apimachinery.pkg.apis.meta.v1.ObjectMeta",
            vec![
                ("name", s("web")),
                ("namespace", s("default")),
                ("uid", s("")),
                ("creationTimestamp", time("Time", 1_714_979_289, 0)),
                (
                    "deletionTimestamp",
                    time("Time", 1_714_979_349, 500_000_000),
                ),
                ("labels", map(vec![("app", s("web"))])),
                (
                    "ownerReferences",
                    Value::List(vec![m(
                        "apimachinery.pkg.apis.meta.v1.OwnerReference",
                        vec![
                            ("apiVersion", s("apps/v1")),
                            ("kind", s("ReplicaSet")),
                            ("name", s("web-1")),
                            ("uid", s("r1")),
                            ("controller", Value::Bool(true)),
                        ],
                    )]),
                ),
                (
                    "managedFields",
                    Value::List(vec![m(
                        "apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry",
                        vec![
                            ("manager", s("kubectl")),
                            ("operation", s("Update")),
                            ("apiVersion", s("v1")),
                            ("time", time("Time", 1_714_979_289, 0)),
                            ("fieldsType", s("FieldsV1")),
                            (
                                "fieldsV1",
                                m(
                                    "apimachinery.pkg.apis.meta.v1.FieldsV1",
                                    vec![(
                                        "Raw",
                                        Value::Bytes(br#"{"f:metadata":{}}"#.as_slice().into()),
                                    )],
                                ),
                            ),
                        ],
                    )]),
                ),
            ],
        );
        let volumes = vec![
            core(
                "Volume",
                vec![
                    ("name", s("cache")),
                    (
                        "volumeSource",
                        core(
                            "VolumeSource",
                            vec![("emptyDir", core("EmptyDirVolumeSource", vec![]))],
                        ),
                    ),
                ],
            ),
            core(
                "Volume",
                vec![
                    ("name", s("config")),
                    (
                        "volumeSource",
                        core(
                            "VolumeSource",
                            vec![(
                                "configMap",
                                core(
                                    "ConfigMapVolumeSource",
                                    vec![local_ref("app-config"), ("defaultMode", Value::I32(420))],
                                ),
                            )],
                        ),
                    ),
                ],
            ),
            core(
                "Volume",
                vec![
                    ("name", s("token")),
                    (
                        "volumeSource",
                        core(
                            "VolumeSource",
                            vec![(
                                "projected",
                                core(
                                    "ProjectedVolumeSource",
                                    vec![(
                                        "sources",
                                        Value::List(vec![
                                            core(
                                                "VolumeProjection",
                                                vec![(
                                                    "serviceAccountToken",
                                                    core(
                                                        "ServiceAccountTokenProjection",
                                                        vec![
                                                            ("path", s("token")),
                                                            ("expirationSeconds", Value::I64(3600)),
                                                        ],
                                                    ),
                                                )],
                                            ),
                                            core(
                                                "VolumeProjection",
                                                vec![(
                                                    "downwardAPI",
                                                    core(
                                                        "DownwardAPIProjection",
                                                        vec![(
                                                            "items",
                                                            Value::List(vec![core(
                                                                "DownwardAPIVolumeFile",
                                                                vec![
                                                                    ("path", s("labels")),
                                                                    (
                                                                        "fieldRef",
                                                                        core(
                                                                            "ObjectFieldSelector",
                                                                            vec![(
                                                                                "fieldPath",
                                                                                s(
                                                                                    "metadata.labels",
                                                                                ),
                                                                            )],
                                                                        ),
                                                                    ),
                                                                ],
                                                            )]),
                                                        )],
                                                    ),
                                                )],
                                            ),
                                        ]),
                                    )],
                                ),
                            )],
                        ),
                    ),
                ],
            ),
        ];
        let container = core(
            "Container",
            vec![
                ("name", s("app")),
                ("image", s("nginx")),
                (
                    "env",
                    Value::List(vec![core(
                        "EnvVar",
                        vec![
                            ("name", s("MODE")),
                            (
                                "valueFrom",
                                core(
                                    "EnvVarSource",
                                    vec![(
                                        "configMapKeyRef",
                                        core(
                                            "ConfigMapKeySelector",
                                            vec![local_ref("app-config"), ("key", s("mode"))],
                                        ),
                                    )],
                                ),
                            ),
                        ],
                    )]),
                ),
                (
                    "envFrom",
                    Value::List(vec![core(
                        "EnvFromSource",
                        vec![(
                            "secretRef",
                            core("SecretEnvSource", vec![local_ref("creds")]),
                        )],
                    )]),
                ),
                (
                    "resources",
                    core(
                        "ResourceRequirements",
                        vec![(
                            "limits",
                            map(vec![
                                ("cpu", quantity("500m")),
                                ("memory", quantity("128Mi")),
                            ]),
                        )],
                    ),
                ),
                (
                    "livenessProbe",
                    core(
                        "Probe",
                        vec![
                            (
                                "handler",
                                core(
                                    "ProbeHandler",
                                    vec![(
                                        "httpGet",
                                        core(
                                            "HTTPGetAction",
                                            vec![
                                                ("path", s("/healthz")),
                                                ("port", int_or_string(None, "http")),
                                            ],
                                        ),
                                    )],
                                ),
                            ),
                            ("periodSeconds", Value::I32(10)),
                        ],
                    ),
                ),
                (
                    "readinessProbe",
                    core(
                        "Probe",
                        vec![(
                            "handler",
                            core(
                                "ProbeHandler",
                                vec![(
                                    "tcpSocket",
                                    core(
                                        "TCPSocketAction",
                                        vec![("port", int_or_string(Some(8080), ""))],
                                    ),
                                )],
                            ),
                        )],
                    ),
                ),
                (
                    "securityContext",
                    core(
                        "SecurityContext",
                        vec![
                            ("runAsUser", Value::I64(0)),
                            ("runAsNonRoot", Value::Bool(false)),
                        ],
                    ),
                ),
            ],
        );
        message(
            &format!("{CORE}.Pod"),
            vec![
                ("metadata", meta),
                (
                    "spec",
                    core(
                        "PodSpec",
                        vec![
                            ("volumes", Value::List(volumes)),
                            ("containers", Value::List(vec![container])),
                            ("terminationGracePeriodSeconds", Value::I64(0)),
                            ("automountServiceAccountToken", Value::Bool(false)),
                        ],
                    ),
                ),
            ],
        )
    }

    #[test]
    fn pod_with_inline_structs_special_types_and_zero_pointers() {
        let decoded = decode(&body("v1", "Pod", &pod()), "", "v1", "Pod").unwrap();
        assert_eq!(
            decoded,
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {
                    "name": "web", "namespace": "default",
                    "creationTimestamp": "2024-05-06T07:08:09Z",
                    "deletionTimestamp": "2024-05-06T07:09:09Z",
                    "labels": {"app": "web"},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "r1", "controller": true}],
                    "managedFields": [{
                        "manager": "kubectl", "operation": "Update", "apiVersion": "v1",
                        "time": "2024-05-06T07:08:09Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}}
                    }]
                },
                "spec": {
                    "volumes": [
                        {"name": "cache", "emptyDir": {}},
                        {"name": "config", "configMap": {"name": "app-config", "defaultMode": 420}},
                        {"name": "token", "projected": {"sources": [
                            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}},
                            {"downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}
                        ]}}
                    ],
                    "containers": [{
                        "name": "app", "image": "nginx",
                        "env": [{"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "app-config", "key": "mode"}}}],
                        "envFrom": [{"secretRef": {"name": "creds"}}],
                        "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}},
                        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 10},
                        "readinessProbe": {"tcpSocket": {"port": 8080}},
                        "securityContext": {"runAsUser": 0, "runAsNonRoot": false}
                    }],
                    "terminationGracePeriodSeconds": 0,
                    "automountServiceAccountToken": false
                }
            })
        );
    }

    #[test]
    fn micro_times_node_and_events() {
        let lease = message(
            "api.coordination.v1.Lease",
            vec![(
                "spec",
                m(
                    "api.coordination.v1.LeaseSpec",
                    vec![
                        ("holderIdentity", s("node-a")),
                        ("leaseDurationSeconds", Value::I32(40)),
                        ("acquireTime", time("MicroTime", 1_714_979_289, 123_456_789)),
                        ("renewTime", time("MicroTime", 1_714_979_289, 0)),
                    ],
                ),
            )],
        );
        let decoded = decode(&body("coordination.k8s.io/v1", "Lease", &lease), "", "", "").unwrap();
        assert_eq!(
            decoded,
            json!({
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "spec": {
                    "holderIdentity": "node-a", "leaseDurationSeconds": 40,
                    "acquireTime": "2024-05-06T07:08:09.123456Z", "renewTime": "2024-05-06T07:08:09.000000Z"
                }
            })
        );

        let event = message(
            "api.events.v1.Event",
            vec![
                ("eventTime", time("MicroTime", 0, 1_000)),
                ("reportingController", s("kubelet")),
                ("action", s("Pulled")),
                ("reason", s("Pulled")),
                (
                    "regarding",
                    core(
                        "ObjectReference",
                        vec![
                            ("kind", s("Pod")),
                            ("name", s("p1")),
                            ("namespace", s("default")),
                        ],
                    ),
                ),
                ("note", s("pulled")),
                ("type", s("Normal")),
                ("deprecatedFirstTimestamp", time("Time", 86_400, 0)),
            ],
        );
        let decoded = decode(
            &body("events.k8s.io/v1", "Event", &event),
            "events.k8s.io",
            "v1",
            "Event",
        )
        .unwrap();
        assert_eq!(
            decoded,
            json!({
                "apiVersion": "events.k8s.io/v1", "kind": "Event",
                "eventTime": "1970-01-01T00:00:00.000001Z", "reportingController": "kubelet",
                "action": "Pulled", "reason": "Pulled",
                "regarding": {"kind": "Pod", "name": "p1", "namespace": "default"},
                "note": "pulled", "type": "Normal", "deprecatedFirstTimestamp": "1970-01-02T00:00:00Z"
            })
        );

        let node = message(
            &format!("{CORE}.Node"),
            vec![
                (
                    "spec",
                    core(
                        "NodeSpec",
                        vec![
                            ("podCIDR", s("10.244.1.0/24")),
                            ("unschedulable", Value::Bool(true)),
                            (
                                "taints",
                                Value::List(vec![core(
                                    "Taint",
                                    vec![
                                        ("key", s("node.kubernetes.io/unschedulable")),
                                        ("effect", s("NoSchedule")),
                                        ("timeAdded", time("Time", 1_714_979_289, 0)),
                                    ],
                                )]),
                            ),
                        ],
                    ),
                ),
                (
                    "status",
                    core(
                        "NodeStatus",
                        vec![
                            (
                                "capacity",
                                map(vec![
                                    ("cpu", quantity("4")),
                                    ("memory", quantity("8Gi")),
                                    ("pods", quantity("")),
                                ]),
                            ),
                            (
                                "addresses",
                                Value::List(vec![core(
                                    "NodeAddress",
                                    vec![("type", s("InternalIP")), ("address", s("192.0.2.10"))],
                                )]),
                            ),
                        ],
                    ),
                ),
            ],
        );
        let decoded = decode(&body("v1", "Node", &node), "", "v1", "Node").unwrap();
        assert_eq!(
            decoded,
            json!({
                "apiVersion": "v1", "kind": "Node",
                "spec": {
                    "podCIDR": "10.244.1.0/24", "unschedulable": true,
                    "taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": "2024-05-06T07:08:09Z"}]
                },
                "status": {
                    "capacity": {"cpu": "4", "memory": "8Gi", "pods": "0"},
                    "addresses": [{"type": "InternalIP", "address": "192.0.2.10"}]
                }
            })
        );
    }

    #[test]
    fn reviews_binding_eviction_and_delete_options() {
        let sar = message(
            "api.authorization.v1.SubjectAccessReview",
            vec![(
                "spec",
                m(
                    "api.authorization.v1.SubjectAccessReviewSpec",
                    vec![
                        (
                            "resourceAttributes",
                            m(
                                "api.authorization.v1.ResourceAttributes",
                                vec![
                                    ("namespace", s("ns")),
                                    ("verb", s("get")),
                                    ("resource", s("pods")),
                                ],
                            ),
                        ),
                        ("user", s("alice")),
                        ("groups", Value::List(vec![s("devs")])),
                        (
                            "extra",
                            map(vec![(
                                "scopes",
                                m(
                                    "api.authorization.v1.ExtraValue",
                                    vec![("items", Value::List(vec![s("a"), s("b")]))],
                                ),
                            )]),
                        ),
                        ("uid", s("u-1")),
                    ],
                ),
            )],
        );
        let decoded = decode(
            &body("authorization.k8s.io/v1", "SubjectAccessReview", &sar),
            "authorization.k8s.io",
            "v1",
            "SubjectAccessReview",
        )
        .unwrap();
        assert_eq!(
            decoded,
            json!({
                "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "spec": {
                    "resourceAttributes": {"namespace": "ns", "verb": "get", "resource": "pods"},
                    "user": "alice", "groups": ["devs"], "extra": {"scopes": ["a", "b"]}, "uid": "u-1"
                }
            })
        );

        let review = message(
            "api.authentication.v1.TokenReview",
            vec![(
                "spec",
                m(
                    "api.authentication.v1.TokenReviewSpec",
                    vec![
                        ("token", s("abc")),
                        ("audiences", Value::List(vec![s("api")])),
                    ],
                ),
            )],
        );
        let decoded = decode(
            &body("authentication.k8s.io/v1", "TokenReview", &review),
            "",
            "",
            "",
        )
        .unwrap();
        assert_eq!(
            decoded,
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "abc", "audiences": ["api"]}})
        );

        let meta = || {
            m(
                "apimachinery.pkg.apis.meta.v1.ObjectMeta",
                vec![("name", s("p1")), ("namespace", s("default"))],
            )
        };
        let binding = message(
            &format!("{CORE}.Binding"),
            vec![
                ("metadata", meta()),
                (
                    "target",
                    core(
                        "ObjectReference",
                        vec![
                            ("kind", s("Node")),
                            ("name", s("n1")),
                            ("apiVersion", s("v1")),
                        ],
                    ),
                ),
            ],
        );
        let decoded = decode(&body("v1", "Binding", &binding), "", "v1", "Binding").unwrap();
        assert_eq!(
            decoded,
            json!({
                "apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": "p1", "namespace": "default"},
                "target": {"kind": "Node", "name": "n1", "apiVersion": "v1"}
            })
        );

        let options = || {
            message(
                "apimachinery.pkg.apis.meta.v1.DeleteOptions",
                vec![
                    ("gracePeriodSeconds", Value::I64(0)),
                    (
                        "preconditions",
                        m(
                            "apimachinery.pkg.apis.meta.v1.Preconditions",
                            vec![("uid", s("p1"))],
                        ),
                    ),
                    ("propagationPolicy", s("Foreground")),
                    ("dryRun", Value::List(vec![s("All")])),
                ],
            )
        };
        let eviction = message(
            "api.policy.v1.Eviction",
            vec![
                ("metadata", meta()),
                ("deleteOptions", Value::Message(options())),
            ],
        );
        let decoded = decode(
            &body("policy/v1", "Eviction", &eviction),
            "policy",
            "v1",
            "Eviction",
        )
        .unwrap();
        assert_eq!(
            decoded,
            json!({
                "apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": "p1", "namespace": "default"},
                "deleteOptions": {"gracePeriodSeconds": 0, "preconditions": {"uid": "p1"}, "propagationPolicy": "Foreground", "dryRun": ["All"]}
            })
        );

        // DeleteOptions is registered in every group version; without typeMeta the request's
        // group, version and kind are used.
        let expected = |api_version: &str| {
            json!({
                "apiVersion": api_version, "kind": "DeleteOptions",
                "gracePeriodSeconds": 0, "preconditions": {"uid": "p1"}, "propagationPolicy": "Foreground", "dryRun": ["All"]
            })
        };
        let decoded = decode(
            &body("apps/v1", "DeleteOptions", &options()),
            "apps",
            "v1",
            "DeleteOptions",
        )
        .unwrap();
        assert_eq!(decoded, expected("apps/v1"));
        let decoded = decode(
            &body_with(None, &options(), "", ""),
            "",
            "v1",
            "DeleteOptions",
        )
        .unwrap();
        assert_eq!(decoded, expected("v1"));
    }

    #[test]
    fn raw_extension_and_envelope_type() {
        let revision = message(
            "api.apps.v1.ControllerRevision",
            vec![
                (
                    "data",
                    m(
                        "apimachinery.pkg.runtime.RawExtension",
                        vec![(
                            "raw",
                            Value::Bytes(br#"{"spec":{"replicas":1}}"#.as_slice().into()),
                        )],
                    ),
                ),
                ("revision", Value::I64(3)),
            ],
        );
        let decoded = decode(
            &body("apps/v1", "ControllerRevision", &revision),
            "apps",
            "v1",
            "ControllerRevision",
        )
        .unwrap();
        assert_eq!(
            decoded,
            json!({"apiVersion": "apps/v1", "kind": "ControllerRevision", "data": {"spec": {"replicas": 1}}, "revision": 3})
        );

        // Without typeMeta, the request's type is used; with one, the envelope's, as for JSON.
        let body_without = body_with(None, &revision, "", "");
        let decoded = decode(&body_without, "apps", "v1", "ControllerRevision").unwrap();
        assert_eq!(decoded["apiVersion"], "apps/v1");
        let secret = message(&format!("{CORE}.Secret"), vec![("type", s("Opaque"))]);
        let decoded = decode(&body("v1", "Secret", &secret), "", "v1", "ConfigMap").unwrap();
        assert_eq!(
            decoded,
            json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque"})
        );
    }

    #[test]
    fn malformed_bodies_are_bad_requests() {
        let err = decode(br#"{"kind":"ConfigMap"}"#, "", "v1", "ConfigMap").unwrap_err();
        assert!(matches!(err, DecodeError::BadMagic), "{err}");
        assert_eq!(err.status_code(), 400);
        assert!(err.to_string().contains("magic"), "{err}");

        let err = decode(b"k8s\0\x0a\x10\x0a", "", "v1", "ConfigMap").unwrap_err();
        assert!(matches!(err, DecodeError::BadEnvelope(_)), "{err}");
        assert_eq!(err.status_code(), 400);

        let raw = message(
            "apimachinery.pkg.runtime.Unknown",
            vec![
                (
                    "typeMeta",
                    m(
                        "apimachinery.pkg.runtime.TypeMeta",
                        vec![("apiVersion", s("v1")), ("kind", s("ConfigMap"))],
                    ),
                ),
                ("raw", Value::Bytes(vec![0x0a, 0x05, 0x01].into())),
            ],
        );
        let body = [MAGIC.as_slice(), &raw.encode_to_vec()].concat();
        let err = decode(&body, "", "v1", "ConfigMap").unwrap_err();
        assert!(matches!(err, DecodeError::BadObject { .. }), "{err}");
        assert!(
            err.to_string()
                .starts_with("protobuf body is not a valid ConfigMap: "),
            "{err}"
        );
        assert_eq!(err.status_code(), 400);
    }

    #[test]
    fn values_without_json_form_name_their_path() {
        let revision = message(
            "api.apps.v1.ControllerRevision",
            vec![(
                "data",
                m(
                    "apimachinery.pkg.runtime.RawExtension",
                    vec![("raw", Value::Bytes(b"\x0a\x01x".as_slice().into()))],
                ),
            )],
        );
        let err = decode(
            &body("apps/v1", "ControllerRevision", &revision),
            "",
            "",
            "",
        )
        .unwrap_err();
        assert!(
            matches!(&err, DecodeError::BadValue { path, .. } if path == "data"),
            "{err}"
        );
        assert!(
            err.to_string().contains("raw is not a JSON document"),
            "{err}"
        );

        let mut pod = pod();
        let spec = message(
            &format!("{CORE}.PodSpec"),
            vec![(
                "containers",
                Value::List(vec![core(
                    "Container",
                    vec![
                        ("name", s("app")),
                        (
                            "readinessProbe",
                            core(
                                "Probe",
                                vec![(
                                    "handler",
                                    core(
                                        "ProbeHandler",
                                        vec![(
                                            "tcpSocket",
                                            core(
                                                "TCPSocketAction",
                                                vec![(
                                                    "port",
                                                    m(
                                                        "apimachinery.pkg.util.intstr.IntOrString",
                                                        vec![("type", Value::I64(7))],
                                                    ),
                                                )],
                                            ),
                                        )],
                                    ),
                                )],
                            ),
                        ),
                    ],
                )]),
            )],
        );
        pod.try_set_field_by_name("spec", Value::Message(spec))
            .unwrap();
        let err = decode(&body("v1", "Pod", &pod), "", "v1", "Pod").unwrap_err();
        assert_eq!(
            err.to_string(),
            "protobuf body for Pod has an invalid value at spec.containers[0].readinessProbe.tcpSocket.port: \
             IntOrString of unknown type 7"
        );
        assert_eq!(err.status_code(), 400);

        let node = message(
            &format!("{CORE}.Node"),
            vec![(
                "status",
                core(
                    "NodeStatus",
                    vec![
                        (
                            "capacity",
                            map(vec![(
                                "cpu",
                                m("apimachinery.pkg.api.resource.Quantity", vec![]),
                            )]),
                        ),
                        (
                            "conditions",
                            Value::List(vec![core(
                                "NodeCondition",
                                vec![("lastHeartbeatTime", time("Time", 0, 1_000_000_000))],
                            )]),
                        ),
                    ],
                ),
            )],
        );
        let err = decode(&body("v1", "Node", &node), "", "v1", "Node").unwrap_err();
        assert!(
            matches!(&err, DecodeError::BadValue { path, .. } if path == "status.conditions[0].lastHeartbeatTime"),
            "{err}"
        );
    }

    #[test]
    fn unsupported_bodies_are_unsupported_media_types() {
        let object = message(&format!("{CORE}.ConfigMap"), vec![]);
        let err = decode(
            &body_with(Some(("v1", "ConfigMap")), &object, "gzip", ""),
            "",
            "v1",
            "ConfigMap",
        )
        .unwrap_err();
        assert!(
            matches!(&err, DecodeError::UnsupportedEncoding(e) if e == "gzip"),
            "{err}"
        );
        assert_eq!(err.status_code(), 415);

        let err = decode(
            &body_with(Some(("v1", "ConfigMap")), &object, "", "application/json"),
            "",
            "v1",
            "ConfigMap",
        )
        .unwrap_err();
        assert!(
            matches!(&err, DecodeError::UnsupportedContentType(_)),
            "{err}"
        );
        assert_eq!(err.status_code(), 415);
        let ok = decode(
            &body_with(Some(("v1", "ConfigMap")), &object, "", CONTENT_TYPE),
            "",
            "v1",
            "ConfigMap",
        );
        assert!(ok.is_ok());

        for (api_version, kind) in [
            ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
            ("apps/v1beta1", "Deployment"),
            ("v1", "Widget"),
            ("v1", "v1.Pod"),
        ] {
            let err = decode(&body(api_version, kind, &object), "", "v1", "ConfigMap").unwrap_err();
            assert_eq!(err.status_code(), 415, "{api_version} {kind}");
            assert_eq!(
                err.to_string(),
                format!(
                    "protobuf bodies are supported for the kinds of v1, apps/v1, batch/v1, policy/v1, \
                     autoscaling/v1, autoscaling/v2, scheduling.k8s.io/v1, coordination.k8s.io/v1, \
                     events.k8s.io/v1, authorization.k8s.io/v1, authentication.k8s.io/v1, \
                     rbac.authorization.k8s.io/v1, networking.k8s.io/v1, certificates.k8s.io/v1, and \
                     DeleteOptions; send {kind} ({api_version}) as JSON"
                )
            );
        }
    }

    #[test]
    fn schemas_compile_and_the_tables_name_real_fields() {
        let pool = pool().unwrap();
        for (group, version, package) in GROUP_VERSIONS {
            assert!(
                pool.all_messages().any(|m| m.package_name() == *package),
                "no messages for {group}/{version} in {package}"
            );
        }
        for (message, field) in INLINE {
            let field = pool
                .get_message_by_name(message)
                .and_then(|m| m.get_field_by_name(field))
                .unwrap_or_else(|| panic!("{message}.{field} does not exist"));
            assert!(matches!(field.kind(), prost_reflect::Kind::Message(_)) && !field.is_list());
        }
        for (message, field, _) in RENAMED {
            assert!(
                pool.get_message_by_name(message)
                    .and_then(|m| m.get_field_by_name(field))
                    .is_some(),
                "{message}.{field} does not exist"
            );
        }
        let wrappers: BTreeSet<String> = pool
            .all_messages()
            .filter(|m| string_list_wrapper(m).is_some())
            .map(|m| m.full_name().to_owned())
            .collect();
        let expected = [
            "k8s.io.api.authentication.v1.ExtraValue",
            "k8s.io.api.authorization.v1.ExtraValue",
            "k8s.io.api.certificates.v1.ExtraValue",
            "k8s.io.apimachinery.pkg.apis.meta.v1.Verbs",
        ];
        assert_eq!(wrappers, expected.into_iter().map(str::to_owned).collect());
    }

    /// Every message reachable from the supported kinds gives exactly the JSON field names of
    /// the `k8s-openapi` type of the same name (renames and inlined structs applied), so the
    /// tables above are complete.
    #[test]
    fn field_names_match_k8s_openapi() {
        use k8s_openapi::api;

        fn json_names(descriptor: &MessageDescriptor, names: &mut BTreeSet<String>) {
            for field in descriptor.fields() {
                match field.kind() {
                    prost_reflect::Kind::Message(inlined)
                        if is_inline(descriptor.full_name(), field.name()) =>
                    {
                        json_names(&inlined, names);
                    }
                    _ => {
                        names.insert(json_name(descriptor.full_name(), field.name()).to_owned());
                    }
                }
            }
        }

        let mut generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
        macro_rules! roots {
            ($($t:ty),* $(,)?) => { $( let _ = generator.subschema_for::<$t>(); )* };
        }
        roots!(
            api::core::v1::Binding,
            api::core::v1::ConfigMap,
            api::core::v1::Endpoints,
            api::core::v1::Event,
            api::core::v1::LimitRange,
            api::core::v1::Namespace,
            api::core::v1::Node,
            api::core::v1::PersistentVolume,
            api::core::v1::PersistentVolumeClaim,
            api::core::v1::Pod,
            api::core::v1::PodTemplate,
            api::core::v1::ReplicationController,
            api::core::v1::ResourceQuota,
            api::core::v1::Secret,
            api::core::v1::Service,
            api::core::v1::ServiceAccount,
            api::apps::v1::ControllerRevision,
            api::apps::v1::DaemonSet,
            api::apps::v1::Deployment,
            api::apps::v1::ReplicaSet,
            api::apps::v1::StatefulSet,
            api::batch::v1::CronJob,
            api::batch::v1::Job,
            api::policy::v1::Eviction,
            api::policy::v1::PodDisruptionBudget,
            api::autoscaling::v1::HorizontalPodAutoscaler,
            api::autoscaling::v1::Scale,
            api::autoscaling::v2::HorizontalPodAutoscaler,
            api::scheduling::v1::PriorityClass,
            api::coordination::v1::Lease,
            api::events::v1::Event,
            api::authorization::v1::LocalSubjectAccessReview,
            api::authorization::v1::SelfSubjectAccessReview,
            api::authorization::v1::SelfSubjectRulesReview,
            api::authorization::v1::SubjectAccessReview,
            api::authentication::v1::SelfSubjectReview,
            api::authentication::v1::TokenRequest,
            api::authentication::v1::TokenReview,
            api::rbac::v1::ClusterRole,
            api::rbac::v1::ClusterRoleBinding,
            api::rbac::v1::Role,
            api::rbac::v1::RoleBinding,
            api::networking::v1::Ingress,
            api::networking::v1::IngressClass,
            api::networking::v1::NetworkPolicy,
            api::certificates::v1::CertificateSigningRequest,
            k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions,
        );
        let pool = pool().unwrap();
        let definitions = generator.take_definitions(true);
        let mut compared = 0;
        for (name, schema) in &definitions {
            let proto_name = name.replacen("io.k8s.", "k8s.io.", 1);
            let descriptor = pool
                .get_message_by_name(&proto_name)
                .unwrap_or_else(|| panic!("no proto message for {name}"));
            let Some(properties) = schema.get("properties").and_then(Json::as_object) else {
                continue;
            };
            let mut proto = BTreeSet::new();
            json_names(&descriptor, &mut proto);
            let json: BTreeSet<String> = properties
                .keys()
                .filter(|k| proto.contains(*k) || !matches!(k.as_str(), "apiVersion" | "kind"))
                .cloned()
                .collect();
            assert_eq!(proto, json, "{proto_name}");
            compared += 1;
        }
        assert!(compared > 300, "only {compared} types compared");
    }
}
