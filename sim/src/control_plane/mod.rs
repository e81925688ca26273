//! A real Kubernetes control plane on loopback: etcd, kube-apiserver and kube-controller-manager
//! (and kube-scheduler on request), the unmodified upstream programs, started as a kubeadm
//! cluster configures them where it matters to Telemesh. It is the other API server the tests
//! and the dev cluster run against, so that sim is checked against the real thing (sim is held
//! to upstream behaviour; where the two differ, sim is wrong).
//!
//! The programs are test tools, like the scheduler: nothing in the product depends on them.
//! [`binaries::locate`] finds them (`$TELEMESH_CONTROL_PLANE`, or unpacked from the shared
//! tools into the workspace's cache).
//!
//! Each control plane takes a loopback address of its own (`127.a.b.c`, random unless given),
//! so parallel tests never race for ports: etcd listens on 2379/2380 there, kube-apiserver on
//! [`ControlPlaneConfig::port`]. The controllers and the scheduler serve no port
//! (`--secure-port=0`).
//!
//! What is configured as kubeadm does and why it matters here:
//! - service-account issuer and signing keys (a fresh ECDSA P-256 pair), so bound tokens from
//!   the TokenRequest API carry the Pod and Node they are bound to (the agent's node scope);
//! - `--authorization-mode=Node,RBAC`: the chart's RBAC is what authorizes the components;
//! - the default admission plugins plus `NodeRestriction`, with ValidatingAdmissionPolicy on
//!   (GA, on by default): the chart's node-scope policy is evaluated by the real CEL;
//! - a static token file with one `system:masters` token, the admin's (what the kubeconfig
//!   [`ControlPlane::kubeconfig_yaml`] carries).
//!
//! Not configured: `--endpoint-reconciler-type=none`, because the `kubernetes` Service's
//! Endpoints may not hold a loopback address and the reconciler would log an error every 10 s.

pub mod binaries;

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

use crate::processes::Processes;

/// How long kube-apiserver may take to become ready (3-6 s on 2 cores; loaded CI machines
/// take longer) before start fails with its log.
const READY_WITHIN: Duration = Duration::from_secs(90);

/// The issuer of service-account tokens, kubeadm's.
pub const SERVICE_ACCOUNT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// How to start a control plane.
#[derive(Debug, Clone)]
pub struct ControlPlaneConfig {
    /// The folder holding `etcd`, `kube-apiserver`, `kube-controller-manager` and
    /// `kube-scheduler` ([`binaries::locate`]).
    pub binaries: PathBuf,
    /// State: etcd's data, keys, certificates, kubeconfig, and each program's log under `logs/`.
    pub dir: PathBuf,
    /// The loopback address everything listens on; None picks a random `127.a.b.c`.
    pub address: Option<IpAddr>,
    /// kube-apiserver's port.
    pub port: u16,
    /// Start kube-controller-manager (namespaces' service accounts, garbage collection, Jobs,
    /// ReplicaSets, Deployments, StatefulSets, node lifecycle, PodDisruptionBudget status).
    pub controller_manager: bool,
}

impl ControlPlaneConfig {
    /// A control plane from `binaries` with its state in `dir`, on a random loopback address,
    /// with kube-controller-manager.
    pub fn new(binaries: PathBuf, dir: PathBuf) -> Self {
        Self {
            binaries,
            dir,
            address: None,
            port: 6443,
            controller_manager: true,
        }
    }
}

/// A running control plane. Dropping it kills every program it started.
#[derive(Debug)]
pub struct ControlPlane {
    processes: Processes,
    binaries: PathBuf,
    dir: PathBuf,
    url: String,
    ca_pem: String,
    admin_token: String,
    kubeconfig: PathBuf,
}

