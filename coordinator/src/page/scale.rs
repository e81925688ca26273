//! Which end of a metric's scale is worse, by the rules that name it: the direction of the
//! live page's value bars. Pure.
//!
//! A rule that refuses or evicts (`dontschedule`, `deschedule`) says its side of the target is
//! worse: `LessThan` makes low values worse, `GreaterThan` high ones. A `scheduleonmetric` rule
//! says which end the extender prefers: `GreaterThan` (larger is better) makes low values worse,
//! `LessThan` high ones. `Equals` points neither way, and `labeling` rules only describe the
//! node, so neither counts. Rules pointing both ways make the direction [`Worse::Unclear`]; a
//! metric no rule points on has no direction at all, and the page shades its bars neutrally.

use serde::Serialize;
use telemesh_core::metric::MetricName;
use telemesh_core::policy::{Operator, Policy, Rule, StrategyKind};

/// The worse end of a metric's scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Worse {
    /// Lower values are worse.
    Low,
    /// Higher values are worse.
    High,
    /// Rules point both ways.
    Unclear,
}

/// A metric's direction and the rules it comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Scale {
    /// The worse end.
    pub worse: Worse,
    /// The rules that point, `ns/p dontschedule: node_metric LessThan 10`.
    pub rules: Vec<String>,
}

/// The direction of `metric`'s scale by every rule of `policies` that names it (full name or
/// without `node_`); `None` when no rule points either way.
pub fn scale(metric: &MetricName, policies: &[&Policy]) -> Option<Scale> {
    let mut worse: Option<Worse> = None;
    let mut rules = Vec::new();
    for policy in policies {
        let strategies = [
            (StrategyKind::DontSchedule, policy.dont_schedule.as_ref()),
            (StrategyKind::Deschedule, policy.deschedule.as_ref()),
        ];
        let judging = strategies.into_iter().flat_map(|(kind, set)| {
            set.into_iter()
                .flat_map(move |s| &s.rules)
                .map(move |r| (kind, r))
        });
        let preferring = policy
            .schedule_on_metric
            .iter()
            .map(|r| (StrategyKind::ScheduleOnMetric, r));
        for (kind, rule) in judging.chain(preferring) {
            if !metric.answers_to(&rule.metric) {
                continue;
            }
            let Some(end) = worse_end(kind, rule) else {
                continue;
            };
            worse = Some(match worse {
                Some(w) if w != end => Worse::Unclear,
                _ => end,
            });
            rules.push(format!("{} {kind}: {rule}", policy.key()));
        }
    }
    worse.map(|worse| Scale { worse, rules })
}

/// The end `rule` in a `kind` strategy makes worse, if any.
fn worse_end(kind: StrategyKind, rule: &Rule) -> Option<Worse> {
    match (kind, rule.operator) {
        (_, Operator::Equals) | (StrategyKind::Labeling, _) => None,
        (StrategyKind::ScheduleOnMetric, Operator::GreaterThan) => Some(Worse::Low),
        (StrategyKind::ScheduleOnMetric, Operator::LessThan) => Some(Worse::High),
        (_, Operator::LessThan) => Some(Worse::Low),
        (_, Operator::GreaterThan) => Some(Worse::High),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use telemesh_core::policy::TASPolicy;

    use super::*;

    fn policy(name: &str, strategies: &str) -> Policy {
        let yaml = format!(
            "apiVersion: telemetry.intel.com/v1alpha1\nkind: TASPolicy\n\
             metadata: {{ name: {name}, namespace: ns }}\nspec:\n  strategies:\n{strategies}"
        );
        let raw: TASPolicy = serde_yaml_ng::from_str(&yaml).unwrap();
        Policy::compile(&raw)
    }

    fn rule(strategy: &str, metric: &str, op: &str) -> String {
        format!(
            "    {strategy}:\n      rules: [{{ metricname: {metric}, operator: {op}, target: 10 }}]\n"
        )
    }

    fn name(s: &str) -> MetricName {
        MetricName::new(s).unwrap()
    }

    #[test]
    fn tas_example_makes_low_node_metric_worse() {
        let raw: TASPolicy = serde_yaml_ng::from_str(include_str!(
            "../../../deploy/examples/scheduling-policy.yaml"
        ))
        .unwrap();
        let example = Policy::compile(&raw);
        let s = scale(&name("node_metric"), &[&example]).unwrap();
        assert_eq!(s.worse, Worse::Low);
        // deschedule's Equals and labeling's GreaterThan do not point.
        assert_eq!(
            s.rules,
            [
                "health-metric-demo/scheduling-policy dontschedule: node_metric LessThan 10",
                "health-metric-demo/scheduling-policy scheduleonmetric: node_metric GreaterThan 0",
            ]
        );
    }

    #[test]
    fn refusing_and_evicting_rules_make_their_side_worse() {
        let p = policy("p", &rule("dontschedule", "temp", "GreaterThan"));
        assert_eq!(scale(&name("node_temp"), &[&p]).unwrap().worse, Worse::High);
        let p = policy("p", &rule("deschedule", "free", "LessThan"));
        assert_eq!(scale(&name("free"), &[&p]).unwrap().worse, Worse::Low);
    }

    #[test]
    fn scheduleonmetric_makes_the_end_it_does_not_prefer_worse() {
        let p = policy("p", &rule("scheduleonmetric", "free", "GreaterThan"));
        assert_eq!(scale(&name("free"), &[&p]).unwrap().worse, Worse::Low);
        let p = policy("p", &rule("scheduleonmetric", "load", "LessThan"));
        assert_eq!(scale(&name("load"), &[&p]).unwrap().worse, Worse::High);
    }

    #[test]
    fn rules_pointing_both_ways_are_unclear() {
        let a = policy("a", &rule("dontschedule", "temp", "GreaterThan"));
        let b = policy("b", &rule("deschedule", "temp", "LessThan"));
        let s = scale(&name("temp"), &[&a, &b]).unwrap();
        assert_eq!(s.worse, Worse::Unclear);
        assert_eq!(s.rules.len(), 2);
    }

    #[test]
    fn equals_labeling_and_other_metrics_give_no_direction() {
        let p = policy(
            "p",
            &format!(
                "{}    labeling:\n      rules: [{{ metricname: temp, operator: GreaterThan, target: 1, labels: [\"a=b\"] }}]\n{}",
                rule("deschedule", "temp", "Equals"),
                rule("dontschedule", "other", "LessThan"),
            ),
        );
        assert_eq!(scale(&name("temp"), &[&p]), None);
        assert_eq!(scale(&name("node_temp"), &[]), None);
    }
}
