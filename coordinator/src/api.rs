//! The JSON API for people and AIOps entities, on `--api-listen`:
//! - `GET /api/v1/nodes`: every node's current state from the cluster view (metrics with their
//!   age, rewards, violations, and its scavenger pods with their unsaved work);
//! - `GET /api/v1/nodes/{name}/pods`: per-pod figures fetched from that node's agent over QUIC;
//! - `GET /api/v1/rewards[?podType=<namespace>/<type>]`: the gossiped reward estimates, decayed
//!   to now, with the score the extender would give each node now.
//!
//! An agent's QUIC address is the `quic` gossip key when the agent publishes it, else its
//! gossip IP with `--agent-quic-port`; its certificate must carry the node name.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::StatusCode;
use serde_json::{Value, json};
use telemesh_core::gossip::Liveness;
use telemesh_core::reward::{Estimate, RewardModel};
use telemesh_core::scavenge::ScavengerPod;
use telemesh_core::wire::{Request, Response as WireResponse};
use telemesh_runtime::quic::client::QuicClient;

use crate::extender::reward;
use crate::view::{ClusterView, NodeEntry, Snapshot};

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
    /// How the extender scores rewards (the rewards endpoint shows the same scores).
    pub reward_model: RewardModel,
}

/// The API's routes.
pub fn router(state: Arc<ApiState>) -> Router {
    Router::new()
        .route("/api/v1/nodes", get(nodes))
        .route("/api/v1/nodes/{name}/pods", get(pods))
        .route("/api/v1/rewards", get(rewards))
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
        "scavengers": scavengers_json(&e.state.scavengers, now_ms),
    })
}

/// A node's scavenger pods by pod UID, each with its ScavengerJob, last checkpoint and the work
/// it would lose if interrupted now (`unsavedSeconds` since the checkpoint; `unsavedCpuSeconds`
/// at its CPU request), as the unsaved-work victim ranker reads them.
fn scavengers_json(pods: &BTreeMap<String, ScavengerPod>, now_ms: u64) -> Value {
    let pods: serde_json::Map<String, Value> = pods
        .iter()
        .map(|(uid, p)| {
            let unsaved = now_ms.saturating_sub(p.checkpoint_ms) as f64 / 1000.0;
            (
                uid.clone(),
                json!({
                    "job": p.job,
                    "checkpointMs": p.checkpoint_ms,
                    "unsavedSeconds": unsaved,
                    "unsavedCpuSeconds": unsaved * p.cpu_millis as f64 / 1000.0,
                    "cpuMillis": p.cpu_millis,
                    "memoryBytes": p.memory_bytes,
                }),
            )
        })
        .collect();
    Value::Object(pods)
}

async fn nodes(State(s): State<Arc<ApiState>>) -> Response {
    let snapshot = s.view.load_full();
    let now_ms = s.view.now_ms();
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

/// The query of `GET /api/v1/rewards`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RewardsQuery {
    /// `<namespace>/<type>`; absent: every type.
    #[serde(rename = "podType")]
    pub pod_type: Option<String>,
}

/// One node's estimate for a type as the API shows it: counts decayed to `now_ms`, the score
/// the extender would give now, and the age of the gossiped estimate.
pub fn reward_json(node: &str, e: &Estimate, model: &RewardModel, now_ms: u64) -> Value {
    let d = model.decayed(e, now_ms);
    json!({
        "node": node,
        "mean": d.mean(),
        "good": d.good,
        "bad": d.bad,
        "evidence": d.evidence(),
        "score": reward::score(model, e, now_ms),
        "ageSeconds": now_ms.saturating_sub(e.at_ms) as f64 / 1000.0,
    })
}

/// The nodes with an estimate for `pod_type`, sorted by node name.
fn type_nodes(snapshot: &Snapshot, pod_type: &str, model: &RewardModel, now_ms: u64) -> Vec<Value> {
    let sorted: BTreeMap<&str, &Estimate> = snapshot
        .nodes()
        .filter_map(|n| n.reward(pod_type).map(|e| (&*n.name, e)))
        .collect();
    sorted
        .into_iter()
        .map(|(node, e)| reward_json(node, e, model, now_ms))
        .collect()
}

