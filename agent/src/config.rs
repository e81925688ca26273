//! The agent's command line (flags with `TELEMESH_*` environment fallbacks and defaults that
//! work in the dev cluster) and the validated configuration built from it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use telemesh_core::policy::Unknown;
use telemesh_core::reward::{RewardModel, SignalSettings};
use telemesh_runtime::cli::{CommonArgs, GossipArgs, RewardModelArgs, parse_duration};

use crate::enforcement::label_cleanup::LabelCleanup;

/// `telemesh-agent` flags.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "telemesh-agent",
    version,
    about = "Telemesh's per-node agent: telemetry, gossip, pod figures"
)]
pub struct Cli {
    #[command(flatten)]
    pub common: CommonArgs,
    /// This node's Kubernetes name (the downward API's spec.nodeName in a DaemonSet).
    #[arg(long, env = "TELEMESH_NODE_NAME")]
    pub node_name: String,
    /// Root under which /proc and /sys are read (the host's, mounted read-only).
    #[arg(long, env = "TELEMESH_HOST_ROOT", default_value = "/")]
    pub host_root: PathBuf,
    /// How often to sample the node.
    #[arg(long, env = "TELEMESH_COLLECT_INTERVAL", default_value = "1s", value_parser = parse_duration)]
    pub collect_interval: Duration,
    /// UDP address gossip listens on.
    #[arg(long, env = "TELEMESH_GOSSIP_LISTEN", default_value = "127.0.0.1:7946")]
    pub gossip_listen: SocketAddr,
    #[command(flatten)]
    pub gossip: GossipArgs,
    /// Republish an unchanged metric at least this often.
    #[arg(long, env = "TELEMESH_REFRESH", default_value = "30s", value_parser = parse_duration)]
    pub refresh: Duration,
    /// Relative change that republishes a metric at once (0.02 = 2 %).
    #[arg(long, env = "TELEMESH_DEADBAND", default_value_t = 0.02)]
    pub deadband: f64,
    /// HTTP address for /metrics, /healthz, /readyz and /debug/state.
    #[arg(long, env = "TELEMESH_HTTP_LISTEN", default_value = "127.0.0.1:9464")]
    pub http_listen: SocketAddr,
    #[command(flatten)]
    pub http_timeouts: telemesh_runtime::door::TimeoutArgs,
    /// UDP address the QUIC server listens on (needs --quic-ca, --quic-cert, --quic-key).
    #[arg(long, env = "TELEMESH_QUIC_LISTEN")]
    pub quic_listen: Option<SocketAddr>,
    /// CA certificate (PEM) that signs coordinator client certificates.
    #[arg(long, env = "TELEMESH_QUIC_CA", requires = "quic_listen")]
    pub quic_ca: Option<PathBuf>,
    /// This agent's certificate chain (PEM).
    #[arg(long, env = "TELEMESH_QUIC_CERT", requires = "quic_listen")]
    pub quic_cert: Option<PathBuf>,
    /// This agent's private key (PEM).
    #[arg(long, env = "TELEMESH_QUIC_KEY", requires = "quic_listen")]
    pub quic_key: Option<PathBuf>,
    /// Local Prometheus endpoints to import node-level series from (node-exporter, textfile), comma separated URLs.
    #[arg(long, env = "TELEMESH_PROMETHEUS_ENDPOINTS", value_delimiter = ',')]
    pub prometheus_endpoints: Vec<String>,
    /// node-exporter textfile-collector directory (a host path, read under --host-root): its
    /// `*.prom` files are imported every collection.
    #[arg(long, env = "TELEMESH_TEXTFILE_DIR")]
    pub textfile_dir: Option<PathBuf>,
    /// How often TASPolicies are evaluated against this node (TAS's syncPeriod).
    #[arg(long, env = "TELEMESH_POLICY_INTERVAL", default_value = "2s", value_parser = parse_duration)]
    pub policy_interval: Duration,
    /// What a rule whose metric is missing or stale counts as (TAS: not violating).
    #[arg(long, env = "TELEMESH_UNKNOWN_METRICS", value_enum, default_value_t = Unknown::NotViolating)]
    pub unknown_metrics: Unknown,
    /// Age beyond which this node's own reading of a metric is unknown (the collection loop
    /// stalled or a textfile stopped naming it).
    #[arg(long, env = "TELEMESH_STALE_AFTER", default_value = "10s", value_parser = parse_duration)]
    pub stale_after: Duration,
    /// How long the node must have stopped breaking every dontschedule rule before the agent
    /// annotates its Node so kube-scheduler retries the pods the extender held back (gossip's
    /// time to bring the recovered value to the coordinators).
    #[arg(long, env = "TELEMESH_RECOVERY_SIGNAL_DELAY", default_value = "1s", value_parser = parse_duration)]
    pub recovery_signal_delay: Duration,
    /// Least time between two such annotations of this Node (each one is an API write and
    /// makes the scheduler requeue every unschedulable pod).
    #[arg(long, env = "TELEMESH_RECOVERY_SIGNAL_MIN_INTERVAL", default_value = "30s", value_parser = parse_duration)]
    pub recovery_signal_min_interval: Duration,
    /// Which policy labels the agent removes from its Node. `tas`, as TAS: every label in
    /// TAS's namespace (`telemetry.aware.scheduling.*`, and the `<policy>` key of deschedule
    /// policies) that no current policy sets on this node, whoever wrote it (TAS's leftovers,
    /// labels set by hand). `own`: only the labels this agent applied, for clusters where
    /// another tool writes in that namespace.
    #[arg(long, env = "TELEMESH_LABEL_CLEANUP", value_enum, default_value_t = LabelCleanup::Tas)]
    pub label_cleanup: LabelCleanup,
    /// Evict this node's pods linked to a violated deschedule policy. Turn off when the
    /// Kubernetes descheduler acts on the `<policy>=violating` labels instead.
    #[arg(long, env = "TELEMESH_LOCAL_EVICTION", default_value_t = true, action = clap::ArgAction::Set)]
    pub local_eviction: bool,
    /// Log and record what would be evicted without evicting.
    #[arg(long, env = "TELEMESH_EVICTION_DRY_RUN")]
    pub eviction_dry_run: bool,
    /// At most this many evictions from this node per minute.
    #[arg(long, env = "TELEMESH_MAX_EVICTIONS_PER_MINUTE", default_value_t = 10)]
    pub max_evictions_per_minute: u32,
    /// Pods younger than this are not evicted (they may still be starting up).
    #[arg(long, env = "TELEMESH_MIN_POD_AGE", default_value = "30s", value_parser = parse_duration)]
    pub min_pod_age: Duration,
    /// A deschedule violation must last this long before pods are evicted for it.
    #[arg(long, env = "TELEMESH_VIOLATION_GRACE", default_value = "5s", value_parser = parse_duration)]
    pub violation_grace: Duration,
    /// The kubelet's root directory (`--root-dir`), a host path read under --host-root: where
    /// scavenger pods' checkpoint markers are (`pods/<uid>/volumes/kubernetes.io~empty-dir/…`).
    #[arg(long, env = "TELEMESH_KUBELET_ROOT_DIR", default_value = telemesh_core::scavenge::DEFAULT_KUBELET_ROOT)]
    pub kubelet_root_dir: PathBuf,
    /// Node pressure (percent of time some task stalled, PSI `some avg10` of cpu, memory or io,
    /// the highest) above which scavenger pods are evicted, least unsaved work first. 40 %:
    /// far above a busy but healthy node's few percent, well before stalls cripple the
    /// node's own workloads.
    #[arg(
        long,
        env = "TELEMESH_SCAVENGER_PRESSURE_THRESHOLD",
        default_value_t = 40.0
    )]
    pub scavenger_pressure_threshold: f64,
    /// How long the pressure must stay above the threshold before a scavenger is evicted, and
    /// again before the next one (avg10 is a 10 s average: 30 s is three of them, so a burst
    /// evicts nothing and the previous eviction's relief shows first).
    #[arg(long, env = "TELEMESH_SCAVENGER_PRESSURE_FOR", default_value = "30s", value_parser = parse_duration)]
    pub scavenger_pressure_for: Duration,
    /// How long tasks may take to stop after SIGTERM.
    #[arg(long, env = "TELEMESH_SHUTDOWN_GRACE", default_value = "5s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,
    #[command(flatten)]
    pub reward_model: RewardModelArgs,
    /// How often this node's pods are looked at for rewards.
    #[arg(long, env = "TELEMESH_REWARD_INTERVAL", default_value = "5s", value_parser = parse_duration)]
    pub reward_interval: Duration,
    /// Ready time worth one good observation.
    #[arg(long, env = "TELEMESH_REWARD_HEALTHY_UNIT", default_value = "5m", value_parser = parse_duration)]
    pub reward_healthy_unit: Duration,
    /// A restart sooner than this after the previous one weighs more.
    #[arg(long, env = "TELEMESH_REWARD_RESTART_WINDOW", default_value = "10m", value_parser = parse_duration)]
    pub reward_restart_window: Duration,
    /// How long a pod on this node may wait to start (ContainerCreating, image pulls) before its
    /// Events are looked at for a cause the node owns (a sandbox, a volume attach or mount, a
    /// pull this node cannot make), counted once as a start failure (docs/agent.md, "Rewards").
    #[arg(long, env = "TELEMESH_REWARD_START_GRACE", default_value = "2m", value_parser = parse_duration)]
    pub reward_start_grace: Duration,
    /// Pod types gossiped at most (the most recently active win; gossip stays bounded).
    #[arg(long, env = "TELEMESH_REWARD_MAX_TYPES", default_value_t = 32)]
    pub reward_max_types: usize,
    /// File the estimates are kept in across restarts (a hostPath); none: a restarted agent
    /// starts from what its peers still gossip of it, else from scratch.
    #[arg(long, env = "TELEMESH_REWARD_STATE_FILE")]
    pub reward_state_file: Option<PathBuf>,
}

