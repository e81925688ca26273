//! The fixtures in `tests/fixtures/protobuf` are request bodies recorded from kubectl 1.32
//! (see the README there); the other bodies are built here from the same schemas.

use std::collections::BTreeSet;

use prost_reflect::prost::Message as _;
use serde_json::json;

use super::*;

macro_rules! fixture {
    ($name:literal) => {
        include_bytes!(concat!(
            "../../../../tests/fixtures/protobuf/",
            $name,
            ".bin"
        ))
        .as_slice()
    };
}

/// Checks `decoded` against the JSON body kubectl sends for the same request (its
/// `--dry-run=client -o json` output) by the module's rules: what kubectl sends as `null` or
/// `""` is absent, what kubectl omits is absent or a zero number or `false` (or an object of
/// those), and everything else is equal.
fn assert_like_kubectl(decoded: &Json, kubectl: &Json, path: &str) {
    fn zero(value: &Json) -> bool {
        match value {
            Json::Bool(b) => !b,
            Json::Number(n) => n.as_f64() == Some(0.0),
            Json::Object(o) => o.values().all(zero),
            _ => false,
        }
    }
    match (decoded, kubectl) {
        (Json::Object(d), Json::Object(k)) => {
            for (key, kv) in k {
                match (d.get(key), kv) {
                    (None, Json::Null) => {}
                    (None, Json::String(s)) if s.is_empty() => {}
                    (None, _) => panic!("{path}.{key} is missing; kubectl sends {kv}"),
                    (Some(dv), _) => assert_like_kubectl(dv, kv, &format!("{path}.{key}")),
                }
            }
            for (key, dv) in d {
                assert!(
                    k.contains_key(key) || zero(dv),
                    "{path}.{key} is {dv}, which kubectl does not send"
                );
            }
        }
        (Json::Array(d), Json::Array(k)) => {
            assert_eq!(d.len(), k.len(), "{path} has another length");
            for (i, (dv, kv)) in d.iter().zip(k).enumerate() {
                assert_like_kubectl(dv, kv, &format!("{path}[{i}]"));
            }
        }
        _ => assert_eq!(decoded, kubectl, "{path} differs"),
    }
}

#[test]
fn configmap_from_kubectl() {
    let decoded = decode(fixture!("configmap"), "", "v1", "ConfigMap").unwrap();
    assert_eq!(
        decoded,
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm1", "generation": 0},
            "data": {"a": "b", "key2": "value2"}
        })
    );
    let kubectl = json!({"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm1","creationTimestamp":null},"data":{"a":"b","key2":"value2"}});
    assert_like_kubectl(&decoded, &kubectl, "");
}

#[test]
fn binary_data_and_secret_data_are_base64() {
    let decoded = decode(fixture!("configmap-from-files"), "", "v1", "ConfigMap").unwrap();
    assert_eq!(decoded["data"], json!({"greeting.txt": "hello\nworld\n"}));
    assert_eq!(decoded["binaryData"], json!({"blob": "YmluAP/+AQ=="}));
    let decoded = decode(fixture!("secret-generic"), "", "v1", "Secret").unwrap();
    assert_eq!(
        decoded,
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s1", "generation": 0},
            "data": {"pass": "cEBzcyB3MHJkIQ==", "user": "YWRtaW4="}
        })
    );
}

#[test]
fn deployment_from_kubectl_keeps_zero_replicas() {
    let decoded = decode(fixture!("deployment"), "apps", "v1", "Deployment").unwrap();
    assert_eq!(
        decoded,
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "generation": 0, "labels": {"app": "web"}},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"generation": 0, "labels": {"app": "web"}},
                    "spec": {
                        "containers": [{
                            "name": "nginx", "image": "nginx:1.27",
                            "ports": [{"hostPort": 0, "containerPort": 8080}],
                            "resources": {}, "stdin": false, "stdinOnce": false, "tty": false
                        }],
                        "hostNetwork": false, "hostPID": false, "hostIPC": false
                    }
                },
                "strategy": {}, "minReadySeconds": 0, "paused": false
            },
            "status": {
                "observedGeneration": 0, "replicas": 0, "updatedReplicas": 0,
                "availableReplicas": 0, "unavailableReplicas": 0, "readyReplicas": 0
            }
        })
    );
}

#[test]
fn selfsubjectaccessreview_from_kubectl_auth_can_i() {
    let decoded = decode(
        fixture!("selfsubjectaccessreview"),
        "authorization.k8s.io",
        "v1",
        "SelfSubjectAccessReview",
    )
    .unwrap();
    assert_eq!(
        decoded,
        json!({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "metadata": {"generation": 0},
            "spec": {"resourceAttributes": {"namespace": "default", "verb": "list", "resource": "pods"}},
            "status": {"allowed": false, "denied": false}
        })
    );
}

