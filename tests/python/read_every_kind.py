"""Reads every kind sim serves through the official Python client's typed API.

Usage: python3 tests/python/read_every_kind.py KUBECONFIG

Creates a minimal object of each kind (kubernetes.utils.create_from_dict), then, for every
resource discovery lists with the `list` verb, calls the typed list_* method and read_* on each
item it returned: the client decodes every response into its pydantic-checked models, so a
field the models require (a status count Go writes as 0) that sim left out fails here.
"""

import re
import sys

from kubernetes import client, config, utils

NS = "default"
APP = {"app": "x"}
TEMPLATE = {"metadata": {"labels": APP}, "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}
SELECTOR = {"matchLabels": APP}

MINIMAL = [
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"k": "v"}},
    {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"k": "v"}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"}, "spec": {"selector": APP, "ports": [{"port": 80}]}},
    {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "svc"},
     "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80}]}]},
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": TEMPLATE["spec"]},
    {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "pt"}, "template": TEMPLATE},
    {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "rc"}, "spec": {"template": TEMPLATE}},
    {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "pvc"},
     "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}},
    {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv"},
     "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}, "hostPath": {"path": "/tmp/pv"}}},
    {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"}},
    {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "lr"},
     "spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}}]}},
    {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "rq"}, "spec": {"hard": {"pods": "10"}}},
    {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "ev"},
     "involvedObject": {"kind": "Pod", "name": "p", "namespace": NS}, "reason": "Tested", "message": "m",
     # events.k8s.io/v1 serves this Event too, and the client's model there requires eventTime
     # (an Event without one fails it against kube-apiserver alike).
     "eventTime": "2026-01-01T00:00:00.000000Z", "reportingComponent": "tests", "reportingInstance": "tests-1",
     "action": "Testing", "type": "Normal"},
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"selector": SELECTOR, "template": TEMPLATE}},
    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs"}, "spec": {"selector": SELECTOR, "template": TEMPLATE}},
    {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "sts"}, "spec": {"selector": SELECTOR, "template": TEMPLATE}},
    {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds"}, "spec": {"selector": SELECTOR, "template": TEMPLATE}},
    {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {"name": "cr"}, "revision": 1, "data": {}},
    {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "job"},
     "spec": {"template": {"spec": {"containers": TEMPLATE["spec"]["containers"], "restartPolicy": "Never"}}}},
    {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "cj"},
     "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {
         "spec": {"containers": TEMPLATE["spec"]["containers"], "restartPolicy": "Never"}}}}}},
    {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "hpa"},
     "spec": {"maxReplicas": 3, "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}}},
    {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "pdb"},
     "spec": {"maxUnavailable": 1, "selector": SELECTOR}},
    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000},
    {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "lease"}, "spec": {"holderIdentity": "me"}},
    {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "sc"}, "provisioner": "example.com/p"},
    {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "csi.example.com"}, "spec": {}},
    {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "sim-node-0"}, "spec": {"drivers": []}},
    {"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity", "metadata": {"name": "cap"}, "storageClassName": "sc"},
    {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": "va"},
     "spec": {"attacher": "csi.example.com", "nodeName": "sim-node-0", "source": {"persistentVolumeName": "pv"}}},
    {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "np"}, "spec": {"podSelector": {}}},
    {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "ing"},
     "spec": {"defaultBackend": {"service": {"name": "svc", "port": {"number": 80}}}}},
    {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": "ic"}, "spec": {"controller": "example.com/c"}},
    {"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": "cidr"}, "spec": {"cidrs": ["10.200.0.0/16"]}},
    {"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress", "metadata": {"name": "10.200.0.7"},
     "spec": {"parentRef": {"resource": "services", "name": "svc", "namespace": NS}}},
    {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": "es"},
     "addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"]}], "ports": [{"port": 80}]},
    {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "rtc"}, "handler": "runc"},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r"},
     "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "rb"},
     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
     "subjects": [{"kind": "User", "name": "alice"}]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "cr"},
     "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "crb"},
     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cr"},
     "subjects": [{"kind": "Group", "name": "devs"}]},
    {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": "csr"},
     "spec": {"request": "LS0tLS1CRUdJTg==", "signerName": "example.com/s", "usages": ["client auth"]}},
    {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "vwc"},
     "webhooks": [{"name": "v.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                   "clientConfig": {"url": "https://127.0.0.1:9443/validate"}}]},
    {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration", "metadata": {"name": "mwc"},
     "webhooks": [{"name": "m.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                   "clientConfig": {"url": "https://127.0.0.1:9443/mutate"}}]},
    {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "vap"},
     "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                      "operations": ["CREATE"], "resources": ["configmaps"]}]},
              "validations": [{"expression": "true"}]}},
    {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "vapb"},
     "spec": {"policyName": "vap", "validationActions": ["Deny"]}},
    {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration", "metadata": {"name": "plc"},
     "spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Reject"}}}},
    {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": "fs"},
     "spec": {"priorityLevelConfiguration": {"name": "plc"}}},
    {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "v1.example.com"},
     "spec": {"group": "example.com", "version": "v1", "groupPriorityMinimum": 1000, "versionPriority": 15}},
    {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "ev2"},
     "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "tests", "reportingInstance": "tests-1",
     "action": "Testing", "reason": "Tested", "type": "Normal", "regarding": {"kind": "Pod", "name": "p", "namespace": NS}},
]


def snake(kind):
    s = re.sub("([A-Z]+)([A-Z][a-z])", r"\1_\2", kind)
    return re.sub("([a-z0-9])([A-Z])", r"\1_\2", s).lower()


def api_class(group_version):
    group, _, version = group_version.rpartition("/")
    words = group.replace(".k8s.io", "").split(".") if group else ["core"]
    name = "".join(w.capitalize() for w in words if w) + version.capitalize() + "Api"
    return getattr(client, name)


def served(api):
    """(groupVersion, APIResource) for every resource discovery lists."""
    out = [("v1", r) for r in client.CoreV1Api(api).get_api_resources().resources]
    for g in client.ApisApi(api).get_api_versions().groups:
        for gv in g.versions:
            rl = api_class(gv.group_version)(api).get_api_resources()
            out += [(gv.group_version, r) for r in rl.resources]
    return out


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    config.load_kube_config(config_file=argv[1])
    api = client.ApiClient()
    for obj in MINIMAL:
        utils.create_from_dict(api, obj, namespace=NS)
    read = 0
    for gv, r in served(api):
        if "/" in r.name or "list" not in r.verbs:
            continue
        typed = api_class(gv)(api)
        kind = snake(r.kind)
        try:
            if r.namespaced:
                items = getattr(typed, f"list_namespaced_{kind}")(NS).items
                for item in items:
                    getattr(typed, f"read_namespaced_{kind}")(item.metadata.name, NS)
            else:
                items = getattr(typed, f"list_{kind}")().items
                for item in items:
                    getattr(typed, f"read_{kind}")(item.metadata.name)
        except Exception as e:  # noqa: BLE001 - any failure names the kind
            print(f"MISMATCH: {gv} {r.kind}: {type(e).__name__}: {e}", file=sys.stderr)
            return 1
        read += len(items)
        print(f"{gv} {r.name}: {len(items)} read")
    print(f"read_every_kind: all kinds read ({read} objects)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
