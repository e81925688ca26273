//! The coordinator's command line (flags with `TELEMESH_*` environment fallbacks and defaults
//! that work in the dev cluster) and the validated configuration built from it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use telemesh_core::policy::Unknown;
use telemesh_runtime::cli::{CommonArgs, GossipArgs, RewardModelArgs, parse_duration};

use crate::actions::auth::AuthMode;
use crate::extender::http::{Paths, TlsFiles};
use crate::extender::settings::RewardSettings;
use crate::extender::unsaved::ScavengerVictims;
use crate::extender::{Settings, UnknownScore};
use crate::scavenge::{ScavengerArgs, Settings as ScavengerSettings};
use crate::view::ViewConfig;

/// `telemesh-coordinator` flags.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "telemesh-coordinator",
    version,
    about = "Telemesh's coordinator: cluster view, scheduler extender, JSON API"
)]
pub struct Cli {
    #[command(flatten)]
    pub common: CommonArgs,
    /// This replica's gossip name, unique among members (the pod name in a Deployment);
    /// defaults to `coordinator-<random>`.
    #[arg(long, env = "TELEMESH_REPLICA_NAME")]
    pub replica_name: Option<String>,
    /// UDP address gossip listens on.
    #[arg(long, env = "TELEMESH_GOSSIP_LISTEN", default_value = "127.0.0.1:7947")]
    pub gossip_listen: SocketAddr,
    #[command(flatten)]
    pub gossip: GossipArgs,
    /// TCP address of the scheduler extender.
    #[arg(
        long,
        env = "TELEMESH_EXTENDER_LISTEN",
        default_value = "127.0.0.1:9001"
    )]
    pub extender_listen: SocketAddr,
    /// Extender certificate chain (PEM); with --extender-key the extender serves HTTPS.
    #[arg(long, env = "TELEMESH_EXTENDER_CERT", requires = "extender_key")]
    pub extender_cert: Option<PathBuf>,
    /// Extender private key (PEM).
    #[arg(long, env = "TELEMESH_EXTENDER_KEY", requires = "extender_cert")]
    pub extender_key: Option<PathBuf>,
    /// CA (PEM) the scheduler's client certificate must chain to; unset, no client certificate
    /// is asked for.
    #[arg(long, env = "TELEMESH_EXTENDER_CLIENT_CA", requires = "extender_cert")]
    pub extender_client_ca: Option<PathBuf>,
    /// Path of the filter verb.
    #[arg(
        long,
        env = "TELEMESH_FILTER_PATH",
        default_value = "/scheduler/filter"
    )]
    pub filter_path: String,
    /// Path of the prioritize verb.
    #[arg(
        long,
        env = "TELEMESH_PRIORITIZE_PATH",
        default_value = "/scheduler/prioritize"
    )]
    pub prioritize_path: String,
    /// Path of the preempt verb.
    #[arg(
        long,
        env = "TELEMESH_PREEMPT_PATH",
        default_value = "/scheduler/preempt"
    )]
    pub preempt_path: String,
    /// Largest extender request body read, in MiB; larger gets 413. The default fits 5,000
    /// full Nodes (`nodeCacheCapable: false`) with a third to spare.
    #[arg(long, env = "TELEMESH_EXTENDER_MAX_BODY_MIB", default_value_t = crate::doors::EXTENDER_MAX_BODY_MIB)]
    pub extender_max_body_mib: usize,
    /// TCP address of the JSON API and of JSON-RPC (`POST /rpc`).
    #[arg(long, env = "TELEMESH_API_LISTEN", default_value = "127.0.0.1:9080")]
    pub api_listen: SocketAddr,
    /// How callers of the JSON API and JSON-RPC are checked: `kubernetes` (bearer token with
    /// TokenReview, permission with SubjectAccessReview) or `none` (everyone may act: dev
    /// cluster only; start-up and /readyz say so).
    #[arg(long, env = "TELEMESH_API_AUTH", value_enum, default_value_t = AuthMode::Kubernetes)]
    pub api_auth: AuthMode,
    /// TCP address of /metrics, /healthz and /readyz.
    #[arg(long, env = "TELEMESH_HTTP_LISTEN", default_value = "127.0.0.1:9465")]
    pub http_listen: SocketAddr,
    /// Age beyond which a gossiped metric is unknown. Agents republish unchanged values every
    /// --refresh (30 s by default), so keep this above it.
    #[arg(long, env = "TELEMESH_STALE_AFTER", default_value = "45s", value_parser = parse_duration)]
    pub stale_after: Duration,
    /// What a dontschedule rule whose metric is unknown counts as (TAS: not violating).
    #[arg(long, env = "TELEMESH_UNKNOWN_METRICS", value_enum, default_value_t = Unknown::NotViolating)]
    pub unknown_metrics: Unknown,
    /// What a node without a fresh value scores in prioritize.
    #[arg(long, env = "TELEMESH_UNKNOWN_SCORE", value_enum, default_value_t = UnknownScore::Neutral)]
    pub unknown_score: UnknownScore,
    #[command(flatten)]
    pub reward_model: RewardModelArgs,
    /// The reward score's share of a prioritize score when the pod's policy also has
    /// scheduleonmetric, 0..=1 (telemetry has the rest); pods without that policy are scored
    /// by reward alone.
    #[arg(long, env = "TELEMESH_REWARD_WEIGHT", default_value_t = 0.5)]
    pub reward_weight: f64,
    /// When set (0..=1), filter removes nodes where the pod's type is confidently rewarded
    /// below this; unset, rewards never filter.
    #[arg(long, env = "TELEMESH_REWARD_FLOOR")]
    pub reward_floor: Option<f64>,
    /// How preempt treats scavenger victims: `unsaved` spares the scavenger pods with the most
    /// unsaved work and prefers nodes whose victims lose least; `scheduler` keeps
    /// kube-scheduler's own choice (upstream's behaviour, for comparison).
    #[arg(long, env = "TELEMESH_SCAVENGER_VICTIMS", value_enum, default_value_t = ScavengerVictims::Unsaved)]
    pub scavenger_victims: ScavengerVictims,
    /// How often membership changes, and the keys members deleted, are folded into the cluster
    /// view (key changes are folded in as they arrive).
    #[arg(long, env = "TELEMESH_VIEW_TICK", default_value = "100ms", value_parser = parse_duration)]
    pub view_tick: Duration,
    /// How often every member is re-read in full (catches what gossip itself forgot; deleted
    /// keys leave the view at the next --view-tick).
    #[arg(long, env = "TELEMESH_VIEW_RESYNC", default_value = "30s", value_parser = parse_duration)]
    pub view_resync: Duration,
    /// With no agent seen, the view counts as synced (and the replica ready) after this.
    #[arg(long, env = "TELEMESH_VIEW_SYNC_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub view_sync_timeout: Duration,
    /// With --gossip-cells above 1, the replica also joins the flat mesh (through
    /// --gossip-seeds) for a rolling upgrade from it, and leaves it once no agent has been
    /// live there for this long. 0s: never join it.
    #[arg(long, env = "TELEMESH_GOSSIP_FLAT_MESH_GRACE", default_value = "1m", value_parser = parse_duration)]
    pub gossip_flat_mesh_grace: Duration,
    /// CA (PEM) that signs agents' QUIC certificates; with --quic-cert and --quic-key enables
    /// /api/v1/nodes/{name}/pods.
    #[arg(long, env = "TELEMESH_QUIC_CA", requires_all = ["quic_cert", "quic_key"])]
    pub quic_ca: Option<PathBuf>,
    /// This coordinator's QUIC client certificate chain (PEM).
    #[arg(long, env = "TELEMESH_QUIC_CERT", requires = "quic_ca")]
    pub quic_cert: Option<PathBuf>,
    /// This coordinator's QUIC client key (PEM).
    #[arg(long, env = "TELEMESH_QUIC_KEY", requires = "quic_ca")]
    pub quic_key: Option<PathBuf>,
    /// Local UDP address of the QUIC client.
    #[arg(long, env = "TELEMESH_QUIC_BIND", default_value = "0.0.0.0:0")]
    pub quic_bind: SocketAddr,
    /// Agents' QUIC port, used with an agent's gossip IP when it does not publish its QUIC
    /// address.
    #[arg(long, env = "TELEMESH_AGENT_QUIC_PORT", default_value_t = 7443)]
    pub agent_quic_port: u16,
    /// How long tasks may take to stop after SIGTERM.
    #[arg(long, env = "TELEMESH_SHUTDOWN_GRACE", default_value = "5s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,
    #[command(flatten)]
    pub leader: crate::leader::LeaderArgs,
    #[command(flatten)]
    pub executor: crate::actions::executor::ExecutorArgs,
    #[command(flatten)]
    pub scavengers: crate::scavenge::ScavengerArgs,
    #[command(flatten)]
    pub doors: crate::doors::DoorArgs,
}

