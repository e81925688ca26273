use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use super::*;
use crate::gossip::{MetricValue, NodeState};
use crate::metric::MetricName;

/// The seed's two policy files, verbatim (telemetry-aware-scheduling README).
pub(crate) const SCHEDULING_POLICY: &str =
    include_str!("../../../deploy/examples/scheduling-policy.yaml");
pub(crate) const MULTIRULES_POLICY: &str =
    include_str!("../../../deploy/examples/multirules-policy.yaml");

fn compile(yaml: &str) -> Policy {
    Policy::compile(&serde_yaml_ng::from_str::<TASPolicy>(yaml).unwrap())
}

fn metrics(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

fn rule(metric: &str, operator: Operator, target: f64) -> Rule {
    Rule {
        metric: metric.into(),
        operator,
        target,
    }
}

fn policy_with(strategies: &str) -> Policy {
    compile(&format!(
        "metadata: {{name: p, namespace: ns}}\nspec:\n  strategies:\n{strategies}"
    ))
}

#[test]
fn seed_policies_compile_without_problems() {
    let p = compile(SCHEDULING_POLICY);
    assert_eq!(p.problems, vec![]);
    assert_eq!(p.key(), "health-metric-demo/scheduling-policy");
    assert_eq!(p.violator_label_key(), "scheduling-policy");
    assert_eq!(
        p.deschedule.as_ref().unwrap().rules,
        vec![rule("node_metric", Operator::Equals, -1.0)]
    );
    assert_eq!(
        p.schedule_on_metric,
        Some(rule("node_metric", Operator::GreaterThan, 0.0))
    );
    let labeling = p.labeling.as_ref().unwrap();
    assert_eq!(
        labeling.rules[0].labels,
        vec![
            ("label1".into(), "foo".into()),
            ("label2".into(), "bar".into())
        ]
    );
    let m = compile(MULTIRULES_POLICY);
    assert_eq!(m.problems, vec![]);
    assert_eq!(
        m.deschedule.as_ref().unwrap().logical,
        LogicalOperator::AllOf
    );
    assert_eq!(
        m.dont_schedule.as_ref().unwrap().logical,
        LogicalOperator::AnyOf
    );
    assert_eq!(m.labeling, None);
}

#[test]
fn every_operator_with_fractional_targets() {
    let cases = [
        (Operator::Equals, 0.5, 0.5, true),
        (Operator::Equals, 0.5000001, 0.5, false),
        (Operator::LessThan, 0.84, 0.85, true),
        (Operator::LessThan, 0.85, 0.85, false),
        (Operator::LessThan, 0.86, 0.85, false),
        (Operator::GreaterThan, 0.86, 0.85, true),
        (Operator::GreaterThan, 0.85, 0.85, false),
        (Operator::GreaterThan, -2.0, -1.5, false),
        (Operator::Equals, -1.0, -1.0, true),
    ];
    for (op, value, target, violated) in cases {
        let set = RuleSet {
            logical: LogicalOperator::AnyOf,
            rules: vec![rule("m", op, target)],
        };
        let v = set.evaluate(&metrics(&[("m", value)]), Unknown::NotViolating);
        assert_eq!(v.violated, violated, "{value} {op} {target}");
    }
}

#[test]
fn any_of_and_all_of_combine_rules() {
    let p = compile(MULTIRULES_POLICY);
    let desched = p.deschedule.as_ref().unwrap(); // allOf
    let dont = p.dont_schedule.as_ref().unwrap(); // anyOf
    let hot_full = metrics(&[("temperature", 90.0), ("freeRAM", 100.0)]);
    let hot_only = metrics(&[("temperature", 90.0), ("freeRAM", 500.0)]);
    let cool = metrics(&[("temperature", 50.0), ("freeRAM", 500.0)]);
    let u = Unknown::NotViolating;
    assert!(desched.evaluate(&hot_full, u).violated);
    assert!(!desched.evaluate(&hot_only, u).violated);
    assert!(dont.evaluate(&hot_only, u).violated);
    assert!(!dont.evaluate(&cool, u).violated);
    let verdict = dont.evaluate(&hot_only, u);
    let names: Vec<_> = verdict
        .violating_rules()
        .map(|r| r.rule.metric.as_str())
        .collect();
    assert_eq!(names, ["temperature"]);
    assert_eq!(
        verdict.reason("health-metric-demo/multirules-policy", "dontschedule"),
        "policy health-metric-demo/multirules-policy dontschedule: temperature GreaterThan 80 (value 90)"
    );
}

#[test]
fn unknown_metrics_follow_the_setting() {
    let p = compile(MULTIRULES_POLICY);
    let dont = p.dont_schedule.as_ref().unwrap();
    let desched = p.deschedule.as_ref().unwrap();
    let partial = metrics(&[("temperature", 50.0)]);
    // Missing freeRAM: not violating by default (TAS), violating when configured.
    assert!(!dont.evaluate(&partial, Unknown::NotViolating).violated);
    assert!(dont.evaluate(&partial, Unknown::Violating).violated);
    assert_eq!(
        dont.evaluate(&partial, Unknown::NotViolating).rules[1].reading,
        Reading::Missing
    );
    // allOf with one known rule not violated stays unviolated either way.
    assert!(!desched.evaluate(&partial, Unknown::Violating).violated);
    let hot = metrics(&[("temperature", 95.0)]);
    assert!(!desched.evaluate(&hot, Unknown::NotViolating).violated);
    assert!(desched.evaluate(&hot, Unknown::Violating).violated);
}

#[test]
fn stale_gossip_values_are_unknown() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let mut state = NodeState::default();
    let name = MetricName::new("node_metric").unwrap();
    state.metrics.insert(
        name.clone(),
        MetricValue::new(&name, 5.0, now - Duration::from_secs(120)).unwrap(),
    );
    let temp = MetricName::new("node_temperature").unwrap();
    state.metrics.insert(
        temp.clone(),
        MetricValue::new(&temp, 95.0, now - Duration::from_secs(1)).unwrap(),
    );
    let readings = NodeReadings {
        state: &state,
        now,
        stale_after: Duration::from_secs(60),
    };
    assert_eq!(readings.reading("node_metric"), Reading::Stale(5.0));
    assert_eq!(readings.reading("metric"), Reading::Stale(5.0));
    // Policies name metrics as the adapter does, without `node_`.
    assert_eq!(readings.reading("temperature"), Reading::Fresh(95.0));
    assert_eq!(readings.reading("freeRAM"), Reading::Missing);
    let p = compile(SCHEDULING_POLICY);
    let dont = p.dont_schedule.as_ref().unwrap(); // node_metric LessThan 10
    assert!(!dont.evaluate(&readings, Unknown::NotViolating).violated);
    assert!(dont.evaluate(&readings, Unknown::Violating).violated);
    let fresh = NodeReadings {
        stale_after: Duration::from_secs(300),
        ..readings
    };
    assert!(dont.evaluate(&fresh, Unknown::NotViolating).violated);
}

