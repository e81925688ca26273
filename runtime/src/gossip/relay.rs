//! The sealed transport adapter: chitchat's own UDP socket on loopback, relayed through a public
//! socket we own that seals and opens every datagram.
//!
//! chitchat 0.13 keeps its envelope codec crate-private, so a custom `Socket` never sees bytes it
//! could seal. Instead chitchat runs its own [`chitchat::transport::UdpSocket`] (the *inner*
//! socket) on `127.0.0.1:0`, and for each remote peer P this module keeps a loopback *relay*
//! socket R_P:
//!
//! ```text
//!  chitchat ──send(P)──▶ [RelaySocket maps P→R_P] ──inner.send(R_P)──▶ R_P ─seal─▶ public ──▶ P
//!  chitchat ◀─recv(P)── [RelaySocket maps R_P→P] ◀──inner.recv()───── R_P ◀─open── public ◀── P
//! ```
//!
//! A datagram that does not open, or that opens but is stale or a replay ([`super::replay`]), is
//! dropped and counted by reason; so is anything reaching the inner or a relay socket from an
//! address that is not ours. Every fresh sealed datagram also gives a clock-offset sample of its
//! sender ([`super::clock`]), which corrects the transport's [`ClusterClock`]. Relays are bounded
//! ([`RelayConfig::max_peers`], least recently used closed first) and closed when idle. Plain
//! mode (`--insecure-gossip`) runs the same path without sealing. Counting happens here, where
//! the events happen; [`TransportCounters`] is shared with whoever exports metrics.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use anyhow::Context as _;
use chitchat::ChitchatEnvelope;
use chitchat::transport::{RecvOutcome, SendOutcome, Socket, Transport};
use tokio::net::UdpSocket;
use tokio::sync::watch;

use super::AbortOnDrop;
use super::clock::ClusterClock;
use super::replay::{ReplayConfig, ReplayGuard, Verdict};
use super::seal::{MAX_DATAGRAM, OpenError, SealError, Sealer};

/// Receive buffers hold any UDP payload.
const RECV_BUF: usize = 65_536;

/// How datagrams are protected on the wire.
#[derive(Clone, Debug)]
pub enum Protection {
    /// Sealed with the keyring (the default).
    Sealed(Sealer),
    /// Passed through unchanged: `--insecure-gossip`, for dev clusters only.
    Plain,
}

/// Limits of the relay table.
#[derive(Clone, Debug)]
pub struct RelayConfig {
    /// Most peers with a relay socket at once; past it, the least recently used is closed.
    pub max_peers: usize,
    /// A relay unused for this long is closed (it reopens on the next datagram).
    pub idle_timeout: Duration,
    /// Replay window and cache bound (sealed transports).
    pub replay: ReplayConfig,
}

impl Default for RelayConfig {
    fn default() -> Self {
        Self {
            max_peers: 1024,
            idle_timeout: Duration::from_secs(60),
            replay: ReplayConfig::default(),
        }
    }
}

/// Why a datagram was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Received, shorter than a sealed frame.
    TooShort,
    /// Received, with an unknown frame version.
    BadVersion,
    /// Received, and no key of the keyring opens it (wrong key, other cluster, tampering).
    NoKeyOpens,
    /// To send, but larger than one UDP datagram once sealed.
    Oversize,
    /// Reached a loopback socket from an address that is not ours.
    UnknownSource,
    /// The operating system refused to send it.
    SendFailed,
    /// No relay socket could be opened for the peer (out of file descriptors?).
    RelayUnavailable,
    /// The random generator failed to make a nonce.
    SealFailed,
    /// Received, opened, and its nonce was seen before inside the replay window.
    Replayed,
    /// Received, opened, and sent outside the replay window (a replay of an old datagram, or a
    /// sender whose clock is off by more than the window).
    Stale,
}

// === impl DropReason ===

impl DropReason {
    /// Every reason, in counter order.
    pub const ALL: [Self; 10] = [
        Self::TooShort,
        Self::BadVersion,
        Self::NoKeyOpens,
        Self::Oversize,
        Self::UnknownSource,
        Self::SendFailed,
        Self::RelayUnavailable,
        Self::SealFailed,
        Self::Replayed,
        Self::Stale,
    ];

