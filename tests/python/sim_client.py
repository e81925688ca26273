#!/usr/bin/env python3
"""The official Kubernetes Python client (`kubernetes` on PyPI) against telemesh-sim.

Usage: sim_client.py KUBECONFIG

Creates, reads, lists (label and field selectors, pages), patches (strategic, merge, JSON),
watches (from a resourceVersion, with a timeout) and deletes pods, deployments, configmaps,
events and a custom resource, in a namespace of its own. It expects a fresh sim with a node
named sim-node-0. It exits 1 with a message naming the first mismatch, and prints one line per
step passed.
"""

import datetime
import json
import sys
import time

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

NS = "pyclient"
# Bounds every watch: a watch that ends before the expected events is a mismatch.
WATCH_TIMEOUT = 20
GROUP, VERSION, PLURAL = "example.com", "v1", "widgets"


class Mismatch(Exception):
    """A response that differs from what a Kubernetes API server returns."""


def expect(actual, expected, what):
    if actual != expected:
        raise Mismatch(f"{what}: expected {expected!r}, got {actual!r}")


def expect_that(condition, what):
    if not condition:
        raise Mismatch(what)


def expect_error(status, what, fn, *args, **kwargs):
    """Calls fn, which must fail with HTTP `status`; returns the Status body as a dict."""
    try:
        fn(*args, **kwargs)
    except ApiException as e:
        expect(e.status, status, f"{what}: HTTP status")
        body = json.loads(e.body) if e.body else {}
        expect(body.get("kind"), "Status", f"{what}: the error body's kind")
        return body
    raise Mismatch(f"{what}: expected HTTP {status}, but the call succeeded")


def names(items):
    return sorted(i.metadata.name for i in items)


def step(msg):
    print(f"ok: {msg}", flush=True)


def pod(name, labels, node=None):
    return client.V1Pod(
        api_version="v1",
        kind="Pod",
        metadata=client.V1ObjectMeta(name=name, labels=labels),
        spec=client.V1PodSpec(
            node_name=node,
            containers=[client.V1Container(name="app", image="nginx:1.27")],
        ),
    )


def watch_events(w, func, *args, until, **kwargs):
    """Streams watch events until `until(events)` holds; fails if the watch ends first."""
    events = []
    for e in w.stream(func, *args, timeout_seconds=WATCH_TIMEOUT, **kwargs):
        events.append(e)
        if until(events):
            w.stop()
            return events
    raise Mismatch(
        "watch ended before the expected events; got "
        + repr([(e["type"], e["raw_object"].get("metadata", {}).get("name")) for e in events])
    )


def check_version_and_nodes(core):
    version = client.VersionApi().get_code()
    expect_that(version.git_version.startswith("v1."), f"version: gitVersion {version.git_version!r}")
    nodes = core.list_node()
    expect_that("sim-node-0" in names(nodes.items), f"list nodes: sim-node-0 missing from {names(nodes.items)}")
    node = core.read_node("sim-node-0")
    ready = [c.status for c in node.status.conditions if c.type == "Ready"]
    expect(ready, ["True"], "node sim-node-0 Ready condition")
    only = core.list_node(field_selector="metadata.name=sim-node-0")
    expect(names(only.items), ["sim-node-0"], "list nodes by metadata.name field selector")
    step(f"version {version.git_version}, nodes {names(nodes.items)}")


def check_namespace(core):
    created = core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NS)))
    expect(created.metadata.name, NS, "created namespace name")
    expect(core.read_namespace(NS).status.phase, "Active", "namespace phase")
    step(f"namespace {NS}")


