//! Whether a policy's `matchConstraints` (or a binding's `matchResources`) select a request, as
//! kube-apiserver's generic policy matcher decides: namespace and object selectors, resource
//! rules with their operations, groups, versions, resources (`pods`, `pods/eviction`, `pods/*`,
//! `*/status`, `*`), scope and resource names, and the exclude rules.
//!
//! `matchPolicy: Equivalent` (the default) lets a rule naming another version of the same group
//! and resource match; the sim serves each resource in one version, so nothing is converted.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{MatchResources, NamedRuleWithOperations};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as LabelSelectorObject;
use serde_json::Value;

use super::request::Request;
use crate::storage::selectors::LabelSelector;

/// Whether `m` selects `request`. `namespace` is the request's Namespace object, when the
/// resource is namespaced and it exists.
pub fn matches(m: &MatchResources, request: &Request<'_>, namespace: Option<&Value>) -> bool {
    let equivalent = m.match_policy.as_deref() != Some("Exact");
    let rule_matches = |r: &NamedRuleWithOperations| rule_matches(r, request, equivalent);
    namespace_matches(m.namespace_selector.as_ref(), request, namespace)
        && object_matches(m.object_selector.as_ref(), request)
        && m.resource_rules.iter().flatten().any(rule_matches)
        && !m.exclude_resource_rules.iter().flatten().any(rule_matches)
}