    /// A bounded label for metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TooShort => "too_short",
            Self::BadVersion => "bad_version",
            Self::NoKeyOpens => "no_key_opens",
            Self::Oversize => "oversize",
            Self::UnknownSource => "unknown_source",
            Self::SendFailed => "send_failed",
            Self::RelayUnavailable => "relay_unavailable",
            Self::SealFailed => "seal_failed",
            Self::Replayed => "replayed",
            Self::Stale => "stale",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl From<OpenError> for DropReason {
    fn from(e: OpenError) -> Self {
        match e {
            OpenError::TooShort { .. } => Self::TooShort,
            OpenError::BadVersion { .. } => Self::BadVersion,
            OpenError::NoKeyOpens => Self::NoKeyOpens,
        }
    }
}

/// Live counters of one gossip transport, updated where the events happen.
#[derive(Debug, Default)]
pub struct TransportCounters {
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    datagrams_in: AtomicU64,
    datagrams_out: AtomicU64,
    relays_opened: AtomicU64,
    relays_closed: AtomicU64,
    relays_evicted: AtomicU64,
    v1_frames: AtomicU64,
    dropped: [AtomicU64; DropReason::ALL.len()],
}

/// A copy of [`TransportCounters`] at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TransportStats {
    /// Bytes received on the public socket, as on the wire (sealed).
    pub bytes_in: u64,
    /// Bytes sent from the public socket, as on the wire (sealed).
    pub bytes_out: u64,
    /// Datagrams received on the public socket.
    pub datagrams_in: u64,
    /// Datagrams sent from the public socket.
    pub datagrams_out: u64,
    /// Relay sockets open now (peers recently talked to).
    pub relays_open: u64,
    /// Relays closed because the table was full.
    pub relays_evicted: u64,
    /// Version 1 frames (no replay check) opened during a rolling upgrade.
    pub v1_frames: u64,
    /// Drops by reason, indexed like [`DropReason::ALL`].
    pub dropped: [u64; DropReason::ALL.len()],
}

/// Adds another member's figures (a coordinator replica's cells, reported as one transport).
impl std::ops::AddAssign<&TransportStats> for TransportStats {
    fn add_assign(&mut self, other: &TransportStats) {
        self.bytes_in += other.bytes_in;
        self.bytes_out += other.bytes_out;
        self.datagrams_in += other.datagrams_in;
        self.datagrams_out += other.datagrams_out;
        self.relays_open += other.relays_open;
        self.relays_evicted += other.relays_evicted;
        self.v1_frames += other.v1_frames;
        for (mine, theirs) in self.dropped.iter_mut().zip(other.dropped) {
            *mine += theirs;
        }
    }
}

// === impl TransportCounters ===

impl TransportCounters {
    /// Returns a copy of every counter.
    pub fn snapshot(&self) -> TransportStats {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        TransportStats {
            bytes_in: load(&self.bytes_in),
            bytes_out: load(&self.bytes_out),
            datagrams_in: load(&self.datagrams_in),
            datagrams_out: load(&self.datagrams_out),
            relays_open: load(&self.relays_opened).saturating_sub(load(&self.relays_closed)),
            relays_evicted: load(&self.relays_evicted),
            v1_frames: load(&self.v1_frames),
            dropped: std::array::from_fn(|i| load(&self.dropped[i])),
        }
    }

    /// Returns how many datagrams were dropped for `reason`.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.dropped[reason.index()].load(Ordering::Relaxed)
    }

    /// Counts and logs one dropped datagram; the first of each reason is a warning.
    fn drop_datagram(&self, reason: DropReason, peer: SocketAddr) {
        let before = self.dropped[reason.index()].fetch_add(1, Ordering::Relaxed);
        if before == 0 {
            tracing::warn!(
                peer.addr = %peer,
                reason = reason.as_str(),
                "gossip datagram dropped; further drops are counted and logged at debug"
            );
        } else {
            tracing::debug!(peer.addr = %peer, reason = reason.as_str(), "gossip datagram dropped");
        }
    }

    fn received(&self, len: usize) {
        self.bytes_in.fetch_add(len as u64, Ordering::Relaxed);
        self.datagrams_in.fetch_add(1, Ordering::Relaxed);
    }

    fn sent(&self, len: usize) {
        self.bytes_out.fetch_add(len as u64, Ordering::Relaxed);
        self.datagrams_out.fetch_add(1, Ordering::Relaxed);
    }
}

