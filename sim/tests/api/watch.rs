//! Watches: kube-runtime's watcher and reflector, resumption, bookmarks, 410 Gone, timeouts,
//! filtered watches and per-object event order.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;
use telemesh_sim::SimConfig;

use super::{eventually, pod, sim, sim_with};

fn cm(name: &str, v: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"v": v}})).unwrap()
}

#[tokio::test]
async fn raw_watch_sees_added_modified_deleted_in_order() {
    let (_sim, c) = sim().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(c.clone());
    let start = cms
        .list(&Default::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = cms
        .watch(&WatchParams::default().timeout(10), &start)
        .await
        .unwrap()
        .boxed();
    cms.create(&PostParams::default(), &cm("a", "1"))
        .await
        .unwrap();
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "2"}})),
    )
    .await
    .unwrap();
    cms.delete("a", &DeleteParams::default()).await.unwrap();
    let mut seen = Vec::new();
    let mut last_rv = 0u64;
    while seen.len() < 3 {
        let ev = tokio::time::timeout(Duration::from_secs(5), stream.try_next())
            .await
            .expect("event in time")
            .unwrap()
            .unwrap();
        let (kind, obj) = match ev {
            WatchEvent::Added(o) => ("ADDED", o),
            WatchEvent::Modified(o) => ("MODIFIED", o),
            WatchEvent::Deleted(o) => ("DELETED", o),
            other => panic!("unexpected {other:?}"),
        };
        let rv: u64 = obj.resource_version().unwrap().parse().unwrap();
        assert!(rv > last_rv, "resourceVersions increase");
        last_rv = rv;
        seen.push((kind, obj.data.unwrap()["v"].clone()));
    }
    assert_eq!(
        seen,
        vec![
            ("ADDED", "1".to_string()),
            ("MODIFIED", "2".to_string()),
            ("DELETED", "2".to_string())
        ]
    );
}

#[tokio::test]
async fn watch_resumes_from_a_resource_version() {
    let (_sim, c) = sim().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(c.clone());
    let a = cms
        .create(&PostParams::default(), &cm("a", "1"))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &cm("b", "1"))
        .await
        .unwrap();
    let mut stream = cms
        .watch(
            &WatchParams::default().timeout(5),
            &a.resource_version().unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    match stream.try_next().await.unwrap().unwrap() {
        WatchEvent::Added(o) => {
            assert_eq!(o.name_any(), "b", "only what came after the given version")
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn too_old_resource_version_gets_410_expired() {
    let mut config = SimConfig::default();
    config.server.history_capacity = 2;
    let (_sim, c) = sim_with(config).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(c.clone());
    let first = cms
        .create(&PostParams::default(), &cm("a", "0"))
        .await
        .unwrap();
    for i in 1..5 {
        cms.patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"v": i.to_string()}})),
        )
        .await
        .unwrap();
    }
    let mut stream = cms
        .watch(
            &WatchParams::default().timeout(5),
            &first.resource_version().unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    match stream.try_next().await.unwrap().unwrap() {
        WatchEvent::Error(e) => {
            assert_eq!(e.code, 410);
            assert_eq!(e.reason, "Expired");
        }
        other => panic!("expected 410, got {other:?}"),
    }
}

#[tokio::test]
async fn bookmarks_come_when_asked() {
    let mut config = SimConfig::default();
    config.server.bookmark_interval = Duration::from_millis(100);
    let (_sim, c) = sim_with(config).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(c.clone());
    let created = cms
        .create(&PostParams::default(), &cm("a", "0"))
        .await
        .unwrap();
    let mut stream = cms
        .watch(
            &WatchParams {
                bookmarks: true,
                ..Default::default()
            }
            .timeout(5),
            &created.resource_version().unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    let ev = tokio::time::timeout(Duration::from_secs(3), stream.try_next())
        .await
        .expect("bookmark in time")
        .unwrap()
        .unwrap();
    match ev {
        WatchEvent::Bookmark(b) => {
            let rv: u64 = b.metadata.resource_version.parse().unwrap();
            assert!(rv >= created.resource_version().unwrap().parse::<u64>().unwrap());
        }
        other => panic!("expected a bookmark, got {other:?}"),
    }
}

#[tokio::test]
async fn watch_ends_after_timeout_seconds() {
    let (_sim, c) = sim().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(c.clone());
    let mut stream = cms
        .watch(&WatchParams::default().timeout(1), "0")
        .await
        .unwrap()
        .boxed();
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(ev) = stream.try_next().await.unwrap() {
            drop(ev);
        }
    })
    .await;
    assert!(
        ended.is_ok(),
        "the server closed the watch after timeoutSeconds"
    );
}

