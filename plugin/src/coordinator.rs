//! Talking to the coordinators: `GET` on the JSON API and JSON-RPC calls to `POST /rpc`, with
//! the caller's bearer token. Plumbing only; the subcommands decide what to ask and what the
//! answers mean.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

/// How long a plain call may take (a `Wait` gets its own timeout on top).
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// Nothing answered at the address.
    #[error(
        "cannot reach the coordinators' API at {url}: {cause}; pass --coordinator URL (or set TELEMESH_COORDINATOR){hint}"
    )]
    Unreachable {
        /// The base URL.
        url: String,
        /// The connection error.
        cause: String,
        /// Where the coordinator Service is, when it could be found.
        hint: String,
    },
    /// The API answered an error.
    #[error("the coordinators' API answered {status} to {path}: {message}")]
    Status {
        /// The path.
        path: String,
        /// HTTP status.
        status: u16,
        /// The error's message.
        message: String,
    },
    /// A JSON-RPC error.
    #[error("{method} refused: {message} (code {code})")]
    Rpc {
        /// The method.
        method: String,
        /// The JSON-RPC error code.
        code: i64,
        /// Its message.
        message: String,
    },
    /// Not an answer the API gives.
    #[error("the coordinators' API answered {path} with something else than its JSON: {detail}")]
    BadReply {
        /// The path.
        path: String,
        /// What was wrong.
        detail: String,
    },
}

/// A client of one coordinator API address.
#[derive(Debug, Clone)]
pub struct Coordinator {
    base: String,
    token: Option<String>,
    client: Client<HttpConnector, Full<Bytes>>,
}

/// The base URL without its trailing slashes; only `http://` (the API listener serves plain
/// HTTP; in a cluster it is reached through a port-forward or the Service).
pub fn base_url(url: &str) -> anyhow::Result<String> {
    let trimmed = url.trim_end_matches('/');
    let uri: http::Uri = trimmed
        .parse()
        .map_err(|e| anyhow::anyhow!("--coordinator {url:?} is not a URL: {e}"))?;
    anyhow::ensure!(
        uri.scheme_str() == Some("http") && uri.authority().is_some(),
        "--coordinator {url:?} must be http://HOST:PORT (the coordinators' --api-listen serves plain HTTP)"
    );
    Ok(trimmed.to_owned())
}

// === impl Coordinator ===

impl Coordinator {
    /// A client of `url` sending `token` as a bearer token when given.
    pub fn new(url: &str, token: Option<String>) -> anyhow::Result<Self> {
        Ok(Self {
            base: base_url(url)?,
            token,
            client: Client::builder(TokioExecutor::new()).build_http(),
        })
    }

    /// The base URL.
    pub fn url(&self) -> &str {
        &self.base
    }

    /// `GET path` (`/api/v1/nodes`), its JSON.
    pub async fn get(&self, path: &str) -> Result<Value, CallError> {
        self.send(http::Method::GET, path, None, CALL_TIMEOUT).await
    }

    /// Calls `method` with `params` on `/rpc` (JSON-RPC 2.0, params as WAM's one-element array)
    /// and returns its result; `extra` is added to the time a call may take (a `Wait`'s).
    pub async fn rpc(
        &self,
        method: &str,
        params: Value,
        extra: Duration,
    ) -> Result<Value, CallError> {
        let body = json!({"jsonrpc": "2.0", "method": method, "params": [params], "id": 1});
        let reply = self
            .send(http::Method::POST, "/rpc", Some(body), CALL_TIMEOUT + extra)
            .await?;
        if let Some(err) = reply.get("error").filter(|e| !e.is_null()) {
            return Err(CallError::Rpc {
                method: method.to_owned(),
                code: err["code"].as_i64().unwrap_or_default(),
                message: err["message"].as_str().unwrap_or("no message").to_owned(),
            });
        }
        Ok(reply["result"].clone())
    }

