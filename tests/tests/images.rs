//! The container build files and scripts/images.sh, checked without building an image (no
//! engine can build on the machines these tests run on; the README says what that leaves
//! unverified):
//!
//! - every binary of the workspace that runs in the cluster (not the kubectl plugin) has a
//!   Containerfile, and each one is multi-stage, copies every workspace member into its build
//!   stage, builds a binary the workspace has with the lock file, and runs exactly that binary as
//!   a non-root user;
//! - the images the script builds are the chart's image repositories with its default tag
//!   (the chart's appVersion, which is the workspace version);
//! - with no usable engine the script says so and exits 3; `--dry-run` prints the commands.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn repo() -> PathBuf {
    telemesh_tests::upstream::workspace_root()
}

/// Packages whose binaries ship as no image, and why.
const NO_IMAGE: [(&str, &str); 2] = [
    (
        "telemesh-kubectl",
        "kubectl telemesh is a kubectl plugin: it runs on the user's machine, not in the cluster",
    ),
    (
        "telemesh-scaling",
        "the scaling picture draws benchmark figures on a developer's machine (scripts/scaling.sh)",
    ),
];

/// `cargo metadata` of the workspace: members' directories and binary names by package.
struct Workspace {
    /// Member directories, relative to the root (`agent`, `demo/checkpoint`, ...).
    members: Vec<String>,
    /// Binary target names by package name.
    bins: BTreeMap<String, Vec<String>>,
    version: String,
}

fn workspace() -> Workspace {
    let out = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).unwrap();
    let root = PathBuf::from(meta["workspace_root"].as_str().unwrap());
    let mut members = Vec::new();
    let mut bins = BTreeMap::new();
    let mut version = String::new();
    for p in meta["packages"].as_array().unwrap() {
        let manifest = Path::new(p["manifest_path"].as_str().unwrap());
        let dir = manifest.parent().unwrap().strip_prefix(&root).unwrap();
        members.push(dir.to_string_lossy().into_owned());
        let names: Vec<String> = p["targets"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["kind"].as_array().unwrap().iter().any(|k| k == "bin"))
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect();
        bins.insert(p["name"].as_str().unwrap().to_owned(), names);
        p["version"].as_str().unwrap().clone_into(&mut version);
    }
    Workspace {
        members,
        bins,
        version,
    }
}

/// The Containerfile of the package in `dir`, if it has one.
fn containerfile(dir: &str) -> Option<String> {
    std::fs::read_to_string(repo().join(dir).join("Containerfile")).ok()
}

/// The value following `flag` (`-p`, `--bin`) in `line`.
fn flag<'a>(line: &'a str, flag: &str) -> Option<&'a str> {
    let mut words = line.split_whitespace();
    words.by_ref().find(|w| *w == flag)?;
    words.next()
}

