//! `kubectl-telemesh`: parses the command line, runs it, maps the outcome to an exit code.

use std::process::ExitCode;

use clap::Parser as _;
use telemesh_kubectl::cli::Cli;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut stdout = std::io::stdout();
    let mut stderr = std::io::stderr();
    match telemesh_kubectl::run(cli, &mut stdout, &mut stderr).await {
        Ok(telemesh_kubectl::Outcome::Done) => ExitCode::SUCCESS,
        // An action that ended other than Succeeded (with --wait): said on stdout already.
        Ok(telemesh_kubectl::Outcome::Unsuccessful) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
