//! The cluster around the API server: workload controllers, a scheduler that calls extenders,
//! kubelet stand-ins per simulated node and scripted telemetry. They talk to the server through
//! the kube client, as real components do, so what they do is what a client sees.

pub mod controllers;
pub mod fit;
pub mod http;
pub mod kubelet;
pub mod scenario;
pub mod scheduler;
