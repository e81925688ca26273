//! The API server: routing, content negotiation and the verbs, over the [`Store`].
//!
//! Everything is served by one fallback handler that routes the path itself (as kube-apiserver's
//! RequestInfoFactory does), because the set of resources changes at run time with CRDs.

pub mod crds;
pub mod encodings;
pub mod objects;
pub mod requests;
pub mod rest;
pub mod server;

pub use server::{Server, ServerConfig};

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode, header};
use parking_lot::{Mutex, RwLock};
use serde_json::Value;

use crate::storage::registry::Registry;
use crate::storage::store::Store;
use requests::error::{ApiError, ApiResult};
use requests::request::Route;

impl Server {
    /// Returns a server with the built-in kinds and the namespaces every cluster has, and starts
    /// its garbage collector on the current tokio runtime.
    pub fn new(config: ServerConfig, auth: requests::auth::Auth) -> Arc<Self> {
        let (gc, gc_rx) = objects::gc::GcQueue::new();
        let server = Arc::new(Self {
            store: Store::new(config.history_capacity, config.watch_buffer),
            registry: RwLock::new(Registry::with_builtins()),
            auth,
            audit: requests::auth::AuditLog::default(),
            vap: crds::vap::Policies::default(),
            config,
            address: OnceLock::new(),
            gc,
            openapi_cache: Mutex::new(HashMap::new()),
            openapi_v2_cache: Mutex::new(None),
            registry_generation: std::sync::atomic::AtomicU64::new(0),
        });
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let obj = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            if let Err(e) = rest::verbs::create_object(
                &server,
                "",
                "v1",
                "namespaces",
                None,
                obj,
                &requests::kit::WriteOptions::internal(),
            ) {
                tracing::error!(namespace = ns, error = %e.message, "cannot create a built-in namespace");
            }
        }
        for pc in objects::priority::system_class_objects() {
            if let Err(e) = rest::verbs::create_object(
                &server,
                "scheduling.k8s.io",
                "v1",
                "priorityclasses",
                None,
                pc,
                &requests::kit::WriteOptions::internal(),
            ) {
                tracing::error!(error = %e.message, "cannot create a system PriorityClass");
            }
        }
        objects::gc::spawn(Arc::downgrade(&server), gc_rx);
        server
    }

    /// Returns the axum router serving the whole API.
    pub fn router(self: &Arc<Self>) -> Router {
        Router::new().fallback(dispatch).with_state(self.clone())
    }
}

fn value_response(code: StatusCode, v: &Value) -> Response {
    requests::kit::json_response(code, v.to_string())
}

async fn dispatch(State(server): State<Arc<Server>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_owned();
    let query: HashMap<String, String> = parts
        .uri
        .query()
        .map(|q| url_decode_pairs(q).into_iter().collect())
        .unwrap_or_default();
    let user = match server.auth.authenticate(&parts.headers) {
        Ok(u) => u,
        Err(e) => return e.into_response(),
    };
    let body = match axum::body::to_bytes(body, server.config.max_body_bytes).await {
        Ok(b) => b,
        Err(_) => {
            return ApiError::new(
                413,
                "RequestEntityTooLarge",
                "the request body is too large",
            )
            .into_response();
        }
    };
    let ctx = requests::kit::RequestCtx {
        method: parts.method.clone(),
        query,
        headers: parts.headers,
        body,
        user,
    };
    let started = std::time::Instant::now();
    let result = route_request(&server, &path, ctx).await;
    let resp = result.unwrap_or_else(IntoResponse::into_response);
    tracing::debug!(method = %parts.method, path, status = resp.status().as_u16(), elapsed_us = started.elapsed().as_micros() as u64, "request");
    resp
}

