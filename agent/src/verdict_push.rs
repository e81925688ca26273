//! Which publications go to the coordinators at once. Published metrics reach the coordinator
//! replicas by gossip's epidemic: p99 1.3-1.8 s to both replicas at 10-1,000 members with 1 s
//! rounds (docs/scale.md, "End-to-end freshness"). Most changes only move a prioritize score and
//! can wait for it. A change that flips whether this node breaks a policy's dontschedule rules
//! flips the extender's filter answer for the node, so the collection loop starts an exchange
//! with each live observer right after publishing it
//! ([`GossipMember::push_to_observers`](telemesh_core::gossip::GossipMember::push_to_observers)):
//! one exchange per replica per flip, and the filter reflects the change one round trip after
//! the collection that read it.
//!
//! The verdicts are taken on the values as published (after the deadband), which is what the
//! replicas' filter reads. They are a hint for when to push, nothing more: a wrong guess costs
//! one exchange or leaves the change to the epidemic, which delivers it anyway.

use kube::runtime::reflector::Store;
use telemesh_core::policy::{Metrics, Policy, TASPolicy, Unknown};

use crate::policies::Compiled;

/// Remembers the policies whose dontschedule rules this node broke at the last publication.
#[derive(Debug, Default)]
pub struct VerdictWatch {
    compiled: Compiled,
    breaking: Vec<String>,
}

impl VerdictWatch {
    /// Whether the dontschedule verdicts on `published` differ from the last call's (the first
    /// call compares with breaking none, which is what readers assume of a node they just met).
    pub fn flipped(
        &mut self,
        policies: &Store<TASPolicy>,
        published: &impl Metrics,
        unknown: Unknown,
    ) -> bool {
        let current = self.compiled.refresh(policies);
        let breaking =
            breaking_dont_schedule(current.iter().map(|(_, p)| &**p), published, unknown);
        let flipped = breaking != self.breaking;
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
        serde_yaml_ng::from_str(&format!(
            "apiVersion: telemetry.intel.com/v1alpha1\nkind: TASPolicy\n\
             metadata: {{name: {name}, namespace: default}}\nspec:\n  strategies:\n{strategies}"
        ))
        .unwrap()
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
        let flips: Vec<bool> = [1.0, 2.0, 20.0, 25.0, 3.0, 3.0]
            .into_iter()
            .map(|load| watch.flipped(&store, &values(Some(load)), Unknown::NotViolating))
            .collect();
        assert_eq!(flips, [false, false, true, false, true, false]);
        // A new policy the node breaks is a flip too: the replicas' filter answer changes.
        writer.apply_watcher_event(&Event::Apply(policy(
            "strict",
            "    dontschedule:\n      rules:\n      \
             - {metricname: node_load1, operator: GreaterThan, target: 2}\n",
        )));
        assert!(watch.flipped(&store, &values(Some(3.0)), Unknown::NotViolating));
    }
}
