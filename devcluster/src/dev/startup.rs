//! Starting the dev cluster's agents and coordinators until each holds every port the plan gave
//! it: a child that exits because another program took one of its ports ("Address already in
//! use" in its log) is started again on fresh ports from the plan, instead of failing the whole
//! cluster. Any other exit, or a fourth bind failure in a row, still fails the start.
//!
//! "Holds its ports" is read from the kernel, not from the child's log (which `RUST_LOG` may
//! silence): a listening TCP socket or a bound UDP socket on each planned port, owned by the
//! child's own process (`/proc/<pid>/fd` against `/proc/net/{tcp,udp}[6]`). Both binaries
//! bind every port before they serve anything, so from then on none of its ports can change.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use tokio::time::Instant;

use super::ports::{Member, Plan, Proto};
use telemesh_sim::processes::Processes;

/// Restarts on fresh ports before giving up on a child: each restart's ports were checked free
/// a moment before, so a second clash in a row is already unlikely.
pub const MAX_RESTARTS: u32 = 3;

/// How long every child of one phase gets to bind its ports (a 50-node start binds them within
/// a few seconds on 2 cores).
const BIND_DEADLINE: Duration = Duration::from_secs(120);

const POLL: Duration = Duration::from_millis(100);

/// What the error of a bind to a taken port says (EADDRINUSE's text, in every error chain our
/// binaries log).
const ADDR_IN_USE: &str = "Address already in use";

/// One child to start.
pub struct Spec {
    pub member: Member,
    /// Its name in [`Processes`] and in what the dev cluster says.
    pub name: String,
    pub program: PathBuf,
    pub log: PathBuf,
}

/// What to do about a child that is starting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// It holds every port it was given.
    Bound,
    /// Still on its way.
    Starting,
    /// It could not bind a port someone else holds: start it again on fresh ports.
    Restart,
    /// It exited for another reason, or kept finding its ports taken.
    GiveUp,
}

/// The decision for one child: whether it `exited`, whether it holds all its ports (`bound`),
/// what its current run logged, and how often it was restarted already.
pub fn judge(exited: bool, bound: bool, log: &str, restarts: u32) -> Verdict {
    match (exited, bound) {
        (false, true) => Verdict::Bound,
        (false, false) => Verdict::Starting,
        (true, _) if log.contains(ADDR_IN_USE) && restarts < MAX_RESTARTS => Verdict::Restart,
        (true, _) => Verdict::GiveUp,
    }
}

