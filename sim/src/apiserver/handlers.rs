//! The verbs: get, list, create, update, patch, delete and deletecollection, with the API
//! server's preconditions, dry-run, content negotiation (objects, Tables, metadata only) and
//! paginated lists. Each write is one transaction on the store.

use std::collections::HashMap;
use std::sync::Arc;

use axum::response::Response;
use base64::Engine as _;
use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use serde_json::{Value, json};

use super::auth::{self, Attributes, UserInfo};
use super::error::{ApiError, ApiResult};
use super::request::ResourcePath;
use super::table::{IncludeObject, PrinterColumn, ResourceInfo};
use super::{
    Server, graceful, json_response, lifecycle, patch, protobuf, subresources, table, vap, watch,
};
use crate::registry::{ResourceDef, ResourceId};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::store::{ObjKey, Stored, Txn, WatchFilter};

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

    fn from_request(ctx: &RequestCtx) -> ApiResult<Self> {
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
    let accept = super::accept(headers);
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

fn metadata_only(v: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": v.get("metadata").cloned().unwrap_or(json!({}))})
}

/// Renders one object in the requested format.
fn render_one(def: &ResourceDef, s: &Stored, format: OutputFormat, code: StatusCode) -> Response {
    match format {
        OutputFormat::Object => json_response(code, object_bytes(def, s)),
        OutputFormat::Metadata => json_response(code, metadata_only(&s.value()).to_string()),
        OutputFormat::Table(include) => {
            let v = object_value(def, s);
            let t =
                table::render_table(&resource_info(def), &[&v], include, jiff::Timestamp::now());
            json_response(code, t.to_string())
        }
    }
}

/// Serves a resource request.
pub async fn resource(
    server: &Arc<Server>,
    rp: ResourcePath,
    ctx: RequestCtx,
) -> ApiResult<Response> {
    let def = server
        .registry
        .read()
        .get(&rp.group, &rp.version, &rp.plural)
        .ok_or_else(|| ApiError::no_route(&format!("{} {}", ctx.method, rp.plural)))?;
    if !def.namespaced && rp.namespace.is_some() {
        return Err(ApiError::no_route(&rp.plural));
    }
    let is_watch = matches!(
        ctx.query.get("watch").map(String::as_str),
        Some("true" | "1")
    );
    let verb = auth::request_verb(&ctx.method, rp.name.is_some(), is_watch)
        .ok_or_else(|| ApiError::method_not_allowed(ctx.method.as_str(), &rp.plural))?;
    let attributes = Attributes {
        verb: verb.into(),
        group: def.group.clone(),
        resource: def.plural.clone(),
        subresource: rp.subresource.clone().unwrap_or_default(),
        namespace: rp.namespace.clone().unwrap_or_default(),
        name: rp.name.clone().unwrap_or_default(),
    };
    if let Some(user) = ctx.user.as_ref() {
        server.audit.record(&server.auth, user, attributes.clone());
    }
    server.auth.authorize(ctx.user.as_ref(), &attributes)?;
    if !def.verbs().contains(&verb) {
        return Err(ApiError::method_not_allowed(verb, &def.plural));
    }
    let ns = rp.namespace.as_deref();
    let name = rp.name.as_deref();
    let sub = rp.subresource.as_deref();
    let format = output_format(&ctx.headers, &ctx.query);
    if let Some(s) = sub
        && !def.subresources().contains(&s)
    {
        return Err(ApiError::no_route(&format!("{}/{s}", def.plural)));
    }
    match (verb, name, sub) {
        ("watch", None, None) => watch::serve(server, &def, ns, &ctx, format),
        ("list", None, None) => list(server, &def, ns, &ctx, format),
        ("get", Some(n), None | Some("status")) => {
            let s = server
                .store
                .get(&def.id(), &key(&def, ns, n))
                .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, n))?;
            Ok(render_one(&def, &s, format, StatusCode::OK))
        }
        ("get", Some(n), Some("scale")) => subresources::get_scale(server, &def, ns, n),
        ("create", None, None) => {
            let obj = parse_body(&ctx, &def.group, &def.version, &def.kind)?;
            let opts = WriteOptions::from_request(&ctx)?;
            create(server, &def, ns, obj, &opts, &ctx, format)
        }
        ("create", Some(n), Some("binding")) => subresources::bind(
            server,
            &def,
            ns,
            n,
            parse_body(&ctx, "", "v1", "Binding")?,
            &WriteOptions::from_request(&ctx)?,
        ),
        ("create", Some(n), Some("eviction")) => subresources::evict(
            server,
            &def,
            ns,
            n,
            parse_body(&ctx, "policy", "v1", "Eviction")?,
            &WriteOptions::from_request(&ctx)?,
        ),
        ("update", Some(n), None | Some("status")) => {
            let obj = parse_body(&ctx, &def.group, &def.version, &def.kind)?;
            let opts = WriteOptions::from_request(&ctx)?;
            let (s, warnings) = update_object(server, &def, ns, n, sub, obj, &opts)?;
            Ok(with_warnings(
                render_one(&def, &s, format, StatusCode::OK),
                &warnings,
            ))
        }
        ("update", Some(n), Some("scale")) => subresources::update_scale(
            server,
            &def,
            ns,
            n,
            parse_body(&ctx, "autoscaling", "v1", "Scale")?,
            &WriteOptions::from_request(&ctx)?,
        ),
        ("patch", Some(n), None | Some("status") | Some("scale")) => {
            let content_type = ctx
                .headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            let patch_type = PatchType::from_content_type(content_type)?;
            let body = parse_patch_body(&ctx, patch_type)?;
            let opts = WriteOptions::from_request(&ctx)?;
            if sub == Some("scale") {
                return subresources::patch_scale(server, &def, ns, n, patch_type, &body, &opts);
            }
            let (code, s) = patch_object(server, &def, ns, n, sub, patch_type, &body, &opts)?;
            Ok(render_one(&def, &s, format, code))
        }
        ("delete", Some(n), None) => {
            let opts = DeleteOptions::from_request(&ctx)?;
            match delete_object(server, &def, ns, n, &opts)? {
                DeleteOutcome::Pending(s) => Ok(render_one(&def, &s, format, StatusCode::ACCEPTED)),
                DeleteOutcome::Deleted(s) => {
                    if returns_deleted_object(&def) {
                        Ok(render_one(&def, &s, format, StatusCode::OK))
                    } else {
                        let status = json!({
                            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                            "details": {"name": n, "group": def.group, "kind": def.plural, "uid": s.uid}
                        });
                        Ok(json_response(StatusCode::OK, status.to_string()))
                    }
                }
            }
        }
        ("deletecollection", None, None) => delete_collection(server, &def, ns, &ctx),
        _ => Err(ApiError::method_not_allowed(verb, &def.plural)),
    }
}

