//! The CRD objects as the watches receive them (JSON): TASPolicy compiled into a policy,
//! WorkloadAction's request read from its spec, ScavengerJob's durations and the Job it makes.
//! The first byte picks the kind, the rest is the object.
#![no_main]

use libfuzzer_sys::fuzz_target;
use telemesh_core::action::crd::WorkloadAction;
use telemesh_core::action::params::{ActionRequest, Method};
use telemesh_core::policy::Policy;
use telemesh_core::policy::crd::TASPolicy;
use telemesh_core::scavenge::controller::job_for;
use telemesh_core::scavenge::crd::ScavengerJob;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 3 {
        0 => {
            if let Ok(policy) = serde_json::from_slice::<TASPolicy>(rest) {
                let _ = Policy::compile(&policy);
            }
        }
        1 => {
            // As the executor reads an action (`request_of`).
            if let Ok(action) = serde_json::from_slice::<WorkloadAction>(rest)
                && let Some(method) = Method::parse(&action.spec.method)
            {
                let _ = ActionRequest::parse(method, &action.spec.params);
            }
        }
        _ => {
            if let Ok(sj) = serde_json::from_slice::<ScavengerJob>(rest) {
                let _ = sj.spec.checkpoint_interval();
                let _ = sj.spec.minimum_run();
                let _ = job_for(&sj, 0);
            }
        }
    }
});
