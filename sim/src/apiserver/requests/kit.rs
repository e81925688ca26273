//! The request kit every verb shares: a request taken apart ([`RequestCtx`]), its body, the
//! options of a write and of a delete, the output a client asked for, a list's filter, the
//! store key of an object and its rendering.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use serde_json::{Value, json};

use super::auth::UserInfo;
use super::error::{ApiError, ApiResult};
use crate::apiserver::encodings::protobuf;
use crate::apiserver::encodings::table::{IncludeObject, PrinterColumn, ResourceInfo};
use crate::apiserver::server::Server;
use crate::storage::registry::{ResourceDef, ResourceId};
use crate::storage::selectors::{FieldSelector, LabelSelector};
use crate::storage::store::{ObjKey, Stored, WatchFilter};

/// One request, taken apart.
#[derive(Debug)]
pub struct RequestCtx {
    /// HTTP method.
    pub method: Method,
    /// Decoded query parameters.
    pub query: HashMap<String, String>,
    /// Request headers.
    pub headers: HeaderMap,
    /// The whole body.
    pub body: Bytes,
    /// The authenticated user; None when authentication is off.
    pub user: Option<UserInfo>,
}

/// How strictly unknown fields are treated (`fieldValidation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    /// Drop them silently.
    Ignore,
    /// Drop them and say so in a `Warning` header.
    Warn,
    /// Reject the request.
    Strict,
}

/// Options of one write.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    /// `fieldManager`, else derived from the User-Agent.
    pub field_manager: String,
    /// `dryRun=All`: validate and answer, store nothing.
    pub dry_run: bool,
    /// `fieldValidation`.
    pub field_validation: FieldValidation,
    /// `force` (server-side apply).
    pub force: bool,
    /// Who asks, for the admission policies; `None` for the sim's own writes (controllers,
    /// garbage collection) and for writes a subresource already admitted, which are not
    /// admitted (again).
    pub requester: Option<UserInfo>,
}

impl WriteOptions {
    /// Options for writes the sim makes itself (controllers, garbage collection).
    pub fn internal() -> Self {
        Self {
            field_manager: "telemesh-sim".into(),
            dry_run: false,
            field_validation: FieldValidation::Ignore,
            force: false,
            requester: None,
        }
    }

    pub(in crate::apiserver) fn from_request(ctx: &RequestCtx) -> ApiResult<Self> {
        let q = &ctx.query;
        let field_manager = match q.get("fieldManager") {
            Some(m) if m.len() > 128 => {
                return Err(ApiError::bad_request(
                    "fieldManager: Too long: must have at most 128 bytes",
                ));
            }
            Some(m) => m.clone(),
            None => ctx
                .headers
                .get(header::USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .map(|ua| ua.split('/').next().unwrap_or(ua).to_owned())
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "unknown".into()),
        };
        let dry_run = match q.get("dryRun").map(String::as_str) {
            None | Some("") => false,
            Some("All") => true,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "dryRun: Unsupported value: {other:?}: supported values: \"All\""
                )));
            }
        };
        let field_validation = match q.get("fieldValidation").map(String::as_str) {
            None | Some("") | Some("Ignore") => FieldValidation::Ignore,
            Some("Warn") => FieldValidation::Warn,
            Some("Strict") => FieldValidation::Strict,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "fieldValidation: Unsupported value: {other:?}: supported values: \"Ignore\", \"Strict\", \"Warn\""
                )));
            }
        };
        let force = matches!(q.get("force").map(String::as_str), Some("true" | "1"));
        Ok(Self {
            field_manager,
            dry_run,
            field_validation,
            force,
            requester: Some(requester(ctx)),
        })
    }
}

/// What the client wants objects rendered as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    /// The objects themselves.
    Object,
    /// A meta.k8s.io Table.
    Table(IncludeObject),
    /// PartialObjectMetadata(List).
    Metadata,
}

/// Reads the Accept header and `includeObject`.
pub fn output_format(headers: &HeaderMap, query: &HashMap<String, String>) -> OutputFormat {
    let accept = accept(headers);
    for part in accept.split(',') {
        if part.contains("as=Table") {
            let include = match query.get("includeObject").map(String::as_str) {
                Some("None") => IncludeObject::None,
                Some("Object") => IncludeObject::Object,
                _ => IncludeObject::Metadata,
            };
            return OutputFormat::Table(include);
        }
        if part.contains("as=PartialObjectMetadata") {
            return OutputFormat::Metadata;
        }
        if part.trim().starts_with("application/json") || part.trim().starts_with("*/*") {
            return OutputFormat::Object;
        }
    }
    OutputFormat::Object
}