/// Resources whose DELETE answers with the deleted object rather than a Status (as upstream).
fn returns_deleted_object(def: &ResourceDef) -> bool {
    def.is_custom()
        || (def.group.is_empty() && matches!(def.plural.as_str(), "pods" | "namespaces" | "nodes"))
}

fn with_warnings(mut resp: Response, warnings: &[String]) -> Response {
    for w in warnings {
        if let Ok(v) = HeaderValue::from_str(&format!("299 - \"{}\"", w.replace('"', "'"))) {
            resp.headers_mut().append("Warning", v);
        }
    }
    resp
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
fn is_protobuf(ctx: &RequestCtx) -> bool {
    ctx.headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with(protobuf::CONTENT_TYPE))
}

/// Decodes a request body (JSON, or protobuf for the built-in kinds) expected to hold
/// `group/version` `kind`; protobuf bodies name their own type, which wins.
fn parse_body(ctx: &RequestCtx, group: &str, version: &str, kind: &str) -> ApiResult<Value> {
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
    fn from_content_type(ct: &str) -> ApiResult<Self> {
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

fn parse_patch_body(ctx: &RequestCtx, ty: PatchType) -> ApiResult<Value> {
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

pub(super) fn build_filter(
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

/// Continue tokens: the list's resourceVersion and the last key served, base64 JSON.
fn encode_continue(rv: u64, last: &ObjKey) -> String {
    let raw = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": [last.namespace, last.name]});
    base64::engine::general_purpose::STANDARD.encode(raw.to_string())
}

fn decode_continue(token: &str) -> ApiResult<(u64, ObjKey)> {
    let bad = || {
        ApiError::bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        )
    };
    let raw = base64::engine::general_purpose::STANDARD
        .decode(token)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    let rv = v.get("rv").and_then(Value::as_u64).ok_or_else(bad)?;
    let ns = v
        .pointer("/start/0")
        .and_then(Value::as_str)
        .ok_or_else(bad)?;
    let name = v
        .pointer("/start/1")
        .and_then(Value::as_str)
        .ok_or_else(bad)?;
    Ok((rv, ObjKey::new(ns, name)))
}

fn list(
    server: &Arc<Server>,
    def: &ResourceDef,
    ns: Option<&str>,
    ctx: &RequestCtx,
    format: OutputFormat,
) -> ApiResult<Response> {
    let q = &ctx.query;
    let filter = build_filter(def, ns, q)?;
    let limit = match q.get("limit") {
        Some(l) => l
            .parse::<usize>()
            .map_err(|_| ApiError::bad_request(format!("limit: Invalid value: {l:?}")))?,
        None => 0,
    };
    let id = def.id();
    let requested_rv = match q.get("resourceVersion").map(String::as_str) {
        None | Some("") => None,
        Some(rv) => Some(rv.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!("resourceVersion: Invalid value: {rv:?}"))
        })?),
    };
    let (objects, rv, start_after) = if let Some(token) =
        q.get("continue").filter(|c| !c.is_empty())
    {
        let (rv, last) = decode_continue(token)?;
        let objs = server.store.snapshot_at(&id, rv).ok_or_else(|| {
            ApiError::expired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
        })?;
        (objs, rv, Some(last))
    } else {
        match (
            q.get("resourceVersionMatch").map(String::as_str),
            requested_rv,
        ) {
            (Some("Exact"), Some(rv)) => {
                let objs = server.store.snapshot_at(&id, rv).ok_or_else(|| {
                    ApiError::expired(format!(
                        "too old resource version: {rv} ({})",
                        server.store.current_rv()
                    ))
                })?;
                (objs, rv, None)
            }
            (Some("Exact"), None) | (Some("NotOlderThan"), None) => {
                return Err(ApiError::bad_request(
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            (Some(m), _) if m != "Exact" && m != "NotOlderThan" => {
                return Err(ApiError::bad_request(format!(
                    "resourceVersionMatch: Unsupported value: {m:?}"
                )));
            }
            _ => {
                let (objs, rv) = server.store.snapshot(&id);
                (objs, rv, None)
            }
        }
    };
    // Range over the namespace only, when the list is namespaced.
    let iter: Box<dyn Iterator<Item = (&ObjKey, &Arc<Stored>)>> =
        match (&filter.namespace, &start_after) {
            (_, Some(last)) => Box::new(objects.range((
                std::ops::Bound::Excluded(last.clone()),
                std::ops::Bound::Unbounded,
            ))),
            (Some(ns), None) => Box::new(objects.range(ObjKey::new(ns, "")..)),
            (None, None) => Box::new(objects.iter()),
        };
    let mut items: Vec<&Arc<Stored>> = Vec::new();
    let mut more = false;
    let mut last_key = None;
    for (k, s) in iter {
        if let Some(ns) = &filter.namespace
            && &k.namespace != ns
        {
            if k.namespace.as_str() > ns.as_str() {
                break;
            }
            continue;
        }
        if !filter.matches(s) {
            continue;
        }
        if limit > 0 && items.len() == limit {
            more = true;
            break;
        }
        last_key = Some(k.clone());
        items.push(s);
    }
    let continue_token = match (more, &last_key) {
        (true, Some(k)) => {
            server.store.keep_snapshot(&id, rv, objects.clone());
            Some(encode_continue(rv, k))
        }
        _ => None,
    };
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if let Some(c) = &continue_token {
        meta["continue"] = json!(c);
    }
    match format {
        OutputFormat::Table(include) => {
            let values: Vec<Value> = items.iter().map(|s| object_value(def, s)).collect();
            let refs: Vec<&Value> = values.iter().collect();
            let mut t =
                table::render_table(&resource_info(def), &refs, include, jiff::Timestamp::now());
            t["metadata"] = meta;
            Ok(json_response(StatusCode::OK, t.to_string()))
        }
        OutputFormat::Metadata => {
            let items: Vec<Value> = items.iter().map(|s| metadata_only(&s.value())).collect();
            let body = json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "items": items});
            Ok(json_response(StatusCode::OK, body.to_string()))
        }
        OutputFormat::Object => {
            let head = json!({"kind": format!("{}List", def.kind), "apiVersion": def.api_version(), "metadata": meta}).to_string();
            let total: usize = items.iter().map(|s| s.json.len() + 1).sum();
            let mut buf = BytesMut::with_capacity(head.len() + total + 16);
            // `{...head fields...,"items":[a,b,c]}`
            buf.put_slice(&head.as_bytes()[..head.len() - 1]);
            buf.put_slice(b",\"items\":[");
            for (i, s) in items.iter().enumerate() {
                if i > 0 {
                    buf.put_u8(b',');
                }
                buf.put_slice(&object_bytes(def, s));
            }
            buf.put_slice(b"]}");
            Ok(json_response(StatusCode::OK, buf.freeze()))
        }
    }
}

fn check_kind(def: &ResourceDef, obj: &mut Value) -> ApiResult<()> {
    let api_version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if !kind.is_empty() && kind != def.kind {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind ({})",
            def.kind
        )));
    }
    if !api_version.is_empty() && api_version != def.api_version() {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({})",
            def.api_version()
        )));
    }
    // Stored in the storage version (of the stored resource, for a converted kind).
    if let Some(conversion) = def.conversion {
        *obj = (conversion.to_storage)(std::mem::take(obj));
    }
    obj["apiVersion"] = json!(def.storage_api_version());
    obj["kind"] = json!(def.kind);
    Ok(())
}

