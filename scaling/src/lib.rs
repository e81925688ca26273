//! The scaling picture (issue 19): how Telemesh's costs grow with the cluster. The benchmarks
//! print `FIGURE <series> <x> <value> <unit>` lines beside their tables; `scripts/scaling.sh`
//! runs them at 10, 100, 1,000 (and 5,000) members or nodes and hands their output to this
//! crate's `telemesh-scaling` binary, which draws a PNG per series and an overview under
//! `target/scaling/` and writes the Markdown table the README keeps between its scaling markers.

pub mod catalogue;
pub mod figures;
pub mod plot;
pub mod table;