impl TransportStats {
    /// Returns how many datagrams were dropped for `reason`.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.dropped[reason.index()]
    }
}

/// A chitchat [`Transport`] that seals (or, in plain mode, just relays) every datagram through a
/// public socket this module owns.
pub struct RelayTransport {
    protection: Protection,
    config: RelayConfig,
    counters: Arc<TransportCounters>,
    clock: ClusterClock,
    prebound: Mutex<Option<std::net::UdpSocket>>,
}

// === impl RelayTransport ===

impl RelayTransport {
    /// Creates a transport; chitchat opens it with its listen address.
    pub fn new(protection: Protection, config: RelayConfig) -> Self {
        Self {
            protection,
            config,
            counters: Arc::default(),
            clock: ClusterClock::default(),
            prebound: Mutex::new(None),
        }
    }

    /// Uses `clock`: its local clock stamps and judges frames, and its correction follows the
    /// peers' send times.
    pub fn with_clock(mut self, clock: ClusterClock) -> Self {
        self.clock = clock;
        self
    }

    /// Returns the counters every socket opened by this transport updates.
    pub fn counters(&self) -> Arc<TransportCounters> {
        self.counters.clone()
    }

    /// Binds the public socket now and returns its address (port 0 gives a free port); the next
    /// `open` of that address uses it.
    pub fn prebind(&self, addr: SocketAddr) -> io::Result<SocketAddr> {
        let socket = std::net::UdpSocket::bind(addr)?;
        let bound = socket.local_addr()?;
        *self.prebound.lock().unwrap_or_else(PoisonError::into_inner) = Some(socket);
        Ok(bound)
    }

    fn take_prebound(&self, addr: SocketAddr) -> Option<std::net::UdpSocket> {
        let mut slot = self.prebound.lock().unwrap_or_else(PoisonError::into_inner);
        match &*slot {
            Some(s) if s.local_addr().ok() == Some(addr) => slot.take(),
            _ => None,
        }
    }

    async fn open_socket(&self, listen_addr: SocketAddr) -> anyhow::Result<RelaySocket> {
        let public = match self.take_prebound(listen_addr) {
            Some(std_socket) => {
                std_socket.set_nonblocking(true)?;
                UdpSocket::from_std(std_socket)?
            }
            None => UdpSocket::bind(listen_addr)
                .await
                .with_context(|| format!("cannot bind gossip socket {listen_addr}/UDP"))?,
        };
        let public_addr = public.local_addr()?;
        let inner =
            chitchat::transport::UdpSocket::open(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
                .await?;
        let inner_addr = inner.local_addr()?;
        let plumbing = Arc::new(Plumbing {
            protection: self.protection.clone(),
            counters: self.counters.clone(),
            public,
            inner_addr,
            epoch: tokio::time::Instant::now(),
            clock: self.clock.clone(),
            replay: Mutex::new(ReplayGuard::new(self.config.replay)),
            scratch: Mutex::new(Scratch {
                buf: vec![0; RECV_BUF],
                frame: Vec::with_capacity(RECV_BUF),
            }),
        });
        let relays = Arc::new(Relays {
            plumbing,
            config: self.config.clone(),
            table: Mutex::default(),
        });
        let (fatal_tx, fatal_rx) = watch::channel(None);
        let every = (self.config.idle_timeout / 4).max(Duration::from_millis(50));
        let tasks = [
            AbortOnDrop(tokio::spawn(relay_in(relays.clone(), fatal_tx))),
            AbortOnDrop(tokio::spawn(close_idle(Arc::downgrade(&relays), every))),
        ];
        tracing::info!(
            gossip.addr = %public_addr,
            sealed = matches!(self.protection, Protection::Sealed(_)),
            "gossip transport open"
        );
        Ok(RelaySocket {
            inner,
            relays,
            public_addr,
            fatal: fatal_rx,
            _tasks: tasks,
        })
    }
}

impl Transport for RelayTransport {
    fn open<'life0, 'async_trait>(
        &'life0 self,
        listen_addr: SocketAddr,
    ) -> Pin<Box<dyn Future<Output = anyhow::Result<Box<dyn Socket>>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            let socket: Box<dyn Socket> = Box::new(self.open_socket(listen_addr).await?);
            Ok(socket)
        })
    }
}

