//! ValidatingAdmissionPolicies and their bindings, read from their stored objects and compiled
//! once: the CEL expressions of `matchConditions`, `variables` and `validations` with their
//! messages, the match constraints, the failure policy, and what the sim cannot evaluate.
//!
//! [`compile_policy`] and [`compile_binding`] also give kube-apiserver's creation-time errors
//! (an expression that does not compile, a binding without policy or actions), so a policy the
//! real server would refuse is refused here too, with the field it is about.

use std::collections::BTreeSet;
use std::sync::Arc;

use cel::{Env, Program};
use k8s_openapi::api::admissionregistration::v1::{
    MatchResources, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use serde_json::Value;
use telemesh_core::go::quote;

use crate::apiserver::crds::expr;

/// The variables of a policy's expressions.
const VARIABLES: &[&str] = &[
    "object",
    "oldObject",
    "request",
    "params",
    "namespaceObject",
    "authorizer",
    "variables",
];

/// One field error of a policy or binding refused at creation: field, `metav1.CauseType`,
/// message (kube-apiserver's `field.Error` parts).
pub type Cause = (String, &'static str, String);

/// What a failed validation answers: its `reason`, which sets the HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// 422, the default.
    Invalid,
    /// 403.
    Forbidden,
    /// 401.
    Unauthorized,
    /// 413.
    RequestEntityTooLarge,
}

impl Reason {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "Invalid" => Self::Invalid,
            "Forbidden" => Self::Forbidden,
            "Unauthorized" => Self::Unauthorized,
            "RequestEntityTooLarge" => Self::RequestEntityTooLarge,
            _ => return None,
        })
    }

    /// The Status `reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Invalid => "Invalid",
            Self::Forbidden => "Forbidden",
            Self::Unauthorized => "Unauthorized",
            Self::RequestEntityTooLarge => "RequestEntityTooLarge",
        }
    }

    /// The HTTP status code (kube-apiserver's `reasonToCode`).
    pub fn code(self) -> u16 {
        match self {
            Self::Invalid => 422,
            Self::Forbidden => 403,
            Self::Unauthorized => 401,
            Self::RequestEntityTooLarge => 413,
        }
    }
}

/// What happens when a policy cannot be evaluated (an expression errs, the sim lacks a feature).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    /// The request is denied (the default).
    Fail,
    /// The policy is skipped.
    Ignore,
}

/// One compiled CEL expression.
#[derive(Debug)]
pub struct Expression {
    /// As written.
    pub source: String,
    /// Compiled.
    pub program: Program,
    /// The `variables.<name>` it reads.
    pub reads: BTreeSet<String>,
}

/// A named expression: a match condition or a variable.
#[derive(Debug)]
pub struct Named {
    /// Its name.
    pub name: String,
    /// Its expression.
    pub expression: Expression,
}

/// One validation.
#[derive(Debug)]
pub struct Check {
    /// What must be true.
    pub expression: Expression,
    /// The message when it is not, if set.
    pub message: Option<String>,
    /// The expression giving that message, if set (falls back to `message`).
    pub message_expression: Option<Expression>,
    /// The reason of the refusal; `None` answers Invalid.
    pub reason: Option<Reason>,
}

/// A compiled ValidatingAdmissionPolicy.
pub struct Policy {
    /// Its name.
    pub name: String,
    /// Fail (the default) or Ignore.
    pub failure_policy: FailurePolicy,
    /// The requests it applies to.
    pub constraints: MatchResources,
    /// All must hold (none false) for the policy to apply.
    pub match_conditions: Vec<Named>,
    /// `variables.<name>`, in order; each may read those before it.
    pub variables: Vec<Named>,
    /// What it checks.
    pub validations: Vec<Check>,
    /// Why the sim cannot evaluate it (params, the authorizer, a CEL library it lacks); a
    /// matching request then fails or skips it by the failure policy.
    pub unsupported: Option<String>,
    /// The CEL environment its programs run in.
    pub env: Arc<Env>,
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("name", &self.name)
            .field("failure_policy", &self.failure_policy)
            .field("match_conditions", &self.match_conditions)
            .field("variables", &self.variables)
            .field("validations", &self.validations)
            .field("unsupported", &self.unsupported)
            .finish_non_exhaustive()
    }
}