fn create(
    server: &Arc<Server>,
    def: &Arc<ResourceDef>,
    ns: Option<&str>,
    obj: Value,
    opts: &WriteOptions,
    ctx: &RequestCtx,
    format: OutputFormat,
) -> ApiResult<Response> {
    // Reviews are answered, not stored.
    match (def.group.as_str(), def.plural.as_str()) {
        ("authentication.k8s.io", "tokenreviews") => {
            return Ok(json_response(
                StatusCode::CREATED,
                server.auth.token_review(obj).to_string(),
            ));
        }
        ("authorization.k8s.io", "subjectaccessreviews") => {
            return Ok(json_response(
                StatusCode::CREATED,
                server.auth.access_review(obj, None).to_string(),
            ));
        }
        ("authorization.k8s.io", "selfsubjectaccessreviews") => {
            return Ok(json_response(
                StatusCode::CREATED,
                server
                    .auth
                    .access_review(obj, Some(&requester(ctx)))
                    .to_string(),
            ));
        }
        ("authorization.k8s.io", "localsubjectaccessreviews") => {
            let review_ns = obj
                .pointer("/spec/resourceAttributes/namespace")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if Some(review_ns) != ns {
                return Err(ApiError::bad_request(format!(
                    "spec.resourceAttributes.namespace must match namespace: {}",
                    ns.unwrap_or_default()
                )));
            }
            return Ok(json_response(
                StatusCode::CREATED,
                server.auth.access_review(obj, None).to_string(),
            ));
        }
        ("authorization.k8s.io", "selfsubjectrulesreviews") => {
            // The permission table is not RBAC: say the list is incomplete, as webhook
            // authorizers do, rather than claim rules.
            let mut review = obj;
            review["status"] =
                json!({"resourceRules": [], "nonResourceRules": [], "incomplete": true});
            return Ok(json_response(StatusCode::CREATED, review.to_string()));
        }
        ("authentication.k8s.io", "selfsubjectreviews") => {
            let me = requester(ctx);
            let mut review = obj;
            review["status"] = json!({"userInfo": me.to_json()});
            return Ok(json_response(StatusCode::CREATED, review.to_string()));
        }
        ("", "bindings") => {
            // The pre-subresource form of pods/binding: the pod is the binding's own name.
            let pod = obj
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let pods = server
                .registry
                .read()
                .get("", "v1", "pods")
                .ok_or_else(|| ApiError::no_route("pods"))?;
            let opts = WriteOptions::from_request(ctx)?;
            return subresources::bind(server, &pods, ns, &pod, obj, &opts);
        }
        _ => {}
    }
    let (stored, warnings) = create_with(server, def, ns, obj, opts)?;
    Ok(with_warnings(
        render_one(def, &stored, format, StatusCode::CREATED),
        &warnings,
    ))
}