/// Starts every child of `specs`, released from the plan's hold right before, and waits until
/// each holds its ports, restarting those that cannot bind (saying so through `say`). Returns
/// once all are bound; fails on a child that exits otherwise or after [`BIND_DEADLINE`].
pub async fn start(
    processes: &mut Processes,
    plan: &mut Plan,
    specs: &[Spec],
    args: impl Fn(&Plan, Member) -> Vec<String>,
    say: impl Fn(&str),
) -> anyhow::Result<()> {
    for spec in specs {
        plan.release(spec.member);
        processes.spawn(
            &spec.name,
            &spec.program,
            &args(plan, spec.member),
            &spec.log,
        )?;
    }
    let mut restarts: BTreeMap<Member, u32> = BTreeMap::new();
    let mut pending: Vec<&Spec> = specs.iter().collect();
    let deadline = Instant::now() + BIND_DEADLINE;
    loop {
        let exits: Vec<bool> = pending
            .iter()
            .map(|spec| processes.status(&spec.name).is_some())
            .collect();
        let running: Vec<Option<Running>> = pending
            .iter()
            .zip(&exits)
            .map(|(spec, exited)| {
                let pid = processes.pid(&spec.name).filter(|_| !exited)?;
                Some(Running {
                    pid,
                    ports: plan.ports(spec.member),
                })
            })
            .collect();
        // Reading the kernel's socket tables is a pass over many files: off the runtime.
        let bound = tokio::task::spawn_blocking(move || holding(&running))
            .await
            .context("checking which children hold their ports")?;
        let mut still = Vec::new();
        for ((spec, exited), bound) in pending.into_iter().zip(exits).zip(bound) {
            let log = if exited {
                std::fs::read_to_string(&spec.log).unwrap_or_default()
            } else {
                String::new()
            };
            let tried = restarts.get(&spec.member).copied().unwrap_or(0);
            match judge(exited, bound, &log, tried) {
                Verdict::Bound => {}
                Verdict::Starting => still.push(spec),
                Verdict::Restart => {
                    let old = ports_text(plan, spec.member);
                    plan.renew(spec.member)?;
                    plan.release(spec.member);
                    let kept = processes.respawn(&spec.name, &args(plan, spec.member))?;
                    restarts.insert(spec.member, tried + 1);
                    // The terminal hears it from the story; this is for RUST_LOG=debug.
                    tracing::debug!(
                        child = %spec.name,
                        old = %old,
                        new = %ports_text(plan, spec.member),
                        "a port was taken by another program; restarted on fresh ports"
                    );
                    say(&format!(
                        "{} could not bind one of {old} (Address already in use: another program \
                         took it); restarted on {} (the failed run's log: {})",
                        spec.name,
                        ports_text(plan, spec.member),
                        kept.display()
                    ));
                    still.push(spec);
                }
                Verdict::GiveUp => {
                    let status = processes
                        .status(&spec.name)
                        .map(|s| s.to_string())
                        .unwrap_or_default();
                    bail!(
                        "{} exited ({status}) while starting{}; its log: {}\n{}",
                        spec.name,
                        if tried >= MAX_RESTARTS && log.contains(ADDR_IN_USE) {
                            format!(", finding its ports taken {} times in a row", tried + 1)
                        } else {
                            String::new()
                        },
                        spec.log.display(),
                        tail(&log, 3)
                    );
                }
            }
        }
        if still.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            let names: Vec<&str> = still.iter().map(|s| s.name.as_str()).collect();
            bail!(
                "{} did not bind their ports within {BIND_DEADLINE:?}; see their logs in {}",
                names.join(", "),
                still[0]
                    .log
                    .parent()
                    .unwrap_or(Path::new("logs/"))
                    .display()
            );
        }
        pending = still;
        tokio::time::sleep(POLL).await;
    }
}

