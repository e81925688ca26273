//! Node-scoped agents end to end, on sim and on a real control plane (kube-apiserver with
//! `Node,RBAC` authorization and the real CEL), the same scenario on each: the
//! ValidatingAdmissionPolicy and binding that deploy/ ships and the agent's RBAC (read from
//! deploy/manifests/telemesh.yaml, the chart rendered), and kube-rs clients with the agent
//! service account's tokens, as the agent uses them. With a token bound to a Pod on node A
//! (sim-node-0):
//!
//! - Node A is written (by the agent's own labeler), Node B is refused with the policy's message;
//! - the label clean-up's JSON patch removes another manager's label from A, seen through the
//!   agent's watch of its own Node (RBAC's list and watch), and is refused on B;
//! - A's entry of a TASPolicy status is written, B's entry is refused (changed or removed);
//! - a pod on A is evicted; a pod on B is refused by the agent's evictor without a request: a
//!   policy cannot see the pod of an eviction (kube-apiserver hands it the Eviction, and so does
//!   sim), which the last step shows by evicting it with the raw API;
//! - what RBAC refuses besides: reading a pod, and creating a Node by applying one that does
//!   not exist (the agent may patch Nodes, not create them).
//!
//! A token of the same service account bound to no Pod is refused every write; another
//! service account with the agent's very RBAC is not the agent, and the policy leaves it alone.
//!
//! On sim the tokens are sim's table (`UserInfo::bound_to_pod` stands for the bound token); on
//! the real control plane they come from the TokenRequest API, bound to a Pod of the agent's
//! service account on node A, as kubelet mounts it. Each refusal is compared whole (code,
//! reason, message and details) with what kube-apiserver answers, so sim cannot drift from it.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DynamicObject, EvictParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, Status};
use serde_json::{Value, json};
use telemesh_agent::config::EvictionConfig;
use telemesh_agent::enforcement::evictor::{Evictor, Outcome};
use telemesh_agent::enforcement::label_cleanup::{self, LabelCleanup, PolicyNames, Removal, Why};
use telemesh_agent::enforcement::labeler::Labeler;
use telemesh_agent::enforcement::scope::Refusals;
use telemesh_agent::watch::node_watch::{self, watch_own_node};
use telemesh_core::policy::TASPolicy;
use telemesh_core::policy::crd::CRD_YAML;
use telemesh_runtime::testing::eventually;
use telemesh_sim::apiserver::requests::auth::{
    CREDENTIAL_ID_EXTRA, NODE_NAME_EXTRA, NODE_UID_EXTRA, POD_NAME_EXTRA, POD_UID_EXTRA, PodBinding,
};
use telemesh_sim::cluster::machines::{self, Machine};
use telemesh_sim::control_plane::{ControlPlane, ControlPlaneConfig, binaries};
use telemesh_sim::shipped::{manifests as shipped_manifests, object as shipped};
use telemesh_sim::{Auth, Rule, Sim, SimConfig, UserInfo};

const NS: &str = "health-metric-demo";
const NODE_A: &str = "sim-node-0";
const NODE_B: &str = "sim-node-1";
const POLICY: &str = "telemesh-agent-node-scope";
/// The agent's service account, as the manifests name it.
const AGENT_NS: &str = "telemesh-system";
const AGENT_SA: &str = "telemesh-agent";
/// The agent's Pod on node A, which its token is bound to.
const AGENT_POD: &str = "telemesh-agent-x7k2p";
/// Another service account, bound to the agent's ClusterRole by the test.
const OTHER_SA: &str = "node-labeler";
const WAIT: Duration = Duration::from_secs(20);

fn user_name(sa: &str) -> String {
    format!("system:serviceaccount:{AGENT_NS}:{sa}")
}

/// The refusal of a write, whole: kube-apiserver's Status.
fn refusal(e: kube::Error) -> Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected the API server's refusal, got {other:?}"),
    }
}

/// kube-apiserver's Status for a write the node-scope policy denies (`reason: Forbidden`):
/// `admission.NewForbidden`'s, with the policy's message as a cause too.
fn denied(kind: &str, group: &str, name: &str, why: &str) -> Status {
    let resource = if group.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}.{group}")
    };
    let cause = format!(
        "ValidatingAdmissionPolicy '{POLICY}' with binding '{POLICY}' denied request: {why}"
    );
    status(json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "code": 403,
        "reason": "Forbidden",
        "message": format!("{resource} \"{name}\" is forbidden: {cause}"),
        "details": {"name": name, "group": group, "kind": kind, "causes": [{"message": cause}]},
    }))
}

