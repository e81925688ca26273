//! `telemesh-scaling`: the benchmarks' FIGURE lines in, PNG plots and the README table out.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use telemesh_scaling::{figures, plot, table};

/// Draws the scaling picture from the benchmarks' output (`scripts/scaling.sh` runs them).
#[derive(Parser)]
#[command(version)]
struct Cli {
    /// Files holding the benchmarks' output; only their `FIGURE` lines are read. Later files
    /// replace figures of the same series and size from earlier ones.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Where the PNGs (`overview.png`, `<series>.png`) and `table.md` go.
    #[arg(long, env = "SCALING_OUT", default_value = "target/scaling")]
    out: PathBuf,
    /// A README to update in place between its scaling markers.
    #[arg(long)]
    readme: Option<PathBuf>,
    /// A line printed above the table: when, on what and with which profile it was measured.
    #[arg(long)]
    caption: Option<String>,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let mut text = String::new();
    for input in &cli.inputs {
        let content = std::fs::read_to_string(input)
            .with_context(|| format!("reading the bench output {}", input.display()))?;
        text.push_str(&content);
        text.push('\n');
    }
    let all = figures::collect(&text)?;
    std::fs::create_dir_all(&cli.out).with_context(|| format!("creating {}", cli.out.display()))?;
    plot::draw_overview(&all, &cli.out.join("overview.png"))?;
    for series in &all {
        plot::draw_series(series, &cli.out.join(format!("{}.png", series.name)))?;
    }
    let markdown = match &cli.caption {
        Some(caption) => format!("{caption}\n\n{}", table::markdown(&all)),
        None => table::markdown(&all),
    };
    std::fs::write(cli.out.join("table.md"), &markdown)
        .with_context(|| format!("writing {}", cli.out.join("table.md").display()))?;
    if let Some(readme) = &cli.readme {
        let current = std::fs::read_to_string(readme)
            .with_context(|| format!("reading {}", readme.display()))?;
        std::fs::write(readme, table::splice(&current, &markdown)?)
            .with_context(|| format!("writing {}", readme.display()))?;
    }
    print!("{markdown}");
    println!(
        "{} series drawn: {}/overview.png and one PNG per series",
        all.len(),
        cli.out.display()
    );
    Ok(())
}