/// What relay tasks share: immutable after open, apart from the counters.
struct Plumbing {
    protection: Protection,
    counters: Arc<TransportCounters>,
    public: UdpSocket,
    inner_addr: SocketAddr,
    epoch: tokio::time::Instant,
    clock: ClusterClock,
    replay: Mutex<ReplayGuard>,
    scratch: Mutex<Scratch>,
}

impl Plumbing {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Judges an opened frame's stamp: replayed or stale ones are refused; a fresh one is
    /// remembered and gives a clock sample of `peer`. Version 1 frames (no stamp) pass, counted.
    fn admit(&self, stamp: Option<super::seal::Stamp>, peer: SocketAddr) -> Result<(), DropReason> {
        let Some(stamp) = stamp else {
            self.counters.v1_frames.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        };
        let now_ms = self.clock.local().now_ms();
        let verdict = self
            .replay
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .check(stamp.sent_ms, stamp.nonce, now_ms);
        match verdict {
            Verdict::Replayed => return Err(DropReason::Replayed),
            Verdict::Stale => return Err(DropReason::Stale),
            Verdict::Fresh => {}
        }
        if let Some(previous) = self.clock.sample(peer, stamp.sent_ms, now_ms) {
            tracing::info!(
                correction_ms = self.clock.correction_ms(),
                previous_ms = previous,
                "clock offset from the gossip peers changed; figures are stamped and aged in cluster time"
            );
        }
        Ok(())
    }

    /// Seals (or not) one datagram from chitchat and sends it to `peer` from the public socket,
    /// without waiting: a full send buffer drops the datagram, as the network would.
    fn send_out(&self, plaintext: &[u8], peer: SocketAddr, frame: &mut Vec<u8>) {
        let bytes: &[u8] = match &self.protection {
            Protection::Plain => plaintext,
            Protection::Sealed(sealer) => {
                match sealer.seal(plaintext, self.clock.local().now_ms(), frame) {
                    Ok(()) => frame,
                    Err(SealError::TooLarge { .. }) => {
                        return self.counters.drop_datagram(DropReason::Oversize, peer);
                    }
                    Err(SealError::Random) => {
                        return self.counters.drop_datagram(DropReason::SealFailed, peer);
                    }
                }
            }
        };
        if bytes.len() > MAX_DATAGRAM {
            return self.counters.drop_datagram(DropReason::Oversize, peer);
        }
        match self.public.try_send_to(bytes, peer) {
            Ok(n) => self.counters.sent(n),
            Err(error) => {
                tracing::debug!(peer.addr = %peer, ?error, "gossip send failed");
                self.counters.drop_datagram(DropReason::SendFailed, peer);
            }
        }
    }
}

/// The outbound scratch space shared by a transport's relay tasks.
struct Scratch {
    buf: Vec<u8>,
    frame: Vec<u8>,
}

/// One peer's loopback relay socket.
struct Relay {
    socket: Arc<UdpSocket>,
    addr: SocketAddr,
    last_used: Arc<AtomicU64>,
    _task: AbortOnDrop,
}

#[derive(Default)]
struct Table {
    by_peer: HashMap<SocketAddr, Relay>,
    /// Relay address → peer address.
    peer_of: HashMap<SocketAddr, SocketAddr>,
}

/// The relay table of one open transport.
struct Relays {
    plumbing: Arc<Plumbing>,
    config: RelayConfig,
    table: Mutex<Table>,
}

