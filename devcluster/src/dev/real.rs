//! `telemesh-sim dev --control-plane real`: the dev cluster on a real control plane (etcd,
//! kube-apiserver, kube-controller-manager and kube-scheduler, the upstream programs) instead of
//! sim. What a cluster of machines adds to it is simulated as in sim mode: Node objects and their
//! Leases ([`machines`](telemesh_sim::cluster::machines)) and a kubelet stand-in per node. Telemesh is installed as a person
//! installs it, from the chart's rendered objects (deploy/manifests/telemesh.yaml) applied
//! unchanged; kube-controller-manager then makes the agent DaemonSet's and the coordinator
//! Deployment's pods, the scheduler binds them, and the kubelet stand-ins mark them Running (no
//! container runs). The agent and coordinator processes on this machine then act as those pods:
//! each authenticates with its own service account's token bound to its pod, as the token kubelet
//! mounts in a pod does, so the chart's RBAC and the agent's node-scope admission policy are what
//! allow or refuse their every request.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::Selector;
use kube::discovery::{self, Scope};
use kube::{Client, ResourceExt as _};
use serde::Deserialize as _;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use telemesh_sim::cluster::pod_state::is_running_and_ready;
use telemesh_sim::control_plane::{self, ControlPlane, ControlPlaneConfig, binaries};

/// The chart rendered with its default values (deploy/manifests/telemesh.yaml).
const MANIFEST: &str = include_str!("../../../deploy/manifests/telemesh.yaml");
/// The gossip key Secret the chart's pods mount (the manifest's header says to create it).
const GOSSIP_SECRET: &str = "telemesh-gossip-key";
/// The Secret's key, the file `--gossip-key-file` names in the pods.
const GOSSIP_SECRET_KEY: &str = "keys";
/// The field manager of everything the dev cluster applies.
const FIELD_MANAGER: &str = "telemesh-sim-dev";
/// How long the chart's pods may take to be Running: seconds normally (controllers, scheduler,
/// kubelet stand-ins); past this something refuses them, and the error says what.
const PODS_WITHIN: Duration = Duration::from_secs(120);
/// How long the API server may take to mark a CRD Established.
const CRDS_WITHIN: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(250);
/// Requested lifetime of each bound token; renewed at 80 % of it, as kubelet renews a pod's.
const TOKEN_SECONDS: u64 = 3600;

/// Which API server and controllers the dev cluster runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ControlPlaneKind {
    /// The in-memory API server (sim), its scheduler stand-in and workload controllers.
    Sim,
    /// The upstream programs: etcd, kube-apiserver, kube-controller-manager, kube-scheduler.
    Real,
}

/// One of the chart's workloads whose pods the dev cluster's processes act as.
#[derive(Debug, Clone)]
pub struct Component {
    pub namespace: String,
    pub name: String,
    pub service_account: String,
    /// The query of its pods (its `spec.selector`).
    pub selector: Selector,
    /// Its (first) container's arguments.
    pub args: Vec<String>,
}

/// The chart's objects, in manifest order, and the two workloads read from them.
pub struct Chart {
    objects: Vec<DynamicObject>,
    pub agent: Component,
    pub coordinator: Component,
}

impl Chart {
    /// Parses deploy/manifests/telemesh.yaml as built into this binary.
    pub fn parse() -> anyhow::Result<Self> {
        let mut objects = Vec::new();
        for doc in serde_yaml_ng::Deserializer::from_str(MANIFEST) {
            let value = serde_json::Value::deserialize(doc)
                .context("deploy/manifests/telemesh.yaml is not YAML")?;
            if value.is_null() {
                continue;
            }
            let object: DynamicObject = serde_json::from_value(value)
                .context("deploy/manifests/telemesh.yaml holds an object without kind or name")?;
            objects.push(object);
        }
        let agent = component(&objects, "DaemonSet")?;
        let coordinator = component(&objects, "Deployment")?;
        Ok(Self {
            objects,
            agent,
            coordinator,
        })
    }

    fn crds(&self) -> Vec<String> {
        self.objects
            .iter()
            .filter(|o| kind(o) == "CustomResourceDefinition")
            .map(|o| o.name_any())
            .collect()
    }
}

