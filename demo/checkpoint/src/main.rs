//! telemesh-checkpoint-demo: a checkpointing batch workload for ScavengerJobs. It computes a
//! deterministic result over `--units` units of CPU work, writes a checkpoint to its volume
//! (`--state`) every `--interval` atomically (write, fsync, rename), touches
//! `$TELEMESH_CHECKPOINT_FILE` after each (the marker the node's agent reads to see how much
//! work is unsaved), resumes from the checkpoint when it starts, and prints the result when
//! done (exit 0). On SIGTERM (preemption, eviction) it exits at once with 143: only the work
//! since the last checkpoint is lost, and the checkpoint on disk is always whole.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::Parser;
use serde::{Deserialize, Serialize};

/// Exit status after SIGTERM, as a shell reports a process the signal ended (128 + 15).
const TERMINATED: u8 = 143;

/// `telemesh-checkpoint-demo` flags.
#[derive(Debug, Clone, Parser)]
#[command(name = "telemesh-checkpoint-demo", version, about)]
struct Cli {
    /// Units of work in the whole job.
    #[arg(long, env = "TELEMESH_DEMO_UNITS", default_value_t = 1000)]
    units: u64,
    /// Mixing rounds per unit (the CPU cost of one unit; about 1 ms per million, optimised).
    #[arg(
        long,
        env = "TELEMESH_DEMO_UNIT_ITERATIONS",
        default_value_t = 1_000_000
    )]
    unit_iterations: u64,
    /// Checkpoint at least this often (`30s`, `5m`, `500ms`); 0 checkpoints after every unit.
    #[arg(long, env = "TELEMESH_DEMO_INTERVAL", default_value = "30s", value_parser = parse_interval)]
    interval: Duration,
    /// The checkpoint file, on the job's persistent volume.
    #[arg(
        long,
        env = "TELEMESH_DEMO_STATE",
        default_value = "/data/telemesh-demo.checkpoint"
    )]
    state: PathBuf,
    /// The marker touched after each checkpoint (the ScavengerJob controller sets the variable).
    #[arg(long, env = "TELEMESH_CHECKPOINT_FILE")]
    marker: Option<PathBuf>,
}

/// What a checkpoint holds: enough to go on exactly where it stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Checkpoint {
    units: u64,
    unit_iterations: u64,
    done: u64,
    accumulator: u64,
}

fn parse_interval(text: &str) -> Result<Duration, String> {
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let signed: jiff::SignedDuration = text
        .parse()
        .map_err(|e| format!("{text:?} is not a duration like 500ms, 30s or 5m: {e}"))?;
    Duration::try_from(signed).map_err(|_| format!("{text:?} is negative"))
}

/// One unit of work: `iterations` rounds of SplitMix64 folded into the accumulator.
fn unit(mut acc: u64, index: u64, iterations: u64) -> u64 {
    let mut x = acc ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for _ in 0..iterations {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        acc = acc.rotate_left(5) ^ z ^ (z >> 31);
    }
    acc
}

/// Reads the checkpoint, if any; refuses one made for another job's parameters.
fn load(cli: &Cli) -> anyhow::Result<Checkpoint> {
    let fresh = Checkpoint {
        units: cli.units,
        unit_iterations: cli.unit_iterations,
        done: 0,
        accumulator: 0,
    };
    let text = match std::fs::read(&cli.state) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(fresh),
        Err(e) => return Err(e).with_context(|| format!("reading {}", cli.state.display())),
    };
    let saved: Checkpoint = serde_json::from_slice(&text).with_context(|| {
        format!(
            "{} is not a checkpoint of this program",
            cli.state.display()
        )
    })?;
    if (saved.units, saved.unit_iterations) != (fresh.units, fresh.unit_iterations)
        || saved.done > saved.units
    {
        bail!(
            "{} was written for --units {} --unit-iterations {}; remove it or run with those",
            cli.state.display(),
            saved.units,
            saved.unit_iterations
        );
    }
    Ok(saved)
}

/// Writes the checkpoint atomically (a reader sees the old one or the new one, never half),
/// then touches the marker.
fn save(checkpoint: &Checkpoint, state: &Path, marker: Option<&Path>) -> anyhow::Result<()> {
    let tmp = state.with_extension("tmp");
    let mut file =
        std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    file.write_all(&serde_json::to_vec(checkpoint)?)
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, state).with_context(|| format!("renaming into {}", state.display()))?;
    if let Some(marker) = marker {
        // The content is for people; the modification time is the signal.
        std::fs::write(
            marker,
            format!("{}/{}\n", checkpoint.done, checkpoint.units),
        )
        .with_context(|| format!("touching the checkpoint marker {}", marker.display()))?;
    }
    Ok(())
}

/// Computes from the checkpoint on; returns the result.
fn run(cli: &Cli) -> anyhow::Result<u64> {
    let mut at = load(cli)?;
    if at.done > 0 {
        eprintln!("resuming at unit {} of {}", at.done, at.units);
    }
    let mut last_save = Instant::now();
    while at.done < at.units {
        at.accumulator = unit(at.accumulator, at.done, at.unit_iterations);
        at.done += 1;
        if at.done < at.units && last_save.elapsed() >= cli.interval {
            save(&at, &cli.state, cli.marker.as_deref())?;
            last_save = Instant::now();
        }
    }
    // The finished state too, so a rerun of a finished job answers at once.
    save(&at, &cli.state, cli.marker.as_deref())?;
    Ok(at.accumulator)
}

async fn terminated() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        // Without a SIGTERM handler, Ctrl-C still stops it.
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let units = cli.units;
        let work = tokio::task::spawn_blocking(move || run(&cli));
        tokio::select! {
            done = work => match done {
                Ok(Ok(result)) => {
                    println!("result {result:016x} after {units} units");
                    ExitCode::SUCCESS
                }
                Ok(Err(e)) => {
                    eprintln!("failed: {e:#}");
                    ExitCode::FAILURE
                }
                Err(e) => {
                    eprintln!("the computation stopped: {e}");
                    ExitCode::FAILURE
                }
            },
            () = terminated() => {
                // The checkpoint on disk is whole (rename is atomic): stop now, as asked; the
                // blocking computation is not waited for.
                eprintln!("terminated: the work since the last checkpoint is lost");
                std::process::exit(i32::from(TERMINATED));
            }
        }
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_work_is_deterministic_and_depends_on_every_unit() {
        let a = (0..5).fold(0, |acc, i| unit(acc, i, 100));
        let b = (0..5).fold(0, |acc, i| unit(acc, i, 100));
        assert_eq!(a, b);
        assert_ne!(a, (0..4).fold(0, |acc, i| unit(acc, i, 100)));
        assert_ne!(a, (0..5).fold(0, |acc, i| unit(acc, i, 101)));
    }

    #[test]
    fn intervals_parse_and_checkpoints_of_other_jobs_are_refused() {
        assert_eq!(parse_interval("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_interval("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_interval("0"), Ok(Duration::ZERO));
        assert!(parse_interval("soon").is_err());
        let dir = tempfile::tempdir().unwrap();
        let cli = Cli::parse_from([
            "demo",
            "--units=10",
            &format!("--state={}", dir.path().join("s").display()),
        ]);
        assert_eq!(load(&cli).unwrap().done, 0, "no checkpoint: from scratch");
        let other = Checkpoint {
            units: 11,
            unit_iterations: cli.unit_iterations,
            done: 3,
            accumulator: 1,
        };
        save(&other, &cli.state, None).unwrap();
        let err = format!("{:#}", load(&cli).unwrap_err());
        assert!(err.contains("--units 11"), "{err}");
    }
}
