//! When the agent may write to the API server again after it was unavailable: one exponential
//! backoff shared by every writer of the agent (labels, policy status, the recovery
//! annotation, evictions), so an agent sends at most one request per wait while the API
//! server is down or overloaded, whatever its policy period and however many pods it has.
//!
//! Evaluation goes on every period without it: gossip keys, metrics and the decisions are kept
//! in memory, and the writes catch up once a request gets through (docs/faults.md).
//!
//! **Unavailable** ([`unavailable`]) means the request got no answer (a connection error, a
//! timeout), or a 5xx, or a 429 that is not a disruption budget's refusal: the server, not this
//! request, is the problem. A disruption budget's 429, a 404, a conflict or an invalid
//! request are answers about one object; the callers handle those as before.
//!
//! **The wait** doubles from [`FIRST`] to [`MAX`] per failure, drawn in its upper half (half
//! fixed, half random, so 5,000 agents that lost the server at the same moment do not come
//! back at the same moment), and is never shorter than the server's `Retry-After`. [`MAX`] is
//! 10 s: at 5,000 nodes a down API server gets about 670 requests a second from the agents,
//! what their kubelets' Lease renewals send anyway (500 a second), and every write lands at
//! most 10 s after it comes back. The waits are the workspace's one [`Backoff`]; this gate adds
//! the `Retry-After` floor and the instant before which no write goes. Pure: the clock and the
//! random draw are arguments.

use std::sync::Arc;
use std::time::{Duration, Instant};

use telemesh_runtime::backoff::Backoff;
pub use telemesh_runtime::backoff::draw;

/// The first wait.
pub const FIRST: Duration = Duration::from_secs(1);
/// The longest wait (the server's `Retry-After` may ask for longer).
pub const MAX: Duration = Duration::from_secs(10);

/// The agent's waits: from [`FIRST`], doubling, at most [`MAX`], jittered.
const WAITS: Backoff = Backoff::new(FIRST, MAX).jittered();

/// The gate: whether a write may go now, and how long after a failure.
#[derive(Debug, Clone)]
pub struct ApiBackoff {
    waits: Backoff,
    until: Option<Instant>,
}

impl Default for ApiBackoff {
    fn default() -> Self {
        Self {
            waits: WAITS,
            until: None,
        }
    }
}

/// The agent's one backoff, shared by its writers.
pub type SharedApiBackoff = Arc<parking_lot::Mutex<ApiBackoff>>;

// === impl ApiBackoff ===

impl ApiBackoff {
    /// Whether a write may be sent at `now`.
    pub fn ready(&self, now: Instant) -> bool {
        self.until.is_none_or(|until| now >= until)
    }

    /// Notes a write that found the server unavailable at `now`; `retry_after` is what the
    /// server asked for, `draw` a uniform number in [0, 1). Returns the wait before the next.
    pub fn failed(&mut self, now: Instant, retry_after: Option<Duration>, draw: f64) -> Duration {
        let wait = self.waits.failed(draw).max(retry_after.unwrap_or_default());
        self.until = Some(now + wait);
        wait
    }

    /// Notes a write the server answered: the next one goes at once.
    pub fn succeeded(&mut self) {
        self.waits.reset();
        self.until = None;
    }

    /// Failures in a row so far.
    pub fn failures(&self) -> u32 {
        self.waits.failures()
    }
}

/// Whether `e` says the API server is unavailable (module docs), and the `Retry-After` it
/// asked for: `None` when the error is an answer about the request itself.
pub fn unavailable(e: &kube::Error) -> Option<Option<Duration>> {
    match e {
        kube::Error::Api(s) if s.code == 429 && disruption_budget(s) => None,
        kube::Error::Api(s) if s.code == 429 || s.code >= 500 => Some(
            s.details
                .as_ref()
                .map(|d| d.retry_after_seconds)
                .filter(|s| *s > 0)
                .map(|s| Duration::from_secs(u64::from(s))),
        ),
        kube::Error::Api(_) => None,
        // No answer at all: connection refused or reset, a timeout, a broken body.
        _ => Some(None),
    }
}

/// Whether a 429 is a disruption budget refusing an eviction (kube-apiserver's cause
/// `DisruptionBudget`), not the server throttling.
fn disruption_budget(s: &kube::core::Status) -> bool {
    s.details
        .as_ref()
        .is_some_and(|d| d.causes.iter().any(|c| c.reason == "DisruptionBudget"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use kube::core::Status;

    use super::*;

    #[test]
    fn waits_double_up_to_the_cap_in_their_upper_half_and_reset_on_success() {
        let now = Instant::now();
        let mut b = ApiBackoff::default();
        assert!(b.ready(now));
        let waits: Vec<u64> = (0..6).map(|_| b.failed(now, None, 0.0).as_secs()).collect();
        assert_eq!(waits, [0, 1, 2, 4, 5, 5], "half of 1, 2, 4, 8, 10, 10 s");
        assert_eq!(b.failed(now, None, 0.999).as_millis(), 9_995);
        assert!(!b.ready(now + Duration::from_secs(9)));
        assert!(b.ready(now + Duration::from_secs(10)));
        b.succeeded();
        assert!(b.ready(now));
        assert_eq!(b.failed(now, None, 1.0), FIRST);
    }

    #[test]
    fn retry_after_is_a_floor() {
        let now = Instant::now();
        let mut b = ApiBackoff::default();
        assert_eq!(
            b.failed(now, Some(Duration::from_secs(30)), 0.5),
            Duration::from_secs(30)
        );
    }

    #[test]
    fn many_failures_do_not_overflow() {
        let mut b = ApiBackoff::default();
        for _ in 0..100 {
            b.failed(Instant::now(), None, 0.5);
        }
        assert_eq!(b.failed(Instant::now(), None, 1.0), MAX);
        assert_eq!(b.failures(), 101);
    }

    fn status(code: u16, retry_after: u32, cause: Option<&str>) -> kube::Error {
        let causes: Vec<serde_json::Value> = cause
            .map(|c| serde_json::json!({"reason": c}))
            .into_iter()
            .collect();
        let status: Status = serde_json::from_value(serde_json::json!({
            "code": code,
            "details": {"retryAfterSeconds": retry_after, "causes": causes}
        }))
        .unwrap();
        kube::Error::Api(Box::new(status))
    }

    #[test]
    fn the_server_is_unavailable_only_when_it_says_so_or_says_nothing() {
        assert_eq!(
            unavailable(&status(429, 2, None)),
            Some(Some(Duration::from_secs(2)))
        );
        assert_eq!(unavailable(&status(500, 0, None)), Some(None));
        assert_eq!(
            unavailable(&status(503, 1, None)),
            Some(Some(Duration::from_secs(1)))
        );
        assert_eq!(unavailable(&status(429, 0, Some("DisruptionBudget"))), None);
        assert_eq!(unavailable(&status(404, 0, None)), None);
        assert_eq!(unavailable(&status(409, 0, None)), None);
        let no_answer = kube::Error::Service("connection reset".into());
        assert_eq!(unavailable(&no_answer), Some(None));
    }
}
