//! The real kube-scheduler's throughput against sim, without and with the coordinator's
//! extender: pods bound per second, and the ratio to no extender (issue 15, item 6).
//!
//! Per mode, a fresh sim holds `NODES` nodes (default 500) and `PODS` pending pods (default
//! 2,000) linked to the seed's scheduling policy and opting in with `telemetry/scheduling`, all
//! created before kube-scheduler starts. kube-scheduler (v1.32.5; `TELEMESH_KUBE_SCHEDULER`, else
//! ../shared/tools/kube-scheduler) then runs with deploy/scheduler/kube-scheduler-config.yaml,
//! the shipped production registration, as each mode needs it:
//! - `none`: no extender;
//! - `http`: the extender over plain HTTP (the dev registration's transport);
//! - `https-h2`: HTTPS with a client certificate, the server offering `h2` and `http/1.1` in
//!   ALPN (the configuration shipped before issue 15: kube-scheduler negotiates HTTP/2);
//! - `https`: HTTPS with a client certificate as shipped now (ALPN `http/1.1` only);
//! - `https-opted-in`: the same with TAS's opt-in (the chart's `scheduler.pods: optedIn`,
//!   `managedResources: telemetry/scheduling`), and the pods neither linked nor carrying the
//!   resource: what an unlinked pod pays when only opted-in pods reach the extender (none of
//!   them may reach it, so some land on nodes the policy refuses: the proof it was not asked).
//!
//! The extender is the coordinator's own HTTP(S) server and decisions
//! ([`telemesh_coordinator::extender::http`]) over a view in which every node reports
//! `node_metric` (10 % of nodes break dontschedule), so each call does the production work; only
//! the gossip that fills the view in production is left out. The rate is taken between the
//! first and the last binding seen by a pod watch, so start-up and cache sync do not count.
//! Client QPS is raised so that the API client is not the limit. `MODES=none,https` picks modes.
//!
//! Run: `scripts/scheduler-throughput.sh` (release build).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context as _, bail};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_yaml_ng::Value;
use telemesh_coordinator::extender::http::{Paths, TlsFiles, router, serve_tls, server_config};
use telemesh_coordinator::extender::{Extender, Settings};
use telemesh_coordinator::metrics::ExtenderMetrics;
use telemesh_coordinator::policies::{PolicyCache, PolicySet};
use telemesh_coordinator::view::{ClusterView, NodeEntry, Snapshot};
use telemesh_core::gossip::schema::unix_ms;
use telemesh_core::gossip::{Liveness, NodeState};
use telemesh_core::policy::{Policy, TASPolicy};
use telemesh_sim::cluster::scheduler::upstream::Render;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

const SEED_POLICY: &str = include_str!("../../deploy/examples/scheduling-policy.yaml");
const SHIPPED: &str = include_str!("../../deploy/scheduler/kube-scheduler-config.yaml");
const NS: &str = "health-metric-demo";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    None,
    Http,
    HttpsH2,
    Https,
    HttpsOptedIn,
}

impl Mode {
    fn parse(s: &str) -> anyhow::Result<Self> {
        Ok(match s {
            "none" => Self::None,
            "http" => Self::Http,
            "https-h2" => Self::HttpsH2,
            "https" => Self::Https,
            "https-opted-in" => Self::HttpsOptedIn,
            other => {
                bail!("unknown mode {other}; pick none, http, https-h2, https, https-opted-in")
            }
        })
    }

    fn name(self) -> &'static str {
        match self {
            Self::None => "no extender",
            Self::Http => "HTTP",
            Self::HttpsH2 => "HTTPS + client cert, h2 offered (before)",
            Self::Https => "HTTPS + client cert, http/1.1 only (now)",
            Self::HttpsOptedIn => "HTTPS, opted-in only; unlinked pods",
        }
    }

    /// Whether this mode's pods are linked to the policy and opt in to the extender.
    fn linked(self) -> bool {
        self != Self::HttpsOptedIn
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn kube_scheduler() -> PathBuf {
    std::env::var_os("TELEMESH_KUBE_SCHEDULER").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/tools/kube-scheduler"),
        PathBuf::from,
    )
}

