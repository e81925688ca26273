//! Create/get/list/update/delete for every built-in kind, with the API server's metadata rules.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    ConfigMap, Event, Namespace, Node, PersistentVolumeClaim, Pod, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;

use super::{code, pod, reason, sim};

/// Creates, reads, lists, replaces and deletes one object of kind K through `Api<K>`.
async fn roundtrip<K>(api: Api<K>, obj: serde_json::Value)
where
    K: Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(obj).unwrap();
    let created = api
        .create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("create {:?}: {e}", std::any::type_name::<K>()));
    let name = created.name_any();
    assert!(created.uid().is_some(), "uid set");
    assert!(
        created.meta().creation_timestamp.is_some(),
        "creationTimestamp set"
    );
    let got = api.get(&name).await.unwrap();
    assert_eq!(got.resource_version(), created.resource_version());
    let listed = api.list(&ListParams::default()).await.unwrap();
    assert!(listed.items.iter().any(|o| o.name_any() == name));
    let mut changed = got.clone();
    changed.labels_mut().insert("touched".into(), "yes".into());
    let replaced = api
        .replace(&name, &PostParams::default(), &changed)
        .await
        .unwrap();
    assert_eq!(
        replaced.labels().get("touched").map(String::as_str),
        Some("yes")
    );
    assert_ne!(replaced.resource_version(), got.resource_version());
    api.delete(&name, &DeleteParams::default()).await.unwrap();
    let gone = api.get(&name).await.unwrap_err();
    assert_eq!(code(&gone), 404);
}

#[tokio::test]
async fn every_builtin_kind_roundtrips_through_api() {
    let (_sim, c) = sim().await;
    let containers = json!([{"name": "c", "image": "busybox:1.36"}]);
    let template =
        json!({"metadata": {"labels": {"app": "x"}}, "spec": {"containers": containers}});
    roundtrip::<Namespace>(Api::all(c.clone()), json!({"metadata": {"name": "ns-a"}})).await;
    roundtrip::<Node>(Api::all(c.clone()), json!({"metadata": {"name": "node-a"}})).await;
    roundtrip::<Pod>(
        Api::default_namespaced(c.clone()),
        json!({"metadata": {"name": "p"}, "spec": {"containers": containers}}),
    )
    .await;
    roundtrip::<Event>(Api::default_namespaced(c.clone()), json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "Test"})).await;
    roundtrip::<k8s_openapi::api::events::v1::Event>(
        Api::default_namespaced(c.clone()),
        json!({"metadata": {"name": "e2"}, "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "t", "reportingInstance": "t", "action": "A", "reason": "R", "type": "Normal"}),
    )
    .await;
    roundtrip::<ConfigMap>(
        Api::default_namespaced(c.clone()),
        json!({"metadata": {"name": "cm"}, "data": {"a": "b"}}),
    )
    .await;
    roundtrip::<Secret>(
        Api::default_namespaced(c.clone()),
        json!({"metadata": {"name": "s"}, "stringData": {"a": "b"}}),
    )
    .await;
    roundtrip::<Service>(
        Api::default_namespaced(c.clone()),
        json!({"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 80}]}}),
    )
    .await;
    roundtrip::<PersistentVolumeClaim>(
        Api::default_namespaced(c.clone()),
        json!({"metadata": {"name": "pvc"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
    )
    .await;
    roundtrip::<ServiceAccount>(
        Api::default_namespaced(c.clone()),
        json!({"metadata": {"name": "sa"}}),
    )
    .await;
    let workload = |name: &str| json!({"metadata": {"name": name}, "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": template}});
    roundtrip::<Deployment>(Api::default_namespaced(c.clone()), workload("d")).await;
    roundtrip::<ReplicaSet>(Api::default_namespaced(c.clone()), workload("rs")).await;
    roundtrip::<StatefulSet>(Api::default_namespaced(c.clone()), workload("sts")).await;
    roundtrip::<DaemonSet>(Api::default_namespaced(c.clone()), workload("ds")).await;
    roundtrip::<Job>(
        Api::default_namespaced(c.clone()),
        json!({"metadata": {"name": "j"}, "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": containers}}}}),
    )
    .await;
    roundtrip::<Lease>(
        Api::default_namespaced(c.clone()),
        json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "me"}}),
    )
    .await;
    roundtrip::<PriorityClass>(
        Api::all(c.clone()),
        json!({"metadata": {"name": "pc"}, "value": 1000}),
    )
    .await;
    roundtrip::<PodDisruptionBudget>(
        Api::default_namespaced(c.clone()),
        json!({"metadata": {"name": "pdb"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "x"}}}}),
    )
    .await;
}