fn kind(object: &DynamicObject) -> &str {
    object.types.as_ref().map_or("", |t| t.kind.as_str())
}

/// The manifest's only object of `kind` (the agent DaemonSet, the coordinator Deployment).
fn component(objects: &[DynamicObject], of_kind: &str) -> anyhow::Result<Component> {
    let mut found = objects.iter().filter(|o| kind(o) == of_kind);
    let (Some(object), None) = (found.next(), found.next()) else {
        bail!("deploy/manifests/telemesh.yaml should hold exactly one {of_kind}");
    };
    let spec = &object.data["spec"];
    let selector: LabelSelector = serde_json::from_value(spec["selector"].clone())
        .with_context(|| format!("the chart's {of_kind}'s spec.selector is not a LabelSelector"))?;
    let selector = telemesh_core::selector::of_workload(&selector)
        .with_context(|| format!("the chart's {of_kind}'s spec.selector"))?;
    let service_account = spec["template"]["spec"]["serviceAccountName"]
        .as_str()
        .with_context(|| format!("the chart's {of_kind} names no serviceAccountName"))?
        .to_owned();
    let args = spec["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .map(|args| {
            args.iter()
                .filter_map(|a| a.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    Ok(Component {
        namespace: object.namespace().unwrap_or_else(|| "default".into()),
        name: object.name_any(),
        service_account,
        selector,
        args,
    })
}

/// Starts the real control plane with its state in `<dir>/control-plane`, on `listen`'s address
/// and port (port 0: a random `127.a.b.c` of its own on 6443, so it never meets another), and
/// writes the admin kubeconfig to `<dir>/kubeconfig`.
pub async fn start(listen: SocketAddr, dir: &Path) -> anyhow::Result<ControlPlane> {
    // Unpacking the shared tools the first time reads 60 MB: not on the runtime's threads.
    let located = tokio::task::spawn_blocking(binaries::locate)
        .await
        .context("locating the control-plane programs")??;
    let Some(programs) = located else {
        bail!(
            "--control-plane real needs etcd, kube-apiserver, kube-controller-manager and \
             kube-scheduler (upstream v1.33 or later): set {} to a folder holding them, or run \
             from a workspace beside ../shared/tools/control-plane/",
            binaries::ENV
        );
    };
    let mut config = ControlPlaneConfig::new(programs, dir.join("control-plane"));
    if listen.port() != 0 {
        config.address = Some(listen.ip());
        config.port = listen.port();
    }
    let plane = ControlPlane::start(config).await?;
    let kubeconfig = dir.join("kubeconfig");
    telemesh_sim::kubeconfig::write(&kubeconfig, &plane.kubeconfig_yaml())
        .with_context(|| format!("writing {}", kubeconfig.display()))?;
    Ok(plane)
}

/// Fails with the end of its log once a control-plane program exits (they never exit by
/// themselves); pending while they all run.
pub async fn watch_exit(plane: &tokio::sync::Mutex<ControlPlane>) -> anyhow::Error {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let mut plane = plane.lock().await;
        if let Some((name, status)) = plane.exited() {
            return anyhow::anyhow!(
                "the control plane's {name} exited ({status}):\n{}",
                plane.log_tail(&name)
            );
        }
    }
}

/// Installs Telemesh from the chart's objects, applied unchanged in manifest order (server-side
/// apply, as `kubectl apply --server-side` does), waits for its CRDs to be Established, creates
/// the gossip key Secret the manifest's header asks for, and scales the coordinator Deployment
/// to `coordinators` replicas, the processes the dev cluster runs.
pub async fn install(
    client: &Client,
    chart: &Chart,
    gossip_key_line: &str,
    coordinators: usize,
) -> anyhow::Result<()> {
    for object in &chart.objects {
        apply(client, object).await?;
    }
    wait_established(client, &chart.crds()).await?;
    create_gossip_secret(client, &chart.agent.namespace, gossip_key_line).await?;
    scale(client, &chart.coordinator, coordinators).await
}

async fn apply(client: &Client, object: &DynamicObject) -> anyhow::Result<()> {
    let types = object.types.clone().unwrap_or_default();
    let name = object.name_any();
    let what = format!("{} {name}", types.kind);
    let gvk = kube::core::GroupVersionKind::try_from(&types)
        .with_context(|| format!("the apiVersion of {what}"))?;
    let (resource, caps) = discovery::pinned_kind(client, &gvk)
        .await
        .with_context(|| format!("finding the resource of {what} on the API server"))?;
    let api: Api<DynamicObject> = match caps.scope {
        Scope::Namespaced => Api::namespaced_with(
            client.clone(),
            &object.namespace().unwrap_or_else(|| "default".into()),
            &resource,
        ),
        Scope::Cluster => Api::all_with(client.clone(), &resource),
    };
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .with_context(|| format!("applying {what} from deploy/manifests/telemesh.yaml"))?;
    Ok(())
}

/// Waits until each CRD's Established condition is True: until then its kind is not served.
async fn wait_established(client: &Client, names: &[String]) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let deadline = tokio::time::Instant::now() + CRDS_WITHIN;
    for name in names {
        loop {
            let crd = api
                .get(name)
                .await
                .with_context(|| format!("reading CRD {name}"))?;
            let established = crd
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                bail!("CRD {name} not Established after {CRDS_WITHIN:?}; see the API server's log");
            }
            tokio::time::sleep(POLL).await;
        }
    }
    Ok(())
}

