//! Node-scoped agents end to end: sim enforcing the ValidatingAdmissionPolicy and binding that
//! deploy/ ships (read from deploy/manifests/telemesh.yaml, the chart rendered), and kube-rs
//! clients with the agent service account's tokens, as the agent uses them. With a token bound
//! to a Pod on node A (sim-node-0):
//!
//! - Node A is written (by the agent's own labeler), Node B is refused with the policy's message;
//! - A's entry of a TASPolicy status is written, B's entry is refused (changed or removed);
//! - a pod on A is evicted; a pod on B is refused by the agent's evictor without a request: a
//!   policy cannot see the pod of an eviction (kube-apiserver hands it the Eviction, and so does
//!   sim), which the last step shows by evicting it with the raw API.
//!
//! A token of the same service account bound to no Pod is refused all three writes; another
//! service account is not the agent, and the policy leaves it alone.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, EvictParams, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use serde_json::{Value, json};
use telemesh_agent::config::EvictionConfig;
use telemesh_agent::evictor::{Evictor, Outcome};
use telemesh_agent::labeler::Labeler;
use telemesh_agent::scope::Refusals;
use telemesh_core::policy::TASPolicy;
use telemesh_core::policy::crd::CRD_YAML;
use telemesh_core::testing::eventually;
use telemesh_sim::apiserver::auth::PodBinding;
use telemesh_sim::{Auth, Sim, SimConfig, UserInfo};

const NS: &str = "health-metric-demo";
const NODE_A: &str = "sim-node-0";
const NODE_B: &str = "sim-node-1";
const POLICY: &str = "telemesh-agent-node-scope";
const WAIT: Duration = Duration::from_secs(20);

/// The policy and binding of the plain manifests (what `kubectl apply -f` installs).
fn shipped_policy() -> (ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/manifests/telemesh.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let docs: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    let of = |kind: &str| -> Value {
        docs.iter()
            .find(|d| d["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} in {}", path.display()))
            .clone()
    };
    (
        serde_json::from_value(of("ValidatingAdmissionPolicy")).unwrap(),
        serde_json::from_value(of("ValidatingAdmissionPolicyBinding")).unwrap(),
    )
}

fn agent() -> UserInfo {
    UserInfo::service_account("telemesh-system", "telemesh-agent")
}

fn tokens() -> Auth {
    let admin = UserInfo {
        username: "admin".into(),
        groups: vec!["system:masters".into()],
        ..UserInfo::default()
    };
    let on_a = agent().bound_to_pod(&PodBinding {
        pod_name: "telemesh-agent-x7k2p".into(),
        pod_uid: "uid-agent-pod".into(),
        node_name: NODE_A.into(),
        node_uid: "uid-sim-node-0".into(),
    });
    Auth {
        tokens: HashMap::from([
            ("admin".to_owned(), admin),
            ("agent-on-a".to_owned(), on_a),
            ("agent-unbound".to_owned(), agent()),
            (
                "coordinator".to_owned(),
                UserInfo::service_account("telemesh-system", "telemesh-coordinator"),
            ),
        ]),
        // Authorization is RBAC's (tests/tests/deploy.rs): here everyone may do everything,
        // so the policy is the only thing that refuses.
        rules: Vec::new(),
    }
}

/// The message of a refused write: its status must be the policy's, 403 Forbidden.
fn refusal(e: kube::Error) -> String {
    match e {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"), "{s:?}");
            s.message
        }
        other => panic!("expected the policy's refusal, got {other:?}"),
    }
}

fn denied(resource: &str, why: &str) -> String {
    format!(
        "{resource} is forbidden: ValidatingAdmissionPolicy '{POLICY}' with binding '{POLICY}' denied request: {why}"
    )
}

fn pod(name: &str, node: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}
    }))
    .unwrap()
}

fn entry(strategy: &str) -> Value {
    json!({"strategies": [strategy], "rules": []})
}

struct Cluster {
    sim: Sim,
    admin: kube::Client,
    policies: ApiResource,
}