/// kube-apiserver's Status for a request RBAC refuses to the agent.
fn unauthorized(verb: &str, kind: &str, name: &str, scope: &str) -> Status {
    let user = user_name(AGENT_SA);
    status(json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "code": 403,
        "reason": "Forbidden",
        "message": format!("{kind} \"{name}\" is forbidden: User \"{user}\" cannot {verb} resource \"{kind}\" in API group \"\" {scope}"),
        "details": {"name": name, "kind": kind},
    }))
}

/// A label in TAS's namespace that no policy sets, written by another manager.
const STALE: &str = "telemetry.aware.scheduling.gone/x";

fn has_label(meta: &ObjectMeta, key: &str) -> bool {
    meta.labels.as_ref().is_some_and(|l| l.contains_key(key))
}

/// The agent's clean-up patch for `removals`, as [`Labeler::remove`] sends it.
fn cleanup_patch(removals: &[Removal]) -> Patch<()> {
    Patch::Json(serde_json::from_value(label_cleanup::removal_patch(removals)).unwrap())
}

fn status(v: Value) -> Status {
    serde_json::from_value(v).unwrap()
}

fn pod(name: &str, namespace: &str, node: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}
    }))
    .unwrap()
}

fn entry(strategy: &str) -> Value {
    json!({"strategies": [strategy], "rules": []})
}

fn status_patch(node: &str, value: Value) -> Patch<Value> {
    Patch::Merge(json!({"status": {"nodes": {node: value}}}))
}

/// What stands behind the clients.
enum Backend {
    Sim(Sim),
    Real {
        plane: ControlPlane,
        _dir: tempfile::TempDir,
    },
}

/// What the scenario needs from either API server: an admin, and the tokens under test.
struct Cluster {
    backend: Backend,
    admin: kube::Client,
    /// The agent's token bound to its Pod on node A.
    on_a: kube::Client,
    /// The agent's token bound to nothing.
    unbound: kube::Client,
    /// Another service account, with the agent's RBAC.
    other: kube::Client,
    policies: ApiResource,
}

impl Cluster {
    /// sim, with the tokens in its table and the manifests' RBAC as its rules.
    async fn on_sim() -> Self {
        telemesh_runtime::telemetry::init(telemesh_runtime::cli::LogFormat::Text, "warn");
        let docs = shipped_manifests();
        let agent = || UserInfo::service_account(AGENT_NS, AGENT_SA);
        let admin = UserInfo {
            username: "admin".into(),
            groups: vec!["system:masters".into()],
            ..UserInfo::default()
        };
        let on_a = agent().bound_to_pod(&PodBinding {
            pod_name: AGENT_POD.into(),
            pod_uid: "uid-agent-pod".into(),
            node_name: NODE_A.into(),
            node_uid: "uid-sim-node-0".into(),
        });
        let role: ClusterRole = shipped(&docs, "ClusterRole", AGENT_SA);
        let rules = role
            .rules
            .unwrap_or_default()
            .into_iter()
            .map(|r| Rule {
                subjects: vec![user_name(AGENT_SA), user_name(OTHER_SA)],
                verbs: r.verbs,
                api_groups: r.api_groups.unwrap_or_default(),
                resources: r.resources.unwrap_or_default(),
                namespaces: Vec::new(),
            })
            .collect();
        let auth = Auth {
            tokens: HashMap::from([
                ("admin".to_owned(), admin),
                ("agent-on-a".to_owned(), on_a),
                ("agent-unbound".to_owned(), agent()),
                (
                    "other".to_owned(),
                    UserInfo::service_account(AGENT_NS, OTHER_SA),
                ),
            ]),
            rules,
        };
        let sim = Sim::start(SimConfig {
            auth,
            kubeconfig_token: Some("admin".into()),
            ..SimConfig::default()
        })
        .await
        .unwrap();
        let admin = sim.client().await.unwrap();
        install(&admin, &docs).await;
        let (on_a, unbound, other) = (
            sim.client_with_token("agent-on-a").await.unwrap(),
            sim.client_with_token("agent-unbound").await.unwrap(),
            sim.client_with_token("other").await.unwrap(),
        );
        Self::ready(Self {
            backend: Backend::Sim(sim),
            admin,
            on_a,
            unbound,
            other,
            policies: ApiResource::erase::<TASPolicy>(&()),
        })
        .await
    }

