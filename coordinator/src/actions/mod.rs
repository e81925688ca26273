//! Workload actions: WAM's JSON-RPC API made durable, exactly once and safe.
//!
//! A caller's request arrives on `POST /rpc` of any replica, is validated
//! ([`telemesh_core::action::ActionRequest`]) and stored as a `WorkloadAction` object, whose name
//! is the action id returned at once. The elected leader's executor runs stored actions step by
//! step, one at a time per workload in arrival order, recording each step in the object's status
//! before the next starts; every replica's extender enforces the placement an action asks for.
//!
//! This replica's front half: [`rpc`] (the `/rpc` endpoint and its two dialects), [`accept`]
//! (storing, reading and waiting for actions), [`auth`] (TokenReview and SubjectAccessReview,
//! also guarding the telemetry API), [`fit`] (Bind's synchronous check) and [`callback`]
//! (telling the caller an action ended). [`executor`] runs actions on the leader;
//! [`placements`] keeps every replica's view of the
//! placements actions ask for, and [`board`] the action queue the live page shows.

pub mod accept;
pub mod auth;
pub mod board;
pub mod callback;
pub mod executor;
pub mod fit;
pub mod placements;
pub mod rpc;