pub use telemesh_runtime::cli::{GossipSecurity, GossipSettings, GossipSettingsError};

/// QUIC client settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuicSettings {
    /// CA, certificate and key files.
    pub files: telemesh_runtime::quic::tls::TlsFiles,
    /// Local bind address.
    pub bind: SocketAddr,
    /// Agents' QUIC port fallback.
    pub agent_port: u16,
}

/// A validated coordinator configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Kubeconfig path, if given.
    pub kubeconfig: Option<PathBuf>,
    /// This replica's gossip name.
    pub replica_name: String,
    /// Gossip.
    pub gossip: GossipSettings,
    /// Extender address.
    pub extender_listen: SocketAddr,
    /// Extender TLS, if HTTPS.
    pub extender_tls: Option<TlsFiles>,
    /// Verb paths.
    pub paths: Paths,
    /// Largest body, bytes.
    pub max_body: usize,
    /// API address.
    pub api_listen: SocketAddr,
    /// How API callers are checked.
    pub api_auth: AuthMode,
    /// Metrics and health address.
    pub http_listen: SocketAddr,
    /// Telemetry treatment.
    pub settings: Settings,
    /// The view's update cadence.
    pub view: ViewConfig,
    /// How long the flat mesh is kept beside the cells once no agent is live in it; zero:
    /// never joined.
    pub flat_mesh_grace: Duration,
    /// QUIC to agents, if configured.
    pub quic: Option<QuicSettings>,
    /// Shutdown grace.
    pub shutdown_grace: Duration,
    /// Leader election.
    pub leader: crate::leader::Settings,
    /// The action executor.
    pub executor: crate::actions::executor::Settings,
    /// The ScavengerJob controller.
    pub scavengers: ScavengerSettings,
    /// Deadlines and rate limits of the HTTP doors.
    pub doors: crate::doors::DoorArgs,
}

