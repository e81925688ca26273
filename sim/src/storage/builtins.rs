//! The built-in kinds: one list, over k8s-openapi's types, of everything kube-apiserver 1.33
//! serves by default (GA groups and the beta ones it enables), with the few facts the types do
//! not carry (short names, categories, subresources, selectable fields, verbs).
//!
//! Group, version, kind, plural and scope come from each type's [`k8s_openapi::Resource`]
//! implementation. Everything else in the server that needs "the Rust type of this kind"
//! (typed decoding for field validation, the OpenAPI schemas) goes through [`with_type`], so a
//! kind added here is served, validated and described everywhere at once.
//!
//! Not served, as in a default kube-apiserver 1.33: alpha and beta-off-by-default groups
//! (`resource.k8s.io`, `storage.k8s.io/v1beta1` VolumeAttributesClass, `coordination.k8s.io`
//! LeaseCandidate, `certificates.k8s.io` ClusterTrustBundle, `storagemigration`,
//! `internal.apiserver.k8s.io`).

use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope, Resource, SubResourceScope};

/// Whether a resource scope puts objects in namespaces.
pub trait ScopeKind {
    /// True for namespaced resources.
    const NAMESPACED: bool;
}

impl ScopeKind for NamespaceResourceScope {
    const NAMESPACED: bool = true;
}

impl ScopeKind for ClusterResourceScope {
    const NAMESPACED: bool = false;
}

impl ScopeKind for SubResourceScope {
    const NAMESPACED: bool = true;
}

/// Which verbs a resource serves on its collection and objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verbs {
    /// create, delete, deletecollection, get, list, patch, update, watch.
    All,
    /// All but deletecollection (namespaces).
    NoDeleteCollection,
    /// create only: reviews and bindings, answered and not stored.
    CreateOnly,
    /// get and list only (componentstatuses).
    ReadOnly,
}

impl Verbs {
    /// Returns the verbs as discovery lists them.
    pub fn names(self) -> &'static [&'static str] {
        match self {
            Self::All => &[
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch",
            ],
            Self::NoDeleteCollection => &[
                "create", "delete", "get", "list", "patch", "update", "watch",
            ],
            Self::CreateOnly => &["create"],
            Self::ReadOnly => &["get", "list"],
        }
    }
}

/// What a kind needs beyond its type: the facts kube-apiserver's registry adds.
#[derive(Debug, Clone, Copy)]
pub struct Extra {
    /// Short names (`po`, `deploy`).
    pub short: &'static [&'static str],
    /// Categories (`all`, `api-extensions`).
    pub categories: &'static [&'static str],
    /// Whether the status subresource exists.
    pub status: bool,
    /// Whether the scale subresource exists (at `.spec.replicas` / `.status.replicas`).
    pub scale: bool,
    /// Field selectors beyond metadata.name and metadata.namespace.
    pub fields: &'static [&'static str],
    /// Served verbs.
    pub verbs: Verbs,
    /// The version objects are stored in, when the kind is served in several (None: this one).
    pub storage_version: Option<&'static str>,
}

/// A kind with nothing beyond its type.
pub const PLAIN: Extra = Extra {
    short: &[],
    categories: &[],
    status: false,
    scale: false,
    fields: &[],
    verbs: Verbs::All,
    storage_version: None,
};

/// A kind with a status subresource and nothing else.
const STATUS: Extra = Extra {
    status: true,
    ..PLAIN
};

/// A review: created, answered, never stored.
const REVIEW: Extra = Extra {
    verbs: Verbs::CreateOnly,
    ..PLAIN
};

/// One served built-in resource in one version.
#[derive(Debug, Clone, Copy)]
pub struct Builtin {
    /// API group, empty for core.
    pub group: &'static str,
    /// Version.
    pub version: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Plural resource name (URL segment).
    pub plural: &'static str,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// What the type does not say.
    pub extra: Extra,
}

impl Builtin {
    const fn of<T>(extra: Extra) -> Self
    where
        T: Resource,
        T::Scope: ScopeKind,
    {
        Self {
            group: T::GROUP,
            version: T::VERSION,
            kind: T::KIND,
            plural: T::URL_PATH_SEGMENT,
            namespaced: <T::Scope as ScopeKind>::NAMESPACED,
            extra,
        }
    }

    /// Returns the version objects of this resource are stored in.
    pub fn storage_version(&self) -> &'static str {
        self.extra.storage_version.unwrap_or(self.version)
    }
}

/// What every built-in type offers: its identity, JSON (de)serialisation and its schema.
pub trait BuiltinType:
    Resource + serde::de::DeserializeOwned + serde::Serialize + schemars::JsonSchema
{
}

impl<T> BuiltinType for T where
    T: Resource + serde::de::DeserializeOwned + serde::Serialize + schemars::JsonSchema
{
}

