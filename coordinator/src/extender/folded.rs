//! Filter verdicts folded into the view: a policy's dontschedule rules evaluated on every node
//! of a snapshot once, off the request path ([`Snapshot::derived`]: built by the updater for
//! each publication while requests ask for them), so a filter call reads one word per
//! candidate instead of evaluating the rules on it.
//!
//! A verdict depends on the clock only through staleness: a reading fresh when folded stays
//! fresh until its stamp plus `stale_after`, and one stale then stays stale. So each node's
//! verdict is kept with the last millisecond it holds until (the earliest expiry of a fresh
//! reading it rests on); a call at a time outside that window, or before the fold, evaluates
//! the node itself, as before there were folds. Answers are the same either way
//! (`folded_verdicts_are_the_rules_at_any_time`).

use std::sync::Arc;

use telemesh_core::policy::{Policy, RuleSet, Unknown};

use super::reasons::Reasons;
use crate::view::{ColumnReadings, MetricColumn, Snapshot};

/// The top bit of a folded word: refused.
const REFUSED: u64 = 1 << 63;

/// The rest: the last millisecond the verdict holds.
const UNTIL: u64 = REFUSED - 1;

/// A policy's dontschedule verdict on every node of one snapshot, by position.
#[derive(Debug)]
pub struct Verdicts {
    /// What they were folded from: a request whose policy differs folds anew.
    pub rules: RuleSet,
    /// How unknown metrics counted.
    pub unknown: Unknown,
    /// Age past which a value was unknown, ms.
    pub stale_after_ms: u64,
    /// When they were folded (cluster clock, Unix ms): they hold from then on.
    folded_at_ms: u64,
    /// Per position: [`REFUSED`], and [`UNTIL`] when that stops holding.
    words: Box<[u64]>,
    /// Per position, for refused nodes: the reason the filter gives, written once.
    reasons: Box<[Option<Arc<str>>]>,
}

impl Verdicts {
    /// Evaluates `policy`'s dontschedule `rules` on every node of `view` at `now_ms`.
    pub fn fold(
        view: &Snapshot,
        policy: &Policy,
        rules: &RuleSet,
        unknown: Unknown,
        stale_after_ms: u64,
        now_ms: u64,
    ) -> Self {
        let columns = columns_of(view, rules);
        let n = view.len();
        let mut words = Vec::with_capacity(n);
        let mut reasons = Vec::with_capacity(n);
        let mut writer: Option<Reasons> = None;
        for pos in 0..n {
            let Ok(pos) = u32::try_from(pos) else { break };
            let readings = ColumnReadings {
                columns: &columns,
                pos: Some(pos),
                now_ms,
                stale_after_ms,
            };
            // A fresh reading stops being fresh after its stamp plus `stale_after`; a stale or
            // missing one stays as it is.
            let until = columns
                .iter()
                .filter_map(|(_, c)| c.get(pos).flatten())
                .filter(|v| now_ms.saturating_sub(v.measured_at_ms) <= stale_after_ms)
                .map(|v| v.measured_at_ms.saturating_add(stale_after_ms))
                .min()
                .unwrap_or(UNTIL)
                .min(UNTIL);
            if rules.violated(&readings, unknown) {
                let writer = writer.get_or_insert_with(|| Reasons::new(policy, rules));
                words.push(REFUSED | until);
                reasons.push(Some(Arc::from(writer.reason(rules, &readings, unknown))));
            } else {
                words.push(until);
                reasons.push(None);
            }
        }
        Self {
            rules: rules.clone(),
            unknown,
            stale_after_ms,
            folded_at_ms: now_ms,
            words: words.into(),
            reasons: reasons.into(),
        }
    }

    /// The verdict on the node at `pos` at `now_ms`: `Some(None)` kept, `Some(Some(reason))`
    /// refused, `None` when the fold does not cover that time (the caller evaluates).
    #[inline]
    pub fn at(&self, pos: u32, now_ms: u64) -> Option<Option<&Arc<str>>> {
        let word = *self.words.get(pos as usize)?;
        if now_ms < self.folded_at_ms || now_ms > word & UNTIL {
            return None;
        }
        Some(if word & REFUSED == 0 {
            None
        } else {
            self.reasons.get(pos as usize)?.as_ref()
        })
    }
}

/// The columns of the metrics `rules` read.
pub fn columns_of<'r>(view: &Snapshot, rules: &'r RuleSet) -> Vec<(&'r str, Arc<MetricColumn>)> {
    rules
        .rules
        .iter()
        .map(|r| (r.metric.as_str(), view.metric_column(&r.metric)))
        .collect()
}
