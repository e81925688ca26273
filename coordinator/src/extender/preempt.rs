//! preempt: the scheduler's candidate victims, answered by UID, without the nodes the pod's
//! policy refuses, after the victim ranker's say. Pure: which nodes are refused is the
//! filter's decision, made by the caller.

use std::collections::{BTreeMap, BTreeSet};

use telemesh_core::extender::{ExtenderPreemptionArgs, ExtenderPreemptionResult, MetaVictims};
use telemesh_core::scavenge::victims::Loss;

/// Where scavenger-aware preemption plugs in: it may replace each node's victims (sparing
/// scavenger pods with the most unsaved work), or drop a node to take it out of the
/// candidates. [`KeepVictims`] leaves the scheduler's choice as it is;
/// [`super::unsaved::UnsavedWork`] ranks by unsaved work.
pub trait VictimRanker: Send + Sync {
    /// Adjusts `victims` (by node, as UIDs; the request is `args`, whose full victims, when the
    /// scheduler sent them, carry the pods' labels) and says what it did.
    fn rank(
        &self,
        args: &ExtenderPreemptionArgs,
        victims: &mut BTreeMap<String, MetaVictims>,
    ) -> RankEffect;
}

/// What a [`VictimRanker`] changed in one answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RankEffect {
    /// Scheduler-chosen victims swapped out, over all nodes.
    pub spared: usize,
    /// Candidate nodes dropped.
    pub nodes_dropped: usize,
    /// Unsaved work the swaps saved, core-microseconds, summed over nodes.
    pub loss_avoided: Loss,
}

impl RankEffect {
    /// Whether the answer differs from the scheduler's.
    pub fn changed(&self) -> bool {
        self.spared > 0 || self.nodes_dropped > 0
    }
}

/// The scheduler's victims, unchanged (`--scavenger-victims scheduler`).
#[derive(Debug, Clone, Copy, Default)]
pub struct KeepVictims;

impl VictimRanker for KeepVictims {
    fn rank(
        &self,
        _: &ExtenderPreemptionArgs,
        _: &mut BTreeMap<String, MetaVictims>,
    ) -> RankEffect {
        RankEffect::default()
    }
}

/// Returns the candidate nodes of a preemption request, in either form.
pub fn candidate_nodes(args: &ExtenderPreemptionArgs) -> impl Iterator<Item = &str> {
    let meta = args.node_name_to_meta_victims.iter().flat_map(|m| m.keys());
    // The scheduler sends one form; full victims only when the meta form is absent.
    let full = args
        .node_name_to_victims
        .iter()
        .filter(|_| args.node_name_to_meta_victims.is_none())
        .flat_map(|m| m.keys());
    meta.chain(full).map(String::as_str)
}

/// Answers a preemption request: victims by UID (full victims are reduced to their UIDs) on
/// every candidate node except the `refused` ones, after `ranker` had its say. A node left out
/// of the reply is no longer a candidate: kube-scheduler neither evicts nor nominates there.
pub fn preempt(
    args: &ExtenderPreemptionArgs,
    refused: &BTreeSet<&str>,
    ranker: &dyn VictimRanker,
) -> (ExtenderPreemptionResult, RankEffect) {
    let mut victims: BTreeMap<String, MetaVictims> =
        match (&args.node_name_to_meta_victims, &args.node_name_to_victims) {
            (Some(meta), _) => meta
                .iter()
                .filter(|(node, _)| !refused.contains(node.as_str()))
                .map(|(node, v)| (node.clone(), v.clone()))
                .collect(),
            (None, Some(full)) => full
                .iter()
                .filter(|(node, _)| !refused.contains(node.as_str()))
                .map(|(node, v)| (node.clone(), v.to_meta()))
                .collect(),
            (None, None) => BTreeMap::new(),
        };
    let effect = ranker.rank(args, &mut victims);
    (
        ExtenderPreemptionResult {
            node_name_to_meta_victims: Some(victims),
        },
        effect,
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use telemesh_core::extender::{MetaPod, Victims};

    use super::*;

    fn meta(uid: &str) -> MetaVictims {
        MetaVictims {
            pods: vec![MetaPod { uid: uid.into() }],
            num_pdb_violations: 0,
        }
    }

    #[test]
    fn refused_nodes_are_dropped_in_both_forms() {
        let cached = ExtenderPreemptionArgs {
            pod: None,
            node_name_to_victims: None,
            node_name_to_meta_victims: Some(BTreeMap::from([
                ("hot".to_owned(), meta("a")),
                ("ok".to_owned(), meta("b")),
            ])),
        };
        assert_eq!(candidate_nodes(&cached).collect::<Vec<_>>(), ["hot", "ok"]);
        let refused = BTreeSet::from(["hot"]);
        let (r, _) = preempt(&cached, &refused, &KeepVictims);
        assert_eq!(
            r.node_name_to_meta_victims,
            Some(BTreeMap::from([("ok".to_owned(), meta("b"))]))
        );

        let mut victim = Pod::default();
        victim.metadata.uid = Some("c".into());
        let full = ExtenderPreemptionArgs {
            pod: None,
            node_name_to_victims: Some(BTreeMap::from([
                (
                    "hot".to_owned(),
                    Victims {
                        pods: vec![victim.clone()],
                        num_pdb_violations: 0,
                    },
                ),
                (
                    "ok".to_owned(),
                    Victims {
                        pods: vec![victim],
                        num_pdb_violations: 0,
                    },
                ),
            ])),
            node_name_to_meta_victims: None,
        };
        assert_eq!(candidate_nodes(&full).collect::<Vec<_>>(), ["hot", "ok"]);
        let (r, _) = preempt(&full, &refused, &KeepVictims);
        assert_eq!(
            r.node_name_to_meta_victims,
            Some(BTreeMap::from([("ok".to_owned(), meta("c"))]))
        );
        let (all, _) = preempt(&full, &BTreeSet::from(["hot", "ok"]), &KeepVictims);
        assert_eq!(
            all.node_name_to_meta_victims,
            Some(BTreeMap::new()),
            "every node refused: an empty map, which stops preemption"
        );
    }
}