async fn route_request(
    server: &Arc<Server>,
    path: &str,
    ctx: requests::kit::RequestCtx,
) -> ApiResult<Response> {
    let route = requests::request::route(path);
    if !matches!(route, Route::Resource(_)) && ctx.method != Method::GET {
        return Err(ApiError::method_not_allowed(ctx.method.as_str(), path));
    }
    let format =
        encodings::discovery::DiscoveryFormat::from_accept(requests::kit::accept(&ctx.headers));
    let discovery_response = |v: Value| {
        let mut r = value_response(StatusCode::OK, &v);
        if let Ok(ct) = HeaderValue::from_str(&format.content_type()) {
            r.headers_mut().insert(header::CONTENT_TYPE, ct);
        }
        r
    };
    match route {
        Route::Version => Ok(value_response(StatusCode::OK, &version())),
        Route::Health => Ok((StatusCode::OK, "ok").into_response()),
        Route::CoreVersions => {
            let reg = server.registry.read();
            Ok(match format {
                encodings::discovery::DiscoveryFormat::Aggregated(v) => {
                    discovery_response(encodings::discovery::aggregated(&reg, true, v))
                }
                encodings::discovery::DiscoveryFormat::Legacy => value_response(
                    StatusCode::OK,
                    &encodings::discovery::core_versions(
                        server.address.get().map_or("", String::as_str),
                    ),
                ),
            })
        }
        Route::Groups => {
            let reg = server.registry.read();
            Ok(match format {
                encodings::discovery::DiscoveryFormat::Aggregated(v) => {
                    discovery_response(encodings::discovery::aggregated(&reg, false, v))
                }
                encodings::discovery::DiscoveryFormat::Legacy => {
                    value_response(StatusCode::OK, &encodings::discovery::group_list(&reg))
                }
            })
        }
        Route::Group(g) => encodings::discovery::group(&server.registry.read(), &g)
            .map(|v| value_response(StatusCode::OK, &v))
            .ok_or_else(|| ApiError::no_route(path)),
        Route::GroupVersion(g, v) => {
            encodings::discovery::resource_list(&server.registry.read(), &g, &v)
                .map(|v| value_response(StatusCode::OK, &v))
                .ok_or_else(|| ApiError::no_route(path))
        }
        Route::OpenApiV2 => Ok(encodings::openapi_v2::respond(
            &*openapi_v2(server).await?,
            &ctx.headers,
        )),
        Route::OpenApiIndex => Ok(value_response(StatusCode::OK, &openapi_index(server))),
        Route::OpenApiGroupVersion(g, v) => {
            let doc = openapi_document(server, &g, &v).ok_or_else(|| ApiError::no_route(path))?;
            Ok(requests::kit::json_response(
                StatusCode::OK,
                Bytes::clone(&doc),
            ))
        }
        Route::Resource(rp) => rest::handlers::resource(server, rp, ctx).await,
        Route::Unknown => Err(ApiError::no_route(path)),
    }
}

fn version() -> Value {
    serde_json::json!({
        "major": "1", "minor": "33", "gitVersion": "v1.33.0-telemesh-sim",
        "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.24", "compiler": "gc",
        "platform": "linux/amd64"
    })
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn openapi_index(server: &Arc<Server>) -> Value {
    let generation = server.registry_generation();
    let groups = server.registry.read().groups();
    let entries: Vec<(String, String)> = groups
        .iter()
        .flat_map(|(g, vs)| {
            vs.iter()
                .map(move |v| (gv_path(g, v), format!("{generation:016X}")))
        })
        .collect();
    encodings::openapi::v3_index(&entries)
}

fn openapi_document(server: &Arc<Server>, group: &str, version: &str) -> Option<Arc<Bytes>> {
    let generation = server.registry_generation();
    let key = (group.to_owned(), version.to_owned());
    if let Some((g, doc)) = server.openapi_cache.lock().get(&key)
        && *g == generation
    {
        return Some(doc.clone());
    }
    let infos: Vec<encodings::table::ResourceInfo> = server
        .registry
        .read()
        .resources(group, version)
        .iter()
        .map(|d| requests::kit::resource_info(d))
        .collect();
    if infos.is_empty() {
        return None;
    }
    let doc = Arc::new(Bytes::from(
        encodings::openapi::v3_group_version(&infos).to_string(),
    ));
    server
        .openapi_cache
        .lock()
        .insert(key, (generation, doc.clone()));
    Some(doc)
}

/// The `/openapi/v2` document of every served group version, rebuilt when the served resources
/// change. Building it takes a while (about 3 s in a debug build; once built it is answered in
/// milliseconds), so it runs on the blocking pool, off the threads that serve requests.
async fn openapi_v2(server: &Arc<Server>) -> ApiResult<Arc<encodings::openapi_v2::Served>> {
    let generation = server.registry_generation();
    if let Some((g, served)) = server.openapi_v2_cache.lock().as_ref()
        && *g == generation
    {
        return Ok(served.clone());
    }
    let group_versions: Vec<Vec<encodings::table::ResourceInfo>> = {
        let registry = server.registry.read();
        registry
            .groups()
            .iter()
            .flat_map(|(g, vs)| vs.iter().map(move |v| (g.clone(), v.clone())))
            .map(|(g, v)| {
                registry
                    .resources(&g, &v)
                    .iter()
                    .map(|d| requests::kit::resource_info(d))
                    .collect()
            })
            .collect()
    };
    let built = tokio::task::spawn_blocking(move || encodings::openapi_v2::serve(&group_versions))
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r);
    let served =
        Arc::new(built.map_err(|e| {
            ApiError::new(500, "InternalError", format!("building /openapi/v2: {e}"))
        })?);
    *server.openapi_v2_cache.lock() = Some((generation, served.clone()));
    Ok(served)
}

/// Decodes `a=b&c=d` query strings (percent- and plus-decoding).
pub fn url_decode_pairs(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings_are_decoded() {
        let pairs = url_decode_pairs("labelSelector=app%3Dweb%2Ctier+in+(a)&watch=1&x=%");
        assert_eq!(
            pairs[0],
            (
                "labelSelector".to_string(),
                "app=web,tier in (a)".to_string()
            )
        );
        assert_eq!(pairs[1], ("watch".to_string(), "1".to_string()));
        assert_eq!(pairs[2], ("x".to_string(), "%".to_string()));
    }
}