def check_pods(core):
    front = core.create_namespaced_pod(NS, pod("p-front", {"app": "web", "tier": "front"}))
    expect_that(front.metadata.uid, "created pod has a uid")
    expect_that(front.metadata.resource_version, "created pod has a resourceVersion")
    expect_that(front.metadata.creation_timestamp is not None, "created pod has a creationTimestamp")
    expect(front.metadata.namespace, NS, "created pod namespace")
    core.create_namespaced_pod(NS, pod("p-back", {"app": "web", "tier": "back"}))
    core.create_namespaced_pod(NS, pod("p-db", {"app": "db"}, node="sim-node-0"))
    dry = core.create_namespaced_pod(NS, pod("p-dry", {"app": "dry"}), dry_run="All")
    expect(dry.metadata.name, "p-dry", "dry-run create returns the object")
    expect_error(404, "a dry-run create persists nothing", core.read_namespaced_pod, "p-dry", NS)
    body = expect_error(409, "creating a pod twice", core.create_namespaced_pod, NS, pod("p-front", {}))
    expect(body.get("reason"), "AlreadyExists", "creating a pod twice: reason")
    step("create pods")

    got = core.read_namespaced_pod("p-front", NS)
    expect(got.metadata.labels, {"app": "web", "tier": "front"}, "read pod labels")
    expect(got.spec.containers[0].image, "nginx:1.27", "read pod image")
    expect(got.status.phase, "Pending", "new pod phase")
    expect(got.metadata.uid, front.metadata.uid, "read pod uid")
    step("read pod")

    def listed(**kw):
        return names(core.list_namespaced_pod(NS, **kw).items)

    expect(listed(), ["p-back", "p-db", "p-front"], "list pods")
    expect(listed(label_selector="app=web"), ["p-back", "p-front"], "label selector app=web")
    expect(listed(label_selector="app=web,tier!=back"), ["p-front"], "label selector app=web,tier!=back")
    expect(listed(label_selector="tier in (front,back)"), ["p-back", "p-front"], "label selector tier in (front,back)")
    expect(listed(label_selector="!tier"), ["p-db"], "label selector !tier")
    expect(listed(field_selector="metadata.name=p-back"), ["p-back"], "field selector metadata.name")
    expect(listed(field_selector="spec.nodeName=sim-node-0"), ["p-db"], "field selector spec.nodeName")
    expect(listed(field_selector="spec.nodeName="), ["p-back", "p-front"], "field selector spec.nodeName= (unscheduled)")
    expect(
        listed(label_selector="app=web", field_selector="metadata.name!=p-back"),
        ["p-front"],
        "label and field selectors together",
    )
    everywhere = core.list_pod_for_all_namespaces(label_selector="app=db")
    expect([(p.metadata.namespace, p.metadata.name) for p in everywhere.items], [(NS, "p-db")], "list pods in all namespaces")
    expect_error(400, "an unknown field selector", core.list_namespaced_pod, NS, field_selector="spec.nope=x")

    page1 = core.list_namespaced_pod(NS, limit=2)
    token = page1.metadata.var_continue
    expect(len(page1.items), 2, "first page size")
    expect_that(token, "a first page of 2 out of 3 has a continue token")
    page2 = core.list_namespaced_pod(NS, limit=2, _continue=token)
    expect(len(page2.items), 1, "second page size")
    expect(page2.metadata.var_continue, None, "the last page has no continue token")
    expect(names(page1.items + page2.items), ["p-back", "p-db", "p-front"], "pages cover the list")
    step("list pods with selectors and pages")

    patched = core.patch_namespaced_pod("p-front", NS, {"metadata": {"labels": {"tier": "edge"}}})
    expect(patched.metadata.labels, {"app": "web", "tier": "edge"}, "strategic merge patch of labels")
    patched = core.patch_namespaced_pod(
        "p-front", NS, {"metadata": {"annotations": {"note": "merged"}}}, _content_type="application/merge-patch+json"
    )
    expect(patched.metadata.annotations, {"note": "merged"}, "merge patch of annotations")
    patched = core.patch_namespaced_pod("p-front", NS, [{"op": "add", "path": "/metadata/labels/patched", "value": "json"}])
    expect(patched.metadata.labels.get("patched"), "json", "JSON patch add")
    # Strategic merge on containers merges by name: the image changes, the container stays one.
    patched = core.patch_namespaced_pod(
        "p-front", NS, {"spec": {"containers": [{"name": "app", "image": "nginx:1.28"}]}}
    )
    expect([(c.name, c.image) for c in patched.spec.containers], [("app", "nginx:1.28")], "strategic merge patch of containers")
    step("patch pod (strategic, merge, JSON)")

    stale = core.read_namespaced_pod("p-back", NS)
    core.patch_namespaced_pod("p-back", NS, {"metadata": {"labels": {"bump": "1"}}})
    stale.metadata.labels["stale"] = "yes"
    body = expect_error(409, "replace with a stale resourceVersion", core.replace_namespaced_pod, "p-back", NS, stale)
    expect(body.get("reason"), "Conflict", "stale replace reason")
    fresh = core.read_namespaced_pod("p-back", NS)
    fresh.metadata.labels["replaced"] = "yes"
    replaced = core.replace_namespaced_pod("p-back", NS, fresh)
    expect(replaced.metadata.labels.get("replaced"), "yes", "replace with the current resourceVersion")
    expect_that(
        int(replaced.metadata.resource_version) > int(fresh.metadata.resource_version),
        "replace moves the resourceVersion forward",
    )
    step("replace pod with optimistic concurrency")

    status = core.patch_namespaced_pod_status("p-front", NS, {"status": {"phase": "Running", "podIP": "10.0.0.7"}})
    expect(status.status.phase, "Running", "status patch phase")
    expect(core.read_namespaced_pod_status("p-front", NS).status.pod_ip, "10.0.0.7", "read pod status")
    expect(listed(field_selector="status.phase=Running"), ["p-front"], "field selector status.phase=Running")
    step("pod status subresource")

    core.delete_namespaced_pod("p-back", NS, grace_period_seconds=0)
    body = expect_error(404, "reading a deleted pod", core.read_namespaced_pod, "p-back", NS)
    expect(body.get("reason"), "NotFound", "deleted pod reason")
    expect(listed(), ["p-db", "p-front"], "list after delete")
    step("delete pod")


