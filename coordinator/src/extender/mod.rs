//! The scheduler extender: filter, prioritize and preempt answered from the [`ClusterView`] and
//! the [`PolicyCache`], with no API call and no other replica-local state, so every replica
//! gives the same answer to the same request.
//!
//! - [`parse`]: one-pass, borrowing request parsing (nodes stay raw JSON);
//! - [`filter`], [`prioritize`], [`preempt`], [`reward`]: the decisions, pure;
//! - [`unsaved`]: preempt's victim ranker, sparing scavenger pods with the most unsaved work;
//! - [`pods`]: every replica's watch of scavenger pods, which the ranker swaps only to;
//! - this module: a request body in, a reply body out ([`Extender`]);
//! - [`http`]: the HTTP(S) server around it.
//!
//! Pods without a `telemetry-policy` label (or whose policy this replica does not know, or whose
//! policy has no strategy for the verb) and without reward history pass through untouched
//! (filter keeps every candidate, prioritize answers `[]`) before any node is looked at: "no
//! reward history" is one lookup of the pod's type in the snapshot's set of known types, and
//! no lookup at all while no node reports any reward.
//!
//! Prioritize with rewards: each candidate's reward score `r = round(10 × model.score)` (10 for
//! a node without an estimate for the type); with a scheduleonmetric rule as well, the reply is
//! `round((1 − w) · telemetry + w · r)` with `w = --reward-weight`, else `r` alone.

pub mod decisions;
pub mod filter;
pub mod folded;
pub mod http;
pub mod parse;
pub mod pods;
pub mod preempt;
pub mod prioritize;
pub mod reasons;
pub mod reward;
pub mod settings;
pub mod unsaved;

use std::collections::BTreeSet;
use std::sync::Arc;

use telemesh_core::extender::{ExtenderFilterResult, ExtenderPreemptionArgs};
use telemesh_core::policy::{Policy, RuleSet};

use self::filter::FilterDecision;
use self::folded::Verdicts;
use self::parse::{Candidates, NodeName, ParseError};
use self::pods::ScavengerPods;
use self::preempt::{KeepVictims, RankEffect, VictimRanker};
pub use self::settings::{Settings, UnknownScore};
use self::unsaved::{ScavengerVictims, UnsavedWork};
use crate::actions::placements::Placements;
use crate::metrics::{Outcome, RewardEffect};
use crate::policies::PolicyCache;
use crate::view::{ClusterView, Snapshot};

/// What [`Extender::refuse`] decided, with what it means for metrics.
struct Refused {
    decision: FilterDecision,
    outcome: Outcome,
    reward: Option<RewardEffect>,
}

/// A reply: HTTP status and JSON body (never empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// 200, or 400 for a malformed body.
    pub status: u16,
    /// JSON.
    pub body: Vec<u8>,
}

/// A handled call: the reply and what was decided, for metrics.
#[derive(Debug, Clone)]
pub struct Handled {
    /// The reply.
    pub reply: Reply,
    /// The decision.
    pub outcome: Outcome,
    /// Filter only: candidates kept and removed.
    pub passed: usize,
    /// Filter only: candidates removed.
    pub failed: usize,
    /// Whether rewards applied to the call, and what they did.
    pub reward: Option<RewardEffect>,
    /// Preempt only: what the victim ranker changed.
    pub ranked: Option<RankEffect>,
}

impl Handled {
    fn new(reply: Reply, outcome: Outcome) -> Self {
        Self {
            reply,
            outcome,
            passed: 0,
            failed: 0,
            reward: None,
            ranked: None,
        }
    }
}

/// The extender: view, policies, settings and hooks.
#[derive(Clone)]
pub struct Extender {
    /// Node state.
    pub view: ClusterView,
    /// Policies.
    pub policies: PolicyCache,
    /// Telemetry and reward treatment.
    pub settings: Settings,
    /// How preempt ranks victims (`settings.scavenger_victims`).
    pub victims: Arc<dyn VictimRanker>,
    /// Placements workload actions ask for.
    pub placements: Placements,
    /// Recent answers, for the live page.
    pub decisions: decisions::Decisions,
}

impl std::fmt::Debug for Extender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extender")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

// === impl Extender ===

impl Extender {
    /// An extender ranking preemption victims as `settings.scavenger_victims` says, with no
    /// watch of scavenger pods yet ([`Self::with_scavenger_pods`]): until it has one, the
    /// ranking swaps no victim.
    pub fn new(view: ClusterView, policies: PolicyCache, settings: Settings) -> Self {
        let victims = ranker(&view, &settings, ScavengerPods::default());
        Self {
            view,
            policies,
            settings,
            victims,
            placements: Placements::default(),
            decisions: decisions::Decisions::default(),
        }
    }

