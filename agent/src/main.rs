//! `telemesh-agent`: parse flags, start logging, validate the configuration before binding any
//! port, run the agent until SIGTERM or Ctrl-C, and leave the gossip cleanly.

use std::process::ExitCode;

use clap::Parser as _;
use telemesh_agent::config::{Cli, Config};
use tokio_util::sync::CancellationToken;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Two workers whatever the node's size: the agent's work is a few file reads and datagrams
    // a second, and tokio's default (one worker per core) costs a thread stack and an allocator
    // arena per core on a 64-core node. Collection runs on a blocking thread; it needs one.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(4)
        .enable_all()
        .build();
    match runtime {
        Ok(rt) => rt.block_on(run(cli)),
        Err(e) => {
            eprintln!("cannot start the async runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> ExitCode {
    telemesh_runtime::telemetry::init(cli.common.log_format, "info");
    let config = match Config::try_from(cli) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "invalid configuration");
            return ExitCode::from(64); // EX_USAGE
        }
    };
    let stop = CancellationToken::new();
    let agent = match telemesh_agent::start(config, stop.clone()).await {
        Ok(a) => a,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "agent failed to start");
            return ExitCode::FAILURE;
        }
    };
    telemesh_runtime::shutdown::wait_for_signal().await;
    tracing::info!("stopping: leaving the gossip");
    agent.shutdown().await;
    ExitCode::SUCCESS
}