/// The CA, the coordinator's serving certificate and the scheduler's client certificate.
struct Certs {
    ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
}

fn certs(dir: &Path) -> anyhow::Result<Certs> {
    let ca_key = rcgen::KeyPair::generate()?;
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "bench CA");
    ca_params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
    ];
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key)?;
    let leaf = |names: Vec<String>, cn: &str, usage| -> anyhow::Result<(String, String)> {
        let key = rcgen::KeyPair::generate()?;
        let mut params = rcgen::CertificateParams::new(names)?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &ca)?;
        Ok((cert.pem(), key.serialize_pem()))
    };
    let (server_cert, server_key) = leaf(
        vec!["127.0.0.1".into(), "localhost".into()],
        "telemesh-coordinator",
        rcgen::ExtendedKeyUsagePurpose::ServerAuth,
    )?;
    let (client_cert, client_key) = leaf(
        vec![],
        "kube-scheduler",
        rcgen::ExtendedKeyUsagePurpose::ClientAuth,
    )?;
    let write = |name: &str, text: &str| -> anyhow::Result<PathBuf> {
        let path = dir.join(name);
        std::fs::write(&path, text)?;
        Ok(path)
    };
    Ok(Certs {
        ca: write("ca.crt", &ca.pem())?,
        server_cert: write("server.crt", &server_cert)?,
        server_key: write("server.key", &server_key)?,
        client_cert: write("client.crt", &client_cert)?,
        client_key: write("client.key", &client_key)?,
    })
}

