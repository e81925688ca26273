//! Command-line groups shared by every Telemesh binary (`#[command(flatten)]` them in).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use telemesh_core::gossip::{Cell, Cells, CellsError, Role};

use crate::gossip::{
    ClusterClock, GossipConfig, Keyring, KeyringError, LocalClock, ReplayConfig, Security, V1Frames,
};

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line, for log pipelines.
    Json,
}

/// Flags every binary takes.
#[derive(Debug, Clone, clap::Args)]
pub struct CommonArgs {
    /// Path to a kubeconfig; else $KUBECONFIG (or ~/.kube/config), else the in-cluster service
    /// account.
    #[arg(long, env = "TELEMESH_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Log line format.
    #[arg(long, env = "TELEMESH_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// Gossip flags the agent and the coordinator share (each keeps its own `--gossip-listen`, whose
/// default port differs so both run on one host in the dev cluster).
#[derive(Debug, Clone, clap::Args)]
pub struct GossipArgs {
    /// Address peers reach this member's gossip at; defaults to --gossip-listen.
    #[arg(long, env = "TELEMESH_GOSSIP_ADVERTISE")]
    pub gossip_advertise: Option<std::net::SocketAddr>,
    /// Gossip seeds, comma separated `host:port` (the agents' headless Service name works).
    #[arg(long, env = "TELEMESH_GOSSIP_SEEDS", value_delimiter = ',')]
    pub gossip_seeds: Vec<String>,
    /// Keyring file: one base64 32-byte key per line, primary first (a mounted Secret).
    #[arg(
        long,
        env = "TELEMESH_GOSSIP_KEY_FILE",
        conflicts_with = "insecure_gossip"
    )]
    pub gossip_key_file: Option<PathBuf>,
    /// Gossip in clear text (dev cluster only; said loudly at start-up).
    #[arg(long, env = "TELEMESH_INSECURE_GOSSIP")]
    pub insecure_gossip: bool,
    /// Gossip round interval.
    #[arg(long, env = "TELEMESH_GOSSIP_INTERVAL", default_value = "1s", value_parser = parse_duration)]
    pub gossip_interval: std::time::Duration,
    /// Gossip cluster id: members of other clusters are refused.
    #[arg(long, env = "TELEMESH_CLUSTER_ID", default_value = "telemesh")]
    pub cluster_id: String,
    /// Gossip cells the agents are split into, each its own mesh that every coordinator
    /// replica joins (docs/architecture.md, "Gossip cells"). Agents and coordinators must use
    /// the same count. 1, the default, is the flat mesh of every agent; the chart sets 50.
    #[arg(long, env = "TELEMESH_GOSSIP_CELLS", default_value_t = Cells::FLAT)]
    pub gossip_cells: Cells,
    /// With --gossip-cells above 1, where the coordinator replicas gossip: comma separated
    /// `host:port` with their base port (their --gossip-listen port; a headless Service name
    /// works). A replica serves cell i at that port + 1 + i; agents seed their cell there.
    #[arg(long, env = "TELEMESH_GOSSIP_CELL_SEEDS", value_delimiter = ',')]
    pub gossip_cell_seeds: Vec<String>,
    /// How often the gossip key file is checked for changes (a rotated Secret is used without
    /// a restart).
    #[arg(long, env = "TELEMESH_GOSSIP_KEY_RELOAD_INTERVAL", default_value = "5s", value_parser = parse_duration)]
    pub gossip_key_reload_interval: Duration,
    /// Sealed datagrams sent further than this from the receiver's clock (either way) are
    /// dropped as stale; also the largest clock skew between members that gossip tolerates.
    #[arg(long, env = "TELEMESH_GOSSIP_REPLAY_WINDOW", default_value = "5m", value_parser = parse_duration)]
    pub gossip_replay_window: Duration,
    /// Version 1 gossip frames (builds without replay protection), for a rolling upgrade from
    /// them: `send`, then `accept`, then `refuse`, each rolled out to every member in turn.
    #[arg(long, env = "TELEMESH_GOSSIP_V1_FRAMES", value_enum, default_value_t = V1Frames::Refuse)]
    pub gossip_v1_frames: V1Frames,
    /// Shifts this process's clock, e.g. `-4m` (tests and drills that play a node with a wrong
    /// clock; never in production).
    #[arg(long, env = "TELEMESH_DEBUG_CLOCK_OFFSET", hide = true, default_value = "0s", value_parser = parse_signed_duration, allow_hyphen_values = true)]
    pub debug_clock_offset: i64,
}