/// Runs the admission policies on a client's write of `def` (its `sub`resource); the sim's own
/// writes (no requester) pass. Returns the warnings to answer.
#[allow(clippy::too_many_arguments)]
fn admit(
    server: &Server,
    txn: &Txn<'_>,
    def: &ResourceDef,
    sub: Option<&str>,
    operation: vap::Operation,
    object: Option<&Value>,
    old: Option<&Value>,
    opts: &WriteOptions,
) -> ApiResult<Vec<String>> {
    let Some(user) = &opts.requester else {
        return Ok(Vec::new());
    };
    let request = admission_request(def, sub, operation, object, old, user, opts.dry_run);
    vap::admit(&server.vap, txn, &request)
}

/// The admission request of a write of `def` (its `sub`resource) whose objects are of the
/// resource's own kind; the namespace and name are the objects'.
pub fn admission_request<'a>(
    def: &ResourceDef,
    sub: Option<&'a str>,
    operation: vap::Operation,
    object: Option<&'a Value>,
    old: Option<&'a Value>,
    user: &'a UserInfo,
    dry_run: bool,
) -> vap::Request<'a> {
    let meta = |field: &str| -> &'a str {
        object
            .or(old)
            .and_then(|o| o.pointer(&format!("/metadata/{field}")))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let name = meta("name");
    // kube-apiserver gives a Namespace's own name as the namespace of requests about it.
    let is_namespace = def.group.is_empty() && def.plural == "namespaces";
    vap::Request {
        operation,
        resource: vap::GroupVersion::new(&def.group, &def.version, &def.plural),
        subresource: sub.unwrap_or_default(),
        kind: vap::GroupVersion::new(&def.group, &def.version, &def.kind),
        namespace: if is_namespace {
            name
        } else {
            meta("namespace")
        },
        name,
        object,
        old_object: old,
        user,
        dry_run,
    }
}