/// A view where node `i` reports `node_metric` = `(i * 7919) % 100` (10 % under the seed
/// policy's dontschedule target of 10).
fn view(nodes: usize) -> ClusterView {
    let now_ms = unix_ms(SystemTime::now());
    let entries: Vec<NodeEntry> = (0..nodes)
        .map(|i| {
            let kvs = [
                ("role".to_owned(), "agent".to_owned()),
                (
                    "m:node_metric".to_owned(),
                    format!("{}@{now_ms}", metric(i)),
                ),
            ];
            let state =
                NodeState::from_key_values(kvs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            NodeEntry::new(&format!("sim-node-{i}"), 1, Liveness::Live, state)
        })
        .collect();
    ClusterView::with_snapshot(Snapshot::from_entries(entries))
}

/// Whether `sim-node-<i>` breaks the seed policy's dontschedule in [`view`].
fn breaks_dontschedule(node: &str) -> bool {
    node.strip_prefix("sim-node-")
        .and_then(|i| i.parse::<usize>().ok())
        .is_some_and(|i| metric(i) < 10)
}

fn metric(i: usize) -> usize {
    (i * 7919) % 100
}

/// Starts the extender; returns its URL prefix.
async fn start_extender(
    mode: Mode,
    nodes: usize,
    certs: &Certs,
    stop: &CancellationToken,
    tasks: &TaskTracker,
) -> anyhow::Result<String> {
    let policy: TASPolicy = serde_yaml_ng::from_str(SEED_POLICY)?;
    // A long staleness: the view is built once and must not age out during the run.
    let settings = Settings {
        stale_after: Duration::from_secs(3600),
        ..Settings::default()
    };
    let extender = Extender::new(
        view(nodes),
        PolicyCache::with_set(PolicySet::from_policies([Policy::compile(&policy)])),
        settings,
    );
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = ExtenderMetrics::register(&mut registry);
    let app = router(extender, metrics, &Paths::default(), 256 << 20);
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
    let addr = listener.local_addr()?;
    match mode {
        Mode::None => bail!("no extender in mode none"),
        Mode::Http => {
            let stop = stop.clone();
            tasks.spawn(async move {
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(stop.cancelled_owned())
                    .await;
            });
            Ok(format!("http://{addr}/scheduler"))
        }
        Mode::HttpsH2 | Mode::Https | Mode::HttpsOptedIn => {
            let files = TlsFiles {
                cert: certs.server_cert.clone(),
                key: certs.server_key.clone(),
                client_ca: Some(certs.ca.clone()),
            };
            let mut config = (*server_config(&files)?).clone();
            if mode == Mode::HttpsH2 {
                config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
            }
            let connections = telemesh_runtime::door::Connections {
                door: telemesh_runtime::door::DoorName::Extender,
                header_timeout: Duration::from_secs(30),
                metrics: telemesh_runtime::door::DoorMetrics::default(),
            };
            tasks.spawn(serve_tls(
                listener,
                app,
                Arc::new(config),
                connections,
                stop.clone(),
                tasks.clone(),
            ));
            Ok(format!("https://{addr}/scheduler"))
        }
    }
}

fn set(map: &mut Value, key: &str, value: Value) {
    if let Some(m) = map.as_mapping_mut() {
        m.insert(Value::from(key), value);
    }
}

/// deploy/scheduler/kube-scheduler-config.yaml for this run: rendered for one instance as the
/// tests and the dev cluster render it, then with client QPS raised and this mode's transport.
fn scheduler_config(
    mode: Mode,
    kubeconfig: &Path,
    url_prefix: Option<&str>,
    certs: &Certs,
) -> anyhow::Result<String> {
    let rendered = Render {
        kubeconfig: kubeconfig.to_path_buf(),
        url_prefix: url_prefix.map(str::to_owned),
        node_cache_capable: None,
        opted_in: mode == Mode::HttpsOptedIn,
    }
    .apply(SHIPPED)?;
    let mut doc: Value = serde_yaml_ng::from_str(&rendered)?;
    if let Some(client) = doc.get_mut("clientConnection") {
        set(client, "qps", 5000.into());
        set(client, "burst", 10000.into());
    }
    let extenders = doc
        .get_mut("extenders")
        .and_then(Value::as_sequence_mut)
        .context("the shipped configuration registers an extender")?;
    match (mode, url_prefix) {
        (Mode::None, _) => extenders.clear(),
        (_, Some(_)) => {
            let ext = extenders.first_mut().context("one extender")?;
            if mode == Mode::Http {
                set(ext, "enableHTTPS", false.into());
                if let Some(m) = ext.as_mapping_mut() {
                    m.remove("tlsConfig");
                }
            } else {
                let mut tls = serde_yaml_ng::Mapping::new();
                tls.insert("insecure".into(), false.into());
                tls.insert("caFile".into(), certs.ca.display().to_string().into());
                tls.insert(
                    "certFile".into(),
                    certs.client_cert.display().to_string().into(),
                );
                tls.insert(
                    "keyFile".into(),
                    certs.client_key.display().to_string().into(),
                );
                set(ext, "tlsConfig", Value::Mapping(tls));
            }
        }
        (_, None) => bail!("an extender mode needs the extender's URL"),
    }
    Ok(serde_yaml_ng::to_string(&doc)?)
}

/// Pod `i`: linked to the seed policy and opting in with `telemetry/scheduling`, or neither.
fn pod(i: usize, linked: bool) -> anyhow::Result<Pod> {
    let mut pod = serde_json::json!({
        "metadata": {"name": format!("pod-{i}"), "namespace": NS, "labels": {"app": "bench"}},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {
            "requests": {"cpu": "10m", "memory": "16Mi"}}}]},
    });
    if linked {
        pod["metadata"]["labels"]["telemetry-policy"] = "scheduling-policy".into();
        pod["spec"]["containers"][0]["resources"]["limits"] =
            serde_json::json!({"telemetry/scheduling": "1"});
    }
    Ok(serde_json::from_value(pod)?)
}