/// Every recorded body, against the JSON kubectl sends for the same command.
#[test]
fn every_kubectl_fixture_matches_its_json_body() {
    let cases: &[(&str, &[u8], Json)] = &[
        (
            "namespace",
            fixture!("namespace"),
            json!({"kind":"Namespace","apiVersion":"v1","metadata":{"name":"ns1","creationTimestamp":null},"spec":{},"status":{}}),
        ),
        (
            "configmap-from-files",
            fixture!("configmap-from-files"),
            json!({"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm2","creationTimestamp":null},"data":{"greeting.txt":"hello\nworld\n"},"binaryData":{"blob":"YmluAP/+AQ=="}}),
        ),
        (
            "deployment",
            fixture!("deployment"),
            json!({"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web","creationTimestamp":null,"labels":{"app":"web"}},"spec":{"replicas":0,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"creationTimestamp":null,"labels":{"app":"web"}},"spec":{"containers":[{"name":"nginx","image":"nginx:1.27","ports":[{"containerPort":8080}],"resources":{}}]}},"strategy":{}},"status":{}}),
        ),
        (
            "deployment-two-images",
            fixture!("deployment-two-images"),
            json!({"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web2","creationTimestamp":null,"labels":{"app":"web2"}},"spec":{"replicas":1,"selector":{"matchLabels":{"app":"web2"}},"template":{"metadata":{"creationTimestamp":null,"labels":{"app":"web2"}},"spec":{"containers":[{"name":"nginx","image":"nginx:1.27","resources":{}},{"name":"busybox","image":"busybox:1.36","resources":{}}]}},"strategy":{}},"status":{}}),
        ),
        (
            "secret-generic",
            fixture!("secret-generic"),
            json!({"kind":"Secret","apiVersion":"v1","metadata":{"name":"s1","creationTimestamp":null},"data":{"pass":"cEBzcyB3MHJkIQ==","user":"YWRtaW4="}}),
        ),
        (
            "secret-docker-registry",
            fixture!("secret-docker-registry"),
            json!({"kind":"Secret","apiVersion":"v1","metadata":{"name":"reg1","creationTimestamp":null},"data":{".dockerconfigjson":"eyJhdXRocyI6eyJyLmV4YW1wbGUiOnsidXNlcm5hbWUiOiJ1IiwicGFzc3dvcmQiOiJwIiwiYXV0aCI6ImRUcHcifX19"},"type":"kubernetes.io/dockerconfigjson"}),
        ),
        (
            "job",
            fixture!("job"),
            json!({"kind":"Job","apiVersion":"batch/v1","metadata":{"name":"j1","creationTimestamp":null},"spec":{"template":{"metadata":{"creationTimestamp":null},"spec":{"containers":[{"name":"j1","image":"busybox:1.36","command":["echo","hello"],"resources":{}}],"restartPolicy":"Never"}}},"status":{}}),
        ),
        (
            "cronjob",
            fixture!("cronjob"),
            json!({"kind":"CronJob","apiVersion":"batch/v1","metadata":{"name":"cj1","creationTimestamp":null},"spec":{"schedule":"*/5 * * * *","jobTemplate":{"metadata":{"name":"cj1","creationTimestamp":null},"spec":{"template":{"metadata":{"creationTimestamp":null},"spec":{"containers":[{"name":"cj1","image":"busybox:1.36","command":["date"],"resources":{}}],"restartPolicy":"OnFailure"}}}}},"status":{}}),
        ),
        (
            "selfsubjectaccessreview",
            fixture!("selfsubjectaccessreview"),
            json!({"kind":"SelfSubjectAccessReview","apiVersion":"authorization.k8s.io/v1","metadata":{"creationTimestamp":null},"spec":{"resourceAttributes":{"namespace":"default","verb":"list","resource":"pods"}},"status":{"allowed":false}}),
        ),
        (
            "selfsubjectaccessreview-subresource",
            fixture!("selfsubjectaccessreview-subresource"),
            json!({"kind":"SelfSubjectAccessReview","apiVersion":"authorization.k8s.io/v1","metadata":{"creationTimestamp":null},"spec":{"resourceAttributes":{"namespace":"kube-system","verb":"create","group":"apps","resource":"deployments","subresource":"scale"}},"status":{"allowed":false}}),
        ),
        (
            "service-clusterip",
            fixture!("service-clusterip"),
            json!({"kind":"Service","apiVersion":"v1","metadata":{"name":"svc1","creationTimestamp":null,"labels":{"app":"svc1"}},"spec":{"ports":[{"name":"80-8080","protocol":"TCP","port":80,"targetPort":8080},{"name":"443","protocol":"TCP","port":443,"targetPort":443}],"selector":{"app":"svc1"},"type":"ClusterIP"},"status":{"loadBalancer":{}}}),
        ),
        (
            "serviceaccount",
            fixture!("serviceaccount"),
            json!({"kind":"ServiceAccount","apiVersion":"v1","metadata":{"name":"sa1","creationTimestamp":null}}),
        ),
        (
            "priorityclass",
            fixture!("priorityclass"),
            json!({"kind":"PriorityClass","apiVersion":"scheduling.k8s.io/v1","metadata":{"name":"pc1","creationTimestamp":null},"value":1000,"description":"high prio","preemptionPolicy":"Never"}),
        ),
        (
            "poddisruptionbudget-min-available",
            fixture!("poddisruptionbudget-min-available"),
            json!({"kind":"PodDisruptionBudget","apiVersion":"policy/v1","metadata":{"name":"pdb1","creationTimestamp":null},"spec":{"minAvailable":"50%","selector":{"matchLabels":{"app":"web"}}},"status":{"disruptionsAllowed":0,"currentHealthy":0,"desiredHealthy":0,"expectedPods":0}}),
        ),
        (
            "poddisruptionbudget-max-unavailable",
            fixture!("poddisruptionbudget-max-unavailable"),
            json!({"kind":"PodDisruptionBudget","apiVersion":"policy/v1","metadata":{"name":"pdb2","creationTimestamp":null},"spec":{"selector":{"matchLabels":{"app":"web"}},"maxUnavailable":0},"status":{"disruptionsAllowed":0,"currentHealthy":0,"desiredHealthy":0,"expectedPods":0}}),
        ),
        (
            "resourcequota",
            fixture!("resourcequota"),
            json!({"kind":"ResourceQuota","apiVersion":"v1","metadata":{"name":"q1","creationTimestamp":null},"spec":{"hard":{"cpu":"1","memory":"1Gi","pods":"10"}},"status":{}}),
        ),
        (
            "role",
            fixture!("role"),
            json!({"kind":"Role","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"r1","creationTimestamp":null},"rules":[{"verbs":["get","list"],"apiGroups":[""],"resources":["pods"]}]}),
        ),
        (
            "clusterrolebinding",
            fixture!("clusterrolebinding"),
            json!({"kind":"ClusterRoleBinding","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"crb1","creationTimestamp":null},"subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"alice"},{"kind":"Group","apiGroup":"rbac.authorization.k8s.io","name":"devs"},{"kind":"ServiceAccount","name":"sa1","namespace":"default"}],"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"}}),
        ),
        (
            "ingress",
            fixture!("ingress"),
            json!({"kind":"Ingress","apiVersion":"networking.k8s.io/v1","metadata":{"name":"ing1","creationTimestamp":null},"spec":{"rules":[{"host":"foo.com","http":{"paths":[{"path":"/bar","pathType":"Exact","backend":{"service":{"name":"svc1","port":{"number":80}}}}]}}]},"status":{"loadBalancer":{}}}),
        ),
        (
            "tokenrequest",
            fixture!("tokenrequest"),
            json!({"kind":"TokenRequest","apiVersion":"authentication.k8s.io/v1","metadata":{"creationTimestamp":null},"spec":{"audiences":["api"],"expirationSeconds":600,"boundObjectRef":null},"status":{"token":"","expirationTimestamp":null}}),
        ),
        (
            "tokenrequest-bound",
            fixture!("tokenrequest-bound"),
            json!({"kind":"TokenRequest","apiVersion":"authentication.k8s.io/v1","metadata":{"creationTimestamp":null},"spec":{"audiences":null,"expirationSeconds":3600,"boundObjectRef":{"kind":"Pod","apiVersion":"v1","name":"p1","uid":"1234-abcd"}},"status":{"token":"","expirationTimestamp":null}}),
        ),
        (
            "horizontalpodautoscaler",
            fixture!("horizontalpodautoscaler"),
            json!({"kind":"HorizontalPodAutoscaler","apiVersion":"autoscaling/v1","metadata":{"name":"web","creationTimestamp":null},"spec":{"scaleTargetRef":{"kind":"Deployment","name":"web","apiVersion":"apps/v1"},"minReplicas":2,"maxReplicas":5,"targetCPUUtilizationPercentage":80},"status":{"currentReplicas":0,"desiredReplicas":0}}),
        ),
        (
            "certificatesigningrequest-approval",
            fixture!("certificatesigningrequest-approval"),
            json!({"kind":"CertificateSigningRequest","apiVersion":"certificates.k8s.io/v1","metadata":{"name":"csr1","uid":"c1","resourceVersion":"7","creationTimestamp":"2024-05-06T07:08:09Z"},"spec":{"request":"LS0tLS1CRUdJTg==","signerName":"kubernetes.io/kube-apiserver-client","expirationSeconds":3600,"usages":["client auth"],"username":"alice","groups":["devs","system:authenticated"],"extra":{"scopes":["a","b"]}},"status":{"conditions":[{"type":"Approved","status":"True","reason":"KubectlApprove","message":"This CSR was approved by kubectl certificate approve.","lastUpdateTime":"2026-11-22T00:42:11Z","lastTransitionTime":null}]}}),
        ),
    ];
    for (name, body, kubectl) in cases {
        let api_version = kubectl["apiVersion"].as_str().unwrap();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let kind = kubectl["kind"].as_str().unwrap();
        let decoded = decode(body, group, version, kind).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_like_kubectl(&decoded, kubectl, name);
    }
}

// Bodies built from the schemas, for what kubectl's generators do not send.

fn message(name: &str, fields: Vec<(&str, Value)>) -> DynamicMessage {
    let descriptor = pool()
        .unwrap()
        .get_message_by_name(&format!("k8s.io.{name}"))
        .unwrap_or_else(|| panic!("no message {name}"));
    let mut message = DynamicMessage::new(descriptor);
    for (field, value) in fields {
        message
            .try_set_field_by_name(field, value)
            .unwrap_or_else(|e| panic!("{name}.{field}: {e:?}"));
    }
    message
}

fn m(name: &str, fields: Vec<(&str, Value)>) -> Value {
    Value::Message(message(name, fields))
}

fn s(value: &str) -> Value {
    Value::String(value.to_owned())
}

