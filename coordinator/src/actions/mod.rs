//! Workload actions: WAM's JSON-RPC API made durable, exactly once and safe.
//!
//! A caller's request arrives on `POST /rpc` of any replica, is validated
//! ([`telemesh_core::action::ActionRequest`]) and stored as a `WorkloadAction` object, whose name
//! is the action id returned at once. The elected leader's executor runs stored actions step by
//! step, one at a time per workload in arrival order, recording each step in the object's status
//! before the next starts; every replica's extender enforces the placement an action asks for.

pub mod placements;
