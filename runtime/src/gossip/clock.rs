//! Clock skew: how far this member's clock is from the cluster's, estimated from the send times
//! that sealed datagrams carry, and the corrected clock figures are stamped and aged with.
//!
//! **Decision: offset estimation at the writer, not age from the receipt time.** Ages from the
//! observer's receipt time cost nothing on the wire but are wrong whenever a value is received
//! long after it was measured: a coordinator that just joined (or re-reads members at a resync)
//! would take hour-old values for fresh ones. Instead every sealed frame carries its send time
//! (needed anyway for replay protection), so each datagram from a peer gives one sample of
//! `peer clock - my clock` (one-way delay on a LAN is far below a second). A member takes the
//! median over its peers (each peer's latest sample), which is the cluster majority's clock
//! whatever a few skewed peers say, and corrects its own clock by it: agents stamp their
//! figures with the corrected clock, and a coordinator ages figures with it. So a member whose
//! clock is minutes off stamps figures in cluster time, and no reader has to know about it.
//!
//! Limits, written down: it needs [`MIN_PEERS`] peers heard (with two members a skewed peer and
//! a skewed self look alike, so nothing is corrected); offsets under [`DEADBAND`] are left alone
//! (NTP-synced clocks differ by milliseconds, and a healthy cluster keeps its own clocks); an
//! insecure (`--insecure-gossip`) transport has no send times, so nothing is corrected there;
//! a skew beyond the replay window cuts the member off instead ([`super::replay`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Peers that must be heard before the clock is corrected.
pub const MIN_PEERS: usize = 3;

/// Offsets smaller than this are not corrected; the correction changes only when the estimate
/// moves by more than this (so stamps do not jitter with network delay).
pub const DEADBAND: Duration = Duration::from_secs(1);

/// A peer's sample older than this no longer counts (the peer left, or its clock was fixed).
pub const SAMPLE_TTL: Duration = Duration::from_secs(5 * 60);

/// Most peers whose samples are kept (the median of 64 is as good as of 5,000).
pub const MAX_PEERS: usize = 64;

/// This process's own wall clock, possibly shifted by `--debug-clock-offset` (tests and drills
/// that play a node with a wrong clock).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LocalClock {
    /// Milliseconds added to the system clock.
    pub shift_ms: i64,
}

impl LocalClock {
    /// Now, in Unix milliseconds.
    pub fn now_ms(&self) -> u64 {
        shift(unix_ms_now(), self.shift_ms)
    }
}

/// The clock figures are stamped and aged with: the local clock plus the estimated correction.
/// Clones share the correction and the peers' samples, so the members of one process (a
/// coordinator replica's gossip cells) keep one clock estimated from all their peers.
#[derive(Debug, Clone, Default)]
pub struct ClusterClock {
    local: LocalClock,
    correction_ms: Arc<AtomicI64>,
    samples: Arc<parking_lot::Mutex<OffsetSamples>>,
}

// === impl ClusterClock ===

impl ClusterClock {
    /// A clock over `local` with no correction yet.
    pub fn new(local: LocalClock) -> Self {
        Self {
            local,
            correction_ms: Arc::default(),
            samples: Arc::default(),
        }
    }

    /// Takes one sample of `peer`'s clock (a datagram it sent at `sent_ms`, received at
    /// `now_ms` local time) and applies the correction the samples now give; returns the
    /// previous correction when it changed.
    pub(crate) fn sample(&self, peer: SocketAddr, sent_ms: u64, now_ms: u64) -> Option<i64> {
        let mut samples = self.samples.lock();
        samples.record(peer, sent_ms, now_ms);
        let current = self.correction_ms();
        let correction = samples.correction(now_ms, current);
        if correction == current {
            return None;
        }
        self.set_correction_ms(correction);
        Some(current)
    }

    /// The local clock (what frames are stamped and judged with).
    pub fn local(&self) -> LocalClock {
        self.local
    }

    /// Cluster time now, in Unix milliseconds.
    pub fn now_ms(&self) -> u64 {
        shift(self.local.now_ms(), self.correction_ms())
    }

    /// Cluster time now.
    pub fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.now_ms())
    }

    /// A time read from this machine's system clock (a file's modification time, a timestamp
    /// taken with [`SystemTime::now`]) in cluster time, Unix milliseconds.
    pub fn cluster_ms(&self, system: SystemTime) -> u64 {
        let system_ms = super::schema::unix_ms(system);
        shift(
            system_ms,
            self.local.shift_ms.saturating_add(self.correction_ms()),
        )
    }

    /// The correction applied, in milliseconds (cluster minus local).
    pub fn correction_ms(&self) -> i64 {
        self.correction_ms.load(Ordering::Relaxed)
    }

    /// Sets the correction every holder of this clock sees. The gossip member sets it from its
    /// exchanges; tests set it to show that handles share one clock.
    pub fn set_correction_ms(&self, ms: i64) {
        self.correction_ms.store(ms, Ordering::Relaxed);
    }
}

/// Each peer's latest `peer clock - local clock` sample.
#[derive(Debug, Default)]
pub struct OffsetSamples {
    by_peer: HashMap<SocketAddr, (i64, u64)>,
}

// === impl OffsetSamples ===

