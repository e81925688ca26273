//! Telling the caller an action ended: `POST <callbackURL>` with the same JSON `action.Get`
//! returns ([`super::accept::action_json`]), retried with exponential backoff. A 2xx answer is
//! delivery. A 4xx other than 408 and 429 is the callee refusing this body for good, so it is
//! not retried; anything else (5xx, 408, 429, connection errors, no answer within
//! [`RetryPolicy::attempt_timeout`]) is retried up to [`RetryPolicy::attempts`] times, waiting
//! 1 s, 2 s, 4 s, 8 s in between by default (about 15 s plus the attempts themselves).
//!
//! The executor calls [`deliver`] once an action ends and records the returned
//! [`CallbackStatus`] in the action's status; a new leader finding an ended action without it
//! delivers again, so a callee may see a callback twice and should key on `actionId`.
//! https URLs are checked against the system's root certificates (rustls with ring).

use std::sync::OnceLock;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use telemesh_core::action::WorkloadAction;
use telemesh_core::action::crd::CallbackStatus;
use telemesh_runtime::backoff::Backoff;

use super::accept::action_json;

/// How callbacks are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, at least one.
    pub attempts: u32,
    /// The waits between attempts (the wait before attempt `n + 1` is its
    /// [`Backoff::nominal`]`(n)`).
    pub backoff: Backoff,
    /// How long one attempt may take.
    pub attempt_timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 5,
            backoff: Backoff::new(Duration::from_secs(1), Duration::from_secs(30)),
            attempt_timeout: Duration::from_secs(10),
        }
    }
}

type HttpsClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// One client for every callback (connection pooling across actions).
fn client() -> &'static HttpsClient {
    static CLIENT: OnceLock<HttpsClient> = OnceLock::new();
    CLIENT.get_or_init(|| {
        let mut roots = rustls::RootCertStore::empty();
        let found = rustls_native_certs::load_native_certs();
        for e in &found.errors {
            tracing::warn!(error = %e, "reading the system's root certificates for https callbacks");
        }
        let (added, _ignored) = roots.add_parsable_certificates(found.certs);
        if added == 0 {
            tracing::warn!("no system root certificates: https callbacks will fail; http ones work");
        }
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map(|b| b.with_root_certificates(roots).with_no_client_auth());
        // ring supports the safe default protocol versions: not an outside input.
        let tls = tls.expect("rustls with ring supports the default protocol versions");
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .build();
        Client::builder(TokioExecutor::new()).build(connector)
    })
}

/// POSTs the ended `action` to `url` with the default [`RetryPolicy`].
pub async fn deliver(url: &str, action: &WorkloadAction) -> CallbackStatus {
    deliver_with(url, action, &RetryPolicy::default()).await
}

/// One attempt's outcome: `Ok` delivered, `Err((retry, message))`.
async fn attempt(
    url: &str,
    body: &Bytes,
    id: &str,
    timeout: Duration,
) -> Result<(), (bool, String)> {
    let request = http::Request::post(url)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(
            http::header::USER_AGENT,
            concat!("telemesh-coordinator/", env!("CARGO_PKG_VERSION")),
        )
        .header("Telemesh-Action-Id", id)
        .body(Full::new(body.clone()))
        .map_err(|e| {
            (
                false,
                format!("callbackURL {url:?} cannot be requested: {e}"),
            )
        })?;
    match tokio::time::timeout(timeout, client().request(request)).await {
        Err(_) => Err((true, format!("no answer within {timeout:?}"))),
        Ok(Err(e)) => Err((true, format!("{e:#}"))),
        Ok(Ok(resp)) => {
            let status = resp.status();
            if status.is_success() {
                Ok(())
            } else {
                let retry = !status.is_client_error() || matches!(status.as_u16(), 408 | 429);
                Err((retry, format!("the callee answered {status}")))
            }
        }
    }
}

