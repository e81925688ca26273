//! Preemption victims ranked by the work they would lose: the extender's half of "waste the
//! least work" (the agents' pressure evictions are the other half). Pure: the caller reads the
//! scheduler's victims and the gossip view, and sends the answer.
//!
//! **Loss.** All pods of a ScavengerJob are interrupted together, so evicting any one of them
//! loses its whole job's unsaved work: Σ over the job's pods (every node) of unsaved time ×
//! CPU cores ([`pod_loss`], [`job_losses`]), in core-microseconds ([`Loss`]) so sums and ties
//! are exact.
//!
//! **Per node** ([`rank_node`]). kube-scheduler sends, per candidate node, the victims its
//! `SelectVictimsOnNode` chose. Those that are not scavengers the view knows are kept as they
//! are; the known scavenger victims may be replaced by another set of scavenger pods of the
//! same node that frees at least as much CPU and memory, and at least one pod slot, as they did
//! ([`Need`]). Without the node's free room (only the scheduler's cache knows it exactly) this
//! is the rule that is safe whatever that room is: after the swap, every resource the pod
//! could need from these pods is at least as free as with the scheduler's own choice, and the
//! scheduler does not re-check the fit after an extender's answer. (A node never holds more
//! pods than its limit, so the incoming pod needs at most one freed slot.) Scavenger pods carry
//! only CPU and memory requests in gossip; extended resources, host ports or affinity that
//! made the scheduler pick a particular scavenger are not seen here: the controller creates
//! scavenger pods from a ScavengerJob's CPU and memory requests, without host ports, so the
//! rule holds for them. The set with the least loss wins (jobs already hit by the kept victims
//! cost nothing more), then the fewest pods; the scheduler's own set wins ties, so an answer
//! never loses more than the scheduler's choice.
//!
//! The search is a greedy over the node's jobs (best coverage of the remaining need per unit
//! of loss, free jobs first), then a pruning pass (drop the dearest jobs, then the smallest
//! pods, while the rest still covers the need), compared with the best single job and with the
//! scheduler's set. It runs on kube-scheduler's hot path for every candidate node, so it is
//! O(jobs² + pods·log pods) per node instead of the exponential exact search: a node holds a
//! handful of scavenger pods, one job alone usually covers the need (the pruned best single
//! job is then exactly optimal), and the brute-force comparison in the tests bounds how often
//! and by how much the greedy misses the optimum on random small cases.
//!
//! **Pods on their way out** ([`Standing`]). Gossip tells each pod's unsaved work, but learns
//! that a pod left only after its agent's next look and a gossip round (seconds in production),
//! while kube-scheduler preempts for a batch of pending pods within milliseconds of each other.
//! A swap must never name a pod that is already going: kube-scheduler answers a UID it no
//! longer holds with "the pod is not found on that node", drops the extender's whole answer and,
//! with `ignorable: true`, falls back to its own victims on every candidate node, including the
//! ones this ranking dropped; a pod still terminating would be "preempted" again, freeing room
//! already promised to the pod nominated before. So swaps name only pods the API server (the
//! caller's watch) holds as staying, and none when the caller cannot say. A ScavengerJob with a
//! pod on its way out is interrupted already (the controller deletes the rest of the run): its
//! work since the checkpoint is lost whatever happens, so hitting it again costs nothing.
//!
//! **Across nodes** ([`drop_dearer_nodes`]). Among candidate nodes whose victims are all
//! scavengers the view knows ("priced"), the ones whose `(PDB violations, loss)` is above the
//! least are dropped (ties kept): kube-scheduler's `pickOneNodeForPreemption` ranks fewest PDB
//! violations first, so comparing loss only at equal PDB violations never overrides it. Nodes
//! with other victims are left to the scheduler's own criteria: when any all-scavenger node
//! remains, its highest victim priority ([`super::PRIORITY`], below every other workload) already
//! makes the scheduler prefer it (second criterion, after PDB violations), and dropping the
//! mixed nodes would only take away the scheduler's fallback where a PDB weighs more.

use std::collections::HashMap;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;

use super::controller::leaving;
use super::{JOB_LABEL, ScavengerPod, unsaved};

/// Work lost, in core-microseconds (CPU cores × microseconds of unsaved time, i.e. millicores
/// × milliseconds): exact integer sums, so equal losses tie exactly.
pub type Loss = u64;

/// Core-microseconds per core-second.
pub const LOSS_PER_CPU_SECOND: f64 = 1e6;

/// Converts a [`Loss`] to CPU-seconds.
pub fn cpu_seconds(loss: Loss) -> f64 {
    loss as f64 / LOSS_PER_CPU_SECOND
}