impl Relays {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Returns the peer's relay socket and address, opening one if needed.
    fn get_or_open(&self, peer: SocketAddr) -> Option<(Arc<UdpSocket>, SocketAddr)> {
        let now = self.plumbing.now_ms();
        let mut table = self.lock();
        if let Some(relay) = table.by_peer.get(&peer) {
            relay.last_used.store(now, Ordering::Relaxed);
            return Some((relay.socket.clone(), relay.addr));
        }
        while table.by_peer.len() >= self.config.max_peers.max(1) {
            let lru = table
                .by_peer
                .iter()
                .min_by_key(|(_, r)| r.last_used.load(Ordering::Relaxed))
                .map(|(p, _)| *p)?;
            self.close(&mut table, lru);
            self.plumbing
                .counters
                .relays_evicted
                .fetch_add(1, Ordering::Relaxed);
        }
        let relay = match self.open_relay(peer, now) {
            Ok(relay) => relay,
            Err(error) => {
                tracing::warn!(peer.addr = %peer, ?error, "cannot open a gossip relay socket");
                return None;
            }
        };
        let found = (relay.socket.clone(), relay.addr);
        table.peer_of.insert(relay.addr, peer);
        table.by_peer.insert(peer, relay);
        self.plumbing
            .counters
            .relays_opened
            .fetch_add(1, Ordering::Relaxed);
        Some(found)
    }

    fn open_relay(&self, peer: SocketAddr, now: u64) -> io::Result<Relay> {
        let std_socket = std::net::UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?;
        std_socket.set_nonblocking(true)?;
        let socket = Arc::new(UdpSocket::from_std(std_socket)?);
        let addr = socket.local_addr()?;
        let last_used = Arc::new(AtomicU64::new(now));
        let task = tokio::spawn(relay_out(
            socket.clone(),
            peer,
            last_used.clone(),
            self.plumbing.clone(),
        ));
        Ok(Relay {
            socket,
            addr,
            last_used,
            _task: AbortOnDrop(task),
        })
    }

    fn peer_of(&self, relay_addr: SocketAddr) -> Option<SocketAddr> {
        self.lock().peer_of.get(&relay_addr).copied()
    }

    fn close(&self, table: &mut Table, peer: SocketAddr) {
        if let Some(relay) = table.by_peer.remove(&peer) {
            table.peer_of.remove(&relay.addr);
            self.plumbing
                .counters
                .relays_closed
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    fn close_idle(&self) {
        let idle_ms = u64::try_from(self.config.idle_timeout.as_millis()).unwrap_or(u64::MAX);
        let now = self.plumbing.now_ms();
        let mut table = self.lock();
        let idle: Vec<SocketAddr> = table
            .by_peer
            .iter()
            .filter(|(_, r)| now.saturating_sub(r.last_used.load(Ordering::Relaxed)) >= idle_ms)
            .map(|(p, _)| *p)
            .collect();
        for peer in idle {
            self.close(&mut table, peer);
        }
    }

    fn close_all(&self) {
        let mut table = self.lock();
        let peers: Vec<SocketAddr> = table.by_peer.keys().copied().collect();
        for peer in peers {
            self.close(&mut table, peer);
        }
    }
}

/// Errors a UDP socket survives (an ICMP error reported on a later call, a full buffer).
fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::OutOfMemory
    )
}

/// Outbound: what chitchat sends to R_P goes, sealed, from the public socket to P.
///
/// Relay tasks own no buffer: each drains its socket without awaiting into the transport's
/// one scratch buffer, so a thousand relays cost sockets, not a thousand 64 KiB buffers.
async fn relay_out(
    socket: Arc<UdpSocket>,
    peer: SocketAddr,
    last_used: Arc<AtomicU64>,
    plumbing: Arc<Plumbing>,
) {
    loop {
        if let Err(error) = socket.readable().await {
            tracing::warn!(peer.addr = %peer, ?error, "gossip relay socket failed; it stays closed until idle");
            return;
        }
        loop {
            let mut scratch = plumbing
                .scratch
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let Scratch { buf, frame } = &mut *scratch;
            let (n, from) = match socket.try_recv_from(buf) {
                Ok(received) => received,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if is_transient(&e) => continue,
                Err(error) => {
                    tracing::warn!(peer.addr = %peer, ?error, "gossip relay socket failed; it stays closed until idle");
                    return;
                }
            };
            if from != plumbing.inner_addr {
                plumbing
                    .counters
                    .drop_datagram(DropReason::UnknownSource, from);
                continue;
            }
            last_used.store(plumbing.now_ms(), Ordering::Relaxed);
            plumbing.send_out(&buf[..n], peer, frame);
        }
    }
}

