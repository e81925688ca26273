//! A real control plane for the end-to-end tests, as [`SimEnv`](crate::SimEnv) and
//! [`ClusterParts`](crate::cluster::ClusterParts) give sim: etcd, kube-apiserver and
//! kube-controller-manager v1.36 (`telemesh_sim::control_plane`) in a private temporary
//! directory, nodes `sim-node-0..` registered and kept alive as kubelets keep theirs, and sim's
//! kubelet stand-in on each (pods' lives, graceful deletion included). No sim controller runs:
//! kube-controller-manager's own Job, ReplicaSet, Deployment and garbage collector do.
//!
//! Tests that run a scenario on both backends take the kubeconfig and the directory through
//! [`MeshEnv`], which both implement.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, PostParams};
use telemesh_sim::cluster::kubelet::{CRASH_BACKOFF, FaultRule, Kubelet};
use telemesh_sim::cluster::machines::{self, Machine};
use telemesh_sim::cluster::workload::Workloads;
use telemesh_sim::control_plane::{ControlPlane, ControlPlaneConfig, binaries};
use tokio_util::sync::CancellationToken;

use crate::mesh::MeshEnv;
use crate::{Kubectl, eventually};

/// How long kube-controller-manager may take to give a new namespace its `default`
/// ServiceAccount (a second or two; loaded machines take longer).
pub const SERVICE_ACCOUNT_WAIT: Duration = Duration::from_secs(60);

/// A running real control plane with simulated nodes. Dropping it stops the kubelets and
/// heartbeats, kills every program and removes the directory.
#[derive(Debug)]
pub struct RealEnv {
    /// The control plane (its log tails help a failing test say why).
    pub plane: ControlPlane,
    /// The admin kubeconfig (`system:masters`).
    pub kubeconfig: PathBuf,
    stop: CancellationToken,
    faults: tokio::sync::watch::Sender<Vec<FaultRule>>,
    dir: tempfile::TempDir,
}

impl Drop for RealEnv {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl RealEnv {
    /// Starts a control plane with `nodes` nodes (`sim-node-0..`), each with a kubelet
    /// stand-in whose host root is `<dir>/hosts/<node>` (where a mesh's agent for that node
    /// reads, as with [`ClusterParts`](crate::cluster::ClusterParts)). None, after printing
    /// `SKIPPED <test>: ...`, when the control-plane binaries are absent.
    pub async fn start(test: &str, nodes: usize) -> Option<Self> {
        let binaries = binaries::for_test(test)?;
        let dir = tempfile::tempdir().expect("creating a temporary directory");
        let plane = ControlPlane::start(ControlPlaneConfig::new(
            binaries,
            dir.path().join("control-plane"),
        ))
        .await
        .unwrap_or_else(|e| panic!("starting the control plane for {test}: {e:#}"));
        let kubeconfig = plane.kubeconfig().to_owned();
        let client = plane.client().await.expect("the admin client");
        let machines: Vec<Machine> = (0..nodes)
            .map(|i| Machine::standard(&format!("sim-node-{i}")))
            .collect();
        machines::register(&client, &machines)
            .await
            .unwrap_or_else(|e| panic!("registering {nodes} nodes: {e:#}"));
        let stop = CancellationToken::new();
        tokio::spawn(machines::heartbeat(
            client.clone(),
            machines.clone(),
            stop.clone(),
        ));
        let (faults, faults_rx) = tokio::sync::watch::channel(Vec::new());
        let workloads = Workloads::default();
        for (i, m) in machines.iter().enumerate() {
            let kubelet = Kubelet {
                node: m.name.clone(),
                index: u8::try_from(i).expect("fewer than 256 nodes"),
                backoff: CRASH_BACKOFF,
                host_root: Some(dir.path().join("hosts").join(&m.name)),
                workloads: workloads.clone(),
            };
            tokio::spawn(kubelet.run(client.clone(), faults_rx.clone(), stop.clone()));
        }
        Some(Self {
            plane,
            kubeconfig,
            stop,
            faults,
            dir,
        })
    }

    /// Returns the private temporary directory (control plane state, HOME, manifests).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Returns an admin kube client.
    pub async fn client(&self) -> kube::Client {
        self.plane
            .client()
            .await
            .expect("building a kube client for the control plane")
    }

    /// Returns a kubectl runner with the admin kubeconfig.
    pub fn kubectl(&self) -> Kubectl {
        Kubectl::new(&self.kubeconfig, self.dir.path())
    }

    /// Makes the kubelets apply `rules` from now on (crashes, OOM kills, failures on cue).
    pub fn set_faults(&self, rules: Vec<FaultRule>) {
        self.faults.send_replace(rules);
    }

    /// Creates namespace `name` and returns once its `default` ServiceAccount exists (a Pod
    /// created before is refused: the ServiceAccount admission plugin mounts its token).
    pub async fn create_namespace(&self, name: &str) {
        let client = self.client().await;
        let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": name}}))
            .expect("a Namespace");
        match Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("creating namespace {name}: {e}"),
        }
        self.wait_default_service_account(name).await;
    }

    /// Waits until namespace `namespace` has its `default` ServiceAccount (made by
    /// kube-controller-manager's service account controller).
    pub async fn wait_default_service_account(&self, namespace: &str) {
        let api = Api::<ServiceAccount>::namespaced(self.client().await, namespace);
        eventually(
            &format!("the default ServiceAccount of namespace {namespace}"),
            SERVICE_ACCOUNT_WAIT,
            || {
                let api = api.clone();
                async move { api.get_opt("default").await.ok().flatten().map(|_| ()) }
            },
        )
        .await;
    }

    /// Starts the control plane's kube-scheduler (v1.36) with the shipped
    /// deploy/scheduler/kube-scheduler-config.dev.yaml rendered for this control plane, the
    /// first extender at `url_prefix` with `nodeCacheCapable` as given. Its log is
    /// [`ControlPlane::log_tail`]`("kube-scheduler")`.
    pub fn start_scheduler(&mut self, url_prefix: &str, node_cache_capable: bool) {
        let rendered = crate::upstream::dev_scheduler_config(
            &self.kubeconfig,
            url_prefix,
            Some(node_cache_capable),
            false,
        );
        let config = self.write_file("kube-scheduler.yaml", &rendered);
        self.plane
            .start_scheduler(&config)
            .expect("starting kube-scheduler");
    }
}

impl MeshEnv for RealEnv {
    fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }
    fn dir(&self) -> &Path {
        RealEnv::dir(self)
    }
}
