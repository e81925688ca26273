//! `telemesh-sim`: run the in-memory Kubernetes API server, alone (`serve`) or as the local dev
//! cluster (`dev`).

mod dev;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use telemesh_runtime::cli::{CommonArgs, parse_duration};
use telemesh_sim::{Auth, Sim, SimConfig, UserInfo};

#[derive(Debug, Parser)]
#[command(
    name = "telemesh-sim",
    version,
    about = "A Kubernetes API server in memory, for tests and the local dev cluster"
)]
struct Cli {
    #[command(flatten)]
    common: CommonArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Serve the API alone until interrupted.
    Serve(ServeArgs),
    /// The local dev cluster: sim (or, with `--control-plane real`, the upstream control plane)
    /// with nodes, kubelets, scheduler and controllers, an agent per node and two coordinators;
    /// applies the TAS examples and a demo, and tells what happens.
    Dev(dev::DevArgs),
    /// sim as nodes only, against any API server (as KWOK): registers simulated Nodes, keeps
    /// their Leases and heartbeats alive and plays their pods' lives with a kubelet stand-in
    /// each (graceful deletion included), until interrupted.
    Nodes(NodesArgs),
}

#[derive(Debug, clap::Args)]
struct NodesArgs {
    /// The API server's kubeconfig (its user must be allowed to write Nodes, Leases and pods'
    /// status: an admin's).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: PathBuf,
    /// How many nodes (`sim-node-0..`), each of 8 CPUs, 32 GiB and 110 pods.
    #[arg(long, env = "TELEMESH_SIM_NODES", default_value_t = 3)]
    nodes: usize,
    /// Where each node's kubelet keeps its pods' emptyDirs (`<dir>/<node>`, the folder an
    /// agent for that node reads as its host root); none by default.
    #[arg(long, env = "TELEMESH_SIM_HOST_ROOTS")]
    host_roots: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// Address to listen on (loopback; port 0 picks a free port).
    #[arg(long, env = "TELEMESH_SIM_LISTEN", default_value = "127.0.0.1:6443")]
    listen: SocketAddr,
    /// Where to write the kubeconfig, once the server answers.
    #[arg(
        long,
        env = "TELEMESH_SIM_KUBECONFIG_OUT",
        default_value = "target/sim/kubeconfig"
    )]
    kubeconfig_out: PathBuf,
    /// Simulated Node objects to create at start.
    #[arg(long, env = "TELEMESH_SIM_NODES", default_value_t = 0)]
    nodes: usize,
    /// Serve HTTPS with a generated self-signed certificate.
    #[arg(long, env = "TELEMESH_SIM_TLS")]
    tls: bool,
    /// Require this bearer token (it is written into the kubeconfig).
    #[arg(long, env = "TELEMESH_SIM_TOKEN")]
    token: Option<String>,
    /// How often watches that asked for bookmarks get one.
    #[arg(long, env = "TELEMESH_SIM_BOOKMARK_INTERVAL", default_value = "10s", value_parser = parse_duration)]
    bookmark_interval: Duration,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => {
            telemesh_runtime::telemetry::init(cli.common.log_format, "info");
            match serve(args).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!(error = format!("{e:#}"), "telemesh-sim stopped");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Nodes(args) => {
            telemesh_runtime::telemetry::init(cli.common.log_format, "info");
            match nodes(args).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!(error = format!("{e:#}"), "telemesh-sim nodes stopped");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Dev(args) => {
            // The story is the output; logs only for what goes wrong (RUST_LOG overrides).
            telemesh_runtime::telemetry::init(cli.common.log_format, "warn");
            match dev::run(args).await {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => ExitCode::FAILURE,
                Err(e) => {
                    tracing::error!(error = format!("{e:#}"), "the dev cluster stopped");
                    eprintln!("telemesh-sim dev: {e:#}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let mut auth = Auth::default();
    if let Some(t) = &args.token {
        auth.tokens.insert(
            t.clone(),
            UserInfo {
                username: "admin".into(),
                uid: "admin".into(),
                groups: vec!["system:masters".into()],
                ..UserInfo::default()
            },
        );
    }
    let mut config = SimConfig {
        listen: args.listen,
        tls: args.tls,
        auth,
        kubeconfig_token: args.token.clone(),
        ..Default::default()
    };
    config.server.bookmark_interval = args.bookmark_interval;
    let sim = Sim::start(config).await?;
    telemesh_sim::nodes::create_nodes(&sim.server, args.nodes)
        .map_err(|e| anyhow::anyhow!(e.message))
        .context("creating nodes")?;
    // Written only once the server answers a real request through the kubeconfig.
    let client = sim.client().await?;
    let version = client
        .apiserver_version()
        .await
        .context("the sim does not answer its own kubeconfig")?;
    sim.write_kubeconfig(&args.kubeconfig_out)
        .with_context(|| {
            format!(
                "writing the kubeconfig to {}",
                args.kubeconfig_out.display()
            )
        })?;
    tracing::info!(url = sim.url(), kubeconfig = %args.kubeconfig_out.display(), version = %version.git_version, nodes = args.nodes, "sim ready");
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    tracing::info!("interrupted; stopping");
    Ok(())
}

/// `telemesh-sim nodes`: the machines of [`NodesArgs`] until Ctrl-C.
async fn nodes(args: NodesArgs) -> anyhow::Result<()> {
    use anyhow::Context as _;
    use telemesh_sim::cluster::kubelet::{CRASH_BACKOFF, Kubelet};
    use telemesh_sim::cluster::machines::{self, Machine};
    let yaml = std::fs::read_to_string(&args.kubeconfig)
        .with_context(|| format!("reading the kubeconfig {}", args.kubeconfig.display()))?;
    let client = telemesh_sim::kubeconfig::client(&yaml).await?;
    let machines: Vec<Machine> = (0..args.nodes)
        .map(|i| Machine::standard(&format!("sim-node-{i}")))
        .collect();
    machines::register(&client, &machines).await?;
    let stop = tokio_util::sync::CancellationToken::new();
    let _stop_on_return = stop.clone().drop_guard();
    tokio::spawn(machines::heartbeat(
        client.clone(),
        machines.clone(),
        stop.clone(),
    ));
    let (_faults, faults_rx) = tokio::sync::watch::channel(Vec::new());
    let workloads = telemesh_sim::cluster::workload::Workloads::default();
    for (i, m) in machines.iter().enumerate() {
        let kubelet = Kubelet {
            node: m.name.clone(),
            index: u8::try_from(i).context("at most 256 nodes (pod IPs 10.244.<n>.x)")?,
            backoff: CRASH_BACKOFF,
            host_root: args.host_roots.as_ref().map(|d| d.join(&m.name)),
            workloads: workloads.clone(),
        };
        tokio::spawn(kubelet.run(client.clone(), faults_rx.clone(), stop.clone()));
    }
    tracing::info!(nodes = args.nodes, kubeconfig = %args.kubeconfig.display(), "nodes registered; playing their kubelets until interrupted");
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    tracing::info!("interrupted; stopping");
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use super::*;

    #[test]
    fn cli_definition_is_valid() {
        Cli::command().debug_assert();
    }
}