impl ControlPlane {
    /// Starts etcd, kube-apiserver and (if configured) kube-controller-manager, and returns once
    /// the API server is ready and its admin kubeconfig is written (`<dir>/admin.kubeconfig`).
    pub async fn start(config: ControlPlaneConfig) -> anyhow::Result<Self> {
        let ip = config.address.unwrap_or_else(random_loopback);
        anyhow::ensure!(
            ip.is_loopback(),
            "the control plane listens on loopback only, not {ip}"
        );
        let dir = config.dir.clone();
        let logs = dir.join("logs");
        std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
        let program = |name: &str| -> anyhow::Result<PathBuf> {
            let path = config.binaries.join(name);
            anyhow::ensure!(
                path.is_file(),
                "{} not found (set {} to a folder of control-plane executables)",
                path.display(),
                binaries::ENV
            );
            Ok(path)
        };
        let secrets = Secrets::write(&dir, ip)?;
        let url = format!("https://{}", std::net::SocketAddr::new(ip, config.port));
        let kubeconfig = dir.join("admin.kubeconfig");
        crate::kubeconfig::write(
            &kubeconfig,
            &crate::kubeconfig::render(&url, Some(&secrets.ca_pem), Some(&secrets.admin_token)),
        )
        .with_context(|| format!("writing {}", kubeconfig.display()))?;

        let mut processes = Processes::default();
        let etcd_client = format!("http://{ip}:2379");
        processes.spawn(
            "etcd",
            &program("etcd")?,
            &[
                format!("--data-dir={}", dir.join("etcd").display()),
                format!("--listen-client-urls={etcd_client}"),
                format!("--advertise-client-urls={etcd_client}"),
                format!("--listen-peer-urls=http://{ip}:2380"),
                // Tests only: a lost write on power failure does not matter here.
                "--unsafe-no-fsync".into(),
                "--log-level=warn".into(),
            ],
            &logs.join("etcd.log"),
        )?;
        let path = |p: &Path| p.display().to_string();
        processes.spawn(
            "kube-apiserver",
            &program("kube-apiserver")?,
            &[
                format!("--etcd-servers={etcd_client}"),
                format!("--bind-address={ip}"),
                format!("--advertise-address={ip}"),
                format!("--secure-port={}", config.port),
                format!("--tls-cert-file={}", path(&secrets.serving_cert)),
                format!("--tls-private-key-file={}", path(&secrets.serving_key)),
                format!("--service-account-issuer={SERVICE_ACCOUNT_ISSUER}"),
                format!("--service-account-key-file={}", path(&secrets.sa_public)),
                format!(
                    "--service-account-signing-key-file={}",
                    path(&secrets.sa_private)
                ),
                "--authorization-mode=Node,RBAC".into(),
                format!("--token-auth-file={}", path(&secrets.tokens)),
                "--enable-admission-plugins=NodeRestriction".into(),
                "--allow-privileged=true".into(),
                "--service-cluster-ip-range=10.96.0.0/16".into(),
                "--endpoint-reconciler-type=none".into(),
                "--profiling=false".into(),
            ],
            &logs.join("kube-apiserver.log"),
        )?;
        let mut plane = Self {
            processes,
            binaries: config.binaries.clone(),
            dir,
            url,
            ca_pem: secrets.ca_pem,
            admin_token: secrets.admin_token,
            kubeconfig,
        };
        plane.wait_ready().await?;
        if config.controller_manager {
            plane.processes.spawn(
                "kube-controller-manager",
                &program("kube-controller-manager")?,
                &[
                    format!("--kubeconfig={}", path(&plane.kubeconfig)),
                    format!("--bind-address={ip}"),
                    "--secure-port=0".into(),
                    format!(
                        "--service-account-private-key-file={}",
                        path(&secrets.sa_private)
                    ),
                    format!("--root-ca-file={}", path(&secrets.ca_file)),
                    "--leader-elect=false".into(),
                    "--profiling=false".into(),
                ],
                &plane.dir.join("logs/kube-controller-manager.log"),
            )?;
        }
        tracing::info!(url = %plane.url, dir = %plane.dir.display(), "control plane ready");
        Ok(plane)
    }

