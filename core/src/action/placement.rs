//! Which workload a pod belongs to, and whether an action's [`Placement`] applies to it: the
//! rule every replica's extender and the leader's executor share, so the pod the extender
//! steers is the pod the executor waits for.

use super::crd::{ObjectRef, Placement};

/// The label a Deployment's ReplicaSet puts on its pods.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
/// The label a StatefulSet puts on its pods.
pub const CONTROLLER_REVISION_HASH: &str = "controller-revision-hash";

/// What of a pod the rule looks at (the extender has it borrowed from the request body, the
/// executor from a Pod object).
#[derive(Debug, Clone, Copy)]
pub struct PodFacts<'a> {
    /// Namespace.
    pub namespace: &'a str,
    /// Name.
    pub name: &'a str,
    /// The controlling owner's kind and name.
    pub controller: Option<(&'a str, &'a str)>,
    /// The `pod-template-hash` or `controller-revision-hash` label.
    pub template_hash: Option<&'a str>,
}

/// The workload a pod belongs to: a StatefulSet that controls it, or the Deployment behind the
/// ReplicaSet that controls it (the ReplicaSet is named `<deployment>-<pod-template-hash>`).
/// A ReplicaSet no Deployment made (its name lacks the hash suffix) is its own workload.
pub fn workload_of(pod: &PodFacts<'_>) -> Option<ObjectRef> {
    let (kind, name) = pod.controller?;
    let (kind, name) = match kind {
        "StatefulSet" => ("StatefulSet", name),
        "ReplicaSet" => match pod
            .template_hash
            .and_then(|hash| name.strip_suffix(hash))
            .and_then(|rest| rest.strip_suffix('-'))
        {
            Some(deployment) if !deployment.is_empty() => ("Deployment", deployment),
            _ => ("ReplicaSet", name),
        },
        other => (other, name),
    };
    Some(ObjectRef::new(kind, pod.namespace, name))
}

/// Whether `placement` steers `pod`: the pod is the workload's, has the placement's template
/// hash (when one is set), is the named ordinal (when one is set) and did not exist when the
/// placement was made.
pub fn applies(placement: &Placement, pod: &PodFacts<'_>) -> bool {
    let w = &placement.workload;
    if w.namespace != pod.namespace {
        return false;
    }
    if let Some(name) = &placement.pod
        && name != pod.name
    {
        return false;
    }
    if placement.existing_pods.iter().any(|p| p == pod.name) {
        return false;
    }
    if !placement.pod_template_hash.is_empty()
        && pod.template_hash != Some(placement.pod_template_hash.as_str())
    {
        return false;
    }
    workload_of(pod).is_some_and(|o| o.kind == w.kind && o.name == w.name)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn pod<'a>(name: &'a str, controller: (&'a str, &'a str), hash: &'a str) -> PodFacts<'a> {
        PodFacts {
            namespace: "ul",
            name,
            controller: Some(controller),
            template_hash: Some(hash),
        }
    }

    fn deployment(name: &str) -> ObjectRef {
        ObjectRef::new("Deployment", "ul", name)
    }

    #[test]
    fn workloads_are_found_through_the_replicaset_name_and_hash() {
        let p = pod("test-a-5d9c7-x2x", ("ReplicaSet", "test-a-5d9c7"), "5d9c7");
        assert_eq!(workload_of(&p), Some(deployment("test-a")));
        let p = pod("rs-1", ("ReplicaSet", "standalone"), "5d9c7");
        assert_eq!(workload_of(&p).unwrap().kind, "ReplicaSet");
        let p = pod("test-c-0", ("StatefulSet", "test-c"), "test-c-7b8");
        assert_eq!(workload_of(&p).unwrap().kind, "StatefulSet");
        let bare = PodFacts {
            namespace: "ul",
            name: "p",
            controller: None,
            template_hash: None,
        };
        assert_eq!(workload_of(&bare), None);
    }

    #[test]
    fn a_placement_steers_only_new_pods_of_its_workload_and_hash() {
        let placement = Placement {
            workload: deployment("test-a"),
            pod_template_hash: "5d9c7".into(),
            pod: None,
            existing_pods: vec!["test-a-5d9c7-old".into()],
            node: "n7".into(),
        };
        assert!(applies(
            &placement,
            &pod("test-a-5d9c7-new", ("ReplicaSet", "test-a-5d9c7"), "5d9c7")
        ));
        // An existing pod, another hash, another workload, another namespace: not steered.
        assert!(!applies(
            &placement,
            &pod("test-a-5d9c7-old", ("ReplicaSet", "test-a-5d9c7"), "5d9c7")
        ));
        assert!(!applies(
            &placement,
            &pod("test-a-6e0d8-new", ("ReplicaSet", "test-a-6e0d8"), "6e0d8")
        ));
        assert!(!applies(
            &placement,
            &pod(
                "test-ab-5d9c7-new",
                ("ReplicaSet", "test-ab-5d9c7"),
                "5d9c7"
            )
        ));
        let mut other_ns = pod("test-a-5d9c7-new", ("ReplicaSet", "test-a-5d9c7"), "5d9c7");
        other_ns.namespace = "default";
        assert!(!applies(&placement, &other_ns));
    }

    #[test]
    fn a_statefulset_placement_names_its_ordinal() {
        let placement = Placement {
            workload: ObjectRef::new("StatefulSet", "ul", "test-c"),
            pod: Some("test-c-1".into()),
            node: "n6".into(),
            ..Default::default()
        };
        assert!(applies(
            &placement,
            &pod("test-c-1", ("StatefulSet", "test-c"), "test-c-1a")
        ));
        assert!(!applies(
            &placement,
            &pod("test-c-0", ("StatefulSet", "test-c"), "test-c-1a")
        ));
    }
}