/// The unsaved work of one scavenger pod at `now`: time since its last checkpoint × its CPU
/// request. A checkpoint "in the future" (clock skew) counts as nothing unsaved.
pub fn pod_loss(pod: &ScavengerPod, now: SystemTime) -> Loss {
    let unsaved_ms = unsaved(pod.checkpoint(), now).as_millis();
    u64::try_from(unsaved_ms.saturating_mul(u128::from(pod.cpu_millis))).unwrap_or(Loss::MAX)
}

/// What evicting any pod of each job loses at `now`: the sum of [`pod_loss`] over the job's
/// pods, wherever they run. `pods` is every scavenger pod the caller knows of.
pub fn job_losses<'a>(
    pods: impl IntoIterator<Item = &'a ScavengerPod>,
    now: SystemTime,
) -> HashMap<&'a str, Loss> {
    let mut losses: HashMap<&'a str, Loss> = HashMap::new();
    for pod in pods {
        let slot = losses.entry(pod.job.as_str()).or_default();
        *slot = slot.saturating_add(pod_loss(pod, now));
    }
    losses
}

/// Scavenger pods as the API server holds them (the caller's pod watch, fresher than gossip):
/// which a swap may name, and which ScavengerJobs are being interrupted already (module docs).
/// Kept up to date one watch event at a time ([`Self::apply`], [`Self::remove`]), so a query
/// costs a hash lookup however many scavenger pods the cluster runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Standing {
    /// Every scavenger pod by UID: its ScavengerJob (`namespace/name`) and how it stands.
    pods: HashMap<String, (String, PodStanding)>,
    /// ScavengerJobs with pods [`PodStanding::Leaving`], and how many.
    leaving: HashMap<String, usize>,
}

/// How the API server holds one scavenger pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodStanding {
    /// Bound, unfinished and not [`leaving`]: a swap may name it.
    Staying,
    /// [`leaving`]: its run is interrupted, its job's unsaved work lost already.
    Leaving,
    /// Not bound yet, or finished: neither.
    Neither,
}

impl PodStanding {
    /// How `pod` stands.
    pub fn of(pod: &Pod) -> Self {
        if leaving(pod) {
            return Self::Leaving;
        }
        let bound = pod.spec.as_ref().is_some_and(|s| s.node_name.is_some());
        let finished = matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        );
        if bound && !finished {
            Self::Staying
        } else {
            Self::Neither
        }
    }
}

impl Standing {
    /// The standing of `pods` (pods not labelled [`JOB_LABEL`] are ignored).
    pub fn of<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> Self {
        let mut standing = Self::default();
        for pod in pods {
            standing.apply(pod);
        }
        standing
    }

    /// Records `pod` as it is now (added or changed); a pod without a UID or not labelled
    /// [`JOB_LABEL`] is ignored.
    pub fn apply(&mut self, pod: &Pod) {
        let (Some(uid), Some(job)) = (pod.uid(), pod.labels().get(JOB_LABEL)) else {
            return;
        };
        let job = format!("{}/{job}", pod.namespace().unwrap_or_default());
        let now = PodStanding::of(pod);
        if let Some((old_job, was)) = self.pods.insert(uid, (job.clone(), now)) {
            self.forget(&old_job, was);
        }
        if now == PodStanding::Leaving {
            *self.leaving.entry(job).or_default() += 1;
        }
    }

    /// Forgets `pod` (deleted).
    pub fn remove(&mut self, pod: &Pod) {
        if let Some((job, was)) = pod.uid().and_then(|uid| self.pods.remove(&uid)) {
            self.forget(&job, was);
        }
    }

    fn forget(&mut self, job: &str, was: PodStanding) {
        if was != PodStanding::Leaving {
            return;
        }
        if let Some(n) = self.leaving.get_mut(job) {
            *n -= 1;
            if *n == 0 {
                self.leaving.remove(job);
            }
        }
    }

    /// Whether a swap may name the pod `uid`: the API server holds it as staying.
    pub fn may_name(&self, uid: &str) -> bool {
        matches!(self.pods.get(uid), Some((_, PodStanding::Staying)))
    }

    /// Whether `job` (`namespace/name`) has a pod leaving: its run is interrupted already.
    pub fn interrupted(&self, job: &str) -> bool {
        self.leaving.contains_key(job)
    }

    /// `loss`, the loss of `job` by gossip, or nothing when the job is interrupted already.
    pub fn loss(&self, job: &str, loss: Loss) -> Loss {
        if self.interrupted(job) { 0 } else { loss }
    }
}

