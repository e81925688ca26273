//! The story's JSON-RPC client: `POST /rpc` on the coordinators' API Service in WAM's gorilla
//! JSON-RPC 1.0 dialect, the body shaped exactly as the seed's curl calls send it
//! (`{"method":"action.X","params":[{...}],"id":"1"}`, no `"jsonrpc"` member), plus
//! `action.Wait` to follow the action it started.

use std::time::Duration;

use anyhow::Context as _;
use serde_json::{Value, json};
use tokio::time::Instant;

/// The longest single `action.Wait` long poll the story asks for.
const WAIT_POLL: Duration = Duration::from_secs(20);

/// A client of one `/rpc` URL.
pub struct Rpc {
    url: String,
}

/// The body the seed sends for `method` with `params` (one object, wrapped in WAM's array).
pub fn body(method: &str, params: Value) -> Value {
    json!({"method": method, "params": [params], "id": "1"})
}

/// The id of the action a WAM-dialect reply accepted: `{"result":{"message":"ok","actionId":..},
/// "error":null,"id":"1"}`; `Err` with WAM's bare error string (or what is wrong with the reply).
pub fn accepted(reply: &Value) -> Result<String, String> {
    match reply.get("error") {
        None | Some(Value::Null) => {}
        Some(Value::String(e)) => return Err(e.clone()),
        Some(other) => return Err(other.to_string()),
    }
    if reply["result"]["message"] != "ok" {
        return Err(format!("no \"message\":\"ok\" in the result: {reply}"));
    }
    reply["result"]["actionId"]
        .as_str()
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| format!("no actionId in the result: {reply}"))
}

impl Rpc {
    /// A client of `http://<service>/rpc`.
    pub fn new(service: std::net::SocketAddr) -> Self {
        Self {
            url: format!("http://{service}/rpc"),
        }
    }

    /// The URL the calls go to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// POSTs `body` and returns the parsed reply.
    pub async fn call(&self, body: &Value) -> anyhow::Result<Value> {
        let bytes = telemesh_sim::cluster::http::request(
            http::Method::POST,
            &self.url,
            Some(serde_json::to_vec(body)?),
        )
        .await?;
        serde_json::from_slice(&bytes)
            .with_context(|| format!("the reply is not JSON: {}", String::from_utf8_lossy(&bytes)))
    }

    /// Sends `method` with `params`; returns the accepted action's id, or the refusal.
    pub async fn submit(&self, method: &str, params: Value) -> anyhow::Result<String> {
        let reply = self.call(&body(method, params)).await?;
        accepted(&reply).map_err(|e| anyhow::anyhow!("{method} was refused: {e}"))
    }

    /// Long-polls `action.Wait` until `done` says the action has ended or `until` passes.
    pub async fn wait(
        &self,
        action_id: &str,
        namespace: &str,
        until: Instant,
        mut done: impl AsyncFnMut() -> anyhow::Result<bool>,
    ) -> anyhow::Result<()> {
        loop {
            if done().await? {
                return Ok(());
            }
            let left = until.saturating_duration_since(Instant::now());
            anyhow::ensure!(!left.is_zero(), "action {action_id} did not end in time");
            let seconds = left.min(WAIT_POLL).as_secs().max(1);
            let reply = self
                .call(&body(
                    "action.Wait",
                    json!({"actionId": action_id, "namespace": namespace, "timeoutSeconds": seconds}),
                ))
                .await?;
            if let Some(e) = reply.get("error").filter(|e| !e.is_null()) {
                anyhow::bail!("action.Wait {action_id}: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_body_is_the_seeds_shape() {
        let b = body(
            "action.Create",
            json!({"workload": {"namespace": "ul", "kind": "Deployment", "name": "test-a"}, "node": {"name": "n"}}),
        );
        assert_eq!(b["params"].as_array().map(Vec::len), Some(1));
        assert_eq!(b["id"], "1");
        assert!(b.get("jsonrpc").is_none());
    }

    #[test]
    fn replies_in_wams_dialect() {
        let ok = json!({"result": {"message": "ok", "actionId": "wa-1"}, "error": null, "id": "1"});
        assert_eq!(accepted(&ok).unwrap(), "wa-1");
        let refused = json!({"result": null, "error": "node name is required", "id": "1"});
        assert_eq!(accepted(&refused).unwrap_err(), "node name is required");
        let no_id = json!({"result": {"message": "ok"}, "error": null, "id": "1"});
        assert!(accepted(&no_id).unwrap_err().contains("no actionId"));
    }
}
