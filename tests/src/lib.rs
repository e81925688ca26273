//! Test harness shared by the end-to-end tests: starting sim, running real clients against it
//! (kubectl, the Python client), the project's own binaries and upstream's kube-scheduler and
//! descheduler, and waiting on predicates.

pub mod cluster;
pub mod dashboard;
pub mod fabric;
pub mod images;
pub mod mesh;
pub mod metrics_reference;
pub mod real;
pub mod rpc;
pub mod upstream;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

pub use telemesh_runtime::testing::eventually;

/// A running sim with its kubeconfig written to a private temporary directory.
///
/// The directory also serves as `HOME` and kubectl's cache directory for clients run against
/// this sim, so nothing reads or writes the user's `~/.kube`.
#[derive(Debug)]
pub struct SimEnv {
    /// The sim, served in-process on 127.0.0.1.
    pub sim: telemesh_sim::Sim,
    /// Where `sim`'s kubeconfig is.
    pub kubeconfig: PathBuf,
    dir: tempfile::TempDir,
}

impl SimEnv {
    /// Starts a plain-HTTP sim with `nodes` Node objects (`sim-node-0..`).
    pub async fn start(nodes: usize) -> Self {
        Self::start_with(telemesh_sim::SimConfig::default(), nodes).await
    }

    /// Starts a sim from `config` with `nodes` Node objects and writes its kubeconfig.
    pub async fn start_with(config: telemesh_sim::SimConfig, nodes: usize) -> Self {
        let sim = telemesh_sim::Sim::start(config)
            .await
            .expect("starting sim");
        telemesh_sim::nodes::create_nodes(&sim.server, nodes)
            .unwrap_or_else(|e| panic!("creating {nodes} nodes: {}", e.message));
        let dir = tempfile::tempdir().expect("creating a temporary directory");
        let kubeconfig = dir.path().join("kubeconfig");
        sim.write_kubeconfig(&kubeconfig)
            .expect("writing the kubeconfig");
        Self {
            sim,
            kubeconfig,
            dir,
        }
    }

    /// Returns the private temporary directory (kubeconfig, HOME, caches, manifests).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Returns a kube client for the sim.
    pub async fn client(&self) -> kube::Client {
        self.sim
            .client()
            .await
            .expect("building a kube client for sim")
    }

    /// Returns a kubectl runner using this sim's kubeconfig.
    pub fn kubectl(&self) -> Kubectl {
        Kubectl::new(&self.kubeconfig, self.dir.path())
    }

    /// Writes `contents` to `name` in the private directory and returns its path.
    pub fn write_file(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, contents)
            .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        path
    }
}

/// The kubectl binary the tests run: `$KUBECTL`, else `kubectl` on `PATH`.
pub fn kubectl_binary() -> PathBuf {
    std::env::var_os("KUBECTL").map_or_else(|| PathBuf::from("kubectl"), PathBuf::from)
}

/// Where the tests find kubectl releases other than the default one, as `kubectl.<minor>`
/// (`kubectl.1.27`): `$KUBECTL_RELEASES_DIR`, else where the Google Cloud SDK's packages put them.
pub fn kubectl_releases_dir() -> PathBuf {
    std::env::var_os("KUBECTL_RELEASES_DIR").map_or_else(
        || PathBuf::from("/usr/lib/google-cloud-sdk/bin"),
        PathBuf::from,
    )
}

/// The kubectl binary of release `minor` (`"1.27"`), if it is installed in
/// [`kubectl_releases_dir`]; when it is not, says so on stderr, for the test to skip it.
pub fn kubectl_release(minor: &str) -> Option<PathBuf> {
    let path = kubectl_releases_dir().join(format!("kubectl.{minor}"));
    if path.is_file() {
        Some(path)
    } else {
        eprintln!(
            "SKIPPED for kubectl {minor}: {} is absent (set KUBECTL_RELEASES_DIR)",
            path.display()
        );
        None
    }
}

/// Runs kubectl against one kubeconfig, isolated from the user's environment.
#[derive(Debug, Clone)]
pub struct Kubectl {
    binary: PathBuf,
    kubeconfig: PathBuf,
    home: PathBuf,
}

/// How long one kubectl invocation may take before the test fails.
pub const KUBECTL_TIMEOUT: Duration = Duration::from_secs(60);

impl Kubectl {
    /// Returns a runner for `kubeconfig`; `home` becomes kubectl's `HOME` and holds its cache.
    pub fn new(kubeconfig: &Path, home: &Path) -> Self {
        Self {
            binary: kubectl_binary(),
            kubeconfig: kubeconfig.to_owned(),
            home: home.to_owned(),
        }
    }