/// One victim the scheduler chose on a node, as the ranking sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chosen<'a> {
    /// Not a scavenger, or a pod the view cannot tell: kept as the scheduler chose.
    Other,
    /// A scavenger pod the view knows on a node it trusts: may be swapped for others.
    Scavenger(&'a ScavengerPod),
    /// A scavenger pod (its labels say so) the view does not know, or knows only from a node
    /// it does not trust: kept as the scheduler chose; its job, when known, is hit anyway.
    UnknownScavenger {
        /// Its ScavengerJob, `namespace/name`, when its labels name it.
        job: Option<&'a str>,
    },
}

/// One candidate node: the scheduler's victims and the scavenger pods the node could give
/// instead.
#[derive(Debug, Clone, Default)]
pub struct NodeVictims<'a> {
    /// The scheduler's victims, `(uid, what it is)`, in its order.
    pub chosen: Vec<(&'a str, Chosen<'a>)>,
    /// Every scavenger pod on the node the view trusts, `(uid, pod)`: the pods a swap may name.
    /// Empty for a node whose gossip is not trusted.
    pub pool: Vec<(&'a str, &'a ScavengerPod)>,
}

/// What a set of scavenger victims frees, and so what a replacement must free.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Need {
    /// CPU, millicores.
    pub cpu_millis: u64,
    /// Memory, bytes.
    pub memory_bytes: u64,
    /// Pods (a replacement frees at least one when this is not zero).
    pub pods: usize,
}

impl Need {
    /// What `pods` free.
    pub fn of<'p>(pods: impl IntoIterator<Item = &'p ScavengerPod>) -> Self {
        pods.into_iter().fold(Self::default(), |n, p| Self {
            cpu_millis: n.cpu_millis.saturating_add(p.cpu_millis),
            memory_bytes: n.memory_bytes.saturating_add(p.memory_bytes),
            pods: n.pods + 1,
        })
    }

    /// Whether freeing `freed` frees at least this much of every resource, and a pod slot.
    pub fn met_by(&self, freed: &Need) -> bool {
        freed.cpu_millis >= self.cpu_millis
            && freed.memory_bytes >= self.memory_bytes
            && (self.pods == 0 || freed.pods > 0)
    }
}

/// One node's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ranked<'a> {
    /// The victims to send back, by uid: the scheduler's own list when nothing was swapped,
    /// else the kept ones in the scheduler's order, then the scavengers chosen.
    pub uids: Vec<&'a str>,
    /// The loss of these victims when every victim is a scavenger the view knows (the node is
    /// "priced"); `None` otherwise.
    pub loss: Option<Loss>,
    /// The loss of the scavenger victims the scheduler chose, and of those sent back instead
    /// (both counting jobs the kept victims hit as free): equal when nothing was swapped.
    pub scheduler_loss: Loss,
    /// See [`Self::scheduler_loss`].
    pub chosen_loss: Loss,
    /// How many of the scheduler's victims were swapped out (spared).
    pub spared: usize,
}

impl Ranked<'_> {
    /// Work the swap saved, core-microseconds.
    pub fn loss_avoided(&self) -> Loss {
        self.scheduler_loss.saturating_sub(self.chosen_loss)
    }
}

/// A job's pods on one node, as a unit of the search: taking any of them costs the job's loss.
#[derive(Debug)]
struct Unit<'a> {
    job: &'a str,
    cost: Loss,
    /// Indices into the pool.
    pods: Vec<usize>,
    freed: Need,
}

