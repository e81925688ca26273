//! `/metrics`, `/healthz` and `/readyz` on `--http-listen`. Ready once the cluster view and the
//! TASPolicy cache have synced: before that the extender would pass every pod through.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::StatusCode;
use http::header::CONTENT_TYPE;
use prometheus_client::registry::Registry;

use crate::policies::PolicyCache;
use crate::view::ClusterView;

/// What the health endpoints read.
pub struct HealthState {
    /// Every metric of the coordinator.
    pub registry: Registry,
    /// The view.
    pub view: ClusterView,
    /// The policies.
    pub policies: PolicyCache,
    /// Lines `/readyz` adds whatever the state, for settings an operator must notice
    /// (`api-auth: none (every caller may act)`).
    pub notes: Vec<String>,
}

/// The routes.
pub fn router(state: Arc<HealthState>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .with_state(state)
}

async fn metrics(State(s): State<Arc<HealthState>>) -> Response {
    let mut text = String::new();
    match prometheus_client::encoding::text::encode(&mut text, &s.registry) {
        Ok(()) => (
            [(
                CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("encoding metrics: {e}"),
        )
            .into_response(),
    }
}

async fn ready(State(s): State<Arc<HealthState>>) -> Response {
    let view = s.view.load().synced;
    let policies = s.policies.load().synced;
    let notes: String = s.notes.iter().map(|n| format!("\n{n}")).collect();
    match (view, policies) {
        (true, true) => (StatusCode::OK, format!("ready{notes}")).into_response(),
        _ => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "not ready: cluster view synced={view}, TASPolicy cache synced={policies}{notes}"
            ),
        )
            .into_response(),
    }
}