    /// Starts the real kube-scheduler (the one beside the control plane, of its version) with
    /// `config`, a rendered KubeSchedulerConfiguration; its log is `logs/kube-scheduler.log`.
    pub fn start_scheduler(&mut self, config: &Path) -> anyhow::Result<()> {
        let program = self.binaries.join("kube-scheduler");
        let args = crate::cluster::scheduler::upstream::args(
            config,
            &self.dir.join("kube-scheduler-certs"),
            0,
        );
        self.processes.spawn(
            "kube-scheduler",
            &program,
            &args,
            &self.dir.join("logs/kube-scheduler.log"),
        )?;
        Ok(())
    }

    /// Polls `/readyz` until kube-apiserver answers ok; fails with the end of its log when it
    /// exits or does not get there within [`READY_WITHIN`].
    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let client = self.client().await?;
        let started = Instant::now();
        // The kube client logs every failed request as an error: ask nothing of kube-apiserver
        // before it accepts connections (2-3 s of start-up), so that a start logs none.
        let addr: std::net::SocketAddr = self
            .url
            .trim_start_matches("https://")
            .parse()
            .with_context(|| format!("the control plane's URL {}", self.url))?;
        while tokio::net::TcpStream::connect(addr).await.is_err() {
            self.all_running()?;
            anyhow::ensure!(
                started.elapsed() < READY_WITHIN,
                "kube-apiserver did not listen on {addr} within {READY_WITHIN:?}\n{}",
                self.log_tail("kube-apiserver")
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        loop {
            self.all_running()?;
            let request = http::Request::get("/readyz").body(Vec::new())?;
            match client.request_text(request).await {
                Ok(body) if body.trim() == "ok" => return Ok(()),
                Ok(_) | Err(_) if started.elapsed() < READY_WITHIN => {
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Ok(body) => bail!("kube-apiserver not ready after {READY_WITHIN:?}: {body}"),
                Err(e) => bail!(
                    "kube-apiserver not ready after {READY_WITHIN:?}: {e}\n{}",
                    self.log_tail("kube-apiserver")
                ),
            }
        }
    }

    /// Fails, with the end of its log, when a program has exited.
    fn all_running(&mut self) -> anyhow::Result<()> {
        match self.processes.exited() {
            Some((name, status)) => bail!(
                "{name} exited ({status}) while the control plane started:\n{}",
                self.log_tail(&name)
            ),
            None => Ok(()),
        }
    }

    /// The last lines of program `name`'s log, for error messages.
    pub fn log_tail(&self, name: &str) -> String {
        let path = self.dir.join("logs").join(format!("{name}.log"));
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(30)..].join("\n");
        format!("{} (last lines):\n{tail}", path.display())
    }

    /// The first program that has exited, if any: a control plane's programs never exit by
    /// themselves.
    pub fn exited(&mut self) -> Option<(String, std::process::ExitStatus)> {
        self.processes.exited()
    }

    /// The API server's URL (`https://127.a.b.c:port`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The CA that signed the API server's certificate (PEM).
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The state folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The admin kubeconfig's path (`system:masters`).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The admin kubeconfig (YAML).
    pub fn kubeconfig_yaml(&self) -> String {
        self.kubeconfig_yaml_with_token(&self.admin_token)
    }

    /// A kubeconfig (YAML) that authenticates with `token` (a service account's bound token).
    pub fn kubeconfig_yaml_with_token(&self, token: &str) -> String {
        crate::kubeconfig::render(&self.url, Some(&self.ca_pem), Some(token))
    }

    /// A kube client with the admin's token.
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        self.client_with_token(&self.admin_token).await
    }

    /// A kube client that authenticates with `token`.
    pub async fn client_with_token(&self, token: &str) -> anyhow::Result<kube::Client> {
        crate::kubeconfig::client(&self.kubeconfig_yaml_with_token(token))
            .await
            .context("a client for the control plane")
    }

    /// A token of service account `namespace/service_account` from the TokenRequest API, valid
    /// for an hour; bound to Pod `namespace/pod` when given, so that it carries the pod's node
    /// (`authentication.kubernetes.io/node-name`) as a token kubelet mounts into a pod does.
    pub async fn service_account_token(
        &self,
        namespace: &str,
        service_account: &str,
        pod: Option<&str>,
    ) -> anyhow::Result<String> {
        service_account_token(&self.client().await?, namespace, service_account, pod).await
    }