    /// The extender with `pods` (this replica's watch of scavenger pods) for the victim
    /// ranking to check substitutes against.
    #[must_use]
    pub fn with_scavenger_pods(mut self, pods: ScavengerPods) -> Self {
        self.victims = ranker(&self.view, &self.settings, pods);
        self
    }

    /// The pod's type if some node has an estimate for it; `None` without computing the type
    /// while no node reports any reward.
    fn rewarded_type(&self, view: &Snapshot, pod: &parse::PodInfo<'_>) -> Option<String> {
        if view.has_no_rewards() {
            return None;
        }
        let pod_type = pod.pod_type();
        view.has_reward_type(&pod_type).then_some(pod_type)
    }

    /// `policy`'s dontschedule `rules` folded into `view` ([`folded`]): kept with the snapshot
    /// and folded again for each publication while calls ask for them.
    fn verdicts(&self, view: &Snapshot, policy: &Policy, rules: &RuleSet) -> Arc<Verdicts> {
        let unknown = self.settings.unknown;
        let stale_after_ms =
            u64::try_from(self.settings.stale_after.as_millis()).unwrap_or(u64::MAX);
        let fits = |v: &Verdicts| {
            v.rules == *rules && v.unknown == unknown && v.stale_after_ms == stale_after_ms
        };
        view.derived(&policy.key(), fits, || {
            let (policy, rules, clock) = (policy.clone(), rules.clone(), self.view.clock().clone());
            move |s: &Snapshot| {
                Verdicts::fold(s, &policy, &rules, unknown, stale_after_ms, clock.now_ms())
            }
        })
    }

    /// Answers a filter body.
    pub fn filter(&self, body: &[u8]) -> Handled {
        let args = match parse::parse_args(body) {
            Ok(args) => args,
            Err(e) => return Handled::new(filter_error(&e), Outcome::Malformed),
        };
        let Refused {
            decision,
            outcome,
            reward,
        } = self.refuse(&args.pod, &args.candidates);
        let (passed, failed) = (decision.passed.len(), decision.failed.len());
        if self.decisions.wants(failed > 0) {
            self.decisions.record(decisions::filter(
                self.view.now_ms(),
                &args.pod,
                &args.candidates,
                &decision,
            ));
        }
        if failed > 0 {
            tracing::debug!(
                pod.namespace = %args.pod.namespace, pod.name = %args.pod.name,
                passed, failed, "filter removed nodes"
            );
        }
        Handled {
            reply: Reply {
                status: 200,
                body: encode_filter(body, &args.candidates, &decision),
            },
            outcome,
            passed,
            failed,
            reward,
            ranked: None,
        }
    }

    /// Which of `candidates` the pod's policy (dontschedule) and the reward floor refuse: the
    /// filter's answer, and the nodes preempt takes out of the candidates.
    fn refuse(&self, pod: &parse::PodInfo<'_>, candidates: &Candidates<'_>) -> Refused {
        let policies = self.policies.load();
        let (policy, outcome) = self.policy_of(pod, &policies);
        let rules = policy.and_then(|p| p.dont_schedule.as_ref().map(|r| (p, r)));
        let floor = self.settings.rewards.floor;
        let view = (rules.is_some() || floor.is_some()).then(|| self.view.load());
        // Each candidate's position in the snapshot, found once for rules and floor alike.
        let positions = view
            .as_ref()
            .map(|view| view.locate((0..candidates.len()).map(|i| candidates.name(i))));
        let now_ms = self.view.now_ms();
        let mut decision = match (rules, &view, &positions) {
            (Some((policy, rules)), Some(view), Some(positions)) => {
                let verdicts = self.verdicts(view, policy, rules);
                let settings = &self.settings;
                filter::filter_located(view, positions, &verdicts, policy, rules, settings, now_ms)
            }
            _ => FilterDecision {
                passed: (0..candidates.len()).collect(),
                failed: Vec::new(),
            },
        };
        let mut reward = None;
        if let (Some(floor), Some(view), Some(positions)) = (floor, &view, &positions)
            && let Some(pod_type) = self.rewarded_type(view, pod)
        {
            let (applied, dropped) = reward::apply_floor_located(
                view,
                positions,
                &pod_type,
                floor,
                &self.settings.rewards.model,
                candidates,
                &mut decision,
                now_ms,
            );
            reward = applied.then_some(if dropped > 0 {
                RewardEffect::Changed
            } else {
                RewardEffect::Unchanged
            });
        }
        let outcome = match (outcome, rules) {
            (Outcome::Evaluated, None) => Outcome::NoStrategy,
            (o, _) => o,
        };
        if !self.placements.is_empty()
            && let Some(steer) = self.placements.steer(&pod.facts())
        {
            filter::apply_placement(candidates, &mut decision, &steer.action, &steer.node);
        }
        Refused {
            decision,
            outcome,
            reward,
        }
    }