    /// A real control plane with the manifests' agent RBAC, the agent's service account, its
    /// Pod on node A and real tokens; None when the binaries are not there (the test skips).
    async fn on_real_control_plane(test: &str) -> Option<Self> {
        let binaries = binaries::for_test(test)?;
        telemesh_runtime::telemetry::init(telemesh_runtime::cli::LogFormat::Text, "warn");
        let dir = tempfile::tempdir().unwrap();
        let plane = ControlPlane::start(ControlPlaneConfig::new(binaries, dir.path().to_owned()))
            .await
            .unwrap();
        let admin = plane.client().await.unwrap();
        let docs = shipped_manifests();
        install(&admin, &docs).await;
        let pp = PostParams::default();
        Api::<Namespace>::all(admin.clone())
            .create(&pp, &shipped(&docs, "Namespace", AGENT_NS))
            .await
            .unwrap();
        let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), AGENT_NS);
        accounts
            .create(&pp, &shipped(&docs, "ServiceAccount", AGENT_SA))
            .await
            .unwrap();
        let other: ServiceAccount =
            serde_json::from_value(json!({"metadata": {"name": OTHER_SA}})).unwrap();
        accounts.create(&pp, &other).await.unwrap();
        Api::<ClusterRole>::all(admin.clone())
            .create(&pp, &shipped(&docs, "ClusterRole", AGENT_SA))
            .await
            .unwrap();
        let bindings: Api<ClusterRoleBinding> = Api::all(admin.clone());
        bindings
            .create(&pp, &shipped(&docs, "ClusterRoleBinding", AGENT_SA))
            .await
            .unwrap();
        let other_binding: ClusterRoleBinding = serde_json::from_value(json!({
            "metadata": {"name": OTHER_SA},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": AGENT_SA},
            "subjects": [{"kind": "ServiceAccount", "name": OTHER_SA, "namespace": AGENT_NS}],
        }))
        .unwrap();
        bindings.create(&pp, &other_binding).await.unwrap();
        // The agent's Pod on node A, as the DaemonSet makes it; its token names A.
        let mut agent_pod = pod(AGENT_POD, AGENT_NS, NODE_A);
        agent_pod.spec.as_mut().unwrap().service_account_name = Some(AGENT_SA.into());
        Api::<Pod>::namespaced(admin.clone(), AGENT_NS)
            .create(&pp, &agent_pod)
            .await
            .unwrap();
        let token = |pod: Option<&'static str>, sa: &'static str| {
            let plane = &plane;
            async move {
                let token = plane
                    .service_account_token(AGENT_NS, sa, pod)
                    .await
                    .unwrap();
                plane.client_with_token(&token).await.unwrap()
            }
        };
        let on_a = token(Some(AGENT_POD), AGENT_SA).await;
        let unbound = token(None, AGENT_SA).await;
        let other = token(None, OTHER_SA).await;
        Some(
            Self::ready(Self {
                backend: Backend::Real { plane, _dir: dir },
                admin,
                on_a,
                unbound,
                other,
                policies: ApiResource::erase::<TASPolicy>(&()),
            })
            .await,
        )
    }

    /// Returns once the node-scope policy and the RBAC bindings are in force (kube-apiserver
    /// loads both from watches) and pods can be made in the namespace (kube-controller-manager
    /// makes its `default` ServiceAccount, which a real server's admission requires), all seen
    /// in answers.
    async fn ready(self) -> Self {
        let dry_run = PatchParams {
            dry_run: true,
            ..PatchParams::default()
        };
        let nodes: Api<Node> = Api::all(self.on_a.clone());
        eventually("the node-scope policy refuses A's agent on B", WAIT, || {
            let (nodes, dry_run) = (nodes.clone(), dry_run.clone());
            async move {
                let label = Patch::Merge(json!({"metadata": {"labels": {"probe": "x"}}}));
                match nodes.patch(NODE_B, &dry_run, &label).await {
                    Err(kube::Error::Api(s)) if s.message.contains(POLICY) => Some(()),
                    _ => None,
                }
            }
        })
        .await;
        let accounts: Api<ServiceAccount> = Api::namespaced(self.admin.clone(), NS);
        if matches!(self.backend, Backend::Real { .. }) {
            // The authorizer reads bindings from a watch (the agent's own is known once the
            // policy answered above: RBAC decides first).
            let reviews: Api<SubjectAccessReview> = Api::all(self.admin.clone());
            let review: SubjectAccessReview = serde_json::from_value(json!({"spec": {
                "user": user_name(OTHER_SA),
                "resourceAttributes": {"verb": "patch", "resource": "nodes"},
            }}))
            .unwrap();
            eventually(
                "RBAC lets the other service account patch nodes",
                WAIT,
                || {
                    let (reviews, review) = (reviews.clone(), review.clone());
                    async move {
                        let answer = reviews.create(&PostParams::default(), &review).await.ok()?;
                        answer.status.is_some_and(|s| s.allowed).then_some(())
                    }
                },
            )
            .await;
            eventually("the namespace's default ServiceAccount", WAIT, || {
                let accounts = accounts.clone();
                async move { accounts.get_opt("default").await.ok().flatten() }
            })
            .await;
        }
        self
    }

    fn sim(&self) -> Option<&Sim> {
        match &self.backend {
            Backend::Sim(sim) => Some(sim),
            Backend::Real { .. } => None,
        }
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

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Backend::Real { plane, .. } = &mut self.backend
            && std::thread::panicking()
        {
            eprintln!("{}", plane.log_tail("kube-apiserver"));
        }
    }
}

