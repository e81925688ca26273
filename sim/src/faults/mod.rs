//! API server faults on cue, for the fault suite (tests/tests/faults.rs) and the dev cluster: an
//! **outage** (the server stops answering and comes back with its state intact) and
//! **throttling** (every request answered 429 or a 5xx, with `Retry-After` if asked, as an
//! overloaded kube-apiserver's priority and fairness answers), plus request counts per client,
//! so a test can tell which client kept calling while it could not be served.
//!
//! This module decides ([`Switch::admit`], pure) and counts ([`clients`]); [`serve`] is the
//! connection loop that applies the decision; [`http`] serves the switch at [`FAULTS_PATH`].
//!
//! **An outage resets, it does not hang.** A kube-apiserver that died behind its Service
//! refuses connections: its host answers RST, and once the endpoint is gone kube-proxy rejects
//! them. sim keeps its port through an outage (so it comes back at the same address, as a
//! restarted kube-apiserver does behind its Service), so it cannot refuse at the TCP level.
//! Instead it closes every open connection when the outage begins (watches end, as when the
//! process dies), and closes each new connection after reading its request, without an answer:
//! to kube-rs and client-go that is a connection error with no response, as a refusal is, and
//! sim learns who tried. A hung server (a wedged process, a black-holed network) is not
//! modelled: clients would wait out their own read timeouts (kube-rs: 295 s).
//!
//! **Who is a client.** The `User-Agent` header, as kube-apiserver's audit log records it
//! (client-go sends `kube-scheduler/v1.32.5 (linux/amd64) kubernetes/...`; our binaries send
//! `telemesh-agent/<version> (<node>)`). Requests to sim's own `/sim/` endpoints are neither
//! faulted nor counted: they are how a test or a person drives sim.

mod admission;
pub mod clients;
pub mod http;
pub mod serve;
mod switch;

pub use admission::Admission;
pub use clients::ClientCounts;
pub use switch::{FAULTS_PATH, Fault, Faults, Switch};