/// Reward learning on this node.
#[derive(Debug, Clone, PartialEq)]
pub struct RewardConfig {
    /// How often pods are looked at.
    pub interval: Duration,
    /// Decay, cap, exploration.
    pub model: RewardModel,
    /// What observations are worth.
    pub signals: SignalSettings,
    /// How long a pod may wait to start before a start failure is looked for.
    pub start_grace: Duration,
    /// Types gossiped at most.
    pub max_types: usize,
    /// Where estimates persist.
    pub state_file: Option<PathBuf>,
}

pub use telemesh_runtime::cli::{GossipSecurity, GossipSettings, GossipSettingsError};

/// QUIC server settings: all three PEM files are needed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuicConfig {
    /// Listen address.
    pub listen: SocketAddr,
    /// CA for client certificates.
    pub ca: PathBuf,
    /// Own certificate chain.
    pub cert: PathBuf,
    /// Own key.
    pub key: PathBuf,
}

/// A validated agent configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Kubeconfig path, if given.
    pub kubeconfig: Option<PathBuf>,
    /// Node name.
    pub node_name: String,
    /// Host root.
    pub host_root: PathBuf,
    /// Sampling period.
    pub collect_interval: Duration,
    /// Gossip membership.
    pub gossip: GossipSettings,
    /// Deadband.
    pub deadband: crate::collection::publish::Deadband,
    /// HTTP address.
    pub http_listen: SocketAddr,
    /// HTTP header and body deadlines.
    pub http_timeouts: telemesh_runtime::door::TimeoutArgs,
    /// QUIC, when enabled.
    pub quic: Option<QuicConfig>,
    /// Prometheus endpoints.
    pub prometheus_endpoints: Vec<String>,
    /// Textfile directory (host path).
    pub textfile_dir: Option<PathBuf>,
    /// Policy evaluation.
    pub policy: PolicyConfig,
    /// Shutdown grace.
    pub shutdown_grace: Duration,
    /// Reward learning.
    pub rewards: RewardConfig,
    /// Scavenger pods: checkpoint markers and pressure eviction.
    pub scavengers: ScavengerConfig,
}