    /// Answers a prioritize body.
    pub fn prioritize(&self, body: &[u8]) -> Handled {
        let args = match parse::parse_args(body) {
            Ok(args) => args,
            Err(e) => return Handled::new(error_object(&e.to_string()), Outcome::Malformed),
        };
        let policies = self.policies.load();
        let (policy, outcome) = self.policy_of(&args.pod, &policies);
        let rule = policy.and_then(|p| p.schedule_on_metric.as_ref());
        let outcome = match (outcome, rule) {
            (Outcome::Evaluated, None) => Outcome::NoStrategy,
            (o, _) => o,
        };
        let view = self.view.load();
        let now_ms = self.view.now_ms();
        let pod_type = self.rewarded_type(&view, &args.pod);
        if rule.is_none() && pod_type.is_none() {
            return Handled::new(ok(b"[]".to_vec()), outcome);
        }
        // Each candidate located once, for telemetry and rewards alike.
        let candidates = &args.candidates;
        let positions = view.locate((0..candidates.len()).map(|i| candidates.name(i)));
        let rewards = pod_type.and_then(|pod_type| {
            let column = view.reward_column(&pod_type);
            reward::scores_located(&positions, &column, &self.settings.rewards.model, now_ms)
        });
        let telemetry = rule.map(|rule| {
            prioritize::prioritize_located(&view, &positions, rule, &self.settings, now_ms)
        });
        let (scores, effect) = match (telemetry, rewards) {
            (None, None) => return Handled::new(ok(b"[]".to_vec()), outcome),
            (Some(telemetry), None) => (telemetry, None),
            (None, Some(rewards)) => {
                let changed = reward::best_changed(None, &rewards);
                (rewards, Some(changed))
            }
            (Some(telemetry), Some(rewards)) => {
                let w = self.settings.rewards.weight;
                let blended: Vec<u8> = telemetry
                    .iter()
                    .zip(&rewards)
                    .map(|(t, r)| reward::blend(*t, *r, w))
                    .collect();
                let changed = reward::best_changed(Some(&telemetry), &blended);
                (blended, Some(changed))
            }
        };
        if self.decisions.wants(false) {
            self.decisions.record(decisions::prioritize(
                now_ms,
                &args.pod,
                &args.candidates,
                &scores,
                effect.is_some(),
            ));
        }
        let mut handled = Handled::new(ok(encode_priorities(&args.candidates, &scores)), outcome);
        handled.reward = effect.map(|changed| {
            if changed {
                RewardEffect::Changed
            } else {
                RewardEffect::Unchanged
            }
        });
        handled
    }

    /// Answers a preempt body: the scheduler's candidates without the nodes the pod's policy
    /// refuses (as filter would), then the victim ranker's say ([`unsaved`]).
    pub fn preempt(&self, body: &[u8]) -> Handled {
        let args: ExtenderPreemptionArgs = match serde_json::from_slice(body) {
            Ok(args) => args,
            Err(e) => {
                return Handled::new(
                    error_object(&format!(
                        "malformed ExtenderPreemptionArgs body: {e}; send the JSON kube-scheduler sends"
                    )),
                    Outcome::Malformed,
                );
            }
        };
        let pod = args
            .pod
            .as_ref()
            .map(parse::PodInfo::of)
            .unwrap_or_default();
        let candidates = Candidates::Names(
            preempt::candidate_nodes(&args)
                .map(|name| NodeName::Decoded(std::borrow::Cow::Borrowed(name)))
                .collect(),
        );
        let Refused {
            decision, outcome, ..
        } = self.refuse(&pod, &candidates);
        // Every refusal is unresolvable by preemption (`filter`'s module docs).
        let refused: BTreeSet<&str> = decision
            .failed
            .iter()
            .map(|(i, _)| candidates.name(*i))
            .collect();
        if !refused.is_empty() {
            tracing::debug!(
                pod.namespace = %pod.namespace, pod.name = %pod.name,
                refused = refused.len(), "preempt dropped candidate nodes the pod's policy refuses"
            );
        }
        let (result, effect) = preempt::preempt(&args, &refused, &*self.victims);
        if self.decisions.wants(true) {
            let victims = result
                .node_name_to_meta_victims
                .iter()
                .flatten()
                .map(|(node, v)| (node.clone(), v.pods.len()));
            self.decisions.record(decisions::preempt(
                self.view.now_ms(),
                &pod,
                refused.len(),
                victims,
            ));
        }
        match serde_json::to_vec(&result) {
            Ok(body) => {
                let mut handled = Handled::new(ok(body), outcome);
                handled.ranked = Some(effect);
                handled
            }
            Err(e) => Handled::new(
                error_object(&format!("cannot encode the preemption result: {e}")),
                Outcome::Malformed,
            ),
        }
    }