    /// Returns this runner with another kubectl binary (an older release, say).
    #[must_use]
    pub fn with_binary(mut self, binary: &Path) -> Self {
        binary.clone_into(&mut self.binary);
        self
    }

    /// Returns a kubectl command with `args`, the kubeconfig and a private cache directory.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.binary);
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.home.join("kube-cache"))
            .args(args)
            .env_remove("KUBECONFIG")
            .env("HOME", &self.home)
            .stdin(Stdio::null())
            .kill_on_drop(true);
        cmd
    }

    /// Runs kubectl with `args` (and `stdin`, if any) and returns its output, whatever its exit
    /// status. Panics if it does not finish within [`KUBECTL_TIMEOUT`].
    pub async fn output(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = self.command(args);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        if stdin.is_some() {
            cmd.stdin(Stdio::piped());
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run kubectl {args:?}: {e}"));
        if let Some(input) = stdin {
            let mut pipe = child.stdin.take().expect("kubectl stdin is piped");
            pipe.write_all(input.as_bytes())
                .await
                .expect("writing kubectl's stdin");
            drop(pipe);
        }
        tokio::time::timeout(KUBECTL_TIMEOUT, child.wait_with_output())
            .await
            .unwrap_or_else(|_| {
                panic!("kubectl {args:?} did not finish within {KUBECTL_TIMEOUT:?}")
            })
            .expect("waiting for kubectl")
    }

    /// Runs kubectl with `args`, asserts it succeeded and returns its stdout.
    pub async fn run(&self, args: &[&str]) -> String {
        self.run_stdin(args, None).await
    }

    /// Runs kubectl with `args` and `stdin`, asserts it succeeded and returns its stdout.
    pub async fn run_stdin(&self, args: &[&str], stdin: Option<&str>) -> String {
        let out = self.output(args, stdin).await;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "kubectl {} failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }

    /// Runs kubectl with `args`, asserts it failed and returns its stderr.
    pub async fn fail(&self, args: &[&str]) -> String {
        let out = self.output(args, None).await;
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            !out.status.success(),
            "kubectl {} should have failed but succeeded:\nstdout:\n{}\nstderr:\n{stderr}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout)
        );
        stderr
    }

    /// Starts a long-running kubectl (e.g. `get -w`) whose stdout is read line by line.
    pub fn spawn(&self, args: &[&str]) -> LineReader {
        let mut child = self
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run kubectl {args:?}: {e}"));
        let stdout = child.stdout.take().expect("kubectl stdout is piped");
        LineReader {
            child,
            lines: BufReader::new(stdout).lines(),
            seen: Vec::new(),
        }
    }
}

/// The stdout of a running process, read line by line with deadlines. Kills the process on drop.
#[derive(Debug)]
pub struct LineReader {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    seen: Vec<String>,
}

impl LineReader {
    /// Reads lines until one satisfies `pred` and returns it; panics, showing every line read and
    /// the process's stderr, if none does within `within` or the output ends first.
    pub async fn expect_line(
        &mut self,
        what: &str,
        within: Duration,
        pred: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match tokio::time::timeout_at(deadline, self.lines.next_line()).await {
                Ok(Ok(Some(line))) => {
                    self.seen.push(line.clone());
                    if pred(&line) {
                        return line;
                    }
                }
                Ok(Ok(None)) => self.fail(&format!("output ended before {what}")).await,
                Ok(Err(e)) => {
                    self.fail(&format!("reading output failed ({e}) before {what}"))
                        .await
                }
                Err(_) => {
                    self.fail(&format!("timed out after {within:?} waiting for {what}"))
                        .await
                }
            }
        }
    }

    /// Returns every line read so far.
    pub fn seen(&self) -> &[String] {
        &self.seen
    }

    async fn fail(&mut self, why: &str) -> ! {
        let _ = self.child.start_kill();
        let mut stderr = String::new();
        if let Some(mut err) = self.child.stderr.take() {
            use tokio::io::AsyncReadExt as _;
            let _ =
                tokio::time::timeout(Duration::from_secs(5), err.read_to_string(&mut stderr)).await;
        }
        panic!(
            "{why}\nstdout so far:\n{}\nstderr:\n{stderr}",
            self.seen.join("\n")
        );
    }
}

/// Splits a table row as kubectl prints it (columns separated by runs of spaces) into cells.
pub fn cells(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// Returns the first line of `table` whose first cell is `name` (or, with `-A`, whose second
/// cell is), split into cells; panics showing the table if there is none.
pub fn row<'a>(table: &'a str, name: &str) -> Vec<&'a str> {
    table
        .lines()
        .map(cells)
        .find(|c| c.first() == Some(&name) || c.get(1) == Some(&name))
        .unwrap_or_else(|| panic!("no row for {name:?} in:\n{table}"))
}

