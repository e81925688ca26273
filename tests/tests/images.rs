//! The container images: their build files, both ways of building them, and the images
//! themselves.
//!
//! Without an engine:
//! - every binary of the workspace that runs in the cluster (not the kubectl plugin) has a
//!   Containerfile, and each one is multi-stage, copies every workspace member into its build
//!   stage, builds a binary the workspace has with the lock file, and runs exactly that binary as
//!   a non-root user;
//! - the images the script builds are the chart's image repositories with its default tag
//!   (the chart's appVersion, which is the workspace version);
//! - with no usable engine the script says so and exits 3; `--dry-run` prints the commands;
//! - the hermetic build (`--hermetic`: static binaries built here, images assembled FROM scratch
//!   by buildah) makes each image as its Containerfile does: the same binary built with the same
//!   profile, at the same path, the same user, entrypoint, working directory, environment and
//!   OCI labels.
//!
//! With the images scripts/test.sh built (buildah, `TELEMESH_IMAGE_TAG`; SKIPPED without):
//! each image's configuration and files are what its Containerfile gives; each binary answers
//! `--version` inside its image; the agent's image reads a host root and joins a sim cluster's
//! gossip with a coordinator, its node appearing in the view; the checkpoint demo's image
//! checkpoints, is stopped, and resumes to the result of an uninterrupted run.
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
        // The binary copied out is the one the build wrote.
        let spec = containerfile_spec(&format!("{dir}/Containerfile"));
        let built = format!("target/{}/{bin}", cargo_out_dir(&spec.profile));
        let copied = lines
            .iter()
            .any(|l| l.split_whitespace().any(|w| w == built));
        assert!(
            copied,
            "{dir}/Containerfile does not copy {built} out of its build"
        );
        let exec = &spec.entrypoint;
        assert!(
            exec[0].ends_with(&format!("/{bin}")),
            "{dir}: ENTRYPOINT {exec:?} does not run {bin}"
        );
        let uid = spec.user.split(':').next().unwrap();
        assert!(
            uid != "0" && uid != "root",
            "{dir}: runs as root ({})",
            spec.user
        );
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

/// What an image built from a Containerfile is: the binary it builds (package, binary, cargo
/// profile), where the binary sits, and the image's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ImageSpec {
    package: String,
    bin: String,
    profile: String,
    path: String,
    user: String,
    entrypoint: Vec<String>,
    working_dir: String,
    env: Vec<String>,
    labels: Vec<String>,
    /// The runtime base gives the CA bundle, `/etc/passwd` with the nonroot user and `/tmp`.
    static_base: bool,
}

/// distroless/static-debian12:nonroot's own configuration, which the Containerfiles' final
/// stages inherit: its working directory and environment.
const DISTROLESS_WORKDIR: &str = "/home/nonroot";
const DISTROLESS_ENV: [&str; 2] = [
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
];

/// cargo's output directory for `profile`: named after it, except `dev`, which writes `debug`.
fn cargo_out_dir(profile: &str) -> &str {
    if profile == "dev" { "debug" } else { profile }
}