/// Inbound: what P sends to the public socket is opened and forwarded from R_P to chitchat.
async fn relay_in(relays: Arc<Relays>, fatal: watch::Sender<Option<String>>) {
    let plumbing = relays.plumbing.clone();
    let mut buf = vec![0u8; RECV_BUF];
    let mut opened = Vec::with_capacity(RECV_BUF);
    loop {
        let (n, from) = match plumbing.public.recv_from(&mut buf).await {
            Ok(received) => received,
            Err(e) if is_transient(&e) => continue,
            Err(error) => {
                tracing::error!(?error, "gossip socket failed; gossip stops");
                let _ = fatal.send(Some(error.to_string()));
                return;
            }
        };
        plumbing.counters.received(n);
        let datagram: &[u8] = match &plumbing.protection {
            Protection::Plain => &buf[..n],
            Protection::Sealed(sealer) => match sealer.open(&buf[..n], &mut opened) {
                Ok(frame) => match plumbing.admit(frame.stamp, from) {
                    Ok(()) => frame.plain,
                    Err(reason) => {
                        plumbing.counters.drop_datagram(reason, from);
                        continue;
                    }
                },
                Err(e) => {
                    plumbing.counters.drop_datagram(e.into(), from);
                    continue;
                }
            },
        };
        let Some((relay, _)) = relays.get_or_open(from) else {
            plumbing
                .counters
                .drop_datagram(DropReason::RelayUnavailable, from);
            continue;
        };
        if let Err(error) = relay.send_to(datagram, plumbing.inner_addr).await {
            tracing::debug!(peer.addr = %from, ?error, "gossip relay to chitchat failed");
            plumbing
                .counters
                .drop_datagram(DropReason::SendFailed, from);
        }
    }
}

async fn close_idle(relays: Weak<Relays>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(relays) = relays.upgrade() else {
            return;
        };
        relays.close_idle();
    }
}

/// The socket chitchat's server uses: its inner UDP socket with peer addresses mapped.
struct RelaySocket {
    inner: chitchat::transport::UdpSocket,
    relays: Arc<Relays>,
    public_addr: SocketAddr,
    fatal: watch::Receiver<Option<String>>,
    _tasks: [AbortOnDrop; 2],
}

impl Drop for RelaySocket {
    fn drop(&mut self) {
        self.relays.close_all();
    }
}

impl Socket for RelaySocket {
    fn local_addr(&self) -> anyhow::Result<SocketAddr> {
        Ok(self.public_addr)
    }

