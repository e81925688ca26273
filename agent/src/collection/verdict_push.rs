//! Which publications go to the coordinators at once. Published metrics reach the coordinator
//! replicas by gossip's epidemic: p99 1.3-1.8 s to both replicas at 10-1,000 members with 1 s
//! rounds (docs/scale.md, "Freshness, measured"). Most changes only move a prioritize score and
//! can wait for it. A change that flips whether this node breaks a policy's dontschedule rules
//! flips the extender's filter answer for the node, so the collection loop starts an exchange
//! with each live observer right after publishing it
//! ([`GossipMember::push_to_observers`](telemesh_runtime::gossip::GossipMember::push_to_observers)):
//! one exchange per replica per flip, and the filter reflects the change one round trip after
//! the collection that read it.
//!
//! Bursts: a policy edit is not a flip (the replicas re-evaluate every node on it themselves),
//! so it never makes the whole cluster push at once. Many nodes crossing a threshold in the same
//! second (a cluster-wide load swing) each push once; a replica serves the exchanges one at a
//! time, and what its socket's receive buffer cannot hold is dropped and reaches it by the rounds
//! instead, so a burst delays, and never loses, state.
//!
//! The verdicts are taken on the values as published (after the deadband), which is what the
//! replicas' filter reads. They are a hint for when to push, nothing more: a wrong guess costs
//! one exchange or leaves the change to the epidemic, which delivers it anyway.
//!
//! A metric this node stops publishing is pushed too, whether or not it flips a verdict: its
//! removal must leave every replica's view within the freshness target, and the epidemic alone
//! takes longer (docs/scale.md, "Metric removal"). Removals are rare (a source that stops
//! naming a series), so this costs an exchange per replica now and then.
//!
//! The same compiled policies give the publisher its [`Targets`]: the deadband never holds back
//! a move across one (`crate::collection::publish`).

use std::sync::Arc;

use kube::runtime::reflector::Store;
use telemesh_core::policy::{Metrics, Policy, TASPolicy, Targets, Unknown};

use crate::watch::policies::Compiled;

/// The policies as of the last [`VerdictWatch::refresh`], their targets, and the policies whose
/// dontschedule rules this node broke at the last publication.
#[derive(Debug, Default)]
pub struct VerdictWatch {
    compiled: Compiled,
    /// The compiled policies of the last refresh (the same `Arc`s while none changes).
    policies: Vec<Arc<Policy>>,
    /// Whether they changed since the last [`Self::flipped`].
    policies_changed: bool,
    targets: Targets,
    breaking: Vec<String>,
}

impl VerdictWatch {
    /// Reads the policies now; call it once per collection, before [`Self::targets`] and
    /// [`Self::flipped`]. Recompiles only what changed.
    pub fn refresh(&mut self, policies: &Store<TASPolicy>) {
        let current: Vec<Arc<Policy>> = self
            .compiled
            .refresh(policies)
            .into_iter()
            .map(|(_, p)| p)
            .collect();
        let same = current.len() == self.policies.len()
            && current
                .iter()
                .zip(&self.policies)
                .all(|(a, b)| Arc::ptr_eq(a, b));
        if !same {
            self.targets = Targets::from_rules(current.iter().flat_map(|p| p.threshold_rules()));
            self.policies = current;
            self.policies_changed = true;
        }
    }

    /// The targets of the policies' threshold rules, as of the last [`Self::refresh`].
    pub fn targets(&self) -> &Targets {
        &self.targets
    }

    /// Whether the published values flipped a dontschedule verdict since the last call, under
    /// the policies of the last [`Self::refresh`]. A change of the policies themselves is not a
    /// flip: the replicas watch the policies and re-evaluate every node at once, and one policy
    /// edit would otherwise have every node in the cluster push in the same second.
    pub fn flipped(&mut self, published: &impl Metrics, unknown: Unknown) -> bool {
        let breaking =
            breaking_dont_schedule(self.policies.iter().map(|p| &**p), published, unknown);
        let flipped = !std::mem::take(&mut self.policies_changed) && breaking != self.breaking;
        self.breaking = breaking;
        flipped
    }
}