    /// The pod's policy, or why there is none.
    fn policy_of<'p>(
        &self,
        pod: &parse::PodInfo<'_>,
        policies: &'p crate::policies::PolicySet,
    ) -> (Option<&'p Policy>, Outcome) {
        let Some(name) = pod.policy.as_deref() else {
            return (None, Outcome::NoPolicy);
        };
        let namespace = match &*pod.namespace {
            "" => "default",
            ns => ns,
        };
        match policies.get(namespace, name) {
            Some(p) => (Some(p), Outcome::Evaluated),
            None => {
                tracing::debug!(
                    pod.namespace = %namespace, pod.name = %pod.name, policy.name = %name,
                    "pod names a TASPolicy this replica does not know; passing it through"
                );
                (None, Outcome::PolicyNotFound)
            }
        }
    }
}

fn ok(body: Vec<u8>) -> Reply {
    Reply { status: 200, body }
}

/// A filter reply that fails the call: `Error` set, every other field empty.
fn filter_error(e: &ParseError) -> Reply {
    let body = serde_json::to_vec(&ExtenderFilterResult::error(e.to_string()))
        .unwrap_or_else(|_| br#"{"Error":"malformed request"}"#.to_vec());
    Reply { status: 400, body }
}

/// `{"Error": message}`: the error reply of verbs whose result has no `Error` field.
pub fn error_object(message: &str) -> Reply {
    let body = serde_json::to_vec(&serde_json::json!({ "Error": message }))
        .unwrap_or_else(|_| br#"{"Error":"malformed request"}"#.to_vec());
    Reply { status: 400, body }
}

/// Writes `s` as a JSON string. Node names and reasons seldom need escaping: those that do not
/// (no quote, backslash or control character) are copied in one go.
fn push_str(out: &mut Vec<u8>, s: &str) {
    // A fold, not `all`: no early exit, so the check runs many bytes per instruction.
    let plain = s
        .bytes()
        .fold(true, |ok, b| ok & (b >= 0x20) & (b != b'"') & (b != b'\\'));
    if plain {
        push_quoted(out, s);
        return;
    }
    // Writing a &str to a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// Writes `"s"`: `s` must need no escaping.
#[inline]
fn push_quoted(out: &mut Vec<u8>, s: &str) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    out.extend_from_slice(s.as_bytes());
    out.push(b'"');
}

/// Writes the `i`th candidate's name as a JSON string: one copy, without looking at its bytes,
/// when the body had it verbatim.
#[inline]
fn push_candidate(out: &mut Vec<u8>, candidates: &Candidates<'_>, i: usize) {
    match candidates {
        Candidates::Names(names) => match &names[i] {
            NodeName::Verbatim(s) => push_quoted(out, s),
            NodeName::Decoded(s) => push_str(out, s),
        },
        Candidates::Nodes(nodes) => push_str(out, &nodes[i].name),
    }
}

/// Writes an `ExtenderFilterResult` in the request's mode: raw Node objects echoed back in
/// full-node mode, names with nodeCacheCapable. `body` is the request the candidates were read
/// from: kept names that lie side by side in it are copied back from it in one run.
fn encode_filter(body: &[u8], candidates: &Candidates<'_>, decision: &FilterDecision) -> Vec<u8> {
    let mut out = Vec::with_capacity(match candidates {
        // The kept names are at most the body's, each reason about a hundred bytes.
        Candidates::Names(_) => 128 + body.len() + 128 * decision.failed.len(),
        Candidates::Nodes(n) => 128 + n.iter().map(|r| r.raw.get().len() + 1).sum::<usize>(),
    });
    match candidates {
        Candidates::Names(names) => {
            out.extend_from_slice(br#"{"Nodes":null,"NodeNames":["#);
            push_kept_names(&mut out, body, names, &decision.passed);
            out.extend_from_slice(b"]");
        }
        Candidates::Nodes(nodes) => {
            out.extend_from_slice(br#"{"Nodes":{"metadata":{},"items":["#);
            for (k, &i) in decision.passed.iter().enumerate() {
                if k > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(nodes[i].raw.get().as_bytes());
            }
            out.extend_from_slice(br#"]},"NodeNames":null"#);
        }
    }
    // No refusal is one preemption could resolve (`filter`'s module docs): all go in
    // FailedAndUnresolvableNodes, so kube-scheduler never preempts on them.
    out.extend_from_slice(br#","FailedNodes":{},"FailedAndUnresolvableNodes":{"#);
    push_failed(&mut out, candidates, decision);
    out.extend_from_slice(br#"},"Error":""}"#);
    out
}

/// Writes the names at `kept` (indices into `names`, ascending) as JSON array elements. A run
/// of neighbours the body holds verbatim, one after the other in its `NodeNames` array, is
/// copied from the body in one piece, separators and all: what lies between two elements of a
/// JSON array is a comma and whitespace, so the piece is itself valid elements. When the filter
/// keeps every node that is the whole array in one copy, instead of a copy per name.
fn push_kept_names(out: &mut Vec<u8>, body: &[u8], names: &[NodeName<'_>], kept: &[usize]) {
    let span = |i: usize| match &names[i] {
        NodeName::Verbatim(s) => quoted_span(body, s),
        NodeName::Decoded(_) => None,
    };
    let mut k = 0;
    while k < kept.len() {
        if k > 0 {
            out.push(b',');
        }
        let Some(first) = span(kept[k]) else {
            push_str(out, &names[kept[k]]);
            k += 1;
            continue;
        };
        let mut end = first.end;
        k += 1;
        while k < kept.len() && kept[k] == kept[k - 1] + 1 {
            match span(kept[k]) {
                Some(next) if next.start >= end && only_separators(&body[end..next.start]) => {
                    end = next.end;
                    k += 1;
                }
                _ => break,
            }
        }
        out.extend_from_slice(&body[first.start..end]);
    }
}

/// Where `name`, borrowed from `body`, lies in it with its quotes; `None` when it is not a
/// quoted piece of `body`.
fn quoted_span(body: &[u8], name: &str) -> Option<std::ops::Range<usize>> {
    let start = (name.as_ptr() as usize).checked_sub(body.as_ptr() as usize)?;
    let end = start.checked_add(name.len())?;
    let quoted = start >= 1 && body.get(start - 1) == Some(&b'"') && body.get(end) == Some(&b'"');
    quoted.then(|| start - 1..end + 1)
}

/// Whether `between` (the bytes from one array element to the next) is one comma and JSON
/// whitespace.
fn only_separators(between: &[u8]) -> bool {
    between.iter().filter(|&&b| b == b',').count() == 1
        && between
            .iter()
            .all(|b| matches!(b, b',' | b' ' | b'\n' | b'\r' | b'\t'))
}

/// The victim ranker `settings.scavenger_victims` asks for.
fn ranker(view: &ClusterView, settings: &Settings, pods: ScavengerPods) -> Arc<dyn VictimRanker> {
    match settings.scavenger_victims {
        ScavengerVictims::Unsaved => Arc::new(UnsavedWork {
            view: view.clone(),
            stale_after: settings.stale_after,
            pods,
        }),
        ScavengerVictims::Scheduler => Arc::new(KeepVictims),
    }
}

/// Writes the `"node":"reason"` pairs of the refusals.
fn push_failed(out: &mut Vec<u8>, candidates: &Candidates<'_>, decision: &FilterDecision) {
    for (k, (i, reason)) in decision.failed.iter().enumerate() {
        if k > 0 {
            out.push(b',');
        }
        push_candidate(out, candidates, *i);
        out.push(b':');
        push_str(out, reason);
    }
}

/// Writes a `HostPriorityList`.
fn encode_priorities(candidates: &Candidates<'_>, scores: &[u8]) -> Vec<u8> {
    // Each entry is its name's JSON and 21 bytes more.
    let names: usize = (0..candidates.len())
        .map(|i| candidates.name(i).len() + 2)
        .sum();
    let mut out = Vec::with_capacity(2 + names + scores.len() * 21);
    out.push(b'[');
    for (i, score) in scores.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(br#"{"Host":"#);
        push_candidate(&mut out, candidates, i);
        out.extend_from_slice(br#","Score":"#);
        // Scores are 0..=10.
        match *score {
            s @ 0..=9 => out.push(b'0' + s),
            _ => out.extend_from_slice(b"10"),
        }
        out.push(b'}');
    }
    out.push(b']');
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
