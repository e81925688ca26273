//! Workload actions: WAM's methods as typed requests ([`params`]), the `WorkloadAction` custom
//! resource that stores and tracks each one ([`crd`]), and the pure rules the coordinator's RPC
//! front end and executor share (which workload an action serialises on, arrival order,
//! idempotent object names).
//!
//! No API calls here: the coordinator's `actions` module accepts requests, runs them and
//! records every step in the object's status.

pub mod crd;
pub mod params;
pub mod placement;

pub use crd::{
    ActionPhase, CallbackStatus, ObjectRef, Placement, PodRecord, ReplicaChange, Requester, Step,
    StepState, WorkloadAction, WorkloadActionSpec, WorkloadActionStatus,
};
pub use params::{
    ActionRequest, InvalidParams, Method, PodRef, ResourceUpdate, ScaleTarget, WorkloadKind,
    WorkloadRef,
};

/// The annotation on a pod an action created: the action's name, so a person (or `kubectl get
/// pods -o yaml`) can tell why a pod is there (WAM: `example.com/scheduling-suggestion-id`).
pub const CREATED_BY_ACTION: &str = "telemesh.io/created-by-action";

/// The name of the object for a request with an idempotency key: a hash of who asked, in which
/// namespace, with which key. The API server refuses a second object of the same name, so two
/// replicas receiving the same request at once still make one action.
pub fn idempotent_name(namespace: &str, requester: &str, key: &str) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for part in [namespace, requester, key] {
        ctx.update(&(part.len() as u64).to_be_bytes());
        ctx.update(part.as_bytes());
    }
    let digest = ctx.finish();
    let hex: String = digest.as_ref()[..10]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("wa-{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idempotent_names_differ_by_every_part_and_are_valid_object_names() {
        let a = idempotent_name("ul", "alice", "k1");
        assert_eq!(a, idempotent_name("ul", "alice", "k1"));
        assert_ne!(a, idempotent_name("ul", "bob", "k1"));
        assert_ne!(a, idempotent_name("default", "alice", "k1"));
        assert_ne!(a, idempotent_name("ul", "alice", "k2"));
        // Length-prefixed parts: moving a character between parts changes the name.
        assert_ne!(
            idempotent_name("ab", "c", "k"),
            idempotent_name("a", "bc", "k")
        );
        assert_eq!(a.len(), 23);
        assert!(
            a.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        );
    }
}
