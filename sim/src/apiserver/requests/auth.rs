//! Authentication and authorization from a table the test or dev cluster sets up: bearer
//! tokens map to users, and rules grant verbs on resources. TokenReview and
//! SubjectAccessReview answer from the same table.
//!
//! With no tokens configured every request is anonymous-admin; with no rules configured every
//! authenticated user may do everything (like an RBAC cluster with a cluster-admin binding).
//!
//! [`AuditLog`] records every authorization decision on resource requests once enabled, so a
//! test can check a component's RBAC from what the component really asked: nothing denied,
//! every rule used.
//!
//! A token may stand for a service account token bound to a Pod ([`UserInfo::bound_to_pod`]):
//! its user then carries the `authentication.kubernetes.io/*` extra keys kube-apiserver 1.30+
//! adds for such tokens (the Pod's and its Node's name and uid, the credential id), which
//! ValidatingAdmissionPolicies read from `request.userInfo.extra` and TokenReview answers.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};

use http::{HeaderMap, Method, header};
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::error::{ApiError, ApiResult};

/// An authenticated identity.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    /// User name (`system:serviceaccount:ns:name` for service accounts).
    pub username: String,
    /// UID.
    pub uid: String,
    /// Groups.
    pub groups: Vec<String>,
    /// Extra attributes by key, e.g. [`NODE_NAME_EXTRA`] for a token bound to a Pod on a Node.
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The audience of tokens reviewed without one: kube-apiserver's `--api-audiences`, which
/// defaults to its service-account issuer (the real control plane's, kubeadm's).
pub const API_AUDIENCE: &str = crate::control_plane::SERVICE_ACCOUNT_ISSUER;

/// The group of every authenticated user.
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";

/// The extra key of a bound service account token naming the Node its Pod runs on.
pub const NODE_NAME_EXTRA: &str = "authentication.kubernetes.io/node-name";
/// The extra key of a bound service account token with the uid of that Node.
pub const NODE_UID_EXTRA: &str = "authentication.kubernetes.io/node-uid";
/// The extra key of a bound service account token naming its Pod.
pub const POD_NAME_EXTRA: &str = "authentication.kubernetes.io/pod-name";
/// The extra key of a bound service account token with its Pod's uid.
pub const POD_UID_EXTRA: &str = "authentication.kubernetes.io/pod-uid";
/// The extra key identifying the token itself (`JTI=<id>`).
pub const CREDENTIAL_ID_EXTRA: &str = "authentication.kubernetes.io/credential-id";

/// The Pod (and its Node) a service account token is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodBinding {
    /// The Pod's name.
    pub pod_name: String,
    /// The Pod's uid.
    pub pod_uid: String,
    /// The Node the Pod is bound to (`spec.nodeName`).
    pub node_name: String,
    /// That Node's uid.
    pub node_uid: String,
}

impl UserInfo {
    /// The identity every token of service account `namespace/name` authenticates as: its user
    /// name and the groups kube-apiserver gives every service account.
    pub fn service_account(namespace: &str, name: &str) -> Self {
        Self {
            username: format!("system:serviceaccount:{namespace}:{name}"),
            uid: format!("uid-{namespace}-{name}"),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".into(),
            ],
            extra: BTreeMap::new(),
        }
    }

    /// This identity as a token bound to a Pod authenticates in kube-apiserver 1.30+: with the
    /// Pod's and its Node's name and uid, and a credential id, as extra keys.
    pub fn bound_to_pod(mut self, binding: &PodBinding) -> Self {
        let one = |v: &str| vec![v.to_owned()];
        self.extra
            .insert(POD_NAME_EXTRA.into(), one(&binding.pod_name));
        self.extra
            .insert(POD_UID_EXTRA.into(), one(&binding.pod_uid));
        self.extra
            .insert(NODE_NAME_EXTRA.into(), one(&binding.node_name));
        self.extra
            .insert(NODE_UID_EXTRA.into(), one(&binding.node_uid));
        self.extra.insert(
            CREDENTIAL_ID_EXTRA.into(),
            one(&format!("JTI={}", uuid::Uuid::new_v4())),
        );
        self
    }

    /// The user as `authentication.k8s.io/v1` UserInfo JSON (TokenReview, SelfSubjectReview,
    /// an admission request): empty fields left out, as Go's `omitempty` does.
    pub fn to_json(&self) -> Value {
        let mut out = serde_json::Map::new();
        if !self.username.is_empty() {
            out.insert("username".into(), json!(self.username));
        }
        if !self.uid.is_empty() {
            out.insert("uid".into(), json!(self.uid));
        }
        if !self.groups.is_empty() {
            out.insert("groups".into(), json!(self.groups));
        }
        if !self.extra.is_empty() {
            out.insert("extra".into(), json!(self.extra));
        }
        Value::Object(out)
    }
}