/// Ranks one node's victims (module docs): the answer's uids and what they lose. `loss_of`
/// gives a job's loss ([`job_losses`]); a job it does not know loses nothing.
pub fn rank_node<'a>(node: &NodeVictims<'a>, loss_of: &impl Fn(&str) -> Loss) -> Ranked<'a> {
    let mut kept: Vec<&'a str> = Vec::with_capacity(node.chosen.len());
    let mut known: Vec<(&'a str, &'a ScavengerPod)> = Vec::new();
    let mut hit: Vec<&'a str> = Vec::new();
    let mut priced = true;
    for &(uid, chosen) in &node.chosen {
        match chosen {
            Chosen::Other => {
                kept.push(uid);
                priced = false;
            }
            Chosen::UnknownScavenger { job } => {
                kept.push(uid);
                priced = false;
                hit.extend(job);
            }
            Chosen::Scavenger(pod) => known.push((uid, pod)),
        }
    }
    let set_loss = |pods: &mut dyn Iterator<Item = &'a ScavengerPod>| -> Loss {
        let mut jobs: Vec<&str> = Vec::new();
        for pod in pods {
            let job = pod.job.as_str();
            if !hit.contains(&job) && !jobs.contains(&job) {
                jobs.push(job);
            }
        }
        jobs.iter()
            .fold(0, |sum: Loss, job| sum.saturating_add(loss_of(job)))
    };
    let scheduler_loss = set_loss(&mut known.iter().map(|(_, p)| *p));
    let need = Need::of(known.iter().map(|(_, p)| *p));
    let mut answer = Ranked {
        uids: Vec::new(),
        loss: None,
        scheduler_loss,
        chosen_loss: scheduler_loss,
        spared: 0,
    };
    let mut chosen: Vec<&'a str> = known.iter().map(|(uid, _)| *uid).collect();
    // One victim that loses nothing cannot be bettered: skip the search.
    let unbeatable = scheduler_loss == 0 && known.len() == 1;
    if need.pods > 0 && !unbeatable {
        let better = cheapest_cover(&need, &node.pool, &hit, loss_of).filter(|pick| {
            let loss = set_loss(&mut pick.iter().map(|&i| node.pool[i].1));
            // Strictly better: less loss, or as little with fewer pods.
            (loss, pick.len()) < (scheduler_loss, known.len())
        });
        if let Some(pick) = better {
            let uids: Vec<&'a str> = pick.iter().map(|&i| node.pool[i].0).collect();
            answer.chosen_loss = set_loss(&mut pick.iter().map(|&i| node.pool[i].1));
            answer.spared = chosen.iter().filter(|uid| !uids.contains(uid)).count();
            chosen = uids;
        }
    }
    answer.loss = priced.then_some(answer.chosen_loss);
    if answer.chosen_loss == scheduler_loss && chosen.len() == known.len() {
        // Nothing better: the scheduler's answer exactly, in its order.
        answer.uids = node.chosen.iter().map(|(uid, _)| *uid).collect();
    } else {
        kept.extend(chosen);
        answer.uids = kept;
    }
    answer
}

/// The set of pool pods with the least loss (then the fewest pods) that meets `need`, by the
/// greedy, pruning and single-job search the module docs describe; `None` when none does.
fn cheapest_cover(
    need: &Need,
    pool: &[(&str, &ScavengerPod)],
    hit: &[&str],
    loss_of: &impl Fn(&str) -> Loss,
) -> Option<Vec<usize>> {
    let mut units: Vec<Unit<'_>> = Vec::new();
    for (i, (_, pod)) in pool.iter().enumerate() {
        let job = pod.job.as_str();
        let unit = match units.iter_mut().position(|u| u.job == job) {
            Some(k) => &mut units[k],
            None => {
                let cost = if hit.contains(&job) { 0 } else { loss_of(job) };
                units.push(Unit {
                    job,
                    cost,
                    pods: Vec::new(),
                    freed: Need::default(),
                });
                let last = units.len() - 1;
                &mut units[last]
            }
        };
        unit.pods.push(i);
        unit.freed = add(&unit.freed, &Need::of([*pod]));
    }
    // Ties between equal units go to the job named first, so the answer is deterministic.
    units.sort_by(|a, b| a.job.cmp(b.job));

    let consider = |best: &mut Option<(Loss, Vec<usize>)>, taken: Vec<usize>| {
        let pick = prune(need, pool, &units, taken);
        let loss = cost_of(&pick, pool, &units);
        let better = match best {
            None => true,
            Some((l, p)) => (loss, pick.len()) < (*l, p.len()),
        };
        if better {
            *best = Some((loss, pick));
        }
    };
    let mut best: Option<(Loss, Vec<usize>)> = None;
    if let Some(taken) = greedy(need, &units) {
        consider(&mut best, taken);
    }
    for (k, unit) in units.iter().enumerate() {
        // A unit dearer than the best so far cannot win, pruned or not.
        let dearer = best.as_ref().is_some_and(|(loss, _)| unit.cost > *loss);
        if !dearer && need.met_by(&unit.freed) {
            consider(&mut best, vec![k]);
        }
    }
    best.map(|(_, pick)| pick)
}