/// How gossip is protected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GossipSecurity {
    /// Sealed with the keyring in this file.
    Sealed(PathBuf),
    /// Clear text (dev only).
    Insecure,
}

/// Validated gossip settings, the same for agents and coordinator replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GossipSettings {
    /// UDP address gossip listens on.
    pub listen: SocketAddr,
    /// Address peers reach this member at; `None` advertises the bound listen address.
    pub advertise: Option<SocketAddr>,
    /// Seeds, `host:port`.
    pub seeds: Vec<String>,
    /// Sealed or not.
    pub security: GossipSecurity,
    /// Round interval.
    pub interval: Duration,
    /// Cluster id (of the flat mesh; each cell's is derived from it).
    pub cluster_id: String,
    /// Cell count.
    pub cells: Cells,
    /// The coordinators' base gossip addresses, `host:port`.
    pub cell_seeds: Vec<String>,
    /// Key file check period.
    pub key_reload_interval: Duration,
    /// Replay window.
    pub replay_window: Duration,
    /// Version 1 frames.
    pub v1_frames: V1Frames,
    /// Clock shift in milliseconds (tests only).
    pub clock_shift_ms: i64,
}

/// Gossip flags that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GossipSettingsError {
    /// Neither a keyring nor `--insecure-gossip`: gossip is never clear text by default.
    #[error(
        "gossip needs a keyring: pass --gossip-key-file (a mounted Secret) or, for a dev cluster, --insecure-gossip"
    )]
    NoSecurity,
    /// A zero round interval.
    #[error("--gossip-interval must be longer than zero")]
    ZeroInterval,
    /// A replay window shorter than a gossip round.
    #[error(
        "--gossip-replay-window must be longer than --gossip-interval (it absorbs clock skew: 5m is the default)"
    )]
    ShortReplayWindow,
    /// A cell seed that cannot name every cell's port.
    #[error(transparent)]
    CellSeed(#[from] CellsError),
}

/// A coordinator replica's gossip members: one per cell (the flat mesh alone with one cell),
/// and the flat mesh beside the cells during a rolling upgrade from it.
#[derive(Debug)]
pub struct ObserverConfigs {
    /// By cell index.
    pub cells: Vec<GossipConfig>,
    /// The flat mesh's, when asked for and it has seeds.
    pub flat: Option<GossipConfig>,
}

/// A gossip member's configuration that cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum MemberConfigError {
    /// The keyring did not load.
    #[error(transparent)]
    Keyring(#[from] KeyringError),
    /// Cells without the coordinators' address: an agent could never find its cell.
    #[error(
        "--gossip-cells {0} needs --gossip-cell-seeds: the coordinators' gossip host:port (their headless Service and --gossip-listen port)"
    )]
    NoCellSeeds(Cells),
    /// A coordinator's base port too high for its cells' ports.
    #[error(
        "--gossip-listen port {port} leaves no room for {cells} cells (served at port + 1 to port + {cells}); pick a lower port"
    )]
    NoCellPorts {
        /// The base port.
        port: u16,
        /// The count.
        cells: Cells,
    },
}

impl GossipArgs {
    /// The protection asked for; `None` when neither a keyring nor `--insecure-gossip` was
    /// given (a configuration error: gossip is never clear text by default).
    pub fn security(&self) -> Option<GossipSecurity> {
        match (&self.gossip_key_file, self.insecure_gossip) {
            (Some(path), _) => Some(GossipSecurity::Sealed(path.clone())),
            (None, true) => Some(GossipSecurity::Insecure),
            (None, false) => None,
        }
    }