/// Runs one mode; returns pods/s between the first and the last binding.
async fn run(mode: Mode, nodes: usize, pods: usize, binary: &Path) -> anyhow::Result<f64> {
    let dir = tempfile::tempdir()?;
    let sim = telemesh_sim::Sim::start(Default::default()).await?;
    telemesh_sim::nodes::create_nodes(&sim.server, nodes)
        .map_err(|e| anyhow::anyhow!("creating nodes: {e:?}"))?;
    let client = sim.client().await?;
    let kubeconfig = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig)?;
    let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": NS}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    for i in 0..pods {
        api.create(&PostParams::default(), &pod(i, mode.linked())?)
            .await?;
    }

    let certs = certs(dir.path())?;
    let stop = CancellationToken::new();
    let tasks = TaskTracker::new();
    let url = match mode {
        Mode::None => None,
        _ => Some(start_extender(mode, nodes, &certs, &stop, &tasks).await?),
    };
    let config = dir.path().join("kube-scheduler.yaml");
    std::fs::write(
        &config,
        scheduler_config(mode, &kubeconfig, url.as_deref(), &certs)?,
    )?;
    let log = std::fs::File::create(dir.path().join("kube-scheduler.log"))?;
    let mut scheduler = tokio::process::Command::new(binary)
        .arg(format!("--config={}", config.display()))
        .arg("--bind-address=127.0.0.1")
        .arg("--secure-port=0")
        .arg(format!("--cert-dir={}", dir.path().join("certs").display()))
        .arg("--v=1")
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;

    // Bindings as a watch sees them.
    let mut bound: BTreeMap<String, Instant> = BTreeMap::new();
    let mut on_refused_nodes = 0usize;
    let stream = watcher(api.clone(), watcher::Config::default()).applied_objects();
    let mut stream = std::pin::pin!(stream);
    let deadline = Instant::now() + Duration::from_secs(600);
    while bound.len() < pods {
        let next = tokio::time::timeout(Duration::from_secs(60), stream.next()).await;
        let Ok(Some(item)) = next else {
            let log =
                std::fs::read_to_string(dir.path().join("kube-scheduler.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            bail!(
                "{}: {} of {pods} pods bound after a minute without progress; kube-scheduler log ends:\n{}",
                mode.name(),
                bound.len(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        };
        let pod = item?;
        if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
            let name = pod.metadata.name.unwrap_or_default();
            bound.entry(name).or_insert_with(Instant::now);
            if breaks_dontschedule(&node) {
                on_refused_nodes += 1;
            }
        }
        if Instant::now() > deadline {
            bail!("{}: not all pods bound in 10 minutes", mode.name());
        }
    }
    // Proof that the extender was really asked (an ignorable extender that fails is skipped),
    // or, for unlinked pods under the opt-in, that it was not.
    if mode != Mode::None && mode.linked() && on_refused_nodes > 0 {
        bail!(
            "{}: {on_refused_nodes} pods bound to nodes the policy refuses: the extender was not called",
            mode.name()
        );
    }
    if !mode.linked() && on_refused_nodes == 0 {
        bail!(
            "{}: no pod on a node the policy refuses: the extender was asked about unlinked pods",
            mode.name()
        );
    }
    let first = bound.values().min().copied().context("no pod bound")?;
    let last = bound.values().max().copied().context("no pod bound")?;
    let _ = scheduler.kill().await;
    stop.cancel();
    tasks.close();
    let secs = last.duration_since(first).as_secs_f64();
    Ok((pods - 1) as f64 / secs.max(1e-9))
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let binary = kube_scheduler();
    if !binary.is_file() {
        eprintln!(
            "SKIPPED: kube-scheduler not found at {} (set TELEMESH_KUBE_SCHEDULER)",
            binary.display()
        );
        return Ok(());
    }
    let nodes = env_usize("NODES", 500);
    let pods = env_usize("PODS", 2000);
    let modes: Vec<Mode> = std::env::var("MODES")
        .unwrap_or_else(|_| "none,http,https-h2,https,https-opted-in".into())
        .split(',')
        .map(Mode::parse)
        .collect::<anyhow::Result<_>>()?;
    println!(
        "real kube-scheduler ({}) against sim: {nodes} nodes, {pods} pods (linked and opting in, except in the opted-in mode)",
        binary.display()
    );
    let mut baseline = None;
    for mode in modes {
        let rate = run(mode, nodes, pods, &binary).await?;
        if mode == Mode::None {
            baseline = Some(rate);
        }
        match baseline {
            Some(b) => println!(
                "{:<44} {rate:>7.0} pods/s  {:.2}x no extender",
                mode.name(),
                rate / b
            ),
            None => println!("{:<44} {rate:>7.0} pods/s", mode.name()),
        }
    }
    Ok(())
}