/// A permission: who may do which verbs on which resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// User names or `group:<name>` entries this rule applies to; `*` for anyone.
    pub subjects: Vec<String>,
    /// Verbs (`get`, `list`, ...), `*` for all.
    pub verbs: Vec<String>,
    /// API groups (`""` for core), `*` for all.
    pub api_groups: Vec<String>,
    /// Resources, optionally `resource/subresource`; `*` for all.
    pub resources: Vec<String>,
    /// Namespaces the rule is limited to; empty for all (cluster-wide).
    pub namespaces: Vec<String>,
}

/// What a request wants to do, for authorization.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Attributes {
    /// Verb.
    pub verb: String,
    /// API group.
    pub group: String,
    /// Resource (plural).
    pub resource: String,
    /// Subresource, empty if none.
    pub subresource: String,
    /// Namespace, empty if cluster-wide.
    pub namespace: String,
    /// Object name, empty if none.
    pub name: String,
}

/// The token and permission table.
#[derive(Debug, Clone, Default)]
pub struct Auth {
    /// Bearer token → user. Empty: authentication is off.
    pub tokens: HashMap<String, UserInfo>,
    /// Permissions. Empty: every authenticated user may do everything.
    pub rules: Vec<Rule>,
}

impl Auth {
    /// Returns the requesting user: anonymous admin when authentication is off.
    pub fn authenticate(&self, headers: &HeaderMap) -> ApiResult<Option<UserInfo>> {
        if self.tokens.is_empty() {
            return Ok(None);
        }
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(ApiError::unauthorized)?;
        self.user(token.trim())
            .map(Some)
            .ok_or_else(ApiError::unauthorized)
    }

    /// The user `token` authenticates as: its entry, in group `system:authenticated` too, as
    /// kube-apiserver puts every authenticated user (its authenticated-group adder).
    fn user(&self, token: &str) -> Option<UserInfo> {
        let mut user = self.tokens.get(token)?.clone();
        if !user.groups.iter().any(|g| g == AUTHENTICATED_GROUP) {
            user.groups.push(AUTHENTICATED_GROUP.into());
        }
        Some(user)
    }

    /// Returns whether `user` may do `attrs`.
    pub fn allowed(&self, user: &UserInfo, attrs: &Attributes) -> bool {
        if self.rules.is_empty() || user.groups.iter().any(|g| g == "system:masters") {
            return true;
        }
        // Every authenticated user may ask what it may do, as the bootstrap ClusterRole
        // `system:basic-user` grants in every cluster.
        if attrs.verb == "create"
            && matches!(
                (attrs.group.as_str(), attrs.resource.as_str()),
                (
                    "authorization.k8s.io",
                    "selfsubjectaccessreviews" | "selfsubjectrulesreviews"
                ) | ("authentication.k8s.io", "selfsubjectreviews")
            )
        {
            return true;
        }
        let resource = if attrs.subresource.is_empty() {
            attrs.resource.clone()
        } else {
            format!("{}/{}", attrs.resource, attrs.subresource)
        };
        self.rules.iter().any(|r| {
            let subject = r.subjects.iter().any(|s| {
                s == "*"
                    || *s == user.username
                    || s.strip_prefix("group:")
                        .is_some_and(|g| user.groups.iter().any(|ug| ug == g))
            });
            let any = |list: &[String], v: &str| list.iter().any(|x| x == "*" || x == v);
            subject
                && any(&r.verbs, &attrs.verb)
                && any(&r.api_groups, &attrs.group)
                && any(&r.resources, &resource)
                && (r.namespaces.is_empty() || r.namespaces.contains(&attrs.namespace))
        })
    }