    /// Validated settings, listening on the binary's own `--gossip-listen`.
    pub fn settings(self, listen: SocketAddr) -> Result<GossipSettings, GossipSettingsError> {
        let security = self.security().ok_or(GossipSettingsError::NoSecurity)?;
        if self.gossip_interval.is_zero() {
            return Err(GossipSettingsError::ZeroInterval);
        }
        if self.gossip_replay_window <= self.gossip_interval {
            return Err(GossipSettingsError::ShortReplayWindow);
        }
        if let Some(last) = self.gossip_cells.all().last() {
            for seed in &self.gossip_cell_seeds {
                last.coordinator_seed(seed)?;
            }
        }
        Ok(GossipSettings {
            listen,
            advertise: self.gossip_advertise,
            seeds: self.gossip_seeds,
            security,
            interval: self.gossip_interval,
            cluster_id: self.cluster_id,
            cells: self.gossip_cells,
            cell_seeds: self.gossip_cell_seeds,
            key_reload_interval: self.gossip_key_reload_interval,
            replay_window: self.gossip_replay_window,
            v1_frames: self.gossip_v1_frames,
            clock_shift_ms: self.debug_clock_offset,
        })
    }
}

impl GossipSettings {
    /// An agent's configuration: it joins its node's cell, through the coordinators' port for
    /// that cell, or the flat mesh through `--gossip-seeds` when there is one cell.
    pub fn agent_config(&self, node_name: &str) -> Result<GossipConfig, MemberConfigError> {
        let mut config = self.member_config(node_name, Role::Agent)?;
        if self.cells.is_flat() {
            return Ok(config);
        }
        if self.cell_seeds.is_empty() {
            return Err(MemberConfigError::NoCellSeeds(self.cells));
        }
        let cell = self.cells.of(node_name);
        self.join_cell(&mut config, cell);
        Ok(config)
    }

    /// A coordinator replica's configurations, one per cell, sharing one clock: each listens
    /// (and advertises) at its cell's port and seeds the other replicas there; with
    /// `flat_too`, also the flat mesh's at the base port through `--gossip-seeds` (a rolling
    /// upgrade from it). With one cell, the flat mesh's configuration alone.
    pub fn observer_configs(
        &self,
        replica: &str,
        flat_too: bool,
    ) -> Result<ObserverConfigs, MemberConfigError> {
        let mut base = self.member_config(replica, Role::Observer)?;
        if self.cells.is_flat() {
            return Ok(ObserverConfigs {
                cells: vec![base],
                flat: None,
            });
        }
        base.shared_clock = Some(ClusterClock::new(base.local_clock));
        let port_of = |addr: SocketAddr, cell: Cell| -> Result<SocketAddr, MemberConfigError> {
            // Port 0 asks for a free port per cell (tests that tell the agents where).
            if addr.port() == 0 {
                return Ok(addr);
            }
            let port =
                cell.coordinator_port(addr.port())
                    .ok_or(MemberConfigError::NoCellPorts {
                        port: addr.port(),
                        cells: self.cells,
                    })?;
            Ok(SocketAddr::new(addr.ip(), port))
        };
        let cells = self
            .cells
            .all()
            .map(|cell| {
                let mut config = base.clone();
                config.listen_addr = port_of(self.listen, cell)?;
                config.advertise_addr = self.advertise.map(|a| port_of(a, cell)).transpose()?;
                self.join_cell(&mut config, cell);
                Ok(config)
            })
            .collect::<Result<_, MemberConfigError>>()?;
        Ok(ObserverConfigs {
            cells,
            flat: (flat_too && !self.seeds.is_empty()).then_some(base),
        })
    }

    /// Points `config` at `cell`: its cluster id, published cell, and the coordinators' port
    /// for it as seeds.
    fn join_cell(&self, config: &mut GossipConfig, cell: Cell) {
        config.join_cell(cell);
        // Checked when the settings were made.
        config.seeds = self
            .cell_seeds
            .iter()
            .filter_map(|seed| cell.coordinator_seed(seed).ok())
            .collect();
    }

