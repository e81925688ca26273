//! Events are one resource served as core `v1` and `events.k8s.io/v1`, with upstream's field
//! conversion: what kube-scheduler records through events.k8s.io reads through core v1 (and
//! `kubectl get events` / `kubectl describe pod`), and the other way round, in get, list, field
//! selectors, watch and writes.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Event as CoreEvent, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

use super::{code, pod, sim};

/// Long enough for any event on a loaded machine; a watch that is right sees it at once.
const WITHIN: Duration = Duration::from_secs(20);

/// The Event kube-scheduler records for a pod it cannot place (events.k8s.io/v1, as its
/// `events.NewEventBroadcasterAdapter` writes it).
fn failed_scheduling(p: &Pod) -> Event {
    serde_json::from_value(json!({
        "metadata": {"name": format!("{}.17f0a1b2c3d4e5f6", p.metadata.name.as_deref().unwrap())},
        "eventTime": "2026-11-24T10:00:00.123456Z",
        "reportingController": "default-scheduler",
        "reportingInstance": "default-scheduler-sim",
        "action": "Scheduling",
        "reason": "FailedScheduling",
        "regarding": {
            "kind": "Pod",
            "namespace": "default",
            "name": p.metadata.name,
            "uid": p.metadata.uid,
            "apiVersion": "v1",
            "resourceVersion": p.metadata.resource_version,
        },
        "note": "0/3 nodes are available: 3 policy demo/scheduling-policy dontschedule.",
        "type": "Warning",
    }))
    .unwrap()
}

async fn next_added<K>(
    stream: &mut (impl futures::Stream<Item = kube::Result<WatchEvent<K>>> + Unpin),
) -> K
where
    K: std::fmt::Debug,
{
    loop {
        let event = tokio::time::timeout(WITHIN, stream.try_next())
            .await
            .expect("a watch event")
            .unwrap()
            .expect("the watch goes on");
        match event {
            WatchEvent::Added(obj) => return obj,
            WatchEvent::Bookmark(_) => {}
            other => panic!("expected ADDED, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn an_event_recorded_through_events_k8s_io_reads_as_a_core_event() {
    let (_sim, c) = sim().await;
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    let p = pods
        .create(&PostParams::default(), &pod("web", &[]))
        .await
        .unwrap();
    let events: Api<Event> = Api::default_namespaced(c.clone());
    let core: Api<CoreEvent> = Api::default_namespaced(c.clone());
    let core_rv = core
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut core_watch = core
        .watch(&WatchParams::default().timeout(30), &core_rv)
        .await
        .unwrap()
        .boxed();

    let recorded = events
        .create(&PostParams::default(), &failed_scheduling(&p))
        .await
        .unwrap();
    assert_eq!(
        recorded.note.as_deref(),
        failed_scheduling(&p).note.as_deref()
    );
    let name = recorded.metadata.name.clone().unwrap();

    // The watch on the other version sees it, in its own field names.
    let seen = next_added(&mut core_watch).await;
    assert_eq!(seen.metadata.name.as_deref(), Some(name.as_str()));
    assert_eq!(seen.message, recorded.note);

    let ev = core.get(&name).await.unwrap();
    assert_eq!(ev.message, recorded.note);
    assert_eq!(ev.reason.as_deref(), Some("FailedScheduling"));
    assert_eq!(ev.type_.as_deref(), Some("Warning"));
    assert_eq!(ev.action.as_deref(), Some("Scheduling"));
    assert_eq!(ev.reporting_component.as_deref(), Some("default-scheduler"));
    assert_eq!(
        ev.reporting_instance.as_deref(),
        Some("default-scheduler-sim")
    );
    assert_eq!(ev.involved_object.name, p.metadata.name);
    assert_eq!(ev.involved_object.uid, p.metadata.uid);
    assert_eq!(ev.event_time, recorded.event_time);
    assert_eq!(ev.metadata.uid, recorded.metadata.uid);
    assert_eq!(
        ev.metadata.resource_version,
        recorded.metadata.resource_version
    );

    // Field selectors on each version's own names.
    let by = |selector: &str| ListParams::default().fields(selector);
    let names = |list: Vec<CoreEvent>| -> Vec<String> {
        list.into_iter().filter_map(|e| e.metadata.name).collect()
    };
    for selector in [
        "involvedObject.name=web,involvedObject.kind=Pod",
        "reason=FailedScheduling",
        "reportingComponent=default-scheduler",
        // No source component: upstream selects `source` on the reporting controller.
        "source=default-scheduler",
    ] {
        let found = names(core.list(&by(selector)).await.unwrap().items);
        assert_eq!(found, std::slice::from_ref(&name), "core {selector}");
    }
    assert!(
        core.list(&by("involvedObject.name=other"))
            .await
            .unwrap()
            .items
            .is_empty()
    );
    for selector in [
        "regarding.name=web,regarding.kind=Pod",
        "reportingController=default-scheduler",
        "type=Warning",
    ] {
        let found: Vec<String> = events
            .list(&by(selector))
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|e| e.metadata.name)
            .collect();
        assert_eq!(
            found,
            std::slice::from_ref(&name),
            "events.k8s.io {selector}"
        );
    }
    let err = events
        .list(&by("involvedObject.name=web"))
        .await
        .unwrap_err();
    assert_eq!(code(&err), 400, "core names are not events.k8s.io labels");

    // A write through core is seen through events.k8s.io.
    core.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"message": "now 0/4 nodes", "count": 2})),
    )
    .await
    .unwrap();
    let ev = events.get(&name).await.unwrap();
    assert_eq!(ev.note.as_deref(), Some("now 0/4 nodes"));
    assert_eq!(ev.deprecated_count, Some(2));
    assert_eq!(
        ev.reporting_controller.as_deref(),
        Some("default-scheduler")
    );
}