    /// Authorizes a request, answering 403 with kube-apiserver's message when denied.
    pub fn authorize(&self, user: Option<&UserInfo>, attrs: &Attributes) -> ApiResult<()> {
        let Some(user) = user else { return Ok(()) };
        if self.allowed(user, attrs) {
            return Ok(());
        }
        let resource = if attrs.subresource.is_empty() {
            format!("resource \"{}\"", attrs.resource)
        } else {
            format!("resource \"{}/{}\"", attrs.resource, attrs.subresource)
        };
        let scope = if attrs.namespace.is_empty() {
            "at the cluster scope".to_owned()
        } else {
            format!("in the namespace \"{}\"", attrs.namespace)
        };
        let target = if attrs.name.is_empty() {
            attrs.resource.clone()
        } else {
            format!("{} \"{}\"", attrs.resource, attrs.name)
        };
        Err(ApiError::forbidden(format!(
            "{target} is forbidden: User \"{}\" cannot {} {resource} in API group \"{}\" {scope}",
            user.username, attrs.verb, attrs.group
        ))
        .with_details(json!({"name": attrs.name, "group": attrs.group, "kind": attrs.resource})))
    }

    /// Answers a TokenReview: fills in `status` as kube-apiserver does. A token it accepts
    /// answers the audiences it is valid for: the review's, else the API server's own
    /// ([`API_AUDIENCE`]; the table's tokens hold for any audience). One it rejects answers
    /// an empty user and no `authenticated` (Go's `omitempty` drops the false).
    pub fn token_review(&self, mut review: Value) -> Value {
        let token = review
            .pointer("/spec/token")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let audiences = match review.pointer("/spec/audiences") {
            Some(Value::Array(a)) if !a.is_empty() => Value::Array(a.clone()),
            _ => json!([API_AUDIENCE]),
        };
        let status = match self.user(token) {
            Some(u) => json!({"authenticated": true, "user": u.to_json(), "audiences": audiences}),
            None => json!({"user": {}, "error": "invalid bearer token"}),
        };
        review["status"] = status;
        review
    }