#[test]
fn every_binary_has_a_containerfile_that_builds_and_runs_it_as_non_root() {
    let ws = workspace();
    let mut checked = 0;
    for (package, bins) in &ws.bins {
        if bins.is_empty() || NO_IMAGE.iter().any(|(p, _)| p == package) {
            continue;
        }
        let dir = ws
            .members
            .iter()
            .find(|m| {
                std::fs::read_to_string(repo().join(m).join("Cargo.toml"))
                    .is_ok_and(|t| t.contains(&format!("name = \"{package}\"")))
            })
            .unwrap();
        let text = containerfile(dir).unwrap_or_else(|| {
            panic!("{package} builds {bins:?} but {dir}/Containerfile is missing")
        });
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .collect();
        let froms = lines.iter().filter(|l| l.starts_with("FROM ")).count();
        assert!(froms >= 2, "{dir}/Containerfile: not multi-stage");
        // A workspace build needs every member's manifest: the whole context, or each member.
        let copies_all = lines.contains(&"COPY . .");
        for member in &ws.members {
            let top = member.split('/').next().unwrap();
            assert!(
                copies_all
                    || lines.iter().any(|l| l.starts_with("COPY ")
                        && l.split_whitespace().nth(1) == Some(top)),
                "{dir}/Containerfile does not copy workspace member {member}"
            );
        }
        let build = lines
            .iter()
            .find(|l| l.contains("cargo build"))
            .unwrap_or_else(|| panic!("{dir}/Containerfile runs no cargo build"));
        assert_eq!(flag(build, "-p"), Some(package.as_str()), "{dir}: {build}");
        assert!(
            build.contains("--locked"),
            "{dir}: builds without the lock file"
        );
        let bin = flag(build, "--bin").unwrap_or(&bins[0]);
        assert!(
            bins.iter().any(|b| b == bin),
            "{dir}: --bin {bin} is not one of {bins:?}"
        );
        // The binary copied out is the one the build wrote: cargo's output directory is named
        // after the profile (`dev` writes to `debug`).
        let out_dir = match flag(build, "--profile") {
            Some("dev") => "debug",
            Some(profile) => profile,
            None if build.split_whitespace().any(|w| w == "--release") => "release",
            None => "debug",
        };
        let built = format!("target/{out_dir}/{bin}");
        let copied = lines
            .iter()
            .any(|l| l.split_whitespace().any(|w| w == built));
        assert!(
            copied,
            "{dir}/Containerfile does not copy {built} out of its build"
        );
        let entrypoint = lines
            .iter()
            .rfind(|l| l.starts_with("ENTRYPOINT"))
            .unwrap_or_else(|| panic!("{dir}/Containerfile has no ENTRYPOINT"));
        let exec: Vec<String> =
            serde_json::from_str(entrypoint.trim_start_matches("ENTRYPOINT").trim()).unwrap();
        assert!(
            exec[0].ends_with(&format!("/{bin}")),
            "{dir}: ENTRYPOINT {exec:?} does not run {bin}"
        );
        let user = lines
            .iter()
            .rfind(|l| l.starts_with("USER "))
            .unwrap_or_else(|| panic!("{dir}/Containerfile sets no USER (it would run as root)"));
        let uid = user[5..].split(':').next().unwrap();
        assert!(uid != "0" && uid != "root", "{dir}: runs as root ({user})");
        checked += 1;
    }
    assert!(
        checked >= 4,
        "agent, coordinator, sim and the checkpoint demo"
    );
}

/// Runs scripts/images.sh with `args` and `env`; returns (exit code, stdout, stderr).
fn images_sh(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new("bash");
    cmd.arg(repo().join("scripts/images.sh"))
        .args(args)
        .env_remove("REGISTRY")
        .env_remove("TAG")
        .env_remove("PLATFORM");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_script_builds_the_charts_images_and_says_when_it_cannot() {
    let ws = workspace();
    let (code, stdout, stderr) = images_sh(&["--dry-run", "--engine", "podman"], &[]);
    assert_eq!(code, 0, "{stderr}");
    // image reference → Containerfile
    let built: BTreeMap<String, String> = stdout
        .lines()
        .map(|l| {
            assert!(l.starts_with("podman build "), "{l}");
            (
                flag(l, "-t").unwrap().to_owned(),
                flag(l, "-f").unwrap().to_owned(),
            )
        })
        .collect();
    for dir in &ws.members {
        if containerfile(dir).is_some() {
            let file = format!("{dir}/Containerfile");
            assert!(
                built.values().any(|f| *f == file),
                "the script does not build {file}: {built:?}"
            );
        }
    }

    let chart: Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(repo().join("deploy/helm/telemesh/Chart.yaml")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        chart["appVersion"], ws.version,
        "the chart's appVersion (its default image tag) is the workspace version"
    );
    let values: Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(repo().join("deploy/helm/telemesh/values.yaml")).unwrap(),
    )
    .unwrap();
    for (component, file) in [
        ("agent", "agent/Containerfile"),
        ("coordinator", "coordinator/Containerfile"),
    ] {
        let image = &values[component]["image"];
        let tag = image["tag"]
            .as_str()
            .filter(|t| !t.is_empty())
            .unwrap_or(&ws.version);
        let reference = format!("{}:{tag}", image["repository"].as_str().unwrap());
        assert_eq!(
            built.get(&reference).map(String::as_str),
            Some(file),
            "the chart's {component} image {reference} is not what the script builds: {built:?}"
        );
    }

    // No engine: a plain message and exit 3.
    let (code, _, stderr) = images_sh(&[], &[("CONTAINER_ENGINES", "no-such-engine")]);
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("no container engine can build images here")
            && stderr.contains("no-such-engine is not installed"),
        "{stderr}"
    );
}