#[tokio::test]
async fn a_core_event_reads_through_events_k8s_io_and_updates_through_it() {
    let (_sim, c) = sim().await;
    let events: Api<Event> = Api::default_namespaced(c.clone());
    let core: Api<CoreEvent> = Api::default_namespaced(c.clone());
    let rv = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut watch = events
        .watch(&WatchParams::default().timeout(30), &rv)
        .await
        .unwrap()
        .boxed();
    let kubelet: CoreEvent = serde_json::from_value(json!({
        "metadata": {"name": "web.pulled"},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web"},
        "reason": "Pulled",
        "message": "Container image already present",
        "source": {"component": "kubelet", "host": "node-1"},
        "firstTimestamp": "2026-11-24T10:00:00Z",
        "lastTimestamp": "2026-11-24T10:00:09Z",
        "count": 3,
        "type": "Normal",
    }))
    .unwrap();
    core.create(&PostParams::default(), &kubelet).await.unwrap();

    let seen = next_added(&mut watch).await;
    assert_eq!(
        seen.note.as_deref(),
        Some("Container image already present")
    );
    assert_eq!(
        seen.regarding.as_ref().and_then(|r| r.name.as_deref()),
        Some("web")
    );
    let source = seen.deprecated_source.clone().unwrap();
    assert_eq!(source.component.as_deref(), Some("kubelet"));
    assert_eq!(source.host.as_deref(), Some("node-1"));
    assert_eq!(seen.deprecated_count, Some(3));
    assert_eq!(seen.deprecated_first_timestamp, kubelet.first_timestamp);
    assert_eq!(seen.deprecated_last_timestamp, kubelet.last_timestamp);
    let raw: serde_json::Value = c
        .request(
            http::Request::get("/apis/events.k8s.io/v1/namespaces/default/events/web.pulled")
                .body(Vec::new())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(raw["apiVersion"], "events.k8s.io/v1");
    for core_only in [
        "message",
        "involvedObject",
        "source",
        "count",
        "reportingComponent",
    ] {
        assert!(raw.get(core_only).is_none(), "{core_only} in {raw}");
    }
    assert!(
        raw["eventTime"].is_null(),
        "Go writes a zero eventTime as null"
    );
    let selected = events
        .list(&ListParams::default().fields("source=kubelet,regarding.name=web"))
        .await
        .unwrap();
    assert_eq!(selected.items.len(), 1);

    // Replaced through events.k8s.io, read through core.
    let mut replaced = seen;
    replaced.note = Some("Pulled again".into());
    replaced.deprecated_count = Some(4);
    events
        .replace("web.pulled", &PostParams::default(), &replaced)
        .await
        .unwrap();
    let ev = core.get("web.pulled").await.unwrap();
    assert_eq!(ev.message.as_deref(), Some("Pulled again"));
    assert_eq!(ev.count, Some(4));
    assert_eq!(
        ev.source.and_then(|s| s.component).as_deref(),
        Some("kubelet")
    );
    assert_eq!(
        core.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
    assert_eq!(
        events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
}

/// Runs kubectl against the sim; `None` when no kubectl is installed (the test says so).
fn kubectl(kubeconfig: &std::path::Path, args: &[&str]) -> Option<String> {
    let out = match std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
    {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => panic!("running kubectl: {e}"),
    };
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[tokio::test]
async fn kubectl_shows_what_the_scheduler_recorded_through_events_k8s_io() {
    let (sim, c) = sim().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig).unwrap();
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    let p = pods
        .create(&PostParams::default(), &pod("web", &[]))
        .await
        .unwrap();
    Api::<Event>::default_namespaced(c.clone())
        .create(&PostParams::default(), &failed_scheduling(&p))
        .await
        .unwrap();

    let listed = tokio::task::spawn_blocking(move || {
        let events = kubectl(&kubeconfig, &["get", "events", "-n", "default"])?;
        let describe = kubectl(&kubeconfig, &["describe", "pod", "web", "-n", "default"])?;
        let as_events = kubectl(
            &kubeconfig,
            &[
                "get",
                "events.v1.events.k8s.io",
                "-n",
                "default",
                "-o",
                "json",
            ],
        )?;
        Some((events, describe, as_events))
    })
    .await
    .unwrap();
    let Some((events, describe, as_events)) = listed else {
        eprintln!("SKIPPED: kubectl not found on PATH");
        return;
    };
    assert!(events.contains("FailedScheduling"), "{events}");
    assert!(events.contains("pod/web"), "{events}");
    assert!(events.contains("0/3 nodes are available"), "{events}");
    let from_describe = describe
        .split_once("Events:")
        .map(|(_, events)| events)
        .unwrap_or_default();
    assert!(
        from_describe.contains("Warning  FailedScheduling")
            && from_describe.contains("default-scheduler")
            && from_describe.contains("0/3 nodes are available"),
        "{describe}"
    );
    let as_events: serde_json::Value = serde_json::from_str(&as_events).unwrap();
    assert_eq!(
        as_events["items"][0]["note"],
        "0/3 nodes are available: 3 policy demo/scheduling-policy dontschedule."
    );
}