    /// Answers a SubjectAccessReview (or, with `requester`, a SelfSubjectAccessReview).
    pub fn access_review(&self, mut review: Value, requester: Option<&UserInfo>) -> Value {
        let spec = review.get("spec").cloned().unwrap_or(Value::Null);
        let user = match requester {
            Some(u) => u.clone(),
            None => UserInfo {
                username: spec
                    .get("user")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                uid: spec
                    .get("uid")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                groups: spec
                    .get("groups")
                    .and_then(Value::as_array)
                    .map(|g| {
                        g.iter()
                            .filter_map(|x| x.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default(),
                extra: spec
                    .get("extra")
                    .and_then(|e| serde_json::from_value(e.clone()).ok())
                    .unwrap_or_default(),
            },
        };
        let ra = spec
            .get("resourceAttributes")
            .cloned()
            .unwrap_or(Value::Null);
        let s = |k: &str| {
            ra.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let attrs = Attributes {
            verb: s("verb"),
            group: s("group"),
            resource: s("resource"),
            subresource: s("subresource"),
            namespace: s("namespace"),
            name: s("name"),
        };
        let allowed = !ra.is_null() && self.allowed(&user, &attrs);
        // Like the RBAC authorizer: a reason when allowed, none when denied.
        review["status"] = if allowed {
            json!({"allowed": true, "reason": "allowed by the sim's permission table"})
        } else {
            json!({"allowed": false})
        };
        review
    }
}

// === impl AuditLog ===

/// One authorization decision: who asked to do what, and whether the table allowed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The authenticated user name.
    pub user: String,
    /// What was asked.
    pub attributes: Attributes,
    /// Whether [`Auth::allowed`] said yes.
    pub allowed: bool,
}

/// Every authorization decision on resource requests by authenticated users, in arrival order.
/// Off until [`AuditLog::enable`] (a long-running dev cluster would grow it without bound).
#[derive(Debug, Default)]
pub struct AuditLog {
    enabled: AtomicBool,
    decisions: Mutex<Vec<Decision>>,
}

impl AuditLog {
    /// Starts recording.
    pub fn enable(&self) {
        self.enabled.store(true, Ordering::Relaxed);
    }

    /// Returns whether decisions are recorded.
    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Returns the decisions recorded so far.
    pub fn decisions(&self) -> Vec<Decision> {
        self.decisions.lock().clone()
    }

    /// Records what `auth` decides for `user` asking `attributes` (when enabled).
    pub fn record(&self, auth: &Auth, user: &UserInfo, attributes: Attributes) {
        if !self.is_enabled() {
            return;
        }
        let allowed = auth.allowed(user, &attributes);
        self.decisions.lock().push(Decision {
            user: user.username.clone(),
            attributes,
            allowed,
        });
    }
}

/// Returns a resource request's authorization verb as kube-apiserver names it (`get`, `list`,
/// `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`); `None` for a method
/// no verb maps to.
pub fn request_verb(method: &Method, has_name: bool, is_watch: bool) -> Option<&'static str> {
    Some(match (method, has_name) {
        (&Method::GET, true) => "get",
        (&Method::GET, false) if is_watch => "watch",
        (&Method::GET, false) => "list",
        (&Method::POST, _) => "create",
        (&Method::PUT, _) => "update",
        (&Method::PATCH, _) => "patch",
        (&Method::DELETE, true) => "delete",
        (&Method::DELETE, false) => "deletecollection",
        _ => return None,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn auth() -> Auth {
        let mut tokens = HashMap::new();
        tokens.insert(
            "t1".to_string(),
            UserInfo {
                username: "alice".into(),
                uid: "u1".into(),
                groups: vec!["ops".into()],
                extra: BTreeMap::new(),
            },
        );
        Auth {
            tokens,
            rules: vec![Rule {
                subjects: vec!["group:ops".into()],
                verbs: vec!["get".into(), "list".into()],
                api_groups: vec!["".into()],
                resources: vec!["pods".into()],
                namespaces: vec!["default".into()],
            }],
        }
    }

    #[test]
    fn bearer_tokens_authenticate() {
        let a = auth();
        let mut h = HeaderMap::new();
        assert_eq!(a.authenticate(&h).unwrap_err().code, 401);
        h.insert(header::AUTHORIZATION, "Bearer t1".parse().unwrap());
        let alice = a.authenticate(&h).unwrap().unwrap();
        assert_eq!(alice.username, "alice");
        assert_eq!(
            alice.groups.last().unwrap(),
            AUTHENTICATED_GROUP,
            "as kube-apiserver"
        );
        h.insert(header::AUTHORIZATION, "Bearer nope".parse().unwrap());
        assert_eq!(a.authenticate(&h).unwrap_err().code, 401);
    }

    #[test]
    fn rules_grant_by_group_verb_resource_and_namespace() {
        let a = auth();
        let alice = a.tokens["t1"].clone();
        let attrs = |verb: &str, ns: &str| Attributes {
            verb: verb.into(),
            resource: "pods".into(),
            namespace: ns.into(),
            ..Default::default()
        };
        assert!(a.allowed(&alice, &attrs("list", "default")));
        assert!(!a.allowed(&alice, &attrs("delete", "default")));
        assert!(!a.allowed(&alice, &attrs("list", "other")));
        let err = a
            .authorize(Some(&alice), &attrs("delete", "default"))
            .unwrap_err();
        assert_eq!(err.code, 403);
        assert!(
            err.message
                .contains("User \"alice\" cannot delete resource \"pods\""),
            "{}",
            err.message
        );
    }

    #[test]
    fn reviews_answer_from_the_table() {
        let a = auth();
        let tr = a.token_review(json!({"spec": {"token": "t1"}}));
        assert_eq!(tr["status"]["user"]["username"], "alice");
        assert_eq!(tr["status"]["audiences"], json!([API_AUDIENCE]));
        let tr = a.token_review(json!({"spec": {"token": "t1", "audiences": ["api"]}}));
        assert_eq!(tr["status"]["audiences"], json!(["api"]));
        let tr = a.token_review(json!({"spec": {"token": "nope"}}));
        assert_eq!(
            tr["status"],
            json!({"user": {}, "error": "invalid bearer token"}),
            "kube-apiserver's answer"
        );
        assert!(
            tr["status"]["user"].get("extra").is_none(),
            "no extra: none sent"
        );
        let sar = a.access_review(
            json!({"spec": {"user": "bob", "groups": ["ops"], "resourceAttributes": {"verb": "get", "resource": "pods", "namespace": "default"}}}),
            None,
        );
        assert_eq!(sar["status"]["allowed"], true);
    }

    #[test]
    fn tokens_bound_to_a_pod_carry_its_node_in_their_extra_keys() {
        let agent = UserInfo::service_account("telemesh-system", "telemesh-agent").bound_to_pod(
            &PodBinding {
                pod_name: "telemesh-agent-x7k2p".into(),
                pod_uid: "pod-uid".into(),
                node_name: "node-a".into(),
                node_uid: "node-uid".into(),
            },
        );
        assert_eq!(
            agent.username,
            "system:serviceaccount:telemesh-system:telemesh-agent"
        );
        assert_eq!(agent.extra[NODE_NAME_EXTRA], ["node-a"]);
        assert_eq!(agent.extra[NODE_UID_EXTRA], ["node-uid"]);
        assert_eq!(agent.extra[POD_NAME_EXTRA], ["telemesh-agent-x7k2p"]);
        assert_eq!(agent.extra[POD_UID_EXTRA], ["pod-uid"]);
        assert!(agent.extra[CREDENTIAL_ID_EXTRA][0].starts_with("JTI="));
        let a = Auth {
            tokens: HashMap::from([("bound".to_string(), agent)]),
            rules: Vec::new(),
        };
        let tr = a.token_review(json!({"spec": {"token": "bound"}}));
        assert_eq!(
            tr["status"]["user"]["extra"][NODE_NAME_EXTRA],
            json!(["node-a"]),
            "{tr}"
        );
    }

    #[test]
    fn the_audit_log_records_decisions_once_enabled() {
        let a = auth();
        let alice = a.tokens["t1"].clone();
        let log = AuditLog::default();
        let attrs = |verb: &str, name: &str| Attributes {
            verb: verb.into(),
            resource: "pods".into(),
            namespace: "default".into(),
            name: name.into(),
            ..Attributes::default()
        };
        assert_eq!(request_verb(&Method::GET, false, true), Some("watch"));
        assert_eq!(request_verb(&Method::DELETE, true, false), Some("delete"));
        log.record(&a, &alice, attrs("watch", ""));
        assert!(log.decisions().is_empty(), "off by default");
        log.enable();
        log.record(&a, &alice, attrs("watch", ""));
        log.record(&a, &alice, attrs("delete", "p"));
        let d = log.decisions();
        assert_eq!(d.len(), 2);
        assert_eq!(
            (d[0].attributes.verb.as_str(), d[0].allowed),
            ("watch", false)
        );
        assert_eq!(
            (d[1].attributes.verb.as_str(), d[1].allowed),
            ("delete", false)
        );
        assert_eq!(d[0].user, "alice");
        assert_eq!(request_verb(&Method::OPTIONS, false, false), None);
    }
}