/// POSTs the ended `action` to `url`, retrying as `policy` says.
pub async fn deliver_with(
    url: &str,
    action: &WorkloadAction,
    policy: &RetryPolicy,
) -> CallbackStatus {
    let id = action.metadata.name.clone().unwrap_or_default();
    let body = match serde_json::to_vec(&action_json(action)) {
        Ok(b) => Bytes::from(b),
        Err(e) => {
            return CallbackStatus {
                delivered: false,
                attempts: 0,
                last_error: format!("encoding the action: {e}"),
            };
        }
    };
    let mut status = CallbackStatus::default();
    for n in 1..=policy.attempts.max(1) {
        status.attempts = n;
        match attempt(url, &body, &id, policy.attempt_timeout).await {
            Ok(()) => {
                status.delivered = true;
                status.last_error.clear();
                return status;
            }
            Err((retry, message)) => {
                tracing::debug!(action = %id, url, attempt = n, error = %message, "callback not delivered");
                status.last_error = message;
                if !retry || n == policy.attempts {
                    break;
                }
                tokio::time::sleep(policy.backoff.nominal(n)).await;
            }
        }
    }
    tracing::warn!(action = %id, url, attempts = status.attempts, error = %status.last_error, "callback not delivered; giving up");
    status
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use axum::extract::State;
    use axum::routing::post;
    use telemesh_core::action::WorkloadActionSpec;

    use super::*;

    fn fast() -> RetryPolicy {
        RetryPolicy {
            attempts: 4,
            backoff: Backoff::new(Duration::from_millis(5), Duration::from_millis(20)),
            attempt_timeout: Duration::from_secs(5),
        }
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let p = RetryPolicy::default();
        let waits: Vec<u64> = (1..=7).map(|n| p.backoff.nominal(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30]);
    }

    /// A callee that fails its first `fail` calls with `status`, then answers 204; it
    /// counts calls and keeps the last body.
    async fn callee(
        fail: u32,
        status: u16,
    ) -> (
        String,
        Arc<(AtomicU32, parking_lot::Mutex<serde_json::Value>)>,
    ) {
        let seen = Arc::new((
            AtomicU32::new(0),
            parking_lot::Mutex::new(serde_json::Value::Null),
        ));
        let app = axum::Router::new()
            .route(
                "/hook",
                post(
                    move |State(seen): State<
                        Arc<(AtomicU32, parking_lot::Mutex<serde_json::Value>)>,
                    >,
                          body: axum::Json<serde_json::Value>| async move {
                        let n = seen.0.fetch_add(1, Ordering::SeqCst) + 1;
                        *seen.1.lock() = body.0;
                        if n <= fail {
                            http::StatusCode::from_u16(status).unwrap()
                        } else {
                            http::StatusCode::NO_CONTENT
                        }
                    },
                ),
            )
            .with_state(seen.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (format!("http://{addr}/hook"), seen)
    }

    fn action() -> WorkloadAction {
        let mut a = WorkloadAction::new(
            "wa-1",
            WorkloadActionSpec {
                method: "Move".into(),
                ..WorkloadActionSpec::default()
            },
        );
        a.metadata.namespace = Some("ul".into());
        a
    }

    #[tokio::test]
    async fn server_errors_are_retried_until_delivered() {
        let (url, seen) = callee(2, 503).await;
        let status = deliver_with(&url, &action(), &fast()).await;
        assert_eq!(
            status,
            CallbackStatus {
                delivered: true,
                attempts: 3,
                last_error: String::new()
            }
        );
        assert_eq!(seen.0.load(Ordering::SeqCst), 3);
        let body = seen.1.lock().clone();
        assert_eq!(body["actionId"], "wa-1");
        assert_eq!(body["method"], "Move");
        assert_eq!(body["message"], "ok");
    }

    #[tokio::test]
    async fn client_errors_stop_and_attempts_are_bounded() {
        let (url, seen) = callee(100, 400).await;
        let status = deliver_with(&url, &action(), &fast()).await;
        assert_eq!((status.delivered, status.attempts), (false, 1));
        assert!(status.last_error.contains("400"), "{}", status.last_error);
        assert_eq!(seen.0.load(Ordering::SeqCst), 1);
        let (url, seen) = callee(100, 500).await;
        let status = deliver_with(&url, &action(), &fast()).await;
        assert_eq!((status.delivered, status.attempts), (false, 4));
        assert_eq!(seen.0.load(Ordering::SeqCst), 4);
        // Nobody listening: connection errors are retried too.
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let status = deliver_with(&format!("http://{closed}/x"), &action(), &fast()).await;
        assert_eq!((status.delivered, status.attempts), (false, 4));
    }
}
