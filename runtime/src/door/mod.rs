//! Limits at an HTTP door (the extender, the JSON API, `/rpc`, `/metrics` and the health
//! endpoints): how large a body may be, how slowly a client may send its headers and body, and
//! how often one client may call. Refusals are answered as HTTP (413, 408, 429 with
//! `Retry-After`) and counted in `..._http_refused_total{door, reason}`.
//!
//! [`Door::guard`] wraps a router (rate, then size, then the body's deadline);
//! [`serve`] serves connections with the header deadline, which only the connection sees.

mod serve;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use http::{HeaderValue, StatusCode, header};
use http_body_util::{BodyExt as _, LengthLimitError, Limited};
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

pub use self::serve::{Connections, serve};

/// Which door refused.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
pub enum DoorName {
    /// The coordinator's scheduler extender.
    Extender,
    /// The coordinator's JSON API (`/api/v1/...`).
    Api,
    /// The coordinator's JSON-RPC (`POST /rpc`).
    Rpc,
    /// `/metrics`, `/healthz`, `/readyz` (and the agent's `/debug/state`).
    Http,
}

/// Why a request or connection was refused.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
pub enum Reason {
    /// The body was larger than the door's limit: 413.
    BodyTooLarge,
    /// The body did not arrive within the body deadline: 408.
    BodyTimeout,
    /// The headers did not arrive within the header deadline: the connection is closed.
    HeaderTimeout,
    /// The client called more often than its rate: 429 with `Retry-After`.
    RateLimited,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusedLabels {
    door: DoorName,
    reason: Reason,
}

/// The refusal counter every door of a process shares.
#[derive(Clone, Debug, Default)]
pub struct DoorMetrics {
    refused: Family<RefusedLabels, Counter>,
}

// === impl DoorMetrics ===

impl DoorMetrics {
    /// Registers `refused` (exported as `<prefix>_refused_total`) in `reg`.
    pub fn register(reg: &mut Registry) -> Self {
        let metrics = Self::default();
        reg.register(
            "refused",
            "Requests and connections refused at an HTTP door, by door and reason",
            metrics.refused.clone(),
        );
        metrics
    }

    /// Counts one refusal.
    pub fn refused(&self, door: DoorName, reason: Reason) {
        self.refused
            .get_or_create(&RefusedLabels { door, reason })
            .inc();
    }

    /// How many refusals were counted (tests read it).
    pub fn count(&self, door: DoorName, reason: Reason) -> u64 {
        self.refused
            .get_or_create(&RefusedLabels { door, reason })
            .get()
    }
}

/// How often one client (one source IP address) may call: a token bucket of `burst`
/// requests refilled by one every `period` (GCRA, as governor implements it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    /// One more request is allowed every `period`.
    pub period: Duration,
    /// Requests allowed at once after a quiet spell.
    pub burst: NonZeroU32,
}

// === impl Rate ===

impl Rate {
    /// `per_second` requests a second with bursts of `burst`, or `None` (no limit) when
    /// `per_second` is 0. A burst of 0 is taken as 1: a client may always make one call.
    pub fn per_second(per_second: u32, burst: u32) -> Option<Self> {
        let per_second = NonZeroU32::new(per_second)?;
        Some(Self {
            period: Duration::from_secs(1) / per_second.get(),
            burst: NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN),
        })
    }

    fn quota(self) -> Quota {
        Quota::with_period(self.period)
            .unwrap_or_else(|| Quota::per_second(NonZeroU32::MAX))
            .allow_burst(self.burst)
    }
}

/// A door's limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest body read, bytes.
    pub max_body: usize,
    /// Longest the body may take to arrive once the headers are in.
    pub body_timeout: Duration,
    /// Per-client rate; `None` for no limit.
    pub rate: Option<Rate>,
}