#[tokio::test]
async fn field_selected_watch_sees_only_its_node_and_pods_leaving_as_deleted() {
    let (_sim, c) = sim().await;
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    let wp = WatchParams::default()
        .fields("spec.nodeName=node-1")
        .timeout(10);
    let mut stream = pods.watch(&wp, "0").await.unwrap().boxed();
    pods.create(&PostParams::default(), &pod("elsewhere", &[]))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("mine", &[]))
        .await
        .unwrap();
    for name in ["elsewhere", "mine"] {
        let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": if name == "mine" { "node-1" } else { "node-2" }}});
        let _: kube::core::Status = pods
            .create_subresource("binding", name, &PostParams::default(), &binding)
            .await
            .unwrap();
    }
    match stream.try_next().await.unwrap().unwrap() {
        WatchEvent::Added(p) => assert_eq!(
            p.name_any(),
            "mine",
            "a pod bound to node-1 arrives as ADDED"
        ),
        other => panic!("unexpected {other:?}"),
    }
    // No kubelet runs here to finish a graceful deletion: delete at once, as `--force` does.
    pods.delete("mine", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    match stream.try_next().await.unwrap().unwrap() {
        WatchEvent::Deleted(p) => assert_eq!(p.name_any(), "mine"),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn label_selected_watch_turns_leaving_the_selector_into_deleted() {
    let (_sim, c) = sim().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(c.clone());
    let mut stream = cms
        .watch(&WatchParams::default().labels("team=a").timeout(10), "0")
        .await
        .unwrap()
        .boxed();
    cms.create(&PostParams::default(), &cm("x", "0"))
        .await
        .unwrap();
    cms.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"team": "a"}}})),
    )
    .await
    .unwrap();
    cms.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"team": "b"}}})),
    )
    .await
    .unwrap();
    let mut kinds = Vec::new();
    for _ in 0..2 {
        kinds.push(match stream.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(_) => "ADDED",
            WatchEvent::Deleted(_) => "DELETED",
            WatchEvent::Modified(_) => "MODIFIED",
            _ => "OTHER",
        });
    }
    assert_eq!(kinds, ["ADDED", "DELETED"]);
}

#[tokio::test]
async fn runtime_watcher_and_reflector_track_the_store() {
    let (_sim, c) = sim().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(c.clone());
    cms.create(&PostParams::default(), &cm("pre", "0"))
        .await
        .unwrap();
    let (reader, writer) = reflector::store::<ConfigMap>();
    let stream =
        reflector(writer, watcher(cms.clone(), watcher::Config::default())).applied_objects();
    let task = tokio::spawn(stream.for_each(|_| async {}));
    reader.wait_until_ready().await.unwrap();
    assert_eq!(reader.state().len(), 1);
    cms.create(&PostParams::default(), &cm("post", "0"))
        .await
        .unwrap();
    cms.delete("pre", &DeleteParams::default()).await.unwrap();
    eventually(
        "reflector sees the create and the delete",
        Duration::from_secs(5),
        || {
            let names: Vec<String> = reader.state().iter().map(|o| o.name_any()).collect();
            async move { (names == ["post"]).then_some(()) }
        },
    )
    .await;
    task.abort();
}

#[tokio::test]
async fn streaming_list_watcher_gets_initial_events_and_their_end_bookmark() {
    let (_sim, c) = sim().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(c.clone());
    cms.create(&PostParams::default(), &cm("a", "0"))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &cm("b", "0"))
        .await
        .unwrap();
    let config = watcher::Config::default().streaming_lists();
    let (reader, writer) = reflector::store::<ConfigMap>();
    let task = tokio::spawn(
        reflector(writer, watcher(cms.clone(), config))
            .applied_objects()
            .for_each(|_| async {}),
    );
    // Ready only after the initial-events-end bookmark.
    tokio::time::timeout(Duration::from_secs(5), reader.wait_until_ready())
        .await
        .expect("initial events end")
        .unwrap();
    assert_eq!(reader.state().len(), 2);
    task.abort();
}

