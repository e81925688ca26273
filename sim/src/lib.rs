//! telemesh-sim: a Kubernetes API server in memory, for tests, benchmarks and the local dev
//! cluster: what envtest and KWOK are for Go projects.
//!
//! It speaks the real REST protocol to kube-rs, kubectl and the official Python client:
//! discovery (legacy and aggregated), get/list/watch with resourceVersions, selectors,
//! pagination, create/update/patch (merge, strategic, JSON patch, server-side apply)/delete with
//! finalizers and garbage collection, status/scale/binding/eviction subresources, CRDs served at
//! run time with schema and CEL validation, ValidatingAdmissionPolicies enforced on clients'
//! writes, bearer tokens (bound to a Pod and its Node if need be), Tables for kubectl and
//! OpenAPI v3.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! let sim = telemesh_sim::Sim::start(telemesh_sim::SimConfig::default()).await?;
//! let client = sim.client().await?;
//! # Ok(()) }
//! ```

pub mod apiserver;
pub mod cluster;
pub mod control_plane;
pub mod faults;
pub mod kubeconfig;
pub mod nodes;
pub mod processes;
pub mod shipped;
pub mod storage;
pub mod tls;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

pub use apiserver::requests::auth::{Auth, Rule, UserInfo};
pub use apiserver::{Server, ServerConfig};

/// How to run a sim.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Address to listen on; port 0 picks a free one.
    pub listen: SocketAddr,
    /// Serve HTTPS with a self-signed certificate (its CA goes into the kubeconfig).
    pub tls: bool,
    /// Tokens and permissions. With tokens, the kubeconfig carries `kubeconfig_token`.
    pub auth: Auth,
    /// The token the written kubeconfig uses, when authentication is on.
    pub kubeconfig_token: Option<String>,
    /// Server settings.
    pub server: ServerConfig,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls: false,
            auth: Auth::default(),
            kubeconfig_token: None,
            server: ServerConfig::default(),
        }
    }
}

/// A running sim. Dropping it stops the server.
#[derive(Debug)]
pub struct Sim {
    /// The server state, for tests that look inside or set up objects directly.
    pub server: Arc<Server>,
    /// The ledger of modelled work: give it to the kubelet stand-ins; its figures are served at
    /// [`cluster::workload::WORKLOADS_PATH`].
    pub workloads: cluster::workload::Workloads,
    /// The fault switch: outages and throttling on cue, requests per client
    /// ([`faults`]; also served at [`faults::FAULTS_PATH`]).
    pub faults: faults::Faults,
    addr: SocketAddr,
    url: String,
    ca_pem: Option<String>,
    token: Option<String>,
    stop: CancellationToken,
}

impl Sim {
    /// Starts a sim and returns once it accepts connections.
    pub async fn start(config: SimConfig) -> anyhow::Result<Self> {
        let server = Server::new(config.server.clone(), config.auth.clone());
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .with_context(|| {
                format!(
                    "cannot listen on {}; pick a free address with --listen",
                    config.listen
                )
            })?;
        let addr = listener.local_addr()?;
        let _ = server.address.set(addr.to_string());
        let stop = CancellationToken::new();
        let workloads = cluster::workload::Workloads::default();
        let faults = faults::Faults::default();
        let router = server
            .router()
            .merge(workloads.router())
            .merge(faults.router());
        let (url, ca_pem, acceptor) = if config.tls {
            let cert = tls::self_signed(addr.ip())?;
            let acceptor = tls::acceptor(&cert)?;
            (format!("https://{addr}"), Some(cert.ca_pem), Some(acceptor))
        } else {
            (format!("http://{addr}"), None, None)
        };
        tokio::spawn(faults::serve::serve(
            listener,
            acceptor,
            router,
            faults.clone(),
            stop.clone(),
        ));
        tracing::info!(%url, "sim listening");
        Ok(Self {
            server,
            workloads,
            faults,
            addr,
            url,
            ca_pem,
            token: config.kubeconfig_token,
            stop,
        })
    }

    /// Returns the address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Returns the server URL (`http://127.0.0.1:port`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Returns a kubeconfig (YAML) that reaches this sim.
    pub fn kubeconfig_yaml(&self) -> String {
        kubeconfig::render(&self.url, self.ca_pem.as_deref(), self.token.as_deref())
    }

    /// Writes the kubeconfig to `path` (atomically: readers never see half a file).
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        kubeconfig::write(path, &self.kubeconfig_yaml())
    }

    /// Returns the kube client configuration for this sim, loaded from its kubeconfig.
    pub async fn kube_config(&self) -> anyhow::Result<kube::Config> {
        let kc = kube::config::Kubeconfig::from_yaml(&self.kubeconfig_yaml())
            .context("parsing the sim's kubeconfig")?;
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .context("loading the sim's kubeconfig")
    }

    /// Returns a kube client for this sim, built from its kubeconfig as any program would.
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        kube::Client::try_from(self.kube_config().await?).context("building a client for the sim")
    }

    /// Returns a kubeconfig (YAML) that reaches this sim with `token`: a component's own
    /// identity from [`SimConfig::auth`].
    pub fn kubeconfig_yaml_with_token(&self, token: &str) -> String {
        kubeconfig::render(&self.url, self.ca_pem.as_deref(), Some(token))
    }

    /// Returns a kube client for this sim that authenticates with `token`.
    pub async fn client_with_token(&self, token: &str) -> anyhow::Result<kube::Client> {
        kubeconfig::client(&self.kubeconfig_yaml_with_token(token))
            .await
            .context("a client for the sim")
    }

    /// Stops the server.
    pub fn stop(&self) {
        self.stop.cancel();
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
