//! `POST /rpc` end to end: a real coordinator (in-process) against sim, stored actions read back
//! from sim. Every call shape of WAM's README (seed 000) is accepted and stored as asked; both
//! dialects answer byte for byte as WAM (gorilla) or JSON-RPC 2.0 define; bad params get WAM's
//! messages; idempotency keys give one action, also under concurrency; Get and Wait read
//! actions back; batches; authentication and authorization through the API server's TokenReview
//! and SubjectAccessReview, on sim and on a real control plane (the coordinator there with the
//! shipped RBAC and a real service-account token); Bind's synchronous refusals; the JSON API's
//! guard; metrics.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use telemesh_core::action::WorkloadAction;
use telemesh_runtime::testing::eventually;
use telemesh_sim::control_plane::binaries;
use telemesh_sim::{Auth, Rule, Sim, UserInfo};

const WAIT: Duration = Duration::from_secs(30);
const NS: &str = "ul";

#[path = "support/actions_env.rs"]
mod actions_env;

/// The shared environment with namespace `ul` and WAM's node names (2 CPUs each).
struct Env {
    sim: Sim,
    client: kube::Client,
    coordinator: telemesh_coordinator::Coordinator,
    _env: actions_env::Dir,
}

impl Env {
    async fn start(auth: Option<Auth>) -> Self {
        telemesh_runtime::telemetry::init(telemesh_runtime::cli::LogFormat::Text, "warn");
        let env = actions_env::start(auth, NS).await;
        add_nodes(&env.client).await;
        let (sim, client, coordinator, dir) = env.into_parts();
        Self {
            sim,
            client,
            coordinator,
            _env: dir,
        }
    }

    fn api(&self) -> SocketAddr {
        self.coordinator.api_addr
    }

    fn actions(&self) -> Api<WorkloadAction> {
        Api::namespaced(self.client.clone(), NS)
    }

    async fn stored(&self, name: &str) -> WorkloadAction {
        self.actions().get(name).await.unwrap()
    }

    async fn count(&self) -> usize {
        self.actions()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len()
    }

    /// A Pending pod with no node (as test-c's pods are: no scheduler serves them).
    async fn pending_pod(&self, name: &str, cpu: &str) {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": NS},
            "spec": {"schedulerName": "wam-scheduler", "containers": [{"name": "c", "image": "nginx",
                "resources": {"requests": {"cpu": cpu}}}]}
        }))
        .unwrap();
        Api::<Pod>::namespaced(self.client.clone(), NS)
            .create(&PostParams::default(), &pod)
            .await
            .unwrap();
    }
}

/// WAM's nodes, 2 CPUs each.
async fn add_nodes(client: &kube::Client) {
    for i in 1..=8 {
        let node: Node = serde_json::from_value(telemesh_sim::nodes::node_object(
            &format!("k3d-aces-agent-{i}"),
            "2",
            "4Gi",
            110,
        ))
        .unwrap();
        Api::<Node>::all(client.clone())
            .create(&PostParams::default(), &node)
            .await
            .unwrap();
    }
}

struct Reply {
    status: u16,
    content_type: String,
    headers: http::HeaderMap,
    body: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {:?}", self.body))
    }
}

async fn request(
    method: &str,
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> Reply {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let mut req = http::Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = client
        .request(req.body(Full::new(body.into())).unwrap())
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let content_type = headers
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    Reply {
        status,
        content_type,
        headers,
        body: String::from_utf8(body.to_vec()).unwrap(),
    }
}

/// A call as WAM's README sends it with curl.
async fn rpc(addr: SocketAddr, body: &str) -> Reply {
    rpc_with(addr, &[], body).await
}

async fn rpc_with(addr: SocketAddr, headers: &[(&str, &str)], body: &str) -> Reply {
    let mut all = vec![("content-type", "application/json")];
    all.extend_from_slice(headers);
    request("POST", addr, "/rpc", &all, body.to_owned()).await
}

/// The action id of a gorilla success, checking the whole reply byte for byte.
fn gorilla_ok(r: &Reply, id: &str) -> String {
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.content_type, "application/json; charset=utf-8");
    let action = r.json()["result"]["actionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no actionId: {}", r.body))
        .to_owned();
    assert_eq!(
        r.body,
        format!(
            "{{\"result\":{{\"message\":\"ok\",\"actionId\":\"{action}\",\"namespace\":\"{NS}\"}},\"error\":null,\"id\":{id}}}\n"
        )
    );
    action
}

fn assert_received_at(s: &str) {
    // 2026-11-24T20:01:02.123456Z: RFC 3339, UTC, microseconds.
    assert_eq!(s.len(), 27, "{s}");
    assert!(s.ends_with('Z') && s.as_bytes()[19] == b'.', "{s}");
    s.parse::<jiff::Timestamp>().unwrap();
}