/// Reads what the Containerfile `file` builds.
fn containerfile_spec(file: &str) -> ImageSpec {
    let text = std::fs::read_to_string(repo().join(file)).unwrap();
    // Continuation lines joined, comments and blank lines dropped.
    let joined = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("\\\n", " ");
    let lines: Vec<&str> = joined
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let arg_default = |name: &str| {
        lines.iter().find_map(|l| {
            l.strip_prefix("ARG ")?
                .strip_prefix(name)?
                .strip_prefix('=')
                .map(str::to_owned)
        })
    };
    let last_from = lines.iter().rposition(|l| l.starts_with("FROM ")).unwrap();
    let base = lines[last_from].trim_start_matches("FROM ").trim();
    let base = match base.strip_prefix("${").and_then(|b| b.strip_suffix('}')) {
        Some(arg) => arg_default(arg).unwrap_or_else(|| panic!("{file}: ARG {arg} has no default")),
        None => base.to_owned(),
    };
    let static_base = match base.as_str() {
        "scratch" => false,
        b if b.starts_with("gcr.io/distroless/static") => true,
        other => panic!("{file}: runtime base {other} is neither scratch nor distroless/static"),
    };
    let stage = &lines[last_from..];
    let build = lines
        .iter()
        .find(|l| l.contains("cargo build"))
        .unwrap_or_else(|| panic!("{file} runs no cargo build"));
    let package = flag(build, "-p").unwrap().to_owned();
    let bin = flag(build, "--bin").unwrap_or(&package).to_owned();
    let profile = match flag(build, "--profile") {
        Some(p) => p.to_owned(),
        None if build.split_whitespace().any(|w| w == "--release") => "release".into(),
        None => "dev".into(),
    };
    let copy = stage
        .iter()
        .find(|l| l.starts_with("COPY --from=build"))
        .unwrap_or_else(|| panic!("{file}: the final stage copies no binary"));
    let path = copy.split_whitespace().last().unwrap().to_owned();
    let user = stage
        .iter()
        .rfind(|l| l.starts_with("USER "))
        .map(|l| l[5..].trim().to_owned())
        .unwrap_or_else(|| panic!("{file}: the final stage sets no USER"));
    let entrypoint = stage
        .iter()
        .rfind(|l| l.starts_with("ENTRYPOINT"))
        .map(|l| serde_json::from_str(l.trim_start_matches("ENTRYPOINT").trim()).unwrap())
        .unwrap_or_else(|| panic!("{file}: the final stage has no ENTRYPOINT"));
    let mut labels: Vec<String> = stage
        .iter()
        .filter_map(|l| l.strip_prefix("LABEL "))
        .flat_map(|l| l.split_whitespace())
        .map(|kv| kv.split('=').next().unwrap().to_owned())
        .collect();
    labels.sort();
    let working_dir = stage
        .iter()
        .rfind(|l| l.starts_with("WORKDIR "))
        .map(|l| l[8..].trim().to_owned())
        .unwrap_or_else(|| if static_base { DISTROLESS_WORKDIR } else { "/" }.to_owned());
    let env = if static_base {
        DISTROLESS_ENV.iter().map(|e| (*e).to_owned()).collect()
    } else {
        Vec::new()
    };
    ImageSpec {
        package,
        bin,
        profile,
        path,
        user,
        entrypoint,
        working_dir,
        env,
        labels,
        static_base,
    }
}

