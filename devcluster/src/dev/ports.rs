//! The dev cluster's port plan: every loopback port its agents and coordinators listen on.
//!
//! Why it looks like this. The plan used to draw each port at random and check it was free at
//! that moment, remembering nothing: with ~3 ports per node drawn independently from ~22,800,
//! two children of one 50-node cluster got the same port about two starts in five, and the
//! later one died on "Address already in use". Now:
//!
//! - the plan remembers every port it handed out ([`Pool`]'s set), so no two children of one
//!   dev cluster get the same port, by construction rather than by luck;
//! - each port is drawn at random below the kernel's ephemeral range (where no `bind(:0)` or
//!   outgoing connection of another program lands) and checked free by binding it, and the
//!   plan keeps that socket open until just before its child starts ([`Plan::release`]), so a
//!   second dev cluster started meanwhile (tests run several side by side) sees it taken;
//! - what can still happen — another program binds the port in the moment between the release
//!   and the child's own bind — is handled where it shows: the child exits with "Address already
//!   in use" and is started again on fresh ports ([`Plan::renew`], `super::startup`).
//!
//! A set rather than a contiguous block: a block from one random base is as distinct, but two
//! clusters whose blocks overlap clash on every port of the overlap, while independent draws
//! clash (and are restarted) one port at a time. A loopback address of its own per cluster
//! (as `control_plane` takes) would not help within one cluster and would change the address
//! the QUIC certificates name. `--first-port` gives the consecutive layout when a person wants
//! ports that stay the same run after run (see [`Pool::consecutive`]).
//!
//! What refers to which port, and so what a restart may change: the agents' gossip seeds are
//! the coordinators' gossip addresses, and the coordinators start (and settle) before any
//! agent, so no seed changes under a running agent; a coordinator seeds only itself (it hears
//! of everyone from the agents), so restarting the other replica leaves no stale seed; an
//! agent's ports are named by no one else (it announces its gossip and QUIC addresses itself);
//! the Service stand-ins and the story are given the coordinators' ports only once the
//! coordinators settled.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::ops::Range;

use anyhow::Context as _;
use rand::Rng as _;

/// The address every child listens on.
const LOOPBACK: Ipv4Addr = Ipv4Addr::LOCALHOST;

/// The lowest port drawn (below it: well-known services and the dev cluster's fixed 6443, 9001,
/// 9080).
const LOWEST: u16 = 10_000;

/// Ports per coordinator (gossip, extender, API, HTTP) and per agent (gossip, HTTP, QUIC).
const PER_COORDINATOR: usize = 4;
const PER_AGENT: usize = 3;

/// A socket's protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Proto {
    Tcp,
    Udp,
}

impl std::fmt::Display for Proto {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Tcp => "TCP",
            Self::Udp => "UDP",
        })
    }
}

/// One child of the dev cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Member {
    Coordinator(usize),
    Agent(usize),
}

/// Whatever keeps a checked port taken until its child starts (the socket that checked it).
pub type Hold = Box<dyn Send>;

