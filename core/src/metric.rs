//! Node metrics as the agent publishes them: Prometheus-style names (`node_cpu_utilization_ratio`),
//! each also reachable without its `node_` prefix, because TAS users' policies name metrics as
//! the Prometheus adapter exposes them (series `node_health_metric` becomes `health_metric`).

use std::fmt;

/// A metric name in Prometheus syntax: `[a-zA-Z_:][a-zA-Z0-9_:]*`.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(try_from = "String", into = "String")]
pub struct MetricName(String);

/// A name that is not a valid Prometheus metric name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a metric name: use letters, digits, '_' and ':', not starting with a digit")]
pub struct InvalidMetricName(pub String);

impl MetricName {
    /// Validates and wraps a name.
    pub fn new(name: impl Into<String>) -> Result<Self, InvalidMetricName> {
        let name = name.into();
        let mut chars = name.chars();
        let valid_start = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':');
        if valid_start && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            Ok(Self(name))
        } else {
            Err(InvalidMetricName(name))
        }
    }

    /// Returns the name as published.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Returns the name without its `node_` prefix, as the Prometheus adapter exposes it to TAS.
    pub fn adapter_name(&self) -> &str {
        self.0.strip_prefix("node_").unwrap_or(&self.0)
    }

    /// Returns whether a policy's `metricname` refers to this metric: the full name or the
    /// name without `node_`.
    pub fn answers_to(&self, policy_name: &str) -> bool {
        self.0 == policy_name || self.adapter_name() == policy_name
    }
}

/// Maps keyed by name can be read with a `&str` (hash, equality and order are the string's).
impl std::borrow::Borrow<str> for MetricName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for MetricName {
    type Error = InvalidMetricName;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::new(s)
    }
}

impl From<MetricName> for String {
    fn from(m: MetricName) -> Self {
        m.0
    }
}

impl fmt::Display for MetricName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One measured value of one node-level series. Series with labels (a disk, an L3 domain) are
/// named with their labels folded into the name's suffix by the collector (for example
/// `node_rdt_llc_occupancy_bytes` for the node total and per-domain series alongside), so every
/// sample is addressable by name alone, as TAS policies address them.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Sample {
    /// Series name.
    pub name: MetricName,
    /// Value; never NaN (collectors drop what they cannot measure rather than invent it).
    pub value: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_answer_to_their_adapter_form() {
        let m = MetricName::new("node_cpu_utilization_ratio").expect("valid");
        assert!(m.answers_to("node_cpu_utilization_ratio"));
        assert!(m.answers_to("cpu_utilization_ratio"));
        assert!(!m.answers_to("utilization_ratio"));
        let custom = MetricName::new("health_metric").expect("valid");
        assert_eq!(custom.adapter_name(), "health_metric");
    }

    #[test]
    fn invalid_names_are_refused() {
        for bad in ["", "1abc", "a-b", "a b"] {
            assert!(MetricName::new(bad).is_err(), "{bad:?}");
        }
    }
}