#[tokio::test]
async fn create_fills_in_server_fields_and_defaults() {
    let (_sim, c) = sim().await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let mut p = pod("", &[]);
    p.metadata.name = None;
    p.metadata.generate_name = Some("worker-".into());
    let created = pods.create(&PostParams::default(), &p).await.unwrap();
    let name = created.name_any();
    assert!(
        name.starts_with("worker-") && name.len() == "worker-".len() + 5,
        "generated name {name}"
    );
    assert_eq!(
        created.namespace().as_deref(),
        Some("default"),
        "namespace defaulted from the path"
    );
    let spec = created.spec.unwrap();
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
    assert_eq!(spec.scheduler_name.as_deref(), Some("default-scheduler"));
    let status = created.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    assert_eq!(status.qos_class.as_deref(), Some("BestEffort"));
    // Namespaces get their name label and Active phase.
    let ns: Namespace = Api::all(c.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "team-a"}})).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        ns.labels()
            .get("kubernetes.io/metadata.name")
            .map(String::as_str),
        Some("team-a")
    );
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Active"));
}

#[tokio::test]
async fn errors_are_status_objects_with_the_right_code_and_reason() {
    let (_sim, c) = sim().await;
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    let e = pods.get("nope").await.unwrap_err();
    assert_eq!((code(&e), reason(&e)), (404, "NotFound".to_string()));
    if let kube::Error::Api(s) = &e {
        assert_eq!(s.message, "pods \"nope\" not found");
    }
    pods.create(&PostParams::default(), &pod("dup", &[]))
        .await
        .unwrap();
    let e = pods
        .create(&PostParams::default(), &pod("dup", &[]))
        .await
        .unwrap_err();
    assert_eq!((code(&e), reason(&e)), (409, "AlreadyExists".to_string()));
    // Stale resourceVersion on update: 409 Conflict.
    let cur = pods.get("dup").await.unwrap();
    let mut a = cur.clone();
    a.labels_mut().insert("v".into(), "1".into());
    pods.replace("dup", &PostParams::default(), &a)
        .await
        .unwrap();
    let mut b = cur.clone();
    b.labels_mut().insert("v".into(), "2".into());
    let e = pods
        .replace("dup", &PostParams::default(), &b)
        .await
        .unwrap_err();
    assert_eq!((code(&e), reason(&e)), (409, "Conflict".to_string()));
    // Invalid: a pod without containers.
    let bad: Pod =
        serde_json::from_value(json!({"metadata": {"name": "bad"}, "spec": {"containers": []}}))
            .unwrap();
    let e = pods.create(&PostParams::default(), &bad).await.unwrap_err();
    assert_eq!((code(&e), reason(&e)), (422, "Invalid".to_string()));
    // Missing namespace.
    let other: Api<Pod> = Api::namespaced(c.clone(), "missing-ns");
    let e = other
        .create(&PostParams::default(), &pod("x", &[]))
        .await
        .unwrap_err();
    assert_eq!(code(&e), 404);
}