async fn create_gossip_secret(client: &Client, namespace: &str, line: &str) -> anyhow::Result<()> {
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": GOSSIP_SECRET, "namespace": namespace},
        "stringData": {GOSSIP_SECRET_KEY: format!("{line}\n")},
    }))
    .context("the gossip key Secret")?;
    Api::<Secret>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &secret)
        .await
        .with_context(|| format!("creating Secret {namespace}/{GOSSIP_SECRET}"))?;
    Ok(())
}

/// `kubectl scale`: the chart asks for more coordinator replicas than the dev cluster runs
/// processes, and a pod no process acts as would only look like a replica.
async fn scale(client: &Client, deployment: &Component, replicas: usize) -> anyhow::Result<()> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), &deployment.namespace);
    api.patch_scale(
        &deployment.name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": replicas}})),
    )
    .await
    .with_context(|| {
        format!(
            "scaling Deployment {}/{} to {replicas}",
            deployment.namespace, deployment.name
        )
    })?;
    Ok(())
}

/// The chart's pods the processes act as: each node's agent pod, and the coordinator pods.
#[derive(Debug)]
pub struct ComponentPods {
    /// Node name to its agent pod's name.
    pub agents: BTreeMap<String, String>,
    /// The coordinator pods' names, sorted.
    pub coordinators: Vec<String>,
}