def check_pod_watch(core):
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    expect_that(rv, "a list has a resourceVersion")
    # Changes made after the list; a watch from its resourceVersion must replay them in order.
    core.create_namespaced_pod(NS, pod("watched", {"app": "watched"}))
    core.patch_namespaced_pod("watched", NS, {"metadata": {"labels": {"step": "2"}}})
    core.create_namespaced_pod(NS, pod("unwatched", {"app": "other"}))
    core.delete_namespaced_pod("watched", NS, grace_period_seconds=0)
    events = watch_events(
        watch.Watch(),
        core.list_namespaced_pod,
        NS,
        label_selector="app=watched",
        resource_version=rv,
        until=lambda evs: evs[-1]["type"] == "DELETED",
    )
    expect([e["type"] for e in events], ["ADDED", "MODIFIED", "DELETED"], "pod watch event types")
    expect({e["object"].metadata.name for e in events}, {"watched"}, "pod watch objects")
    expect_that(isinstance(events[0]["object"], client.V1Pod), "watch events carry V1Pod objects")
    expect(events[1]["object"].metadata.labels.get("step"), "2", "MODIFIED carries the new labels")
    rvs = [int(e["object"].metadata.resource_version) for e in events]
    expect(rvs, sorted(set(rvs)), "watch resourceVersions increase")
    step("watch pods from a resourceVersion")

    # A watch from the newest resourceVersion with a timeout ends quietly once it passes.
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    started = time.monotonic()
    quiet = list(watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=rv, timeout_seconds=1))
    expect(quiet, [], "a quiet watch returns no events")
    expect_that(time.monotonic() - started < 10, "timeout_seconds=1 ends the watch")
    step("watch timeout")