fn labels_of(obj: Option<&Value>) -> BTreeMap<String, String> {
    obj.and_then(|o| o.pointer("/metadata/labels"))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// A `metav1.LabelSelector` as the sim's selector: an absent one selects everything, one that
/// does not parse selects nothing (kube-apiserver refuses it at creation).
fn selector(s: Option<&LabelSelectorObject>) -> Option<LabelSelector> {
    let Some(s) = s else {
        return Some(LabelSelector(Vec::new()));
    };
    let v = serde_json::to_value(s).ok()?;
    match LabelSelector::from_label_selector_object(&v) {
        Ok(Some(sel)) => Some(sel),
        Ok(None) => Some(LabelSelector(Vec::new())),
        Err(_) => None,
    }
}

/// The namespace selector: a Namespace request is matched by its own labels, a request for a
/// namespaced resource by its Namespace's, any other cluster-scoped request always.
fn namespace_matches(
    s: Option<&LabelSelectorObject>,
    request: &Request<'_>,
    namespace: Option<&Value>,
) -> bool {
    let Some(sel) = selector(s) else {
        return false;
    };
    if sel.is_empty() {
        return true;
    }
    if request.is_namespace() {
        let own = request.object.or(request.old_object);
        return sel.matches(&labels_of(own));
    }
    if request.namespace.is_empty() {
        return true;
    }
    sel.matches(&labels_of(namespace))
}

/// The object selector: the labels of the new or the old object.
fn object_matches(s: Option<&LabelSelectorObject>, request: &Request<'_>) -> bool {
    let Some(sel) = selector(s) else {
        return false;
    };
    sel.is_empty()
        || [request.object, request.old_object]
            .into_iter()
            .flatten()
            .any(|o| sel.matches(&labels_of(Some(o))))
}

fn rule_matches(r: &NamedRuleWithOperations, request: &Request<'_>, equivalent: bool) -> bool {
    let any =
        |list: &Option<Vec<String>>, v: &str| list.iter().flatten().any(|x| x == "*" || x == v);
    let version_matches = any(&r.api_versions, &request.resource.version)
        || (equivalent && r.api_versions.iter().flatten().next().is_some());
    any(&r.operations, request.operation.as_str())
        && any(&r.api_groups, &request.resource.group)
        && version_matches
        && resource_matches(r.resources.as_deref().unwrap_or_default(), request)
        && scope_matches(r.scope.as_deref(), request)
        && r.resource_names
            .as_ref()
            .is_none_or(|names| names.is_empty() || names.iter().any(|n| n == request.name))
}

/// `res` or `res/sub`, each part `*` or a name; a bare `res` matches no subresource.
fn resource_matches(resources: &[String], request: &Request<'_>) -> bool {
    resources.iter().any(|entry| {
        let (res, sub) = entry.split_once('/').unwrap_or((entry, ""));
        (res == "*" || res == request.resource.name) && (sub == "*" || sub == request.subresource)
    })
}

fn scope_matches(scope: Option<&str>, request: &Request<'_>) -> bool {
    match scope {
        Some("Namespaced") => !request.is_namespace() && !request.namespace.is_empty(),
        Some("Cluster") => request.is_namespace() || request.namespace.is_empty(),
        _ => true,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::super::request::{GroupVersion, Operation};
    use super::*;
    use crate::apiserver::requests::auth::UserInfo;

    fn constraints(v: Value) -> MatchResources {
        serde_json::from_value(v).unwrap()
    }

    fn request<'a>(
        user: &'a UserInfo,
        op: Operation,
        resource: &str,
        sub: &'a str,
        namespace: &'a str,
        object: Option<&'a Value>,
    ) -> Request<'a> {
        Request {
            operation: op,
            resource: GroupVersion::new("", "v1", resource),
            subresource: sub,
            kind: GroupVersion::new("", "v1", "Pod"),
            namespace,
            name: "x",
            object,
            old_object: None,
            user,
            dry_run: false,
        }
    }

    #[test]
    fn vap_rules_match_operations_resources_and_subresources() {
        let user = UserInfo::default();
        let m = constraints(json!({"resourceRules": [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods/eviction"]},
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"]}
        ]}));
        let r = |op, res, sub| request(&user, op, res, sub, "", None);
        assert!(matches(&m, &r(Operation::Create, "pods", "eviction"), None));
        assert!(
            !matches(&m, &r(Operation::Create, "pods", ""), None),
            "pods is not pods/eviction"
        );
        assert!(
            !matches(&m, &r(Operation::Update, "pods", "eviction"), None),
            "operation"
        );
        assert!(matches(&m, &r(Operation::Update, "nodes", ""), None));
        assert!(
            !matches(&m, &r(Operation::Update, "nodes", "status"), None),
            "a bare resource matches no subresource"
        );
        let wild = constraints(json!({"resourceRules": [
            {"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*/status", "pods/*"]}
        ]}));
        assert!(matches(
            &wild,
            &r(Operation::Update, "nodes", "status"),
            None
        ));
        assert!(matches(
            &wild,
            &r(Operation::Create, "pods", "binding"),
            None
        ));
        assert!(!matches(&wild, &r(Operation::Update, "nodes", ""), None));
        let all = constraints(json!({"resourceRules": [
            {"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]}
        ], "excludeResourceRules": [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["*"], "resources": ["nodes"]}
        ]}));
        assert!(matches(&all, &r(Operation::Delete, "pods", ""), None));
        assert!(
            !matches(&all, &r(Operation::Delete, "nodes", ""), None),
            "excluded"
        );
        assert!(
            !matches(&all, &r(Operation::Delete, "pods", "eviction"), None),
            "* is no subresource"
        );
    }

    #[test]
    fn vap_rules_match_scope_names_and_versions() {
        let user = UserInfo::default();
        let rule = |extra: Value| {
            let mut r = json!({"apiGroups": [""], "apiVersions": ["v2"], "operations": ["*"], "resources": ["pods", "nodes", "namespaces"]});
            r.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            constraints(json!({"resourceRules": [r]}))
        };
        let in_ns = request(&user, Operation::Update, "pods", "", "shop", None);
        let node = request(&user, Operation::Update, "nodes", "", "", None);
        let ns = request(&user, Operation::Update, "namespaces", "", "shop", None);
        let namespaced = rule(json!({"scope": "Namespaced"}));
        let cluster = rule(json!({"scope": "Cluster"}));
        assert!(matches(&namespaced, &in_ns, None) && !matches(&namespaced, &node, None));
        assert!(
            !matches(&namespaced, &ns, None),
            "a Namespace is cluster-scoped"
        );
        assert!(matches(&cluster, &node, None) && matches(&cluster, &ns, None));
        let named = rule(json!({"resourceNames": ["y"]}));
        assert!(!matches(&named, &node, None));
        let exact = constraints(
            json!({"matchPolicy": "Exact", "resourceRules": [{"apiGroups": [""], "apiVersions": ["v2"], "operations": ["*"], "resources": ["nodes"]}]}),
        );
        assert!(!matches(&exact, &node, None), "v1 is not v2");
        assert!(
            matches(&rule(json!({})), &node, None),
            "Equivalent: another version of nodes"
        );
    }

    #[test]
    fn vap_selectors_read_namespace_and_object_labels() {
        let user = UserInfo::default();
        let m = constraints(json!({
            "namespaceSelector": {"matchLabels": {"team": "a"}},
            "objectSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
            "resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]}]
        }));
        let labelled = json!({"metadata": {"labels": {"app": "web"}}});
        let bare = json!({"metadata": {}});
        let team_a = json!({"metadata": {"name": "shop", "labels": {"team": "a"}}});
        let team_b = json!({"metadata": {"name": "shop", "labels": {"team": "b"}}});
        let pod = |obj| request(&user, Operation::Create, "pods", "", "shop", Some(obj));
        assert!(matches(&m, &pod(&labelled), Some(&team_a)));
        assert!(!matches(&m, &pod(&labelled), Some(&team_b)));
        assert!(!matches(&m, &pod(&bare), Some(&team_a)));
        let node = request(&user, Operation::Create, "nodes", "", "", Some(&labelled));
        assert!(
            matches(&m, &node, None),
            "cluster-scoped: the namespace selector does not apply"
        );
    }
}