/// Whether the pod is on its way out: gone, or Terminating (deleting a pod bound to a node is
/// graceful, and no kubelet finishes it here).
async fn deleted(pods: &Api<Pod>, name: &str) -> bool {
    let pod = pods.get_opt(name).await.unwrap();
    pod.is_none_or(|p| p.metadata.deletion_timestamp.is_some())
}

/// What both backends install alike: the nodes, the TASPolicy CRD, the test namespace and the
/// shipped policy and binding.
async fn install(admin: &kube::Client, docs: &[Value]) {
    machines::register(
        admin,
        &[Machine::standard(NODE_A), Machine::standard(NODE_B)],
    )
    .await
    .unwrap();
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
    Api::<ValidatingAdmissionPolicy>::all(admin.clone())
        .create(&pp, &shipped(docs, "ValidatingAdmissionPolicy", POLICY))
        .await
        .unwrap();
    Api::<ValidatingAdmissionPolicyBinding>::all(admin.clone())
        .create(
            &pp,
            &shipped(docs, "ValidatingAdmissionPolicyBinding", POLICY),
        )
        .await
        .unwrap();
}

async fn token_for_node_a_is_refused_on_node_b(cluster: Cluster) {
    cluster.policy_with_entries().await;
    let pods: Api<Pod> = Api::namespaced(cluster.admin.clone(), NS);
    for (name, node) in [("web-a", NODE_A), ("web-b", NODE_B)] {
        pods.create(&PostParams::default(), &pod(name, NS, node))
            .await
            .unwrap();
    }
    let on_a = cluster.on_a.clone();

    // What the policy reads: the service account's user, with the Pod and the Node its token is
    // bound to as extra keys.
    let review = Api::<SelfSubjectReview>::all(on_a.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .unwrap();
    let user = review.status.unwrap().user_info.unwrap();
    assert_eq!(user.username.unwrap(), user_name(AGENT_SA));
    assert_eq!(
        user.groups.unwrap(),
        [
            "system:serviceaccounts",
            "system:serviceaccounts:telemesh-system",
            "system:authenticated"
        ]
    );
    let extra = user.extra.unwrap();
    let keys: Vec<&str> = extra.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            CREDENTIAL_ID_EXTRA,
            NODE_NAME_EXTRA,
            NODE_UID_EXTRA,
            POD_NAME_EXTRA,
            POD_UID_EXTRA
        ]
    );
    assert_eq!(extra[NODE_NAME_EXTRA], [NODE_A]);
    assert_eq!(extra[POD_NAME_EXTRA], [AGENT_POD]);

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
            "nodes",
            "",
            NODE_B,
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

    // TAS's clean-up (`--label-cleanup tas`): the agent watches its own Node's metadata, and
    // its JSON patch removes from A a label another manager wrote in TAS's namespace; the same
    // patch to B is refused, and B keeps its label.
    let admin_nodes: Api<Node> = Api::all(cluster.admin.clone());
    let as_kubectl = PatchParams {
        field_manager: Some("kubectl".into()),
        ..PatchParams::default()
    };
    let stale_label = json!({"metadata": {"labels": {STALE: "y"}}});
    for node in [NODE_A, NODE_B] {
        admin_nodes
            .patch(node, &as_kubectl, &Patch::Merge(&stale_label))
            .await
            .unwrap();
    }
    let stop = tokio_util::sync::CancellationToken::new();
    let own = watch_own_node(on_a.clone(), NODE_A, stop.clone());
    let seen = eventually("A's metadata through the agent's watch", WAIT, || {
        let own = own.clone();
        async move { node_watch::current(&own).filter(|m| has_label(m, STALE)) }
    })
    .await;
    stop.cancel();
    let desired = BTreeMap::from([("scheduling-policy".to_owned(), "violating".to_owned())]);
    let decide = |meta: &ObjectMeta| {
        let labels = meta.labels.clone().unwrap_or_default();
        label_cleanup::stale(
            &labels,
            &desired,
            &PolicyNames::default(),
            LabelCleanup::Tas,
        )
    };
    let removals = decide(&seen);
    assert_eq!(
        removals.iter().map(|r| r.key.as_str()).collect::<Vec<_>>(),
        [STALE]
    );
    let removed = labeler
        .remove(removals.clone(), seen, decide)
        .await
        .unwrap();
    assert_eq!(removed.removed.len(), 1);
    assert_eq!(removed.removed[0].written_by, ["kubectl"]);
    let a = admin_nodes.get_metadata(NODE_A).await.unwrap().metadata;
    assert!(!has_label(&a, STALE), "{a:?}");
    assert_eq!(
        a.labels.unwrap_or_default()["scheduling-policy"],
        "violating",
        "the agent's own label stays"
    );
    let e = nodes
        .patch(NODE_B, &PatchParams::default(), &cleanup_patch(&removals))
        .await
        .unwrap_err();
    assert_eq!(
        refusal(e),
        denied(
            "nodes",
            "",
            NODE_B,
            &format!("the agent on node {NODE_A} may write its own Node only, not {NODE_B}")
        )
    );
    let b = admin_nodes.get_metadata(NODE_B).await.unwrap().metadata;
    assert!(has_label(&b, STALE), "{b:?}");

    // What RBAC refuses besides the policy: the agent lists and watches pods but reads none
    // alone, and an apply that would create a Node needs `create`, which it lacks.
    let e = Api::<Pod>::namespaced(on_a.clone(), NS)
        .get("web-a")
        .await
        .unwrap_err();
    assert_eq!(
        refusal(e),
        unauthorized(
            "get",
            "pods",
            "web-a",
            &format!("in the namespace \"{NS}\"")
        )
    );
    let apply = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "sim-node-9",
        "labels": {"scheduling-policy": "violating"}}});
    let e = nodes
        .patch(
            "sim-node-9",
            &PatchParams::apply(telemesh_agent::enforcement::labeler::FIELD_MANAGER).force(),
            &Patch::Apply(&apply),
        )
        .await
        .unwrap_err();
    assert_eq!(
        refusal(e),
        unauthorized("create", "nodes", "sim-node-9", "at the cluster scope")
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
    for change in [entry("deschedule"), Value::Null] {
        let e = policies
            .patch_status("scheduling-policy", &pp, &status_patch(NODE_B, change))
            .await
            .unwrap_err();
        assert_eq!(
            refusal(e),
            denied(
                "taspolicies",
                "telemetry.intel.com",
                "scheduling-policy",
                &own_entry
            )
        );
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
    if let Some(sim) = cluster.sim() {
        sim.server.audit.enable();
    }
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
    if let Some(sim) = cluster.sim() {
        let evictions: Vec<String> = sim
            .server
            .audit
            .decisions()
            .into_iter()
            .filter(|d| d.attributes.subresource == "eviction")
            .map(|d| d.attributes.name)
            .collect();
        assert_eq!(evictions, ["web-a"], "only A's pod was asked for");
    }
    assert!(deleted(&pods, "web-a").await);
    let web_b = pods.get("web-b").await.unwrap();
    assert!(
        web_b.metadata.deletion_timestamp.is_none(),
        "B's pod untouched"
    );

    // The limit of a policy: an eviction's object is the Eviction, which does not say where
    // the pod runs, so the server admits A's token evicting B's pod (and so would have, had the
    // evictor asked: it did not, since the pod is still there). Only the agent refuses it.
    Api::<Pod>::namespaced(on_a.clone(), NS)
        .evict("web-b", &EvictParams::default())
        .await
        .unwrap();
    assert!(deleted(&pods, "web-b").await);
}

async fn unbound_token_is_refused_and_other_users_are_not_the_agent(cluster: Cluster) {
    cluster.policy_with_entries().await;
    let pods: Api<Pod> = Api::namespaced(cluster.admin.clone(), NS);
    pods.create(&PostParams::default(), &pod("web-a", NS, NODE_A))
        .await
        .unwrap();
    let unbound = cluster.unbound.clone();
    let no_node = "the agent's token names no node (authentication.kubernetes.io/node-name): use \
                   the service account token kubelet mounts in the agent's Pod, on Kubernetes 1.30 \
                   or later";

    let e = Labeler::new(Api::all(unbound.clone()), NODE_A)
        .sync(&BTreeMap::from([("p".to_owned(), "violating".to_owned())]))
        .await
        .unwrap_err();
    assert_eq!(refusal(e), denied("nodes", "", NODE_A, no_node));
    // The clean-up's patch, of a label that is there (a failed test would refuse it first).
    Api::<Node>::all(cluster.admin.clone())
        .patch(
            NODE_A,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"p": "violating"}}})),
        )
        .await
        .unwrap();
    let e = Api::<Node>::all(unbound.clone())
        .patch(
            NODE_A,
            &PatchParams::default(),
            &cleanup_patch(&[Removal {
                key: "p".into(),
                value: "violating".into(),
                why: Why::NotViolated { policy: "p".into() },
                written_by: Vec::new(),
            }]),
        )
        .await
        .unwrap_err();
    assert_eq!(refusal(e), denied("nodes", "", NODE_A, no_node));
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
            "taspolicies",
            "telemetry.intel.com",
            "scheduling-policy",
            no_node
        )
    );
    let e = Api::<Pod>::namespaced(unbound.clone(), NS)
        .evict("web-a", &EvictParams::default())
        .await
        .unwrap_err();
    assert_eq!(refusal(e), denied("pods", "", "web-a", no_node));
    let web_a = pods.get("web-a").await.unwrap();
    assert!(web_a.metadata.deletion_timestamp.is_none());

    // Another service account with the very same RBAC is not the agent: the policy does not
    // apply to it.
    Api::<Node>::all(cluster.other.clone())
        .patch(
            NODE_B,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"by": OTHER_SA}}})),
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_token_for_node_a_is_refused_on_node_b_on_sim() {
    token_for_node_a_is_refused_on_node_b(Cluster::on_sim().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_token_for_node_a_is_refused_on_node_b_on_real_control_plane() {
    let test = "an_agent_token_for_node_a_is_refused_on_node_b_on_real_control_plane";
    let Some(cluster) = Cluster::on_real_control_plane(test).await else {
        return;
    };
    token_for_node_a_is_refused_on_node_b(cluster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_bound_to_no_node_is_refused_and_other_users_are_not_the_agent_on_sim() {
    unbound_token_is_refused_and_other_users_are_not_the_agent(Cluster::on_sim().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_bound_to_no_node_is_refused_and_other_users_are_not_the_agent_on_real_control_plane()
 {
    let test = "a_token_bound_to_no_node_is_refused_and_other_users_are_not_the_agent_on_real_control_plane";
    let Some(cluster) = Cluster::on_real_control_plane(test).await else {
        return;
    };
    unbound_token_is_refused_and_other_users_are_not_the_agent(cluster).await;
}