/// The body of `GET /api/v1/rewards`: one type's nodes, or (`pod_type` `None`) every type's.
pub fn rewards_json(
    snapshot: &Snapshot,
    model: &RewardModel,
    pod_type: Option<&str>,
    now_ms: u64,
) -> Value {
    let half_life = model.half_life.as_secs_f64();
    match pod_type {
        Some(t) => json!({
            "podType": t,
            "halfLifeSeconds": half_life,
            "nodes": type_nodes(snapshot, t, model, now_ms),
        }),
        None => {
            let types: BTreeMap<&str, Vec<Value>> = snapshot
                .reward_types()
                .map(|(t, _)| (t, type_nodes(snapshot, t, model, now_ms)))
                .collect();
            json!({ "halfLifeSeconds": half_life, "types": types })
        }
    }
}

/// Whether `t` is `<namespace>/<type>` with both parts non-empty and no blanks.
fn valid_pod_type(t: &str) -> bool {
    t.split_once('/')
        .is_some_and(|(ns, ty)| !ns.is_empty() && !ty.is_empty())
        && !t.chars().any(|c| c.is_whitespace() || c.is_control())
}

async fn rewards(
    State(s): State<Arc<ApiState>>,
    query: Result<Query<RewardsQuery>, QueryRejection>,
) -> Response {
    let Query(query) = match query {
        Ok(q) => q,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!(
                    "bad query: {}; the only parameter is podType=<namespace>/<type>",
                    e.body_text()
                ),
            );
        }
    };
    if let Some(t) = &query.pod_type
        && !valid_pod_type(t)
    {
        return error(
            StatusCode::BAD_REQUEST,
            &format!("podType {t:?} is not <namespace>/<type>, e.g. podType=default/web"),
        );
    }
    let snapshot = s.view.load_full();
    let now_ms = s.view.now_ms();
    Json(rewards_json(
        &snapshot,
        &s.reward_model,
        query.pod_type.as_deref(),
        now_ms,
    ))
    .into_response()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::SystemTime;

    use http_body_util::BodyExt as _;
    use telemesh_core::gossip::NodeState;
    use telemesh_core::gossip::schema::unix_ms;
    use tower::ServiceExt as _;

    use super::*;

    const MIN_MS: u64 = 60_000;

    fn node(name: &str, rewards: &[(&str, &str)]) -> NodeEntry {
        let kvs: Vec<(String, String)> = [("role".to_owned(), "agent".to_owned())]
            .into_iter()
            .chain(
                rewards
                    .iter()
                    .map(|(t, v)| (format!("r:{t}"), (*v).to_owned())),
            )
            .collect();
        let state = NodeState::from_key_values(kvs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        NodeEntry::new(name, 1, Liveness::Live, state)
    }

    fn state(now_ms: u64) -> Arc<ApiState> {
        let bad = format!("0,4@{now_ms}");
        let old = format!("0,4@{}", now_ms - 10 * MIN_MS);
        let good = format!("3,0@{now_ms}");
        let snapshot = Snapshot::from_entries([
            node("n2", &[("default/D", &bad), ("web/api", &good)]),
            node("n1", &[("default/D", &old), ("web/api", "garbage")]),
            node("n3", &[]),
        ]);
        Arc::new(ApiState {
            view: ClusterView::with_snapshot(snapshot),
            stale_after: Duration::from_secs(45),
            agents: None,
            reward_model: RewardModel::default(),
        })
    }

    async fn get(state: Arc<ApiState>, uri: &str) -> (u16, Value) {
        let resp = router(state)
            .oneshot(
                http::Request::builder()
                    .uri(uri)
                    .body(axum::body::Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn one_type_lists_its_nodes_sorted_and_decayed_to_now() {
        let now_ms = unix_ms(SystemTime::now());
        let (status, v) = get(state(now_ms), "/api/v1/rewards?podType=default/D").await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["podType"], "default/D");
        assert_eq!(v["halfLifeSeconds"], 600.0);
        let nodes = v["nodes"].as_array().unwrap();
        assert_eq!(nodes.len(), 2);
        let (n1, n2) = (&nodes[0], &nodes[1]);
        assert_eq!(
            (n1["node"].as_str(), n2["node"].as_str()),
            (Some("n1"), Some("n2"))
        );
        // n2: fresh, 4 bad: score as the extender gives it; n1: one half-life old, halved.
        let bad = Estimate {
            good: 0.0,
            bad: 4.0,
            at_ms: now_ms,
        };
        assert_eq!(
            n2["score"],
            u64::from(reward::score(&RewardModel::default(), &bad, now_ms))
        );
        assert!(n2["score"].as_u64().unwrap() < 7, "{n2}");
        assert!(n2["ageSeconds"].as_f64().unwrap() < 5.0);
        assert!((n1["bad"].as_f64().unwrap() - 2.0).abs() < 0.01, "{n1}");
        assert!((n1["evidence"].as_f64().unwrap() - 2.0).abs() < 0.01);
        assert!(n1["ageSeconds"].as_f64().unwrap() >= 600.0);
        assert!(n1["mean"].as_f64().unwrap() > n2["mean"].as_f64().unwrap());
        assert!(n1["score"].as_u64().unwrap() > n2["score"].as_u64().unwrap());
        for key in [
            "node",
            "mean",
            "good",
            "bad",
            "evidence",
            "score",
            "ageSeconds",
        ] {
            assert!(n1.get(key).is_some(), "{key} in {n1}");
        }
    }

    #[tokio::test]
    async fn without_a_type_every_type_is_listed_and_unknown_types_are_empty() {
        let now_ms = unix_ms(SystemTime::now());
        let (status, v) = get(state(now_ms), "/api/v1/rewards").await;
        assert_eq!(status, 200, "{v}");
        let types = v["types"].as_object().unwrap();
        assert_eq!(types.keys().collect::<Vec<_>>(), ["default/D", "web/api"]);
        // n1's web/api value is malformed: skipped, so only n2 reports that type.
        assert_eq!(types["web/api"].as_array().unwrap().len(), 1);
        assert_eq!(types["web/api"][0]["score"], 10);
        let (status, v) = get(state(now_ms), "/api/v1/rewards?podType=nobody/here").await;
        assert_eq!(status, 200);
        assert_eq!(v["nodes"], json!([]));
    }

    #[test]
    fn a_node_shows_its_scavengers_with_their_unsaved_work() {
        let now_ms = 1_000_000_000;
        let value = format!("batch/render@{}@2000@1073741824", now_ms - 30_000);
        let state = NodeState::from_key_values([("role", "agent"), ("s:uid-1", value.as_str())]);
        let entry = NodeEntry::new("n1", 1, Liveness::Live, state);
        let v = node_json(&entry, now_ms, Duration::from_secs(45));
        let pod = &v["scavengers"]["uid-1"];
        assert_eq!(pod["job"], "batch/render", "{v}");
        assert_eq!(pod["unsavedSeconds"], 30.0);
        assert_eq!(pod["unsavedCpuSeconds"], 60.0);
        assert_eq!(pod["cpuMillis"], 2000);
    }

    #[tokio::test]
    async fn bad_queries_get_a_400_that_says_what_to_send() {
        let now_ms = unix_ms(SystemTime::now());
        for uri in [
            "/api/v1/rewards?podType=noslash",
            "/api/v1/rewards?podType=/x",
            "/api/v1/rewards?podType=ns/",
            "/api/v1/rewards?podType=a%20b/c",
            "/api/v1/rewards?pod=default/D",
        ] {
            let (status, v) = get(state(now_ms), uri).await;
            assert_eq!(status, 400, "{uri}: {v}");
            let msg = v["error"].as_str().unwrap();
            assert!(msg.contains("podType"), "{uri}: {msg}");
        }
    }
}