/// What a binding does with a failed validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Refuse the request.
    Deny,
    /// Let it through with a warning.
    Warn,
    /// Let it through; the sim logs it (kube-apiserver writes an audit annotation).
    Audit,
}

/// A compiled ValidatingAdmissionPolicyBinding.
#[derive(Debug, Clone)]
pub struct Binding {
    /// Its name.
    pub name: String,
    /// The policy it binds.
    pub policy: String,
    /// A further limit on the requests, if set.
    pub resources: Option<MatchResources>,
    /// What failed validations do.
    pub actions: Vec<Action>,
    /// Whether it names params (not supported: a matching request fails by the failure policy).
    pub has_param_ref: bool,
}

/// Compiles a stored ValidatingAdmissionPolicy, or returns kube-apiserver's creation errors.
pub fn compile_policy(obj: &Value, env: &Arc<Env>) -> Result<Policy, Vec<Cause>> {
    let vap: ValidatingAdmissionPolicy = serde_json::from_value(obj.clone()).map_err(|e| {
        vec![(
            "spec".to_owned(),
            "FieldValueInvalid",
            format!("Invalid value: {e}"),
        )]
    })?;
    let name = vap.metadata.name.clone().unwrap_or_default();
    let spec = vap.spec.unwrap_or_default();
    let mut causes = Vec::new();
    let failure_policy = match spec.failure_policy.as_deref() {
        None | Some("Fail") => FailurePolicy::Fail,
        Some("Ignore") => FailurePolicy::Ignore,
        Some(other) => {
            causes.push(unsupported(
                "spec.failurePolicy",
                other,
                "\"Fail\", \"Ignore\"",
            ));
            FailurePolicy::Fail
        }
    };
    let constraints = match spec.match_constraints {
        Some(m) if m.resource_rules.as_ref().is_some_and(|r| !r.is_empty()) => m,
        Some(m) => {
            causes.push(required("spec.matchConstraints.resourceRules", ""));
            m
        }
        None => {
            causes.push(required("spec.matchConstraints", ""));
            MatchResources::default()
        }
    };
    let checks = spec.validations.unwrap_or_default();
    let audits = spec.audit_annotations.unwrap_or_default();
    if checks.is_empty() && audits.is_empty() {
        causes.push(required(
            "spec.validations",
            "validations or auditAnnotations must contain at least one item",
        ));
    }
    let mut unsupported_feature = spec
        .param_kind
        .as_ref()
        .map(|_| "paramKind (params) is not supported by telemesh-sim".to_owned());
    let mut compiler = Compiler {
        env,
        causes: &mut causes,
        unsupported: &mut unsupported_feature,
    };
    let mut match_conditions = Vec::new();
    for (i, c) in spec
        .match_conditions
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        let path = format!("spec.matchConditions[{i}].expression");
        if let Some(expression) = compiler.compile(&path, &c.expression, &[]) {
            match_conditions.push(Named {
                name: c.name,
                expression,
            });
        }
    }
    let mut variables = Vec::new();
    let mut declared: Vec<String> = Vec::new();
    for (i, v) in spec.variables.unwrap_or_default().into_iter().enumerate() {
        let path = format!("spec.variables[{i}].expression");
        if let Some(expression) = compiler.compile(&path, &v.expression, &declared) {
            variables.push(Named {
                name: v.name.clone(),
                expression,
            });
        }
        declared.push(v.name);
    }
    let mut validations = Vec::new();
    for (i, v) in checks.into_iter().enumerate() {
        let path = format!("spec.validations[{i}]");
        let expression = compiler.compile(&format!("{path}.expression"), &v.expression, &declared);
        let message_expression = v
            .message_expression
            .as_deref()
            .and_then(|m| compiler.compile(&format!("{path}.messageExpression"), m, &declared));
        let reason = match v.reason.as_deref() {
            None => None,
            Some(r) => match Reason::parse(r) {
                Some(r) => Some(r),
                None => {
                    compiler.causes.push(unsupported(
                        &format!("{path}.reason"),
                        r,
                        "\"Forbidden\", \"Invalid\", \"RequestEntityTooLarge\", \"Unauthorized\"",
                    ));
                    None
                }
            },
        };
        if let Some(expression) = expression {
            validations.push(Check {
                expression,
                message: v
                    .message
                    .map(|m| m.trim().to_owned())
                    .filter(|m| !m.is_empty()),
                message_expression,
                reason,
            });
        }
    }
    if !causes.is_empty() {
        return Err(causes);
    }
    Ok(Policy {
        name,
        failure_policy,
        constraints,
        match_conditions,
        variables,
        validations,
        unsupported: unsupported_feature,
        env: Arc::clone(env),
    })
}