/// Splits a line `scripts/images.sh --dry-run` printed (`printf %q` words) as bash would.
fn shell_words(line: &str) -> Vec<String> {
    let out = Command::new("bash")
        .args(["-c", r#"eval "set -- $1"; printf '%s\0' "$@""#, "_", line])
        .output()
        .unwrap();
    assert!(out.status.success(), "cannot split {line}");
    String::from_utf8(out.stdout)
        .unwrap()
        .split_terminator('\0')
        .map(str::to_owned)
        .collect()
}

/// The values of every `--name VALUE` in `words`.
fn values(words: &[String], name: &str) -> Vec<String> {
    words
        .windows(2)
        .filter(|w| w[0] == name)
        .map(|w| w[1].clone())
        .collect()
}

/// What `scripts/images.sh --hermetic` builds, by image name: read from its dry run.
fn hermetic_specs() -> BTreeMap<String, ImageSpec> {
    let (code, stdout, stderr) = images_sh(&["--hermetic", "--dry-run"], &[]);
    assert_eq!(code, 0, "{stderr}");
    let commands: Vec<Vec<String>> = stdout.lines().map(shell_words).collect();
    // (package, bin) → profile, from the cargo builds.
    let mut profiles = BTreeMap::new();
    for words in commands.iter().filter(|w| w.contains(&"cargo".to_owned())) {
        let profile = values(words, "--profile").pop().unwrap();
        assert!(words.contains(&"--locked".to_owned()), "{words:?}");
        for (p, b) in values(words, "-p").into_iter().zip(values(words, "--bin")) {
            profiles.insert(b, (p, profile.clone()));
        }
    }
    let mut specs = BTreeMap::new();
    for commit in commands
        .iter()
        .filter(|w| w.get(1).is_some_and(|c| c == "commit"))
    {
        let ctr = &commit[commit.len() - 2];
        let reference = commit.last().unwrap();
        let name = reference
            .rsplit('/')
            .next()
            .unwrap()
            .split(':')
            .next()
            .unwrap();
        let of_ctr: Vec<&Vec<String>> = commands.iter().filter(|w| w.contains(ctr)).collect();
        let (binary, path) = of_ctr
            .iter()
            .filter(|w| w[1] == "copy")
            .find_map(|w| {
                // The binary comes from cargo's output; the base's files from target/images.
                let src = &w[w.len() - 2];
                (src.starts_with("target/") && !src.starts_with("target/images/"))
                    .then(|| (src.clone(), w.last().unwrap().clone()))
            })
            .unwrap_or_else(|| panic!("{name}: no binary copied in: {of_ctr:?}"));
        let bin = binary.rsplit('/').next().unwrap().to_owned();
        let (package, profile) = profiles[&bin].clone();
        let out_dir = cargo_out_dir(&profile);
        assert!(
            binary.ends_with(&format!("/{out_dir}/{bin}")),
            "{name}: copies {binary}, not what `--profile {profile}` builds"
        );
        let config = of_ctr.iter().find(|w| w[1] == "config").unwrap();
        let mut labels: Vec<String> = values(config, "--label")
            .iter()
            .map(|kv| kv.split('=').next().unwrap().to_owned())
            .collect();
        labels.sort();
        let annotations: Vec<String> = values(config, "--annotation");
        assert_eq!(
            annotations,
            values(config, "--label"),
            "{name}: the OCI annotations are the labels"
        );
        let static_base = of_ctr
            .iter()
            .any(|w| w[1] == "copy" && w.last().unwrap() == "/etc");
        specs.insert(
            name.to_owned(),
            ImageSpec {
                package,
                bin,
                profile,
                path,
                user: values(config, "--user").pop().unwrap(),
                entrypoint: serde_json::from_str(&values(config, "--entrypoint").pop().unwrap())
                    .unwrap(),
                working_dir: values(config, "--workingdir").pop().unwrap(),
                env: values(config, "--env"),
                labels,
                static_base,
            },
        );
    }
    specs
}

/// The image names and Containerfiles scripts/images.sh builds (its dry run with an engine).
fn containerfiles() -> BTreeMap<String, String> {
    let (code, stdout, stderr) = images_sh(&["--dry-run", "--engine", "podman"], &[]);
    assert_eq!(code, 0, "{stderr}");
    stdout
        .lines()
        .map(|l| {
            let name = flag(l, "-t").unwrap().rsplit('/').next().unwrap();
            (
                name.split(':').next().unwrap().to_owned(),
                flag(l, "-f").unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn the_hermetic_build_makes_each_image_as_its_containerfile_does() {
    let hermetic = hermetic_specs();
    let files = containerfiles();
    assert_eq!(
        hermetic.keys().collect::<Vec<_>>(),
        files.keys().collect::<Vec<_>>(),
        "both paths build the same images"
    );
    for (name, file) in &files {
        let expected = containerfile_spec(file);
        assert_eq!(hermetic[name], expected, "{name}: hermetic vs {file}");
        assert_eq!(expected.entrypoint, vec![expected.path.clone()], "{file}");
        assert_eq!(
            expected.labels,
            [
                "org.opencontainers.image.revision",
                "org.opencontainers.image.source",
                "org.opencontainers.image.version"
            ],
            "{file}: the OCI labels"
        );
    }
    // Dev images for the test command: every binary with the profile asked for.
    let (code, stdout, stderr) = images_sh(&["--hermetic", "--dry-run", "--profile", "dev"], &[]);
    assert_eq!(code, 0, "{stderr}");
    let builds: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("cargo build"))
        .collect();
    assert_eq!(builds.len(), 1, "{builds:?}");
    assert_eq!(flag(builds[0], "--profile"), Some("dev"));
    assert!(builds[0].contains("target-feature=+crt-static") || builds[0].contains("-musl"));
}

/// The tag of the images to run, or None after saying SKIPPED.
fn images_under_test(test: &str) -> Option<String> {
    match telemesh_tests::images::image_tag() {
        Ok(tag) => Some(tag),
        Err(why) => {
            println!("SKIPPED {test}: {why}");
            None
        }
    }
}

/// The files (not directories) under `root`, relative to it.
fn files_under(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                dirs.push(path);
            } else {
                found.push(
                    path.strip_prefix(root)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
    }
    found.sort();
    found
}

#[tokio::test]
async fn each_image_is_its_containerfiles_and_its_binary_answers_inside_it() {
    use telemesh_tests::images::{WorkingContainer, inspect, reference};
    let Some(tag) =
        images_under_test("each_image_is_its_containerfiles_and_its_binary_answers_inside_it")
    else {
        return;
    };
    let ws = workspace();
    for (name, file) in containerfiles() {
        let spec = containerfile_spec(&file);
        let image = reference(&name, &tag);
        let (config, size) = inspect(&image);
        assert_eq!(config["User"], spec.user, "{image}");
        assert_eq!(
            config["Entrypoint"],
            serde_json::json!(spec.entrypoint),
            "{image}"
        );
        assert_eq!(config["WorkingDir"], spec.working_dir, "{image}");
        let env: Vec<String> = config["Env"]
            .as_array()
            .map(|e| e.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
            .unwrap_or_default();
        assert_eq!(env, spec.env, "{image}");
        // buildah adds its own io.buildah.version; the OCI ones are ours.
        let labels = config["Labels"].as_object().unwrap();
        let oci: Vec<&String> = labels
            .keys()
            .filter(|k| k.starts_with("org.opencontainers."))
            .collect();
        assert_eq!(oci, spec.labels.iter().collect::<Vec<_>>(), "{image}");
        assert_eq!(labels["org.opencontainers.image.version"], ws.version);

        let container = WorkingContainer::from_image(&image);
        let root = container.root();
        let mut expected = vec![spec.path.trim_start_matches('/').to_owned()];
        if spec.static_base {
            expected.extend(
                [
                    "etc/group",
                    "etc/passwd",
                    "etc/ssl/certs/ca-certificates.crt",
                ]
                .map(String::from),
            );
            let passwd = std::fs::read_to_string(root.join("etc/passwd")).unwrap();
            assert!(
                passwd.lines().any(|l| l.starts_with(&format!(
                    "nonroot:x:{}:",
                    spec.user.split(':').next().unwrap()
                ))),
                "{image}: /etc/passwd has no nonroot user:\n{passwd}"
            );
            assert!(root.join("tmp").is_dir() && root.join("home/nonroot").is_dir());
        }
        expected.sort();
        assert_eq!(files_under(&root), expected, "{image}: its files");

        let out = container
            .command(&[], &[], &spec.entrypoint[0])
            .arg("--version")
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.trim() == format!("{} {}", spec.bin, ws.version),
            "{image}: `{} --version` printed {stdout:?} ({}): {}",
            spec.entrypoint[0],
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        println!(
            "image {image}: {size}, {} runs as {}",
            spec.entrypoint[0], spec.user
        );
    }
}

/// `field` (`Uid`, `VmRSS`) of /proc/PID/status, its first value.
fn proc_status(pid: u32, field: &str) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| {
        l.strip_prefix(field)?
            .strip_prefix(':')?
            .split_whitespace()
            .next()
            .map(str::to_owned)
    })
}

#[tokio::test]
async fn the_agents_image_reads_a_host_root_and_joins_a_sim_clusters_gossip() {
    use telemesh_tests::images::{AgentImage, WorkingContainer, process_in_group, reference};
    use telemesh_tests::mesh::Mesh;
    let test = "the_agents_image_reads_a_host_root_and_joins_a_sim_clusters_gossip";
    let Some(tag) = images_under_test(test) else {
        return;
    };
    let spec = containerfile_spec("agent/Containerfile");
    let image = AgentImage {
        container: WorkingContainer::from_image(&reference("telemesh-agent", &tag)),
        program: spec.entrypoint[0].clone(),
    };
    let env = telemesh_tests::SimEnv::start(1).await;
    let node = "sim-node-0";
    // The coordinator (the workspace's) sees the node once the agent in its image gossips.
    let mesh = Mesh::start_in_image(image, &env, &[(node, "node_image_probe 7\n")], &[], 1).await;
    // /proc from the host root (the fixture's load average, not this machine's), the textfile
    // from its textfile directory.
    mesh.wait_node(node, |n| {
        n["metrics"]["node_load1"]["value"].as_f64() == Some(2.17)
            && n["metrics"]["node_image_probe"]["value"].as_f64() == Some(7.0)
    })
    .await;
    // And keeps reading it.
    mesh.script(node, "node_image_probe 8\n");
    mesh.wait_metric(node, "node_image_probe", 8.0).await;

    let group = mesh.agents[node].id().unwrap();
    let agent = process_in_group(group, "telemesh-agent")
        .unwrap_or_else(|| panic!("no telemesh-agent process under buildah run ({group})"));
    assert_eq!(
        proc_status(agent, "Uid").as_deref(),
        Some(spec.user.split(':').next().unwrap()),
        "the agent runs as its image's non-root user"
    );
    let rss_kib: f64 = proc_status(agent, "VmRSS").unwrap().parse().unwrap();
    println!(
        "agent {tag} in its image, 1 node and 1 coordinator: RSS {:.1} MiB",
        rss_kib / 1024.0
    );
}

/// The checkpoint in `state`: (done, units).
fn checkpoint_progress(state: &Path) -> Option<(u64, u64)> {
    let saved: Value = serde_json::from_slice(&std::fs::read(state).ok()?).ok()?;
    Some((saved["done"].as_u64()?, saved["units"].as_u64()?))
}

#[tokio::test]
async fn the_checkpoint_demos_image_checkpoints_is_stopped_and_resumes() {
    use std::time::Duration;
    use telemesh_tests::Process;
    use telemesh_tests::images::{WorkingContainer, process_in_group, reference};
    let test = "the_checkpoint_demos_image_checkpoints_is_stopped_and_resumes";
    let Some(tag) = images_under_test(test) else {
        return;
    };
    let spec = containerfile_spec("demo/checkpoint/Containerfile");
    let container = WorkingContainer::from_image(&reference("telemesh-checkpoint-demo", &tag));
    // The job's volume, owned by the image's user as a pod's fsGroup would make it.
    let volume = tempfile::tempdir().unwrap();
    let uid: u32 = spec.user.split(':').next().unwrap().parse().unwrap();
    std::os::unix::fs::chown(volume.path(), Some(uid), Some(uid)).unwrap();
    let demo = |units: u64, state: &Path| {
        let mut cmd = container.command(&[volume.path()], &[], &spec.entrypoint[0]);
        cmd.arg(format!("--units={units}"))
            .arg("--unit-iterations=1000000")
            .arg("--interval=0")
            .arg(format!("--state={}", state.display()));
        Process::spawn_group("telemesh-checkpoint-demo in its image", cmd)
    };

    // Stopped part-way: SIGTERM once a checkpoint is on the volume. A job that finishes before
    // the stop reaches it (an optimised build is fast) is run again four times as long: this
    // sizes the work, it asserts no time.
    let state = volume.path().join("job.checkpoint");
    let mut units = 200;
    let (done, status, run) = loop {
        let _ = std::fs::remove_file(&state);
        let mut run = demo(units, &state);
        telemesh_tests::eventually(
            "a checkpoint on the volume",
            Duration::from_secs(60),
            || {
                let progress = checkpoint_progress(&state);
                async move { progress.filter(|(done, _)| *done > 0).map(|_| ()) }
            },
        )
        .await;
        // As the kubelet stops a container: SIGTERM to its main process.
        let group = run.id().unwrap();
        let program = spec.entrypoint[0].rsplit('/').next().unwrap();
        let pid = process_in_group(group, program)
            .unwrap_or_else(|| panic!("no {program} process under buildah run ({group})"));
        telemesh_tests::send_signal(&pid.to_string(), "TERM");
        let status = run.wait_exit(Duration::from_secs(30)).await;
        let (done, total) = checkpoint_progress(&state).expect("the checkpoint stays whole");
        assert_eq!(total, units);
        if done < units {
            break (done, status, run);
        }
        assert!(
            units < 200 * 64,
            "the job finished before SIGTERM reached it, at every size"
        );
        units *= 4;
    };
    assert!(
        status.code() == Some(143)
            && run
                .output()
                .iter()
                .any(|l| l.contains("the work since the last checkpoint is lost")),
        "stopped by SIGTERM ({status}): {:?}",
        run.output()
    );

    // Resumed: from the checkpoint, to the result of a run never stopped.
    let mut resumed = demo(units, &state);
    assert!(
        resumed.wait_exit(Duration::from_secs(300)).await.success(),
        "{:?}",
        resumed.output()
    );
    let resumed_at: u64 = resumed
        .output()
        .iter()
        .find_map(|l| {
            l.strip_prefix("resuming at unit ")?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("it did not resume: {:?}", resumed.output()));
    assert_eq!(resumed_at, done, "it resumes where its checkpoint says");
    let mut whole = demo(units, &volume.path().join("uninterrupted.checkpoint"));
    assert!(
        whole.wait_exit(Duration::from_secs(300)).await.success(),
        "{:?}",
        whole.output()
    );
    let result = |p: &Process| {
        p.output()
            .into_iter()
            .find(|l| l.starts_with("result "))
            .unwrap_or_else(|| panic!("no result: {:?}", p.output()))
    };
    assert_eq!(result(&resumed), result(&whole));
    println!(
        "{tag}: stopped at unit {done} of {units}, resumed at {resumed_at}, {}",
        result(&whole)
    );
}