/// Returns who is asking: the authenticated user, or the admin when authentication is off.
fn requester(ctx: &RequestCtx) -> UserInfo {
    ctx.user.clone().unwrap_or(UserInfo {
        username: "system:admin".into(),
        groups: vec!["system:masters".into()],
        ..Default::default()
    })
}

/// Creates an object through the full create path (defaults, validation, namespace checks);
/// for the sim's own controllers and set-up.
pub fn create_object(
    server: &Arc<Server>,
    group: &str,
    version: &str,
    plural: &str,
    ns: Option<&str>,
    obj: Value,
    opts: &WriteOptions,
) -> ApiResult<Arc<Stored>> {
    let def = server
        .registry
        .read()
        .get(group, version, plural)
        .ok_or_else(|| ApiError::no_route(plural))?;
    create_with(server, &def, ns, obj, opts).map(|(s, _)| s)
}

fn create_with(
    server: &Arc<Server>,
    def: &Arc<ResourceDef>,
    ns: Option<&str>,
    mut obj: Value,
    opts: &WriteOptions,
) -> ApiResult<(Arc<Stored>, Vec<String>)> {
    check_kind(def, &mut obj)?;
    let now = lifecycle::now();
    lifecycle::prepare_create(def, &mut obj, ns, &now)?;
    let mut warnings = lifecycle::validate_fields(def, &mut obj, None, opts.field_validation)?;
    if def.group == "apiextensions.k8s.io" {
        super::crd::prepare(&mut obj)?;
    }
    server.vap.validate(def, &obj)?;
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let k = key(
        def,
        obj.pointer("/metadata/namespace").and_then(Value::as_str),
        &name,
    );
    obj = patch::record_update(
        &json!({}),
        &obj,
        &opts.field_manager,
        &now,
        &def.api_version(),
        &*lifecycle::list_meta(def),
    );
    let stored = server.store.write(|txn| -> ApiResult<Arc<Stored>> {
        if def.namespaced {
            lifecycle::check_namespace_open(txn, &k.namespace)?;
        }
        if txn.get(&def.id(), &k).is_some() {
            return Err(ApiError::already_exists(&def.group, &def.plural, &name));
        }
        lifecycle::create_in_txn(txn, def, &mut obj)?;
        warnings.extend(admit(
            server,
            txn,
            def,
            None,
            vap::Operation::Create,
            Some(&obj),
            None,
            opts,
        )?);
        if opts.dry_run {
            return Ok(Arc::new(Stored::new(&obj, txn.current_rv(), def)));
        }
        Ok(txn.put(def, k.clone(), obj))
    })?;
    if def.group == "apiextensions.k8s.io" && !opts.dry_run {
        super::crd::register(server, &stored.value());
    }
    Ok((stored, warnings))
}

/// Replaces an object (PUT), or its status with `sub = Some("status")`.
pub fn update_object(
    server: &Arc<Server>,
    def: &Arc<ResourceDef>,
    ns: Option<&str>,
    name: &str,
    sub: Option<&str>,
    mut obj: Value,
    opts: &WriteOptions,
) -> ApiResult<(Arc<Stored>, Vec<String>)> {
    check_kind(def, &mut obj)?;
    let body_name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    if def.namespaced
        && let Some(body_ns) = obj.pointer("/metadata/namespace").and_then(Value::as_str)
        && !body_ns.is_empty()
        && Some(body_ns) != ns
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let k = key(def, ns, name);
    let mut warnings = Vec::new();
    let stored = server.store.write(|txn| -> ApiResult<Arc<Stored>> {
        let cur = txn
            .get(&def.id(), &k)
            .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?;
        let requested_rv = obj
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        lifecycle::check_precondition_rv(def, &cur, &requested_rv, name)?;
        let (s, w) = commit_update(server, txn, def, &k, &cur, obj, sub, opts)?;
        warnings = w;
        Ok(s)
    })?;
    Ok((stored, warnings))
}

