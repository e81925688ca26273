//! sim against the real kube-apiserver (v1.36), request for request: the same calls on both,
//! the answers compared. sim is held to upstream's behaviour, so where they differ sim is
//! wrong; each case here is one that differed, or one the product's documentation promises.
//!
//! - CRD validation: the shipped CRDs (deploy/crds/) applied on both, then known-bad objects
//!   created (and a valid one changed): the refusal's code, reason, message and each cause's
//!   reason, field path and message are the same.
//! - Eviction: a running pod evicted through `pods/eviction` is marked `DisruptionTarget`
//!   (reason `EvictionByEvictionAPI`) and deleted gracefully, on both.
//! - Node label patches with preconditions, as the agent's label clean-up sends them: a JSON
//!   patch whose `test` fails (or names a label that is not there) is refused whole with the
//!   same 422, one whose tests hold removes the labels, and a merge patch with a stale
//!   resourceVersion is the same 409.
//!
//! Skipped, saying so, when the control plane's binaries are absent.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use telemesh_tests::real::RealEnv;
use telemesh_tests::{SimEnv, eventually};

const NS: &str = "compare";
const WAIT: Duration = Duration::from_secs(60);

const TAS: &str = "/apis/telemetry.intel.com/v1alpha1/namespaces/compare/taspolicies";
const SJ: &str = "/apis/telemesh.io/v1alpha1/namespaces/compare/scavengerjobs";
const WA: &str = "/apis/telemesh.io/v1alpha1/namespaces/compare/workloadactions";

/// One request: what it shows, the method, the path (with its query) and the body.
struct Call {
    what: &'static str,
    method: http::Method,
    path: String,
    content_type: &'static str,
    body: Value,
}

fn create(what: &'static str, collection: &str, body: Value) -> Call {
    Call {
        what,
        method: http::Method::POST,
        path: collection.to_owned(),
        content_type: "application/json",
        body,
    }
}

fn policy(rule: Value) -> Value {
    json!({"apiVersion": "telemetry.intel.com/v1alpha1", "kind": "TASPolicy",
        "metadata": {"name": "bad", "namespace": NS},
        "spec": {"strategies": {"deschedule": {"rules": [rule]}}}})
}

