//! ValidatingAdmissionPolicies (`admissionregistration.k8s.io/v1`) and their bindings, enforced
//! on every write a client makes, as kube-apiserver's ValidatingAdmissionPolicy plugin does:
//!
//! - a policy applies to a request its `matchConstraints` select ([`matching`]) and that a
//!   binding of it selects too (the binding's `matchResources`, when set);
//! - its `matchConditions`, `variables` and `validations` are CEL over `object`, `oldObject`,
//!   `request` (with `request.userInfo.extra`, e.g. a bound token's node name) and
//!   `namespaceObject` ([`evaluate`]), in the CEL of CRD validation rules ([`crate::apiserver::crds::expr`]);
//! - a failed validation under a `Deny` binding refuses the request with kube-apiserver's status:
//!   `<resource> "<name>" is forbidden: ValidatingAdmissionPolicy '<policy>' with binding
//!   '<binding>' denied request: <message>`, code and reason from the validation's `reason`
//!   (`Invalid`, 422, by default); `Warn` adds a warning, `Audit` a log line;
//! - a policy or binding kube-apiserver would refuse at creation (an expression that does not
//!   compile, a binding without actions) is refused here too ([`Policies::validate`]).
//!
//! The requests: creates (an apply that creates too), updates and patches (the status
//! subresource's with the whole object), deletes (`oldObject` only), and the `binding` and
//! `eviction` subresources, whose `object` is the Binding or Eviction sent: not the Pod, whose
//! node a policy therefore cannot see. The sim's own writes (controllers, garbage collection)
//! are not admitted.
//!
//! Not implemented: `params` (`paramKind`, `paramRef`), the `authorizer` variable and the CEL
//! libraries [`crate::apiserver::crds::expr`] lacks (a policy using them fails as misconfigured, so
//! its failure policy decides), `auditAnnotations`, type checking (`status.typeChecking`), cost
//! budgets, and the scale subresource (a scale is admitted as the update of its workload).

pub mod evaluate;
pub mod matching;
pub mod policy;
pub mod request;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use cel::Env;
use parking_lot::Mutex;
use serde_json::{Value, json};

use crate::apiserver::requests::error::{ApiError, ApiResult};
use crate::storage::registry::{ResourceDef, ResourceId};
use crate::storage::store::{ObjKey, Stored, Txn};
pub use evaluate::Failure;
pub use policy::{Action, Binding, Policy, Reason};
pub use request::{GroupVersion, Operation, Request};

/// The API group of policies and bindings.
pub const GROUP: &str = "admissionregistration.k8s.io";
/// The resource of policies.
pub const POLICIES: &str = "validatingadmissionpolicies";
/// The resource of bindings.
pub const BINDINGS: &str = "validatingadmissionpolicybindings";

/// A stored policy compiled, or why it could not be.
pub type Compiled = Arc<Result<Policy, String>>;

/// The policies compiled so far, each once per resourceVersion, and their CEL environment.
#[derive(Default)]
pub struct Policies {
    env: OnceLock<Result<Arc<Env>, String>>,
    compiled: Mutex<HashMap<String, (u64, Compiled)>>,
}

impl std::fmt::Debug for Policies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policies")
            .field("compiled", &self.compiled.lock().len())
            .finish_non_exhaustive()
    }
}

impl Policies {
    fn env(&self) -> Result<Arc<Env>, String> {
        self.env
            .get_or_init(|| super::expr::environment().map(Arc::new))
            .clone()
    }

