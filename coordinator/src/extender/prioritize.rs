//! prioritize: a pod's `scheduleonmetric` rule scored by magnitude across the candidates
//! (`policy::score`), 0..=10, never negative, equal values equal scores. Pure. The blend with
//! rewards is in [`super::reward`], applied by [`super::Extender::prioritize`].

use telemesh_core::policy::Rule;
use telemesh_core::policy::score::{self, MAX_SCORE};
use telemesh_core::policy::{Metrics, Reading};

use super::parse::Candidates;
use super::settings::{Settings, UnknownScore};
use crate::view::{EntryReadings, NodeEntry, Snapshot, reading_of};

/// Scores every candidate for `rule` at `now_ms`; unknown nodes (stale, missing, or not in the
/// view) get what `settings.unknown_score` says.
pub fn prioritize(
    view: &Snapshot,
    rule: &Rule,
    candidates: &Candidates<'_>,
    settings: &Settings,
    now_ms: u64,
) -> Vec<u8> {
    let entries = view.entries_of(candidates);
    prioritize_entries(&entries, rule, settings, now_ms)
}

/// [`prioritize`] for candidates already looked up in the view (`None`: not in it).
pub fn prioritize_entries(
    entries: &[Option<&NodeEntry>],
    rule: &Rule,
    settings: &Settings,
    now_ms: u64,
) -> Vec<u8> {
    let stale_after_ms = stale_after_ms(settings);
    let readings: Vec<Reading> = entries
        .iter()
        .map(|entry| {
            EntryReadings {
                entry: *entry,
                now_ms,
                stale_after_ms,
            }
            .reading(&rule.metric)
        })
        .collect();
    scores_of(rule, &readings, settings)
}

/// [`prioritize`] for candidates at `positions` in `view` ([`Snapshot::locate`]): the rule's
/// metric read from its column, with no lookup per node.
pub fn prioritize_located(
    view: &Snapshot,
    positions: &[Option<u32>],
    rule: &Rule,
    settings: &Settings,
    now_ms: u64,
) -> Vec<u8> {
    let stale_after_ms = stale_after_ms(settings);
    let column = view.metric_column(&rule.metric);
    let readings: Vec<Reading> = positions
        .iter()
        .map(|pos| {
            reading_of(
                pos.and_then(|p| column.get(p).flatten()),
                now_ms,
                stale_after_ms,
            )
        })
        .collect();
    scores_of(rule, &readings, settings)
}

fn stale_after_ms(settings: &Settings) -> u64 {
    u64::try_from(settings.stale_after.as_millis()).unwrap_or(u64::MAX)
}

/// The scores of `readings`, unknown ones as `settings.unknown_score` says.
fn scores_of(rule: &Rule, readings: &[Reading], settings: &Settings) -> Vec<u8> {
    let known = score::scores(rule, readings);
    let unknown = match settings.unknown_score {
        UnknownScore::Neutral => score::neutral(&known),
        UnknownScore::Zero => 0,
    };
    known
        .into_iter()
        .map(|s| s.unwrap_or(unknown).min(MAX_SCORE))
        .collect()
}