fn map(entries: Vec<(&str, Value)>) -> Value {
    Value::Map(
        entries
            .into_iter()
            .map(|(key, value)| (MapKey::String(key.to_owned()), value))
            .collect(),
    )
}

fn time(name: &str, seconds: i64, nanos: i32) -> Value {
    m(
        &format!("apimachinery.pkg.apis.meta.v1.{name}"),
        vec![
            ("seconds", Value::I64(seconds)),
            ("nanos", Value::I32(nanos)),
        ],
    )
}

fn quantity(value: &str) -> Value {
    m(
        "apimachinery.pkg.api.resource.Quantity",
        vec![("string", s(value))],
    )
}

fn int_or_string(int: Option<i32>, string: &str) -> Value {
    m(
        "apimachinery.pkg.util.intstr.IntOrString",
        match int {
            Some(i) => vec![("type", Value::I64(0)), ("intVal", Value::I32(i))],
            None => vec![("type", Value::I64(1)), ("strVal", s(string))],
        },
    )
}

/// The body client-go sends for `object`: magic, then a `runtime.Unknown` wrapping it.
fn body_with(
    type_meta: Option<(&str, &str)>,
    object: &DynamicMessage,
    encoding: &str,
    content_type: &str,
) -> Vec<u8> {
    let mut fields = vec![
        ("raw", Value::Bytes(object.encode_to_vec().into())),
        ("contentEncoding", s(encoding)),
        ("contentType", s(content_type)),
    ];
    if let Some((api_version, kind)) = type_meta {
        fields.push((
            "typeMeta",
            m(
                "apimachinery.pkg.runtime.TypeMeta",
                vec![("apiVersion", s(api_version)), ("kind", s(kind))],
            ),
        ));
    }
    let unknown = message("apimachinery.pkg.runtime.Unknown", fields);
    [MAGIC.as_slice(), &unknown.encode_to_vec()].concat()
}

fn body(api_version: &str, kind: &str, object: &DynamicMessage) -> Vec<u8> {
    body_with(Some((api_version, kind)), object, "", "")
}

const CORE: &str = "api.core.v1";

fn core(name: &str, fields: Vec<(&str, Value)>) -> Value {
    m(&format!("{CORE}.{name}"), fields)
}

fn local_ref(name: &str) -> (&'static str, Value) {
    (
        "localObjectReference",
        core("LocalObjectReference", vec![("name", s(name))]),
    )
}

fn pod() -> DynamicMessage {
    let meta = m(
        "apimachinery.pkg.apis.meta.v1.ObjectMeta",
        vec![
            ("name", s("web")),
            ("namespace", s("default")),
            ("uid", s("")),
            ("creationTimestamp", time("Time", 1_714_979_289, 0)),
            (
                "deletionTimestamp",
                time("Time", 1_714_979_349, 500_000_000),
            ),
            ("labels", map(vec![("app", s("web"))])),
            (
                "ownerReferences",
                Value::List(vec![m(
                    "apimachinery.pkg.apis.meta.v1.OwnerReference",
                    vec![
                        ("apiVersion", s("apps/v1")),
                        ("kind", s("ReplicaSet")),
                        ("name", s("web-1")),
                        ("uid", s("r1")),
                        ("controller", Value::Bool(true)),
                    ],
                )]),
            ),
            (
                "managedFields",
                Value::List(vec![m(
                    "apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry",
                    vec![
                        ("manager", s("kubectl")),
                        ("operation", s("Update")),
                        ("apiVersion", s("v1")),
                        ("time", time("Time", 1_714_979_289, 0)),
                        ("fieldsType", s("FieldsV1")),
                        (
                            "fieldsV1",
                            m(
                                "apimachinery.pkg.apis.meta.v1.FieldsV1",
                                vec![(
                                    "Raw",
                                    Value::Bytes(br#"{"f:metadata":{}}"#.as_slice().into()),
                                )],
                            ),
                        ),
                    ],
                )]),
            ),
        ],
    );
    let volumes = vec![
        core(
            "Volume",
            vec![
                ("name", s("cache")),
                (
                    "volumeSource",
                    core(
                        "VolumeSource",
                        vec![("emptyDir", core("EmptyDirVolumeSource", vec![]))],
                    ),
                ),
            ],
        ),
        core(
            "Volume",
            vec![
                ("name", s("config")),
                (
                    "volumeSource",
                    core(
                        "VolumeSource",
                        vec![(
                            "configMap",
                            core(
                                "ConfigMapVolumeSource",
                                vec![local_ref("app-config"), ("defaultMode", Value::I32(420))],
                            ),
                        )],
                    ),
                ),
            ],
        ),
        core(
            "Volume",
            vec![
                ("name", s("token")),
                (
                    "volumeSource",
                    core(
                        "VolumeSource",
                        vec![(
                            "projected",
                            core(
                                "ProjectedVolumeSource",
                                vec![(
                                    "sources",
                                    Value::List(vec![
                                        core(
                                            "VolumeProjection",
                                            vec![(
                                                "serviceAccountToken",
                                                core(
                                                    "ServiceAccountTokenProjection",
                                                    vec![
                                                        ("path", s("token")),
                                                        ("expirationSeconds", Value::I64(3600)),
                                                    ],
                                                ),
                                            )],
                                        ),
                                        core(
                                            "VolumeProjection",
                                            vec![(
                                                "downwardAPI",
                                                core(
                                                    "DownwardAPIProjection",
                                                    vec![(
                                                        "items",
                                                        Value::List(vec![core(
                                                            "DownwardAPIVolumeFile",
                                                            vec![
                                                                ("path", s("labels")),
                                                                (
                                                                    "fieldRef",
                                                                    core(
                                                                        "ObjectFieldSelector",
                                                                        vec![(
                                                                            "fieldPath",
                                                                            s("metadata.labels"),
                                                                        )],
                                                                    ),
                                                                ),
                                                            ],
                                                        )]),
                                                    )],
                                                ),
                                            )],
                                        ),
                                    ]),
                                )],
                            ),
                        )],
                    ),
                ),
            ],
        ),
    ];
    let container = core(
        "Container",
        vec![
            ("name", s("app")),
            ("image", s("nginx")),
            (
                "env",
                Value::List(vec![core(
                    "EnvVar",
                    vec![
                        ("name", s("MODE")),
                        (
                            "valueFrom",
                            core(
                                "EnvVarSource",
                                vec![(
                                    "configMapKeyRef",
                                    core(
                                        "ConfigMapKeySelector",
                                        vec![local_ref("app-config"), ("key", s("mode"))],
                                    ),
                                )],
                            ),
                        ),
                    ],
                )]),
            ),
            (
                "envFrom",
                Value::List(vec![core(
                    "EnvFromSource",
                    vec![(
                        "secretRef",
                        core("SecretEnvSource", vec![local_ref("creds")]),
                    )],
                )]),
            ),
            (
                "resources",
                core(
                    "ResourceRequirements",
                    vec![(
                        "limits",
                        map(vec![
                            ("cpu", quantity("500m")),
                            ("memory", quantity("128Mi")),
                        ]),
                    )],
                ),
            ),
            (
                "livenessProbe",
                core(
                    "Probe",
                    vec![
                        (
                            "handler",
                            core(
                                "ProbeHandler",
                                vec![(
                                    "httpGet",
                                    core(
                                        "HTTPGetAction",
                                        vec![
                                            ("path", s("/healthz")),
                                            ("port", int_or_string(None, "http")),
                                        ],
                                    ),
                                )],
                            ),
                        ),
                        ("periodSeconds", Value::I32(10)),
                    ],
                ),
            ),
            (
                "readinessProbe",
                core(
                    "Probe",
                    vec![(
                        "handler",
                        core(
                            "ProbeHandler",
                            vec![(
                                "tcpSocket",
                                core(
                                    "TCPSocketAction",
                                    vec![("port", int_or_string(Some(8080), ""))],
                                ),
                            )],
                        ),
                    )],
                ),
            ),
            (
                "securityContext",
                core(
                    "SecurityContext",
                    vec![
                        ("runAsUser", Value::I64(0)),
                        ("runAsNonRoot", Value::Bool(false)),
                    ],
                ),
            ),
        ],
    );
    message(
        &format!("{CORE}.Pod"),
        vec![
            ("metadata", meta),
            (
                "spec",
                core(
                    "PodSpec",
                    vec![
                        ("volumes", Value::List(volumes)),
                        ("containers", Value::List(vec![container])),
                        ("terminationGracePeriodSeconds", Value::I64(0)),
                        ("automountServiceAccountToken", Value::Bool(false)),
                    ],
                ),
            ),
        ],
    )
}

#[test]
fn pod_with_inline_structs_special_types_and_zero_pointers() {
    let decoded = decode(&body("v1", "Pod", &pod()), "", "v1", "Pod").unwrap();
    assert_eq!(
        decoded,
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "web", "namespace": "default",
                "creationTimestamp": "2024-05-06T07:08:09Z",
                "deletionTimestamp": "2024-05-06T07:09:09Z",
                "labels": {"app": "web"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "r1", "controller": true}],
                "managedFields": [{
                    "manager": "kubectl", "operation": "Update", "apiVersion": "v1",
                    "time": "2024-05-06T07:08:09Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}}
                }]
            },
            "spec": {
                "volumes": [
                    {"name": "cache", "emptyDir": {}},
                    {"name": "config", "configMap": {"name": "app-config", "defaultMode": 420}},
                    {"name": "token", "projected": {"sources": [
                        {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}},
                        {"downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}
                    ]}}
                ],
                "containers": [{
                    "name": "app", "image": "nginx",
                    "env": [{"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "app-config", "key": "mode"}}}],
                    "envFrom": [{"secretRef": {"name": "creds"}}],
                    "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}},
                    "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 10},
                    "readinessProbe": {"tcpSocket": {"port": 8080}},
                    "securityContext": {"runAsUser": 0, "runAsNonRoot": false}
                }],
                "terminationGracePeriodSeconds": 0,
                "automountServiceAccountToken": false
            }
        })
    );
}