/// Header and body deadlines for every door of a process.
#[derive(Debug, Clone, clap::Args)]
pub struct TimeoutArgs {
    /// Longest a client may take to send a request's headers, and to start its next request
    /// on a kept-alive connection; a slower connection is closed.
    #[arg(long, env = "TELEMESH_HTTP_HEADER_TIMEOUT", default_value = "30s", value_parser = crate::cli::parse_duration)]
    pub http_header_timeout: Duration,
    /// Longest a client may take to send a request's body once its headers are in; a slower
    /// one gets 408. 30 s carries the extender's largest body (about 75 MB) at 25 Mbit/s.
    #[arg(long, env = "TELEMESH_HTTP_BODY_TIMEOUT", default_value = "30s", value_parser = crate::cli::parse_duration)]
    pub http_body_timeout: Duration,
}

/// An HTTP door: its name, limits and counter.
pub struct Door {
    name: DoorName,
    limits: Limits,
    limiter: Option<DefaultKeyedRateLimiter<IpAddr>>,
    metrics: DoorMetrics,
}

impl std::fmt::Debug for Door {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Door")
            .field("name", &self.name)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// Distinct client addresses kept before idle ones are forgotten.
const KEEP_CLIENTS: usize = 10_000;

// === impl Door ===

impl Door {
    /// A door named `name` with `limits`, counting refusals in `metrics`.
    pub fn new(name: DoorName, limits: Limits, metrics: DoorMetrics) -> Arc<Self> {
        let limiter = limits.rate.map(|r| RateLimiter::keyed(r.quota()));
        Arc::new(Self {
            name,
            limits,
            limiter,
            metrics,
        })
    }

    /// The door's name.
    pub fn name(&self) -> DoorName {
        self.name
    }

    /// The counter refusals go to.
    pub fn metrics(&self) -> &DoorMetrics {
        &self.metrics
    }

    /// Returns `router` behind this door: each request is rate-checked, then its body is read
    /// whole within the limits before the handler runs (handlers then read it from memory).
    pub fn guard(self: &Arc<Self>, router: Router) -> Router {
        router.layer(axum::middleware::from_fn_with_state(self.clone(), guard))
    }

    fn refuse(&self, reason: Reason, status: StatusCode, message: String) -> Response {
        self.metrics.refused(self.name, reason);
        tracing::debug!(door = ?self.name, ?reason, "request refused");
        let mut response = (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            serde_json::json!({ "error": message }).to_string(),
        )
            .into_response();
        if reason == Reason::BodyTimeout {
            // The rest of the body may still be on its way: do not read it as the next request.
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        response
    }

    /// Checks `client` against the rate: `Some(seconds to wait)` when over it.
    fn over_rate(&self, client: IpAddr) -> Option<u64> {
        let limiter = self.limiter.as_ref()?;
        if limiter.len() > KEEP_CLIENTS {
            limiter.retain_recent();
        }
        let not_until = limiter.check_key(&client).err()?;
        let wait = not_until.wait_time_from(DefaultClock::default().now());
        // Retry-After counts whole seconds; round up so a client that obeys is let in.
        Some(wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).map(|s| s.max(1))
    }
}

fn client_ip(request: &Request) -> IpAddr {
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip())
}

async fn guard(State(door): State<Arc<Door>>, request: Request, next: Next) -> Response {
    if let Some(seconds) = door.over_rate(client_ip(&request)) {
        let mut response = door.refuse(
            Reason::RateLimited,
            StatusCode::TOO_MANY_REQUESTS,
            format!("too many requests from this address; retry after {seconds} s"),
        );
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        return response;
    }
    let max = door.limits.max_body;
    let too_large = || {
        door.refuse(
            Reason::BodyTooLarge,
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body larger than {max} bytes"),
        )
    };
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > max as u64) {
        return too_large();
    }
    let (parts, body) = request.into_parts();
    let read = tokio::time::timeout(door.limits.body_timeout, Limited::new(body, max).collect());
    let bytes = match read.await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(e)) if e.is::<LengthLimitError>() => return too_large(),
        Ok(Err(e)) => {
            // The client went away or sent a broken chunked body; nobody reads this answer.
            return (
                StatusCode::BAD_REQUEST,
                format!("cannot read the request body: {e}"),
            )
                .into_response();
        }
        Err(_) => {
            return door.refuse(
                Reason::BodyTimeout,
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request body did not arrive within {:?}",
                    door.limits.body_timeout
                ),
            );
        }
    };
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

#[cfg(test)]
mod tests;
