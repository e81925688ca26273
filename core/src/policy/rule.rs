//! Validated rules: operators, logical operators and the rule sets strategies are made of.

use std::fmt;

/// How a rule compares a metric with its target. A rule is *violated* when the comparison holds
/// (TAS's wording: `LessThan 10` is violated by 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operator {
    /// `value == target`.
    Equals,
    /// `value < target`.
    LessThan,
    /// `value > target`.
    GreaterThan,
}

// === impl Operator ===

impl Operator {
    /// Parses TAS's spelling; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "Equals" => Some(Self::Equals),
            "LessThan" => Some(Self::LessThan),
            "GreaterThan" => Some(Self::GreaterThan),
            _ => None,
        }
    }

    /// TAS's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Equals => "Equals",
            Self::LessThan => "LessThan",
            Self::GreaterThan => "GreaterThan",
        }
    }

    /// Whether `value` violates a rule with this operator and `target`. Equality is exact, as
    /// TAS's Quantity comparison is: policies that need a band use LessThan/GreaterThan.
    pub fn holds(self, value: f64, target: f64) -> bool {
        match self {
            Self::Equals => value == target,
            Self::LessThan => value < target,
            Self::GreaterThan => value > target,
        }
    }
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a strategy combines its rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogicalOperator {
    /// Violated when any rule is (TAS's default when `logicalOperator` is absent).
    #[default]
    AnyOf,
    /// Violated only when every rule is.
    AllOf,
}

// === impl LogicalOperator ===

impl LogicalOperator {
    /// Parses TAS's spelling; absent means `anyOf`.
    pub fn parse(s: Option<&str>) -> Option<Self> {
        match s {
            None | Some("anyOf") => Some(Self::AnyOf),
            Some("allOf") => Some(Self::AllOf),
            Some(_) => None,
        }
    }
}

/// One validated rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// The metric as the policy names it (with or without `node_`).
    pub metric: String,
    /// Comparison.
    pub operator: Operator,
    /// Finite threshold.
    pub target: f64,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {}",
            self.metric,
            self.operator,
            crate::gossip::schema::format_f64(self.target)
        )
    }
}

/// Rules combined by a logical operator: a `dontschedule` or `deschedule` strategy.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleSet {
    /// How rules combine.
    pub logical: LogicalOperator,
    /// At least one rule.
    pub rules: Vec<Rule>,
}

/// A `labeling` rule: while violated, its labels go on the node.
#[derive(Debug, Clone, PartialEq)]
pub struct LabelRule {
    /// The rule.
    pub rule: Rule,
    /// `(key, value)` pairs, already checked to make valid label keys and values.
    pub labels: Vec<(String, String)>,
}

/// A `labeling` strategy.
#[derive(Debug, Clone, PartialEq)]
pub struct Labeling {
    /// How rules combine: with `allOf` no label is written unless every rule is violated.
    pub logical: LogicalOperator,
    /// At least one rule.
    pub rules: Vec<LabelRule>,
}