#[test]
fn plain_maps_answer_with_or_without_the_node_prefix() {
    let m = metrics(&[("node_health_metric", 3.0), ("freeRAM", 7.0)]);
    assert_eq!(m.reading("health_metric"), Reading::Fresh(3.0));
    assert_eq!(m.reading("node_health_metric"), Reading::Fresh(3.0));
    assert_eq!(m.reading("node_freeRAM"), Reading::Fresh(7.0));
    assert_eq!(m.reading("other"), Reading::Missing);
}

#[test]
fn labeling_applies_labels_of_violated_rules_with_tie_rules() {
    let p = policy_with(
        r#"    labeling:
      rules:
      - {metricname: a, operator: GreaterThan, target: 10, labels: ["zone=a", "hot=true"]}
      - {metricname: b, operator: GreaterThan, target: 10, labels: ["zone=b"]}
      - {metricname: c, operator: LessThan, target: 5, labels: ["cold=c"]}
      - {metricname: d, operator: LessThan, target: 5, labels: ["cold=d"]}
"#,
    );
    assert_eq!(p.problems, vec![]);
    let labeling = p.labeling.as_ref().unwrap();
    let u = Unknown::NotViolating;
    // GreaterThan: the largest value wins the shared key.
    let (labels, verdict) = labeling.labels(
        "p",
        &metrics(&[("a", 20.0), ("b", 30.0), ("c", 1.0), ("d", 2.0)]),
        u,
    );
    assert!(verdict.violated);
    assert_eq!(
        labels,
        BTreeMap::from([
            (
                "telemetry.aware.scheduling.p/zone".to_owned(),
                "b".to_owned()
            ),
            (
                "telemetry.aware.scheduling.p/hot".to_owned(),
                "true".to_owned()
            ),
            // LessThan: the smallest value wins.
            (
                "telemetry.aware.scheduling.p/cold".to_owned(),
                "c".to_owned()
            ),
        ])
    );
    let (labels, _) = labeling.labels(
        "p",
        &metrics(&[("a", 40.0), ("b", 30.0), ("c", 3.0), ("d", 2.0)]),
        u,
    );
    assert_eq!(labels["telemetry.aware.scheduling.p/zone"], "a");
    assert_eq!(labels["telemetry.aware.scheduling.p/cold"], "d");
    // A tie keeps the earlier rule, every time.
    let (labels, _) = labeling.labels("p", &metrics(&[("a", 30.0), ("b", 30.0)]), u);
    assert_eq!(labels["telemetry.aware.scheduling.p/zone"], "a");
    assert!(!labels.contains_key("telemetry.aware.scheduling.p/cold"));
    // Nothing violated, no labels.
    let (labels, verdict) = labeling.labels("p", &metrics(&[("a", 1.0), ("c", 9.0)]), u);
    assert!(labels.is_empty());
    assert!(!verdict.violated);
}