    async fn send(
        &self,
        method: http::Method,
        path: &str,
        body: Option<Value>,
        timeout: Duration,
    ) -> Result<Value, CallError> {
        let bad = |detail: String| CallError::BadReply {
            path: path.to_owned(),
            detail,
        };
        let mut request = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header(http::header::ACCEPT, "application/json");
        if body.is_some() {
            request = request.header(http::header::CONTENT_TYPE, "application/json");
        }
        if let Some(token) = &self.token {
            request = request.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let bytes = body.map(|b| b.to_string()).unwrap_or_default();
        let request = request
            .body(Full::new(Bytes::from(bytes)))
            .map_err(|e| bad(format!("building the request: {e}")))?;
        let unreachable = |cause: String| CallError::Unreachable {
            url: self.base.clone(),
            cause,
            hint: String::new(),
        };
        let response = match tokio::time::timeout(timeout, self.client.request(request)).await {
            Err(_) => return Err(unreachable(format!("no answer within {timeout:?}"))),
            Ok(Err(e)) => return Err(unreachable(error_chain(&e))),
            Ok(Ok(r)) => r,
        };
        let status = response.status();
        let bytes = tokio::time::timeout(timeout, response.into_body().collect())
            .await
            .map_err(|_| unreachable(format!("the answer did not end within {timeout:?}")))?
            .map_err(|e| unreachable(error_chain(&e)))?
            .to_bytes();
        let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
            bad(format!(
                "HTTP {status}, not JSON ({e}): {}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
            ))
        })?;
        // /rpc answers its errors in the JSON-RPC body (401 and 403 too); the JSON API as
        // {"error": "..."}.
        if !status.is_success() && value.get("jsonrpc").is_none() {
            return Err(CallError::Status {
                path: path.to_owned(),
                status: status.as_u16(),
                message: value["error"]
                    .as_str()
                    .map_or_else(|| value.to_string(), str::to_owned),
            });
        }
        Ok(value)
    }
}

/// An error with its causes, `a: b: c`.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn only_plain_http_urls_are_taken() {
        assert_eq!(
            base_url("http://127.0.0.1:9080/").unwrap(),
            "http://127.0.0.1:9080"
        );
        assert!(base_url("https://coordinator:9080").is_err());
        assert!(base_url("127.0.0.1:9080").is_err());
        assert!(base_url("not a url").is_err());
    }

    #[tokio::test]
    async fn errors_of_the_api_and_of_rpc_read_as_theirs() {
        let app = axum::Router::new()
            .route(
                "/api/v1/nodes",
                axum::routing::get(|headers: http::HeaderMap| async move {
                    let token = headers.get("authorization").and_then(|v| v.to_str().ok());
                    if token == Some("Bearer t0k") {
                        (http::StatusCode::OK, axum::Json(json!({"nodes": []})))
                    } else {
                        (
                            http::StatusCode::UNAUTHORIZED,
                            axum::Json(json!({"error": "no token"})),
                        )
                    }
                }),
            )
            .route(
                "/rpc",
                axum::routing::post(|axum::Json(body): axum::Json<Value>| async move {
                    assert_eq!(body["params"][0]["pod"]["name"], "p");
                    axum::Json(json!({"jsonrpc": "2.0", "id": 1,
                        "error": {"code": -32004, "message": "pods \"p\" not found"}}))
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let url = format!("http://{addr}");
        let with = Coordinator::new(&url, Some("t0k".into())).unwrap();
        assert_eq!(
            with.get("/api/v1/nodes").await.unwrap(),
            json!({"nodes": []})
        );
        let without = Coordinator::new(&url, None).unwrap();
        let e = without.get("/api/v1/nodes").await.unwrap_err();
        assert!(matches!(e, CallError::Status { status: 401, .. }), "{e}");
        assert!(e.to_string().contains("no token"), "{e}");
        let e = with
            .rpc("action.Move", json!({"pod": {"name": "p"}}), Duration::ZERO)
            .await
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "action.Move refused: pods \"p\" not found (code -32004)"
        );
    }

    #[tokio::test]
    async fn nothing_listening_is_unreachable() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let c = Coordinator::new(&format!("http://{addr}"), None).unwrap();
        let e = c.get("/api/v1/nodes").await.unwrap_err();
        assert!(matches!(e, CallError::Unreachable { .. }), "{e}");
    }
}