/// A flag combination that cannot work.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Gossip flags that cannot work.
    #[error(transparent)]
    Gossip(#[from] GossipSettingsError),
    /// A verb path that does not start with `/` or two verbs on one path.
    #[error(
        "extender paths must start with '/' and differ: filter {filter:?}, prioritize {prioritize:?}, preempt {preempt:?}"
    )]
    Paths {
        /// --filter-path.
        filter: String,
        /// --prioritize-path.
        prioritize: String,
        /// --preempt-path.
        preempt: String,
    },
    /// A zero duration where time must pass.
    #[error("--{0} must be longer than zero")]
    ZeroDuration(&'static str),
    /// Reward model flags out of range (the message names the flag).
    #[error("{0}")]
    RewardModel(String),
    /// A number outside its range.
    #[error("--{flag} is {value} but must be {expected}")]
    OutOfRange {
        /// The flag.
        flag: &'static str,
        /// What was given.
        value: f64,
        /// The range, in words.
        expected: &'static str,
    },
}

/// The scavenger flags checked here, with the others: the scavenger controller takes
/// [`crate::scavenge::Settings`] as given.
impl TryFrom<ScavengerArgs> for ScavengerSettings {
    type Error = ConfigError;

    fn try_from(a: ScavengerArgs) -> Result<Self, Self::Error> {
        if !(0.0..=1.0).contains(&a.scavenger_threshold) {
            return Err(ConfigError::OutOfRange {
                flag: "scavenger-threshold",
                value: a.scavenger_threshold,
                expected: "between 0 and 1",
            });
        }
        for (flag, d) in [
            (
                "scavenger-admission-interval",
                a.scavenger_admission_interval,
            ),
            (
                "scavenger-unschedulable-timeout",
                a.scavenger_unschedulable_timeout,
            ),
            ("scavenger-start-timeout", a.scavenger_start_timeout),
        ] {
            if d.is_zero() {
                return Err(ConfigError::ZeroDuration(flag));
            }
        }
        Ok(Self {
            enabled: a.scavengers,
            threshold: a.scavenger_threshold,
            mode: a.scavenger_use,
            queue: a.scavenger_queue,
            unschedulable_timeout: a.scavenger_unschedulable_timeout,
            start_timeout: a.scavenger_start_timeout,
            admission_interval: a.scavenger_admission_interval,
            check_secrets: a.scavenger_check_secrets,
        })
    }
}