#[test]
fn micro_times_node_and_events() {
    let lease = message(
        "api.coordination.v1.Lease",
        vec![(
            "spec",
            m(
                "api.coordination.v1.LeaseSpec",
                vec![
                    ("holderIdentity", s("node-a")),
                    ("leaseDurationSeconds", Value::I32(40)),
                    ("acquireTime", time("MicroTime", 1_714_979_289, 123_456_789)),
                    ("renewTime", time("MicroTime", 1_714_979_289, 0)),
                ],
            ),
        )],
    );
    let decoded = decode(&body("coordination.k8s.io/v1", "Lease", &lease), "", "", "").unwrap();
    assert_eq!(
        decoded,
        json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "spec": {
                "holderIdentity": "node-a", "leaseDurationSeconds": 40,
                "acquireTime": "2024-05-06T07:08:09.123456Z", "renewTime": "2024-05-06T07:08:09.000000Z"
            }
        })
    );

    let event = message(
        "api.events.v1.Event",
        vec![
            ("eventTime", time("MicroTime", 0, 1_000)),
            ("reportingController", s("kubelet")),
            ("action", s("Pulled")),
            ("reason", s("Pulled")),
            (
                "regarding",
                core(
                    "ObjectReference",
                    vec![
                        ("kind", s("Pod")),
                        ("name", s("p1")),
                        ("namespace", s("default")),
                    ],
                ),
            ),
            ("note", s("pulled")),
            ("type", s("Normal")),
            ("deprecatedFirstTimestamp", time("Time", 86_400, 0)),
        ],
    );
    let decoded = decode(
        &body("events.k8s.io/v1", "Event", &event),
        "events.k8s.io",
        "v1",
        "Event",
    )
    .unwrap();
    assert_eq!(
        decoded,
        json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "eventTime": "1970-01-01T00:00:00.000001Z", "reportingController": "kubelet",
            "action": "Pulled", "reason": "Pulled",
            "regarding": {"kind": "Pod", "name": "p1", "namespace": "default"},
            "note": "pulled", "type": "Normal", "deprecatedFirstTimestamp": "1970-01-02T00:00:00Z"
        })
    );

    let node = message(
        &format!("{CORE}.Node"),
        vec![
            (
                "spec",
                core(
                    "NodeSpec",
                    vec![
                        ("podCIDR", s("10.244.1.0/24")),
                        ("unschedulable", Value::Bool(true)),
                        (
                            "taints",
                            Value::List(vec![core(
                                "Taint",
                                vec![
                                    ("key", s("node.kubernetes.io/unschedulable")),
                                    ("effect", s("NoSchedule")),
                                    ("timeAdded", time("Time", 1_714_979_289, 0)),
                                ],
                            )]),
                        ),
                    ],
                ),
            ),
            (
                "status",
                core(
                    "NodeStatus",
                    vec![
                        (
                            "capacity",
                            map(vec![
                                ("cpu", quantity("4")),
                                ("memory", quantity("8Gi")),
                                ("pods", quantity("")),
                            ]),
                        ),
                        (
                            "addresses",
                            Value::List(vec![core(
                                "NodeAddress",
                                vec![("type", s("InternalIP")), ("address", s("192.0.2.10"))],
                            )]),
                        ),
                    ],
                ),
            ),
        ],
    );
    let decoded = decode(&body("v1", "Node", &node), "", "v1", "Node").unwrap();
    assert_eq!(
        decoded,
        json!({
            "apiVersion": "v1", "kind": "Node",
            "spec": {
                "podCIDR": "10.244.1.0/24", "unschedulable": true,
                "taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": "2024-05-06T07:08:09Z"}]
            },
            "status": {
                "capacity": {"cpu": "4", "memory": "8Gi", "pods": "0"},
                "addresses": [{"type": "InternalIP", "address": "192.0.2.10"}]
            }
        })
    );
}

