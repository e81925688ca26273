//! Replay protection for sealed gossip datagrams: a time window and a bounded cache of the
//! nonces seen inside it. Pure: the caller passes the frame's send time, its nonce and `now`.
//!
//! **Window.** A datagram whose (authenticated) send time is more than [`ReplayConfig::window`]
//! before or after the receiver's clock is stale. An honest datagram is received milliseconds
//! after it is sent, at worst a gossip round (1 s) late behind a busy socket, so the window's
//! only real job is to absorb the members' clock skew. The default, 5 minutes, is Kerberos's
//! default `clockskew` for the same construction (authenticated timestamp plus replay cache):
//! NTP keeps nodes within milliseconds, so a member outside the window has a broken clock, and
//! it is cut off loudly (its peers count `reason="stale"`) rather than trusted with replays.
//! Within the window, figures are corrected for skew by [`super::clock`].
//!
//! **Cache.** Inside the window a replay is caught by its nonce, 96 random bits unique per
//! datagram, remembered with the send time until that time leaves the window. Members gossip
//! with a fixed fanout (3 peers a round), so a member receives about 10 datagrams a round
//! whatever the cluster size, 1,000 or 5,000 members alike: about 6,000 entries for a 10-minute
//! span (the window on both sides of now) at 1 s rounds. The cache holds at most
//! [`ReplayConfig::capacity`] (65,536 by default: ten times that, about 3 MB at worst); past it
//! the oldest entry is forgotten and the floor rises to its send time, so nothing at or below
//! the floor is accepted again: a full cache can refuse old honest datagrams, never accept a
//! replay. Only distinct authenticated datagrams enter the cache (a replay never does), so an
//! attacker without the key cannot fill it.

use std::collections::BTreeSet;
use std::time::Duration;

/// The window and the cache bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayConfig {
    /// Largest difference between a datagram's send time and the receiver's clock.
    pub window: Duration,
    /// Most nonces remembered.
    pub capacity: usize,
}

impl Default for ReplayConfig {
    fn default() -> Self {
        Self {
            window: Duration::from_secs(5 * 60),
            capacity: 65_536,
        }
    }
}

/// What the guard makes of one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Seen for the first time, inside the window: deliver it.
    Fresh,
    /// Its nonce was seen before inside the window.
    Replayed,
    /// Sent outside the window (or at or below the floor of a full cache).
    Stale,
}

/// The window check and the nonce cache of one receiver.
#[derive(Debug)]
pub struct ReplayGuard {
    window_ms: u64,
    capacity: usize,
    /// (send time, nonce), ordered by send time so expiry pops from the front.
    seen: BTreeSet<(u64, u128)>,
    /// Send times at or below this are refused: their entries may have been forgotten.
    floor_ms: u64,
}

// === impl ReplayGuard ===

impl ReplayGuard {
    /// Creates an empty guard.
    pub fn new(config: ReplayConfig) -> Self {
        Self {
            window_ms: u64::try_from(config.window.as_millis()).unwrap_or(u64::MAX),
            capacity: config.capacity.max(1),
            seen: BTreeSet::new(),
            floor_ms: 0,
        }
    }

    /// Judges a datagram sent at `sent_ms` (the sender's clock, Unix ms) with `nonce`, received
    /// at `now_ms` (this clock), and remembers it when fresh.
    pub fn check(&mut self, sent_ms: u64, nonce: u128, now_ms: u64) -> Verdict {
        let oldest = now_ms.saturating_sub(self.window_ms);
        while let Some(&(at, _)) = self.seen.first()
            && at < oldest
        {
            self.seen.pop_first();
        }
        if sent_ms < oldest
            || sent_ms > now_ms.saturating_add(self.window_ms)
            || (self.floor_ms > 0 && sent_ms <= self.floor_ms)
        {
            return Verdict::Stale;
        }
        if !self.seen.insert((sent_ms, nonce)) {
            return Verdict::Replayed;
        }
        while self.seen.len() > self.capacity {
            if let Some((at, _)) = self.seen.pop_first() {
                self.floor_ms = self.floor_ms.max(at);
            }
        }
        Verdict::Fresh
    }

    /// Number of nonces remembered.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether no nonce is remembered.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_767_225_600_000;

    fn guard(window_s: u64, capacity: usize) -> ReplayGuard {
        ReplayGuard::new(ReplayConfig {
            window: Duration::from_secs(window_s),
            capacity,
        })
    }

    #[test]
    fn a_fresh_datagram_is_kept_and_its_replay_dropped() {
        let mut g = guard(300, 100);
        assert_eq!(g.check(NOW - 5, 1, NOW), Verdict::Fresh);
        assert_eq!(g.check(NOW - 5, 2, NOW), Verdict::Fresh, "another nonce");
        assert_eq!(g.check(NOW - 5, 1, NOW + 1_000), Verdict::Replayed);
        assert_eq!(g.len(), 2);
    }

    #[test]
    fn datagrams_outside_the_window_are_stale_either_side() {
        let mut g = guard(300, 100);
        assert_eq!(g.check(NOW - 300_001, 1, NOW), Verdict::Stale);
        assert_eq!(g.check(NOW + 300_001, 2, NOW), Verdict::Stale);
        assert_eq!(g.check(NOW - 300_000, 3, NOW), Verdict::Fresh);
        assert_eq!(
            g.check(NOW + 300_000, 4, NOW),
            Verdict::Fresh,
            "a sender ahead"
        );
        assert!(g.len() == 2, "stale datagrams are not remembered");
    }

    #[test]
    fn a_replay_after_its_entry_expired_is_stale() {
        let mut g = guard(300, 100);
        assert_eq!(g.check(NOW, 1, NOW), Verdict::Fresh);
        let later = NOW + 300_001;
        assert_eq!(g.check(NOW, 1, later), Verdict::Stale);
        assert_eq!(g.check(later, 2, later), Verdict::Fresh);
        assert_eq!(g.len(), 1, "the expired entry is gone");
    }

    #[test]
    fn the_cache_stays_bounded_and_a_full_cache_never_accepts_a_replay() {
        let mut g = guard(300, 1_000);
        for i in 0..5_000u64 {
            assert_eq!(g.check(NOW + i, u128::from(i), NOW + i), Verdict::Fresh);
            assert!(g.len() <= 1_000);
        }
        // Every datagram ever seen is refused, remembered or not.
        for i in 0..5_000u64 {
            assert_ne!(
                g.check(NOW + i, u128::from(i), NOW + 5_000),
                Verdict::Fresh,
                "{i}"
            );
        }
        // New datagrams newer than the floor still pass.
        assert_eq!(g.check(NOW + 5_001, 99_999, NOW + 5_001), Verdict::Fresh);
    }

    #[test]
    fn at_five_thousand_members_a_window_of_traffic_fits() {
        // 30 datagrams a second (three times the fanout's expectation) for the window on both
        // sides of now: nothing honest is refused and nothing is forgotten.
        let config = ReplayConfig::default();
        let mut g = ReplayGuard::new(config);
        let span_ms = 2 * config.window.as_millis() as u64;
        let mut nonce = 0u128;
        for ms in (0..span_ms).step_by(33) {
            nonce += 1;
            assert_eq!(g.check(NOW + ms, nonce, NOW + span_ms / 2), Verdict::Fresh);
        }
        assert!(g.len() < config.capacity);
    }
}
