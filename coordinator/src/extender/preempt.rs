//! preempt: the scheduler's candidate victims, answered by UID. Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use telemesh_core::extender::{ExtenderPreemptionArgs, ExtenderPreemptionResult, MetaVictims};

/// Where scavenger-aware preemption plugs in: it may reorder, drop or keep each node's victims
/// (sparing scavenger pods with the most unsaved work), or drop a node to take it out of the
/// candidates. [`KeepVictims`] leaves the scheduler's choice as it is.
pub trait VictimRanker: Send + Sync {
    /// Adjusts the victims per node for `pod`.
    fn rank(&self, pod: Option<&Pod>, victims: &mut BTreeMap<String, MetaVictims>);
}

/// The scheduler's victims, unchanged.
#[derive(Debug, Clone, Copy, Default)]
pub struct KeepVictims;

impl VictimRanker for KeepVictims {
    fn rank(&self, _: Option<&Pod>, _: &mut BTreeMap<String, MetaVictims>) {}
}

/// Answers a preemption request: victims by UID (full victims are reduced to their UIDs), after
/// `ranker` had its say.
pub fn preempt(
    args: &ExtenderPreemptionArgs,
    ranker: &dyn VictimRanker,
) -> ExtenderPreemptionResult {
    let mut victims: BTreeMap<String, MetaVictims> =
        match (&args.node_name_to_meta_victims, &args.node_name_to_victims) {
            (Some(meta), _) => meta.clone(),
            (None, Some(full)) => full
                .iter()
                .map(|(node, v)| (node.clone(), v.to_meta()))
                .collect(),
            (None, None) => BTreeMap::new(),
        };
    ranker.rank(args.pod.as_ref(), &mut victims);
    ExtenderPreemptionResult {
        node_name_to_meta_victims: Some(victims),
    }
}