#[test]
fn reviews_binding_eviction_and_delete_options() {
    let sar = message(
        "api.authorization.v1.SubjectAccessReview",
        vec![(
            "spec",
            m(
                "api.authorization.v1.SubjectAccessReviewSpec",
                vec![
                    (
                        "resourceAttributes",
                        m(
                            "api.authorization.v1.ResourceAttributes",
                            vec![
                                ("namespace", s("ns")),
                                ("verb", s("get")),
                                ("resource", s("pods")),
                            ],
                        ),
                    ),
                    ("user", s("alice")),
                    ("groups", Value::List(vec![s("devs")])),
                    (
                        "extra",
                        map(vec![(
                            "scopes",
                            m(
                                "api.authorization.v1.ExtraValue",
                                vec![("items", Value::List(vec![s("a"), s("b")]))],
                            ),
                        )]),
                    ),
                    ("uid", s("u-1")),
                ],
            ),
        )],
    );
    let decoded = decode(
        &body("authorization.k8s.io/v1", "SubjectAccessReview", &sar),
        "authorization.k8s.io",
        "v1",
        "SubjectAccessReview",
    )
    .unwrap();
    assert_eq!(
        decoded,
        json!({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {
                "resourceAttributes": {"namespace": "ns", "verb": "get", "resource": "pods"},
                "user": "alice", "groups": ["devs"], "extra": {"scopes": ["a", "b"]}, "uid": "u-1"
            }
        })
    );

    let review = message(
        "api.authentication.v1.TokenReview",
        vec![(
            "spec",
            m(
                "api.authentication.v1.TokenReviewSpec",
                vec![
                    ("token", s("abc")),
                    ("audiences", Value::List(vec![s("api")])),
                ],
            ),
        )],
    );
    let decoded = decode(
        &body("authentication.k8s.io/v1", "TokenReview", &review),
        "",
        "",
        "",
    )
    .unwrap();
    assert_eq!(
        decoded,
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "abc", "audiences": ["api"]}})
    );

    let meta = || {
        m(
            "apimachinery.pkg.apis.meta.v1.ObjectMeta",
            vec![("name", s("p1")), ("namespace", s("default"))],
        )
    };
    let binding = message(
        &format!("{CORE}.Binding"),
        vec![
            ("metadata", meta()),
            (
                "target",
                core(
                    "ObjectReference",
                    vec![
                        ("kind", s("Node")),
                        ("name", s("n1")),
                        ("apiVersion", s("v1")),
                    ],
                ),
            ),
        ],
    );
    let decoded = decode(&body("v1", "Binding", &binding), "", "v1", "Binding").unwrap();
    assert_eq!(
        decoded,
        json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": "p1", "namespace": "default"},
            "target": {"kind": "Node", "name": "n1", "apiVersion": "v1"}
        })
    );

    let options = || {
        message(
            "apimachinery.pkg.apis.meta.v1.DeleteOptions",
            vec![
                ("gracePeriodSeconds", Value::I64(0)),
                (
                    "preconditions",
                    m(
                        "apimachinery.pkg.apis.meta.v1.Preconditions",
                        vec![("uid", s("p1"))],
                    ),
                ),
                ("propagationPolicy", s("Foreground")),
                ("dryRun", Value::List(vec![s("All")])),
            ],
        )
    };
    let eviction = message(
        "api.policy.v1.Eviction",
        vec![
            ("metadata", meta()),
            ("deleteOptions", Value::Message(options())),
        ],
    );
    let decoded = decode(
        &body("policy/v1", "Eviction", &eviction),
        "policy",
        "v1",
        "Eviction",
    )
    .unwrap();
    assert_eq!(
        decoded,
        json!({
            "apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": "p1", "namespace": "default"},
            "deleteOptions": {"gracePeriodSeconds": 0, "preconditions": {"uid": "p1"}, "propagationPolicy": "Foreground", "dryRun": ["All"]}
        })
    );

    // DeleteOptions is registered in every group version; without typeMeta the request's
    // group, version and kind are used.
    let expected = |api_version: &str| {
        json!({
            "apiVersion": api_version, "kind": "DeleteOptions",
            "gracePeriodSeconds": 0, "preconditions": {"uid": "p1"}, "propagationPolicy": "Foreground", "dryRun": ["All"]
        })
    };
    let decoded = decode(
        &body("apps/v1", "DeleteOptions", &options()),
        "apps",
        "v1",
        "DeleteOptions",
    )
    .unwrap();
    assert_eq!(decoded, expected("apps/v1"));
    let decoded = decode(
        &body_with(None, &options(), "", ""),
        "",
        "v1",
        "DeleteOptions",
    )
    .unwrap();
    assert_eq!(decoded, expected("v1"));
}

