//! The JSON API for people and AIOps entities, on `--api-listen`:
//! - `GET /api/v1/nodes`: every node's current state from the cluster view;
//! - `GET /api/v1/nodes/{name}/pods`: per-pod figures fetched from that node's agent over QUIC.
//!
//! An agent's QUIC address is the `quic` gossip key when the agent publishes it, else its
//! gossip IP with `--agent-quic-port`; its certificate must carry the node name.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::StatusCode;
use serde_json::{Value, json};
use telemesh_core::gossip::Liveness;
use telemesh_core::gossip::schema::unix_ms;
use telemesh_core::quic::client::QuicClient;
use telemesh_core::wire::{Request, Response as WireResponse};

use crate::view::{ClusterView, NodeEntry};

/// How the API reaches agents over QUIC.
pub struct AgentLink {
    /// The mutual-TLS client.
    pub client: QuicClient,
    /// Port used with an agent's gossip IP when it does not publish its QUIC address.
    pub agent_port: u16,
}

/// What the API reads.
pub struct ApiState {
    /// The view.
    pub view: ClusterView,
    /// Age beyond which a metric is reported stale.
    pub stale_after: Duration,
    /// QUIC to agents, when configured.
    pub agents: Option<AgentLink>,
}

/// The API's routes.
pub fn router(state: Arc<ApiState>) -> Router {
    Router::new()
        .route("/api/v1/nodes", get(nodes))
        .route("/api/v1/nodes/{name}/pods", get(pods))
        .fallback(|| async { error(StatusCode::NOT_FOUND, "no such API path; try /api/v1/nodes") })
        .with_state(state)
}

fn error(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}

fn liveness(l: Liveness) -> &'static str {
    match l {
        Liveness::Live => "live",
        Liveness::Dead => "dead",
        Liveness::Left => "left",
    }
}

/// One node as the API shows it.
pub fn node_json(e: &NodeEntry, now_ms: u64, stale_after: Duration) -> Value {
    let stale_ms = u64::try_from(stale_after.as_millis()).unwrap_or(u64::MAX);
    let metrics: serde_json::Map<String, Value> = e
        .state
        .metrics
        .iter()
        .map(|(name, v)| {
            let age_ms = now_ms.saturating_sub(v.measured_at_ms);
            (
                name.to_string(),
                json!({
                    "value": v.value,
                    "measuredAtMs": v.measured_at_ms,
                    "ageSeconds": age_ms as f64 / 1000.0,
                    "stale": age_ms > stale_ms,
                }),
            )
        })
        .collect();
    json!({
        "name": &*e.name,
        "liveness": liveness(e.liveness),
        "generation": e.generation,
        "gossipAddr": e.gossip_addr.map(|a| a.to_string()),
        "quicAddr": e.quic_addr.map(|a| a.to_string()),
        "schemaVersion": e.state.schema_version,
        "metrics": metrics,
        "rewards": &e.state.rewards,
        "violations": &e.state.violations,
    })
}

async fn nodes(State(s): State<Arc<ApiState>>) -> Response {
    let snapshot = s.view.load_full();
    let now_ms = unix_ms(SystemTime::now());
    let sorted: BTreeMap<&str, &NodeEntry> = snapshot.nodes().map(|e| (&*e.name, e)).collect();
    let nodes: Vec<Value> = sorted
        .values()
        .map(|e| node_json(e, now_ms, s.stale_after))
        .collect();
    Json(json!({
        "synced": snapshot.synced,
        "staleAfterSeconds": s.stale_after.as_secs_f64(),
        "nodes": nodes,
    }))
    .into_response()
}

/// The QUIC address of `entry`'s agent.
pub fn agent_addr(entry: &NodeEntry, agent_port: u16) -> Option<SocketAddr> {
    entry.quic_addr.or_else(|| {
        entry
            .gossip_addr
            .map(|a| SocketAddr::new(a.ip(), agent_port))
    })
}

async fn pods(State(s): State<Arc<ApiState>>, Path(name): Path<String>) -> Response {
    let Some(link) = &s.agents else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "per-pod figures need QUIC to the agents: start the coordinator with --quic-ca, --quic-cert and --quic-key",
        );
    };
    let addr = {
        let snapshot = s.view.load();
        let Some(entry) = snapshot.node(&name) else {
            return error(
                StatusCode::NOT_FOUND,
                &format!(
                    "node {name} is not in the cluster view; GET /api/v1/nodes lists the known nodes"
                ),
            );
        };
        agent_addr(entry, link.agent_port)
    };
    let Some(addr) = addr else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("the address of node {name}'s agent is not known yet; retry in a few seconds"),
        );
    };
    match link
        .client
        .request(addr, &name, &Request::PodTelemetry)
        .await
    {
        Ok(WireResponse::PodTelemetry { node_name, pods }) => {
            Json(json!({ "node": node_name, "agentAddr": addr.to_string(), "pods": pods }))
                .into_response()
        }
        Ok(WireResponse::Error { message }) => error(
            StatusCode::BAD_GATEWAY,
            &format!("agent of node {name} at {addr} refused: {message}"),
        ),
        Ok(other) => error(
            StatusCode::BAD_GATEWAY,
            &format!(
                "agent of node {name} at {addr} answered {} instead of PodTelemetry",
                other.kind()
            ),
        ),
        Err(e) => error(
            StatusCode::BAD_GATEWAY,
            &format!("cannot reach the agent of node {name} at {addr}: {e}"),
        ),
    }
}