impl TryFrom<Cli> for Config {
    type Error = ConfigError;

    fn try_from(cli: Cli) -> Result<Self, Self::Error> {
        let gossip = cli.gossip.settings(cli.gossip_listen)?;
        let paths = Paths {
            filter: cli.filter_path,
            prioritize: cli.prioritize_path,
            preempt: cli.preempt_path,
        };
        let all = [&paths.filter, &paths.prioritize, &paths.preempt];
        if all.iter().any(|p| !p.starts_with('/'))
            || paths.filter == paths.prioritize
            || paths.filter == paths.preempt
            || paths.prioritize == paths.preempt
        {
            return Err(ConfigError::Paths {
                filter: paths.filter,
                prioritize: paths.prioritize,
                preempt: paths.preempt,
            });
        }
        for (flag, d) in [
            ("view-tick", cli.view_tick),
            ("view-resync", cli.view_resync),
            ("stale-after", cli.stale_after),
            (
                "http-header-timeout",
                cli.doors.timeouts.http_header_timeout,
            ),
            ("http-body-timeout", cli.doors.timeouts.http_body_timeout),
        ] {
            if d.is_zero() {
                return Err(ConfigError::ZeroDuration(flag));
            }
        }
        let replica_name = cli.replica_name.unwrap_or_else(|| {
            let nanos = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            format!(
                "coordinator-{:08x}",
                nanos ^ std::process::id().rotate_left(16)
            )
        });
        let extender_tls = match (cli.extender_cert, cli.extender_key) {
            (Some(cert), Some(key)) => Some(TlsFiles {
                cert,
                key,
                client_ca: cli.extender_client_ca,
            }),
            _ => None,
        };
        let quic = match (cli.quic_ca, cli.quic_cert, cli.quic_key) {
            (Some(ca), Some(cert_chain), Some(key)) => Some(QuicSettings {
                files: telemesh_runtime::quic::tls::TlsFiles {
                    ca,
                    cert_chain,
                    key,
                },
                bind: cli.quic_bind,
                agent_port: cli.agent_quic_port,
            }),
            _ => None,
        };
        let unit = |v: f64| (0.0..=1.0).contains(&v);
        for (flag, value, ok, expected) in [
            (
                "reward-weight",
                cli.reward_weight,
                unit(cli.reward_weight),
                "between 0 and 1",
            ),
            (
                "reward-floor",
                cli.reward_floor.unwrap_or(0.0),
                cli.reward_floor.is_none_or(unit),
                "between 0 and 1 (or unset: no reward filter)",
            ),
        ] {
            if !ok {
                return Err(ConfigError::OutOfRange {
                    flag,
                    value,
                    expected,
                });
            }
        }
        let settings = Settings {
            stale_after: cli.stale_after,
            unknown: cli.unknown_metrics,
            unknown_score: cli.unknown_score,
            rewards: RewardSettings {
                model: cli.reward_model.model().map_err(ConfigError::RewardModel)?,
                weight: cli.reward_weight,
                floor: cli.reward_floor,
            },
            scavenger_victims: cli.scavenger_victims,
        };
        let cells = gossip.cells;
        Ok(Self {
            kubeconfig: cli.common.kubeconfig,
            replica_name,
            gossip,
            extender_listen: cli.extender_listen,
            extender_tls,
            paths,
            max_body: cli.extender_max_body_mib.saturating_mul(1 << 20),
            api_listen: cli.api_listen,
            api_auth: cli.api_auth,
            http_listen: cli.http_listen,
            settings,
            view: ViewConfig {
                tick: cli.view_tick,
                resync: cli.view_resync,
                sync_timeout: cli.view_sync_timeout,
                stale_after: cli.stale_after,
                cells,
            },
            flat_mesh_grace: cli.gossip_flat_mesh_grace,
            quic,
            shutdown_grace: cli.shutdown_grace,
            leader: cli.leader.into(),
            executor: cli.executor.into(),
            scavengers: ScavengerSettings::try_from(cli.scavengers)?,
            doors: cli.doors,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use clap::{CommandFactory as _, Parser as _};

    use telemesh_core::reward::RewardModel;

    use super::*;

    #[test]
    fn cli_definition_is_valid() {
        Cli::command().debug_assert();
    }

    #[test]
    fn defaults_work_in_the_dev_cluster() {
        let cli = Cli::try_parse_from(["telemesh-coordinator", "--insecure-gossip"]).unwrap();
        let c = Config::try_from(cli).unwrap();
        assert_eq!(c.paths, Paths::default());
        assert_eq!(c.gossip.security, GossipSecurity::Insecure);
        assert!(c.extender_tls.is_none() && c.quic.is_none());
        assert_eq!(c.settings, Settings::default());
        assert!(c.replica_name.starts_with("coordinator-"));
        assert_eq!(
            c.api_auth,
            AuthMode::Kubernetes,
            "callers are checked unless told"
        );
    }

    #[test]
    fn bad_combinations_are_refused_with_the_fix() {
        let err =
            Config::try_from(Cli::try_parse_from(["telemesh-coordinator"]).unwrap()).unwrap_err();
        assert!(err.to_string().contains("--gossip-key-file"), "{err}");
        let cli = Cli::try_parse_from([
            "telemesh-coordinator",
            "--insecure-gossip",
            "--filter-path=/x",
            "--prioritize-path=/x",
        ])
        .unwrap();
        assert!(matches!(
            Config::try_from(cli),
            Err(ConfigError::Paths { .. })
        ));
        // A key without a certificate, or a QUIC CA without a client certificate: clap refuses.
        assert!(Cli::try_parse_from(["telemesh-coordinator", "--extender-key=k"]).is_err());
        assert!(Cli::try_parse_from(["telemesh-coordinator", "--quic-ca=ca"]).is_err());
    }

    #[test]
    fn reward_flags_build_the_model_and_are_range_checked() {
        let parse = |extra: &[&str]| {
            let mut args = vec!["telemesh-coordinator", "--insecure-gossip"];
            args.extend_from_slice(extra);
            Config::try_from(Cli::try_parse_from(args).unwrap())
        };
        let c = parse(&[]).unwrap();
        assert_eq!(c.settings.rewards, RewardSettings::default());
        assert_eq!(c.settings.rewards.model.half_life, Duration::from_secs(600));
        assert_eq!(
            c.settings.rewards.floor, None,
            "no reward filter by default"
        );
        let c = parse(&[
            "--reward-half-life=2m",
            "--reward-max-evidence=8",
            "--reward-exploration=0",
            "--reward-weight=1",
            "--reward-floor=0.3",
        ])
        .unwrap();
        let r = c.settings.rewards;
        assert_eq!(
            r.model,
            RewardModel {
                half_life: Duration::from_secs(120),
                max_evidence: 8.0,
                exploration: 0.0
            }
        );
        assert_eq!((r.weight, r.floor), (1.0, Some(0.3)));
        assert_eq!(c.settings.scavenger_victims, ScavengerVictims::Unsaved);
        let c = parse(&["--scavenger-victims=scheduler"]).unwrap();
        assert_eq!(c.settings.scavenger_victims, ScavengerVictims::Scheduler);
        assert!(
            Cli::try_parse_from([
                "telemesh-coordinator",
                "--insecure-gossip",
                "--scavenger-victims=random"
            ])
            .is_err()
        );
        for (bad, flag) in [
            ("--reward-weight=1.5", "reward-weight"),
            ("--reward-weight=NaN", "reward-weight"),
            ("--reward-floor=-0.1", "reward-floor"),
            ("--reward-max-evidence=0", "reward-max-evidence"),
            ("--reward-exploration=-1", "reward-exploration"),
            ("--reward-half-life=0s", "reward-half-life"),
        ] {
            let err = parse(&[bad]).unwrap_err().to_string();
            assert!(err.contains(&format!("--{flag}")), "{bad}: {err}");
        }
    }
}
