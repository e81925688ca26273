//! A compiled policy's verdict on one request, as kube-apiserver's validator reaches it: the
//! match conditions (one false skips the policy; errors with none false fail by the failure
//! policy), the variables (evaluated in order; a validation reading one that failed fails with
//! its error), then every validation with its message: the message expression's string if it
//! gives a usable one, else `message`, else `failed expression: <expression>`.

use std::sync::Arc;

use cel::{Context, ExecutionError, Value as CelValue};
use serde_json::Value;

use super::policy::{Expression, FailurePolicy, Policy, Reason};
use super::request::Request;
use crate::apiserver::crds::expr;

/// kube-apiserver's limit on a message expression's result (`MaxEvaluatedMessageExpressionSizeBytes`).
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

/// One failed validation (or a failure to evaluate the policy that its failure policy turns
/// into a refusal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// What the refusal says.
    pub message: String,
    /// The validation's reason; `Invalid` when it has none or the policy could not be evaluated.
    pub reason: Reason,
    /// Whether it is about the policy's configuration rather than the request (kube-apiserver
    /// then names no binding: `failed to configure policy: ...`).
    pub misconfigured: bool,
}

impl Failure {
    fn invalid(message: String) -> Self {
        Self {
            message,
            reason: Reason::Invalid,
            misconfigured: false,
        }
    }
}