#[test]
fn labeling_all_of_needs_every_rule() {
    let p = policy_with(
        r#"    labeling:
      logicalOperator: allOf
      rules:
      - {metricname: a, operator: GreaterThan, target: 10, labels: ["x=1"]}
      - {metricname: b, operator: GreaterThan, target: 10, labels: ["y=2"]}
"#,
    );
    let labeling = p.labeling.as_ref().unwrap();
    let u = Unknown::NotViolating;
    assert!(
        labeling
            .labels("p", &metrics(&[("a", 20.0), ("b", 1.0)]), u)
            .0
            .is_empty()
    );
    assert_eq!(
        labeling
            .labels("p", &metrics(&[("a", 20.0), ("b", 20.0)]), u)
            .0
            .len(),
        2
    );
}

#[test]
fn invalid_policies_are_reported_and_the_rest_still_works() {
    let p = policy_with(
        r#"    labeling:
      rules:
      - {metricname: a, operator: GreaterThan, target: 10, labels: ["k=1"]}
      - {metricname: b, operator: LessThan, target: 10, labels: ["k=2"]}
    dontschedule:
      rules:
      - {metricname: a, operator: Above, target: 10}
    deschedule:
      logicalOperator: noneOf
      rules:
      - {metricname: a, operator: GreaterThan, target: 10}
    scheduleonmetric:
      rules:
      - {metricname: a, operator: GreaterThan}
      - {metricname: b, operator: GreaterThan}
    spreadevenly:
      rules: []
"#,
    );
    assert_eq!(
        p.problems,
        vec![
            PolicyProblem::UnknownLogicalOperator {
                strategy: StrategyKind::Deschedule,
                value: "noneOf".into()
            },
            PolicyProblem::UnknownOperator {
                strategy: StrategyKind::DontSchedule,
                index: 0,
                value: "Above".into()
            },
            PolicyProblem::MixedOperators { key: "k".into() },
            PolicyProblem::ExtraScheduleRules(2),
            PolicyProblem::UnknownStrategy("spreadevenly".into()),
        ]
    );
    assert_eq!(p.deschedule, None);
    assert_eq!(p.dont_schedule, None);
    assert_eq!(p.labeling, None);
    assert_eq!(
        p.schedule_on_metric,
        Some(rule("a", Operator::GreaterThan, 0.0))
    );
    for problem in &p.problems {
        assert!(!problem.to_string().is_empty());
    }
}