/// Code generic over a built-in type, run by [`with_type`] for the type of a kind.
pub trait TypeVisitor {
    /// What the visit returns.
    type Output;
    /// Runs with `T` the Rust type of the kind looked up.
    fn visit<T: BuiltinType>(self) -> Self::Output;
}

fn is<T: Resource>(group: &str, version: &str, kind: &str) -> bool {
    T::GROUP == group && T::VERSION == version && T::KIND == kind
}

macro_rules! builtins {
    (
        served: { $( $t:ty => $extra:expr ),* $(,)? }
        subresource_kinds: { $( $s:ty ),* $(,)? }
    ) => {
        /// Every built-in resource served, in kube-apiserver's group order (core first).
        pub const BUILTINS: &[Builtin] = &[ $( Builtin::of::<$t>($extra) ),* ];

        /// Runs `visitor` with the k8s-openapi type of `group/version, Kind=kind`: a served kind
        /// or a kind only subresources carry (Scale, Eviction). None for any other kind.
        pub fn with_type<V: TypeVisitor>(
            group: &str,
            version: &str,
            kind: &str,
            visitor: V,
        ) -> Option<V::Output> {
            $( if is::<$t>(group, version, kind) { return Some(visitor.visit::<$t>()); } )*
            $( if is::<$s>(group, version, kind) { return Some(visitor.visit::<$s>()); } )*
            None
        }

        /// Returns whether `kind` in `group` is a built-in kind (in any version).
        pub fn is_builtin_kind(group: &str, kind: &str) -> bool {
            $( (<$t as Resource>::GROUP == group && <$t as Resource>::KIND == kind) || )*
            $( (<$s as Resource>::GROUP == group && <$s as Resource>::KIND == kind) || )*
            false
        }
    };
}

