//! The switch: which fault plays until when ([`Switch`], pure, and its decision for one
//! request, [`Switch::admit`]), and the shared handle the connection loop, the HTTP endpoint and
//! the tests turn ([`Faults`]).

use std::sync::Arc;
use std::time::Duration;

use ::http::{HeaderMap, StatusCode, header};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::time::Instant;

use super::admission::Admission;
use super::clients::{self, ClientCounts};

/// Where sim serves the switch (`GET`, `PUT`, `DELETE`; [`super::http`]).
pub const FAULTS_PATH: &str = "/sim/faults";

/// Paths neither faulted nor counted: sim's own endpoints.
const SIM_PREFIX: &str = "/sim/";

/// Health probes: exempt from throttling, as kube-apiserver's `probes` FlowSchema exempts them
/// from priority and fairness. An outage fails them like everything else.
const PROBES: [&str; 3] = ["/healthz", "/livez", "/readyz"];

/// A fault the API server plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Fault {
    /// Not answering: open connections are closed, new ones are closed unanswered.
    Outage,
    /// Every request (health probes aside) answered `status` (429 or 5xx), with
    /// `Retry-After: <retry_after_seconds>` when set.
    #[serde(rename_all = "camelCase")]
    Throttle {
        /// The status code: 429, or 500 to 599.
        status: u16,
        /// The `Retry-After` header's value; `None` sends none.
        retry_after_seconds: Option<u64>,
    },
}

impl Fault {
    /// Checks that the fault can be played: a throttle's status is 429 or a 5xx.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            Self::Outage => Ok(()),
            Self::Throttle { status, .. } if *status == 429 || (500..600).contains(status) => {
                Ok(())
            }
            Self::Throttle { status, .. } => Err(format!(
                "throttle status {status} is not 429 or 5xx; an overloaded API server answers 429 (priority and fairness) or 5xx"
            )),
        }
    }
}

/// The fault in force and until when: the pure part of the switch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Switch {
    fault: Option<Fault>,
    until: Option<Instant>,
}

impl Switch {
    /// A switch playing `fault` until `until` (for ever when `None`).
    pub fn new(fault: Option<Fault>, until: Option<Instant>) -> Self {
        Self { fault, until }
    }

    /// The fault in force at `now`: none once `until` has passed.
    pub fn at(&self, now: Instant) -> Option<Fault> {
        match self.until {
            Some(until) if now >= until => None,
            _ => self.fault,
        }
    }

    /// How long the fault in force at `now` lasts (`None`: none in force, or no end set).
    pub fn remaining(&self, now: Instant) -> Option<Duration> {
        self.at(now)?;
        self.until.map(|u| u.saturating_duration_since(now))
    }

    /// Decides what a request for `path` gets at `now`.
    pub fn admit(&self, path: &str, now: Instant) -> Admission {
        if path.starts_with(SIM_PREFIX) {
            return Admission::Serve;
        }
        match self.at(now) {
            None => Admission::Serve,
            Some(Fault::Outage) => Admission::Refuse,
            Some(Fault::Throttle { .. }) if PROBES.contains(&path) => Admission::Serve,
            Some(Fault::Throttle {
                status,
                retry_after_seconds,
            }) => Admission::Throttle {
                status: StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE),
                retry_after_seconds,
            },
        }
    }
}

/// The shared fault switch of one sim: cheap to clone.
#[derive(Debug, Clone)]
pub struct Faults {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    switch: Mutex<Switch>,
    clients: Mutex<clients::Clients>,
    /// Bumped to close every open connection (an outage begins, or asked).
    cuts: watch::Sender<u64>,
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            inner: Arc::new(Inner {
                switch: Mutex::new(Switch::default()),
                clients: Mutex::new(clients::Clients::default()),
                cuts: watch::Sender::new(0),
            }),
        }
    }
}

// === impl Faults ===

impl Faults {
    /// Starts playing `fault`, for `lasting` (until [`Faults::clear`] when `None`). An outage
    /// closes every open connection at once.
    pub fn start(&self, fault: Fault, lasting: Option<Duration>) {
        let until = lasting.map(|d| Instant::now() + d);
        *self.inner.switch.lock() = Switch::new(Some(fault), until);
        tracing::warn!(?fault, ?lasting, "sim: fault started");
        if fault == Fault::Outage {
            self.drop_connections();
        }
    }