/// Returns the validations `policy` fails for `request` (none: admitted). `namespace` is the
/// request's Namespace object, if any.
pub fn evaluate(policy: &Policy, request: &Request<'_>, namespace: Option<&Value>) -> Vec<Failure> {
    let fail = policy.failure_policy == FailurePolicy::Fail;
    if let Some(why) = &policy.unsupported {
        return if fail {
            vec![Failure {
                message: format!("failed to configure policy: {why}"),
                reason: Reason::Invalid,
                misconfigured: true,
            }]
        } else {
            Vec::new()
        };
    }
    let inputs = Inputs::new(request, namespace);
    let mut errors = Vec::new();
    for condition in &policy.match_conditions {
        match inputs.eval(policy, &condition.expression, &[]) {
            Ok(CelValue::Bool(false)) => return Vec::new(),
            Ok(CelValue::Bool(true)) => {}
            Ok(other) => errors.push(format!(
                "expression '{}' resulted in error: expected a bool, got {}",
                condition.expression.source,
                other.type_of()
            )),
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        // kube-apiserver's aggregate error: one message as is, several in brackets.
        let message = if errors.len() == 1 {
            errors.remove(0)
        } else {
            format!("[{}]", errors.join(", "))
        };
        return if fail {
            vec![Failure::invalid(message)]
        } else {
            Vec::new()
        };
    }
    let mut variables: Vec<(String, Result<CelValue, String>)> = Vec::new();
    for v in &policy.variables {
        let value = inputs.eval(policy, &v.expression, &variables);
        variables.push((v.name.clone(), value));
    }
    let mut failures = Vec::new();
    for check in &policy.validations {
        let message = match inputs.eval(policy, &check.expression, &variables) {
            Ok(CelValue::Bool(true)) => continue,
            Ok(_) => {
                let from_expression = check.message_expression.as_ref().and_then(|m| match inputs
                    .eval(policy, m, &variables)
                {
                    Ok(CelValue::String(s)) => {
                        let t = s.trim();
                        (!t.is_empty() && !t.contains('\n') && t.len() <= MAX_MESSAGE_BYTES)
                            .then(|| t.to_owned())
                    }
                    _ => None,
                });
                let message = from_expression
                    .or_else(|| check.message.clone())
                    .unwrap_or_else(|| {
                        format!("failed expression: {}", check.expression.source.trim())
                    });
                failures.push(Failure {
                    message,
                    reason: check.reason.unwrap_or(Reason::Invalid),
                    misconfigured: false,
                });
                continue;
            }
            Err(e) => e,
        };
        if fail {
            failures.push(Failure::invalid(message));
        }
    }
    failures
}

/// The variables every expression of one request sees.
struct Inputs {
    object: CelValue,
    old_object: CelValue,
    request: CelValue,
    namespace: CelValue,
}

impl Inputs {
    fn new(request: &Request<'_>, namespace: Option<&Value>) -> Self {
        let or_null = |v: Option<&Value>| v.map_or(CelValue::Null, expr::from_json);
        Self {
            object: or_null(request.object),
            old_object: or_null(request.old_object),
            request: expr::from_json(&request.to_json()),
            namespace: or_null(namespace),
        }
    }

    /// Evaluates `e` with the `variables` evaluated so far; an error is kube-apiserver's
    /// `expression '<e>' resulted in error: <why>`.
    fn eval(
        &self,
        policy: &Policy,
        e: &Expression,
        variables: &[(String, Result<CelValue, String>)],
    ) -> Result<CelValue, String> {
        let failed = |why: &str| format!("expression '{}' resulted in error: {why}", e.source);
        // Variables are lazy in kube-apiserver: one that failed fails what reads it, with its
        // own error, only when the read is evaluated (`a || variables.broken` holds when `a`
        // does). Here it is left out of `variables`, and reading it answers its error.
        let bound = expr::map(
            variables
                .iter()
                .filter_map(|(n, v)| v.as_ref().ok().map(|v| (n.clone(), v.clone())))
                .collect(),
        );
        let ctx = self
            .context(policy, bound)
            .map_err(|err| failed(&expr::describe_error(&err).1))?;
        expr::run(&e.program, &ctx).map_err(|err| {
            if let ExecutionError::NoSuchKey(key) = &err
                && e.reads.contains(key.as_str())
                && let Some((_, Err(why))) = variables.iter().find(|(n, _)| **n == **key)
            {
                return why.clone();
            }
            failed(&expr::describe_error(&err).1)
        })
    }

    fn context(
        &self,
        policy: &Policy,
        variables: CelValue,
    ) -> Result<Context<'static, 'static>, ExecutionError> {
        expr::context(
            &Arc::clone(&policy.env),
            vec![
                ("object", self.object.clone()),
                ("oldObject", self.old_object.clone()),
                ("request", self.request.clone()),
                ("params", CelValue::Null),
                ("namespaceObject", self.namespace.clone()),
                ("variables", variables),
            ],
        )
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::super::policy::compile_policy;
    use super::super::request::{GroupVersion, Operation};
    use super::*;
    use crate::apiserver::requests::auth::{PodBinding, UserInfo};

    fn policy(extra: Value) -> Policy {
        let mut spec = json!({"matchConstraints": {"resourceRules": [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"]}]}});
        spec.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let env = Arc::new(expr::environment().unwrap());
        compile_policy(&json!({"metadata": {"name": "p"}, "spec": spec}), &env).unwrap()
    }

    fn agent_on(node: &str) -> UserInfo {
        UserInfo::service_account("ns", "agent").bound_to_pod(&PodBinding {
            pod_name: "agent-1".into(),
            pod_uid: "u".into(),
            node_name: node.into(),
            node_uid: "nu".into(),
        })
    }

    fn update<'a>(user: &'a UserInfo, node: &'a Value) -> Request<'a> {
        Request {
            operation: Operation::Update,
            resource: GroupVersion::new("", "v1", "nodes"),
            subresource: "",
            kind: GroupVersion::new("", "v1", "Node"),
            namespace: "",
            name: "n",
            object: Some(node),
            old_object: Some(node),
            user,
            dry_run: false,
        }
    }

    const NODE_OF_TOKEN: &str = "has(request.userInfo.extra) && 'authentication.kubernetes.io/node-name' in request.userInfo.extra ? request.userInfo.extra['authentication.kubernetes.io/node-name'][0] : ''";

    #[test]
    fn vap_validations_read_the_token_node_and_the_object() {
        let p = policy(json!({
            "variables": [{"name": "node", "expression": NODE_OF_TOKEN}],
            "validations": [
                {"expression": "variables.node != ''", "message": "no node", "reason": "Forbidden"},
                {"expression": "object.metadata.name == variables.node",
                 "messageExpression": "'agent of ' + variables.node + ' may not write ' + object.metadata.name",
                 "reason": "Forbidden"}
            ]
        }));
        let a = json!({"metadata": {"name": "node-a"}});
        let b = json!({"metadata": {"name": "node-b"}});
        let agent = agent_on("node-a");
        assert_eq!(evaluate(&p, &update(&agent, &a), None), []);
        assert_eq!(
            evaluate(&p, &update(&agent, &b), None),
            [Failure {
                message: "agent of node-a may not write node-b".into(),
                reason: Reason::Forbidden,
                misconfigured: false
            }]
        );
        let unbound = UserInfo::service_account("ns", "agent");
        let msgs: Vec<String> = evaluate(&p, &update(&unbound, &a), None)
            .into_iter()
            .map(|f| f.message)
            .collect();
        assert_eq!(msgs, ["no node", "agent of  may not write node-a"]);
    }

    #[test]
    fn vap_match_conditions_skip_or_fail() {
        let node = json!({"metadata": {"name": "n"}});
        let agent = agent_on("n");
        let deny_all = |conditions: Value, failure: &str| {
            policy(json!({
                "failurePolicy": failure,
                "matchConditions": conditions,
                "validations": [{"expression": "false"}]
            }))
        };
        let skip = deny_all(
            json!([{"name": "other", "expression": "request.userInfo.username == 'someone-else'"}]),
            "Fail",
        );
        assert_eq!(evaluate(&skip, &update(&agent, &node), None), []);
        let applies = deny_all(
            json!([{"name": "agent", "expression": "request.userInfo.username.endsWith(':agent')"}]),
            "Fail",
        );
        assert_eq!(
            evaluate(&applies, &update(&agent, &node), None)[0].message,
            "failed expression: false"
        );
        let erring = json!([{"name": "bad", "expression": "object.spec.missing == 'x'"}]);
        let failed = evaluate(
            &deny_all(erring.clone(), "Fail"),
            &update(&agent, &node),
            None,
        );
        assert_eq!(failed.len(), 1);
        assert!(
            failed[0]
                .message
                .starts_with("expression 'object.spec.missing == 'x'' resulted in error: "),
            "{failed:?}"
        );
        assert_eq!(
            evaluate(&deny_all(erring, "Ignore"), &update(&agent, &node), None),
            []
        );
    }

    #[test]
    fn vap_errors_fail_by_the_failure_policy_and_messages_fall_back() {
        let node = json!({"metadata": {"name": "n"}});
        let agent = agent_on("n");
        let p = |failure: &str| {
            policy(json!({
                "failurePolicy": failure,
                "variables": [{"name": "broken", "expression": "object.nope"}],
                "validations": [
                    {"expression": "variables.broken == 1"},
                    {"expression": "1 == 2", "message": "fixed", "messageExpression": "'two\\nlines'"},
                    {"expression": "1 == 2", "messageExpression": "42"}
                ]
            }))
        };
        let failures = evaluate(&p("Fail"), &update(&agent, &node), None);
        let msgs: Vec<&str> = failures.iter().map(|f| f.message.as_str()).collect();
        assert!(
            msgs[0].starts_with("expression 'object.nope' resulted in error: "),
            "a variable's error fails what reads it: {msgs:?}"
        );
        assert_eq!(msgs[1..], ["fixed", "failed expression: 1 == 2"]);
        let lazy = policy(json!({
            "variables": [{"name": "broken", "expression": "object.nope"}],
            "validations": [{"expression": "true || variables.broken == 1"}]
        }));
        assert_eq!(
            evaluate(&lazy, &update(&agent, &node), None),
            [],
            "a failed variable that is never read fails nothing"
        );
        let ignored = evaluate(&p("Ignore"), &update(&agent, &node), None);
        assert_eq!(
            ignored.len(),
            2,
            "the error is ignored, the failures stay: {ignored:?}"
        );
    }

    #[test]
    fn vap_unsupported_features_fail_as_misconfigured() {
        let node = json!({"metadata": {"name": "n"}});
        let agent = agent_on("n");
        let p = policy(json!({
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "validations": [{"expression": "true"}]
        }));
        let f = evaluate(&p, &update(&agent, &node), None);
        assert!(f[0].misconfigured);
        assert!(
            f[0].message
                .starts_with("failed to configure policy: paramKind"),
            "{f:?}"
        );
    }
}