def check_configmaps(core):
    cm = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="settings", labels={"app": "py"}), data={"mode": "a"})
    created = core.create_namespaced_config_map(NS, cm)
    expect(created.data, {"mode": "a"}, "created configmap data")
    created.data["mode"] = "b"
    updated = core.replace_namespaced_config_map("settings", NS, created)
    expect(updated.data, {"mode": "b"}, "replaced configmap data")
    core.create_namespaced_config_map(
        NS, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="other", labels={"app": "py"}), data={"x": "1"})
    )
    expect(names(core.list_namespaced_config_map(NS, label_selector="app=py").items), ["other", "settings"], "list configmaps")
    patched = core.patch_namespaced_config_map("other", NS, {"data": {"y": "2"}})
    expect(patched.data, {"x": "1", "y": "2"}, "patched configmap data")
    core.delete_collection_namespaced_config_map(NS, label_selector="app=py")
    expect(core.list_namespaced_config_map(NS, label_selector="app=py").items, [], "configmaps after deletecollection")
    step("configmaps")


def check_events(core):
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    ev = client.CoreV1Event(
        metadata=client.V1ObjectMeta(name="p-front.1"),
        involved_object=client.V1ObjectReference(kind="Pod", namespace=NS, name="p-front", api_version="v1"),
        reason="Started",
        message="Started container app",
        type="Normal",
        first_timestamp=now,
        count=1,
        source=client.V1EventSource(component="sim-client"),
    )
    core.create_namespaced_event(NS, ev)
    listed = core.list_namespaced_event(NS, field_selector="involvedObject.name=p-front,reason=Started")
    expect([(e.reason, e.message) for e in listed.items], [("Started", "Started container app")], "list events by field selector")
    expect(core.list_namespaced_event(NS, field_selector="involvedObject.name=nope").items, [], "events for another object")
    step("events")


def check_deployments(apps):
    labels = {"app": "api"}
    dep = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="api", labels=labels),
        spec=client.V1DeploymentSpec(
            replicas=2,
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(containers=[client.V1Container(name="api", image="api:1")]),
            ),
        ),
    )
    created = apps.create_namespaced_deployment(NS, dep)
    expect(created.spec.replicas, 2, "created deployment replicas")
    expect(created.metadata.generation, 1, "created deployment generation")
    got = apps.read_namespaced_deployment("api", NS)
    expect(got.spec.template.spec.containers[0].image, "api:1", "read deployment image")
    expect(
        names(apps.list_deployment_for_all_namespaces(label_selector="app=api").items), ["api"], "list deployments everywhere"
    )

    scale = apps.patch_namespaced_deployment_scale("api", NS, {"spec": {"replicas": 4}})
    expect(scale.spec.replicas, 4, "scale subresource patch")
    expect(apps.read_namespaced_deployment_scale("api", NS).spec.replicas, 4, "read scale subresource")
    got = apps.read_namespaced_deployment("api", NS)
    expect(got.spec.replicas, 4, "deployment replicas after scaling")
    expect(got.metadata.generation, 2, "a spec change bumps generation")

    patched = apps.patch_namespaced_deployment(
        "api", NS, {"spec": {"template": {"spec": {"containers": [{"name": "api", "image": "api:2"}]}}}}
    )
    expect([(c.name, c.image) for c in patched.spec.template.spec.containers], [("api", "api:2")], "deployment image patch")

    apps.delete_namespaced_deployment("api", NS)
    expect_error(404, "reading a deleted deployment", apps.read_namespaced_deployment, "api", NS)
    step("deployments")


CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": PLURAL, "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
        "versions": [
            {
                "name": VERSION,
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {"size": {"type": "integer"}, "color": {"type": "string"}},
                            },
                            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
                        },
                    }
                },
                "subresources": {"status": {}},
            }
        ],
    },
}


def widget(name, size, labels):
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Widget",
        "metadata": {"name": name, "labels": labels},
        "spec": {"size": size, "color": "blue"},
    }


