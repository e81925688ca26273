//! The switch over HTTP at [`FAULTS_PATH`], for the dev cluster and anyone outside the test
//! process:
//!
//! - `GET` → `{"fault": ..., "remainingSeconds": ..., "clients": {"<user agent>": {"served":
//!   .., "refused": .., "throttled": ..}}}`;
//! - `PUT` `{"kind": "outage", "forSeconds": 60}` or `{"kind": "throttle", "status": 429,
//!   "retryAfterSeconds": 2, "forSeconds": 30, "dropConnections": true}` starts a fault
//!   (`forSeconds` absent: until cleared; `dropConnections`: close open connections too, as a
//!   server restarting overloaded would);
//! - `DELETE` clears it.
//!
//! ```text
//! curl -X PUT -d '{"kind":"outage","forSeconds":60}' http://127.0.0.1:6443/sim/faults
//! ```

use std::time::Duration;

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::switch::{FAULTS_PATH, Fault, Faults};

/// What `PUT` takes.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Start {
    /// The fault.
    #[serde(flatten)]
    pub fault: Fault,
    /// How long it lasts; until cleared when absent.
    #[serde(default)]
    pub for_seconds: Option<f64>,
    /// Also close every open connection now.
    #[serde(default)]
    pub drop_connections: bool,
}

/// What `GET` answers.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct State {
    /// The fault in force.
    pub fault: Option<Fault>,
    /// How long it still lasts, when it has an end.
    pub remaining_seconds: Option<f64>,
    /// Requests per client.
    pub clients: std::collections::BTreeMap<String, super::clients::ClientCounts>,
}

impl Faults {
    /// Serves the switch at [`FAULTS_PATH`].
    pub fn router(&self) -> axum::Router {
        let (get, put, delete) = (self.clone(), self.clone(), self.clone());
        axum::Router::new().route(
            FAULTS_PATH,
            axum::routing::get(move || async move { Json(get.state()) })
                .put(move |body: axum::body::Bytes| async move { put.start_from(&body) })
                .delete(move || async move {
                    delete.clear();
                    Json(delete.state())
                }),
        )
    }

    /// The switch and the counts, as `GET` answers them.
    pub fn state(&self) -> State {
        State {
            fault: self.current(),
            remaining_seconds: self.remaining().map(|d| d.as_secs_f64()),
            clients: self.clients(),
        }
    }

    fn start_from(&self, body: &[u8]) -> Response {
        let start: Start = match serde_json::from_slice(body) {
            Ok(s) => s,
            Err(e) => {
                return bad_request(format!(
                    "cannot read the fault ({e}); send {{\"kind\": \"outage\", \"forSeconds\": 60}} or {{\"kind\": \"throttle\", \"status\": 429, \"retryAfterSeconds\": 1}}"
                ));
            }
        };
        if let Err(e) = start.fault.validate() {
            return bad_request(e);
        }
        let lasting = match start.for_seconds {
            None => None,
            Some(s) if s.is_finite() && s > 0.0 => Some(Duration::from_secs_f64(s)),
            Some(s) => {
                return bad_request(format!(
                    "forSeconds {s} is not a positive number of seconds; leave it out to play the fault until DELETE"
                ));
            }
        };
        self.start(start.fault, lasting);
        if start.drop_connections {
            self.drop_connections();
        }
        Json(self.state()).into_response()
    }
}

fn bad_request(message: String) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(serde_json::json!({ "error": message })),
    )
        .into_response()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use axum::body::Body;
    use http::Request;
    use tower::ServiceExt as _;

    use super::*;

    async fn call(faults: &Faults, method: &str, body: &str) -> (StatusCode, serde_json::Value) {
        let req = Request::builder()
            .method(method)
            .uri(FAULTS_PATH)
            .body(Body::from(body.to_owned()))
            .unwrap();
        let resp = faults.router().oneshot(req).await.unwrap();
        let status = resp.status();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn a_fault_is_started_read_and_cleared_over_http() {
        let faults = Faults::default();
        let (status, state) = call(
            &faults,
            "PUT",
            r#"{"kind":"throttle","status":429,"retryAfterSeconds":2,"forSeconds":30}"#,
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{state}");
        assert_eq!(
            state["fault"],
            serde_json::json!({"kind": "throttle", "status": 429, "retryAfterSeconds": 2})
        );
        assert!(state["remainingSeconds"].as_f64().unwrap() > 29.0);
        let (_, state) = call(&faults, "DELETE", "").await;
        assert_eq!(state["fault"], serde_json::Value::Null);
        let (_, state) = call(&faults, "GET", "").await;
        assert_eq!(state["fault"], serde_json::Value::Null);
    }

    #[tokio::test]
    async fn a_fault_that_cannot_be_played_is_refused_saying_why() {
        let faults = Faults::default();
        let (status, body) = call(&faults, "PUT", r#"{"kind":"throttle","status":404}"#).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(body["error"].as_str().unwrap().contains("429 or 5xx"));
        let (status, body) = call(&faults, "PUT", r#"{"kind":"outage","forSeconds":-1}"#).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(body["error"].as_str().unwrap().contains("forSeconds"));
        let (status, _) = call(&faults, "PUT", "{").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(faults.current(), None);
    }
}
