//! `POST /rpc`: WAM's JSON-RPC API on `--api-listen`. The HTTP checks gorilla makes (method,
//! Content-Type), a body size limit, authentication once per request, then each call: resolve
//! the method, unwrap the params, authorize, and accept the action ([`super::accept`]) or
//! answer `action.Get`/`action.Wait`. The wire shapes are in [`wire`]; the API is described in
//! `docs/actions-api.md`.

pub mod wire;

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Body as HttpBody;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use http::{HeaderMap, HeaderValue, Method as HttpMethod, StatusCode, header};
use serde_json::Value;
use telemesh_core::action::{ActionRequest, Requester, idempotent_name};
use tokio_util::sync::CancellationToken;

use self::wire::{BadCall, Body, Call, Dialect, ErrorKind, RpcError, Target};
use super::accept;
use super::auth::{Access, ApiAuth, AuthError};
use super::fit::{BindRefusal, check_bind};
use crate::metrics::{RpcMethod, RpcMetrics, RpcOutcome};

/// The largest body read; a larger one gets a 413.
pub const MAX_BODY: usize = 1 << 20;

/// What `/rpc` needs.
pub struct RpcState {
    /// The API server (actions are stored there).
    pub client: kube::Client,
    /// Who may call.
    pub auth: Arc<ApiAuth>,
    /// Metrics.
    pub metrics: RpcMetrics,
    /// Ends `action.Wait`s early when the replica stops.
    pub stop: CancellationToken,
}

/// The `/rpc` route.
pub fn router(state: Arc<RpcState>) -> Router {
    Router::new().route("/rpc", any(handle)).with_state(state)
}

fn text(status: u16, message: &str) -> Response {
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST),
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message.to_owned(),
    )
        .into_response()
}