#[tokio::test]
async fn pod_spec_is_immutable_except_images_and_status_is_separate() {
    let (_sim, c) = sim().await;
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    pods.create(&PostParams::default(), &pod("p", &[]))
        .await
        .unwrap();
    let mut p = pods.get("p").await.unwrap();
    p.spec.as_mut().unwrap().containers[0].image = Some("busybox:1.37".into());
    pods.replace("p", &PostParams::default(), &p).await.unwrap();
    let mut p = pods.get("p").await.unwrap();
    p.spec.as_mut().unwrap().node_name = Some("node-1".into());
    let e = pods
        .replace("p", &PostParams::default(), &p)
        .await
        .unwrap_err();
    assert_eq!(code(&e), 422, "nodeName changes only through binding");
    // Status written through the main resource is ignored...
    let mut p = pods.get("p").await.unwrap();
    p.status.as_mut().unwrap().phase = Some("Running".into());
    let after = pods.replace("p", &PostParams::default(), &p).await.unwrap();
    assert_eq!(after.status.unwrap().phase.as_deref(), Some("Pending"));
    // ...and taken through the status subresource, which ignores everything else.
    let mut p = pods.get("p").await.unwrap();
    p.status.as_mut().unwrap().phase = Some("Running".into());
    p.labels_mut().insert("ignored".into(), "yes".into());
    let after = pods
        .replace_status("p", &PostParams::default(), &p)
        .await
        .unwrap();
    assert!(!after.labels().contains_key("ignored"));
    assert_eq!(after.status.unwrap().phase.as_deref(), Some("Running"));
}

#[tokio::test]
async fn generation_counts_spec_changes_only() {
    let (_sim, c) = sim().await;
    let deploys: Api<Deployment> = Api::default_namespaced(c.clone());
    let d: Deployment = serde_json::from_value(json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"app": "x"}},
        "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}})).unwrap();
    let d = deploys.create(&PostParams::default(), &d).await.unwrap();
    assert_eq!(d.metadata.generation, Some(1));
    let mut d2 = d.clone();
    d2.labels_mut().insert("a".into(), "b".into());
    let d2 = deploys
        .replace("d", &PostParams::default(), &d2)
        .await
        .unwrap();
    assert_eq!(d2.metadata.generation, Some(1));
    let mut d3 = d2.clone();
    d3.spec.as_mut().unwrap().replicas = Some(4);
    let d3 = deploys
        .replace("d", &PostParams::default(), &d3)
        .await
        .unwrap();
    assert_eq!(d3.metadata.generation, Some(2));
    // An update that changes nothing keeps the resourceVersion.
    let d4 = deploys
        .replace("d", &PostParams::default(), &d3)
        .await
        .unwrap();
    assert_eq!(d4.resource_version(), d3.resource_version());
}