impl Cluster {
    async fn start() -> Self {
        telemesh_core::telemetry::init(telemesh_core::cli::LogFormat::Text, "warn");
        let config = SimConfig {
            auth: tokens(),
            kubeconfig_token: Some("admin".into()),
            ..SimConfig::default()
        };
        let sim = Sim::start(config).await.unwrap();
        telemesh_sim::nodes::create_nodes(&sim.server, 2).unwrap();
        let admin = sim.client().await.unwrap();
        let pp = PostParams::default();
        let crd: CustomResourceDefinition = serde_yaml_ng::from_str(CRD_YAML).unwrap();
        Api::<CustomResourceDefinition>::all(admin.clone())
            .create(&pp, &crd)
            .await
            .unwrap();
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
        Api::<Namespace>::all(admin.clone())
            .create(&pp, &ns)
            .await
            .unwrap();
        let (vap, binding) = shipped_policy();
        Api::<ValidatingAdmissionPolicy>::all(admin.clone())
            .create(&pp, &vap)
            .await
            .unwrap();
        Api::<ValidatingAdmissionPolicyBinding>::all(admin.clone())
            .create(&pp, &binding)
            .await
            .unwrap();
        Self {
            sim,
            admin,
            policies: ApiResource::erase::<TASPolicy>(&()),
        }
    }

    async fn client(&self, token: &str) -> kube::Client {
        self.sim.client_with_token(token).await.unwrap()
    }

    fn taspolicies(&self, client: &kube::Client) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), NS, &self.policies)
    }

    /// TAS's example policy, with both nodes' entries in its status.
    async fn policy_with_entries(&self) {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/examples/scheduling-policy.yaml");
        let obj: DynamicObject =
            serde_yaml_ng::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let api = self.taspolicies(&self.admin);
        eventually("the CRD serves TASPolicies", WAIT, || {
            let (api, obj) = (api.clone(), obj.clone());
            async move { api.create(&PostParams::default(), &obj).await.ok() }
        })
        .await;
        let status = json!({"status": {"nodes": {NODE_A: entry("dontschedule"), NODE_B: entry("dontschedule")}}});
        api.patch_status(
            "scheduling-policy",
            &PatchParams::default(),
            &Patch::Merge(status),
        )
        .await
        .unwrap();
    }

    async fn status_nodes(&self) -> Value {
        let p = self
            .taspolicies(&self.admin)
            .get("scheduling-policy")
            .await
            .unwrap();
        p.data["status"]["nodes"].clone()
    }
}

