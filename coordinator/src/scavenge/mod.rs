//! The ScavengerJob controller's plumbing: on the replica holding the leader Lease, a
//! kube-runtime Controller over ScavengerJobs (owning their Jobs, watching their pods) that
//! reads what it needs, asks [`telemesh_core::scavenge::controller`] what to do, and does it:
//! Jobs created and deleted, status written, Events recorded, `/metrics` kept.
//! [`load`] measures cluster use for admission.

pub mod load;
pub mod reconcile;

use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use telemesh_core::scavenge::controller::{QueueMode, UseMode};
use telemesh_core::scavenge::crd::Phase;
use telemesh_runtime::cli::parse_duration;

pub use reconcile::{Parts, run};

/// ScavengerJob controller flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ScavengerArgs {
    /// Run the ScavengerJob controller on the leader (the CRD must be installed).
    #[arg(long, env = "TELEMESH_SCAVENGERS", default_value_t = true, action = clap::ArgAction::Set)]
    pub scavengers: bool,
    /// Cluster use, counting a candidate ScavengerJob, up to which it may start (0..=1).
    #[arg(long, env = "TELEMESH_SCAVENGER_THRESHOLD", default_value_t = 0.70)]
    pub scavenger_threshold: f64,
    /// What cluster use means: `requested` (the default: what the scheduler fits pods by and
    /// preemption frees), `measured` (the agents' CPU and memory figures plus the candidate's
    /// requests) or `both` (the larger).
    #[arg(long, env = "TELEMESH_SCAVENGER_USE", value_enum, default_value_t = UseMode::Requested)]
    pub scavenger_use: UseMode,
    /// How waiting ScavengerJobs take their turn: `strict` (the default: only the head of the
    /// queue starts, so a big interrupted job never starves behind small ones) or `backfill`
    /// (while the head does not fit, the first job behind it that fits starts too, if the head
    /// and every job ranked behind it holding room would still fit beside ordinary demand and
    /// the jobs ranked ahead of the head).
    #[arg(long, env = "TELEMESH_SCAVENGER_QUEUE", value_enum, default_value_t = QueueMode::Strict)]
    pub scavenger_queue: QueueMode,
    /// How long a run's pods may stay unschedulable before its Job is removed and the
    /// ScavengerJob waits for another turn.
    #[arg(long, env = "TELEMESH_SCAVENGER_UNSCHEDULABLE_TIMEOUT", default_value = "2m", value_parser = parse_duration)]
    pub scavenger_unschedulable_timeout: Duration,
    /// How long a run's pod may stay placed on a node without starting (its image not pulled,
    /// its volumes not mounted, its container not configured) before the run is given up: for
    /// good when the kubelet's reason cannot clear by itself (InvalidImageName,
    /// CreateContainerConfigError), else the ScavengerJob waits for another turn. Counted from
    /// when the pod was placed. The default leaves the kubelet's image back-off about five
    /// attempts and a large image or a slow volume attach time to finish.
    #[arg(long, env = "TELEMESH_SCAVENGER_START_TIMEOUT", default_value = "5m", value_parser = parse_duration)]
    pub scavenger_start_timeout: Duration,
    /// How often the waiting ScavengerJobs are looked at, in memory, for the one that may start
    /// now (reconciled then); the others are reconciled when their status message is out of
    /// date, one per interval, and every 30 s anyway.
    #[arg(long, env = "TELEMESH_SCAVENGER_ADMISSION_INTERVAL", default_value = "5s", value_parser = parse_duration)]
    pub scavenger_admission_interval: Duration,
    /// Check that the Secrets a ScavengerJob mounts exist before starting it (needs `get` on
    /// Secrets in its namespace; off, a missing Secret leaves its pods in ContainerCreating).
    #[arg(long, env = "TELEMESH_SCAVENGER_CHECK_SECRETS", default_value_t = true, action = clap::ArgAction::Set)]
    pub scavenger_check_secrets: bool,
}

/// Validated controller settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Whether the controller runs.
    pub enabled: bool,
    /// Admission threshold, 0..=1.
    pub threshold: f64,
    /// What use means.
    pub mode: UseMode,
    /// How the queue lets jobs start.
    pub queue: QueueMode,
    /// Unschedulable timeout.
    pub unschedulable_timeout: Duration,
    /// Start timeout.
    pub start_timeout: Duration,
    /// Admission poll.
    pub admission_interval: Duration,
    /// Whether Secrets are checked.
    pub check_secrets: bool,
}

/// A phase as a label value.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
pub enum PhaseLabel {
    /// Pending.
    Pending,
    /// Running.
    Running,
    /// Interrupted.
    Interrupted,
    /// Succeeded.
    Succeeded,
    /// Failed.
    Failed,
}