/// The units the greedy takes, in order; `None` when all of them together do not meet `need`.
fn greedy(need: &Need, units: &[Unit<'_>]) -> Option<Vec<usize>> {
    let mut taken: Vec<usize> = Vec::new();
    let mut freed = Need::default();
    while !need.met_by(&freed) {
        // (unit, coverage per unit of loss, coverage): free units first, then the most
        // coverage, then the fewest pods.
        let mut pick: Option<(usize, f64, f64)> = None;
        for (k, unit) in units.iter().enumerate() {
            if taken.contains(&k) {
                continue;
            }
            let cover = coverage(need, &freed, &unit.freed);
            if cover <= 0.0 {
                continue;
            }
            let value = if unit.cost == 0 {
                f64::INFINITY
            } else {
                cover / unit.cost as f64
            };
            let better = match pick {
                None => true,
                Some((j, v, c)) => {
                    value > v
                        || (value == v
                            && (cover > c || (cover == c && unit.pods.len() < units[j].pods.len())))
                }
            };
            if better {
                pick = Some((k, value, cover));
            }
        }
        let (k, _, _) = pick?;
        taken.push(k);
        freed = add(&freed, &units[k].freed);
    }
    Some(taken)
}

/// How much of what `need` still lacks (after `freed`) `more` provides, each resource as a
/// share of the need, the pod slot counting one.
fn coverage(need: &Need, freed: &Need, more: &Need) -> f64 {
    let share = |need: u64, freed: u64, more: u64| {
        let missing = need.saturating_sub(freed);
        if missing == 0 {
            0.0
        } else {
            missing.min(more) as f64 / need as f64
        }
    };
    let slot = if need.pods > 0 && freed.pods == 0 && more.pods > 0 {
        1.0
    } else {
        0.0
    };
    share(need.cpu_millis, freed.cpu_millis, more.cpu_millis)
        + share(need.memory_bytes, freed.memory_bytes, more.memory_bytes)
        + slot
}

/// The pods of the `taken` units, less what is not needed: whole units first, dearest first,
/// then single pods, smallest first, each dropped while the rest still meets `need`.
fn prune(
    need: &Need,
    pool: &[(&str, &ScavengerPod)],
    units: &[Unit<'_>],
    mut taken: Vec<usize>,
) -> Vec<usize> {
    taken.sort_by(|a, b| {
        units[*b]
            .cost
            .cmp(&units[*a].cost)
            .then(units[*b].pods.len().cmp(&units[*a].pods.len()))
    });
    let mut freed = taken
        .iter()
        .fold(Need::default(), |n, k| add(&n, &units[*k].freed));
    taken.retain(|k| {
        let without = sub(&freed, &units[*k].freed);
        if need.met_by(&without) {
            freed = without;
            false
        } else {
            true
        }
    });
    let mut pods: Vec<usize> = taken
        .iter()
        .flat_map(|k| units[*k].pods.iter().copied())
        .collect();
    pods.sort_by_key(|&i| (pool[i].1.cpu_millis, pool[i].1.memory_bytes, pool[i].0));
    pods.retain(|&i| {
        let without = sub(&freed, &Need::of([pool[i].1]));
        if need.met_by(&without) {
            freed = without;
            false
        } else {
            true
        }
    });
    pods
}

/// The loss of the pool pods `pick`: each unit they touch, once.
fn cost_of(pick: &[usize], pool: &[(&str, &ScavengerPod)], units: &[Unit<'_>]) -> Loss {
    units
        .iter()
        .filter(|u| pick.iter().any(|&i| pool[i].1.job == u.job))
        .fold(0, |sum: Loss, u| sum.saturating_add(u.cost))
}

fn add(a: &Need, b: &Need) -> Need {
    Need {
        cpu_millis: a.cpu_millis.saturating_add(b.cpu_millis),
        memory_bytes: a.memory_bytes.saturating_add(b.memory_bytes),
        pods: a.pods + b.pods,
    }
}

fn sub(a: &Need, b: &Need) -> Need {
    Need {
        cpu_millis: a.cpu_millis.saturating_sub(b.cpu_millis),
        memory_bytes: a.memory_bytes.saturating_sub(b.memory_bytes),
        pods: a.pods.saturating_sub(b.pods),
    }
}

/// Which candidate nodes to drop (module docs): `nodes[i]` is node i's PDB violations and
/// [`Ranked::loss`]; the answer is true for the priced nodes whose `(PDB violations, loss)` is
/// above the least among priced nodes. Unpriced nodes are never dropped.
pub fn drop_dearer_nodes(nodes: &[(i64, Option<Loss>)]) -> Vec<bool> {
    let least = nodes
        .iter()
        .filter_map(|(pdb, loss)| loss.map(|l| (*pdb, l)))
        .min();
    nodes
        .iter()
        .map(|(pdb, loss)| match (least, loss) {
            (Some(least), Some(l)) => (*pdb, *l) > least,
            _ => false,
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