use k8s_openapi::api::{
    admissionregistration::v1 as admission, apps::v1 as apps, authentication::v1 as authn,
    authorization::v1 as authz, autoscaling, batch::v1 as batch, certificates::v1 as certs,
    coordination::v1 as coordination, core::v1 as core, discovery::v1 as discovery,
    events::v1 as events, flowcontrol::v1 as flowcontrol, networking::v1 as networking,
    node::v1 as node, policy::v1 as policy, rbac::v1 as rbac, scheduling::v1 as scheduling,
    storage::v1 as storage,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apiregistration;

const ALL: &[&str] = &["all"];
const API_EXTENSIONS: &[&str] = &["api-extensions"];

builtins! {
    served: {
        core::Binding => REVIEW,
        core::ComponentStatus => Extra { short: &["cs"], verbs: Verbs::ReadOnly, ..PLAIN },
        core::ConfigMap => Extra { short: &["cm"], ..PLAIN },
        core::Endpoints => Extra { short: &["ep"], ..PLAIN },
        core::Event => Extra {
            short: &["ev"],
            fields: &[
                "involvedObject.kind",
                "involvedObject.namespace",
                "involvedObject.name",
                "involvedObject.uid",
                "involvedObject.apiVersion",
                "involvedObject.resourceVersion",
                "involvedObject.fieldPath",
                "reason",
                "reportingComponent",
                "source",
                "type",
            ],
            ..PLAIN
        },
        core::LimitRange => Extra { short: &["limits"], ..PLAIN },
        core::Namespace => Extra {
            short: &["ns"],
            status: true,
            fields: &["status.phase"],
            verbs: Verbs::NoDeleteCollection,
            ..PLAIN
        },
        core::Node => Extra { short: &["no"], status: true, fields: &["spec.unschedulable"], ..PLAIN },
        core::PersistentVolumeClaim => Extra { short: &["pvc"], status: true, ..PLAIN },
        core::PersistentVolume => Extra { short: &["pv"], status: true, ..PLAIN },
        core::Pod => Extra {
            short: &["po"],
            categories: ALL,
            status: true,
            fields: &[
                "spec.nodeName",
                "spec.restartPolicy",
                "spec.schedulerName",
                "spec.serviceAccountName",
                "spec.hostNetwork",
                "status.phase",
                "status.podIP",
                "status.nominatedNodeName",
            ],
            ..PLAIN
        },
        core::PodTemplate => PLAIN,
        core::ReplicationController => Extra {
            short: &["rc"],
            categories: ALL,
            status: true,
            scale: true,
            fields: &["status.replicas"],
            ..PLAIN
        },
        core::ResourceQuota => Extra { short: &["quota"], status: true, ..PLAIN },
        core::Secret => Extra { fields: &["type"], ..PLAIN },
        core::ServiceAccount => Extra { short: &["sa"], ..PLAIN },
        core::Service => Extra { short: &["svc"], categories: ALL, status: true, ..PLAIN },
        apiregistration::APIService => Extra { categories: API_EXTENSIONS, status: true, ..PLAIN },
        apps::ControllerRevision => PLAIN,
        apps::DaemonSet => Extra { short: &["ds"], categories: ALL, status: true, ..PLAIN },
        apps::Deployment => Extra {
            short: &["deploy"],
            categories: ALL,
            status: true,
            scale: true,
            ..PLAIN
        },
        apps::ReplicaSet => Extra {
            short: &["rs"],
            categories: ALL,
            status: true,
            scale: true,
            fields: &["status.replicas"],
            ..PLAIN
        },
        apps::StatefulSet => Extra {
            short: &["sts"],
            categories: ALL,
            status: true,
            scale: true,
            ..PLAIN
        },
        events::Event => Extra { short: &["ev"], ..PLAIN },
        authn::SelfSubjectReview => REVIEW,
        authn::TokenReview => REVIEW,
        authz::LocalSubjectAccessReview => REVIEW,
        authz::SelfSubjectAccessReview => REVIEW,
        authz::SelfSubjectRulesReview => REVIEW,
        authz::SubjectAccessReview => REVIEW,
        autoscaling::v2::HorizontalPodAutoscaler => Extra {
            short: &["hpa"],
            categories: ALL,
            status: true,
            ..PLAIN
        },
        batch::CronJob => Extra { short: &["cj"], categories: ALL, status: true, ..PLAIN },
        batch::Job => Extra {
            categories: ALL,
            status: true,
            fields: &["status.successful"],
            ..PLAIN
        },
        certs::CertificateSigningRequest => Extra {
            short: &["csr"],
            status: true,
            fields: &["spec.signerName"],
            ..PLAIN
        },
        networking::IngressClass => PLAIN,
        networking::Ingress => Extra { short: &["ing"], status: true, ..PLAIN },
        networking::IPAddress => Extra { short: &["ip"], ..PLAIN },
        networking::NetworkPolicy => Extra { short: &["netpol"], ..PLAIN },
        networking::ServiceCIDR => STATUS,
        policy::PodDisruptionBudget => Extra { short: &["pdb"], status: true, ..PLAIN },
        rbac::ClusterRoleBinding => PLAIN,
        rbac::ClusterRole => PLAIN,
        rbac::RoleBinding => PLAIN,
        rbac::Role => PLAIN,
        storage::CSIDriver => PLAIN,
        storage::CSINode => PLAIN,
        storage::CSIStorageCapacity => PLAIN,
        storage::StorageClass => Extra { short: &["sc"], ..PLAIN },
        storage::VolumeAttachment => STATUS,
        admission::MutatingWebhookConfiguration => Extra { categories: API_EXTENSIONS, ..PLAIN },
        admission::ValidatingAdmissionPolicy => Extra {
            categories: API_EXTENSIONS,
            status: true,
            ..PLAIN
        },
        admission::ValidatingAdmissionPolicyBinding => Extra { categories: API_EXTENSIONS, ..PLAIN },
        admission::ValidatingWebhookConfiguration => Extra { categories: API_EXTENSIONS, ..PLAIN },
        apiextensions::CustomResourceDefinition => Extra {
            short: &["crd", "crds"],
            categories: API_EXTENSIONS,
            status: true,
            ..PLAIN
        },
        scheduling::PriorityClass => Extra { short: &["pc"], ..PLAIN },
        coordination::Lease => PLAIN,
        node::RuntimeClass => PLAIN,
        discovery::EndpointSlice => PLAIN,
        flowcontrol::FlowSchema => STATUS,
        flowcontrol::PriorityLevelConfiguration => STATUS,
    }
    subresource_kinds: {
        autoscaling::v1::Scale,
        policy::Eviction,
        authn::TokenRequest,
    }
}

/// Looks up a served built-in resource by group, version and plural.
pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static Builtin> {
    BUILTINS
        .iter()
        .find(|b| b.group == group && b.version == version && b.plural == plural)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_comes_from_the_types() {
        let pv = find("", "v1", "persistentvolumes").expect("persistentvolumes served");
        assert_eq!(pv.kind, "PersistentVolume");
        assert!(!pv.namespaced);
        let cap = find("storage.k8s.io", "v1", "csistoragecapacities").expect("served");
        assert!(cap.namespaced);
    }

    #[test]
    fn every_resource_is_listed_once() {
        let mut seen = std::collections::HashSet::new();
        for b in BUILTINS {
            assert!(
                seen.insert((b.group, b.version, b.plural)),
                "{}/{} {} listed twice",
                b.group,
                b.version,
                b.plural
            );
        }
    }

    struct KindName;
    impl TypeVisitor for KindName {
        type Output = &'static str;
        fn visit<T: BuiltinType>(self) -> &'static str {
            T::KIND
        }
    }

    #[test]
    fn types_are_found_for_served_and_subresource_kinds() {
        assert_eq!(with_type("", "v1", "Pod", KindName), Some("Pod"));
        assert_eq!(
            with_type("autoscaling", "v1", "Scale", KindName),
            Some("Scale")
        );
        assert_eq!(
            with_type("resource.k8s.io", "v1beta1", "ResourceClaim", KindName),
            None
        );
        assert!(is_builtin_kind("policy", "Eviction"));
        assert!(!is_builtin_kind("example.com", "Widget"));
    }
}