    /// Kills every program and waits for each.
    pub async fn stop(&mut self) {
        self.processes.stop_all().await;
    }
}

/// [`ControlPlane::service_account_token`] through any admin client (a real API server's).
pub async fn service_account_token(
    client: &kube::Client,
    namespace: &str,
    service_account: &str,
    pod: Option<&str>,
) -> anyhow::Result<String> {
    use k8s_openapi::api::authentication::v1::{
        BoundObjectReference, TokenRequest, TokenRequestSpec,
    };
    use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
    let bound_object_ref = match pod {
        Some(name) => {
            let pod = kube::Api::<Pod>::namespaced(client.clone(), namespace)
                .get(name)
                .await
                .with_context(|| format!("reading Pod {namespace}/{name} to bind a token to"))?;
            Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(name.to_owned()),
                uid: pod.metadata.uid,
            })
        }
        None => None,
    };
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: Vec::new(),
            bound_object_ref,
            expiration_seconds: Some(3600),
        },
        ..TokenRequest::default()
    };
    let answer = kube::Api::<ServiceAccount>::namespaced(client.clone(), namespace)
        .create_token_request(service_account, &kube::api::PostParams::default(), &request)
        .await
        .with_context(|| {
            format!("requesting a token for service account {namespace}/{service_account}")
        })?;
    answer
        .status
        .map(|s| s.token)
        .filter(|t| !t.is_empty())
        .with_context(|| {
            format!("the TokenRequest for {namespace}/{service_account} returned no token")
        })
}

/// The files the programs read: keys, certificates, the token file.
struct Secrets {
    ca_pem: String,
    ca_file: PathBuf,
    serving_cert: PathBuf,
    serving_key: PathBuf,
    sa_public: PathBuf,
    sa_private: PathBuf,
    tokens: PathBuf,
    admin_token: String,
}

impl Secrets {
    fn write(dir: &Path, ip: IpAddr) -> anyhow::Result<Self> {
        let pki = dir.join("pki");
        std::fs::create_dir_all(&pki).with_context(|| format!("creating {}", pki.display()))?;
        let write = |name: &str, contents: &str| -> anyhow::Result<PathBuf> {
            let path = pki.join(name);
            std::fs::write(&path, contents)
                .with_context(|| format!("writing {}", path.display()))?;
            Ok(path)
        };
        let serving = crate::tls::self_signed(ip)?;
        let sa = rcgen::KeyPair::generate().context("generating the service-account key")?;
        let admin_token = random_token();
        Ok(Self {
            ca_file: write("ca.crt", &serving.ca_pem)?,
            serving_cert: write("apiserver.crt", &serving.cert_pem)?,
            serving_key: write("apiserver.key", &serving.key_pem)?,
            sa_public: write("sa.pub", &sa.public_key_pem())?,
            sa_private: write("sa.key", &sa.serialize_pem())?,
            // TOKEN,USER,UID,GROUPS
            tokens: write(
                "tokens.csv",
                &format!("{admin_token},admin,admin,system:masters\n"),
            )?,
            ca_pem: serving.ca_pem,
            admin_token,
        })
    }
}

/// A random `127.a.b.c` (not `127.0.0.x`, where fixed-port services of the machine listen).
fn random_loopback() -> IpAddr {
    let [a, b, c]: [u8; 3] = rand::random();
    IpAddr::from([127, a.max(1), b, c.clamp(1, 254)])
}

fn random_token() -> String {
    let bytes: [u8; 16] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn random_addresses_are_loopback_and_not_the_machines_own() {
        for _ in 0..1000 {
            let ip = random_loopback();
            assert!(ip.is_loopback(), "{ip}");
            let IpAddr::V4(v4) = ip else {
                panic!("{ip} is not IPv4")
            };
            assert_ne!(v4.octets()[1], 0, "{ip}");
            assert!((1..=254).contains(&v4.octets()[3]), "{ip}");
        }
    }
}