    /// A flat-mesh member's configuration: `name` is the node name (agents) or the replica name
    /// (observers); a sealed member's keyring is read now.
    pub fn member_config(&self, name: &str, role: Role) -> Result<GossipConfig, KeyringError> {
        let (security, key_file) = match &self.security {
            GossipSecurity::Sealed(path) => (Security::Sealed(Keyring::load(path)?), Some(path)),
            GossipSecurity::Insecure => (Security::Insecure, None),
        };
        let mut config = GossipConfig::new(name, &self.cluster_id, self.listen, security);
        config.key_file = key_file.cloned();
        config.key_reload_interval = self.key_reload_interval;
        config.v1_frames = self.v1_frames;
        config.local_clock = LocalClock {
            shift_ms: self.clock_shift_ms,
        };
        config.relay.replay = ReplayConfig {
            window: self.replay_window,
            ..ReplayConfig::default()
        };
        config.role = role;
        config.advertise_addr = self.advertise;
        config.seeds = self.seeds.clone();
        config.gossip_interval = self.interval;
        Ok(config)
    }
}

/// The reward model's settings: the agent decays and caps what it observes with them, the
/// coordinator decays and scores what it reads with them, so both binaries take the same flags.
#[derive(Debug, Clone, clap::Args)]
pub struct RewardModelArgs {
    /// Reward evidence halves every this long (a node that stopped failing wins pods back within
    /// about one half-life).
    #[arg(long, env = "TELEMESH_REWARD_HALF_LIFE", default_value = "10m", value_parser = parse_duration)]
    pub reward_half_life: std::time::Duration,
    /// Cap on the evidence (weighted observations) one (pod type, node) estimate holds.
    #[arg(long, env = "TELEMESH_REWARD_MAX_EVIDENCE", default_value_t = 2.5)]
    pub reward_max_evidence: f64,
    /// Standard deviations of optimism when scoring (exploration of uncertain nodes).
    #[arg(long, env = "TELEMESH_REWARD_EXPLORATION", default_value_t = 1.0)]
    pub reward_exploration: f64,
}

impl RewardModelArgs {
    /// The model, or why the flags are unusable.
    pub fn model(&self) -> Result<telemesh_core::reward::RewardModel, String> {
        if self.reward_half_life.is_zero() {
            return Err("--reward-half-life must be more than 0".into());
        }
        if !(self.reward_max_evidence.is_finite() && self.reward_max_evidence > 0.0) {
            return Err("--reward-max-evidence must be a number above 0".into());
        }
        if !(self.reward_exploration.is_finite() && self.reward_exploration >= 0.0) {
            return Err("--reward-exploration must be a number of at least 0".into());
        }
        Ok(telemesh_core::reward::RewardModel {
            half_life: self.reward_half_life,
            max_evidence: self.reward_max_evidence,
            exploration: self.reward_exploration,
        })
    }
}

/// Parses a signed duration flag into milliseconds: `-4m`, `+90s`, `250ms`.
pub fn parse_signed_duration(s: &str) -> Result<i64, String> {
    let (sign, rest) = match s.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, s.strip_prefix('+').unwrap_or(s)),
    };
    let d = parse_duration(rest)?;
    i64::try_from(d.as_millis())
        .map(|ms| sign * ms)
        .map_err(|_| format!("{s:?} is too long"))
}

