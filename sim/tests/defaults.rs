//! A minimal object of each kind, created through kubectl with strict field validation, comes
//! back exactly as kube-apiserver 1.33 returns it: upstream's defaults (`pkg/apis/*/v1/
//! defaults.go`), the status fields Go writes without `omitempty`, and nothing sim made up.
//! The expected objects are written from upstream's defaulting and JSON tags; only
//! server-generated values (uid, resourceVersion, timestamps, cluster IPs) are masked.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;

use telemesh_sim::{Sim, SimConfig};

/// kubectl 1.33 when installed beside the others, else `$KUBECTL` or `kubectl` on PATH.
fn kubectl() -> PathBuf {
    if let Some(k) = std::env::var_os("KUBECTL") {
        return PathBuf::from(k);
    }
    let pinned = Path::new("/usr/lib/google-cloud-sdk/bin/kubectl.1.33");
    if pinned.is_file() {
        pinned.to_owned()
    } else {
        PathBuf::from("kubectl")
    }
}

/// `kubectl create -f - --validate=strict -o json` of `obj`; panics with kubectl's stderr.
async fn create(kubeconfig: &Path, home: &Path, obj: &Value) -> Value {
    let mut child = tokio::process::Command::new(kubectl())
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["create", "-f", "-", "--validate=strict", "-o", "json"])
        .env("HOME", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(obj.to_string().as_bytes()).await.unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    assert!(
        out.status.success(),
        "kubectl create of {} failed: {}",
        obj["kind"],
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Replaces what the server generates with placeholders: identity and time, the uid wherever
/// it is copied (Job selectors), cluster IPs and node ports.
fn mask(mut v: Value) -> Value {
    let uid = v["metadata"]["uid"].as_str().unwrap_or_default().to_owned();
    let created = v["metadata"]["creationTimestamp"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if let Some(m) = v["metadata"].as_object_mut() {
        for k in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
        ] {
            m.remove(k);
        }
    }
    if let Some(spec) = v.get_mut("spec").and_then(Value::as_object_mut)
        && spec.contains_key("clusterIP")
    {
        spec.insert("clusterIP".into(), json!("<ip>"));
        spec.insert("clusterIPs".into(), json!(["<ip>"]));
    }
    let text = v
        .to_string()
        .replace(&format!("\"{uid}\""), "\"<uid>\"")
        .replace(&format!("\"{created}\""), "\"<now>\"");
    serde_json::from_str(&text).unwrap()
}

fn container() -> Value {
    json!({"name": "c", "image": "nginx:1.27"})
}

/// The container as every pod template carries it after defaulting.
fn defaulted_container() -> Value {
    json!({"name": "c", "image": "nginx:1.27", "imagePullPolicy": "IfNotPresent", "resources": {},
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"})
}

fn template(labels: Value, restart: Option<&str>) -> Value {
    let mut spec = json!({"containers": [container()]});
    if let Some(r) = restart {
        spec["restartPolicy"] = json!(r);
    }
    json!({"metadata": {"labels": labels}, "spec": spec})
}

fn defaulted_template(labels: Value, restart: &str) -> Value {
    json!({"metadata": {"creationTimestamp": null, "labels": labels}, "spec": {
        "containers": [defaulted_container()], "dnsPolicy": "ClusterFirst", "restartPolicy": restart,
        "schedulerName": "default-scheduler", "securityContext": {}, "terminationGracePeriodSeconds": 30}})
}

/// (input, expected response) for each kind.
fn cases() -> Vec<(Value, Value)> {
    let app = json!({"app": "x"});
    let selector = json!({"matchLabels": {"app": "x"}});
    let meta = |name: &str| json!({"name": name, "namespace": "default"});
    let meta_gen = |name: &str| json!({"name": name, "namespace": "default", "generation": 1});
    vec![
        (
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs"},
                "spec": {"selector": selector, "template": template(app.clone(), None)}}),
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": meta_gen("rs"),
                "spec": {"replicas": 1, "selector": selector, "template": defaulted_template(app.clone(), "Always")},
                "status": {"replicas": 0}}),
        ),
        (
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                "spec": {"selector": selector, "template": template(app.clone(), None)}}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta_gen("d"),
                "spec": {"replicas": 1, "selector": selector, "template": defaulted_template(app.clone(), "Always"),
                    "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
                    "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600},
                "status": {}}),
        ),
        (
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "sts"},
                "spec": {"selector": selector, "template": template(app.clone(), None)}}),
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta_gen("sts"),
                "spec": {"replicas": 1, "selector": selector, "template": defaulted_template(app.clone(), "Always"),
                    "podManagementPolicy": "OrderedReady", "revisionHistoryLimit": 10,
                    "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                    "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"}},
                "status": {"replicas": 0, "availableReplicas": 0}}),
        ),
        (
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds"},
                "spec": {"selector": selector, "template": template(app.clone(), None)}}),
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta_gen("ds"),
                "spec": {"selector": selector, "template": defaulted_template(app.clone(), "Always"),
                    "revisionHistoryLimit": 10,
                    "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}},
                "status": {"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0, "numberReady": 0}}),
        ),
        (
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "job"},
                "spec": {"template": template(json!({}), Some("Never"))}}),
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta_gen("job"),
                "spec": {"backoffLimit": 6, "completionMode": "NonIndexed", "completions": 1, "parallelism": 1,
                    "podReplacementPolicy": "TerminatingOrFailed", "suspend": false,
                    "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "<uid>"}},
                    "template": defaulted_template(json!({"batch.kubernetes.io/controller-uid": "<uid>",
                        "batch.kubernetes.io/job-name": "job", "controller-uid": "<uid>", "job-name": "job"}), "Never")},
                "status": {}}),
        ),
        (
            json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "cj"},
                "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": template(json!({}), Some("OnFailure"))}}}}),
            json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta_gen("cj"),
                "spec": {"schedule": "*/5 * * * *", "concurrencyPolicy": "Allow", "suspend": false,
                    "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1,
                    "jobTemplate": {"metadata": {"creationTimestamp": null}, "spec": {"template": defaulted_template(json!({}), "OnFailure")}}},
                "status": {}}),
        ),
        (
            json!({"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "rc"},
                "spec": {"template": template(app.clone(), None)}}),
            json!({"apiVersion": "v1", "kind": "ReplicationController",
                "metadata": {"name": "rc", "namespace": "default", "generation": 1, "labels": app},
                "spec": {"replicas": 1, "selector": app, "template": defaulted_template(app.clone(), "Always")},
                "status": {"replicas": 0}}),
        ),
        (
            json!({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "pt"},
                "template": template(app.clone(), None)}),
            json!({"apiVersion": "v1", "kind": "PodTemplate", "metadata": meta("pt"),
                "template": defaulted_template(app.clone(), "Always")}),
        ),
        (
            json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "hpa"},
                "spec": {"maxReplicas": 3, "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}}}),
            json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": meta("hpa"),
                "spec": {"maxReplicas": 3, "minReplicas": 1,
                    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
                    "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]},
                "status": {"currentMetrics": null, "desiredReplicas": 0}}),
        ),
        (
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "pdb"},
                "spec": {"maxUnavailable": 1, "selector": selector}}),
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta_gen("pdb"),
                "spec": {"maxUnavailable": 1, "selector": selector},
                "status": {"currentHealthy": 0, "desiredHealthy": 0, "disruptionsAllowed": 0, "expectedPods": 0}}),
        ),
        (
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"},
                "spec": {"selector": app, "ports": [{"port": 80}]}}),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": meta("svc"),
                "spec": {"clusterIP": "<ip>", "clusterIPs": ["<ip>"], "internalTrafficPolicy": "Cluster",
                    "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                    "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}], "selector": app,
                    "sessionAffinity": "None", "type": "ClusterIP"},
                "status": {"loadBalancer": {}}}),
        ),
        (
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "pvc"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta("pvc"),
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "volumeMode": "Filesystem"},
                "status": {"phase": "Pending"}}),
        ),
        (
            json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv"},
                "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}, "hostPath": {"path": "/tmp/pv"}}}),
            json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv"},
                "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}, "hostPath": {"path": "/tmp/pv", "type": ""},
                    "persistentVolumeReclaimPolicy": "Retain", "volumeMode": "Filesystem"},
                "status": {"phase": "Pending", "lastPhaseTransitionTime": "<now>"}}),
        ),
        (
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"k": "v"}}),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta("s"), "data": {"k": "dg=="}, "type": "Opaque"}),
        ),
        (
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"k": "v"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("cm"), "data": {"k": "v"}}),
        ),
        (
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000}),
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
                "value": 1000, "preemptionPolicy": "PreemptLowerPriority"}),
        ),
        (
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "sc"}, "provisioner": "example.com/p"}),
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "sc"},
                "provisioner": "example.com/p", "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"}),
        ),
        (
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "csi.example.com"}, "spec": {}}),
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "csi.example.com"},
                "spec": {"attachRequired": true, "fsGroupPolicy": "ReadWriteOnceWithFSType", "podInfoOnMount": false,
                    "requiresRepublish": false, "seLinuxMount": false, "storageCapacity": false,
                    "volumeLifecycleModes": ["Persistent"]}}),
        ),
        (
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": "va"},
                "spec": {"attacher": "csi.example.com", "nodeName": "n", "source": {"persistentVolumeName": "pv"}}}),
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": "va"},
                "spec": {"attacher": "csi.example.com", "nodeName": "n", "source": {"persistentVolumeName": "pv"}},
                "status": {"attached": false}}),
        ),
        (
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "np"}, "spec": {"podSelector": {}}}),
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": meta_gen("np"),
                "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}),
        ),
        (
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "ing"},
                "spec": {"defaultBackend": {"service": {"name": "svc", "port": {"number": 80}}}}}),
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta_gen("ing"),
                "spec": {"defaultBackend": {"service": {"name": "svc", "port": {"number": 80}}}},
                "status": {"loadBalancer": {}}}),
        ),
        (
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "rb"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
                "subjects": [{"kind": "User", "name": "alice"}, {"kind": "ServiceAccount", "name": "default", "namespace": "default"}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta("rb"),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"},
                    {"kind": "ServiceAccount", "name": "default", "namespace": "default"}]}),
        ),
        (
            json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": "es"},
                "addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"]}], "ports": [{"port": 80}]}),
            json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": meta_gen("es"),
                "addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"]}],
                "ports": [{"name": "", "port": 80, "protocol": "TCP"}]}),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minimal_objects_round_trip_as_kube_apiserver_returns_them() {
    let sim = Sim::start(SimConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig).unwrap();
    let mut wrong = Vec::new();
    for (input, expected) in cases() {
        let got = mask(create(&kubeconfig, dir.path(), &input).await);
        if got != expected {
            wrong.push(format!(
                "{}:\n  expected {expected}\n  got      {got}",
                input["kind"]
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