    fn send<'life0, 'async_trait>(
        &'life0 mut self,
        to: SocketAddr,
        envelope: ChitchatEnvelope,
    ) -> Pin<Box<dyn Future<Output = anyhow::Result<SendOutcome>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            let Some((_, relay_addr)) = self.relays.get_or_open(to) else {
                self.relays
                    .plumbing
                    .counters
                    .drop_datagram(DropReason::RelayUnavailable, to);
                return Ok(SendOutcome { num_bytes_sent: 0 });
            };
            self.inner.send(relay_addr, envelope).await
        })
    }

    fn recv<'life0, 'async_trait>(
        &'life0 mut self,
    ) -> Pin<Box<dyn Future<Output = anyhow::Result<RecvOutcome>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            loop {
                let outcome = tokio::select! {
                    _ = self.fatal.changed() => {
                        let reason = self.fatal.borrow().clone().unwrap_or_else(|| "relay stopped".into());
                        anyhow::bail!("gossip socket {} failed: {reason}", self.public_addr);
                    }
                    outcome = self.inner.recv() => outcome?,
                };
                match self.relays.peer_of(outcome.from_addr) {
                    Some(peer) => {
                        return Ok(RecvOutcome {
                            from_addr: peer,
                            ..outcome
                        });
                    }
                    None => self
                        .relays
                        .plumbing
                        .counters
                        .drop_datagram(DropReason::UnknownSource, outcome.from_addr),
                }
            }
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::gossip::keyring::Keyring;

    fn sealed(key: u8) -> Protection {
        Protection::Sealed(Sealer::new(
            Keyring::from_keys(&[[key; 32]]).unwrap(),
            "mesh",
        ))
    }

    async fn open(
        protection: Protection,
        config: RelayConfig,
    ) -> (RelaySocket, Arc<TransportCounters>) {
        let transport = RelayTransport::new(protection, config);
        let socket = transport
            .open_socket("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        (socket, transport.counters())
    }

    #[test]
    fn drop_reasons_are_indexed_in_order() {
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
        }
    }

    #[tokio::test]
    async fn junk_on_the_public_socket_is_counted_by_reason() {
        let (socket, counters) = open(sealed(1), RelayConfig::default()).await;
        let probe = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        probe.send_to(b"short", socket.public_addr).await.unwrap();
        let mut bad_version = vec![9u8; 64];
        probe
            .send_to(&bad_version, socket.public_addr)
            .await
            .unwrap();
        bad_version[0] = crate::gossip::seal::FRAME_VERSION;
        probe
            .send_to(&bad_version, socket.public_addr)
            .await
            .unwrap();
        crate::testing::eventually("three drops", Duration::from_secs(5), || {
            let s = counters.snapshot();
            let done = s.dropped(DropReason::TooShort) == 1
                && s.dropped(DropReason::BadVersion) == 1
                && s.dropped(DropReason::NoKeyOpens) == 1;
            async move { done.then_some(()) }
        })
        .await;
        let s = counters.snapshot();
        assert_eq!(s.datagrams_in, 3);
        assert_eq!(s.bytes_in, 5 + 64 + 64);
        assert_eq!(s.relays_open, 0, "datagrams that do not open open no relay");
    }

    #[tokio::test]
    async fn replayed_and_stale_datagrams_are_dropped_and_fresh_ones_kept() {
        let (socket, counters) = open(sealed(1), RelayConfig::default()).await;
        let Protection::Sealed(peer) = sealed(1) else {
            unreachable!()
        };
        let now = crate::gossip::clock::LocalClock::default().now_ms();
        let mut fresh = Vec::new();
        peer.seal(b"syn", now, &mut fresh).unwrap();
        let mut stale = Vec::new();
        peer.seal(b"old syn", now - 6 * 60 * 1_000, &mut stale)
            .unwrap();
        let probe = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        for frame in [&fresh, &fresh, &stale, &fresh] {
            probe.send_to(frame, socket.public_addr).await.unwrap();
        }
        crate::testing::eventually("replays and stale dropped", Duration::from_secs(5), || {
            let s = counters.snapshot();
            let done = s.dropped(DropReason::Replayed) == 2 && s.dropped(DropReason::Stale) == 1;
            async move { done.then_some(()) }
        })
        .await;
        let s = counters.snapshot();
        assert_eq!(s.datagrams_in, 4);
        assert_eq!(
            s.relays_open, 1,
            "the fresh datagram went through to chitchat"
        );
        let dropped: u64 = s.dropped.iter().sum();
        assert_eq!(dropped, 3, "only the replays and the stale one: {s:?}");
    }

    #[tokio::test]
    async fn relays_are_bounded_and_closed_when_idle() {
        let config = RelayConfig {
            max_peers: 2,
            idle_timeout: Duration::from_millis(200),
            ..RelayConfig::default()
        };
        let (socket, counters) = open(Protection::Plain, config).await;
        for port in [1001u16, 1002, 1003] {
            socket
                .relays
                .get_or_open(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
                .unwrap();
        }
        let s = counters.snapshot();
        assert_eq!(s.relays_open, 2);
        assert_eq!(s.relays_evicted, 1);
        crate::testing::eventually("idle relays closed", Duration::from_secs(5), || {
            let open = counters.snapshot().relays_open;
            async move { (open == 0).then_some(()) }
        })
        .await;
    }

    #[tokio::test]
    async fn strangers_cannot_inject_through_a_relay() {
        let (socket, counters) = open(sealed(1), RelayConfig::default()).await;
        let (_, relay_addr) = socket
            .relays
            .get_or_open("127.0.0.1:9".parse().unwrap())
            .unwrap();
        let probe = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        probe.send_to(b"forged", relay_addr).await.unwrap();
        crate::testing::eventually("stranger dropped", Duration::from_secs(5), || {
            let n = counters.dropped(DropReason::UnknownSource);
            async move { (n == 1).then_some(()) }
        })
        .await;
        assert_eq!(counters.snapshot().datagrams_out, 0);
    }
}
