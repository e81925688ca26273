//! What sim does with one request while a fault plays.

use ::http::StatusCode;

/// What to do with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Serve it.
    Serve,
    /// Close the connection without answering (an outage).
    Refuse,
    /// Answer `status` with an optional `Retry-After` (throttling).
    Throttle {
        /// 429 or 5xx.
        status: StatusCode,
        /// Seconds for `Retry-After`.
        retry_after_seconds: Option<u64>,
    },
}