/// The seed's calls, in its order, with names from the demo (pods created where Bind needs them).
fn seed_calls() -> Vec<(&'static str, String)> {
    let create = |w: &str, n: u8| {
        format!(
            r#"{{"method":"action.Create","params":[{{"workload": {{"namespace": "ul", "kind": "Deployment", "name": "{w}"}}, "node": {{"name": "k3d-aces-agent-{n}"}}}}], "id":"1"}}"#
        )
    };
    let bind = |p: &str| {
        format!(
            "{{\"method\":\"action.Bind\",\"params\":[{{\"pod\": {{\"namespace\": \"ul\", \"name\": \"{p}\"}}, \"node\": {{\"name\": \"k3d-aces-agent-6\"}}}}], \"id\":\"1\"}}"
        )
    };
    vec![
        ("Create", create("test-a", 7)),
        ("Create", create("test-a", 4)),
        ("Delete", "{\"method\":\"action.Delete\",\"params\":[{\"pod\": {\"namespace\": \"ul\", \"name\": \"test-a-5d9c-x2x\"}}], \"id\":\"1\"}".into()),
        ("Move", "{\"method\":\"action.Move\",\"params\":[{\"pod\": {\"namespace\": \"ul\", \"name\": \"test-a-5d9c-y7y\"}, \"node\": {\"name\": \"k3d-aces-agent-7\"}}], \"id\":\"1\"}".into()),
        ("Create", create("test-b", 4)),
        ("Create", create("test-b", 4)),
        ("Swap", "{\"method\":\"action.Swap\",\"params\":[{\"x\": {\"namespace\": \"ul\", \"name\": \"test-a-5d9c-x2x\"}, \"y\": {\"namespace\": \"ul\", \"name\": \"test-b-77f-abc\"}}], \"id\": \"1\"}".into()),
        ("Bind", bind("test-c-0")),
        ("Redeploy", "{\"method\":\"action.Redeploy\",\"params\":[{\"pod\": {\"namespace\": \"ul\", \"name\": \"infinite-cronjob-29428390-xw4fh\"}}], \"id\":\"1\"}".into()),
        ("UpdateResources", r#"{"method":"action.UpdateResources","params":[{"workload":{"namespace":"ul","kind":"Deployment","name":"pending-test"},"resources":{"container_name":"example-container","cpu_request":"50m","cpu_limit":"200m"}}], "id":"1"}"#.into()),
        ("Bind", bind("pending-test-6b7-new1")),
        ("Bind", bind("pending-test-6b7-new2")),
        ("Scale", r#"{"method":"action.Scale","params":[{"workload":{"namespace":"ul","kind":"Deployment","name":"scheduled-test"}, "replicas": 1}], "id":"1"}"#.into()),
        ("Scale", r#"{"method":"action.Scale","params":[{"workload":{"namespace":"ul","kind":"Deployment","name":"scheduled-test"}, "replicas": 4}], "id":"1"}"#.into()),
    ]
}

/// The first call docs/actions.md shows (the `-d` body of its first curl) and the reply it says
/// comes back (the `# the reply is ...: {...}` comment after it, `...` for the action's id).
fn documented_create() -> (String, String) {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/actions.md"))
        .unwrap();
    let body = doc
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("-d '")?
                .split_once("' ")
                .map(|(b, _)| b.to_owned())
        })
        .expect("docs/actions.md shows a curl call with -d '<body>'");
    let reply = doc
        .lines()
        .find_map(|l| {
            l.strip_prefix("# the reply is ")?
                .split_once(": {")
                .map(|(_, r)| format!("{{{r}"))
        })
        .expect("docs/actions.md shows the reply after `# the reply is ...: `");
    (body, reply)
}

/// docs/actions.md's example reply is the one the coordinator sends, field for field and byte
/// for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_create_call_gets_the_documented_reply() {
    let env = Env::start(None).await;
    let (body, documented) = documented_create();
    assert!(body.contains(r#""method":"action.Create""#), "{body}");
    let r = rpc(env.api(), &body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["result"]["actionId"].as_str().unwrap().to_owned();
    assert_eq!(
        r.body.trim_end(),
        documented.replace(r#""actionId":"...""#, &format!(r#""actionId":"{id}""#)),
        "docs/actions.md's example reply differs from the real one"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_seed_call_is_accepted_and_stored_as_asked() {
    let env = Env::start(None).await;
    for pod in ["test-c-0", "pending-test-6b7-new1", "pending-test-6b7-new2"] {
        env.pending_pod(pod, "100m").await;
    }
    let mut ids = Vec::new();
    for (method, body) in seed_calls() {
        let r = rpc(env.api(), &body).await;
        let id = gorilla_ok(&r, "\"1\"");
        let a = env.stored(&id).await;
        let sent: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(a.spec.method, method);
        assert_eq!(a.spec.params, sent["params"][0], "params as received");
        assert_eq!(a.spec.requester.username, "system:anonymous");
        assert_eq!(a.spec.callback_url, None);
        assert_eq!(a.spec.idempotency_key, None);
        assert_received_at(&a.spec.received_at);
        assert_eq!(a.phase().as_str(), "Pending");
        ids.push((method, id, a));
    }
    // Every call made its own action (the seed sends the same id "1" every time).
    let distinct: std::collections::HashSet<_> = ids.iter().map(|(_, id, _)| id.clone()).collect();
    assert_eq!(distinct.len(), ids.len());
    assert_eq!(env.count().await, ids.len());
    let spec = |i: usize| &ids[i].2.spec;
    assert_eq!(
        (spec(0).target.as_str(), spec(0).node.as_deref()),
        ("Deployment/test-a", Some("k3d-aces-agent-7"))
    );
    assert_eq!(spec(2).target, "Pod/test-a-5d9c-x2x");
    assert_eq!(spec(3).node.as_deref(), Some("k3d-aces-agent-7"));
    assert_eq!(spec(6).target, "Pod/test-a-5d9c-x2x,Pod/test-b-77f-abc");
    assert_eq!(
        (spec(7).target.as_str(), spec(7).node.as_deref()),
        ("Pod/test-c-0", Some("k3d-aces-agent-6"))
    );
    assert_eq!(spec(9).target, "Deployment/pending-test");
    assert_eq!(spec(13).target, "Deployment/scheduled-test");
    // Arrival order is the order received.
    assert!(
        ids.windows(2)
            .all(|w| w[0].2.spec.received_at <= w[1].2.spec.received_at)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gorilla_dialect_is_wams_byte_for_byte() {
    let env = Env::start(None).await;
    let addr = env.api();
    let r = request("GET", addr, "/rpc", &[], "").await;
    assert_eq!(
        (r.status, r.content_type.as_str(), r.body.as_str()),
        (
            405,
            "text/plain; charset=utf-8",
            "rpc: POST method required, received GET"
        )
    );
    let r = request("POST", addr, "/rpc", &[("content-type", "text/xml")], "{}").await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (415, "rpc: unrecognized Content-Type: text/xml")
    );
    let text_400 = |r: &Reply, body: &str| {
        assert_eq!(
            (r.status, r.content_type.as_str(), r.body.as_str()),
            (400, "text/plain; charset=utf-8", body)
        );
    };
    let r = rpc(addr, "{nope").await;
    assert_eq!(
        (r.status, r.content_type.as_str()),
        (400, "text/plain; charset=utf-8")
    );
    text_400(
        &rpc(addr, r#"{"method":"action.Nope","params":[{}],"id":"1"}"#).await,
        r#"rpc: can't find method "action.Nope""#,
    );
    text_400(
        &rpc(addr, r#"{"method":"wam.Create","params":[{}],"id":"1"}"#).await,
        r#"rpc: can't find service "wam.Create""#,
    );
    text_400(
        &rpc(addr, r#"{"method":"Create","params":[{}],"id":"1"}"#).await,
        r#"rpc: service/method request ill-formed: "Create""#,
    );
    text_400(
        &rpc(addr, r#"{"method":"action.Create","id":"1"}"#).await,
        "rpc: method request ill-formed: missing params field",
    );
    text_400(
        &rpc(
            addr,
            r#"{"method":"action.Delete","params":"pod","id":"1"}"#,
        )
        .await,
        "json: cannot unmarshal string into Go value of type [1]interface {}",
    );
    // Method errors: HTTP 200, a bare string, WAM's messages.
    for (params, message) in [
        (
            r#"{"pod":{"namespace":"ul"}}"#,
            "pod's name must be specified",
        ),
        (
            r#"{"workload":{"namespace":"ul","kind":"Deployment","name":"a"}}"#,
            "node name is required",
        ),
        (
            r#"{"x":{"namespace":"ul","name":"a"},"y":{"namespace":"ul"}}"#,
            "y pod's name must be specified",
        ),
        (
            r#"{"workload":{"kind":"Deployment","name":"d"},"resources":{"container_name":"c"}}"#,
            "no resources were provided to be updated",
        ),
        (
            r#"{"workload":{"kind":"Deployment","name":"d"},"replicas":-1}"#,
            "replicas is required and must be >= 0",
        ),
    ] {
        let method = if params.contains("resources") {
            "UpdateResources"
        } else if params.contains("replicas") {
            "Scale"
        } else if params.contains("\"x\"") {
            "Swap"
        } else if params.contains("workload") {
            "Create"
        } else {
            "Delete"
        };
        let r = rpc(
            addr,
            &format!(r#"{{"method":"action.{method}","params":[{params}],"id":7}}"#),
        )
        .await;
        assert_eq!(r.status, 200);
        assert_eq!(r.content_type, "application/json; charset=utf-8");
        assert_eq!(
            r.body,
            format!("{{\"result\":null,\"error\":\"{}\",\"id\":7}}\n", message)
        );
    }
    assert_eq!(env.count().await, 0, "nothing stored for refused calls");
    // No Content-Type is accepted (gorilla has one codec); params may be an object.
    let r = request(
        "POST",
        addr,
        "/rpc",
        &[],
        r#"{"method":"action.Delete","params":{"pod":{"namespace":"ul","name":"p"}},"id":{"any":"json"}}"#,
    )
    .await;
    gorilla_ok(&r, r#"{"any":"json"}"#);
    // A notification runs and gets an empty 200.
    let r = rpc(
        addr,
        r#"{"method":"action.Delete","params":[{"pod":{"namespace":"ul","name":"p"}}]}"#,
    )
    .await;
    assert_eq!((r.status, r.body.as_str()), (200, ""));
    let r = rpc(
        addr,
        r#"{"method":"action.Delete","params":[{"pod":{"namespace":"ul","name":"p"}}],"id":null}"#,
    )
    .await;
    assert_eq!((r.status, r.body.as_str()), (200, ""));
    assert_eq!(env.count().await, 3);
    // Too large a body.
    let big = format!(
        r#"{{"method":"action.Delete","params":[{{"pad":"{}"}}],"id":1}}"#,
        "x".repeat(2 << 20)
    );
    let r = rpc(addr, &big).await;
    assert_eq!(r.status, 413);
    assert!(r.body.contains("larger than"), "{}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_rpc_2_has_codes_notifications_and_batches() {
    let env = Env::start(None).await;
    let addr = env.api();
    let create = r#"{"workload":{"namespace":"ul","kind":"Deployment","name":"test-a"},"node":{"name":"k3d-aces-agent-7"}}"#;
    let r = rpc(
        addr,
        &format!(r#"{{"jsonrpc":"2.0","method":"action.Create","params":{create},"id":5}}"#),
    )
    .await;
    assert_eq!(
        (r.status, r.content_type.as_str()),
        (200, "application/json")
    );
    let id = r.json()["result"]["actionId"].as_str().unwrap().to_owned();
    assert_eq!(
        r.body,
        format!(
            "{{\"jsonrpc\":\"2.0\",\"result\":{{\"message\":\"ok\",\"actionId\":\"{id}\",\"namespace\":\"ul\"}},\"id\":5}}\n"
        )
    );
    let error = |r: &Reply| -> (i64, String, Value) {
        let v = r.json();
        assert_eq!(v["jsonrpc"], "2.0", "{}", r.body);
        (
            v["error"]["code"].as_i64().unwrap(),
            v["error"]["message"].as_str().unwrap().to_owned(),
            v["id"].clone(),
        )
    };
    let (code, _, id_back) =
        error(&rpc(addr, r#"{"jsonrpc":"2.0","method":"action.Create", nope"#).await);
    assert_eq!((code, id_back), (-32700, Value::Null));
    let (code, _, id_back) = error(&rpc(addr, r#"{"jsonrpc":"2.0","method":4,"id":"a"}"#).await);
    assert_eq!((code, id_back), (-32600, json!("a")));
    let (code, message, _) = error(
        &rpc(
            addr,
            r#"{"jsonrpc":"2.0","method":"action.Nope","params":{},"id":1}"#,
        )
        .await,
    );
    assert_eq!(
        (code, message.as_str()),
        (-32601, r#"rpc: can't find method "action.Nope""#)
    );
    let (code, message, _) = error(
        &rpc(
            addr,
            r#"{"jsonrpc":"2.0","method":"action.Move","params":[{"pod":{"name":"p"}}],"id":1}"#,
        )
        .await,
    );
    assert_eq!((code, message.as_str()), (-32602, "node name is required"));
    // A notification runs; no body.
    let before = env.count().await;
    let r = rpc(
        addr,
        &format!(r#"{{"jsonrpc":"2.0","method":"action.Create","params":[{create}]}}"#),
    )
    .await;
    assert_eq!((r.status, r.body.as_str()), (204, ""));
    assert_eq!(env.count().await, before + 1);

    // A batch: replies in order, none for the notification, errors in place.
    let batch = format!(
        r#"[{{"jsonrpc":"2.0","method":"action.Create","params":{create},"id":1}},
            {{"jsonrpc":"2.0","method":"action.Create","params":{create}}},
            {{"jsonrpc":"2.0","method":"action.Delete","params":{{"pod":{{}}}},"id":3}},
            42,
            {{"jsonrpc":"2.0","method":"action.Get","params":{{"actionId":"{id}","namespace":"ul"}},"id":"get"}}]"#
    );
    let r = rpc(addr, &batch).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let replies = r.json();
    let replies = replies.as_array().unwrap();
    assert_eq!(replies.len(), 4, "{}", r.body);
    assert_eq!(replies[0]["id"], 1);
    assert_eq!(replies[0]["result"]["message"], "ok");
    assert_eq!(replies[1]["id"], 3);
    assert_eq!(replies[1]["error"]["code"], -32602);
    assert_eq!(
        replies[1]["error"]["message"],
        "pod's name must be specified"
    );
    assert_eq!(
        (
            replies[2]["id"].clone(),
            replies[2]["error"]["code"].clone()
        ),
        (Value::Null, json!(-32600))
    );
    assert_eq!(replies[3]["id"], "get");
    assert_eq!(replies[3]["result"]["actionId"], id.as_str());
    assert_eq!(env.count().await, before + 3);
    // An empty batch is one Invalid Request; a batch of notifications gets no body.
    let r = rpc(addr, "[]").await;
    assert_eq!(
        r.body,
        "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32600,\"message\":\"the batch is empty\"},\"id\":null}\n"
    );
    let r = rpc(
        addr,
        &format!(r#"[{{"jsonrpc":"2.0","method":"action.Create","params":{create}}}]"#),
    )
    .await;
    assert_eq!((r.status, r.body.as_str()), (204, ""));
    assert_eq!(env.count().await, before + 4);
}

fn delete_call(pod: &str, key: Option<&str>) -> String {
    let key = key
        .map(|k| format!(r#","idempotencyKey":"{k}""#))
        .unwrap_or_default();
    format!(
        r#"{{"method":"action.Delete","params":[{{"pod":{{"namespace":"ul","name":"{pod}"}}{key}}}],"id":"1"}}"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_key_gives_one_action() {
    let env = Env::start(None).await;
    let addr = env.api();
    let first = gorilla_ok(&rpc(addr, &delete_call("a-1", Some("k1"))).await, "\"1\"");
    let again = gorilla_ok(&rpc(addr, &delete_call("a-1", Some("k1"))).await, "\"1\"");
    assert_eq!(first, again);
    assert_eq!(env.count().await, 1);
    let a = env.stored(&first).await;
    assert_eq!(a.spec.idempotency_key.as_deref(), Some("k1"));
    // The same key for another request is refused, naming the action it belongs to.
    let r = rpc(
        addr,
        &format!(
            r#"{{"jsonrpc":"2.0",{}"#,
            &delete_call("a-2", Some("k1"))[1..]
        ),
    )
    .await;
    let v = r.json();
    assert_eq!(v["error"]["code"], -32009, "{}", r.body);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("was already used for another request")
    );
    assert_eq!(v["error"]["data"]["actionId"], first.as_str());
    // The header: concurrent requests with one key make one action.
    let calls = (0..8).map(|_| async move {
        let r = rpc_with(
            addr,
            &[("idempotency-key", "k2")],
            &delete_call("b-1", None),
        )
        .await;
        gorilla_ok(&r, "\"1\"")
    });
    let ids = futures::future::join_all(calls).await;
    assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
    assert_ne!(ids[0], first);
    assert_eq!(env.count().await, 2);
    // A key in params and a different one in the header: refused.
    let r = rpc_with(
        addr,
        &[("idempotency-key", "k3")],
        &delete_call("b-1", Some("k4")),
    )
    .await;
    assert!(
        r.json()["error"].as_str().unwrap().contains("differ"),
        "{}",
        r.body
    );
    // A callback URL is stored; a bad one refused.
    let body = r#"{"method":"action.Delete","params":[{"pod":{"namespace":"ul","name":"c"},"callbackURL":"http://127.0.0.1:1/done"}],"id":"1"}"#;
    let id = gorilla_ok(&rpc(addr, body).await, "\"1\"");
    assert_eq!(
        env.stored(&id).await.spec.callback_url.as_deref(),
        Some("http://127.0.0.1:1/done")
    );
    let r = rpc(addr, &body.replace("http://127.0.0.1:1/done", "nowhere")).await;
    assert!(
        r.json()["error"].as_str().unwrap().contains("callbackURL"),
        "{}",
        r.body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_reads_and_wait_returns_when_the_action_ends_or_times_out() {
    let env = Env::start(None).await;
    let addr = env.api();
    let id = gorilla_ok(&rpc(addr, &delete_call("a-1", None)).await, "\"1\"");
    let get = format!(
        r#"{{"jsonrpc":"2.0","method":"action.Get","params":{{"actionId":"{id}","namespace":"ul"}},"id":1}}"#
    );
    let v = rpc(addr, &get).await.json();
    let result = &v["result"];
    assert_eq!(result["message"], "ok");
    assert_eq!(result["actionId"], id.as_str());
    assert_eq!(result["namespace"], NS);
    assert_eq!(result["method"], "Delete");
    assert_eq!(result["phase"], "Pending");
    assert_eq!(result["params"]["pod"]["name"], "a-1");
    // gorilla callers get the same, and WAM-style errors for unknown ids.
    let r = rpc(
        addr,
        r#"{"method":"action.Get","params":[{"actionId":"wa-nope","namespace":"ul"}],"id":"1"}"#,
    )
    .await;
    assert_eq!(
        r.body,
        "{\"result\":null,\"error\":\"action \\\"wa-nope\\\" not found in namespace \\\"ul\\\"\",\"id\":\"1\"}\n"
    );
    let r = rpc(addr, r#"{"jsonrpc":"2.0","method":"action.Get","params":{"actionId":"wa-nope","namespace":"ul"},"id":1}"#).await;
    assert_eq!(r.json()["error"]["code"], -32004);

    // Wait times out with done=false.
    let wait = |timeout: f64| {
        format!(
            r#"{{"jsonrpc":"2.0","method":"action.Wait","params":{{"actionId":"{id}","namespace":"ul","timeoutSeconds":{timeout}}},"id":1}}"#
        )
    };
    let v = rpc(addr, &wait(0.2)).await.json();
    assert_eq!(
        (v["result"]["done"].clone(), v["result"]["phase"].clone()),
        (json!(false), json!("Pending"))
    );
    // Wait returns once another party ends the action.
    let waiting = tokio::spawn({
        let body = wait(60.0);
        async move { rpc(addr, &body).await.json() }
    });
    env.actions()
        .patch_status(
            &id,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Succeeded", "message": "pod a-1 removed; test-a scaled 3 → 2"}})),
        )
        .await
        .unwrap();
    let v = tokio::time::timeout(WAIT, waiting).await.unwrap().unwrap();
    assert_eq!(v["result"]["done"], true, "{v}");
    assert_eq!(v["result"]["phase"], "Succeeded");
    assert_eq!(
        v["result"]["status"]["message"],
        "pod a-1 removed; test-a scaled 3 → 2"
    );
    // An ended action answers at once.
    let v = rpc(addr, &wait(60.0)).await.json();
    assert_eq!(v["result"]["done"], true);
    let r = rpc(addr, &wait(301.0)).await;
    assert_eq!(r.json()["error"]["code"], -32602);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_refuses_synchronously_with_wams_messages_and_the_schedulers_reasons() {
    let env = Env::start(None).await;
    let addr = env.api();
    let bind = |pod: &str, node: &str| {
        format!(
            r#"{{"method":"action.Bind","params":[{{"pod":{{"namespace":"ul","name":"{pod}"}},"node":{{"name":"{node}"}}}}],"id":"1"}}"#
        )
    };
    let error = |r: Reply| {
        assert_eq!(r.status, 200);
        r.json()["error"]
            .as_str()
            .unwrap_or_else(|| panic!("no error: {}", r.body))
            .to_owned()
    };
    assert_eq!(
        error(rpc(addr, &bind("ghost", "k3d-aces-agent-6")).await),
        r#"error getting pod for binding: pods "ghost" not found in namespace "ul""#
    );
    // Placed by someone already.
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let placed: Pod = serde_json::from_value(json!({"metadata": {"name": "placed"},
        "spec": {"nodeName": "k3d-aces-agent-1", "containers": [{"name": "c", "image": "i"}]}}))
    .unwrap();
    pods.create(&PostParams::default(), &placed).await.unwrap();
    assert_eq!(
        error(rpc(addr, &bind("placed", "k3d-aces-agent-6")).await),
        "pod cannot be bound since it has nodeName set"
    );
    env.pending_pod("ran", "100m").await;
    pods.patch_status(
        "ran",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Failed"}})),
    )
    .await
    .unwrap();
    assert_eq!(
        error(rpc(addr, &bind("ran", "k3d-aces-agent-6")).await),
        "pod cannot be bound since it is not in pending state"
    );
    // The node: unknown, too small, tainted, cordoned.
    env.pending_pod("big", "3").await;
    env.pending_pod("small", "100m").await;
    assert_eq!(
        error(rpc(addr, &bind("small", "k3d-aces-agent-99")).await),
        r#"failed to bind Pod small to Node k3d-aces-agent-99: node "k3d-aces-agent-99" not found"#
    );
    assert_eq!(
        error(rpc(addr, &bind("big", "k3d-aces-agent-6")).await),
        "failed to bind Pod big to Node k3d-aces-agent-6: the node cannot take the pod: Insufficient cpu"
    );
    let nodes: Api<Node> = Api::all(env.client.clone());
    nodes
        .patch("k3d-aces-agent-5", &PatchParams::default(), &Patch::Merge(json!({"spec": {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}})))
        .await
        .unwrap();
    nodes
        .patch(
            "k3d-aces-agent-4",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"unschedulable": true}})),
        )
        .await
        .unwrap();
    assert!(
        error(rpc(addr, &bind("small", "k3d-aces-agent-5")).await)
            .ends_with("untolerated taint {dedicated: gpu}")
    );
    assert!(
        error(rpc(addr, &bind("small", "k3d-aces-agent-4")).await)
            .ends_with("untolerated taint {node.kubernetes.io/unschedulable: }")
    );
    // 2.0 callers get codes.
    let r = rpc(
        addr,
        &format!(
            r#"{{"jsonrpc":"2.0",{}"#,
            &bind("big", "k3d-aces-agent-6")[1..]
        ),
    )
    .await;
    assert_eq!(r.json()["error"]["code"], -32022);
    let r = rpc(
        addr,
        &format!(
            r#"{{"jsonrpc":"2.0",{}"#,
            &bind("placed", "k3d-aces-agent-6")[1..]
        ),
    )
    .await;
    assert_eq!(r.json()["error"]["code"], -32009);
    assert_eq!(env.count().await, 0, "no refused Bind is stored");
    // A pod that fits is accepted (and a pod running on the node counts against it).
    gorilla_ok(
        &rpc(addr, &bind("small", "k3d-aces-agent-6")).await,
        "\"1\"",
    );
    assert_eq!(env.count().await, 1);
}

fn auth_table() -> Auth {
    let user = |name: &str, groups: &[&str]| UserInfo {
        username: name.into(),
        uid: format!("uid-{name}"),
        groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        ..UserInfo::default()
    };
    let tokens: HashMap<String, UserInfo> = [
        (
            "coordinator-token",
            user(
                "system:serviceaccount:telemesh:coordinator",
                &["system:masters"],
            ),
        ),
        ("alice-token", user("alice", &["aiops"])),
        ("bob-token", user("bob", &[])),
    ]
    .into_iter()
    .map(|(t, u)| (t.to_owned(), u))
    .collect();
    let rule = |verbs: &[&str], group: &str, resource: &str, namespaces: &[&str]| Rule {
        subjects: vec!["group:aiops".into()],
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        api_groups: vec![group.into()],
        resources: vec![resource.into()],
        namespaces: namespaces.iter().map(|n| (*n).to_owned()).collect(),
    };
    Auth {
        tokens,
        rules: vec![
            rule(&["create", "get"], "telemesh.io", "workloadactions", &[NS]),
            rule(&["get"], "", "nodes", &[]),
        ],
    }
}

/// One caller of the API: its bearer token and who the API server says it is.
struct Caller {
    token: String,
    username: String,
    groups: Vec<String>,
}

impl Caller {
    fn bearer(&self) -> String {
        format!("Bearer {}", self.token)
    }
}

/// What the authentication scenario needs from either API server: the replica's doors, an
/// admin client to read back what it stored, and two callers.
struct AuthEnv {
    api: SocketAddr,
    health: SocketAddr,
    client: kube::Client,
    /// May create and get WorkloadActions in `ul`, and get nodes.
    alice: Caller,
    /// May do neither.
    bob: Caller,
}

async fn callers_are_authenticated_and_authorized(env: AuthEnv) {
    let addr = env.api;
    let actions: Api<WorkloadAction> = Api::namespaced(env.client.clone(), NS);
    let count = || {
        let actions = actions.clone();
        async move {
            actions
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .len()
        }
    };
    let (alice, bob) = (env.alice.bearer(), env.bob.bearer());
    let call = delete_call("a-1", None);
    let v2 = format!(r#"{{"jsonrpc":"2.0",{}"#, &call[1..]);
    // No token, or a bad one: 401 in the caller's dialect.
    let r = rpc(addr, &call).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.headers.get("www-authenticate").unwrap(), "Bearer");
    assert!(
        r.body
            .starts_with("{\"result\":null,\"error\":\"no bearer token"),
        "{}",
        r.body
    );
    let r = rpc_with(addr, &[("authorization", "Bearer nope")], &v2).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["error"]["code"], -32001);
    assert_eq!(
        r.json()["error"]["message"],
        "the bearer token is not valid: invalid bearer token",
        "{}",
        r.body
    );
    // The review behind it, whole, and one of a valid token.
    let reviews: Api<TokenReview> = Api::all(env.client.clone());
    let review = |token: &str| TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.to_owned()),
            audiences: None,
        },
        ..TokenReview::default()
    };
    let answer = reviews
        .create(&PostParams::default(), &review("nope"))
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(answer.status).unwrap(),
        json!({"user": {}, "error": "invalid bearer token"})
    );
    let answer = reviews
        .create(&PostParams::default(), &review(&env.bob.token))
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(answer.authenticated, Some(true));
    assert_eq!(
        answer.audiences.unwrap(),
        [telemesh_sim::apiserver::requests::auth::API_AUDIENCE]
    );
    let user = answer.user.unwrap();
    assert_eq!(user.username.unwrap(), env.bob.username);
    assert_eq!(user.groups.unwrap(), env.bob.groups);
    assert!(!user.uid.unwrap_or_default().is_empty());
    // Authenticated but not allowed: 403.
    let r = rpc_with(addr, &[("authorization", &bob)], &call).await;
    assert_eq!(r.status, 403);
    assert_eq!(
        r.json()["error"],
        format!(
            r#"User "{}" cannot create resource "workloadactions" in API group "telemesh.io" in the namespace "ul""#,
            env.bob.username
        )
    );
    let r = rpc_with(addr, &[("authorization", &bob)], &v2).await;
    assert_eq!(r.json()["error"]["code"], -32003);
    // alice may act in ul, and is recorded as the requester; not elsewhere.
    let id = gorilla_ok(
        &rpc_with(addr, &[("authorization", &alice)], &call).await,
        "\"1\"",
    );
    let a = actions.get(&id).await.unwrap();
    assert_eq!(a.spec.requester.username, env.alice.username);
    assert_eq!(a.spec.requester.groups, env.alice.groups);
    let other = call.replace("\"namespace\":\"ul\"", "\"namespace\":\"default\"");
    let r = rpc_with(addr, &[("authorization", &alice)], &other).await;
    assert_eq!(r.status, 403, "{}", r.body);
    let get = format!(
        r#"{{"method":"action.Get","params":[{{"actionId":"{id}","namespace":"ul"}}],"id":"1"}}"#
    );
    let r = rpc_with(addr, &[("authorization", &alice)], &get).await;
    assert_eq!(r.json()["result"]["actionId"], id.as_str());
    let r = rpc_with(addr, &[("authorization", &bob)], &get).await;
    assert_eq!(r.status, 403);
    assert_eq!(count().await, 1);
    // The telemetry API: plain JSON errors.
    let r = request("GET", addr, "/api/v1/nodes", &[], "").await;
    assert_eq!(r.status, 401);
    assert!(r.json()["error"].as_str().unwrap().contains("bearer token"));
    let r = request("GET", addr, "/api/v1/nodes", &[("authorization", &bob)], "").await;
    assert_eq!(r.status, 403);
    assert_eq!(
        r.json()["error"],
        format!(
            r#"User "{}" cannot get resource "nodes" in API group "" at the cluster scope"#,
            env.bob.username
        ),
        "{}",
        r.body
    );
    let r = request(
        "GET",
        addr,
        "/api/v1/nodes",
        &[("authorization", &alice)],
        "",
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    // /readyz does not claim auth is off.
    let health = env.health;
    let r = eventually("ready", WAIT, || async move {
        let r = request("GET", health, "/readyz", &[], "").await;
        (r.status == 200).then_some(r)
    })
    .await;
    assert!(!r.body.contains("api-auth"), "{}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_are_authenticated_and_authorized_through_the_api_server_on_sim() {
    let env = Env::start(Some(auth_table())).await;
    // The table's groups, and the one the API server adds for every authenticated user.
    let caller = |name: &str, groups: &[&str]| Caller {
        token: format!("{name}-token"),
        username: name.to_owned(),
        groups: groups
            .iter()
            .chain(&["system:authenticated"])
            .map(|g| (*g).to_owned())
            .collect(),
    };
    callers_are_authenticated_and_authorized(AuthEnv {
        api: env.api(),
        health: env.coordinator.http_addr,
        client: env.client.clone(),
        alice: caller("alice", &["aiops"]),
        bob: caller("bob", &[]),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_are_authenticated_and_authorized_through_the_api_server_on_real_control_plane() {
    let test =
        "callers_are_authenticated_and_authorized_through_the_api_server_on_real_control_plane";
    let Some(binaries) = binaries::for_test(test) else {
        return;
    };
    let env = real::RealEnv::start(binaries).await;
    let caller = |name: &str, token: String| Caller {
        token,
        username: format!("system:serviceaccount:{NS}:{name}"),
        groups: vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{NS}"),
            "system:authenticated".into(),
        ],
    };
    callers_are_authenticated_and_authorized(AuthEnv {
        api: env.coordinator.api_addr,
        health: env.coordinator.http_addr,
        client: env.admin.clone(),
        alice: caller("alice", env.token("alice").await),
        bob: caller("bob", env.token("bob").await),
    })
    .await;
}

/// The replica against a real control plane, authenticated as the manifests' coordinator
/// service account and authorized by exactly the RBAC they ship for it (its ClusterRole for
/// TokenReviews, SubjectAccessReviews and WorkloadActions; its Role for the Lease in the
/// release namespace), so that the test shows that RBAC suffices. Callers are service
/// accounts of `ul`: alice with a Role to act there and a ClusterRole to read nodes, bob with
/// nothing.
mod real {
    use std::path::PathBuf;

    use k8s_openapi::api::authorization::v1::SubjectAccessReview;
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Api, PostParams};
    use serde_json::{Value, json};
    use telemesh_sim::control_plane::{ControlPlane, ControlPlaneConfig};
    use telemesh_sim::shipped::{manifests as shipped_manifests, object as shipped};

    use super::{NS, WAIT, add_nodes};

    const RELEASE_NS: &str = "telemesh-system";
    const COORDINATOR: &str = "telemesh-coordinator";

    pub struct RealEnv {
        pub plane: ControlPlane,
        pub admin: kube::Client,
        pub coordinator: telemesh_coordinator::Coordinator,
        _dir: tempfile::TempDir,
    }

    impl Drop for RealEnv {
        fn drop(&mut self) {
            if std::thread::panicking() {
                eprintln!("{}", self.plane.log_tail("kube-apiserver"));
            }
        }
    }

    fn object<T: serde::de::DeserializeOwned>(v: Value) -> T {
        serde_json::from_value(v).unwrap()
    }

    /// Returns once RBAC lets service account `account` (`namespace:name`) `verb` `resource`,
    /// as a SubjectAccessReview answers.
    async fn until_allowed(
        admin: &kube::Client,
        account: &str,
        verb: &str,
        group: &str,
        resource: &str,
        namespace: &str,
    ) {
        let reviews: Api<SubjectAccessReview> = Api::all(admin.clone());
        let review: SubjectAccessReview = object(json!({"spec": {
            "user": format!("system:serviceaccount:{account}"),
            "resourceAttributes": {"verb": verb, "group": group, "resource": resource,
                                   "namespace": namespace},
        }}));
        let what = format!("RBAC lets {account} {verb} {resource}");
        telemesh_runtime::testing::eventually(&what, WAIT, || {
            let (reviews, review) = (reviews.clone(), review.clone());
            async move {
                let answer = reviews.create(&PostParams::default(), &review).await.ok()?;
                answer.status.is_some_and(|s| s.allowed).then_some(())
            }
        })
        .await;
    }

    impl RealEnv {
        pub async fn start(binaries: PathBuf) -> Self {
            telemesh_runtime::telemetry::init(telemesh_runtime::cli::LogFormat::Text, "warn");
            let dir = tempfile::tempdir().unwrap();
            let plane =
                ControlPlane::start(ControlPlaneConfig::new(binaries, dir.path().to_owned()))
                    .await
                    .unwrap();
            let admin = plane.client().await.unwrap();
            let pp = PostParams::default();
            for yaml in [
                telemesh_core::action::crd::CRD_YAML,
                telemesh_core::policy::crd::CRD_YAML,
            ] {
                let crd: CustomResourceDefinition = serde_yaml_ng::from_str(yaml).unwrap();
                Api::<CustomResourceDefinition>::all(admin.clone())
                    .create(&pp, &crd)
                    .await
                    .unwrap();
            }
            add_nodes(&admin).await;
            let docs = shipped_manifests();
            let namespaces: Api<Namespace> = Api::all(admin.clone());
            namespaces
                .create(&pp, &shipped(&docs, "Namespace", RELEASE_NS))
                .await
                .unwrap();
            namespaces
                .create(&pp, &object(json!({"metadata": {"name": NS}})))
                .await
                .unwrap();
            // The coordinator's identity and RBAC, as shipped.
            Api::<ServiceAccount>::namespaced(admin.clone(), RELEASE_NS)
                .create(&pp, &shipped(&docs, "ServiceAccount", COORDINATOR))
                .await
                .unwrap();
            Api::<ClusterRole>::all(admin.clone())
                .create(&pp, &shipped(&docs, "ClusterRole", COORDINATOR))
                .await
                .unwrap();
            Api::<ClusterRoleBinding>::all(admin.clone())
                .create(&pp, &shipped(&docs, "ClusterRoleBinding", COORDINATOR))
                .await
                .unwrap();
            Api::<Role>::namespaced(admin.clone(), RELEASE_NS)
                .create(&pp, &shipped(&docs, "Role", COORDINATOR))
                .await
                .unwrap();
            Api::<RoleBinding>::namespaced(admin.clone(), RELEASE_NS)
                .create(&pp, &shipped(&docs, "RoleBinding", COORDINATOR))
                .await
                .unwrap();
            // The callers.
            let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), NS);
            for name in ["alice", "bob"] {
                accounts
                    .create(&pp, &object(json!({"metadata": {"name": name}})))
                    .await
                    .unwrap();
            }
            let alice = json!([{"kind": "ServiceAccount", "name": "alice", "namespace": NS}]);
            Api::<Role>::namespaced(admin.clone(), NS)
                .create(
                    &pp,
                    &object(json!({
                        "metadata": {"name": "actions"},
                        "rules": [{"apiGroups": ["telemesh.io"], "resources": ["workloadactions"],
                                   "verbs": ["create", "get"]}],
                    })),
                )
                .await
                .unwrap();
            Api::<RoleBinding>::namespaced(admin.clone(), NS)
                .create(
                    &pp,
                    &object(json!({
                        "metadata": {"name": "alice-actions"},
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "actions"},
                        "subjects": alice,
                    })),
                )
                .await
                .unwrap();
            Api::<ClusterRole>::all(admin.clone())
                .create(
                    &pp,
                    &object(json!({
                        "metadata": {"name": "node-reader"},
                        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}],
                    })),
                )
                .await
                .unwrap();
            Api::<ClusterRoleBinding>::all(admin.clone())
                .create(
                    &pp,
                    &object(json!({
                        "metadata": {"name": "alice-node-reader"},
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "node-reader"},
                        "subjects": alice,
                    })),
                )
                .await
                .unwrap();
            // Another replica leads for the whole test, as in the sim tests: nothing runs the
            // stored actions.
            let now = jiff::Timestamp::now();
            Api::<Lease>::namespaced(admin.clone(), RELEASE_NS)
                .create(
                    &pp,
                    &object(json!({
                        "metadata": {"name": COORDINATOR},
                        "spec": {"holderIdentity": "another-replica", "leaseDurationSeconds": 3600,
                                 "acquireTime": now.to_string(), "renewTime": now.to_string()},
                    })),
                )
                .await
                .unwrap();
            // The authorizer reads bindings from a watch: wait until it knows the new ones.
            for (account, verb, group, resource, namespace) in [
                (
                    format!("{RELEASE_NS}:{COORDINATOR}"),
                    "create",
                    "authentication.k8s.io",
                    "tokenreviews",
                    "",
                ),
                (
                    format!("{RELEASE_NS}:{COORDINATOR}"),
                    "create",
                    "authorization.k8s.io",
                    "subjectaccessreviews",
                    "",
                ),
                (
                    format!("{RELEASE_NS}:{COORDINATOR}"),
                    "create",
                    "coordination.k8s.io",
                    "leases",
                    RELEASE_NS,
                ),
                (
                    format!("{NS}:alice"),
                    "create",
                    "telemesh.io",
                    "workloadactions",
                    NS,
                ),
                (format!("{NS}:alice"), "get", "", "nodes", ""),
            ] {
                until_allowed(&admin, &account, verb, group, resource, namespace).await;
            }
            let token = plane
                .service_account_token(RELEASE_NS, COORDINATOR, None)
                .await
                .unwrap();
            let kubeconfig = dir.path().join("coordinator.kubeconfig");
            telemesh_sim::kubeconfig::write(&kubeconfig, &plane.kubeconfig_yaml_with_token(&token))
                .unwrap();
            // As the chart's Deployment runs it: its leader Lease where its Role allows it.
            let coordinator = super::actions_env::start_replica(
                &kubeconfig,
                "kubernetes",
                &[
                    &format!("--leader-lease={COORDINATOR}"),
                    &format!("--leader-lease-namespace={RELEASE_NS}"),
                ],
                &admin,
                NS,
            )
            .await;
            Self {
                plane,
                admin,
                coordinator,
                _dir: dir,
            }
        }

        /// A token of service account `name` of `ul`.
        pub async fn token(&self, name: &str) -> String {
            self.plane
                .service_account_token(NS, name, None)
                .await
                .unwrap()
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_none_says_so_and_metrics_count_calls() {
    let env = Env::start(None).await;
    let addr = env.api();
    let health = env.coordinator.http_addr;
    let r = eventually("ready", WAIT, || async move {
        let r = request("GET", health, "/readyz", &[], "").await;
        (r.status == 200).then_some(r)
    })
    .await;
    assert_eq!(r.body, "ready\napi-auth: none (every caller may act)");
    gorilla_ok(&rpc(addr, &delete_call("a-1", Some("k"))).await, "\"1\"");
    gorilla_ok(&rpc(addr, &delete_call("a-1", Some("k"))).await, "\"1\"");
    rpc(
        addr,
        r#"{"method":"action.Delete","params":[{"pod":{}}],"id":"1"}"#,
    )
    .await;
    let metrics = request("GET", health, "/metrics", &[], "").await.body;
    for line in [
        r#"telemesh_coordinator_rpc_calls_total{method="Delete",outcome="Accepted"} 1"#,
        r#"telemesh_coordinator_rpc_calls_total{method="Delete",outcome="Existing"} 1"#,
        r#"telemesh_coordinator_rpc_calls_total{method="Delete",outcome="InvalidParams"} 1"#,
        r#"telemesh_coordinator_rpc_latency_seconds_count{method="Delete"} 3"#,
    ] {
        assert!(metrics.contains(line), "{line} missing from:\n{metrics}");
    }
    let _ = &env.sim;
}
