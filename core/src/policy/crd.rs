//! The TASPolicy custom resource in its wire form: exactly TAS's `telemetry.intel.com/v1alpha1`
//! schema, with strings where TAS has enums so that a policy this build cannot enforce is still
//! read and reported rather than failing a whole watch. [`super::Policy::compile`] turns it into
//! validated types. The CRD manifest is `deploy/crds/taspolicies.telemetry.intel.com.yaml`
//! ([`CRD_YAML`]); the schema is written there by hand because it must match TAS's byte for byte
//! where TAS users rely on it (enums, the metric-name pattern), which a derived schema would not.

use std::collections::BTreeMap;

use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// The CRD manifest, for tests and `telemesh-sim dev` to install.
pub const CRD_YAML: &str =
    include_str!("../../../deploy/crds/taspolicies.telemetry.intel.com.yaml");

/// `spec` of a TASPolicy.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[kube(
    group = "telemetry.intel.com",
    version = "v1alpha1",
    kind = "TASPolicy",
    plural = "taspolicies",
    namespaced,
    status = "TASPolicyStatus",
    schema = "disabled"
)]
pub struct TASPolicySpec {
    /// Strategy name (`scheduleonmetric`, `dontschedule`, `deschedule`, `labeling`) → strategy.
    /// Unknown names are kept so they can be reported.
    #[serde(default)]
    pub strategies: BTreeMap<String, TASPolicyStrategy>,
}

/// One strategy of a policy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct TASPolicyStrategy {
    /// TAS overwrites this with `metadata.name`; read and ignored.
    #[serde(
        rename = "policyName",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub policy_name: String,
    /// `anyOf` (default when absent) or `allOf`.
    #[serde(
        rename = "logicalOperator",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub logical_operator: Option<String>,
    /// The rules.
    #[serde(default)]
    pub rules: Vec<TASPolicyRule>,
}

/// One rule: a metric compared with a target.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct TASPolicyRule {
    /// Metric name as the Prometheus adapter exposes it (`health_metric`) or in full
    /// (`node_health_metric`).
    #[serde(default)]
    pub metricname: String,
    /// `Equals`, `LessThan` or `GreaterThan`.
    #[serde(default)]
    pub operator: String,
    /// Threshold; TAS's default 0 when absent. Fractions allowed (TAS: integers only).
    #[serde(default)]
    pub target: f64,
    /// `labeling` only: `key=value` labels applied while the rule is violated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
}

/// `status`: TAS declared `compliance` and `message` and never wrote them; Telemesh adds per-node
/// violations (each agent writes only its own node's key) and the policy's problems.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct TASPolicyStatus {
    /// TAS's declared field, kept for compatibility.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compliance: Option<String>,
    /// TAS's declared field, kept for compatibility.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Why parts of the policy are not enforced; empty when all of it is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
    /// Node name → what that node violates now. Absent nodes violate nothing (or have no agent).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub nodes: BTreeMap<String, NodeViolation>,
}

/// What one node violates, written by that node's agent.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct NodeViolation {
    /// Violated strategies (`deschedule`, `labeling`, ...).
    #[serde(default)]
    pub strategies: Vec<String>,
    /// The violated rules with the values that broke them.
    #[serde(default)]
    pub rules: Vec<ViolatedRule>,
    /// When the node started violating (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
}

/// One violated rule and the measured value.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ViolatedRule {
    /// The strategy the rule belongs to.
    pub strategy: String,
    /// The rule's metric.
    pub metricname: String,
    /// The rule's operator.
    pub operator: String,
    /// The rule's target.
    pub target: f64,
    /// The value measured on the node; absent when the metric is unknown and unknown counts as
    /// violating.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn crd_manifest_names_this_type() {
        use kube::Resource as _;
        let crd: serde_json::Value = serde_yaml_ng::from_str(CRD_YAML).unwrap();
        assert_eq!(crd["spec"]["group"], TASPolicy::group(&()).as_ref());
        assert_eq!(crd["spec"]["names"]["kind"], TASPolicy::kind(&()).as_ref());
        assert_eq!(
            crd["spec"]["names"]["plural"],
            TASPolicy::plural(&()).as_ref()
        );
        assert_eq!(
            crd["spec"]["versions"][0]["name"],
            TASPolicy::version(&()).as_ref()
        );
    }

    #[test]
    fn the_manifest_schema_has_the_fields_of_the_rust_types() {
        use crate::crd_parity::{assert_fields_match, schema_of};
        assert_fields_match(
            CRD_YAML,
            schema_of::<TASPolicySpec>(),
            schema_of::<TASPolicyStatus>(),
            &[],
            &[],
        );
    }

    #[test]
    fn tas_policy_file_parses_with_integer_targets_and_defaults() {
        let yaml = r#"
apiVersion: telemetry.intel.com/v1alpha1
kind: TASPolicy
metadata: {name: p, namespace: ns}
spec:
  strategies:
    scheduleonmetric:
      rules:
      - metricname: node_metric
        operator: GreaterThan
    labeling:
      rules:
      - metricname: node_metric
        operator: GreaterThan
        target: 100
        labels: ["label1=foo","label2=bar"]
"#;
        let p: TASPolicy = serde_yaml_ng::from_str(yaml).unwrap();
        let s = &p.spec.strategies["scheduleonmetric"];
        assert_eq!(s.rules[0].target, 0.0);
        assert_eq!(s.logical_operator, None);
        assert_eq!(p.spec.strategies["labeling"].rules[0].labels.len(), 2);
        assert_eq!(p.spec.strategies["labeling"].rules[0].target, 100.0);
    }
}