def check_custom_resources(ext, custom):
    crd = ext.create_custom_resource_definition(CRD)
    expect(crd.metadata.name, f"{PLURAL}.{GROUP}", "created CRD name")
    events = watch_events(
        watch.Watch(),
        ext.list_custom_resource_definition,
        field_selector=f"metadata.name={PLURAL}.{GROUP}",
        until=lambda evs: any(
            c.type == "Established" and c.status == "True"
            for c in ((evs[-1]["object"].status and evs[-1]["object"].status.conditions) or [])
        ),
    )
    expect_that(events, "the CRD becomes Established")
    step("CRD established")

    args = (GROUP, VERSION, NS, PLURAL)
    created = custom.create_namespaced_custom_object(*args, widget("w1", 3, {"color": "blue"}))
    expect(created["spec"], {"size": 3, "color": "blue"}, "created custom resource spec")
    expect_that(created["metadata"].get("uid"), "created custom resource has a uid")
    custom.create_namespaced_custom_object(*args, widget("w2", 5, {"color": "red"}))
    got = custom.get_namespaced_custom_object(*args, "w1")
    expect(got["spec"]["size"], 3, "read custom resource")
    listed = custom.list_namespaced_custom_object(*args, label_selector="color=red")
    expect([o["metadata"]["name"] for o in listed["items"]], ["w2"], "list custom resources by label")
    listed = custom.list_namespaced_custom_object(*args, field_selector="metadata.name=w1")
    expect([o["metadata"]["name"] for o in listed["items"]], ["w1"], "list custom resources by field")
    everywhere = custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)
    expect(sorted(o["metadata"]["name"] for o in everywhere["items"]), ["w1", "w2"], "list custom resources everywhere")
    step("create, read and list custom resources")

    rv = listed["metadata"]["resourceVersion"]
    patched = custom.patch_namespaced_custom_object(*args, "w1", {"spec": {"size": 4}})
    expect(patched["spec"], {"size": 4, "color": "blue"}, "merge patch of a custom resource")
    status = custom.patch_namespaced_custom_object_status(*args, "w1", {"status": {"ready": True}})
    expect(status.get("status"), {"ready": True}, "custom resource status subresource")
    expect(status["spec"]["size"], 4, "a status patch keeps the spec")
    custom.delete_namespaced_custom_object(*args, "w1")
    expect_error(404, "reading a deleted custom resource", custom.get_namespaced_custom_object, *args, "w1")
    step("patch and delete custom resources")

    events = watch_events(
        watch.Watch(),
        custom.list_namespaced_custom_object,
        *args,
        field_selector="metadata.name=w1",
        resource_version=rv,
        until=lambda evs: evs[-1]["type"] == "DELETED",
    )
    expect([e["type"] for e in events], ["MODIFIED", "MODIFIED", "DELETED"], "custom resource watch event types")
    expect(events[0]["object"]["spec"]["size"], 4, "custom resource watch carries the patched object")
    step("watch custom resources from a resourceVersion")


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    config.load_kube_config(config_file=argv[1])
    core = client.CoreV1Api()
    checks = [
        lambda: check_version_and_nodes(core),
        lambda: check_namespace(core),
        lambda: check_pods(core),
        lambda: check_pod_watch(core),
        lambda: check_configmaps(core),
        lambda: check_events(core),
        lambda: check_deployments(client.AppsV1Api()),
        lambda: check_custom_resources(client.ApiextensionsV1Api(), client.CustomObjectsApi()),
    ]
    for check in checks:
        try:
            check()
        except Mismatch as e:
            print(f"MISMATCH: {e}", file=sys.stderr)
            return 1
        except ApiException as e:
            print(f"MISMATCH: unexpected API error HTTP {e.status} {e.reason}: {e.body}", file=sys.stderr)
            return 1
    print("sim_client: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