/// Builds the table/openapi description of a resource.
pub fn resource_info(def: &ResourceDef) -> ResourceInfo {
    let crd = def.crd.as_ref();
    ResourceInfo {
        group: def.group.clone(),
        version: def.version.clone(),
        kind: def.kind.clone(),
        plural: def.plural.clone(),
        namespaced: def.namespaced,
        verbs: def.verbs().iter().map(|s| (*s).to_owned()).collect(),
        subresources: def.subresources().iter().map(|s| (*s).to_owned()).collect(),
        printer_columns: crd
            .map(|c| {
                c.printer_columns
                    .iter()
                    .map(|p| PrinterColumn {
                        name: p
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                        type_: p
                            .get("type")
                            .and_then(Value::as_str)
                            .unwrap_or("string")
                            .to_owned(),
                        format: p.get("format").and_then(Value::as_str).map(str::to_owned),
                        description: p
                            .get("description")
                            .and_then(Value::as_str)
                            .map(str::to_owned),
                        priority: p.get("priority").and_then(Value::as_i64).unwrap_or(0) as i32,
                        json_path: p
                            .get("jsonPath")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        schema: crd.and_then(|c| c.schema.clone()),
    }
}

/// Returns the object as served in `def`'s version (apiVersion, and for a converted kind its
/// fields, differ from the stored object).
pub fn object_bytes(def: &ResourceDef, s: &Stored) -> Bytes {
    if def.serves_storage_form() {
        return s.json.clone();
    }
    Bytes::from(object_value(def, s).to_string())
}

/// Returns the object as served in `def`'s version, as a value.
pub fn object_value(def: &ResourceDef, s: &Stored) -> Value {
    let mut v = s.value();
    if def.serves_storage_form() {
        return v;
    }
    if let Some(conversion) = def.conversion {
        v = (conversion.from_storage)(v);
    }
    v["apiVersion"] = json!(def.api_version());
    v
}

pub(in crate::apiserver) fn metadata_only(v: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": v.get("metadata").cloned().unwrap_or(json!({}))})
}

/// Returns the store key of `name` in `def`, with the namespace dropped for cluster-scoped kinds.
pub fn key(def: &ResourceDef, ns: Option<&str>, name: &str) -> ObjKey {
    ObjKey::new(
        if def.namespaced {
            ns.unwrap_or_default()
        } else {
            ""
        },
        name,
    )
}

/// Returns true when the request body is Kubernetes protobuf (kubectl's typed clients send it).
pub(in crate::apiserver) fn is_protobuf(ctx: &RequestCtx) -> bool {
    ctx.headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with(protobuf::CONTENT_TYPE))
}

/// Decodes a request body (JSON, or protobuf for the built-in kinds) expected to hold
/// `group/version` `kind`; protobuf bodies name their own type, which wins.
pub(in crate::apiserver) fn parse_body(
    ctx: &RequestCtx,
    group: &str,
    version: &str,
    kind: &str,
) -> ApiResult<Value> {
    let v: Value = if is_protobuf(ctx) {
        protobuf::decode(&ctx.body, group, version, kind).map_err(|e| {
            ApiError::new(
                e.status_code(),
                if e.status_code() == 415 {
                    "UnsupportedMediaType"
                } else {
                    "BadRequest"
                },
                e.to_string(),
            )
        })?
    } else {
        serde_json::from_slice(&ctx.body).map_err(|e| {
            ApiError::bad_request(format!(
                "the body of the request was in an unknown format: {e}"
            ))
        })?
    };
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request must be a JSON object",
        ));
    }
    Ok(v)
}

/// The patch flavours, by Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// application/json-patch+json.
    Json,
    /// application/merge-patch+json.
    Merge,
    /// application/strategic-merge-patch+json.
    Strategic,
    /// application/apply-patch+yaml (or +cbor): server-side apply.
    Apply,
}

impl PatchType {
    pub(in crate::apiserver) fn from_content_type(ct: &str) -> ApiResult<Self> {
        let ct = ct.split(';').next().unwrap_or_default().trim();
        match ct {
            "application/json-patch+json" => Ok(Self::Json),
            "application/merge-patch+json" => Ok(Self::Merge),
            "application/strategic-merge-patch+json" => Ok(Self::Strategic),
            "application/apply-patch+yaml" => Ok(Self::Apply),
            other => Err(ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {other:?})"
            ))),
        }
    }
}

pub(in crate::apiserver) fn parse_patch_body(ctx: &RequestCtx, ty: PatchType) -> ApiResult<Value> {
    match serde_json::from_slice::<Value>(&ctx.body) {
        Ok(v) => Ok(v),
        Err(e) if ty == PatchType::Apply => {
            // Apply bodies may be YAML; JSON (what kubectl and kube-rs send) is tried first.
            serde_yaml_ng::from_slice::<Value>(&ctx.body).map_err(|y| {
                ApiError::bad_request(format!("error decoding YAML: {y} (as JSON: {e})"))
            })
        }
        Err(e) => Err(ApiError::bad_request(format!(
            "the body of the request was in an unknown format: {e}"
        ))),
    }
}

