//! How the verbs treat telemetry: the extender's settings, shared by the verbs and read from
//! the flags by [`crate::config`].

use std::time::Duration;

use telemesh_core::policy::Unknown;
use telemesh_core::reward::RewardModel;

use super::unsaved::ScavengerVictims;

/// What scores unknown nodes get in prioritize.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum UnknownScore {
    /// The mean of the known scores: neither favoured nor penalised (the default).
    #[default]
    Neutral,
    /// Zero: nodes without fresh telemetry come last.
    Zero,
}

/// How the verbs treat telemetry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// Age beyond which a metric is unknown.
    pub stale_after: Duration,
    /// What an unknown metric counts as in filter.
    pub unknown: Unknown,
    /// What an unknown node scores in prioritize.
    pub unknown_score: UnknownScore,
    /// How rewards score, blend and filter.
    pub rewards: RewardSettings,
    /// How preempt treats scavenger victims.
    pub scavenger_victims: ScavengerVictims,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            stale_after: Duration::from_secs(45),
            unknown: Unknown::NotViolating,
            unknown_score: UnknownScore::Neutral,
            rewards: RewardSettings::default(),
            scavenger_victims: ScavengerVictims::default(),
        }
    }
}

/// How the extender uses rewards.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RewardSettings {
    /// Decay, cap and exploration of the estimates.
    pub model: RewardModel,
    /// The reward score's share of a blended prioritize score, 0..=1 (the telemetry score has
    /// the rest).
    pub weight: f64,
    /// When set, filter drops the nodes whose reward for the pod's type is confidently below
    /// this (0..=1).
    pub floor: Option<f64>,
}

impl Default for RewardSettings {
    fn default() -> Self {
        Self {
            model: RewardModel::default(),
            weight: 0.5,
            floor: None,
        }
    }
}
