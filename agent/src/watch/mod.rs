//! The agent's watches of the API server: its node's pods, the TASPolicies, and its own Node's
//! metadata. Each keeps a store the loops read; none writes.

pub mod node_watch;
pub mod pods;
pub mod policies;