/// A valid ScavengerJob named `name` with `patch` merged into its spec.
fn scavenger(name: &str, patch: Value) -> Value {
    let mut sj = json!({"apiVersion": "telemesh.io/v1alpha1", "kind": "ScavengerJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"image": "registry.example/work:1", "checkpointInterval": "1m"}});
    for (k, v) in patch.as_object().unwrap() {
        sj["spec"][k] = v.clone();
    }
    sj
}

fn action(patch: Value) -> Value {
    let mut wa = json!({"apiVersion": "telemesh.io/v1alpha1", "kind": "WorkloadAction",
        "metadata": {"name": "bad", "namespace": NS},
        "spec": {"method": "Delete", "params": {}, "target": "Pod/x",
                 "receivedAt": "2026-01-01T00:00:00Z"}});
    for (k, v) in patch.as_object().unwrap() {
        wa["spec"][k] = v.clone();
    }
    wa
}

fn calls() -> Vec<Call> {
    let volume = |extra: Value| {
        let mut v = json!({"name": "v", "mountPath": "/v"});
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        json!({"volumes": [v]})
    };
    vec![
        create(
            "a TASPolicy rule with operator Sometimes",
            TAS,
            policy(json!({"metricname": "m", "operator": "Sometimes", "target": 1})),
        ),
        create(
            "a TASPolicy metric name outside the pattern",
            TAS,
            policy(json!({"metricname": "bad name!", "operator": "Equals", "target": 1})),
        ),
        create(
            "a TASPolicy rule without operator, a string target",
            TAS,
            policy(json!({"metricname": "m", "target": "high"})),
        ),
        create(
            "a TASPolicy with logicalOperator xor and no strategies' rules",
            TAS,
            json!({"apiVersion": "telemetry.intel.com/v1alpha1", "kind": "TASPolicy",
                "metadata": {"name": "bad", "namespace": NS},
                "spec": {"strategies": {"dontschedule": {"logicalOperator": "xor"}}}}),
        ),
        create(
            "a TASPolicy without spec.strategies",
            TAS,
            json!({"apiVersion": "telemetry.intel.com/v1alpha1", "kind": "TASPolicy",
                "metadata": {"name": "bad", "namespace": NS}, "spec": {}}),
        ),
        create(
            "a ScavengerJob with parallelism -1",
            SJ,
            scavenger("bad", json!({"parallelism": -1})),
        ),
        create(
            "a ScavengerJob with parallelism 0 and runAsUser -1",
            SJ,
            scavenger("bad", json!({"parallelism": 0, "runAsUser": -1})),
        ),
        create(
            "a ScavengerJob with parallelism 1.5",
            SJ,
            scavenger("bad", json!({"parallelism": 1.5})),
        ),
        create(
            "a ScavengerJob checkpointing every 10ms",
            SJ,
            scavenger("bad", json!({"checkpointInterval": "10ms"})),
        ),
        create(
            "a ScavengerJob checkpointing every ten minutes",
            SJ,
            scavenger("bad", json!({"checkpointInterval": "ten minutes"})),
        ),
        create(
            "a ScavengerJob without image and interval",
            SJ,
            json!({"apiVersion": "telemesh.io/v1alpha1", "kind": "ScavengerJob",
                "metadata": {"name": "bad", "namespace": NS}, "spec": {"image": ""}}),
        ),
        create(
            "a ScavengerJob without spec",
            SJ,
            json!({"apiVersion": "telemesh.io/v1alpha1", "kind": "ScavengerJob",
                "metadata": {"name": "bad", "namespace": NS}}),
        ),
        create(
            "a ScavengerJob volume with two sources",
            SJ,
            scavenger(
                "bad",
                volume(json!({"configMap": {"name": "a"}, "secret": {"secretName": "b"}})),
            ),
        ),
        create(
            "a ScavengerJob volume without source",
            SJ,
            scavenger("bad", volume(json!({}))),
        ),
        create(
            "a ScavengerJob volume at the marker's path, relative elsewhere",
            SJ,
            scavenger(
                "bad",
                json!({"volumes": [
                    {"name": "a", "mountPath": "/var/run/telemesh/x", "configMap": {"name": "a"}},
                    {"name": "b", "mountPath": "work", "configMap": {"name": "b"}},
                    {"name": "telemesh-checkpoint", "mountPath": "/c", "configMap": {"name": "c"}}
                ]}),
            ),
        ),
        create(
            "a ScavengerJob with two volumes of one name",
            SJ,
            scavenger(
                "bad",
                json!({"volumes": [
                    {"name": "a", "mountPath": "/a", "configMap": {"name": "a"}},
                    {"name": "a", "mountPath": "/b", "configMap": {"name": "b"}}
                ]}),
            ),
        ),
        create(
            "a ScavengerJob setting the checkpoint variable",
            SJ,
            scavenger(
                "bad",
                json!({"env": [{"name": "TELEMESH_CHECKPOINT_FILE", "value": "/x"}]}),
            ),
        ),
        create(
            "a ScavengerJob requesting lots of CPU",
            SJ,
            scavenger(
                "bad",
                json!({"resources": {"requests": {"cpu": "lots", "memory": true}}}),
            ),
        ),
        create(
            "a ScavengerJob named past 52 characters",
            SJ,
            scavenger(&"x".repeat(53), json!({})),
        ),
        create(
            "a WorkloadAction Create without node",
            WA,
            action(json!({"method": "Create"})),
        ),
        create(
            "a WorkloadAction with method Explode and an ftp callback",
            WA,
            action(json!({"method": "Explode", "callbackURL": "ftp://x"})),
        ),
        create(
            "a WorkloadAction with a long idempotency key and an empty target",
            WA,
            action(json!({"idempotencyKey": "k".repeat(300), "target": ""})),
        ),
        create(
            "a WorkloadAction without receivedAt, strictly decoded with an unknown field",
            &format!("{WA}?fieldValidation=Strict"),
            {
                let mut wa = action(json!({"colour": "red"}));
                wa["spec"].as_object_mut().unwrap().remove("receivedAt");
                wa
            },
        ),
        create(
            "a ScavengerJob with an unknown field, strictly decoded",
            &format!("{SJ}?fieldValidation=Strict"),
            scavenger("bad", json!({"imagePullPolicy": "Always"})),
        ),
        create(
            "a ScavengerJob with an image of 5, parallelism \"2\" and runAsUser 1.5",
            SJ,
            scavenger(
                "bad",
                json!({"image": 5, "parallelism": "2", "runAsUser": 1.5}),
            ),
        ),
        Call {
            what: "a ScavengerJob's status given a count of 1.5 and CPU-seconds \"x\"",
            method: http::Method::PATCH,
            path: format!("{SJ}/good/status"),
            content_type: "application/merge-patch+json",
            body: json!({"status": {"interruptedCount": 1.5, "wastedCpuSeconds": "x"}}),
        },
        Call {
            what: "a ScavengerJob's spec changed",
            method: http::Method::PATCH,
            path: format!("{SJ}/good"),
            content_type: "application/merge-patch+json",
            body: json!({"spec": {"parallelism": 8}}),
        },
        Call {
            what: "a ScavengerJob's status given an unknown phase",
            method: http::Method::PATCH,
            path: format!("{SJ}/good/status"),
            content_type: "application/merge-patch+json",
            body: json!({"status": {"phase": "Done", "interruptedCount": -1,
                "runningTimestamps": ["yesterday"]}}),
        },
    ]
}

/// Installs the shipped CRDs, namespace [`NS`] and ScavengerJob `good`, once the CRDs serve.
async fn prepare(client: &Client) {
    for yaml in [
        telemesh_core::policy::crd::CRD_YAML,
        telemesh_core::action::crd::CRD_YAML,
        telemesh_core::scavenge::crd::CRD_YAML,
    ] {
        let crd: CustomResourceDefinition = serde_yaml_ng::from_str(yaml).unwrap();
        Api::<CustomResourceDefinition>::all(client.clone())
            .create(&PostParams::default(), &crd)
            .await
            .unwrap();
    }
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}});
    send(
        client,
        http::Method::POST,
        "/api/v1/namespaces",
        "application/json",
        &ns,
    )
    .await
    .unwrap();
    let good = scavenger("good", json!({}));
    eventually("the CRDs serving a valid ScavengerJob", WAIT, || {
        let good = good.clone();
        async move {
            send(client, http::Method::POST, SJ, "application/json", &good)
                .await
                .ok()
        }
    })
    .await;
}

