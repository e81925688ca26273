//! A gossip network the test controls, outside the product: a UDP proxy (a *port*) in front of
//! each member. Members advertise their port (`--gossip-advertise`) and are seeded with ports,
//! so every datagram between two members passes the receiver's port, which forwards it or
//! drops it by the [`Rules`]: a partition into groups, a loss rate.
//!
//! ```text
//!  member A ──▶ port B ──(rules A→B)──▶ nat(A) ──▶ member B
//!  member A ◀── port B ◀──(rules B→A)── nat(A) ◀── member B   (B answers whoever sent)
//! ```
//!
//! Each port forwards a sender's datagrams from a socket of that sender's own (its *nat*), so
//! the member's answers (chitchat answers a Syn to its source address) come back to the port
//! knowing whom they are for. A port knows a sender by the real socket it sends from, which the
//! member reports in its "listening" log line (`gossip.listen`) and the mesh passes to
//! [`Fabric::attach`]. Loss is drawn from a seeded generator, so a run's pattern depends only
//! on the datagram order.
//!
//! Why not a hook in the product's relay: faults injected here reach the members exactly as a
//! network's would, and the product carries no test-only code path.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use tokio::net::UdpSocket;
use tokio::sync::watch;

/// Which datagrams pass: pure, so the decision is tested apart from the sockets.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rules {
    /// Each member's group while partitioned; empty: no partition.
    groups: BTreeMap<String, usize>,
    /// Share of datagrams lost, 0 to 1, on every link.
    loss: f64,
}

impl Rules {
    /// Whether a datagram from `from` (`None`: a sender not attached yet) to `to` passes, given
    /// a uniform draw `roll` in [0, 1). Across a partition nothing passes; an unknown sender
    /// passes only when there is no partition.
    pub fn passes(&self, from: Option<&str>, to: &str, roll: f64) -> bool {
        if roll < self.loss {
            return false;
        }
        if self.groups.is_empty() {
            return true;
        }
        match (from.and_then(|f| self.groups.get(f)), self.groups.get(to)) {
            (Some(a), Some(b)) => a == b,
            _ => false,
        }
    }
}

/// Datagrams the ports forwarded and dropped.
#[derive(Debug, Default)]
pub struct FabricCounts {
    /// Forwarded.
    pub passed: AtomicU64,
    /// Dropped by the rules.
    pub dropped: AtomicU64,
}

/// The ports of one test's members and the rules they apply; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Fabric {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    rules: Mutex<Rules>,
    /// Member name by the real socket it sends from.
    senders: Mutex<HashMap<SocketAddr, String>>,
    /// Each port's target (the member's real socket), by member name.
    targets: Mutex<HashMap<String, watch::Sender<Option<SocketAddr>>>>,
    counts: FabricCounts,
}

impl Fabric {
    /// A fabric with no partition and no loss.
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens `name`'s port on loopback and returns its address: what the member advertises and
    /// others seed with. Datagrams reach the member once [`Fabric::attach`] says where it is.
    pub async fn port(&self, name: &str) -> SocketAddr {
        let public = UdpSocket::bind("127.0.0.1:0")
            .await
            .expect("binding a loopback UDP port");
        let addr = public.local_addr().expect("the port's address");
        let (target, target_rx) = watch::channel(None);
        self.inner.targets.lock().insert(name.to_owned(), target);
        let port = Port {
            name: name.to_owned(),
            public: Arc::new(public),
            target: target_rx,
            fabric: self.inner.clone(),
            rng: Rng::seeded(name),
        };
        tokio::spawn(port.run());
        addr
    }

    /// Says that `name` sends from and listens on `real` (its `gossip.listen`). A restarted
    /// member attaches its new socket the same way.
    pub fn attach(&self, name: &str, real: SocketAddr) {
        self.inner.senders.lock().insert(real, name.to_owned());
        if let Some(target) = self.inner.targets.lock().get(name) {
            target.send_replace(Some(real));
        }
    }

    /// Splits the members into `groups`: from now on no datagram crosses between two groups.
    /// Every member with a port must be in exactly one group.
    pub fn partition(&self, groups: &[&[&str]]) {
        let mut by_member = BTreeMap::new();
        for (i, group) in groups.iter().enumerate() {
            for member in *group {
                assert!(
                    by_member.insert((*member).to_owned(), i).is_none(),
                    "{member} is in two groups"
                );
            }
        }
        for name in self.inner.targets.lock().keys() {
            assert!(by_member.contains_key(name), "{name} is in no group");
        }
        self.inner.rules.lock().groups = by_member;
    }

    /// Ends the partition.
    pub fn heal(&self) {
        self.inner.rules.lock().groups.clear();
    }