/// Returns the header cells (first line) of a kubectl table.
pub fn header(table: &str) -> Vec<&str> {
    table.lines().next().map(cells).unwrap_or_default()
}

/// Returns the path of a workspace binary (`telemesh-agent`, `telemesh-coordinator`) built
/// beside this test executable (`target/<profile>/NAME`); panics saying how to build it when
/// it is missing (`CARGO_BIN_EXE_*` exists only inside the binary's own package).
pub fn workspace_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    // target/<profile>/deps/<test>-<hash> → target/<profile>/<name>
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test executable lives in target/<profile>/deps");
    let path = dir.join(name);
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build --workspace --bins` first (scripts/test.sh does)",
        path.display()
    );
    path
}

/// Sends `signal` (`TERM`, `KILL`) to `target`: a process id, or `-GROUP` for a process group.
pub fn send_signal(target: &str, signal: &str) {
    // No signal crate in the harness: the `kill` program does it.
    let _ = std::process::Command::new("kill")
        .args(["-s", signal, "--", target])
        .stderr(Stdio::null())
        .status();
}

/// A child process whose stdout and stderr lines are kept for the test to search and to show
/// when it fails. Killed on drop (with its whole process group when started by
/// [`Process::spawn_group`]).
#[derive(Debug)]
pub struct Process {
    name: String,
    child: Child,
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// The process group the child leads, when its descendants must die with it.
    group: Option<u32>,
}

impl Process {
    /// Starts `cmd` (stdin closed, stdout and stderr collected) and names it `name` in messages.
    pub fn spawn(name: &str, cmd: Command) -> Self {
        Self::start(name, cmd, false)
    }

    /// [`Process::spawn`] for a launcher whose descendants outlive it when it is killed (`buildah
    /// run` leaves the command it ran behind): the child leads a new process group, and
    /// [`Process::kill`], [`Process::signal`] and drop reach the whole group.
    pub fn spawn_group(name: &str, mut cmd: Command) -> Self {
        cmd.process_group(0);
        Self::start(name, cmd, true)
    }

    /// Sends `signal` (`TERM`, `KILL`) to the process, or to its whole group when it leads one.
    pub fn signal(&self, signal: &str) {
        let target = match (self.group, self.child.id()) {
            (Some(group), _) => format!("-{group}"),
            (None, Some(pid)) => pid.to_string(),
            (None, None) => return,
        };
        send_signal(&target, signal);
    }

    fn start(name: &str, mut cmd: Command, grouped: bool) -> Self {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let collect = |out: Option<Box<dyn tokio::io::AsyncRead + Send + Unpin>>| {
            let lines = lines.clone();
            async move {
                let Some(out) = out else { return };
                let mut reader = BufReader::new(out).lines();
                while let Ok(Some(line)) = reader.next_line().await {
                    lines.lock().expect("process lines lock").push(line);
                }
            }
        };
        let stdout = child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>);
        let stderr = child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>);
        tokio::spawn(collect(stdout));
        tokio::spawn(collect(stderr));
        let group = if grouped { child.id() } else { None };
        Self {
            name: name.to_owned(),
            child,
            lines,
            group,
        }
    }

    /// Returns every output line so far.
    pub fn output(&self) -> Vec<String> {
        self.lines.lock().expect("process lines lock").clone()
    }

    /// Waits for an output line that `pred` maps to `Some`; panics, showing the output, if
    /// none comes within `within` or the process exits first.
    pub async fn wait_for_line<T>(
        &mut self,
        what: &str,
        within: Duration,
        pred: impl Fn(&str) -> Option<T>,
    ) -> T {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(v) = self.output().iter().find_map(|l| pred(l)) {
                return v;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "{} exited ({status}) before {what}; its output:\n{}",
                    self.name,
                    self.output().join("\n")
                );
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out after {within:?} waiting for {what} from {}; its output:\n{}",
                self.name,
                self.output().join("\n")
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Returns the process id (`None` once it has been reaped).
    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// Returns whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits for the process to exit and returns its status; panics, showing its output, if it
    /// is still running after `within`.
    pub async fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
        match tokio::time::timeout(within, self.child.wait()).await {
            Ok(status) => status.expect("waiting for a child process"),
            Err(_) => panic!(
                "{} still running after {within:?}; its output:\n{}",
                self.name,
                self.output().join("\n")
            ),
        }
    }

    /// Kills the process (its whole group, when it leads one) and waits for it.
    pub async fn kill(&mut self) {
        if self.group.is_some() {
            self.signal("KILL");
        }
        let _ = self.child.kill().await;
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // The child itself dies by `kill_on_drop`; a group's other members only by this, even
        // when the child has already exited.
        if self.group.is_some() {
            self.signal("KILL");
        }
    }
}