fn status_patch(node: &str, value: Value) -> Patch<Value> {
    Patch::Merge(json!({"status": {"nodes": {node: value}}}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_token_for_node_a_is_refused_on_node_b() {
    let cluster = Cluster::start().await;
    cluster.policy_with_entries().await;
    let pods: Api<Pod> = Api::namespaced(cluster.admin.clone(), NS);
    for (name, node) in [("web-a", NODE_A), ("web-b", NODE_B)] {
        pods.create(&PostParams::default(), &pod(name, node))
            .await
            .unwrap();
    }
    let on_a = cluster.client("agent-on-a").await;

    // Nodes: the agent's labeler writes node A; node B is refused.
    let mut labeler = Labeler::new(Api::all(on_a.clone()), NODE_A);
    labeler
        .sync(&BTreeMap::from([(
            "scheduling-policy".to_owned(),
            "violating".to_owned(),
        )]))
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(on_a.clone());
    let label = |k: &str| Patch::Merge(json!({"metadata": {"labels": {k: "violating"}}}));
    let e = nodes
        .patch(NODE_B, &PatchParams::default(), &label("scheduling-policy"))
        .await
        .unwrap_err();
    assert_eq!(
        refusal(e),
        denied(
            &format!("nodes \"{NODE_B}\""),
            &format!("the agent on node {NODE_A} may write its own Node only, not {NODE_B}")
        )
    );
    let b = Api::<Node>::all(cluster.admin.clone())
        .get(NODE_B)
        .await
        .unwrap();
    assert!(
        !b.metadata
            .labels
            .unwrap_or_default()
            .contains_key("scheduling-policy")
    );

    // TASPolicy status: A's entry and the shared problems are written; B's entry is not,
    // whether changed or removed.
    let policies = cluster.taspolicies(&on_a);
    let pp = PatchParams::default();
    policies
        .patch_status(
            "scheduling-policy",
            &pp,
            &status_patch(NODE_A, entry("deschedule")),
        )
        .await
        .unwrap();
    policies
        .patch_status(
            "scheduling-policy",
            &pp,
            &Patch::Merge(json!({"status": {"problems": []}})),
        )
        .await
        .unwrap();
    let own_entry = format!(
        "the agent on node {NODE_A} may write its own entry of the policy status only (status.nodes.{NODE_A})"
    );
    let policy_name = "taspolicies.telemetry.intel.com \"scheduling-policy\"";
    for change in [entry("deschedule"), Value::Null] {
        let e = policies
            .patch_status("scheduling-policy", &pp, &status_patch(NODE_B, change))
            .await
            .unwrap_err();
        assert_eq!(refusal(e), denied(policy_name, &own_entry));
    }
    let nodes_status = cluster.status_nodes().await;
    assert_eq!(nodes_status[NODE_A], entry("deschedule"));
    assert_eq!(
        nodes_status[NODE_B],
        entry("dontschedule"),
        "B's entry untouched"
    );

    // Evictions: a pod on A goes; the agent's evictor refuses the pod on B without sending
    // anything.
    cluster.sim.server.audit.enable();
    let mut evictor = Evictor::new(
        NODE_A,
        Refusals::default(),
        on_a.clone(),
        kube::runtime::events::Recorder::new(
            on_a.clone(),
            kube::runtime::events::Reporter {
                controller: "telemesh-agent".into(),
                instance: Some(NODE_A.into()),
            },
        ),
        EvictionConfig {
            dry_run: false,
            max_per_minute: 10,
            min_pod_age: Duration::ZERO,
            grace: Duration::ZERO,
        },
        Default::default(),
    );
    let web_a = pods.get("web-a").await.unwrap();
    let web_b = pods.get("web-b").await.unwrap();
    assert_eq!(
        evictor.evict(&web_a, "test", Instant::now()).await,
        Outcome::Evicted
    );
    assert_eq!(
        evictor.evict(&web_b, "test", Instant::now()).await,
        Outcome::OutsideNode
    );
    let evictions: Vec<String> = cluster
        .sim
        .server
        .audit
        .decisions()
        .into_iter()
        .filter(|d| d.attributes.subresource == "eviction")
        .map(|d| d.attributes.name)
        .collect();
    assert_eq!(evictions, ["web-a"], "only A's pod was asked for");
    assert!(pods.get_opt("web-a").await.unwrap().is_none());
    pods.get("web-b").await.unwrap();

    // The limit of a policy: an eviction's object is the Eviction, which does not say where
    // the pod runs, so the server admits A's token evicting B's pod. Only the agent refuses it.
    Api::<Pod>::namespaced(on_a.clone(), NS)
        .evict("web-b", &EvictParams::default())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_bound_to_no_node_is_refused_and_other_users_are_not_the_agent() {
    let cluster = Cluster::start().await;
    cluster.policy_with_entries().await;
    let pods: Api<Pod> = Api::namespaced(cluster.admin.clone(), NS);
    pods.create(&PostParams::default(), &pod("web-a", NODE_A))
        .await
        .unwrap();
    let unbound = cluster.client("agent-unbound").await;
    let no_node = "the agent's token names no node (authentication.kubernetes.io/node-name): use \
                   the service account token kubelet mounts in the agent's Pod, on Kubernetes 1.30 \
                   or later";

    let e = Labeler::new(Api::all(unbound.clone()), NODE_A)
        .sync(&BTreeMap::from([("p".to_owned(), "violating".to_owned())]))
        .await
        .unwrap_err();
    assert_eq!(refusal(e), denied(&format!("nodes \"{NODE_A}\""), no_node));
    let e = cluster
        .taspolicies(&unbound)
        .patch_status(
            "scheduling-policy",
            &PatchParams::default(),
            &status_patch(NODE_A, entry("deschedule")),
        )
        .await
        .unwrap_err();
    assert_eq!(
        refusal(e),
        denied(
            "taspolicies.telemetry.intel.com \"scheduling-policy\"",
            no_node
        )
    );
    let e = Api::<Pod>::namespaced(unbound.clone(), NS)
        .evict("web-a", &EvictParams::default())
        .await
        .unwrap_err();
    assert_eq!(refusal(e), denied("pods \"web-a\"", no_node));
    pods.get("web-a").await.unwrap();

    // The coordinator's service account is not the agent's: the policy does not apply.
    let coordinator = cluster.client("coordinator").await;
    Api::<Node>::all(coordinator)
        .patch(
            NODE_B,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"by": "coordinator"}}})),
        )
        .await
        .unwrap();
}
