//! The decisions Telemesh's agent, coordinator and simulator share: CRD types, policy
//! evaluation, the reward model, scavenger and action decisions, fit, the extender's wire types,
//! the gossip state schema and its encodings, wire messages. The plumbing the binaries share
//! (CLI groups, logging, the kube client, the HTTP door, QUIC, TLS reload) is `telemesh-runtime`;
//! the gossip member and its sealed transport still live here, in [`gossip`], until they follow.

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
pub mod reload;
pub mod reward;
pub mod scavenge;
pub mod selector;
pub mod testing;
pub mod wire;