/// The policies (`namespace/name`, in the order given) whose dontschedule rules `values` break.
pub fn breaking_dont_schedule<'p>(
    policies: impl IntoIterator<Item = &'p Policy>,
    values: &impl Metrics,
    unknown: Unknown,
) -> Vec<String> {
    policies
        .into_iter()
        .filter(|p| {
            p.dont_schedule
                .as_ref()
                .is_some_and(|rules| rules.evaluate(values, unknown).violated)
        })
        .map(Policy::key)
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::BTreeMap;

    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;

    use super::*;

    fn policy(name: &str, strategies: &str) -> TASPolicy {
        telemesh_core::testing::tas_policy("default", name, strategies)
    }

    const DONT_SCHEDULE_LOAD: &str = "    dontschedule:\n      rules:\n      \
        - {metricname: node_load1, operator: GreaterThan, target: 8}\n";
    const DESCHEDULE_LOAD: &str = "    deschedule:\n      rules:\n      \
        - {metricname: load1, operator: GreaterThan, target: 8}\n";

    fn values(load1: Option<f64>) -> BTreeMap<String, f64> {
        load1
            .map(|v| ("node_load1".to_owned(), v))
            .into_iter()
            .collect()
    }

    #[test]
    fn only_dontschedule_rules_count() {
        let filter = Policy::compile(&policy("filter", DONT_SCHEDULE_LOAD));
        let evict = Policy::compile(&policy("evict", DESCHEDULE_LOAD));
        let high = values(Some(20.0));
        assert_eq!(
            breaking_dont_schedule([&filter, &evict], &high, Unknown::NotViolating),
            ["default/filter"]
        );
        let low = values(Some(1.0));
        assert!(breaking_dont_schedule([&filter, &evict], &low, Unknown::NotViolating).is_empty());
        // A node that stops publishing the metric breaks the rule only if unknown means so.
        let none = values(None);
        assert!(breaking_dont_schedule([&filter], &none, Unknown::NotViolating).is_empty());
        assert_eq!(
            breaking_dont_schedule([&filter], &none, Unknown::Violating),
            ["default/filter"]
        );
    }

    #[test]
    fn a_flip_is_a_change_of_verdict_not_of_value() {
        let (store, mut writer) = reflector::store::<TASPolicy>();
        writer.apply_watcher_event(&Event::Apply(policy("filter", DONT_SCHEDULE_LOAD)));
        let mut watch = VerdictWatch::default();
        let flipped = |watch: &mut VerdictWatch, load: f64| {
            watch.refresh(&store);
            watch.flipped(&values(Some(load)), Unknown::NotViolating)
        };
        let flips: Vec<bool> = [1.0, 2.0, 20.0, 25.0, 3.0, 3.0]
            .into_iter()
            .map(|load| flipped(&mut watch, load))
            .collect();
        assert_eq!(flips, [false, false, true, false, true, false]);
        // A new policy the node breaks is no flip: every replica re-evaluates every node on the
        // policy change itself. The next value that flips it is.
        writer.apply_watcher_event(&Event::Apply(policy(
            "strict",
            "    dontschedule:\n      rules:\n      \
             - {metricname: node_load1, operator: GreaterThan, target: 2}\n",
        )));
        assert!(!flipped(&mut watch, 3.0));
        assert!(!flipped(&mut watch, 3.5));
        assert!(flipped(&mut watch, 1.0));
        // The targets follow the policies: both rules' thresholds.
        let load = telemesh_core::metric::MetricName::new("node_load1").unwrap();
        assert!(watch.targets().crossed(&load, 1.9, 2.1));
        assert!(watch.targets().crossed(&load, 7.9, 8.1));
        assert!(!watch.targets().crossed(&load, 3.0, 7.0));
    }
}