pub(in crate::apiserver) fn build_filter(
    def: &ResourceDef,
    ns: Option<&str>,
    query: &HashMap<String, String>,
) -> ApiResult<WatchFilter> {
    let labels = LabelSelector::parse(
        query
            .get("labelSelector")
            .map(String::as_str)
            .unwrap_or_default(),
    )
    .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))?;
    let fields = FieldSelector::parse(
        query
            .get("fieldSelector")
            .map(String::as_str)
            .unwrap_or_default(),
    )
    .map_err(|e| ApiError::bad_request(e.0))?;
    let mut fields = fields;
    for req in &mut fields.0 {
        // Matched against the stored object's fields (a converted kind's labels map onto them).
        let Some(stored) = def.stored_field(&req.field) else {
            return Err(ApiError::bad_request(format!(
                "field label not supported: {}",
                req.field
            )));
        };
        req.field = stored.to_owned();
    }
    Ok(WatchFilter {
        namespace: if def.namespaced {
            ns.map(str::to_owned)
        } else {
            None
        },
        labels,
        fields,
    })
}

/// Returns who is asking: the authenticated user, or the admin when authentication is off.
pub(in crate::apiserver) fn requester(ctx: &RequestCtx) -> UserInfo {
    ctx.user.clone().unwrap_or(UserInfo {
        username: "system:admin".into(),
        groups: vec!["system:masters".into()],
        ..Default::default()
    })
}

/// `DeleteOptions`, from the body and the query.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// Orphan, Background or Foreground; None for the resource's default.
    pub propagation: Option<Propagation>,
    /// Precondition on uid.
    pub uid: Option<String>,
    /// Precondition on resourceVersion.
    pub resource_version: Option<String>,
    /// `gracePeriodSeconds`.
    pub grace_period_seconds: Option<i64>,
    /// dryRun=All.
    pub dry_run: bool,
    /// Who asks, for the admission policies; `None` for the sim's own deletes.
    pub requester: Option<UserInfo>,
}

/// How dependents of a deleted object are treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// Dependents lose their owner reference and stay.
    Orphan,
    /// The owner goes now; dependents are deleted after.
    Background,
    /// Dependents are deleted first; the owner waits with a `foregroundDeletion` finalizer.
    Foreground,
}

impl DeleteOptions {
    pub(in crate::apiserver) fn from_request(ctx: &RequestCtx) -> ApiResult<Self> {
        let body: Value = if ctx.body.is_empty() {
            Value::Null
        } else if is_protobuf(ctx) {
            parse_body(ctx, "meta.k8s.io", "v1", "DeleteOptions")?
        } else {
            serde_json::from_slice(&ctx.body)
                .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?
        };
        let s = |k: &str| {
            body.get(k)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| ctx.query.get(k).cloned())
        };
        let propagation = match s("propagationPolicy").as_deref() {
            None | Some("") => match body.get("orphanDependents").and_then(Value::as_bool) {
                Some(true) => Some(Propagation::Orphan),
                Some(false) => Some(Propagation::Background),
                None => None,
            },
            Some("Orphan") => Some(Propagation::Orphan),
            Some("Background") => Some(Propagation::Background),
            Some("Foreground") => Some(Propagation::Foreground),
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "propagationPolicy: Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""
                )));
            }
        };
        let grace_period_seconds = body
            .get("gracePeriodSeconds")
            .and_then(Value::as_i64)
            .or_else(|| {
                ctx.query
                    .get("gracePeriodSeconds")
                    .and_then(|g| g.parse().ok())
            });
        let dry_run = body
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|d| d.iter().any(|x| x == "All"))
            || ctx.query.get("dryRun").is_some_and(|d| d == "All");
        Ok(Self {
            propagation,
            uid: body
                .pointer("/preconditions/uid")
                .and_then(Value::as_str)
                .map(str::to_owned),
            resource_version: body
                .pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_owned),
            grace_period_seconds,
            dry_run,
            requester: Some(requester(ctx)),
        })
    }
}

/// Looks up a resource by id in its storage version.
pub fn storage_def(server: &Server, id: &ResourceId) -> Option<Arc<ResourceDef>> {
    server.registry.read().storage_def(id)
}

/// Returns a JSON response with the given status.
pub fn json_response(code: StatusCode, body: impl Into<Body>) -> Response {
    let mut resp = Response::new(body.into());
    *resp.status_mut() = code;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// Returns the Accept header, or empty.
pub fn accept(headers: &HeaderMap) -> &str {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}