    /// Loses `share` (0 to 1) of the datagrams on every link from now on.
    pub fn set_loss(&self, share: f64) {
        assert!((0.0..=1.0).contains(&share), "a loss share is within 0..=1");
        self.inner.rules.lock().loss = share;
    }

    /// (forwarded, dropped) datagrams so far.
    pub fn counts(&self) -> (u64, u64) {
        let c = &self.inner.counts;
        (
            c.passed.load(Ordering::Relaxed),
            c.dropped.load(Ordering::Relaxed),
        )
    }
}

impl Inner {
    /// Applies the rules to one datagram; counts it.
    fn passes(&self, from: Option<&str>, to: &str, rng: &mut Rng) -> bool {
        let pass = self.rules.lock().passes(from, to, rng.next_unit());
        let counter = if pass {
            &self.counts.passed
        } else {
            &self.counts.dropped
        };
        counter.fetch_add(1, Ordering::Relaxed);
        pass
    }

    fn sender(&self, addr: SocketAddr) -> Option<String> {
        self.senders.lock().get(&addr).cloned()
    }
}

/// One member's port.
struct Port {
    name: String,
    public: Arc<UdpSocket>,
    target: watch::Receiver<Option<SocketAddr>>,
    fabric: Arc<Inner>,
    rng: Rng,
}

impl Port {
    async fn run(mut self) {
        let mut nats: HashMap<SocketAddr, Arc<UdpSocket>> = HashMap::new();
        let mut buf = vec![0u8; 65_536];
        loop {
            let Ok((n, src)) = self.public.recv_from(&mut buf).await else {
                return;
            };
            let Some(target) = *self.target.borrow() else {
                continue; // the member has not said where it is yet
            };
            let from = self.fabric.sender(src);
            if !self
                .fabric
                .passes(from.as_deref(), &self.name, &mut self.rng)
            {
                continue;
            }
            let nat = match nats.get(&src) {
                Some(nat) => nat.clone(),
                None => {
                    let nat = Arc::new(
                        UdpSocket::bind("127.0.0.1:0")
                            .await
                            .expect("binding a loopback UDP socket"),
                    );
                    nats.insert(src, nat.clone());
                    tokio::spawn(answers(
                        nat.clone(),
                        src,
                        self.public.clone(),
                        self.target.clone(),
                        self.name.clone(),
                        self.fabric.clone(),
                        Rng::seeded(&format!("{}<-{src}", self.name)),
                    ));
                    nat
                }
            };
            let _ = nat.send_to(&buf[..n], target).await;
        }
    }
}

/// Carries the member's answers on `nat` back to `client`, from the member's port.
async fn answers(
    nat: Arc<UdpSocket>,
    client: SocketAddr,
    public: Arc<UdpSocket>,
    target: watch::Receiver<Option<SocketAddr>>,
    member: String,
    fabric: Arc<Inner>,
    mut rng: Rng,
) {
    let mut buf = vec![0u8; 65_536];
    loop {
        let Ok((n, from)) = nat.recv_from(&mut buf).await else {
            return;
        };
        if Some(from) != *target.borrow() {
            continue;
        }
        let to = fabric.sender(client);
        if fabric.passes(Some(&member), to.as_deref().unwrap_or_default(), &mut rng) {
            let _ = public.send_to(&buf[..n], client).await;
        }
    }
}

/// SplitMix64: a seeded generator, so a loss pattern is repeatable (no dependency needed).
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn seeded(name: &str) -> Self {
        // FNV-1a of the name.
        let seed = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        Self(seed)
    }

    /// A uniform draw in [0, 1).
    fn next_unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(groups: &[(&str, usize)], loss: f64) -> Rules {
        Rules {
            groups: groups.iter().map(|(n, g)| ((*n).to_owned(), *g)).collect(),
            loss,
        }
    }

    #[test]
    fn a_partition_passes_only_within_a_group() {
        let r = rules(&[("a", 0), ("b", 0), ("c", 1)], 0.0);
        assert!(r.passes(Some("a"), "b", 0.5));
        assert!(!r.passes(Some("a"), "c", 0.5));
        assert!(!r.passes(Some("c"), "b", 0.5));
        assert!(!r.passes(None, "a", 0.5), "an unknown sender is on no side");
        let whole = rules(&[], 0.0);
        assert!(whole.passes(None, "a", 0.5));
    }

    #[test]
    fn loss_drops_the_draws_below_its_share() {
        let r = rules(&[], 0.2);
        assert!(!r.passes(Some("a"), "b", 0.19));
        assert!(r.passes(Some("a"), "b", 0.2));
        let mut rng = Rng::seeded("x");
        let lost = (0..10_000)
            .filter(|_| !r.passes(Some("a"), "b", rng.next_unit()))
            .count();
        assert!((1_800..2_200).contains(&lost), "{lost}");
    }
}