/// Compiles a stored ValidatingAdmissionPolicyBinding, or returns kube-apiserver's creation
/// errors.
pub fn compile_binding(obj: &Value) -> Result<Binding, Vec<Cause>> {
    let b: ValidatingAdmissionPolicyBinding = serde_json::from_value(obj.clone()).map_err(|e| {
        vec![(
            "spec".to_owned(),
            "FieldValueInvalid",
            format!("Invalid value: {e}"),
        )]
    })?;
    let spec = b.spec.unwrap_or_default();
    let mut causes = Vec::new();
    let policy = spec.policy_name.unwrap_or_default();
    if policy.is_empty() {
        causes.push(required("spec.policyName", ""));
    }
    let raw_actions = spec.validation_actions.unwrap_or_default();
    if raw_actions.is_empty() {
        causes.push(required(
            "spec.validationActions",
            "at least one validation action is required",
        ));
    }
    let mut actions = Vec::new();
    for (i, a) in raw_actions.iter().enumerate() {
        match a.as_str() {
            "Deny" => actions.push(Action::Deny),
            "Warn" => actions.push(Action::Warn),
            "Audit" => actions.push(Action::Audit),
            other => causes.push(unsupported(
                &format!("spec.validationActions[{i}]"),
                other,
                "\"Audit\", \"Deny\", \"Warn\"",
            )),
        }
    }
    if actions.contains(&Action::Deny) && actions.contains(&Action::Warn) {
        causes.push((
            "spec.validationActions".to_owned(),
            "FieldValueInvalid",
            format!(
                "Invalid value: {}: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
                serde_json::to_string(&raw_actions).unwrap_or_default()
            ),
        ));
    }
    if !causes.is_empty() {
        return Err(causes);
    }
    Ok(Binding {
        name: b.metadata.name.unwrap_or_default(),
        policy,
        resources: spec.match_resources,
        actions,
        has_param_ref: spec.param_ref.is_some(),
    })
}

fn required(field: &str, detail: &str) -> Cause {
    let message = if detail.is_empty() {
        "Required value".to_owned()
    } else {
        format!("Required value: {detail}")
    };
    (field.to_owned(), "FieldValueRequired", message)
}

fn unsupported(field: &str, value: &str, supported: &str) -> Cause {
    (
        field.to_owned(),
        "FieldValueNotSupported",
        format!(
            "Unsupported value: {}: supported values: {supported}",
            quote(value)
        ),
    )
}

/// Compiles a policy's expressions, collecting creation errors and the first feature the sim
/// lacks.
struct Compiler<'a> {
    env: &'a Arc<Env>,
    causes: &'a mut Vec<Cause>,
    unsupported: &'a mut Option<String>,
}