/// Policy evaluation, labels and local eviction.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyConfig {
    /// Evaluation period.
    pub interval: Duration,
    /// Meaning of unknown metrics.
    pub unknown: Unknown,
    /// Own readings older than this are unknown.
    pub stale_after: Duration,
    /// Which labels the agent removes from its Node.
    pub label_cleanup: LabelCleanup,
    /// Eviction guards; `None` turns local eviction off (labels only).
    pub eviction: Option<EvictionConfig>,
    /// When the recovery signal is written.
    pub recovery: crate::enforcement::recovery::RecoveryConfig,
}

/// Scavenger handling settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ScavengerConfig {
    /// The kubelet's root directory as a host path (read under the host root).
    pub kubelet_root: PathBuf,
    /// How often pods and markers are looked at.
    pub interval: Duration,
    /// Pressure (percent, `some avg10`) above which scavengers are evicted.
    pub pressure_threshold: f64,
    /// How long the pressure must stay above it.
    pub pressure_for: Duration,
}

/// Guards on local eviction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvictionConfig {
    /// Record instead of evicting.
    pub dry_run: bool,
    /// Rate limit per node.
    pub max_per_minute: u32,
    /// Minimum pod age.
    pub min_pod_age: Duration,
    /// How long a violation must persist.
    pub grace: Duration,
}