#[test]
fn raw_extension_and_envelope_type() {
    let revision = message(
        "api.apps.v1.ControllerRevision",
        vec![
            (
                "data",
                m(
                    "apimachinery.pkg.runtime.RawExtension",
                    vec![(
                        "raw",
                        Value::Bytes(br#"{"spec":{"replicas":1}}"#.as_slice().into()),
                    )],
                ),
            ),
            ("revision", Value::I64(3)),
        ],
    );
    let decoded = decode(
        &body("apps/v1", "ControllerRevision", &revision),
        "apps",
        "v1",
        "ControllerRevision",
    )
    .unwrap();
    assert_eq!(
        decoded,
        json!({"apiVersion": "apps/v1", "kind": "ControllerRevision", "data": {"spec": {"replicas": 1}}, "revision": 3})
    );

    // Without typeMeta, the request's type is used; with one, the envelope's, as for JSON.
    let body_without = body_with(None, &revision, "", "");
    let decoded = decode(&body_without, "apps", "v1", "ControllerRevision").unwrap();
    assert_eq!(decoded["apiVersion"], "apps/v1");
    let secret = message(&format!("{CORE}.Secret"), vec![("type", s("Opaque"))]);
    let decoded = decode(&body("v1", "Secret", &secret), "", "v1", "ConfigMap").unwrap();
    assert_eq!(
        decoded,
        json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque"})
    );
}

#[test]
fn malformed_bodies_are_bad_requests() {
    let err = decode(br#"{"kind":"ConfigMap"}"#, "", "v1", "ConfigMap").unwrap_err();
    assert!(matches!(err, DecodeError::BadMagic), "{err}");
    assert_eq!(err.status_code(), 400);
    assert!(err.to_string().contains("magic"), "{err}");

    let err = decode(b"k8s\0\x0a\x10\x0a", "", "v1", "ConfigMap").unwrap_err();
    assert!(matches!(err, DecodeError::BadEnvelope(_)), "{err}");
    assert_eq!(err.status_code(), 400);

    let raw = message(
        "apimachinery.pkg.runtime.Unknown",
        vec![
            (
                "typeMeta",
                m(
                    "apimachinery.pkg.runtime.TypeMeta",
                    vec![("apiVersion", s("v1")), ("kind", s("ConfigMap"))],
                ),
            ),
            ("raw", Value::Bytes(vec![0x0a, 0x05, 0x01].into())),
        ],
    );
    let body = [MAGIC.as_slice(), &raw.encode_to_vec()].concat();
    let err = decode(&body, "", "v1", "ConfigMap").unwrap_err();
    assert!(matches!(err, DecodeError::BadObject { .. }), "{err}");
    assert!(
        err.to_string()
            .starts_with("protobuf body is not a valid ConfigMap: "),
        "{err}"
    );
    assert_eq!(err.status_code(), 400);
}

#[test]
fn values_without_json_form_name_their_path() {
    let revision = message(
        "api.apps.v1.ControllerRevision",
        vec![(
            "data",
            m(
                "apimachinery.pkg.runtime.RawExtension",
                vec![("raw", Value::Bytes(b"\x0a\x01x".as_slice().into()))],
            ),
        )],
    );
    let err = decode(
        &body("apps/v1", "ControllerRevision", &revision),
        "",
        "",
        "",
    )
    .unwrap_err();
    assert!(
        matches!(&err, DecodeError::BadValue { path, .. } if path == "data"),
        "{err}"
    );
    assert!(
        err.to_string().contains("raw is not a JSON document"),
        "{err}"
    );

    let mut pod = pod();
    let spec = message(
        &format!("{CORE}.PodSpec"),
        vec![(
            "containers",
            Value::List(vec![core(
                "Container",
                vec![
                    ("name", s("app")),
                    (
                        "readinessProbe",
                        core(
                            "Probe",
                            vec![(
                                "handler",
                                core(
                                    "ProbeHandler",
                                    vec![(
                                        "tcpSocket",
                                        core(
                                            "TCPSocketAction",
                                            vec![(
                                                "port",
                                                m(
                                                    "apimachinery.pkg.util.intstr.IntOrString",
                                                    vec![("type", Value::I64(7))],
                                                ),
                                            )],
                                        ),
                                    )],
                                ),
                            )],
                        ),
                    ),
                ],
            )]),
        )],
    );
    pod.try_set_field_by_name("spec", Value::Message(spec))
        .unwrap();
    let err = decode(&body("v1", "Pod", &pod), "", "v1", "Pod").unwrap_err();
    assert_eq!(
        err.to_string(),
        "protobuf body for Pod has an invalid value at spec.containers[0].readinessProbe.tcpSocket.port: \
         IntOrString of unknown type 7"
    );
    assert_eq!(err.status_code(), 400);

    let node = message(
        &format!("{CORE}.Node"),
        vec![(
            "status",
            core(
                "NodeStatus",
                vec![
                    (
                        "capacity",
                        map(vec![(
                            "cpu",
                            m("apimachinery.pkg.api.resource.Quantity", vec![]),
                        )]),
                    ),
                    (
                        "conditions",
                        Value::List(vec![core(
                            "NodeCondition",
                            vec![("lastHeartbeatTime", time("Time", 0, 1_000_000_000))],
                        )]),
                    ),
                ],
            ),
        )],
    );
    let err = decode(&body("v1", "Node", &node), "", "v1", "Node").unwrap_err();
    assert!(
        matches!(&err, DecodeError::BadValue { path, .. } if path == "status.conditions[0].lastHeartbeatTime"),
        "{err}"
    );
}

#[test]
fn unsupported_bodies_are_unsupported_media_types() {
    let object = message(&format!("{CORE}.ConfigMap"), vec![]);
    let err = decode(
        &body_with(Some(("v1", "ConfigMap")), &object, "gzip", ""),
        "",
        "v1",
        "ConfigMap",
    )
    .unwrap_err();
    assert!(
        matches!(&err, DecodeError::UnsupportedEncoding(e) if e == "gzip"),
        "{err}"
    );
    assert_eq!(err.status_code(), 415);

    let err = decode(
        &body_with(Some(("v1", "ConfigMap")), &object, "", "application/json"),
        "",
        "v1",
        "ConfigMap",
    )
    .unwrap_err();
    assert!(
        matches!(&err, DecodeError::UnsupportedContentType(_)),
        "{err}"
    );
    assert_eq!(err.status_code(), 415);
    let ok = decode(
        &body_with(Some(("v1", "ConfigMap")), &object, "", CONTENT_TYPE),
        "",
        "v1",
        "ConfigMap",
    );
    assert!(ok.is_ok());

    for (api_version, kind) in [
        ("example.com/v1", "Widget"),
        ("apps/v1beta1", "Deployment"),
        ("v1", "Widget"),
        ("v1", "v1.Pod"),
    ] {
        let err = decode(&body(api_version, kind, &object), "", "v1", "ConfigMap").unwrap_err();
        assert_eq!(err.status_code(), 415, "{api_version} {kind}");
        assert_eq!(
            err.to_string(),
            format!(
                "protobuf bodies are supported for the kinds of v1, admissionregistration.k8s.io/v1, \
                 apiextensions.k8s.io/v1, apiregistration.k8s.io/v1, apps/v1, \
                 authentication.k8s.io/v1, authorization.k8s.io/v1, autoscaling/v1, autoscaling/v2, \
                 batch/v1, certificates.k8s.io/v1, coordination.k8s.io/v1, discovery.k8s.io/v1, \
                 events.k8s.io/v1, flowcontrol.apiserver.k8s.io/v1, networking.k8s.io/v1, \
                 node.k8s.io/v1, policy/v1, rbac.authorization.k8s.io/v1, scheduling.k8s.io/v1, \
                 storage.k8s.io/v1, and \
                 DeleteOptions; send {kind} ({api_version}) as JSON"
            )
        );
    }
}

/// One minimal object of a kind of every supported group version, as its typed client sends
/// it, decodes to the JSON kubectl would send.
#[test]
fn every_group_version_decodes_a_minimal_object() {
    fn meta(name: &str) -> (&'static str, Value) {
        (
            "metadata",
            m(
                "apimachinery.pkg.apis.meta.v1.ObjectMeta",
                vec![("name", s(name))],
            ),
        )
    }
    fn strings(items: &[&str]) -> Value {
        Value::List(items.iter().map(|item| s(item)).collect())
    }
    /// `(apiVersion, kind, the object's fields, the JSON expected without apiVersion and kind)`.
    type Case = (&'static str, &'static str, Vec<(&'static str, Value)>, Json);
    let cases: Vec<Case> = vec![
        (
            "v1",
            "ServiceAccount",
            vec![
                meta("builder"),
                ("automountServiceAccountToken", Value::Bool(false)),
            ],
            json!({"metadata": {"name": "builder"}, "automountServiceAccountToken": false}),
        ),
        (
            "admissionregistration.k8s.io/v1",
            "ValidatingWebhookConfiguration",
            vec![
                meta("checks"),
                (
                    "Webhooks",
                    Value::List(vec![m(
                        "api.admissionregistration.v1.ValidatingWebhook",
                        vec![
                            ("name", s("check.example.com")),
                            ("sideEffects", s("None")),
                            ("admissionReviewVersions", strings(&["v1"])),
                        ],
                    )]),
                ),
            ],
            json!({"metadata": {"name": "checks"}, "webhooks": [{
                "name": "check.example.com", "sideEffects": "None",
                "admissionReviewVersions": ["v1"]}]}),
        ),
        (
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            vec![
                meta("widgets.example.com"),
                (
                    "spec",
                    m(
                        "apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionSpec",
                        vec![("group", s("example.com")), ("scope", s("Namespaced"))],
                    ),
                ),
            ],
            json!({"metadata": {"name": "widgets.example.com"},
                   "spec": {"group": "example.com", "scope": "Namespaced"}}),
        ),
        (
            "apiregistration.k8s.io/v1",
            "APIService",
            vec![
                meta("v1beta1.metrics.k8s.io"),
                (
                    "spec",
                    m(
                        "kube_aggregator.pkg.apis.apiregistration.v1.APIServiceSpec",
                        vec![
                            ("group", s("metrics.k8s.io")),
                            ("version", s("v1beta1")),
                            ("groupPriorityMinimum", Value::I32(100)),
                            ("versionPriority", Value::I32(100)),
                        ],
                    ),
                ),
            ],
            json!({"metadata": {"name": "v1beta1.metrics.k8s.io"}, "spec": {
                "group": "metrics.k8s.io", "version": "v1beta1",
                "groupPriorityMinimum": 100, "versionPriority": 100}}),
        ),
        (
            "apps/v1",
            "ControllerRevision",
            vec![meta("web-1"), ("revision", Value::I64(1))],
            json!({"metadata": {"name": "web-1"}, "revision": 1}),
        ),
        (
            "authentication.k8s.io/v1",
            "TokenReview",
            vec![(
                "spec",
                m(
                    "api.authentication.v1.TokenReviewSpec",
                    vec![("token", s("t0k3n"))],
                ),
            )],
            json!({"spec": {"token": "t0k3n"}}),
        ),
        (
            "authorization.k8s.io/v1",
            "SelfSubjectAccessReview",
            vec![(
                "spec",
                m(
                    "api.authorization.v1.SelfSubjectAccessReviewSpec",
                    vec![(
                        "resourceAttributes",
                        m(
                            "api.authorization.v1.ResourceAttributes",
                            vec![("verb", s("get")), ("resource", s("pods"))],
                        ),
                    )],
                ),
            )],
            json!({"spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}}),
        ),
        (
            "autoscaling/v1",
            "Scale",
            vec![
                meta("web"),
                (
                    "spec",
                    m(
                        "api.autoscaling.v1.ScaleSpec",
                        vec![("replicas", Value::I32(2))],
                    ),
                ),
            ],
            json!({"metadata": {"name": "web"}, "spec": {"replicas": 2}}),
        ),
        (
            "autoscaling/v2",
            "HorizontalPodAutoscaler",
            vec![
                meta("web"),
                (
                    "spec",
                    m(
                        "api.autoscaling.v2.HorizontalPodAutoscalerSpec",
                        vec![("maxReplicas", Value::I32(3))],
                    ),
                ),
            ],
            json!({"metadata": {"name": "web"}, "spec": {"maxReplicas": 3}}),
        ),
        (
            "batch/v1",
            "Job",
            vec![
                meta("once"),
                (
                    "spec",
                    m("api.batch.v1.JobSpec", vec![("parallelism", Value::I32(1))]),
                ),
            ],
            json!({"metadata": {"name": "once"}, "spec": {"parallelism": 1}}),
        ),
        (
            "certificates.k8s.io/v1",
            "CertificateSigningRequest",
            vec![
                meta("node-csr"),
                (
                    "spec",
                    m(
                        "api.certificates.v1.CertificateSigningRequestSpec",
                        vec![("signerName", s("example.com/signer"))],
                    ),
                ),
            ],
            json!({"metadata": {"name": "node-csr"}, "spec": {"signerName": "example.com/signer"}}),
        ),
        (
            "coordination.k8s.io/v1",
            "Lease",
            vec![
                meta("node-1"),
                (
                    "spec",
                    m(
                        "api.coordination.v1.LeaseSpec",
                        vec![("holderIdentity", s("node-1"))],
                    ),
                ),
            ],
            json!({"metadata": {"name": "node-1"}, "spec": {"holderIdentity": "node-1"}}),
        ),
        (
            "discovery.k8s.io/v1",
            "EndpointSlice",
            vec![
                meta("web-abc"),
                ("addressType", s("IPv4")),
                (
                    "endpoints",
                    Value::List(vec![m(
                        "api.discovery.v1.Endpoint",
                        vec![("addresses", strings(&["127.0.0.10"]))],
                    )]),
                ),
            ],
            json!({"metadata": {"name": "web-abc"}, "addressType": "IPv4",
                   "endpoints": [{"addresses": ["127.0.0.10"]}]}),
        ),
        (
            "events.k8s.io/v1",
            "Event",
            vec![meta("web.1"), ("reason", s("Scheduled"))],
            json!({"metadata": {"name": "web.1"}, "reason": "Scheduled"}),
        ),
        (
            "flowcontrol.apiserver.k8s.io/v1",
            "FlowSchema",
            vec![
                meta("telemetry"),
                (
                    "spec",
                    m(
                        "api.flowcontrol.v1.FlowSchemaSpec",
                        vec![
                            (
                                "priorityLevelConfiguration",
                                m(
                                    "api.flowcontrol.v1.PriorityLevelConfigurationReference",
                                    vec![("name", s("workload-low"))],
                                ),
                            ),
                            ("matchingPrecedence", Value::I32(1000)),
                        ],
                    ),
                ),
            ],
            json!({"metadata": {"name": "telemetry"}, "spec": {
                "priorityLevelConfiguration": {"name": "workload-low"},
                "matchingPrecedence": 1000}}),
        ),
        (
            "networking.k8s.io/v1",
            "IngressClass",
            vec![
                meta("nginx"),
                (
                    "spec",
                    m(
                        "api.networking.v1.IngressClassSpec",
                        vec![("controller", s("example.com/ingress"))],
                    ),
                ),
            ],
            json!({"metadata": {"name": "nginx"}, "spec": {"controller": "example.com/ingress"}}),
        ),
        (
            "node.k8s.io/v1",
            "RuntimeClass",
            vec![meta("gvisor"), ("handler", s("runsc"))],
            json!({"metadata": {"name": "gvisor"}, "handler": "runsc"}),
        ),
        (
            "policy/v1",
            "PodDisruptionBudget",
            vec![
                meta("web"),
                (
                    "spec",
                    m(
                        "api.policy.v1.PodDisruptionBudgetSpec",
                        vec![("minAvailable", int_or_string(Some(1), ""))],
                    ),
                ),
            ],
            json!({"metadata": {"name": "web"}, "spec": {"minAvailable": 1}}),
        ),
        (
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            vec![
                meta("pod-reader"),
                (
                    "rules",
                    Value::List(vec![m(
                        "api.rbac.v1.PolicyRule",
                        vec![
                            ("verbs", strings(&["get"])),
                            ("apiGroups", strings(&[""])),
                            ("resources", strings(&["pods"])),
                        ],
                    )]),
                ),
            ],
            json!({"metadata": {"name": "pod-reader"}, "rules": [{
                "verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]}),
        ),
        (
            "scheduling.k8s.io/v1",
            "PriorityClass",
            vec![meta("high"), ("value", Value::I32(1000))],
            json!({"metadata": {"name": "high"}, "value": 1000}),
        ),
        (
            "storage.k8s.io/v1",
            "StorageClass",
            vec![
                meta("standard"),
                ("provisioner", s("example.com/disk")),
                ("volumeBindingMode", s("WaitForFirstConsumer")),
            ],
            json!({"metadata": {"name": "standard"}, "provisioner": "example.com/disk",
                   "volumeBindingMode": "WaitForFirstConsumer"}),
        ),
    ];

    let mut covered = BTreeSet::new();
    for (api_version, kind, fields, mut expected) in cases {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let (_, _, package) = GROUP_VERSIONS
            .iter()
            .find(|(g, v, _)| *g == group && *v == version)
            .unwrap_or_else(|| panic!("{api_version} is not supported"));
        let name = format!("{package}.{kind}");
        let object = message(name.strip_prefix("k8s.io.").unwrap(), fields);
        // Without the envelope's type, as from the request's path, and with it.
        for envelope in [None, Some((api_version, kind))] {
            let decoded = decode(&body_with(envelope, &object, "", ""), group, version, kind)
                .unwrap_or_else(|e| panic!("{api_version} {kind}: {e}"));
            expected["apiVersion"] = json!(api_version);
            expected["kind"] = json!(kind);
            assert_eq!(decoded, expected, "{api_version} {kind}");
        }
        covered.insert((group, version));
    }
    let listed: BTreeSet<_> = GROUP_VERSIONS.iter().map(|&(g, v, _)| (g, v)).collect();
    assert_eq!(covered, listed, "a group version without a case");
    // Every built-in group version sim serves has its schema here.
    let served = crate::storage::registry::Registry::with_builtins().groups();
    for (group, versions) in &served {
        for version in versions {
            assert!(
                listed.contains(&(group.as_str(), version.as_str())),
                "{group}/{version} is served but its kinds cannot be decoded from protobuf"
            );
        }
    }
}

/// CRD schemas carry the JSON forms Go's `apiextensions/v1` writes by hand: `$ref` and the
/// `x-kubernetes-*` names, raw JSON `default`/`enum`/`example`, and the `...Or...` unions.
#[test]
fn crd_schemas_decode_to_their_json_forms() {
    const V1: &str = "apiextensions_apiserver.pkg.apis.apiextensions.v1";
    fn props(fields: Vec<(&str, Value)>) -> Value {
        m(&format!("{V1}.JSONSchemaProps"), fields)
    }
    fn raw(json: &str) -> Value {
        m(
            &format!("{V1}.JSON"),
            vec![("raw", Value::Bytes(json.as_bytes().to_vec().into()))],
        )
    }
    let schema = props(vec![
        ("type", s("object")),
        ("xKubernetesPreserveUnknownFields", Value::Bool(true)),
        (
            "properties",
            map(vec![
                (
                    "mode",
                    props(vec![
                        ("type", s("string")),
                        ("default", raw(r#""fast""#)),
                        (
                            "enum",
                            Value::List(vec![raw(r#""fast""#), raw(r#""slow""#)]),
                        ),
                    ]),
                ),
                (
                    "ports",
                    props(vec![
                        ("type", s("array")),
                        ("xKubernetesListType", s("map")),
                        ("xKubernetesListMapKeys", Value::List(vec![s("port")])),
                        (
                            "items",
                            m(
                                &format!("{V1}.JSONSchemaPropsOrArray"),
                                vec![("schema", props(vec![("type", s("integer"))]))],
                            ),
                        ),
                    ]),
                ),
                (
                    "labels",
                    props(vec![
                        ("type", s("object")),
                        (
                            "additionalProperties",
                            m(
                                &format!("{V1}.JSONSchemaPropsOrBool"),
                                vec![
                                    ("allows", Value::Bool(true)),
                                    ("schema", props(vec![("type", s("string"))])),
                                ],
                            ),
                        ),
                    ]),
                ),
                (
                    "closed",
                    props(vec![
                        ("type", s("object")),
                        (
                            "additionalProperties",
                            m(
                                &format!("{V1}.JSONSchemaPropsOrBool"),
                                vec![("allows", Value::Bool(false))],
                            ),
                        ),
                    ]),
                ),
                ("other", props(vec![("ref", s("#/definitions/x"))])),
            ]),
        ),
    ]);
    let crd = message(
        &format!("{V1}.CustomResourceDefinition"),
        vec![(
            "spec",
            m(
                &format!("{V1}.CustomResourceDefinitionSpec"),
                vec![(
                    "versions",
                    Value::List(vec![m(
                        &format!("{V1}.CustomResourceDefinitionVersion"),
                        vec![
                            ("name", s("v1")),
                            ("served", Value::Bool(true)),
                            ("storage", Value::Bool(true)),
                            (
                                "schema",
                                m(
                                    &format!("{V1}.CustomResourceValidation"),
                                    vec![("openAPIV3Schema", schema)],
                                ),
                            ),
                        ],
                    )]),
                )],
            ),
        )],
    );
    let decoded = decode(
        &body("apiextensions.k8s.io/v1", "CustomResourceDefinition", &crd),
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
    )
    .unwrap();
    assert_eq!(
        decoded["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
        json!({
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
            "properties": {
                "closed": {"type": "object", "additionalProperties": false},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "mode": {"type": "string", "default": "fast", "enum": ["fast", "slow"]},
                "other": {"$ref": "#/definitions/x"},
                "ports": {"type": "array", "items": {"type": "integer"},
                          "x-kubernetes-list-type": "map",
                          "x-kubernetes-list-map-keys": ["port"]},
            },
        })
    );
}

#[test]
fn schemas_compile_and_the_tables_name_real_fields() {
    let pool = pool().unwrap();
    for (group, version, package) in GROUP_VERSIONS {
        assert!(
            pool.all_messages().any(|m| m.package_name() == *package),
            "no messages for {group}/{version} in {package}"
        );
    }
    for (message, field) in INLINE {
        let field = pool
            .get_message_by_name(message)
            .and_then(|m| m.get_field_by_name(field))
            .unwrap_or_else(|| panic!("{message}.{field} does not exist"));
        assert!(matches!(field.kind(), prost_reflect::Kind::Message(_)) && !field.is_list());
    }
    for (message, field, _) in RENAMED {
        assert!(
            pool.get_message_by_name(message)
                .and_then(|m| m.get_field_by_name(field))
                .is_some(),
            "{message}.{field} does not exist"
        );
    }
    let wrappers: BTreeSet<String> = pool
        .all_messages()
        .filter(|m| string_list_wrapper(m).is_some())
        .map(|m| m.full_name().to_owned())
        .collect();
    let expected = [
        "k8s.io.api.authentication.v1.ExtraValue",
        "k8s.io.api.authorization.v1.ExtraValue",
        "k8s.io.api.certificates.v1.ExtraValue",
        "k8s.io.apimachinery.pkg.apis.meta.v1.Verbs",
    ];
    assert_eq!(wrappers, expected.into_iter().map(str::to_owned).collect());
}

/// Every message reachable from the supported kinds gives exactly the JSON field names of
/// the `k8s-openapi` type of the same name (renames and inlined structs applied), so the
/// tables above are complete.
#[test]
fn field_names_match_k8s_openapi() {
    use k8s_openapi::api;

    fn json_names(descriptor: &MessageDescriptor, names: &mut BTreeSet<String>) {
        for field in descriptor.fields() {
            match field.kind() {
                prost_reflect::Kind::Message(inlined)
                    if is_inline(descriptor.full_name(), field.name()) =>
                {
                    json_names(&inlined, names);
                }
                _ => {
                    names.insert(json_name(descriptor.full_name(), field.name()).to_owned());
                }
            }
        }
    }

    let mut generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
    macro_rules! roots {
        ($($t:ty),* $(,)?) => { $( let _ = generator.subschema_for::<$t>(); )* };
    }
    roots!(
        api::core::v1::Binding,
        api::core::v1::ConfigMap,
        api::core::v1::Endpoints,
        api::core::v1::Event,
        api::core::v1::LimitRange,
        api::core::v1::Namespace,
        api::core::v1::Node,
        api::core::v1::PersistentVolume,
        api::core::v1::PersistentVolumeClaim,
        api::core::v1::Pod,
        api::core::v1::PodTemplate,
        api::core::v1::ReplicationController,
        api::core::v1::ResourceQuota,
        api::core::v1::Secret,
        api::core::v1::Service,
        api::core::v1::ServiceAccount,
        api::apps::v1::ControllerRevision,
        api::apps::v1::DaemonSet,
        api::apps::v1::Deployment,
        api::apps::v1::ReplicaSet,
        api::apps::v1::StatefulSet,
        api::batch::v1::CronJob,
        api::batch::v1::Job,
        api::policy::v1::Eviction,
        api::policy::v1::PodDisruptionBudget,
        api::autoscaling::v1::HorizontalPodAutoscaler,
        api::autoscaling::v1::Scale,
        api::autoscaling::v2::HorizontalPodAutoscaler,
        api::scheduling::v1::PriorityClass,
        api::coordination::v1::Lease,
        api::events::v1::Event,
        api::authorization::v1::LocalSubjectAccessReview,
        api::authorization::v1::SelfSubjectAccessReview,
        api::authorization::v1::SelfSubjectRulesReview,
        api::authorization::v1::SubjectAccessReview,
        api::authentication::v1::SelfSubjectReview,
        api::authentication::v1::TokenRequest,
        api::authentication::v1::TokenReview,
        api::rbac::v1::ClusterRole,
        api::rbac::v1::ClusterRoleBinding,
        api::rbac::v1::Role,
        api::rbac::v1::RoleBinding,
        api::networking::v1::Ingress,
        api::networking::v1::IngressClass,
        api::networking::v1::NetworkPolicy,
        api::certificates::v1::CertificateSigningRequest,
        api::admissionregistration::v1::MutatingWebhookConfiguration,
        api::admissionregistration::v1::ValidatingAdmissionPolicy,
        api::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
        api::admissionregistration::v1::ValidatingWebhookConfiguration,
        api::core::v1::ComponentStatus,
        api::discovery::v1::EndpointSlice,
        api::flowcontrol::v1::FlowSchema,
        api::flowcontrol::v1::PriorityLevelConfiguration,
        api::networking::v1::IPAddress,
        api::networking::v1::ServiceCIDR,
        api::node::v1::RuntimeClass,
        api::storage::v1::CSIDriver,
        api::storage::v1::CSINode,
        api::storage::v1::CSIStorageCapacity,
        api::storage::v1::StorageClass,
        api::storage::v1::VolumeAttachment,
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
        k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService,
        k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions,
    );
    let pool = pool().unwrap();
    let definitions = generator.take_definitions(true);
    let mut compared = 0;
    let mut mismatches = Vec::new();
    for (name, schema) in &definitions {
        let proto_name = name.replacen("io.k8s.", "k8s.io.", 1).replace('-', "_");
        let descriptor = pool
            .get_message_by_name(&proto_name)
            .unwrap_or_else(|| panic!("no proto message for {name}"));
        let Some(properties) = schema.get("properties").and_then(Json::as_object) else {
            continue;
        };
        let mut proto = BTreeSet::new();
        json_names(&descriptor, &mut proto);
        let json: BTreeSet<String> = properties
            .keys()
            .filter(|k| proto.contains(*k) || !matches!(k.as_str(), "apiVersion" | "kind"))
            .cloned()
            .collect();
        if proto != json {
            mismatches.push(format!("{proto_name}: proto {proto:?}, JSON {json:?}"));
        }
        compared += 1;
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    assert!(compared > 300, "only {compared} types compared");
}