    /// The compiled form of a stored policy (an error when it does not compile: a policy
    /// stored before validation existed, or with what this environment cannot build).
    fn policy(&self, stored: &Stored) -> Compiled {
        let name = stored.name().to_owned();
        if let Some((rv, p)) = self.compiled.lock().get(&name)
            && *rv == stored.rv
        {
            return Arc::clone(p);
        }
        let compiled = self.env().and_then(|env| {
            policy::compile_policy(&stored.value(), &env).map_err(|causes| {
                causes
                    .into_iter()
                    .map(|(field, _, message)| format!("{field}: {message}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
        });
        let compiled = Arc::new(compiled);
        self.compiled
            .lock()
            .insert(name, (stored.rv, Arc::clone(&compiled)));
        compiled
    }

    /// Refuses a policy or binding kube-apiserver refuses at creation or update (422 Invalid
    /// naming the field); other objects pass.
    pub fn validate(&self, def: &ResourceDef, obj: &Value) -> ApiResult<()> {
        if def.group != GROUP {
            return Ok(());
        }
        let causes = match def.plural.as_str() {
            POLICIES => {
                let env = self.env().map_err(ApiError::internal)?;
                policy::compile_policy(obj, &env).err()
            }
            BINDINGS => policy::compile_binding(obj).err(),
            _ => None,
        };
        match causes {
            None => Ok(()),
            Some(causes) => Err(ApiError::invalid(
                &def.group,
                &def.kind,
                obj.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
                causes,
            )),
        }
    }
}

/// What the policies say about one request.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The first refusal (kube-apiserver answers only the first), if any.
    pub denial: Option<Denial>,
    /// `Warn` bindings' warnings.
    pub warnings: Vec<String>,
    /// `Audit` bindings' findings (kube-apiserver's audit annotations; the sim logs them).
    pub audits: Vec<String>,
}

/// A refusal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The policy.
    pub policy: String,
    /// The binding, unless the policy itself could not be evaluated.
    pub binding: Option<String>,
    /// `ValidatingAdmissionPolicy '<policy>' [with binding '<binding>' ]denied request: <why>`.
    pub message: String,
    /// Sets the status code.
    pub reason: Reason,
}

/// Decides a request from the policies and bindings (in name order, so the first denial is
/// the same on every run). `namespace` is the request's Namespace object, if any.
pub fn decide(
    policies: &[(String, Compiled)],
    bindings: &[Binding],
    request: &Request<'_>,
    namespace: Option<&Value>,
) -> Outcome {
    let mut out = Outcome::default();
    for (name, compiled) in policies {
        let bound: Vec<&Binding> = bindings.iter().filter(|b| b.policy == *name).collect();
        if bound.is_empty() {
            continue;
        }
        let failures = match compiled.as_ref() {
            Ok(p) => {
                if !matching::matches(&p.constraints, request, namespace) {
                    continue;
                }
                let selected: Vec<&Binding> = bound
                    .into_iter()
                    .filter(|b| {
                        b.resources
                            .as_ref()
                            .is_none_or(|m| matching::matches(m, request, namespace))
                    })
                    .collect();
                if selected.is_empty() {
                    continue;
                }
                let failures = evaluate::evaluate(p, request, namespace);
                if let Some(f) = failures.iter().find(|f| f.misconfigured) {
                    out.denial.get_or_insert_with(|| denial(name, None, f));
                    continue;
                }
                selected
                    .into_iter()
                    .map(|b| (b, failures.clone()))
                    .collect::<Vec<_>>()
            }
            // Stored but not compilable: refused at creation, so only an environment failure.
            Err(why) => {
                let f = Failure {
                    message: format!("failed to configure policy: {why}"),
                    reason: Reason::Invalid,
                    misconfigured: true,
                };
                out.denial.get_or_insert_with(|| denial(name, None, &f));
                continue;
            }
        };
        for (binding, failures) in failures {
            for f in &failures {
                for action in &binding.actions {
                    match action {
                        Action::Deny => {
                            out.denial
                                .get_or_insert_with(|| denial(name, Some(&binding.name), f));
                        }
                        Action::Warn => out.warnings.push(format!(
                            "Validation failed for ValidatingAdmissionPolicy '{name}' with binding '{}': {}",
                            binding.name, f.message
                        )),
                        Action::Audit => out.audits.push(format!(
                            "ValidatingAdmissionPolicy '{name}' with binding '{}': {}",
                            binding.name, f.message
                        )),
                    }
                }
            }
        }
    }
    out
}

fn denial(policy: &str, binding: Option<&str>, f: &Failure) -> Denial {
    let message = match binding {
        Some(b) => format!(
            "ValidatingAdmissionPolicy '{policy}' with binding '{b}' denied request: {}",
            f.message
        ),
        None => format!(
            "ValidatingAdmissionPolicy '{policy}' denied request: {}",
            f.message
        ),
    };
    Denial {
        policy: policy.to_owned(),
        binding: binding.map(str::to_owned),
        message,
        reason: f.reason,
    }
}

/// The error a denial answers, as kube-apiserver's `admission.NewForbidden` words it with the
/// policy's reason and code: `nodes "b" is forbidden: ValidatingAdmissionPolicy ...`.
pub fn denial_error(request: &Request<'_>, d: &Denial) -> ApiError {
    let resource = if request.resource.group.is_empty() {
        request.resource.name.clone()
    } else {
        format!("{}.{}", request.resource.name, request.resource.group)
    };
    let message = if request.name.is_empty() {
        format!("{resource} is forbidden: {}", d.message)
    } else {
        format!(
            "{resource} {} is forbidden: {}",
            telemesh_core::go::quote(request.name),
            d.message
        )
    };
    ApiError::new(d.reason.code(), d.reason.as_str(), message).with_details(json!({
        "name": request.name,
        "group": request.resource.group,
        "kind": request.resource.name,
        "causes": [{"message": d.message}]
    }))
}

/// Runs the policies stored in `txn` on `request`: the warnings to answer, or the refusal.
pub fn admit(policies: &Policies, txn: &Txn<'_>, request: &Request<'_>) -> ApiResult<Vec<String>> {
    let stored_bindings = txn.objects(&ResourceId::new(GROUP, BINDINGS));
    if stored_bindings.is_empty() {
        return Ok(Vec::new());
    }
    let bindings: Vec<Binding> = stored_bindings
        .values()
        .filter_map(|s| policy::compile_binding(&s.value()).ok())
        .collect();
    let compiled: Vec<(String, Compiled)> = txn
        .objects(&ResourceId::new(GROUP, POLICIES))
        .values()
        .map(|s| (s.name().to_owned(), policies.policy(s)))
        .collect();
    let namespace = (!request.namespace.is_empty() && !request.is_namespace())
        .then(|| {
            txn.get(
                &ResourceId::new("", "namespaces"),
                &ObjKey::new("", request.namespace),
            )
        })
        .flatten()
        .map(|s| s.value());
    let outcome = decide(&compiled, &bindings, request, namespace.as_ref());
    for audit in &outcome.audits {
        tracing::info!(user = %request.user.username, operation = request.operation.as_str(), resource = %request.resource.name, subresource = request.subresource, name = request.name, finding = %audit, "admission policy audit");
    }
    match outcome.denial {
        None => Ok(outcome.warnings),
        Some(d) => {
            tracing::info!(policy.name = %d.policy, binding.name = d.binding.as_deref().unwrap_or_default(), user = %request.user.username, operation = request.operation.as_str(), resource = %request.resource.name, subresource = request.subresource, namespace = request.namespace, name = request.name, message = %d.message, "admission policy denied a request");
            Err(denial_error(request, &d))
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::apiserver::requests::auth::UserInfo;

    fn compiled(name: &str, validations: Value) -> (String, Compiled) {
        let env = Arc::new(super::super::expr::environment().unwrap());
        let obj = json!({"metadata": {"name": name}, "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"]}]},
            "validations": validations
        }});
        (
            name.to_owned(),
            Arc::new(policy::compile_policy(&obj, &env).map_err(|c| format!("{c:?}"))),
        )
    }

    fn binding(name: &str, policy: &str, actions: &[&str], resources: Option<Value>) -> Binding {
        let mut spec = json!({"policyName": policy, "validationActions": actions});
        if let Some(r) = resources {
            spec["matchResources"] = r;
        }
        policy::compile_binding(&json!({"metadata": {"name": name}, "spec": spec})).unwrap()
    }

    fn node_update<'a>(user: &'a UserInfo, node: &'a Value) -> Request<'a> {
        Request {
            operation: Operation::Update,
            resource: GroupVersion::new("", "v1", "nodes"),
            subresource: "",
            kind: GroupVersion::new("", "v1", "Node"),
            namespace: "",
            name: "node-b",
            object: Some(node),
            old_object: Some(node),
            user,
            dry_run: false,
        }
    }

    #[test]
    fn vap_policies_act_through_their_bindings_only() {
        let user = UserInfo::default();
        let node = json!({"metadata": {"name": "node-b", "labels": {"pool": "a"}}});
        let req = node_update(&user, &node);
        let policies = [
            compiled(
                "deny-all",
                json!([{"expression": "false", "message": "no", "reason": "Forbidden"}]),
            ),
            compiled("unbound", json!([{"expression": "false"}])),
        ];
        assert_eq!(
            decide(&policies, &[], &req, None),
            Outcome::default(),
            "no binding: no effect"
        );
        let deny = binding("b1", "deny-all", &["Deny"], None);
        let out = decide(&policies, &[deny], &req, None);
        let d = out.denial.unwrap();
        assert_eq!(
            d.message,
            "ValidatingAdmissionPolicy 'deny-all' with binding 'b1' denied request: no"
        );
        assert_eq!((d.reason.code(), d.reason.as_str()), (403, "Forbidden"));
        let err = denial_error(&req, &d);
        assert_eq!(
            err.message,
            "nodes \"node-b\" is forbidden: ValidatingAdmissionPolicy 'deny-all' with binding 'b1' denied request: no"
        );
        assert_eq!(
            err.details.unwrap()["causes"][0]["message"],
            json!(d.message)
        );
        // A binding selecting other objects leaves this one alone; Warn and Audit let it through.
        let elsewhere = binding(
            "b2",
            "deny-all",
            &["Deny"],
            Some(json!({
            "objectSelector": {"matchLabels": {"pool": "z"}},
            "resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]}]})),
        );
        assert_eq!(decide(&policies, &[elsewhere], &req, None).denial, None);
        let warn = binding("b3", "deny-all", &["Warn", "Audit"], None);
        let out = decide(&policies, &[warn], &req, None);
        assert_eq!(out.denial, None);
        assert_eq!(
            out.warnings,
            ["Validation failed for ValidatingAdmissionPolicy 'deny-all' with binding 'b3': no"]
        );
        assert_eq!(out.audits.len(), 1);
    }

    #[test]
    fn vap_denial_of_a_subresource_names_the_parent_resource_with_its_group() {
        let user = UserInfo::default();
        let d = Denial {
            policy: "p".into(),
            binding: Some("b".into()),
            message: "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: x".into(),
            reason: Reason::Invalid,
        };
        let status = json!({});
        let req = Request {
            resource: GroupVersion::new("telemetry.intel.com", "v1alpha1", "taspolicies"),
            subresource: "status",
            name: "scheduling-policy",
            ..node_update(&user, &status)
        };
        let err = denial_error(&req, &d);
        assert_eq!(err.code, 422);
        assert_eq!(err.reason, "Invalid");
        assert!(
            err.message.starts_with(
                "taspolicies.telemetry.intel.com \"scheduling-policy\" is forbidden: "
            ),
            "{}",
            err.message
        );
    }
}