/// A flag combination that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Gossip flags that cannot work.
    #[error(transparent)]
    Gossip(#[from] GossipSettingsError),
    /// --quic-listen without its certificates.
    #[error(
        "--quic-listen needs --quic-ca, --quic-cert and --quic-key (PEM files from the agent's TLS Secret)"
    )]
    QuicWithoutCertificates,
    /// Empty node name.
    #[error("--node-name is empty; set it from the downward API (spec.nodeName)")]
    NoNodeName,
    /// Deadband out of range.
    #[error("--deadband {0} is not a fraction in [0, 1)")]
    Deadband(String),
    /// Zero interval.
    #[error("--{0} must be longer than zero")]
    ZeroInterval(&'static str),
    /// Reward model flags out of range.
    #[error("{0}")]
    RewardModel(String),
    /// Pressure threshold out of range.
    #[error("--scavenger-pressure-threshold {0} is not a percentage in [0, 100]")]
    PressureThreshold(String),
}

impl TryFrom<Cli> for Config {
    type Error = ConfigError;

    fn try_from(cli: Cli) -> Result<Self, Self::Error> {
        if cli.node_name.trim().is_empty() {
            return Err(ConfigError::NoNodeName);
        }
        let gossip = cli.gossip.settings(cli.gossip_listen)?;
        let quic = match (cli.quic_listen, cli.quic_ca, cli.quic_cert, cli.quic_key) {
            (None, ..) => None,
            (Some(listen), Some(ca), Some(cert), Some(key)) => Some(QuicConfig {
                listen,
                ca,
                cert,
                key,
            }),
            (Some(_), ..) => return Err(ConfigError::QuicWithoutCertificates),
        };
        if !(0.0..=100.0).contains(&cli.scavenger_pressure_threshold) {
            return Err(ConfigError::PressureThreshold(
                cli.scavenger_pressure_threshold.to_string(),
            ));
        }
        if !(0.0..1.0).contains(&cli.deadband) {
            return Err(ConfigError::Deadband(cli.deadband.to_string()));
        }
        for (name, d) in [
            ("collect-interval", cli.collect_interval),
            ("refresh", cli.refresh),
            ("policy-interval", cli.policy_interval),
            ("reward-interval", cli.reward_interval),
            ("reward-healthy-unit", cli.reward_healthy_unit),
            ("stale-after", cli.stale_after),
            ("http-header-timeout", cli.http_timeouts.http_header_timeout),
            ("http-body-timeout", cli.http_timeouts.http_body_timeout),
        ] {
            if d.is_zero() {
                return Err(ConfigError::ZeroInterval(name));
            }
        }
        Ok(Self {
            kubeconfig: cli.common.kubeconfig,
            node_name: cli.node_name,
            host_root: cli.host_root,
            collect_interval: cli.collect_interval,
            gossip,
            deadband: crate::collection::publish::Deadband {
                relative: cli.deadband,
                absolute: 1e-3,
                refresh: cli.refresh,
            },
            http_listen: cli.http_listen,
            http_timeouts: cli.http_timeouts,
            quic,
            prometheus_endpoints: cli.prometheus_endpoints,
            textfile_dir: cli.textfile_dir,
            policy: PolicyConfig {
                interval: cli.policy_interval,
                unknown: cli.unknown_metrics,
                stale_after: cli.stale_after,
                label_cleanup: cli.label_cleanup,
                recovery: crate::enforcement::recovery::RecoveryConfig {
                    delay: cli.recovery_signal_delay,
                    min_interval: cli.recovery_signal_min_interval,
                },
                eviction: cli.local_eviction.then_some(EvictionConfig {
                    dry_run: cli.eviction_dry_run,
                    max_per_minute: cli.max_evictions_per_minute,
                    min_pod_age: cli.min_pod_age,
                    grace: cli.violation_grace,
                }),
            },
            shutdown_grace: cli.shutdown_grace,
            scavengers: ScavengerConfig {
                kubelet_root: cli.kubelet_root_dir,
                interval: cli.collect_interval,
                pressure_threshold: cli.scavenger_pressure_threshold,
                pressure_for: cli.scavenger_pressure_for,
            },
            rewards: RewardConfig {
                interval: cli.reward_interval,
                model: cli.reward_model.model().map_err(ConfigError::RewardModel)?,
                signals: SignalSettings {
                    healthy_unit: cli.reward_healthy_unit,
                    restart_window: cli.reward_restart_window,
                    ..SignalSettings::default()
                },
                start_grace: cli.reward_start_grace,
                max_types: cli.reward_max_types.max(1),
                state_file: cli.reward_state_file,
            },
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use clap::{CommandFactory as _, Parser as _};

    use super::*;

    #[test]
    fn cli_definition_is_valid() {
        Cli::command().debug_assert();
    }

    #[test]
    fn dev_flags_make_a_config() {
        let cli = Cli::try_parse_from([
            "telemesh-agent",
            "--node-name",
            "n1",
            "--insecure-gossip",
            "--gossip-seeds",
            "127.0.0.1:1,127.0.0.1:2",
        ])
        .unwrap();
        let config = Config::try_from(cli).unwrap();
        assert_eq!(config.gossip.security, GossipSecurity::Insecure);
        assert_eq!(config.gossip.seeds.len(), 2);
        assert_eq!(config.gossip.advertise, None);
        assert!(config.quic.is_none());
        assert_eq!(
            config.policy.label_cleanup,
            LabelCleanup::Tas,
            "TAS's clean-up by default"
        );
        let own = Cli::try_parse_from([
            "telemesh-agent",
            "--node-name=n1",
            "--insecure-gossip",
            "--label-cleanup=own",
        ])
        .unwrap();
        assert_eq!(
            Config::try_from(own).unwrap().policy.label_cleanup,
            LabelCleanup::Own
        );
    }

    #[test]
    fn unusable_combinations_are_refused_before_anything_starts() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from([&["telemesh-agent", "--node-name", "n1"], args].concat())
                .map(Config::try_from)
        };
        assert_eq!(
            parse(&[]).unwrap().unwrap_err(),
            ConfigError::Gossip(GossipSettingsError::NoSecurity)
        );
        assert!(
            parse(&["--insecure-gossip", "--gossip-key-file", "k"]).is_err(),
            "clap refuses both"
        );
        assert_eq!(
            parse(&["--insecure-gossip", "--quic-listen", "127.0.0.1:1"])
                .unwrap()
                .unwrap_err(),
            ConfigError::QuicWithoutCertificates
        );
        assert_eq!(
            parse(&["--insecure-gossip", "--deadband", "1.5"])
                .unwrap()
                .unwrap_err(),
            ConfigError::Deadband("1.5".into())
        );
        assert_eq!(
            parse(&["--insecure-gossip", "--collect-interval", "0s"])
                .unwrap()
                .unwrap_err(),
            ConfigError::ZeroInterval("collect-interval")
        );
        assert_eq!(
            parse(&["--insecure-gossip", "--gossip-interval", "0s"])
                .unwrap()
                .unwrap_err(),
            ConfigError::Gossip(GossipSettingsError::ZeroInterval)
        );
    }
}