impl From<Phase> for PhaseLabel {
    fn from(p: Phase) -> Self {
        match p {
            Phase::Pending => Self::Pending,
            Phase::Running => Self::Running,
            Phase::Interrupted => Self::Interrupted,
            Phase::Succeeded => Self::Succeeded,
            Phase::Failed => Self::Failed,
        }
    }
}

/// `{phase}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    /// The phase.
    pub phase: PhaseLabel,
}

/// The controller's metrics (prefix `telemesh_coordinator_scavengers_`).
#[derive(Clone)]
pub struct Metrics {
    /// ScavengerJobs by phase (on the leader).
    pub jobs: Family<PhaseLabels, Gauge>,
    /// Interruptions seen.
    pub interruptions: Counter,
    /// CPU-seconds lost at interruptions, estimated.
    pub wasted_cpu_seconds: Counter<f64, AtomicU64>,
    /// Cluster use by the configured measure, without any candidate.
    pub cluster_use: Gauge<f64, AtomicU64>,
    /// The admission threshold.
    pub threshold: Gauge<f64, AtomicU64>,
    /// 1 while this replica runs the controller.
    pub leader: Gauge,
}

impl Metrics {
    /// Registers the metrics.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self {
            jobs: Family::default(),
            interruptions: Counter::default(),
            wasted_cpu_seconds: Counter::default(),
            cluster_use: Gauge::default(),
            threshold: Gauge::default(),
            leader: Gauge::default(),
        };
        registry.register("jobs", "ScavengerJobs by phase", m.jobs.clone());
        registry.register(
            "interruptions",
            "ScavengerJob runs interrupted by preemption or eviction",
            m.interruptions.clone(),
        );
        registry.register(
            "wasted_cpu_seconds",
            "CPU-seconds lost at interruptions, estimated from the checkpoint window and CPU requests",
            m.wasted_cpu_seconds.clone(),
        );
        registry.register(
            "cluster_use_ratio",
            "Cluster use by the --scavenger-use measure (0..1)",
            m.cluster_use.clone(),
        );
        registry.register(
            "threshold_ratio",
            "Use up to which ScavengerJobs start (--scavenger-threshold)",
            m.threshold.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica runs the ScavengerJob controller",
            m.leader.clone(),
        );
        m
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use clap::Parser as _;

    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: ScavengerArgs,
    }

    #[test]
    fn defaults_and_ranges() {
        let s = Settings::try_from(Cli::try_parse_from(["x"]).unwrap().args).unwrap();
        assert_eq!(s.threshold, 0.70);
        assert_eq!(s.mode, UseMode::Requested);
        assert!(s.enabled && s.check_secrets);
        let bad = Cli::try_parse_from(["x", "--scavenger-threshold=1.5"]).unwrap();
        let err = Settings::try_from(bad.args).unwrap_err().to_string();
        assert!(err.contains("--scavenger-threshold"), "{err}");
        let both =
            Cli::try_parse_from(["x", "--scavenger-use=both", "--scavengers=false"]).unwrap();
        let s = Settings::try_from(both.args).unwrap();
        assert_eq!((s.mode, s.enabled), (UseMode::Both, false));
    }

    #[test]
    fn the_start_timeout_defaults_to_five_minutes_and_is_never_zero() {
        let s = Settings::try_from(Cli::try_parse_from(["x"]).unwrap().args).unwrap();
        assert_eq!(s.start_timeout, Duration::from_secs(300));
        let short = Cli::try_parse_from(["x", "--scavenger-start-timeout=2s"]).unwrap();
        assert_eq!(
            Settings::try_from(short.args).unwrap().start_timeout,
            Duration::from_secs(2)
        );
        let zero = Cli::try_parse_from(["x", "--scavenger-start-timeout=0s"]).unwrap();
        let err = Settings::try_from(zero.args).unwrap_err().to_string();
        assert!(err.contains("--scavenger-start-timeout"), "{err}");
    }

    #[test]
    fn the_queue_is_strict_unless_backfill_is_asked_for() {
        let s = Settings::try_from(Cli::try_parse_from(["x"]).unwrap().args).unwrap();
        assert_eq!(s.queue, QueueMode::Strict);
        let backfill = Cli::try_parse_from(["x", "--scavenger-queue=backfill"]).unwrap();
        assert_eq!(
            Settings::try_from(backfill.args).unwrap().queue,
            QueueMode::Backfill
        );
        assert!(Cli::try_parse_from(["x", "--scavenger-queue=fifo"]).is_err());
    }
}
