//! A workload's `spec.selector` turned into the label query that lists and watches its pods (or
//! its children): kube's own conversion of a `metav1.LabelSelector`, `matchLabels` and
//! `matchExpressions` both, in one place for every caller (the action executor, sim's
//! controllers and sim's dev stories). A selector kube cannot convert, or one that selects
//! everything, is an error: never the empty query, which would select every pod of the namespace.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::{Expression, ParseExpressionError, Selector};

/// Why a workload's selector is not a query.
#[derive(Debug, thiserror::Error)]
pub enum SelectorError {
    /// A `matchExpressions` requirement kube does not understand (an unknown operator, or `In`
    /// / `NotIn` without values).
    #[error(
        "matchExpressions[{index}] (key {key:?}, operator {operator:?}) is not a valid requirement: {source}; \
         use In or NotIn with values, Exists or DoesNotExist"
    )]
    Invalid {
        /// Its position in `matchExpressions`.
        index: usize,
        /// Its key.
        key: String,
        /// Its operator.
        operator: String,
        /// kube's error.
        #[source]
        source: ParseExpressionError,
    },
    /// Neither `matchLabels` nor `matchExpressions`: it would select every pod of the namespace
    /// (kube-apiserver refuses such Deployments, StatefulSets and ReplicaSets).
    #[error(
        "the selector is empty and would select every pod of the namespace; give it matchLabels or matchExpressions"
    )]
    Empty,
}

// === impl SelectorError ===

impl SelectorError {
    /// A bounded label for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Invalid { .. } => "invalid",
            Self::Empty => "empty",
        }
    }
}

/// The query of a workload's `selector`: its `matchLabels` as `key=value`, then each
/// `matchExpressions` requirement as kube converts it (`key in (a,b)`, `key notin (a)`, `key`,
/// `!key`), all of which must hold. Give it to `ListParams::labels_from` or
/// `watcher::Config::labels_from`; its `Display` is the `labelSelector` string.
pub fn of_workload(selector: &LabelSelector) -> Result<Selector, SelectorError> {
    // kube's `TryFrom<LabelSelector>` one requirement at a time, so an error names the one.
    let expressions = selector
        .match_expressions
        .iter()
        .flatten()
        .enumerate()
        .map(|(index, requirement)| {
            Expression::try_from(requirement.clone()).map_err(|source| SelectorError::Invalid {
                index,
                key: requirement.key.clone(),
                operator: requirement.operator.clone(),
                source,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut query: Selector = selector
        .match_labels
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();
    query.extend(expressions);
    if query.selects_all() {
        return Err(SelectorError::Empty);
    }
    Ok(query)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
    use kube::core::SelectorExt as _;

    use super::*;

    fn requirement(key: &str, operator: &str, values: Option<&[&str]>) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: operator.into(),
            values: values.map(|v| v.iter().map(|s| (*s).to_owned()).collect()),
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn match_expressions_alone_make_a_query() {
        let selector = LabelSelector {
            match_expressions: Some(vec![requirement("app", "In", Some(&["web"]))]),
            match_labels: None,
        };
        let query = of_workload(&selector).unwrap();
        assert_eq!(query.to_string(), "app in (web)");
        assert!(query.matches(&labels(&[("app", "web")])));
        assert!(!query.matches(&labels(&[("app", "db")])));
        assert!(!query.matches(&labels(&[])));
    }

    #[test]
    fn both_forms_must_hold() {
        let selector = LabelSelector {
            match_labels: Some(labels(&[("team", "a"), ("app", "web")])),
            match_expressions: Some(vec![
                requirement("tier", "NotIn", Some(&["edge", "batch"])),
                requirement("canary", "DoesNotExist", None),
                requirement("zone", "Exists", None),
            ]),
        };
        let query = of_workload(&selector).unwrap();
        assert_eq!(
            query.to_string(),
            "app=web,team=a,tier notin (batch,edge),!canary,zone"
        );
        let mut pod = labels(&[("app", "web"), ("team", "a"), ("zone", "z1")]);
        assert!(query.matches(&pod));
        pod.insert("tier".into(), "edge".into());
        assert!(!query.matches(&pod), "tier notin (batch,edge)");
        pod.insert("tier".into(), "front".into());
        pod.insert("canary".into(), "yes".into());
        assert!(!query.matches(&pod), "!canary");
    }

    #[test]
    fn match_labels_alone_is_as_before() {
        let selector = LabelSelector {
            match_labels: Some(labels(&[("app", "web")])),
            match_expressions: None,
        };
        assert_eq!(of_workload(&selector).unwrap().to_string(), "app=web");
    }

    #[test]
    fn a_bad_operator_is_an_error_naming_the_requirement() {
        let selector = LabelSelector {
            match_labels: Some(labels(&[("app", "web")])),
            match_expressions: Some(vec![
                requirement("zone", "Exists", None),
                requirement("tier", "Within", Some(&["front"])),
            ]),
        };
        let e = of_workload(&selector).unwrap_err();
        assert_eq!(e.kind(), "invalid");
        let message = e.to_string();
        assert!(
            message.starts_with(
                "matchExpressions[1] (key \"tier\", operator \"Within\") is not a valid requirement: "
            ),
            "{message}"
        );
        assert!(message.ends_with("use In or NotIn with values, Exists or DoesNotExist"));
        // In without values is refused too.
        let selector = LabelSelector {
            match_expressions: Some(vec![requirement("tier", "In", None)]),
            match_labels: None,
        };
        assert!(matches!(
            of_workload(&selector),
            Err(SelectorError::Invalid { index: 0, .. })
        ));
    }

    #[test]
    fn an_empty_selector_is_an_error_not_the_whole_namespace() {
        for selector in [
            LabelSelector::default(),
            LabelSelector {
                match_labels: Some(BTreeMap::new()),
                match_expressions: Some(Vec::new()),
            },
        ] {
            assert!(matches!(of_workload(&selector), Err(SelectorError::Empty)));
        }
    }
}