#[test]
fn bad_labels_and_rules_are_reported() {
    let cases = [
        (r#"labels: ["novalue"]"#, "bad_label"),
        (r#"labels: ["a=b=c"]"#, "bad_label"),
        (r#"labels: ["Bad Key=x"]"#, "bad_label"),
        (r#"labels: ["k=value with space"]"#, "bad_label"),
        (r#"labels: ["k="]"#, "ok"),
    ];
    for (labels, expect) in cases {
        let p = policy_with(&format!(
            "    labeling:\n      rules:\n      - {{metricname: a, operator: GreaterThan, target: 1, {labels}}}\n"
        ));
        let got = match p.problems.first() {
            None => "ok",
            Some(PolicyProblem::BadLabel { .. }) => "bad_label",
            Some(other) => panic!("{labels}: {other}"),
        };
        assert_eq!(got, expect, "{labels}");
    }
    let p = policy_with("    deschedule:\n      rules: []\n");
    assert_eq!(
        p.problems,
        vec![PolicyProblem::NoRules(StrategyKind::Deschedule)]
    );
    let p = policy_with("    deschedule:\n      rules:\n      - {operator: Equals}\n");
    assert_eq!(
        p.problems,
        vec![PolicyProblem::NoMetric {
            strategy: StrategyKind::Deschedule,
            index: 0
        }]
    );
    let p = compile(
        "metadata: {name: Not_A.Label-, namespace: ns}\nspec:\n  strategies:\n    deschedule:\n      rules:\n      - {metricname: a, operator: Equals}\n",
    );
    assert_eq!(
        p.problems,
        vec![PolicyProblem::NameNotALabelKey("Not_A.Label-".into())]
    );
}

#[test]
fn label_key_syntax() {
    assert!(is_label_key("scheduling-policy"));
    assert!(is_label_key("telemetry.aware.scheduling.p/card0"));
    assert!(!is_label_key("telemetry.aware.scheduling.P/card0"));
    assert!(!is_label_key("/x"));
    assert!(!is_label_key(&"a".repeat(64)));
    assert!(is_label_value(""));
    assert!(!is_label_value("-x"));
}

mod scores {
    use super::super::score::{neutral, scores};
    use super::*;

    fn fresh(values: &[f64]) -> Vec<Reading> {
        values.iter().map(|v| Reading::Fresh(*v)).collect()
    }

    #[test]
    fn greater_than_scores_by_magnitude() {
        let r = rule("m", Operator::GreaterThan, 0.0);
        assert_eq!(
            scores(&r, &fresh(&[0.0, 50.0, 100.0, 25.0])),
            [Some(0), Some(5), Some(10), Some(3)]
        );
        // Near-equal values are near-equal scores, not 0 and 10.
        assert_eq!(scores(&r, &fresh(&[100.0, 101.0])), [Some(10), Some(10)]);
    }

    #[test]
    fn less_than_prefers_small_values() {
        let r = rule("m", Operator::LessThan, 0.0);
        assert_eq!(
            scores(&r, &fresh(&[0.2, 0.5, 0.9])),
            [Some(8), Some(4), Some(0)]
        );
    }

    #[test]
    fn equals_prefers_values_near_the_target() {
        let r = rule("m", Operator::Equals, 10.0);
        assert_eq!(
            scores(&r, &fresh(&[10.0, 15.0, 20.0, 0.0])),
            [Some(10), Some(5), Some(0), Some(0)]
        );
    }

    #[test]
    fn negative_values_equal_values_and_many_nodes_stay_in_range() {
        let r = rule("m", Operator::GreaterThan, 0.0);
        assert_eq!(scores(&r, &fresh(&[-10.0, -5.0])), [Some(0), Some(5)]);
        assert_eq!(scores(&r, &fresh(&[7.0, 7.0, 7.0])), [Some(10); 3]);
        let many: Vec<f64> = (0..5000).map(f64::from).collect();
        let s = scores(&r, &fresh(&many));
        assert!(s.iter().all(|v| v.is_some_and(|v| v <= 10)));
        assert_eq!(s.first(), Some(&Some(0)));
        assert_eq!(s.last(), Some(&Some(10)));
        // Monotone: a larger value never scores lower.
        assert!(s.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn unknown_readings_get_none_and_a_neutral_fill() {
        let r = rule("m", Operator::GreaterThan, 0.0);
        let s = scores(
            &r,
            &[
                Reading::Fresh(10.0),
                Reading::Stale(100.0),
                Reading::Missing,
                Reading::Fresh(4.0),
            ],
        );
        assert_eq!(s, [Some(10), None, None, Some(4)]);
        assert_eq!(neutral(&s), 7);
        assert_eq!(neutral(&[None, None]), 0);
    }
}
