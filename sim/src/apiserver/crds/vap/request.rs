//! One admission request as a ValidatingAdmissionPolicy sees it: what is asked (operation,
//! resource, subresource, kind, namespace, name), by whom, and the objects, and the `request`
//! value its CEL expressions read (kube-apiserver's `admission/v1` AdmissionRequest without
//! `object` and `oldObject`, which are variables of their own).

use serde_json::{Map, Value, json};

use crate::apiserver::requests::auth::UserInfo;

/// The admission operation of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// POST, and a server-side apply that creates.
    Create,
    /// PUT and PATCH.
    Update,
    /// DELETE.
    Delete,
    /// A connect subresource (exec, attach, proxy); the sim serves none.
    Connect,
}

impl Operation {
    /// The name rules and `request.operation` use: `CREATE`, `UPDATE`, `DELETE`, `CONNECT`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "CREATE",
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
            Self::Connect => "CONNECT",
        }
    }
}

/// A group, version and resource (or kind).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupVersion {
    /// API group, empty for the core group.
    pub group: String,
    /// Version.
    pub version: String,
    /// The resource's plural (in [`Request::resource`]) or the kind (in [`Request::kind`]).
    pub name: String,
}

impl GroupVersion {
    /// `group`/`version`/`name`.
    pub fn new(group: &str, version: &str, name: &str) -> Self {
        Self {
            group: group.to_owned(),
            version: version.to_owned(),
            name: name.to_owned(),
        }
    }
}

/// One write as admission sees it.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// What the write does.
    pub operation: Operation,
    /// The resource addressed (the parent's for a subresource: `pods` for `pods/eviction`).
    pub resource: GroupVersion,
    /// The subresource (`status`, `eviction`, ...), empty for the resource itself.
    pub subresource: &'a str,
    /// The kind of the objects: the subresource's (`policy/v1` `Eviction`), else the resource's.
    pub kind: GroupVersion,
    /// The namespace, empty for cluster-scoped resources (a Namespace's own name for a
    /// Namespace, as kube-apiserver sets it).
    pub namespace: &'a str,
    /// The object's name.
    pub name: &'a str,
    /// The object after the write; `None` for DELETE.
    pub object: Option<&'a Value>,
    /// The object before the write; `None` for CREATE.
    pub old_object: Option<&'a Value>,
    /// Who asks.
    pub user: &'a UserInfo,
    /// `dryRun=All`.
    pub dry_run: bool,
}

impl Request<'_> {
    /// Whether the resource is the core group's Namespaces (cluster-scoped, though the request
    /// carries a namespace: their own name).
    pub fn is_namespace(&self) -> bool {
        self.resource.group.is_empty() && self.resource.name == "namespaces"
    }

    /// The `request` variable of CEL expressions, as kube-apiserver's `CreateAdmissionRequest`
    /// fills it (empty strings left out, as Go's `omitempty` does).
    pub fn to_json(&self) -> Value {
        let gvk =
            json!({"group": self.kind.group, "version": self.kind.version, "kind": self.kind.name});
        let gvr = json!({"group": self.resource.group, "version": self.resource.version, "resource": self.resource.name});
        let mut out = Map::new();
        // kube-apiserver leaves the uid of a policy's request empty (it is a webhook's).
        out.insert("uid".into(), json!(""));
        out.insert("kind".into(), gvk.clone());
        out.insert("resource".into(), gvr.clone());
        out.insert("requestKind".into(), gvk);
        out.insert("requestResource".into(), gvr);
        for (key, value) in [
            ("subResource", self.subresource),
            ("requestSubResource", self.subresource),
            ("name", self.name),
            ("namespace", self.namespace),
        ] {
            if !value.is_empty() {
                out.insert(key.into(), json!(value));
            }
        }
        out.insert("operation".into(), json!(self.operation.as_str()));
        out.insert("userInfo".into(), self.user.to_json());
        out.insert("dryRun".into(), json!(self.dry_run));
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_value_leaves_empty_strings_out_and_names_the_subresource() {
        let user = UserInfo {
            username: "system:serviceaccount:ns:agent".into(),
            ..UserInfo::default()
        };
        let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction"});
        let r = Request {
            operation: Operation::Create,
            resource: GroupVersion::new("", "v1", "pods"),
            subresource: "eviction",
            kind: GroupVersion::new("policy", "v1", "Eviction"),
            namespace: "shop",
            name: "web-1",
            object: Some(&eviction),
            old_object: None,
            user: &user,
            dry_run: false,
        };
        let v = r.to_json();
        assert_eq!(v["operation"], "CREATE");
        assert_eq!(v["resource"]["resource"], "pods");
        assert_eq!(v["subResource"], "eviction");
        assert_eq!(v["kind"]["kind"], "Eviction");
        assert_eq!(
            v["userInfo"],
            json!({"username": "system:serviceaccount:ns:agent"})
        );
        assert!(v.get("object").is_none(), "object is a variable of its own");
        let cluster = Request {
            subresource: "",
            namespace: "",
            ..r
        };
        let v = cluster.to_json();
        assert!(v.get("subResource").is_none() && v.get("namespace").is_none());
        assert!(!cluster.is_namespace());
    }
}