/// Applies the update rules to `new` and stores it; removes the object when its last finalizer
/// went away during deletion. Shared by PUT, PATCH and the subresources.
#[allow(clippy::too_many_arguments)]
pub fn commit_update(
    server: &Arc<Server>,
    txn: &mut Txn<'_>,
    def: &Arc<ResourceDef>,
    k: &ObjKey,
    cur: &Arc<Stored>,
    new: Value,
    sub: Option<&str>,
    opts: &WriteOptions,
) -> ApiResult<(Arc<Stored>, Vec<String>)> {
    let old = cur.value();
    let now = lifecycle::now();
    let mut new = new;
    lifecycle::update_in_txn(txn, def, &old, &mut new)?;
    let mut new = lifecycle::prepare_update(def, &old, new, sub)?;
    let mut warnings =
        lifecycle::validate_fields_of(def, &mut new, Some(&old), opts.field_validation, sub)?;
    if def.group == "apiextensions.k8s.io" {
        super::crd::prepare(&mut new)?;
    }
    server.vap.validate(def, &new)?;
    warnings.extend(admit(
        server,
        txn,
        def,
        sub,
        vap::Operation::Update,
        Some(&new),
        Some(&old),
        opts,
    )?);
    if lifecycle::same_object(&old, &new) {
        return Ok((cur.clone(), warnings));
    }
    new = patch::record_update(
        &old,
        &new,
        &opts.field_manager,
        &now,
        &def.api_version(),
        &*lifecycle::list_meta(def),
    );
    if opts.dry_run {
        return Ok((Arc::new(Stored::new(&new, cur.rv, def)), warnings));
    }
    if lifecycle::deletion_complete(&new) {
        let last = txn
            .remove(def, k)
            .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, &k.name))?;
        server.gc_removed(def, &last);
        return Ok((last, warnings));
    }
    let stored = txn.put(def, k.clone(), new);
    if def.group == "apiextensions.k8s.io" {
        server.crd_changed(&stored.value());
    }
    Ok((stored, warnings))
}

/// Patches an object (or its status). Server-side apply creates an absent object (201).
#[allow(clippy::too_many_arguments)]
pub fn patch_object(
    server: &Arc<Server>,
    def: &Arc<ResourceDef>,
    ns: Option<&str>,
    name: &str,
    sub: Option<&str>,
    ty: PatchType,
    body: &Value,
    opts: &WriteOptions,
) -> ApiResult<(StatusCode, Arc<Stored>)> {
    let k = key(def, ns, name);
    let meta = lifecycle::list_meta(def);
    if ty == PatchType::Strategic && def.is_custom() {
        return Err(ApiError::unsupported_media_type(
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
        ));
    }
    let existing = server.store.get(&def.id(), &k);
    // An apply that creates the object must name it; one to an existing object may leave
    // metadata out (kube-apiserver merges into the live object, which has its name:
    // kube-lease-manager renews Leases this way).
    if ty == PatchType::Apply
        && existing.is_none()
        && !opts.field_manager.is_empty()
        && body.get("metadata").is_none()
    {
        return Err(ApiError::bad_request(
            "metadata.name: Required value: name is required for apply",
        ));
    }
    let apply_opts = |now: &str| patch::ApplyOptions {
        manager: opts.field_manager.clone(),
        force: opts.force,
        now: now.to_owned(),
        api_version: def.api_version(),
        subresource: sub.map(str::to_owned),
    };
    if existing.is_none() {
        if ty != PatchType::Apply || sub.is_some() {
            return Err(ApiError::not_found(&def.group, &def.plural, name));
        }
        // An apply that creates the object is authorized as a create too, before admission
        // (kube-apiserver's patch handler, `withAuthorization`): `patch` alone creates nothing.
        if let Some(user) = &opts.requester {
            let attributes = Attributes {
                verb: "create".into(),
                group: def.group.clone(),
                resource: def.plural.clone(),
                subresource: String::new(),
                namespace: ns.unwrap_or_default().to_owned(),
                name: name.to_owned(),
            };
            server.audit.record(&server.auth, user, attributes.clone());
            server.auth.authorize(Some(user), &attributes)?;
        }
        let now = lifecycle::now();
        let mut obj = patch::apply(None, body, &apply_opts(&now), &*meta).map_err(patch_error)?;
        if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("name".into(), json!(name));
        }
        // The object is owned by the apply that created it: an empty manager makes the create
        // path keep the managedFields apply wrote instead of recording an Update entry, so the
        // object is written once (one ADDED event, as upstream).
        let mut create_opts = opts.clone();
        create_opts.field_manager = String::new();
        let (stored, _) = match create_with(server, def, ns, obj, &create_opts) {
            // A concurrent create won: apply to what exists instead.
            Err(e) if e.code == 409 && e.reason == "AlreadyExists" => {
                return patch_object(server, def, ns, name, sub, ty, body, opts);
            }
            other => other?,
        };
        return Ok((StatusCode::CREATED, stored));
    }
    let stored = server.store.write(|txn| -> ApiResult<Arc<Stored>> {
        let cur = txn
            .get(&def.id(), &k)
            .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?;
        let old = object_value(def, &cur);
        let now = lifecycle::now();
        let mut new = match ty {
            PatchType::Merge => patch::merge_patch(&old, body),
            PatchType::Json => patch::json_patch(&old, body).map_err(json_patch_error)?,
            PatchType::Strategic => {
                patch::strategic_merge_patch(&old, body, &*meta).map_err(patch_error)?
            }
            PatchType::Apply => {
                patch::apply(Some(&old), body, &apply_opts(&now), &*meta).map_err(patch_error)?
            }
        };
        if !new.is_object() {
            return Err(ApiError::bad_request(
                "the patch did not result in an object",
            ));
        }
        check_kind(def, &mut new)?;
        // A patch may carry a resourceVersion precondition; otherwise it applies to the latest.
        let requested_rv = new
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let patch_rv = body
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str);
        if patch_rv.is_some() || ty == PatchType::Json {
            lifecycle::check_precondition_rv(def, &cur, &requested_rv, name)?;
        }
        if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("resourceVersion".into(), json!(cur.rv.to_string()));
            if m.get("name").and_then(Value::as_str) != Some(name) {
                return Err(ApiError::bad_request(format!(
                    "the name of the object does not match the name on the URL ({name})"
                )));
            }
        }
        let mut write_opts = opts.clone();
        if ty == PatchType::Apply {
            // Apply has recorded its own managedFields; keep them as they are.
            write_opts.field_manager = String::new();
        }
        commit_update(server, txn, def, &k, &cur, new, sub, &write_opts).map(|(s, _)| s)
    })?;
    Ok((StatusCode::OK, stored))
}