/// Checks that a port is free for a protocol by taking it: the socket, or `None` if it is taken.
pub type Reserve = Box<dyn FnMut(SocketAddr, Proto) -> Option<Hold> + Send>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentPorts {
    pub gossip: SocketAddr,
    pub http: SocketAddr,
    pub quic: SocketAddr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoordinatorPorts {
    pub gossip: SocketAddr,
    pub extender: SocketAddr,
    pub api: SocketAddr,
    pub http: SocketAddr,
}

/// Where ports come from: distinct, never handed out twice.
pub struct Pool {
    /// Where random draws fall.
    range: Range<u16>,
    /// Every port handed out so far, including those of children restarted since.
    handed: BTreeSet<u16>,
    /// `--first-port`: the next port of the consecutive layout, taken without a check.
    next_consecutive: Option<u16>,
    rng: Box<dyn rand::RngCore + Send>,
    reserve: Reserve,
}

impl Pool {
    /// Random free loopback ports below the kernel's ephemeral range, each held by a socket of
    /// ours until its child starts.
    pub fn loopback() -> Self {
        let range = below_ephemeral(
            std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
                .ok()
                .as_deref(),
        );
        let rng: rand::rngs::StdRng = rand::SeedableRng::from_os_rng();
        Self::new(range, Box::new(rng), Box::new(hold_loopback))
    }

    /// Ports drawn from `range` by `rng`, each checked (and held) by `reserve`.
    pub fn new(range: Range<u16>, rng: Box<dyn rand::RngCore + Send>, reserve: Reserve) -> Self {
        Self {
            range,
            handed: BTreeSet::new(),
            next_consecutive: None,
            rng,
            reserve,
        }
    }

    /// `--first-port`: the plan's ports are `first`, `first + 1`, ... in the plan's order
    /// (coordinators, then agents), the same on every run, and not checked in advance: these
    /// are the ports asked for. A child that finds one taken is restarted on random free ones.
    pub fn consecutive(mut self, first: u16) -> Self {
        self.next_consecutive = Some(first);
        self
    }

    /// A port for `proto` no child of this plan has had, with what holds it (if checked).
    fn take(&mut self, proto: Proto) -> anyhow::Result<(SocketAddr, Option<Hold>)> {
        if let Some(port) = self.next_consecutive {
            // Validated by Plan::new: the whole layout fits below 65536.
            self.next_consecutive = port.checked_add(1);
            self.handed.insert(port);
            return Ok((SocketAddr::from((LOOPBACK, port)), None));
        }
        anyhow::ensure!(
            !self.range.is_empty(),
            "no ports to draw from: the range {:?} is empty",
            self.range
        );
        let start = self.rng.random_range(self.range.clone());
        let reserve = &mut self.reserve;
        let mut held = None;
        let port = next_free(self.range.clone(), start, &self.handed, |port| {
            held = reserve(SocketAddr::from((LOOPBACK, port)), proto);
            held.is_some()
        })
        .with_context(|| {
            format!(
                "no free loopback port left between {} and {}; stop what holds them or run fewer nodes",
                self.range.start,
                self.range.end - 1
            )
        })?;
        self.handed.insert(port);
        Ok((SocketAddr::from((LOOPBACK, port)), held))
    }
}

/// The first port from `start` on (wrapping around `range`) that this plan has not handed out
/// and `free` accepts; `None` when there is none.
pub fn next_free(
    range: Range<u16>,
    start: u16,
    handed: &BTreeSet<u16>,
    mut free: impl FnMut(u16) -> bool,
) -> Option<u16> {
    if range.is_empty() {
        return None;
    }
    let start = start.clamp(range.start, range.end - 1);
    (start..range.end)
        .chain(range.start..start)
        .filter(|port| !handed.contains(port))
        .find(|&port| free(port))
}

/// Where random draws fall, from the kernel's `ip_local_port_range` text: from 10000 up to the
/// ephemeral range's start, where every `bind(:0)` and outgoing connection of any other process
/// gets its port (a port picked there could be handed to someone else before the child binds
/// it). Unreadable: Linux's default start, 32768.
pub fn below_ephemeral(ip_local_port_range: Option<&str>) -> Range<u16> {
    let ephemeral_start = ip_local_port_range
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    LOWEST.min(ephemeral_start.saturating_sub(1024))..ephemeral_start
}

/// Takes `addr` for `proto` if it is free: the bound socket, kept open by the plan.
fn hold_loopback(addr: SocketAddr, proto: Proto) -> Option<Hold> {
    match proto {
        Proto::Tcp => std::net::TcpListener::bind(addr)
            .ok()
            .map(|s| Box::new(s) as Hold),
        Proto::Udp => std::net::UdpSocket::bind(addr)
            .ok()
            .map(|s| Box::new(s) as Hold),
    }
}

/// Loopback ports for every child of one dev cluster, all distinct.
pub struct Plan {
    pub agents: Vec<AgentPorts>,
    pub coordinators: Vec<CoordinatorPorts>,
    pool: Pool,
    /// The sockets that keep each child's ports taken until it starts.
    held: BTreeMap<Member, Vec<Hold>>,
}

impl Plan {
    /// Ports for `coordinators` replicas and `agents` agents, in that order.
    pub fn new(pool: Pool, coordinators: usize, agents: usize) -> anyhow::Result<Self> {
        if let Some(first) = pool.next_consecutive {
            let count = coordinators * PER_COORDINATOR + agents * PER_AGENT;
            let last = usize::from(first) + count.saturating_sub(1);
            anyhow::ensure!(
                first > 0 && last <= usize::from(u16::MAX),
                "--first-port {first}: the dev cluster needs {count} consecutive ports \
                 ({PER_COORDINATOR} per coordinator, {PER_AGENT} per agent), up to {last}; \
                 pick a port between 1 and {}",
                usize::from(u16::MAX) + 1 - count
            );
        }
        let mut plan = Self {
            agents: Vec::with_capacity(agents),
            coordinators: Vec::with_capacity(coordinators),
            pool,
            held: BTreeMap::new(),
        };
        for r in 0..coordinators {
            let ports = plan.coordinator_ports(Member::Coordinator(r))?;
            plan.coordinators.push(ports);
        }
        for i in 0..agents {
            let ports = plan.agent_ports(Member::Agent(i))?;
            plan.agents.push(ports);
        }
        Ok(plan)
    }

    fn take(&mut self, member: Member, proto: Proto) -> anyhow::Result<SocketAddr> {
        let (addr, hold) = self.pool.take(proto)?;
        self.held.entry(member).or_default().extend(hold);
        Ok(addr)
    }

    fn coordinator_ports(&mut self, member: Member) -> anyhow::Result<CoordinatorPorts> {
        Ok(CoordinatorPorts {
            gossip: self.take(member, Proto::Udp)?,
            extender: self.take(member, Proto::Tcp)?,
            api: self.take(member, Proto::Tcp)?,
            http: self.take(member, Proto::Tcp)?,
        })
    }

    fn agent_ports(&mut self, member: Member) -> anyhow::Result<AgentPorts> {
        Ok(AgentPorts {
            gossip: self.take(member, Proto::Udp)?,
            http: self.take(member, Proto::Tcp)?,
            quic: self.take(member, Proto::Udp)?,
        })
    }

    /// Fresh ports for `member` (its child could not bind one): drawn at random and checked,
    /// whatever the layout, and never one handed out before. The old ones are not reused.
    pub fn renew(&mut self, member: Member) -> anyhow::Result<()> {
        self.held.remove(&member);
        self.pool.next_consecutive = None;
        match member {
            Member::Coordinator(r) => {
                let ports = self.coordinator_ports(member)?;
                *self
                    .coordinators
                    .get_mut(r)
                    .with_context(|| format!("no coordinator {r} in the plan"))? = ports;
            }
            Member::Agent(i) => {
                let ports = self.agent_ports(member)?;
                *self
                    .agents
                    .get_mut(i)
                    .with_context(|| format!("no agent {i} in the plan"))? = ports;
            }
        }
        Ok(())
    }

    /// Lets go of `member`'s ports, right before its child starts and binds them.
    pub fn release(&mut self, member: Member) {
        self.held.remove(&member);
    }

    /// `member`'s ports with their protocols.
    pub fn ports(&self, member: Member) -> Vec<(SocketAddr, Proto)> {
        match member {
            Member::Coordinator(r) => self.coordinators.get(r).map_or_else(Vec::new, |c| {
                vec![
                    (c.gossip, Proto::Udp),
                    (c.extender, Proto::Tcp),
                    (c.api, Proto::Tcp),
                    (c.http, Proto::Tcp),
                ]
            }),
            Member::Agent(i) => self.agents.get(i).map_or_else(Vec::new, |a| {
                vec![
                    (a.gossip, Proto::Udp),
                    (a.http, Proto::Tcp),
                    (a.quic, Proto::Udp),
                ]
            }),
        }
    }

    /// The agents' gossip seeds: the coordinators' gossip addresses. Coordinators start first
    /// and settle before any agent starts, so these never change under a running agent.
    pub fn seeds(&self) -> String {
        self.coordinators
            .iter()
            .map(|c| c.gossip.to_string())
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn coordinator_metrics(&self) -> Vec<String> {
        self.coordinators
            .iter()
            .map(|c| format!("http://{}/metrics", c.http))
            .collect()
    }

    pub fn coordinator_apis(&self) -> Vec<String> {
        self.coordinators
            .iter()
            .map(|c| format!("http://{}", c.api))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    use rand::SeedableRng as _;

    /// Every port the plan's members listen on now.
    fn all_ports(plan: &Plan) -> Vec<u16> {
        (0..plan.coordinators.len())
            .map(Member::Coordinator)
            .chain((0..plan.agents.len()).map(Member::Agent))
            .flat_map(|m| plan.ports(m))
            .map(|(addr, _)| addr.port())
            .collect()
    }

    fn distinct(ports: &[u16]) -> bool {
        ports.iter().collect::<BTreeSet<_>>().len() == ports.len()
    }

    /// A pool that draws with `rng` from `range` and finds every port free.
    fn pool(range: Range<u16>, rng: impl rand::RngCore + Send + 'static) -> Pool {
        Pool::new(
            range,
            Box::new(rng),
            Box::new(|_, _| Some(Box::new(()) as Hold)),
        )
    }

    /// A random source that always says the same thing: the old plan gave every port the same
    /// number.
    struct Stuck;
    impl rand::RngCore for Stuck {
        fn next_u32(&mut self) -> u32 {
            7
        }
        fn next_u64(&mut self) -> u64 {
            7
        }
        fn fill_bytes(&mut self, dst: &mut [u8]) {
            dst.fill(7);
        }
    }

    #[test]
    fn a_plan_for_fifty_nodes_hands_out_no_port_twice() {
        // The figure: 158 ports drawn independently from ~22,800 collide about two
        // times in five. Every seed here must give 158 distinct ports.
        for seed in 0..50 {
            let pool = pool(
                below_ephemeral(Some("32768\t60999")),
                rand::rngs::StdRng::seed_from_u64(seed),
            );
            let plan = Plan::new(pool, 2, 50).unwrap();
            let ports = all_ports(&plan);
            assert_eq!(ports.len(), 2 * 4 + 50 * 3);
            assert!(distinct(&ports), "seed {seed}: {ports:?}");
        }
    }

    #[test]
    fn a_source_that_always_draws_the_same_port_still_gets_distinct_ones() {
        let plan = Plan::new(pool(10_000..32_768, Stuck), 2, 50).unwrap();
        assert!(distinct(&all_ports(&plan)));
    }

    #[test]
    fn a_range_just_large_enough_is_used_up_exactly() {
        let plan = Plan::new(pool(20_000..20_158, Stuck), 2, 50).unwrap();
        let mut ports = all_ports(&plan);
        ports.sort_unstable();
        assert_eq!(ports, (20_000..20_158).collect::<Vec<_>>());
        // Nothing left for a 51st agent or a restart.
        let mut plan = plan;
        let err = plan.renew(Member::Agent(3)).unwrap_err();
        assert!(
            format!("{err:#}").contains("no free loopback port left between 20000 and 20157"),
            "{err:#}"
        );
    }

    #[test]
    fn ports_taken_by_others_are_skipped_and_each_free_one_is_held_until_its_child_starts() {
        let taken: BTreeSet<u16> = (20_000..20_100).step_by(2).collect();
        let holds = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        struct Counted(std::sync::Arc<std::sync::atomic::AtomicUsize>);
        impl Drop for Counted {
            fn drop(&mut self) {
                self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let counter = holds.clone();
        let reserve: Reserve = Box::new(move |addr: SocketAddr, _| {
            if taken.contains(&addr.port()) {
                return None;
            }
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Some(Box::new(Counted(counter.clone())) as Hold)
        });
        let pool = Pool::new(20_000..20_100, Box::new(Stuck), reserve);
        let mut plan = Plan::new(pool, 2, 4).unwrap();
        let ports = all_ports(&plan);
        assert!(ports.iter().all(|p| p % 2 == 1), "{ports:?}");
        assert!(distinct(&ports));
        let load = || holds.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(load(), 2 * 4 + 4 * 3);
        plan.release(Member::Agent(0));
        assert_eq!(load(), 2 * 4 + 3 * 3, "agent 0's three ports let go");
        plan.release(Member::Agent(0));
        assert_eq!(load(), 2 * 4 + 3 * 3);
    }

    #[test]
    fn a_renewed_member_gets_ports_no_one_had_and_the_others_keep_theirs() {
        let mut plan = Plan::new(
            pool(10_000..32_768, rand::rngs::StdRng::seed_from_u64(1)),
            2,
            5,
        )
        .unwrap();
        let before = all_ports(&plan);
        let (agents, coordinators) = (plan.agents.clone(), plan.coordinators.clone());
        plan.renew(Member::Agent(2)).unwrap();
        plan.renew(Member::Coordinator(1)).unwrap();
        for (i, a) in plan.agents.iter().enumerate() {
            assert_eq!(a == &agents[i], i != 2, "agent {i}");
        }
        assert_eq!(plan.coordinators[0], coordinators[0]);
        assert_ne!(plan.coordinators[1], coordinators[1]);
        let renewed: Vec<u16> = [Member::Agent(2), Member::Coordinator(1)]
            .into_iter()
            .flat_map(|m| plan.ports(m))
            .map(|(a, _)| a.port())
            .collect();
        assert!(
            renewed.iter().all(|p| !before.contains(p)),
            "{renewed:?} reuses one of {before:?}"
        );
        assert!(distinct(&all_ports(&plan)));
        // Seeds follow the coordinators' current gossip ports.
        assert_eq!(
            plan.seeds(),
            format!(
                "{},{}",
                plan.coordinators[0].gossip, plan.coordinators[1].gossip
            )
        );
    }

    #[test]
    fn the_consecutive_layout_is_coordinators_then_agents_and_restarts_leave_it() {
        let pool = pool(10_000..32_768, Stuck).consecutive(21_000);
        let mut plan = Plan::new(pool, 2, 3).unwrap();
        assert_eq!(
            all_ports(&plan),
            (21_000..21_000 + 8 + 9).collect::<Vec<_>>()
        );
        assert_eq!(plan.coordinators[1].gossip.port(), 21_004);
        assert_eq!(plan.agents[1].gossip.port(), 21_011);
        plan.renew(Member::Agent(1)).unwrap();
        let renewed: Vec<u16> = plan
            .ports(Member::Agent(1))
            .iter()
            .map(|(a, _)| a.port())
            .collect();
        assert!(
            renewed.iter().all(|p| !(21_000..21_017).contains(p)),
            "{renewed:?}"
        );
        assert_eq!(
            plan.agents[2].gossip.port(),
            21_014,
            "the others keep theirs"
        );
    }

    #[test]
    fn a_consecutive_layout_past_the_last_port_is_refused() {
        let err = Plan::new(pool(10_000..32_768, Stuck).consecutive(65_500), 2, 50)
            .err()
            .unwrap();
        assert!(
            format!("{err:#}").contains("needs 158 consecutive ports"),
            "{err:#}"
        );
        assert!(
            Plan::new(
                pool(10_000..32_768, Stuck).consecutive(u16::MAX - 157),
                2,
                50
            )
            .is_ok()
        );
    }

    #[test]
    fn draws_fall_below_the_ephemeral_range() {
        assert_eq!(below_ephemeral(Some("32768\t60999\n")), 10_000..32_768);
        assert_eq!(below_ephemeral(None), 10_000..32_768);
        assert_eq!(below_ephemeral(Some("nonsense")), 10_000..32_768);
        // A machine whose ephemeral range starts low still gets a range of its own.
        assert_eq!(below_ephemeral(Some("9000 60999")), 7_976..9_000);
    }

    #[test]
    fn next_free_wraps_around_and_skips_handed_and_busy_ports() {
        let handed: BTreeSet<u16> = [105, 106].into();
        assert_eq!(next_free(100..110, 105, &handed, |_| true), Some(107));
        assert_eq!(
            next_free(100..110, 108, &handed, |p| p != 108 && p != 109),
            Some(100)
        );
        assert_eq!(next_free(100..110, 100, &handed, |_| false), None);
        assert_eq!(
            next_free(100..110, 999, &BTreeSet::new(), |_| true),
            Some(109)
        );
        assert_eq!(next_free(7..7, 7, &BTreeSet::new(), |_| true), None);
    }
}
