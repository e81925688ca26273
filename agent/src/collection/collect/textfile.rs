//! node-exporter's textfile collector, read directly: every `*.prom` file in a directory under
//! the host root, in name order, parsed with the same [`ImportRule`] as scraped endpoints. The
//! scripted telemetry of tests and the dev cluster is written this way, and nodes that already
//! drop `.prom` files for node-exporter need no exporter running for Telemesh to see them.
//!
//! Of two files with one series name, the first (by file name) wins, as within one exposition.
//! Writers should write a temporary file and rename it, as node-exporter asks: a file caught
//! half-written parses as far as it goes.

use std::path::{Path, PathBuf};

use telemesh_core::metric::Sample;

use super::prom::{ImportRule, parse_exposition};
use super::{Out, Source, files};

/// Reads one textfile directory.
#[derive(Debug)]
pub(crate) struct TextfileReader {
    dir: Option<PathBuf>,
    rule: ImportRule,
}

impl TextfileReader {
    /// `dir` is a host path (e.g. `/var/lib/node_exporter/textfile_collector`), read under
    /// `root`; `None` turns the source off.
    pub(crate) fn new(root: &Path, dir: Option<&Path>) -> Self {
        let dir = dir.map(|d| root.join(d.strip_prefix("/").unwrap_or(d)));
        Self {
            dir,
            rule: ImportRule::default(),
        }
    }

    pub(crate) fn read(&mut self, buf: &mut String, out: &mut Out) {
        let Some(dir) = &self.dir else { return };
        let mut paths: Vec<PathBuf> = match std::fs::read_dir(dir) {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "prom"))
                .collect(),
            Err(e) if files::is_absent(&e) => {
                out.absent(
                    Source::Textfile,
                    dir,
                    "textfile directory not found under the host root",
                );
                return;
            }
            Err(source) => {
                out.error(
                    Source::Textfile,
                    super::CollectError::Read {
                        path: dir.clone(),
                        source,
                    },
                );
                return;
            }
        };
        paths.sort();
        let mut imported: Vec<Sample> = Vec::new();
        for path in paths {
            // A file removed between the listing and the read is simply gone.
            if !matches!(files::read(&path, buf), files::Fetched::Ok) {
                continue;
            }
            let exposition = parse_exposition(buf, &self.rule);
            if let Some(first) = exposition.first_error {
                out.error(Source::Textfile, files::parse_error(&path, first));
            }
            super::prom::merge_imported(&mut imported, exposition.samples);
        }
        super::prom::merge_imported(&mut out.samples, imported);
    }
}