/// The Priority admission plugin and PriorityClass validation as kube-apiserver v1.32 has them
/// (plugin/pkg/admission/priority/admission.go, pkg/apis/scheduling/validation).
#[tokio::test]
async fn pods_take_priority_from_their_priority_class() {
    let (_sim, c) = sim().await;
    let pcs: Api<PriorityClass> = Api::all(c.clone());
    let class = |v: serde_json::Value| -> PriorityClass { serde_json::from_value(v).unwrap() };
    let message = |e: kube::Error| match e {
        kube::Error::Api(s) => (s.code, s.message),
        other => panic!("expected an API error, got {other:?}"),
    };
    // The system classes exist from the start, as the API server's post-start hook makes them.
    let node_critical = pcs.get("system-node-critical").await.unwrap();
    assert_eq!(node_critical.value, 2_000_001_000);
    assert_eq!(
        node_critical.preemption_policy.as_deref(),
        Some("PreemptLowerPriority")
    );
    assert_eq!(
        pcs.get("system-cluster-critical").await.unwrap().value,
        2_000_000_000
    );
    pcs.create(
        &PostParams::default(),
        &class(
            json!({"metadata": {"name": "scavenger"}, "value": -100, "preemptionPolicy": "Never"}),
        ),
    )
    .await
    .unwrap();
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    let create = |name: &str, spec: serde_json::Value| {
        let mut p = pod(name, &[]);
        let mut merged = serde_json::to_value(p.spec.take().unwrap()).unwrap();
        merged
            .as_object_mut()
            .unwrap()
            .extend(spec.as_object().unwrap().clone());
        p.spec = Some(serde_json::from_value(merged).unwrap());
        let pods = pods.clone();
        async move { pods.create(&PostParams::default(), &p).await }
    };
    let spec = create("low", json!({"priorityClassName": "scavenger"}))
        .await
        .unwrap()
        .spec
        .unwrap();
    assert_eq!(spec.priority, Some(-100));
    assert_eq!(spec.preemption_policy.as_deref(), Some("Never"));
    // Giving the class's own value and policy is allowed; anything else is refused.
    let same =
        json!({"priorityClassName": "scavenger", "priority": -100, "preemptionPolicy": "Never"});
    create("same", same).await.unwrap();
    assert_eq!(
        message(
            create("nope", json!({"priorityClassName": "missing"}))
                .await
                .unwrap_err()
        ),
        (
            403,
            "pods \"nope\" is forbidden: no PriorityClass with name missing was found".into()
        )
    );
    assert_eq!(
        message(create("own", json!({"priorityClassName": "scavenger", "priority": 5})).await.unwrap_err()),
        (403, "pods \"own\" is forbidden: the integer value of priority (5) must not be provided in pod spec; \
               priority admission controller computed -100 from the given PriorityClass name".into())
    );
    // No class and no default class: priority 0 and PreemptLowerPriority, which a pod may not
    // contradict either.
    let spec = create("plain", json!({})).await.unwrap().spec.unwrap();
    assert_eq!((spec.priority, spec.priority_class_name), (Some(0), None));
    assert_eq!(
        spec.preemption_policy.as_deref(),
        Some("PreemptLowerPriority")
    );
    assert_eq!(
        message(create("never", json!({"preemptionPolicy": "Never"})).await.unwrap_err()),
        (403, "pods \"never\" is forbidden: the string value of PreemptionPolicy (Never) must not be provided in pod spec; \
               priority admission controller computed PreemptLowerPriority from the given PriorityClass name".into())
    );
    assert_eq!(
        message(create("five", json!({"priority": 5})).await.unwrap_err()).0,
        403
    );
    let critical = create(
        "critical",
        json!({"priorityClassName": "system-node-critical"}),
    );
    assert_eq!(
        critical.await.unwrap().spec.unwrap().priority,
        Some(2_000_001_000)
    );

    // One global default, which pods without a class then get, name included.
    pcs.create(
        &PostParams::default(),
        &class(json!({"metadata": {"name": "everyday"}, "value": 7, "globalDefault": true})),
    )
    .await
    .unwrap();
    let spec = create("defaulted", json!({})).await.unwrap().spec.unwrap();
    assert_eq!(spec.priority, Some(7));
    assert_eq!(spec.priority_class_name.as_deref(), Some("everyday"));
    let second = class(json!({"metadata": {"name": "other"}, "value": 8, "globalDefault": true}));
    assert_eq!(
        message(pcs.create(&PostParams::default(), &second).await.unwrap_err()),
        (403, "priorityclasses.scheduling.k8s.io \"other\" is forbidden: PriorityClass everyday is already marked as default. Only one default can exist".into())
    );

    // Reserved names, values above one billion, and a changed value are invalid.
    for (name, value) in [("system-mine", 5), ("huge", 1_000_000_001)] {
        let pc = class(json!({"metadata": {"name": name}, "value": value}));
        assert_eq!(
            message(pcs.create(&PostParams::default(), &pc).await.unwrap_err()).0,
            422,
            "{name}"
        );
    }
    let mut changed = pcs.get("scavenger").await.unwrap();
    changed.value = -50;
    let (code, text) = message(
        pcs.replace("scavenger", &PostParams::default(), &changed)
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 422);
    assert!(
        text.contains("value: Forbidden: may not be changed in an update."),
        "{text}"
    );
}

#[tokio::test]
async fn dry_run_validates_without_storing() {
    let (_sim, c) = sim().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(c.clone());
    let pp = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "dry"}})).unwrap();
    let answered = cms.create(&pp, &cm).await.unwrap();
    assert_eq!(answered.name_any(), "dry");
    assert_eq!(code(&cms.get("dry").await.unwrap_err()), 404);
}
