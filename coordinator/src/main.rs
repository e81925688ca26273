//! `telemesh-coordinator`: not built yet (see the open coordinator issue). It exits with an error rather than
//! pretend to run.

use std::process::ExitCode;

fn main() -> ExitCode {
    eprintln!("telemesh-coordinator is not implemented yet; see the project's open issues");
    ExitCode::FAILURE
}
