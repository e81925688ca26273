//! The HTTP side of the verbs: get, list, create, update, patch, delete and deletecollection, with the API
//! server's preconditions, dry-run, content negotiation (objects, Tables, metadata only) and
//! paginated lists. Each write is one transaction on the store.

use std::sync::Arc;

use axum::response::Response;
use base64::Engine as _;
use bytes::{BufMut, BytesMut};
use http::{HeaderValue, StatusCode, header};
use serde_json::{Value, json};

use super::verbs::{
    DeleteOutcome, create_with, delete_object, patch_object, returns_deleted_object, update_object,
};
use super::{subresources, watch};
use crate::apiserver::encodings::table;
use crate::apiserver::requests::auth::{self, Attributes};
use crate::apiserver::requests::error::{ApiError, ApiResult};
use crate::apiserver::requests::kit::json_response;
use crate::apiserver::requests::kit::{
    DeleteOptions, OutputFormat, PatchType, RequestCtx, WriteOptions, build_filter, key,
    metadata_only, object_bytes, object_value, output_format, parse_body, parse_patch_body,
    requester, resource_info,
};
use crate::apiserver::requests::request::ResourcePath;
use crate::apiserver::server::Server;
use crate::storage::registry::ResourceDef;
use crate::storage::store::{ObjKey, Stored};

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

fn with_warnings(mut resp: Response, warnings: &[String]) -> Response {
    for w in warnings {
        if let Ok(v) = HeaderValue::from_str(&format!("299 - \"{}\"", w.replace('"', "'"))) {
            resp.headers_mut().append("Warning", v);
        }
    }
    resp
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