impl Compiler<'_> {
    /// Compiles `src` at `path`; `declared` are the variables it may read.
    fn compile(&mut self, path: &str, src: &str, declared: &[String]) -> Option<Expression> {
        let invalid = |detail: String| {
            (
                path.to_owned(),
                "FieldValueInvalid",
                format!("Invalid value: {}: {detail}", quote(src)),
            )
        };
        if src.trim().is_empty() {
            self.causes.push(required(path, ""));
            return None;
        }
        let program = match expr::compile(self.env, src) {
            Ok(p) => p,
            Err(e) => {
                self.causes
                    .push(invalid(format!("compilation failed: {e}")));
                return None;
            }
        };
        let refs = expr::references(&program, src, VARIABLES);
        if let Some(e) = refs.undeclared {
            self.causes
                .push(invalid(format!("compilation failed: {e}")));
            return None;
        }
        let reads: BTreeSet<String> = refs
            .selected
            .iter()
            .filter(|(root, _)| root == "variables")
            .map(|(_, field)| field.clone())
            .collect();
        if let Some(unknown) = reads.iter().find(|r| !declared.contains(r)) {
            self.causes.push(invalid(format!(
                "compilation failed: ERROR: <input>: undefined field '{unknown}'"
            )));
            return None;
        }
        if self.unsupported.is_none() {
            if refs.used.contains("authorizer") {
                *self.unsupported = Some(format!(
                    "{path}: the authorizer variable is not supported by telemesh-sim"
                ));
            } else if let Some(f) = &refs.unsupported {
                *self.unsupported = Some(format!(
                    "{path}: the Kubernetes CEL function {f:?} is not implemented by telemesh-sim"
                ));
            }
        }
        Some(Expression {
            source: src.to_owned(),
            program,
            reads,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn env() -> Arc<Env> {
        Arc::new(expr::environment().unwrap())
    }

    fn policy(spec: Value) -> Value {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
               "metadata": {"name": "p"}, "spec": spec})
    }

    fn rules() -> Value {
        json!({"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"]}]})
    }

    #[test]
    fn vap_policy_compiles_with_its_variables_and_reasons() {
        let p = compile_policy(
            &policy(json!({
                "matchConstraints": rules(),
                "matchConditions": [{"name": "agent", "expression": "request.userInfo.username == 'a'"}],
                "variables": [
                    {"name": "node", "expression": "object.metadata.name"},
                    {"name": "upper", "expression": "variables.node.upperAscii()"}
                ],
                "validations": [{"expression": "variables.node == 'n'", "message": "  own node only ", "reason": "Forbidden"}]
            })),
            &env(),
        )
        .unwrap();
        assert_eq!(p.failure_policy, FailurePolicy::Fail);
        assert_eq!(
            p.variables[1].expression.reads,
            BTreeSet::from(["node".to_owned()])
        );
        assert_eq!(p.validations[0].reason, Some(Reason::Forbidden));
        assert_eq!(p.validations[0].message.as_deref(), Some("own node only"));
        assert!(p.unsupported.is_none());
    }

    #[test]
    fn vap_policy_creation_errors_name_the_field() {
        let causes = compile_policy(
            &policy(json!({
                "failurePolicy": "Sometimes",
                "matchConstraints": rules(),
                "variables": [{"name": "a", "expression": "variables.b"}, {"name": "b", "expression": "1"}],
                "validations": [
                    {"expression": "nope == 1"},
                    {"expression": "object.x ==", "reason": "Teapot"}
                ]
            })),
            &env(),
        )
        .unwrap_err();
        let fields: Vec<&str> = causes.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.failurePolicy",
                "spec.variables[0].expression",
                "spec.validations[0].expression",
                "spec.validations[1].expression",
                "spec.validations[1].reason",
            ],
            "{causes:?}"
        );
        assert!(causes[1].2.contains("undefined field 'b'"), "{causes:?}");
        assert!(
            causes[2].2.contains("undeclared reference to 'nope'"),
            "{causes:?}"
        );
        let missing = compile_policy(&policy(json!({})), &env()).unwrap_err();
        assert_eq!(missing[0].0, "spec.matchConstraints");
        assert_eq!(
            missing[1].2,
            "Required value: validations or auditAnnotations must contain at least one item"
        );
    }

    #[test]
    fn vap_policy_using_what_the_sim_lacks_compiles_but_says_so() {
        let p = compile_policy(
            &policy(json!({
                "matchConstraints": rules(),
                "validations": [{"expression": "authorizer.group('').resource('pods').check('get').allowed()"}]
            })),
            &env(),
        )
        .unwrap();
        assert!(p.unsupported.unwrap().contains("authorizer"));
        let p = compile_policy(
            &policy(json!({
                "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "matchConstraints": rules(),
                "validations": [{"expression": "params.data.x == object.metadata.name"}]
            })),
            &env(),
        )
        .unwrap();
        assert!(p.unsupported.unwrap().contains("paramKind"));
    }

    #[test]
    fn vap_binding_needs_a_policy_and_consistent_actions() {
        let b = compile_binding(&json!({"metadata": {"name": "b"}, "spec": {"policyName": "p", "validationActions": ["Deny", "Audit"]}})).unwrap();
        assert_eq!(b.actions, [Action::Deny, Action::Audit]);
        assert!(!b.has_param_ref);
        let causes = compile_binding(&json!({"metadata": {"name": "b"}, "spec": {"validationActions": ["Deny", "Warn", "Shout"]}})).unwrap_err();
        let fields: Vec<&str> = causes.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.policyName",
                "spec.validationActions[2]",
                "spec.validationActions"
            ]
        );
    }
}