fn json_response(status: u16, content_type: &'static str, value: &Value) -> Response {
    let mut body = serde_json::to_vec(value).unwrap_or_default();
    body.push(b'\n');
    let mut resp = (
        StatusCode::from_u16(status).unwrap_or(StatusCode::OK),
        [(header::CONTENT_TYPE, content_type)],
        body,
    )
        .into_response();
    resp.headers_mut().insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    if status == 401 {
        resp.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    resp
}

fn empty(status: StatusCode) -> Response {
    status.into_response()
}

async fn handle(
    State(s): State<Arc<RpcState>>,
    method: HttpMethod,
    headers: HeaderMap,
    body: HttpBody,
) -> Response {
    // gorilla's checks, in its order, with its messages.
    if method != HttpMethod::POST {
        return text(
            405,
            &format!("rpc: POST method required, received {method}"),
        );
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let bare = content_type.split(';').next().unwrap_or("");
    if !bare.is_empty() && !bare.eq_ignore_ascii_case("application/json") {
        return text(415, &format!("rpc: unrecognized Content-Type: {bare}"));
    }
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY).await else {
        return text(
            413,
            &format!("rpc: request body larger than {MAX_BODY} bytes; send fewer calls per batch"),
        );
    };
    let header_key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let who = s.auth.authenticate(&headers).await;
    match wire::parse(&bytes) {
        Body::Single(Err(bad)) => {
            observe(&s, RpcMethod::Unknown, Err(&bad.error), Instant::now());
            bad_reply(&bad)
        }
        Body::Single(Ok(call)) => {
            let outcome = run(&s, &call, &who, header_key.as_deref()).await;
            single_reply(&call, &outcome)
        }
        Body::Batch(items) => {
            if header_key.is_some() {
                let bad = BadCall {
                    dialect: Dialect::V2,
                    id: None,
                    error: RpcError::new(
                        ErrorKind::InvalidRequest,
                        "the Idempotency-Key header applies to one call; in a batch give idempotencyKey in each call's params",
                    ),
                };
                return bad_reply(&bad);
            }
            let runs = items.iter().map(|item| {
                let (s, who) = (&s, &who);
                async move {
                    match item {
                        Ok(call) => {
                            let outcome = run(s, call, who, None).await;
                            call.id
                                .as_ref()
                                .map(|id| wire::reply(Dialect::V2, Some(id), &outcome))
                        }
                        Err(bad) => {
                            observe(s, RpcMethod::Unknown, Err(&bad.error), Instant::now());
                            Some(wire::reply(
                                Dialect::V2,
                                bad.id.as_ref(),
                                &Err(bad.error.clone()),
                            ))
                        }
                    }
                }
            });
            let replies: Vec<Value> = futures::future::join_all(runs)
                .await
                .into_iter()
                .flatten()
                .collect();
            if replies.is_empty() {
                empty(StatusCode::NO_CONTENT)
            } else {
                json_response(200, "application/json", &Value::Array(replies))
            }
        }
    }
}

/// The reply to a body or call that could not be read.
fn bad_reply(bad: &BadCall) -> Response {
    match bad.dialect {
        Dialect::Gorilla => text(400, &bad.error.message),
        Dialect::V2 => json_response(
            200,
            "application/json",
            &wire::reply(Dialect::V2, bad.id.as_ref(), &Err(bad.error.clone())),
        ),
    }
}

/// The reply to one call in its dialect.
fn single_reply(call: &Call, outcome: &Result<Value, RpcError>) -> Response {
    let status = outcome.as_ref().err().map_or(200, |e| e.kind.http_status());
    match call.dialect {
        Dialect::Gorilla => {
            if let Err(e) = outcome
                && e.kind.is_gorilla_envelope()
            {
                return text(400, &e.message);
            }
            match &call.id {
                // gorilla writes nothing for a notification.
                None => empty(StatusCode::from_u16(status).unwrap_or(StatusCode::OK)),
                Some(id) => json_response(
                    status,
                    "application/json; charset=utf-8",
                    &wire::reply(Dialect::Gorilla, Some(id), outcome),
                ),
            }
        }
        Dialect::V2 => match &call.id {
            None if status == 200 => empty(StatusCode::NO_CONTENT),
            None => empty(StatusCode::from_u16(status).unwrap_or(StatusCode::OK)),
            Some(id) => json_response(
                status,
                "application/json",
                &wire::reply(Dialect::V2, Some(id), outcome),
            ),
        },
    }
}

fn rpc_method(target: Option<Target>) -> RpcMethod {
    match target {
        None => RpcMethod::Unknown,
        Some(Target::Get) => RpcMethod::Get,
        Some(Target::Wait) => RpcMethod::Wait,
        Some(Target::Action(m)) => RpcMethod::Action(m),
    }
}

fn error_outcome(kind: ErrorKind) -> RpcOutcome {
    match kind {
        ErrorKind::Parse | ErrorKind::InvalidRequest => RpcOutcome::InvalidRequest,
        ErrorKind::MethodNotFound => RpcOutcome::MethodNotFound,
        ErrorKind::ParamsShape | ErrorKind::InvalidParams => RpcOutcome::InvalidParams,
        ErrorKind::Internal => RpcOutcome::Internal,
        ErrorKind::Unauthenticated => RpcOutcome::Unauthenticated,
        ErrorKind::Forbidden => RpcOutcome::Forbidden,
        ErrorKind::NotFound => RpcOutcome::NotFound,
        ErrorKind::Conflict => RpcOutcome::Conflict,
        ErrorKind::Unfit => RpcOutcome::Unfit,
    }
}

fn observe(
    s: &RpcState,
    method: RpcMethod,
    outcome: Result<RpcOutcome, &RpcError>,
    started: Instant,
) {
    let outcome = outcome.unwrap_or_else(|e| error_outcome(e.kind));
    s.metrics.observe(method, outcome, started.elapsed());
}

/// Runs one call and counts it.
async fn run(
    s: &RpcState,
    call: &Call,
    who: &Result<Requester, AuthError>,
    header_key: Option<&str>,
) -> Result<Value, RpcError> {
    let started = Instant::now();
    let mut target = None;
    let outcome = dispatch(s, call, who, header_key, &mut target).await;
    let method = rpc_method(target);
    match &outcome {
        Ok((_, o)) => observe(s, method, Ok(*o), started),
        Err(e) => {
            if e.kind == ErrorKind::Internal {
                tracing::warn!(method = %call.method, error = %e, "JSON-RPC call failed");
            }
            observe(s, method, Err(e), started);
        }
    }
    outcome.map(|(v, _)| v)
}

fn auth_error(e: &AuthError) -> RpcError {
    match e {
        AuthError::Unauthenticated(m) => RpcError::new(ErrorKind::Unauthenticated, m.clone()),
        AuthError::Forbidden(m) => RpcError::new(ErrorKind::Forbidden, m.clone()),
        AuthError::Unavailable(_) => RpcError::new(ErrorKind::Internal, e.to_string()),
    }
}

fn bind_error(e: BindRefusal) -> RpcError {
    let kind = match &e {
        BindRefusal::PodNotFound(..) | BindRefusal::NodeNotFound { .. } => ErrorKind::NotFound,
        BindRefusal::NotPending | BindRefusal::NodeNameSet | BindRefusal::Deleting => {
            ErrorKind::Conflict
        }
        BindRefusal::Unfit { .. } => ErrorKind::Unfit,
        BindRefusal::Api(_) => ErrorKind::Internal,
    };
    RpcError::new(kind, e.to_string())
}

/// The namespaces an action touches: the caller must be allowed to create actions in each.
fn namespaces(request: &ActionRequest) -> Vec<&str> {
    let mut all = vec![request.namespace()];
    if let ActionRequest::Swap { y, .. } = request
        && y.namespace != request.namespace()
    {
        all.push(&y.namespace);
    }
    all
}

/// A call whose method and params were read, ready to authorize and run.
#[derive(Debug)]
pub enum Checked {
    /// An action to accept.
    Action {
        /// What it asks.
        request: Box<ActionRequest>,
        /// Its params, unwrapped.
        args: Value,
        /// Idempotency key and callback.
        extras: accept::Extras,
    },
    /// `action.Get` or `action.Wait`.
    Lookup {
        /// Which of the two.
        target: Target,
        /// The action asked about.
        lookup: accept::Lookup,
    },
}

/// The pure part of a call: resolves the method (into `target`, for the metrics, as soon as
/// it is known) and reads the params. No I/O, so the fuzz target `rpc_body` reaches it.
pub fn check(
    call: &Call,
    header_key: Option<&str>,
    target: &mut Option<Target>,
) -> Result<Checked, RpcError> {
    let resolved = wire::resolve(&call.method)?;
    *target = Some(resolved);
    let args = wire::args(call)?;
    match resolved {
        Target::Action(method) => {
            let request = ActionRequest::parse(method, &args)
                .map_err(|e| RpcError::new(ErrorKind::InvalidParams, e.0))?;
            let extras = accept::extras(&args, header_key)?;
            Ok(Checked::Action {
                request: Box::new(request),
                args,
                extras,
            })
        }
        Target::Get | Target::Wait => Ok(Checked::Lookup {
            target: resolved,
            lookup: accept::lookup(&args)?,
        }),
    }
}

async fn dispatch(
    s: &RpcState,
    call: &Call,
    who: &Result<Requester, AuthError>,
    header_key: Option<&str>,
    target_out: &mut Option<Target>,
) -> Result<(Value, RpcOutcome), RpcError> {
    let who = who.as_ref().map_err(auth_error)?;
    match check(call, header_key, target_out)? {
        Checked::Action {
            request,
            args,
            extras,
        } => {
            for ns in namespaces(&request) {
                s.auth
                    .authorize(who, &Access::actions("create", ns, ""))
                    .await
                    .map_err(|e| auth_error(&e))?;
            }
            if let ActionRequest::Bind { pod, node } = &*request {
                check_bind(&s.client, pod, node).await.map_err(bind_error)?;
            }
            let name = match &extras.idempotency_key {
                Some(key) => idempotent_name(request.namespace(), &who.username, key),
                None => accept::random_name(),
            };
            let action =
                accept::new_action(name, &request, &args, &extras, who, jiff::Timestamp::now());
            let accepted = accept::store(&s.client, &action).await?;
            let outcome = if accepted.existing {
                RpcOutcome::Existing
            } else {
                RpcOutcome::Accepted
            };
            Ok((accepted.result(), outcome))
        }
        Checked::Lookup { target, lookup } => {
            s.auth
                .authorize(
                    who,
                    &Access::actions("get", &lookup.namespace, &lookup.name),
                )
                .await
                .map_err(|e| auth_error(&e))?;
            if target == Target::Get {
                let action = accept::get(&s.client, &lookup).await?;
                Ok((accept::action_json(&action), RpcOutcome::Answered))
            } else {
                let (action, done) = accept::wait(&s.client, &lookup, &s.stop).await?;
                let mut shown = accept::action_json(&action);
                shown["done"] = Value::Bool(done);
                Ok((shown, RpcOutcome::Answered))
            }
        }
    }
}
