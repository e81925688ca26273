//! The decisions Telemesh's agent, coordinator and simulator share, as pure functions and
//! types: CRD types, policy evaluation, the reward model, scavenger and action decisions, fit,
//! the extender's wire types, the gossip state schema and its encodings, wire messages. No
//! runtime, transport or kube client (`scripts/pure-core.sh` keeps it so): the plumbing the
//! binaries share, the gossip member included, is `telemesh-runtime`.

pub mod action;
#[cfg(test)]
mod crd_parity;
pub mod extender;
pub mod fit;
pub mod go;
pub mod gossip;
pub mod metric;
pub mod pod;
pub mod policy;
pub mod reward;
pub mod scavenge;
pub mod selector;
#[cfg(any(test, feature = "testsuite"))]
pub mod testing;
pub mod wire;
