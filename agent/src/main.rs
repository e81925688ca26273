//! `telemesh-agent`: not built yet (see the open agent issue). It exits with an error rather than
//! pretend to run.

use std::process::ExitCode;

fn main() -> ExitCode {
    eprintln!("telemesh-agent is not implemented yet; see the project's open issues");
    ExitCode::FAILURE
}