/// Sends one request; the answer's body, or the refusal (a Status) as JSON.
async fn send(
    client: &Client,
    method: http::Method,
    path: &str,
    content_type: &str,
    body: &Value,
) -> Result<Value, Value> {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(serde_json::to_vec(body).unwrap())
        .unwrap();
    match client.request_text(request).await {
        Ok(text) => Ok(serde_json::from_str(&text).unwrap_or(Value::String(text))),
        Err(kube::Error::Api(status)) => Err(serde_json::to_value(&status).unwrap()),
        Err(e) => panic!("{path}: {e}"),
    }
}

/// The refusal's parts compared: code, reason, message, and the causes as a sorted list. The
/// causes' order is not compared, in the list or in the message: kube-apiserver's follows Go's
/// map iteration (properties, additionalProperties), which changes from call to call.
fn refusal(answer: Result<Value, Value>) -> Value {
    match answer {
        Ok(body) => json!({"accepted": body["metadata"]["name"]}),
        Err(mut status) => {
            let mut causes = status["details"]["causes"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            causes.sort_by_key(ToString::to_string);
            let message = status["message"].as_str().unwrap_or_default();
            if let Some(sorted) = sorted_message(message, &causes) {
                status["message"] = Value::String(sorted);
            }
            status["details"]["causes"] = Value::Array(causes);
            json!({
                "code": status["code"],
                "reason": status["reason"],
                "message": status["message"],
                "details": status["details"],
            })
        }
    }
}

/// `message` (`<object> is invalid: [a, b, c]`) with its errors in the causes' order, when it
/// lists exactly the causes (`<field>: <message>`) in some order; None otherwise.
fn sorted_message(message: &str, causes: &[Value]) -> Option<String> {
    let (head, list) = message.split_once(" is invalid: [")?;
    let list = list.strip_suffix(']')?;
    let items: Vec<String> = causes
        .iter()
        .map(|c| {
            format!(
                "{}: {}",
                c["field"].as_str().unwrap_or_default(),
                c["message"].as_str().unwrap_or_default()
            )
        })
        .collect();
    let same_length =
        items.iter().map(String::len).sum::<usize>() + 2 * (items.len() - 1) == list.len();
    (same_length && items.iter().all(|i| list.contains(i.as_str())))
        .then(|| format!("{head} is invalid: [{}]", items.join(", ")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_validation_refuses_bad_objects_as_kube_apiserver_does() {
    let Some(real) = RealEnv::start(
        "crd_validation_refuses_bad_objects_as_kube_apiserver_does",
        0,
    )
    .await
    else {
        return;
    };
    let sim = SimEnv::start(0).await;
    let (real, sim) = (real.client().await, sim.client().await);
    tokio::join!(prepare(&real), prepare(&sim));
    let mut differ = Vec::new();
    for call in calls() {
        let on = async |client: &Client| {
            refusal(
                send(
                    client,
                    call.method.clone(),
                    &call.path,
                    call.content_type,
                    &call.body,
                )
                .await,
            )
        };
        let (upstream, ours) = (on(&real).await, on(&sim).await);
        assert!(
            upstream.get("code").is_some(),
            "{}: kube-apiserver accepted it: {upstream}",
            call.what
        );
        if upstream != ours {
            differ.push(format!(
                "{}:\n  kube-apiserver: {upstream}\n  sim:            {ours}",
                call.what
            ));
        }
    }
    assert!(
        differ.is_empty(),
        "sim refuses otherwise than kube-apiserver:\n{}",
        differ.join("\n")
    );
}

/// A pod bound to a node no kubelet serves (nothing finishes it), created in [`NS`].
fn bound_pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "victim", "namespace": NS},
        "spec": {"nodeName": "nowhere",
                 "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}})
}

/// Evicts [`bound_pod`] on `client` and returns what is compared: the eviction's answer and
/// the pod's deletion marks and conditions (transition times left out).
async fn evict(client: &Client) -> Value {
    let pods = format!("/api/v1/namespaces/{NS}/pods");
    eventually("the pod created", WAIT, || async {
        // A real API server refuses pods until the namespace's default ServiceAccount exists.
        send(
            client,
            http::Method::POST,
            &pods,
            "application/json",
            &bound_pod(),
        )
        .await
        .ok()
    })
    .await;
    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": "victim", "namespace": NS}});
    let answer = send(
        client,
        http::Method::POST,
        &format!("{pods}/victim/eviction"),
        "application/json",
        &eviction,
    )
    .await;
    let pod = send(
        client,
        http::Method::GET,
        &format!("{pods}/victim"),
        "application/json",
        &Value::Null,
    )
    .await
    .unwrap();
    let conditions: Vec<Value> = pod["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c["type"] == "DisruptionTarget")
        .map(|mut c| {
            c.as_object_mut().unwrap().remove("lastTransitionTime");
            c
        })
        .collect();
    json!({
        "answer": answer.map_or_else(|e| e["code"].clone(), |a| a["status"].clone()),
        "terminating": pod["metadata"]["deletionTimestamp"].is_string(),
        "grace": pod["metadata"]["deletionGracePeriodSeconds"],
        "disruptionTarget": conditions,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_marks_the_pod_as_kube_apiserver_does() {
    let Some(real) = RealEnv::start("eviction_marks_the_pod_as_kube_apiserver_does", 0).await
    else {
        return;
    };
    let sim = SimEnv::start(0).await;
    let (real, sim) = (real.client().await, sim.client().await);
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}});
    for client in [&real, &sim] {
        send(
            client,
            http::Method::POST,
            "/api/v1/namespaces",
            "application/json",
            &ns,
        )
        .await
        .unwrap();
    }
    let (upstream, ours) = tokio::join!(evict(&real), evict(&sim));
    assert_eq!(
        upstream["disruptionTarget"],
        json!([{"type": "DisruptionTarget", "status": "True", "lastProbeTime": null,
            "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting"}]),
        "{upstream}"
    );
    assert_eq!(ours, upstream, "sim evicts otherwise than kube-apiserver");
}

/// The label writes of an agent's clean-up (agent/src/enforcement/label_cleanup.rs) and the preconditions
/// they rely on, in order on Node `sim-node-0`: what each answers, and the labels after it.
fn label_patches() -> Vec<Call> {
    let node = "/api/v1/nodes/sim-node-0".to_owned();
    let json_patch = |what, body| Call {
        what,
        method: http::Method::PATCH,
        path: format!("{node}?fieldManager=telemesh-agent"),
        content_type: "application/json-patch+json",
        body,
    };
    let merge = |what, body| Call {
        what,
        method: http::Method::PATCH,
        path: format!("{node}?fieldManager=kubectl"),
        content_type: "application/merge-patch+json",
        body,
    };
    let key = "/metadata/labels/telemetry.aware.scheduling.p~1k";
    vec![
        merge(
            "labels set by another manager",
            json!({"metadata": {"labels": {"telemetry.aware.scheduling.p/k": "1", "p": "violating"}}}),
        ),
        json_patch(
            "a removal whose test finds another value",
            json!([{"op": "test", "path": key, "value": "2"}, {"op": "remove", "path": key},
                   {"op": "test", "path": "/metadata/labels/p", "value": "violating"},
                   {"op": "remove", "path": "/metadata/labels/p"}]),
        ),
        json_patch(
            "a removal of a label that is not there",
            json!([{"op": "test", "path": "/metadata/labels/gone", "value": "x"},
                   {"op": "remove", "path": "/metadata/labels/gone"}]),
        ),
        json_patch(
            "a removal whose tests hold",
            json!([{"op": "test", "path": key, "value": "1"}, {"op": "remove", "path": key},
                   {"op": "test", "path": "/metadata/labels/p", "value": "violating"},
                   {"op": "remove", "path": "/metadata/labels/p"}]),
        ),
        merge(
            "a merge patch with a stale resourceVersion",
            json!({"metadata": {"resourceVersion": "1", "labels": {"team": null}}}),
        ),
    ]
}

/// Each call's answer (the refusal, or acceptance) and the labels of TAS's namespace after it.
async fn patch_labels(client: &Client) -> Vec<Value> {
    let mut out = Vec::new();
    for call in label_patches() {
        let answer = refusal(
            send(
                client,
                call.method.clone(),
                &call.path,
                call.content_type,
                &call.body,
            )
            .await,
        );
        let node = send(
            client,
            http::Method::GET,
            "/api/v1/nodes/sim-node-0",
            "application/json",
            &Value::Null,
        )
        .await
        .unwrap();
        let labels: serde_json::Map<String, Value> = node["metadata"]["labels"]
            .as_object()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, _)| k == "p" || k.starts_with("telemetry.aware.scheduling."))
            .collect();
        out.push(json!({"what": call.what, "answer": answer, "labels": labels}));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_label_patches_with_preconditions_are_answered_as_kube_apiserver_does() {
    let test = "node_label_patches_with_preconditions_are_answered_as_kube_apiserver_does";
    let Some(real) = RealEnv::start(test, 1).await else {
        return;
    };
    let sim = SimEnv::start(1).await;
    let (real, sim) = (real.client().await, sim.client().await);
    let (upstream, ours) = tokio::join!(patch_labels(&real), patch_labels(&sim));
    // What the clean-up relies on: a failed test refuses the whole patch (422), nothing
    // removed; a holding one removes both labels; a stale resourceVersion is a 409.
    assert_eq!(upstream[1]["answer"]["code"], 422, "{upstream:#?}");
    assert_eq!(
        upstream[1]["labels"], upstream[0]["labels"],
        "{upstream:#?}"
    );
    assert_eq!(upstream[3]["answer"], json!({"accepted": "sim-node-0"}));
    assert_eq!(upstream[3]["labels"], json!({}), "{upstream:#?}");
    assert_eq!(upstream[4]["answer"]["code"], 409, "{upstream:#?}");
    for (u, o) in upstream.iter().zip(&ours) {
        assert_eq!(o, u, "sim answers otherwise than kube-apiserver");
    }
}
