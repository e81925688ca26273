//! The agent's HTTP endpoints: `/metrics` (Prometheus text), `/healthz` (the process answers),
//! `/readyz` (collection, gossip and the pod watch are up) and `/debug/state` (JSON of what
//! this agent sees of every member).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::registry::Registry;

/// What the endpoints read.
pub struct HttpState {
    /// The agent's registry.
    pub registry: Registry,
    /// Set once the agent is ready.
    pub ready: AtomicBool,
    /// Renders `/debug/state` when asked (never ahead of time: with 1,000 members it is a few
    /// MiB of JSON that nobody reads most seconds).
    pub debug_state:
        Box<dyn Fn() -> futures::future::BoxFuture<'static, serde_json::Value> + Send + Sync>,
}

/// Returns the router.
pub fn router(state: Arc<HttpState>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/debug/state", get(debug_state))
        .with_state(state)
}

async fn metrics(State(state): State<Arc<HttpState>>) -> Response {
    let mut text = String::new();
    match prometheus_client::encoding::text::encode(&mut text, &state.registry) {
        Ok(()) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("encoding metrics failed: {e}"),
        )
            .into_response(),
    }
}

async fn readyz(State(state): State<Arc<HttpState>>) -> Response {
    if state.ready.load(Ordering::Relaxed) {
        (StatusCode::OK, "ready").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: waiting for the first collection, gossip and the pod watch",
        )
            .into_response()
    }
}

async fn debug_state(State(state): State<Arc<HttpState>>) -> Response {
    axum::Json((state.debug_state)().await).into_response()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt as _;

    use super::*;

    fn state() -> Arc<HttpState> {
        Arc::new(HttpState {
            registry: Registry::with_prefix("telemesh_agent"),
            ready: AtomicBool::new(false),
            debug_state: Box::new(|| Box::pin(async { serde_json::json!({"members": []}) })),
        })
    }

    async fn get_status(router: Router, path: &str) -> StatusCode {
        router
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap()
            .status()
    }

    #[tokio::test]
    async fn readiness_follows_the_flag_and_health_is_always_ok() {
        let s = state();
        assert_eq!(
            get_status(router(s.clone()), "/healthz").await,
            StatusCode::OK
        );
        assert_eq!(
            get_status(router(s.clone()), "/readyz").await,
            StatusCode::SERVICE_UNAVAILABLE
        );
        s.ready.store(true, Ordering::Relaxed);
        assert_eq!(
            get_status(router(s.clone()), "/readyz").await,
            StatusCode::OK
        );
        assert_eq!(
            get_status(router(s.clone()), "/metrics").await,
            StatusCode::OK
        );
        assert_eq!(get_status(router(s), "/debug/state").await, StatusCode::OK);
    }
}