impl OffsetSamples {
    /// Records a datagram from `peer` sent at `sent_ms` (its clock) and received at `now_ms`
    /// (the local clock).
    pub fn record(&mut self, peer: SocketAddr, sent_ms: u64, now_ms: u64) {
        let offset = i64::try_from(i128::from(sent_ms) - i128::from(now_ms)).unwrap_or(0);
        if self.by_peer.len() >= MAX_PEERS && !self.by_peer.contains_key(&peer) {
            let oldest = self
                .by_peer
                .iter()
                .min_by_key(|(_, (_, at))| *at)
                .map(|(p, _)| *p);
            if let Some(oldest) = oldest {
                self.by_peer.remove(&oldest);
            }
        }
        self.by_peer.insert(peer, (offset, now_ms));
    }

    /// The correction to apply at `now_ms`, given the one applied now: the median of the
    /// peers' fresh samples when at least [`MIN_PEERS`] were heard and it moved more than
    /// [`DEADBAND`] from `current`; otherwise `current` (or 0 when too few peers are heard).
    pub fn correction(&mut self, now_ms: u64, current: i64) -> i64 {
        let ttl = u64::try_from(SAMPLE_TTL.as_millis()).unwrap_or(u64::MAX);
        self.by_peer
            .retain(|_, (_, at)| now_ms.saturating_sub(*at) <= ttl);
        let mut offsets: Vec<i64> = self.by_peer.values().map(|(o, _)| *o).collect();
        if offsets.len() < MIN_PEERS {
            return 0;
        }
        offsets.sort_unstable();
        let median = offsets[offsets.len() / 2];
        let band = i64::try_from(DEADBAND.as_millis()).unwrap_or(i64::MAX);
        if (median - current).abs() <= band {
            current
        } else if median.abs() <= band {
            0
        } else {
            median
        }
    }
}

fn unix_ms_now() -> u64 {
    super::schema::unix_ms(SystemTime::now())
}

fn shift(ms: u64, by: i64) -> u64 {
    if by >= 0 {
        ms.saturating_add(by.unsigned_abs())
    } else {
        ms.saturating_sub(by.unsigned_abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_767_225_600_000;

    fn peer(i: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 7000 + i))
    }

    #[test]
    fn system_times_are_carried_into_cluster_time() {
        // Played 60 s behind, and the peers say this machine is 4 minutes ahead of them.
        let clock = ClusterClock::new(LocalClock { shift_ms: -60_000 });
        clock.set_correction_ms(-240_000);
        let mtime = UNIX_EPOCH + Duration::from_millis(NOW);
        assert_eq!(clock.cluster_ms(mtime), NOW - 300_000);
    }

    #[test]
    fn a_skewed_self_is_corrected_by_its_peers_median() {
        // This clock is 4 minutes ahead: every peer's send time reads 240 s behind it.
        let mut s = OffsetSamples::default();
        for i in 0..5 {
            s.record(peer(i), NOW - 240_000 + u64::from(i) * 3, NOW);
        }
        let c = s.correction(NOW, 0);
        assert!((-240_000..=-239_980).contains(&c), "{c}");
    }

    #[test]
    fn a_skewed_peer_does_not_move_the_median() {
        let mut s = OffsetSamples::default();
        s.record(peer(0), NOW + 5, NOW);
        s.record(peer(1), NOW - 3, NOW);
        s.record(peer(2), NOW + 240_000, NOW);
        assert_eq!(
            s.correction(NOW, 0),
            0,
            "within the deadband: no correction"
        );
    }

    #[test]
    fn too_few_peers_correct_nothing() {
        let mut s = OffsetSamples::default();
        s.record(peer(0), NOW - 240_000, NOW);
        s.record(peer(1), NOW - 240_000, NOW);
        assert_eq!(s.correction(NOW, 0), 0);
    }

    #[test]
    fn small_moves_keep_the_current_correction_and_old_samples_expire() {
        let mut s = OffsetSamples::default();
        for i in 0..3 {
            s.record(peer(i), NOW + 60_000 + u64::from(i) * 100, NOW);
        }
        assert_eq!(s.correction(NOW, 60_000), 60_000, "moved 100 ms: kept");
        assert_eq!(s.correction(NOW, 0), 60_100, "moved a minute: taken");
        let later = NOW + SAMPLE_TTL.as_millis() as u64 + 1;
        assert_eq!(s.correction(later, 60_100), 0, "every sample expired");
    }

    #[test]
    fn peers_are_bounded() {
        let mut s = OffsetSamples::default();
        for i in 0..(MAX_PEERS as u16 + 10) {
            s.record(peer(i), NOW, NOW + u64::from(i));
        }
        assert_eq!(s.by_peer.len(), MAX_PEERS);
        assert!(!s.by_peer.contains_key(&peer(0)), "the oldest is forgotten");
    }

    #[test]
    fn the_cluster_clock_adds_the_correction_to_the_shifted_local_clock() {
        let clock = ClusterClock::new(LocalClock { shift_ms: -240_000 });
        let before = unix_ms_now();
        assert!(clock.now_ms() + 239_000 < before);
        clock.set_correction_ms(240_000);
        let now = clock.now_ms();
        assert!(now >= before && now < unix_ms_now() + 1_000);
        assert_eq!(clock.clone().correction_ms(), 240_000, "clones share it");
    }
}
