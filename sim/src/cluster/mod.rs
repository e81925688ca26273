//! The cluster around the API server: workload controllers, a scheduler that calls extenders,
//! kubelet stand-ins per simulated node and scripted telemetry. They talk to the server through
//! the kube client, as real components do, so what they do is what a client sees.

pub mod container_start;
pub mod controllers;
pub mod http;
pub mod kubelet;
pub mod machines;
pub(crate) mod notify;
pub mod pod_state;
pub mod scenario;
pub mod scheduler;
pub mod service;
pub mod workload;

/// Pod-to-node fit, shared with the coordinator's `action.Bind` check.
pub use telemesh_core::fit;