    /// Stops any fault: the server answers again, with its state as it was.
    pub fn clear(&self) {
        *self.inner.switch.lock() = Switch::default();
        tracing::warn!("sim: faults cleared");
    }

    /// The fault in force now.
    pub fn current(&self) -> Option<Fault> {
        self.inner.switch.lock().at(Instant::now())
    }

    /// How long the fault in force lasts, if it has an end.
    pub fn remaining(&self) -> Option<Duration> {
        self.inner.switch.lock().remaining(Instant::now())
    }

    /// Closes every open connection (watches included), as a restarting server does; clients
    /// reconnect.
    pub fn drop_connections(&self) {
        self.inner.cuts.send_modify(|n| *n += 1);
    }

    /// Requests per client so far, by `User-Agent`.
    pub fn clients(&self) -> std::collections::BTreeMap<String, ClientCounts> {
        self.inner.clients.lock().snapshot()
    }

    /// Counts a request for `path` from the client `headers` name and decides what it gets.
    pub fn admit(&self, path: &str, headers: &HeaderMap) -> Admission {
        let admission = self.inner.switch.lock().admit(path, Instant::now());
        if !path.starts_with(SIM_PREFIX) {
            let agent = headers
                .get(header::USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            self.inner.clients.lock().count(agent, admission);
        }
        admission
    }

    /// Follows the connection cuts ([`Faults::drop_connections`]).
    pub(crate) fn cuts(&self) -> watch::Receiver<u64> {
        self.inner.cuts.subscribe()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn throttle(status: u16) -> Fault {
        Fault::Throttle {
            status,
            retry_after_seconds: Some(2),
        }
    }

    #[test]
    fn a_fault_holds_until_its_end_then_everything_is_served() {
        let now = Instant::now();
        let switch = Switch::new(Some(Fault::Outage), Some(now + Duration::from_secs(60)));
        assert_eq!(switch.admit("/api/v1/nodes", now), Admission::Refuse);
        assert_eq!(
            switch.remaining(now + Duration::from_secs(20)),
            Some(Duration::from_secs(40))
        );
        let later = now + Duration::from_secs(60);
        assert_eq!(switch.admit("/api/v1/nodes", later), Admission::Serve);
        assert_eq!(switch.remaining(later), None);
        let endless = Switch::new(Some(Fault::Outage), None);
        assert_eq!(
            endless.admit("/api", now + Duration::from_secs(3600)),
            Admission::Refuse
        );
    }

    #[test]
    fn sims_own_endpoints_are_never_faulted_and_probes_are_not_throttled() {
        let now = Instant::now();
        let outage = Switch::new(Some(Fault::Outage), None);
        assert_eq!(outage.admit("/sim/faults", now), Admission::Serve);
        assert_eq!(outage.admit("/healthz", now), Admission::Refuse);
        let throttled = Switch::new(Some(throttle(429)), None);
        assert_eq!(throttled.admit("/readyz", now), Admission::Serve);
        assert_eq!(
            throttled.admit("/apis/coordination.k8s.io/v1/leases", now),
            Admission::Throttle {
                status: StatusCode::TOO_MANY_REQUESTS,
                retry_after_seconds: Some(2)
            }
        );
    }

    #[test]
    fn only_429_and_5xx_throttle() {
        assert!(throttle(429).validate().is_ok());
        assert!(throttle(503).validate().is_ok());
        let err = throttle(404).validate().unwrap_err();
        assert!(err.contains("429 or 5xx"), "{err}");
        assert!(Fault::Outage.validate().is_ok());
    }

    #[test]
    fn requests_are_counted_per_user_agent_except_sims_own() {
        let faults = Faults::default();
        let mut headers = HeaderMap::new();
        headers.insert(
            header::USER_AGENT,
            "telemesh-agent/0.1.0 (n1)".parse().unwrap(),
        );
        faults.admit("/api/v1/nodes", &headers);
        faults.start(throttle(503), None);
        faults.admit("/api/v1/nodes", &headers);
        faults.start(Fault::Outage, None);
        faults.admit("/api/v1/nodes", &headers);
        faults.admit("/sim/faults", &headers);
        faults.clear();
        faults.admit("/api/v1/pods", &HeaderMap::new());
        let clients = faults.clients();
        assert_eq!(
            clients["telemesh-agent/0.1.0 (n1)"],
            ClientCounts {
                served: 1,
                throttled: 1,
                refused: 1
            }
        );
        assert_eq!(clients[clients::UNNAMED].served, 1);
    }
}