/// Waits until every node runs one agent pod and exactly `coordinators` coordinator pods run
/// with the Deployment settled at that count (no pod of a scale-down still to go). Past
/// [`PODS_WITHIN`] it fails with what is missing, the workloads' status and the Events that
/// say why.
pub async fn wait_component_pods(
    client: &Client,
    chart: &Chart,
    nodes: &[String],
    coordinators: usize,
) -> anyhow::Result<ComponentPods> {
    let deadline = tokio::time::Instant::now() + PODS_WITHIN;
    loop {
        let agents = running_pods(client, &chart.agent).await?;
        let agents: BTreeMap<String, String> = agents
            .iter()
            .filter_map(|p| Some((p.spec.as_ref()?.node_name.clone()?, p.name_any())))
            .collect();
        let mut coordinator_pods: Vec<String> = running_pods(client, &chart.coordinator)
            .await?
            .iter()
            .map(|o| o.name_any())
            .collect();
        coordinator_pods.sort();
        let settled = deployment_settled(client, &chart.coordinator, coordinators).await?;
        let missing: Vec<&String> = nodes.iter().filter(|n| !agents.contains_key(*n)).collect();
        if missing.is_empty() && settled && coordinator_pods.len() == coordinators {
            return Ok(ComponentPods {
                agents,
                coordinators: coordinator_pods,
            });
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "after {PODS_WITHIN:?}, no Running agent pod on {missing:?} or not {coordinators} \
                 Running coordinator pods (have {coordinator_pods:?}):\n{}",
                diagnose(client, chart).await
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// `component`'s pods that run and are not being deleted.
async fn running_pods(client: &Client, component: &Component) -> anyhow::Result<Vec<Pod>> {
    let pods = Api::<Pod>::namespaced(client.clone(), &component.namespace)
        .list(&ListParams::default().labels_from(&component.selector))
        .await
        .with_context(|| format!("listing the pods of {}", component.name))?;
    Ok(pods
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none() && is_running_and_ready(p))
        .collect())
}

/// Whether the Deployment controller has seen the latest spec and has exactly `replicas` pods.
async fn deployment_settled(
    client: &Client,
    component: &Component,
    replicas: usize,
) -> anyhow::Result<bool> {
    let d = Api::<Deployment>::namespaced(client.clone(), &component.namespace)
        .get(&component.name)
        .await
        .with_context(|| format!("reading Deployment {}", component.name))?;
    let generation = d.metadata.generation.unwrap_or_default();
    let Some(status) = d.status else {
        return Ok(false);
    };
    let replicas = i32::try_from(replicas).unwrap_or(i32::MAX);
    Ok(status.observed_generation.unwrap_or_default() >= generation
        && status.replicas == Some(replicas)
        && status.ready_replicas == Some(replicas))
}

/// What the API says about the chart's workloads, for an error message: their status and the
/// namespace's Events (the scheduler's, the controllers' and admission's reasons).
async fn diagnose(client: &Client, chart: &Chart) -> String {
    let ns = &chart.agent.namespace;
    let mut out = Vec::new();
    match Api::<DaemonSet>::namespaced(client.clone(), ns)
        .get(&chart.agent.name)
        .await
    {
        Ok(ds) => out.push(format!(
            "DaemonSet {}: {}",
            chart.agent.name,
            serde_json::to_string(&ds.status).unwrap_or_default()
        )),
        Err(e) => out.push(format!("DaemonSet {}: {e}", chart.agent.name)),
    }
    match Api::<Deployment>::namespaced(client.clone(), &chart.coordinator.namespace)
        .get(&chart.coordinator.name)
        .await
    {
        Ok(d) => out.push(format!(
            "Deployment {}: {}",
            chart.coordinator.name,
            serde_json::to_string(&d.status).unwrap_or_default()
        )),
        Err(e) => out.push(format!("Deployment {}: {e}", chart.coordinator.name)),
    }
    match Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
    {
        Ok(events) => out.extend(events.items.iter().map(|e| {
            format!(
                "Event {} {}/{}: {} {}",
                e.type_.as_deref().unwrap_or_default(),
                e.regarding
                    .as_ref()
                    .and_then(|r| r.kind.clone())
                    .unwrap_or_default(),
                e.regarding
                    .as_ref()
                    .and_then(|r| r.name.clone())
                    .unwrap_or_default(),
                e.reason.as_deref().unwrap_or_default(),
                e.note.as_deref().unwrap_or_default()
            )
        })),
        Err(e) => out.push(format!("Events in {ns}: {e}")),
    }
    out.join("\n")
}

/// A process's identity: its service account's token bound to the pod it acts as, kept in a
/// file its kubeconfig names (`tokenFile`: the kube client re-reads it every minute).
#[derive(Debug, Clone)]
pub struct Credential {
    namespace: String,
    service_account: String,
    pod: String,
    token_file: PathBuf,
    /// The kubeconfig to pass with `--kubeconfig`.
    pub kubeconfig: PathBuf,
}

impl Credential {
    /// `name`'s credential files under `<dir>/credentials/`, acting as `pod` of `component`.
    pub fn new(dir: &Path, name: &str, component: &Component, pod: &str) -> Self {
        let folder = dir.join("credentials");
        Self {
            namespace: component.namespace.clone(),
            service_account: component.service_account.clone(),
            pod: pod.to_owned(),
            token_file: folder.join(format!("{name}.token")),
            kubeconfig: folder.join(format!("{name}.kubeconfig")),
        }
    }

    /// Requests the token and writes it and the kubeconfig naming it.
    pub async fn issue(&self, client: &Client, plane: &ControlPlane) -> anyhow::Result<()> {
        self.renew(client).await?;
        let yaml = with_token_file(
            &plane.kubeconfig_yaml_with_token("replaced"),
            &self.token_file,
        )?;
        super::secret_file::write(&self.kubeconfig, &yaml)
    }

    /// Replaces the token file with a fresh token.
    async fn renew(&self, client: &Client) -> anyhow::Result<()> {
        let token = control_plane::service_account_token(
            client,
            &self.namespace,
            &self.service_account,
            Some(&self.pod),
        )
        .await?;
        if let Some(folder) = self.token_file.parent() {
            std::fs::create_dir_all(folder)
                .with_context(|| format!("creating {}", folder.display()))?;
        }
        // Through a rename: a client re-reading the file never sees half a token.
        let tmp = self.token_file.with_extension("tmp");
        super::secret_file::write(&tmp, &token)?;
        std::fs::rename(&tmp, &self.token_file)
            .with_context(|| format!("replacing {}", self.token_file.display()))
    }
}

/// `kubeconfig` (YAML) with `tokenFile: token_file` in place of its inline token.
fn with_token_file(kubeconfig: &str, token_file: &Path) -> anyhow::Result<String> {
    let mut config = kube::config::Kubeconfig::from_yaml(kubeconfig)
        .context("parsing the control plane's kubeconfig")?;
    for named in &mut config.auth_infos {
        if let Some(user) = named.auth_info.as_mut() {
            user.token = None;
            user.token_file = Some(token_file.display().to_string());
        }
    }
    serde_yaml_ng::to_string(&config).context("writing a kubeconfig")
}

/// Renews every token at 80 % of its lifetime until `stop`, as kubelet renews the token it
/// projects into a pod, so an interactive dev cluster outlives the first hour. A failure is
/// retried a minute later.
pub async fn renew_tokens(client: Client, credentials: Vec<Credential>, stop: CancellationToken) {
    let every = Duration::from_secs(TOKEN_SECONDS * 4 / 5);
    let mut next = tokio::time::Instant::now() + every;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep_until(next) => {}
        }
        next = tokio::time::Instant::now() + every;
        for c in &credentials {
            if let Err(e) = c.renew(&client).await {
                tracing::warn!(pod.name = %c.pod, error = format!("{e:#}"), "renewing a bound token failed; retrying in a minute");
                next = next.min(tokio::time::Instant::now() + Duration::from_secs(60));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_chart_names_both_components_and_their_service_accounts() {
        let chart = Chart::parse().unwrap();
        assert_eq!(chart.agent.namespace, "telemesh-system");
        assert_eq!(chart.agent.name, "telemesh-agent");
        assert_eq!(chart.agent.service_account, "telemesh-agent");
        assert!(
            chart
                .agent
                .selector
                .to_string()
                .contains("app.kubernetes.io/component=agent"),
            "{}",
            chart.agent.selector
        );
        assert_eq!(chart.coordinator.service_account, "telemesh-coordinator");
        assert!(
            chart
                .coordinator
                .args
                .contains(&"--leader-lease-namespace=telemesh-system".to_owned()),
            "{:?}",
            chart.coordinator.args
        );
        assert_eq!(chart.crds().len(), 3);
    }

    #[test]
    fn the_token_file_replaces_the_inline_token() {
        let admin = telemesh_sim::kubeconfig::render(
            "https://127.0.0.1:6443",
            Some("-----BEGIN CERTIFICATE-----\n"),
            Some("admin-token"),
        );
        let yaml = with_token_file(&admin, Path::new("/state/credentials/a.token")).unwrap();
        assert!(!yaml.contains("admin-token"), "{yaml}");
        let config = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
        let user = config.auth_infos[0].auth_info.as_ref().unwrap();
        assert_eq!(
            user.token_file.as_deref(),
            Some("/state/credentials/a.token")
        );
        assert_eq!(
            config.clusters[0]
                .cluster
                .as_ref()
                .unwrap()
                .server
                .as_deref(),
            Some("https://127.0.0.1:6443")
        );
    }
}
