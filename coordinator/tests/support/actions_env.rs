//! A sim with the WorkloadAction and TASPolicy CRDs and one namespace, and one in-process
//! coordinator replica on loopback talking to it: what the `/rpc` tests and the accept benchmark
//! share, and the Move benchmark with a replica that leads. With an auth table the sim checks
//! tokens, the replica runs `--api-auth kubernetes` and reaches sim with the table's
//! `coordinator-token`; without one, `--api-auth none`. From [`start`] the replica never leads
//! (another holder keeps the executor's Lease), so nothing runs the actions; from
//! [`start_leading`] it takes the Lease and runs them.

use clap::Parser as _;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use telemesh_core::action::WorkloadAction;
use telemesh_sim::{Auth, Sim, SimConfig};
use tokio_util::sync::CancellationToken;

/// The running pair.
pub struct ActionsEnv {
    /// The sim.
    pub sim: Sim,
    /// A client for the sim (sim's own kubeconfig).
    pub client: kube::Client,
    /// The replica.
    pub coordinator: telemesh_coordinator::Coordinator,
    dir: Dir,
}

/// The directory of the replica's kubeconfig; keep it while the replica runs.
pub struct Dir(#[allow(dead_code)] tempfile::TempDir);

impl ActionsEnv {
    /// Its parts, for a caller that adds to them.
    #[allow(dead_code)]
    pub fn into_parts(self) -> (Sim, kube::Client, telemesh_coordinator::Coordinator, Dir) {
        (self.sim, self.client, self.coordinator, self.dir)
    }
}

/// Starts sim (checking tokens with `auth`, if given), installs the CRDs and `namespace`, and
/// starts a coordinator that never leads; returns once WorkloadActions are served.
#[allow(dead_code)]
pub async fn start(auth: Option<Auth>, namespace: &str) -> ActionsEnv {
    start_with(auth, namespace, false, &[]).await
}

/// As [`start`] without authentication, but the replica is free to take the executor's Lease
/// (it is the only one) and runs with `args` added; returns once it holds the Lease.
#[allow(dead_code)]
pub async fn start_leading(namespace: &str, args: &[&str]) -> ActionsEnv {
    start_with(None, namespace, true, args).await
}

async fn start_with(auth: Option<Auth>, namespace: &str, lead: bool, extra: &[&str]) -> ActionsEnv {
    let mode = if auth.is_some() { "kubernetes" } else { "none" };
    let config = match auth {
        Some(auth) => SimConfig {
            auth,
            kubeconfig_token: Some("coordinator-token".into()),
            ..SimConfig::default()
        },
        None => SimConfig::default(),
    };
    let sim = Sim::start(config).await.unwrap();
    let client = sim.client().await.unwrap();
    // WorkloadActions, and TASPolicies (the replica is ready once their cache synced).
    for yaml in [
        telemesh_core::action::crd::CRD_YAML,
        telemesh_core::policy::crd::CRD_YAML,
    ] {
        let crd: CustomResourceDefinition = serde_yaml_ng::from_str(yaml).unwrap();
        Api::<CustomResourceDefinition>::all(client.clone())
            .create(&PostParams::default(), &crd)
            .await
            .unwrap();
    }
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": namespace}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    // Unless this replica is to lead, another holds the executor's Lease for the whole test:
    // these tests and the accept benchmark look at the front half only, so stored actions stay
    // Pending unless a test ends them itself.
    let now = jiff::Timestamp::now();
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "telemesh-coordinator", "namespace": "default"},
        "spec": {
            "holderIdentity": "another-replica",
            "leaseDurationSeconds": 3600,
            "acquireTime": now.to_string(),
            "renewTime": now.to_string(),
        },
    }))
    .unwrap();
    let leases = Api::<Lease>::namespaced(client.clone(), "default");
    if !lead {
        leases.create(&PostParams::default(), &lease).await.unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig).unwrap();
    let coordinator = start_replica(&kubeconfig, mode, extra, &client, namespace).await;
    if lead {
        telemesh_runtime::testing::eventually(
            "the replica holds the executor's Lease",
            std::time::Duration::from_secs(30),
            || {
                let leases = leases.clone();
                async move {
                    let lease = leases.get_opt("telemesh-coordinator").await.ok()??;
                    lease.spec?.holder_identity.filter(|h| !h.is_empty())
                }
            },
        )
        .await;
    }
    ActionsEnv {
        sim,
        client,
        coordinator,
        dir: Dir(dir),
    }
}

/// Starts a coordinator replica in-process on loopback with `kubeconfig`, `--api-auth=<mode>`
/// and `extra` flags; returns once `client` sees WorkloadActions served in `namespace` (a CRD is
/// served once established).
pub async fn start_replica(
    kubeconfig: &std::path::Path,
    mode: &str,
    extra: &[&str],
    client: &kube::Client,
    namespace: &str,
) -> telemesh_coordinator::Coordinator {
    let args = vec![
        "telemesh-coordinator".to_string(),
        "--insecure-gossip".into(),
        format!("--kubeconfig={}", kubeconfig.display()),
        "--gossip-listen=127.0.0.1:0".into(),
        "--extender-listen=127.0.0.1:0".into(),
        "--api-listen=127.0.0.1:0".into(),
        "--http-listen=127.0.0.1:0".into(),
        "--view-sync-timeout=100ms".into(),
        format!("--api-auth={mode}"),
    ]
    .into_iter()
    .chain(extra.iter().map(|a| (*a).to_string()))
    .collect::<Vec<_>>();
    let config = telemesh_coordinator::config::Config::try_from(
        telemesh_coordinator::config::Cli::try_parse_from(args).unwrap(),
    )
    .unwrap();
    let coordinator = telemesh_coordinator::start(config, CancellationToken::new())
        .await
        .unwrap();
    let actions = Api::<WorkloadAction>::namespaced(client.clone(), namespace);
    telemesh_runtime::testing::eventually(
        "WorkloadActions are served",
        std::time::Duration::from_secs(30),
        || {
            let actions = actions.clone();
            async move { actions.list(&ListParams::default()).await.ok().map(|_| ()) }
        },
    )
    .await;
    coordinator
}
