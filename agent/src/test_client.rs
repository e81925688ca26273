//! A kube client for unit tests that records every request (method, path, body) and answers
//! each with the same small Node, so a test can check which objects a write path addresses.

use std::sync::Arc;

use http_body_util::BodyExt as _;
use parking_lot::Mutex;

/// The requests seen so far, one `METHOD /path body` line each.
pub type Seen = Arc<Mutex<Vec<String>>>;

/// Returns the client and what it has seen.
pub fn recording() -> (kube::Client, Seen) {
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let log = log.clone();
        async move {
            let (parts, body) = req.into_parts();
            let body = body
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            log.lock().push(format!(
                "{} {} {}",
                parts.method,
                parts.uri.path(),
                String::from_utf8_lossy(&body)
            ));
            let node = serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}});
            let bytes = serde_json::to_vec(&node).unwrap_or_default();
            Ok::<_, std::convert::Infallible>(http::Response::new(kube::client::Body::from(bytes)))
        }
    });
    (kube::Client::new(service, "default"), seen)
}