/// Parses a duration flag: `500ms`, `10s`, `2m`, `1h` (a bare number is seconds).
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    use std::time::Duration;
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 500ms, 10s, 2m or 1h"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" | "" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        "h" => Ok(Duration::from_secs(n * 3600)),
        _ => Err(format!("{s:?} is not a duration like 500ms, 10s, 2m or 1h")),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert!(parse_duration("x").is_err());
        assert!(parse_duration("5d").is_err());
        assert_eq!(parse_signed_duration("-4m"), Ok(-240_000));
        assert_eq!(parse_signed_duration("+90s"), Ok(90_000));
        assert_eq!(parse_signed_duration("250ms"), Ok(250));
    }

    #[derive(clap::Parser)]
    struct Flags {
        #[command(flatten)]
        gossip: GossipArgs,
    }

    fn settings(args: &[&str]) -> Result<GossipSettings, GossipSettingsError> {
        use clap::Parser as _;
        let mut argv = vec!["t", "--insecure-gossip"];
        argv.extend_from_slice(args);
        #[allow(clippy::unwrap_used)]
        let flags = Flags::try_parse_from(argv).unwrap();
        flags
            .gossip
            .settings("10.0.0.5:7947".parse().expect("an address"))
    }

    #[test]
    #[allow(clippy::unwrap_used)]
    fn an_agent_joins_its_cell_through_the_coordinators_port_for_it() {
        let s = settings(&[
            "--gossip-cells=4",
            "--gossip-cell-seeds=coord.ns.svc:7947,10.0.0.9:7947",
            "--gossip-seeds=agents.ns.svc:7946",
        ])
        .unwrap();
        let config = s.agent_config("node-1").unwrap();
        let cell = Cells::new(4).unwrap().of("node-1");
        assert_eq!(config.cell, cell);
        assert_eq!(config.cluster_id, format!("telemesh.cell-{}", cell.index()));
        let port = 7948 + cell.index();
        assert_eq!(
            config.seeds,
            [format!("coord.ns.svc:{port}"), format!("10.0.0.9:{port}")]
        );
        assert_eq!(
            config.listen_addr.port(),
            7947,
            "an agent keeps its one port"
        );

        // The flat mesh: the seeds as given, the cluster id unchanged.
        let flat = settings(&["--gossip-seeds=agents.ns.svc:7946"]).unwrap();
        let config = flat.agent_config("node-1").unwrap();
        assert_eq!(config.cluster_id, "telemesh");
        assert_eq!(config.seeds, ["agents.ns.svc:7946"]);

        // Cells without the coordinators' address cannot be joined.
        let err = settings(&["--gossip-cells=4"])
            .unwrap()
            .agent_config("node-1")
            .unwrap_err();
        assert!(err.to_string().contains("--gossip-cell-seeds"), "{err}");
        assert!(settings(&["--gossip-cells=4", "--gossip-cell-seeds=coord"]).is_err());
        use clap::Parser as _;
        let refused = Flags::try_parse_from(["t", "--insecure-gossip", "--gossip-cells=0"]);
        assert!(refused.is_err_and(|e| e.to_string().contains("1 (the flat mesh)")));
    }

    #[test]
    #[allow(clippy::unwrap_used)]
    fn a_replica_serves_every_cell_at_its_port_and_the_flat_mesh_at_the_base() {
        let s = settings(&[
            "--gossip-cells=3",
            "--gossip-cell-seeds=coord.ns.svc:7947",
            "--gossip-seeds=agents.ns.svc:7946",
            "--gossip-advertise=10.0.0.5:7947",
        ])
        .unwrap();
        let configs = s.observer_configs("replica-a", true).unwrap();
        let ports: Vec<(u16, u16)> = configs
            .cells
            .iter()
            .map(|c| (c.listen_addr.port(), c.advertise_addr.unwrap().port()))
            .collect();
        assert_eq!(ports, [(7948, 7948), (7949, 7949), (7950, 7950)]);
        assert_eq!(configs.cells[2].cluster_id, "telemesh.cell-2");
        assert_eq!(configs.cells[2].seeds, ["coord.ns.svc:7950"]);
        let flat = configs.flat.as_ref().unwrap();
        assert_eq!(
            (flat.listen_addr.port(), flat.cluster_id.as_str()),
            (7947, "telemesh")
        );
        assert_eq!(flat.seeds, ["agents.ns.svc:7946"]);
        // One clock for all of them.
        configs.cells[0]
            .shared_clock
            .as_ref()
            .unwrap()
            .set_correction_ms(1_500);
        assert_eq!(flat.shared_clock.as_ref().unwrap().correction_ms(), 1_500);
        assert!(
            s.observer_configs("replica-a", false)
                .unwrap()
                .flat
                .is_none()
        );

        let high = settings(&["--gossip-cells=40", "--gossip-cell-seeds=c:7947"]).unwrap();
        let mut high = high;
        high.listen = "0.0.0.0:65500".parse().unwrap();
        assert!(high.observer_configs("r", false).is_err());
    }
}