/// kube-apiserver's message for a JSON patch that does not apply.
pub const JSON_PATCH_REFUSED: &str =
    "the server rejected our request due to an error in our request";

/// The error of a JSON patch: kube-apiserver answers every one that does not apply (a failed
/// `test`, a path that is not there, an unknown `op`) with one generic 422, an empty `details`
/// and not the JSON patch library's reason (`NewGenericServerResponse`); sim logs that reason at
/// debug. Checked against kube-apiserver by tests/tests/compare.rs.
pub(super) fn json_patch_error(e: patch::PatchError) -> ApiError {
    match e {
        patch::PatchError::Invalid(why) => {
            tracing::debug!(reason = %why, "a JSON patch does not apply");
            ApiError::new(422, "Invalid", JSON_PATCH_REFUSED).with_details(json!({}))
        }
        other => patch_error(other),
    }
}

fn patch_error(e: patch::PatchError) -> ApiError {
    let code = e.http_status();
    let mut err = ApiError::new(code, e.reason(), e.to_string());
    if code == 422 {
        err = ApiError::new(422, "Invalid", e.to_string());
    }
    err
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
    fn from_request(ctx: &RequestCtx) -> ApiResult<Self> {
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

/// What a delete did.
#[derive(Debug)]
pub enum DeleteOutcome {
    /// The object is gone; this is its last version.
    Deleted(Arc<Stored>),
    /// The object is terminating (finalizers, foreground or orphan propagation, namespace contents).
    Pending(Arc<Stored>),
}

/// The default propagation: batch/v1 Jobs orphan their pods unless told otherwise (as upstream,
/// for compatibility); everything else is Background.
fn default_propagation(def: &ResourceDef) -> Propagation {
    if def.group == "batch" && def.plural == "jobs" {
        Propagation::Orphan
    } else {
        Propagation::Background
    }
}

/// Deletes an object with the API server's finalizer and propagation rules.
pub fn delete_object(
    server: &Arc<Server>,
    def: &Arc<ResourceDef>,
    ns: Option<&str>,
    name: &str,
    opts: &DeleteOptions,
) -> ApiResult<DeleteOutcome> {
    let k = key(def, ns, name);
    let propagation = opts.propagation.unwrap_or_else(|| default_propagation(def));
    let outcome = server.store.write(|txn| -> ApiResult<DeleteOutcome> {
        let cur = txn.get(&def.id(), &k).ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?;
        if let Some(uid) = &opts.uid
            && *uid != cur.uid
        {
            return Err(ApiError::conflict(&def.group, &def.plural, name, &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {}", cur.uid)));
        }
        if let Some(rv) = &opts.resource_version
            && *rv != cur.rv.to_string()
        {
            return Err(ApiError::conflict(&def.group, &def.plural, name, &format!("Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}", cur.rv)));
        }
        let mut obj = cur.value();
        if let Some(user) = &opts.requester {
            let request = admission_request(
                def,
                None,
                vap::Operation::Delete,
                None,
                Some(&obj),
                user,
                opts.dry_run,
            );
            vap::admit(&server.vap, txn, &request)?;
        }
        let mut finalizers: Vec<String> = obj
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .map(|f| f.iter().filter_map(|x| x.as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        let already_terminating = obj.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null());
        let is_namespace = def.group.is_empty() && def.plural == "namespaces";
        let is_pod = def.group.is_empty() && def.plural == "pods";
        let grace = graceful::decide(is_pod, &obj, opts.grace_period_seconds, jiff::Timestamp::now());
        if grace == graceful::Grace::Pending {
            return Ok(DeleteOutcome::Pending(cur));
        }
        let extra = match propagation {
            Propagation::Orphan if !cur.uid.is_empty() && !txn.dependents(&cur.uid).is_empty() => Some("orphan"),
            Propagation::Foreground if !txn.dependents(&cur.uid).is_empty() => Some("foregroundDeletion"),
            _ => None,
        };
        if let Some(f) = extra
            && !already_terminating
            && !finalizers.iter().any(|x| x == f)
        {
            finalizers.push(f.to_owned());
        }
        let waits = matches!(grace, graceful::Grace::Mark { seconds, .. } if seconds > 0);
        if finalizers.is_empty() && !is_namespace && !waits {
            if opts.dry_run {
                return Ok(DeleteOutcome::Deleted(cur));
            }
            let last = txn.remove(def, &k).ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?;
            // A pod deleted at once is answered as kube-apiserver answers it: marked, grace 0.
            if let graceful::Grace::Mark { seconds, deletion_timestamp } = &grace {
                let mut marked = last.value();
                marked["metadata"]["deletionTimestamp"] = json!(deletion_timestamp);
                marked["metadata"]["deletionGracePeriodSeconds"] = json!(seconds);
                return Ok(DeleteOutcome::Deleted(Arc::new(Stored::new(&marked, last.rv, def))));
            }
            return Ok(DeleteOutcome::Deleted(last));
        }
        if let (true, graceful::Grace::Mark { seconds, deletion_timestamp }) = (already_terminating, &grace) {
            // A shorter grace period for a pod already terminating (its finalizers hold it).
            if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                m.insert("deletionTimestamp".into(), json!(deletion_timestamp));
                m.insert("deletionGracePeriodSeconds".into(), json!(seconds));
            }
            if opts.dry_run {
                return Ok(DeleteOutcome::Pending(cur));
            }
            return Ok(DeleteOutcome::Pending(txn.put(def, k.clone(), obj)));
        }
        if already_terminating {
            return Ok(DeleteOutcome::Pending(cur));
        }
        let (deletion_timestamp, grace_seconds) = match grace {
            graceful::Grace::Mark { seconds, deletion_timestamp } => (deletion_timestamp, seconds),
            _ => (lifecycle::now(), opts.grace_period_seconds.unwrap_or(0)),
        };
        if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("deletionTimestamp".into(), json!(deletion_timestamp));
            m.insert("deletionGracePeriodSeconds".into(), json!(grace_seconds));
            m.insert("finalizers".into(), json!(finalizers));
            if let Some(g) = m.get("generation").and_then(Value::as_i64) {
                m.insert("generation".into(), json!(g + 1));
            }
        }
        if is_namespace {
            obj["status"]["phase"] = json!("Terminating");
        }
        if opts.dry_run {
            return Ok(DeleteOutcome::Pending(cur));
        }
        Ok(DeleteOutcome::Pending(txn.put(def, k.clone(), obj)))
    })?;
    if !opts.dry_run {
        match &outcome {
            DeleteOutcome::Deleted(last) => server.gc_removed(def, last),
            DeleteOutcome::Pending(s) => server.gc_terminating(def, s),
        }
    }
    Ok(outcome)
}

fn delete_collection(
    server: &Arc<Server>,
    def: &Arc<ResourceDef>,
    ns: Option<&str>,
    ctx: &RequestCtx,
) -> ApiResult<Response> {
    let filter = build_filter(def, ns, &ctx.query)?;
    let opts = DeleteOptions::from_request(ctx)?;
    let (objects, _) = server.store.snapshot(&def.id());
    let mut items = Vec::new();
    for (k, s) in objects.iter() {
        if !filter.matches(s) {
            continue;
        }
        match delete_object(server, def, Some(&k.namespace), &k.name, &opts) {
            Ok(DeleteOutcome::Deleted(s) | DeleteOutcome::Pending(s)) => {
                items.push(object_value(def, &s))
            }
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let body = json!({"kind": format!("{}List", def.kind), "apiVersion": def.api_version(), "metadata": {"resourceVersion": server.store.current_rv().to_string()}, "items": items});
    Ok(json_response(StatusCode::OK, body.to_string()))
}

/// Looks up a resource by id in its storage version.
pub fn storage_def(server: &Server, id: &ResourceId) -> Option<Arc<ResourceDef>> {
    server.registry.read().storage_def(id)
}
