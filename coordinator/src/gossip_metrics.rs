//! The coordinator's gossip transport figures in /metrics: dropped datagrams by reason (stale
//! and replayed ones included), version 1 frames opened, and the clock correction. The
//! transport counts in atomics where the events happen; this copies them every second.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use telemesh_runtime::gossip::{DropReason, GossipMember, TransportStats};
use tokio_util::sync::CancellationToken;

/// Why a gossip datagram was dropped (bounded: [`DropReason::as_str`]).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DropLabels {
    /// Reason.
    pub reason: &'static str,
}

/// Handles to the gossip metrics (`telemesh_coordinator_gossip_*`).
#[derive(Clone, Debug, Default)]
pub struct GossipMetrics {
    /// Datagrams dropped, by reason.
    pub dropped: Family<DropLabels, Counter>,
    /// Version 1 frames opened.
    pub v1_frames: Counter,
    /// Clock correction from the peers' send times, seconds.
    pub clock_correction: Gauge<f64, AtomicU64>,
}

// === impl GossipMetrics ===

impl GossipMetrics {
    /// Registers under `reg` (give it the `gossip` sub-registry).
    pub fn register(reg: &mut Registry) -> Self {
        let m = Self::default();
        reg.register(
            "dropped_packets",
            "Gossip datagrams dropped, by reason (stale and replayed: replay protection)",
            m.dropped.clone(),
        );
        reg.register(
            "v1_frames",
            "Version 1 gossip frames (no replay protection) opened; zero once a rolling upgrade is over",
            m.v1_frames.clone(),
        );
        reg.register(
            "clock_correction_seconds",
            "Correction applied to this replica's clock, estimated from its gossip peers' send times",
            m.clock_correction.clone(),
        );
        m
    }

    /// Brings the metrics up to the transport's counters.
    pub fn observe(&self, stats: &TransportStats, correction_ms: i64) {
        for (reason, count) in DropReason::ALL.iter().zip(stats.dropped) {
            catch_up(
                &self.dropped.get_or_create(&DropLabels {
                    reason: reason.as_str(),
                }),
                count,
            );
        }
        catch_up(&self.v1_frames, stats.v1_frames);
        self.clock_correction.set(correction_ms as f64 / 1_000.0);
    }

    /// Copies the members' figures, summed (a replica's cells share one clock), every second
    /// until `stop`.
    pub async fn follow(self, members: Vec<Arc<GossipMember>>, stop: CancellationToken) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => {
                    let mut stats = TransportStats::default();
                    for member in &members {
                        stats += &member.stats();
                    }
                    let correction = members.first().map_or(0, |m| m.clock().correction_ms());
                    self.observe(&stats, correction);
                }
            }
        }
    }
}

/// Brings a Prometheus counter up to a total counted elsewhere.
fn catch_up(counter: &Counter, total: u64) {
    let seen = counter.get();
    if total > seen {
        counter.inc_by(total - seen);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn drops_are_exported_by_reason() {
        let mut reg = Registry::with_prefix("telemesh_coordinator");
        let m = GossipMetrics::register(reg.sub_registry_with_prefix("gossip"));
        let mut stats = TransportStats::default();
        stats.dropped[DropReason::ALL
            .iter()
            .position(|r| *r == DropReason::Replayed)
            .unwrap()] = 3;
        m.observe(&stats, -240_000);
        m.observe(&stats, -240_000);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &reg).unwrap();
        assert!(
            text.contains(
                "telemesh_coordinator_gossip_dropped_packets_total{reason=\"replayed\"} 3"
            ),
            "{text}"
        );
        assert!(
            text.contains("telemesh_coordinator_gossip_clock_correction_seconds -240"),
            "{text}"
        );
    }
}