/// Runs a reflector on kind K, creates one object, and waits until the store has it.
async fn reflect_one<K>(api: Api<K>, obj: serde_json::Value)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store::<K>();
    let task = tokio::spawn(
        reflector(writer, watcher(api.clone(), watcher::Config::default()))
            .applied_objects()
            .for_each(|_| async {}),
    );
    reader.wait_until_ready().await.unwrap();
    let obj: K = serde_json::from_value(obj).unwrap();
    let name = api
        .create(&PostParams::default(), &obj)
        .await
        .unwrap()
        .name_any();
    eventually(
        &format!("reflector of {} sees {name}", K::kind(&())),
        Duration::from_secs(5),
        || {
            let found = reader.state().iter().any(|o| o.name_any() == name);
            async move { found.then_some(()) }
        },
    )
    .await;
    task.abort();
}

#[tokio::test]
async fn watcher_and_reflector_work_for_every_builtin_kind() {
    use k8s_openapi::api::{
        apps::v1 as apps, batch::v1 as batch, coordination::v1 as coord, core::v1 as core,
        policy::v1 as policy, scheduling::v1 as sched,
    };
    let (_sim, c) = sim().await;
    let containers = json!([{"name": "c", "image": "busybox:1.36"}]);
    let template =
        json!({"metadata": {"labels": {"app": "x"}}, "spec": {"containers": containers}});
    let workload = json!({"metadata": {"name": "w"}, "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": template}});
    let ns = || c.clone();
    reflect_one::<core::Namespace>(Api::all(ns()), json!({"metadata": {"name": "n"}})).await;
    reflect_one::<core::Node>(Api::all(ns()), json!({"metadata": {"name": "n"}})).await;
    reflect_one::<core::Pod>(
        Api::default_namespaced(ns()),
        json!({"metadata": {"name": "p"}, "spec": {"containers": containers}}),
    )
    .await;
    reflect_one::<core::Event>(
        Api::default_namespaced(ns()),
        json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"}}),
    )
    .await;
    reflect_one::<k8s_openapi::api::events::v1::Event>(
        Api::default_namespaced(ns()),
        // Another name: both versions serve the one Event resource.
        json!({"metadata": {"name": "e2"}, "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "t", "reportingInstance": "t", "action": "A", "reason": "R", "type": "Normal"}),
    )
    .await;
    reflect_one::<core::ConfigMap>(
        Api::default_namespaced(ns()),
        json!({"metadata": {"name": "c"}}),
    )
    .await;
    reflect_one::<core::Secret>(
        Api::default_namespaced(ns()),
        json!({"metadata": {"name": "s"}}),
    )
    .await;
    reflect_one::<core::Service>(
        Api::default_namespaced(ns()),
        json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}}),
    )
    .await;
    reflect_one::<core::PersistentVolumeClaim>(
        Api::default_namespaced(ns()),
        json!({"metadata": {"name": "v"}, "spec": {"accessModes": ["ReadWriteOnce"]}}),
    )
    .await;
    reflect_one::<core::ServiceAccount>(
        Api::default_namespaced(ns()),
        json!({"metadata": {"name": "sa"}}),
    )
    .await;
    reflect_one::<apps::Deployment>(Api::default_namespaced(ns()), workload.clone()).await;
    reflect_one::<apps::ReplicaSet>(Api::default_namespaced(ns()), workload.clone()).await;
    reflect_one::<apps::StatefulSet>(Api::default_namespaced(ns()), workload.clone()).await;
    reflect_one::<apps::DaemonSet>(Api::default_namespaced(ns()), workload.clone()).await;
    reflect_one::<batch::Job>(Api::default_namespaced(ns()), json!({"metadata": {"name": "j"}, "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": containers}}}})).await;
    reflect_one::<coord::Lease>(
        Api::default_namespaced(ns()),
        json!({"metadata": {"name": "l"}}),
    )
    .await;
    reflect_one::<sched::PriorityClass>(
        Api::all(ns()),
        json!({"metadata": {"name": "pc"}, "value": 1}),
    )
    .await;
    reflect_one::<policy::PodDisruptionBudget>(
        Api::default_namespaced(ns()),
        json!({"metadata": {"name": "b"}, "spec": {"maxUnavailable": 1}}),
    )
    .await;
    reflect_one::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>(
        Api::all(ns()),
        serde_json::to_value(<super::crd::Widget as kube::CustomResourceExt>::crd()).unwrap(),
    )
    .await;
}