fn ports_text(plan: &Plan, member: Member) -> String {
    plan.ports(member)
        .iter()
        .map(|(addr, proto)| format!("{addr}/{proto}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The last `n` lines of `log`, without the terminal colours of a text log.
fn tail(log: &str, n: usize) -> String {
    let lines: Vec<&str> = log.lines().collect();
    let mut tail = lines[lines.len().saturating_sub(n)..].join("\n");
    // SGR sequences: ESC [ parameters m.
    while let Some(start) = tail.find("\u{1b}[") {
        let Some(len) = tail[start..].find('m') else {
            break;
        };
        tail.replace_range(start..=start + len, "");
    }
    tail
}

/// A running child and the ports it was given.
struct Running {
    pid: u32,
    ports: Vec<(SocketAddr, Proto)>,
}

/// For each child, whether it runs and holds a socket on each of its ports (listening, for
/// TCP).
fn holding(children: &[Option<Running>]) -> Vec<bool> {
    let mut bound: BTreeMap<u64, (u16, Proto)> = BTreeMap::new();
    for (table, proto) in [
        ("tcp", Proto::Tcp),
        ("tcp6", Proto::Tcp),
        ("udp", Proto::Udp),
        ("udp6", Proto::Udp),
    ] {
        let text = std::fs::read_to_string(format!("/proc/net/{table}")).unwrap_or_default();
        bound.extend(
            bound_sockets(&text, proto)
                .into_iter()
                .map(|(port, inode)| (inode, (port, proto))),
        );
    }
    children
        .iter()
        .map(|child| {
            let Some(Running { pid, ports }) = child else {
                return false;
            };
            let held: BTreeSet<(u16, Proto)> = socket_inodes(*pid)
                .iter()
                .filter_map(|inode| bound.get(inode).copied())
                .collect();
            ports
                .iter()
                .all(|(addr, proto)| held.contains(&(addr.port(), *proto)))
        })
        .collect()
}

/// The inodes of the sockets process `pid` has open (`/proc/<pid>/fd/N -> socket:[inode]`).
fn socket_inodes(pid: u32) -> BTreeSet<u64> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return BTreeSet::new();
    };
    fds.filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|target| {
            target
                .to_str()?
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect()
}

/// The (local port, inode) of each socket in a `/proc/net/{tcp,udp}[6]` table that is bound
/// for serving: TCP in LISTEN (state 0A), any UDP socket.
pub fn bound_sockets(table: &str, proto: Proto) -> Vec<(u16, u64)> {
    const TCP_LISTEN: &str = "0A";
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local = fields.get(1)?;
            let state = fields.get(3)?;
            if proto == Proto::Tcp && *state != TCP_LISTEN {
                return None;
            }
            let port = u16::from_str_radix(local.rsplit_once(':')?.1, 16).ok()?;
            let inode = fields.get(9)?.parse().ok()?;
            Some((port, inode))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const IN_USE_LOG: &str = "2026-11-28T16:15:26Z ERROR telemesh_agent: agent failed to start \
        error=starting gossip: cannot bind gossip socket 127.0.0.1:13470/UDP: Address already in \
        use (os error 98); is the port in use? pick another --gossip-listen";

    #[test]
    fn a_child_that_holds_its_ports_is_up_and_one_that_does_not_yet_is_waited_for() {
        assert_eq!(judge(false, true, "", 0), Verdict::Bound);
        assert_eq!(judge(false, false, "", 0), Verdict::Starting);
        // A running child is never restarted, whatever its log says.
        assert_eq!(judge(false, false, IN_USE_LOG, 0), Verdict::Starting);
    }

    #[test]
    fn a_child_that_exits_on_a_taken_port_is_restarted_up_to_three_times() {
        for tried in 0..MAX_RESTARTS {
            assert_eq!(judge(true, false, IN_USE_LOG, tried), Verdict::Restart);
        }
        assert_eq!(
            judge(true, false, IN_USE_LOG, MAX_RESTARTS),
            Verdict::GiveUp
        );
    }

    #[test]
    fn a_child_that_exits_for_another_reason_fails_the_start() {
        let log = "ERROR telemesh_agent: invalid configuration error=--quic-cert: no such file";
        assert_eq!(judge(true, false, log, 0), Verdict::GiveUp);
        assert_eq!(judge(true, false, "", 0), Verdict::GiveUp);
        // The coordinator's own wording for a taken TCP port carries the OS text too.
        let coordinator = "coordinator did not start error=cannot listen on 127.0.0.1:20911; is \
            the port in use? pick another --extender-listen: Address already in use (os error 98)";
        assert_eq!(judge(true, false, coordinator, 0), Verdict::Restart);
    }

    #[test]
    fn the_kernel_tables_give_listening_tcp_and_bound_udp_sockets() {
        let tcp = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:4F49 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1234 1 0000000000000000 100 0 0 10 0
   1: 0100007F:4F4A 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 5678 1 0000000000000000 20 4 30 10 -1
";
        assert_eq!(bound_sockets(tcp, Proto::Tcp), vec![(0x4F49, 1234)]);
        let udp6 = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  12: 0000000000000000FFFF00000100007F:3458 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 99 2 0000000000000000 0
";
        assert_eq!(bound_sockets(udp6, Proto::Udp), vec![(0x3458, 99)]);
        assert_eq!(bound_sockets("header only\n", Proto::Udp), vec![]);
        assert_eq!(bound_sockets("", Proto::Tcp), vec![]);
    }

    #[test]
    fn this_process_holds_the_ports_it_bound_and_not_others() {
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let (t, u) = (tcp.local_addr().unwrap(), udp.local_addr().unwrap());
        let me = |ports: Vec<(SocketAddr, Proto)>| {
            Some(Running {
                pid: std::process::id(),
                ports,
            })
        };
        let both = vec![(t, Proto::Tcp), (u, Proto::Udp)];
        // A TCP port held only as UDP is not held; a child not running holds nothing.
        assert_eq!(
            holding(&[me(both.clone()), me(vec![(t, Proto::Udp)]), None]),
            vec![true, false, false]
        );
        drop(tcp);
        assert_eq!(holding(&[me(both)]), vec![false]);
    }

    #[test]
    fn the_tail_is_the_last_lines_without_colours() {
        assert_eq!(tail("a\nb\nc", 2), "b\nc");
        assert_eq!(tail("a", 5), "a");
        assert_eq!(
            tail("\u{1b}[2m2026\u{1b}[0m \u{1b}[31mERROR\u{1b}[0m gone", 1),
            "2026 ERROR gone"
        );
        assert_eq!(tail("cut \u{1b}[2", 1), "cut \u{1b}[2");
    }
}
