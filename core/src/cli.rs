//! Command-line groups shared by every Telemesh binary (`#[command(flatten)]` them in).

use std::path::PathBuf;

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
    /// Path to a kubeconfig; else in-cluster config, else $KUBECONFIG.
    #[arg(long, env = "TELEMESH_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Log line format.
    #[arg(long, env = "TELEMESH_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
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
    }
}
