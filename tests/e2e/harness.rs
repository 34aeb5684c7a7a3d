//! Drives the real `envhost` binary over NDJSON, as an agent would.
//!
//! [`Host`] starts `envhost serve` on a throw-away project directory, writes
//! request lines to its stdin and reads answer lines from its stdout with a
//! deadline, so a hung host fails the test instead of hanging it. Nothing
//! here knows about particular environments.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long any single answer may take before the test fails.
pub const ANSWER_DEADLINE: Duration = Duration::from_secs(120);

/// The workspace root (this test is a target of `host/envhost`).
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("the envhost crate is host/envhost in the workspace")
        .to_owned()
}

/// The build's target folder (`CARGO_TARGET_DIR`, or `target/` in the
/// workspace).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|dir| {
            if dir.is_absolute() {
                dir
            } else {
                workspace().join(dir)
            }
        })
        .unwrap_or_else(|| workspace().join("target"))
}

pub fn envhost_binary() -> &'static str {
    env!("CARGO_BIN_EXE_envhost")
}

/// A project directory removed when dropped.
pub struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    pub fn new() -> Self {
        Project {
            dir: tempfile::Builder::new()
                .prefix("envhost-e2e-")
                .tempdir()
                .expect("create a temporary project"),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The canonical path, as the host reports it.
    pub fn canonical(&self) -> PathBuf {
        self.dir
            .path()
            .canonicalize()
            .expect("canonical project path")
    }

    pub fn write(&self, relative: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.dir.path().join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create parent folders");
        }
        std::fs::write(&path, content).expect("write project file");
        path
    }

    pub fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(relative)).expect("read project file")
    }
}

/// Options for starting a host.
pub struct HostBuilder {
    args: Vec<String>,
    env: Vec<(String, String)>,
    env_remove: Vec<String>,
    wrapper: Vec<String>,
    subcommand: &'static str,
}

impl HostBuilder {
    /// Runs `envhost SUBCOMMAND` (`mcp`) instead of `envhost serve`; the
    /// lines are then whatever that front end speaks.
    pub fn subcommand(mut self, subcommand: &'static str) -> Self {
        self.subcommand = subcommand;
        self
    }

    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    pub fn env_remove(mut self, key: &str) -> Self {
        self.env_remove.push(key.to_owned());
        self
    }

    /// Starts the host through this command (e.g. `unshare --pid --fork`),
    /// which runs it with its arguments; `Host::pid` is then the wrapper's.
    pub fn wrapped_in<I, S>(mut self, wrapper: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.wrapper = wrapper.into_iter().map(Into::into).collect();
        self
    }

    pub fn start(self, project: &Path) -> Host {
        let mut command = match self.wrapper.split_first() {
            Some((program, wrapper_args)) => {
                let mut command = Command::new(program);
                command.args(wrapper_args).arg(envhost_binary());
                command
            }
            None => Command::new(envhost_binary()),
        };
        command
            .arg(self.subcommand)
            .arg("--project")
            .arg(project)
            .args(&self.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (key, value) in &self.env {
            command.env(key, value);
        }
        for key in &self.env_remove {
            command.env_remove(key);
        }
        let mut child = command.spawn().expect("start envhost serve");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout");
        let stderr = child.stderr.take().expect("stderr");
        let (lines_tx, lines) = mpsc::channel();
        thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut line = String::new();
                match reader.read_line(&mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if lines_tx.send(line).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        let (stderr_tx, stderr_rx) = mpsc::channel();
        thread::spawn(move || {
            let mut text = String::new();
            let _ = BufReader::new(stderr).read_to_string(&mut text);
            let _ = stderr_tx.send(text);
        });
        Host {
            child,
            stdin,
            lines,
            stderr: stderr_rx,
        }
    }
}

/// A running `envhost serve`.
pub struct Host {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Receiver<String>,
}

impl Host {
    pub fn builder() -> HostBuilder {
        HostBuilder {
            args: Vec::new(),
            env: Vec::new(),
            env_remove: Vec::new(),
            wrapper: Vec::new(),
            subcommand: "serve",
        }
    }

    pub fn start(project: &Path) -> Host {
        Host::builder().start(project)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The pid, in this test's numbering, of the process the host's
    /// environments know as `inner` (`$$`, `$!`, `os.getpid()` in a
    /// command): commands run in a PID namespace of their own, numbered
    /// from 1. Without one (`--isolation guard`) the numbers are the same.
    /// A process that no longer exists gives [`GONE`]. Call it while the
    /// host lives: its namespace ends with it.
    pub fn outer_pid(&self, inner: i32) -> i32 {
        outer_pid(self.pid(), inner)
    }

    /// [`Host::outer_pid`] of each.
    pub fn outer_pids(&self, inner: &[i32]) -> Vec<i32> {
        inner.iter().map(|&pid| self.outer_pid(pid)).collect()
    }

    /// Writes raw bytes to the host's stdin.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).expect("write to envhost");
        stdin.flush().expect("flush to envhost");
    }

    /// Writes one JSON value as one line.
    pub fn send(&mut self, value: &Value) {
        let mut line = serde_json::to_vec(value).expect("serialise request");
        line.push(b'\n');
        self.send_raw(&line);
    }

    /// The next answer line, parsed; panics after [`ANSWER_DEADLINE`].
    pub fn recv(&mut self) -> Value {
        self.recv_within(ANSWER_DEADLINE)
    }

    pub fn recv_within(&mut self, deadline: Duration) -> Value {
        match self.lines.recv_timeout(deadline) {
            Ok(line) => serde_json::from_str(&line).unwrap_or_else(|e| {
                panic!("envhost wrote a line that is not JSON ({e}): {line:?}")
            }),
            Err(_) => panic!(
                "no answer from envhost within {deadline:?}; stderr so far unknown (host still running: {})",
                self.is_running()
            ),
        }
    }

    /// The next answer line as the host wrote it (to check exact bytes).
    pub fn recv_text(&mut self) -> String {
        self.lines
            .recv_timeout(ANSWER_DEADLINE)
            .unwrap_or_else(|_| panic!("no answer from envhost within {ANSWER_DEADLINE:?}"))
    }

    /// Sends one request and returns its answer as a response.
    pub fn request(&mut self, request: &Value) -> Reply {
        self.send(request);
        Reply(self.recv())
    }

    /// Asserts that no answer arrives within `wait`.
    pub fn expect_silence(&mut self, wait: Duration) {
        if let Ok(line) = self.lines.recv_timeout(wait) {
            panic!("expected no answer, got {line}");
        }
    }

    /// Runs one command and returns its answer.
    pub fn command(&mut self, environment: &str, command: &str) -> Reply {
        self.send(&json!({"type": "command", "environment": environment, "command": command}));
        Reply(self.recv())
    }

    /// Runs one command with a per-command timeout.
    pub fn command_with_timeout(
        &mut self,
        environment: &str,
        command: &str,
        timeout_ms: u64,
    ) -> Reply {
        self.send(&json!({
            "type": "command", "environment": environment, "command": command, "timeout_ms": timeout_ms
        }));
        Reply(self.recv())
    }

    /// The current screen.
    pub fn screen(&mut self) -> Reply {
        self.send(&json!({"type": "screen"}));
        Reply(self.recv())
    }

    /// Closes stdin (end of input).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits for the host to exit, failing the test after `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                panic!("envhost did not exit within {limit:?}");
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Closes stdin, waits for exit, and returns the exit status and stderr.
    pub fn finish(mut self) -> (ExitStatus, String) {
        self.close_stdin();
        let status = self.wait_exit(Duration::from_secs(30));
        let stderr = self
            .stderr
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_default();
        (status, stderr)
    }

    /// Sends a signal to the host process.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Everything the host wrote to stderr; only after it exited.
    pub fn stderr_after_exit(&mut self) -> String {
        self.stderr
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_default()
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.stdin = None;
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// One `{"type":"response"}` answer.
#[derive(Debug, Clone)]
pub struct Reply(pub Value);

impl Reply {
    pub fn kind(&self) -> &str {
        self.0["type"].as_str().unwrap_or("")
    }

    pub fn output(&self) -> &str {
        self.0["response"]["output"]
            .as_str()
            .unwrap_or_else(|| panic!("answer has no output: {}", self.0))
    }

    pub fn success(&self) -> bool {
        self.0["response"]["success"]
            .as_bool()
            .unwrap_or_else(|| panic!("answer has no success flag: {}", self.0))
    }

    /// Asserts the command succeeded and returns its output.
    pub fn ok(&self) -> &str {
        assert!(self.success(), "command failed: {}", self.0);
        self.output()
    }

    /// The command's own output: the host's notes (`[envhost] ...`, such
    /// as the one that ends a still-running answer) removed.
    pub fn own_output(&self) -> String {
        self.output()
            .lines()
            .filter(|line| !line.starts_with("[envhost]"))
            .map(|line| format!("{line}\n"))
            .collect()
    }

    /// Whether the command is still running (`running` is sent only when
    /// true, and then must be `true`).
    pub fn running(&self) -> bool {
        match self.0["response"].get("running") {
            None => false,
            Some(Value::Bool(true)) => true,
            Some(other) => panic!("running must be absent or true, got {other}: {}", self.0),
        }
    }

    /// Asserts the command failed and returns its output.
    pub fn failed(&self) -> &str {
        assert!(
            !self.success(),
            "command unexpectedly succeeded: {}",
            self.0
        );
        self.output()
    }

    /// One environment's screen content.
    pub fn screen(&self, environment: &str) -> &str {
        self.0["screen"][environment]["content"]
            .as_str()
            .unwrap_or_else(|| panic!("no {environment} section on the screen: {}", self.0))
    }

    pub fn max_lines(&self, environment: &str) -> u64 {
        self.0["screen"][environment]["max_lines"]
            .as_u64()
            .unwrap_or_else(|| panic!("no {environment} section on the screen: {}", self.0))
    }

    pub fn section_names(&self) -> Vec<String> {
        self.0["screen"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }
}

/// A pid no process has: what [`outer_pid`] gives for a process that is
/// gone (alive for no one, killed by no signal).
pub const GONE: i32 = i32::MAX;

/// The PID namespace the environments of the host `host` run in: the
/// inode of the namespace whose init (its pid 1) is a child of the host.
pub fn session_namespace(host: u32) -> Option<String> {
    let tasks = std::fs::read_dir(format!("/proc/{host}/task")).ok()?;
    for task in tasks.filter_map(Result::ok) {
        let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for child in children.split_whitespace() {
            let ids = namespace_pids(child);
            if ids.len() >= 2 && ids.last() == Some(&1) {
                return std::fs::read_link(format!("/proc/{child}/ns/pid"))
                    .ok()
                    .map(|link| link.to_string_lossy().into_owned());
            }
        }
    }
    None
}

/// `NSpid` of a process: its pid in each PID namespace it is in, outermost
/// first.
fn namespace_pids(pid: &str) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("NSpid:"))
        .map(|ids| {
            ids.split_whitespace()
                .filter_map(|id| id.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// See [`Host::outer_pid`]; `host` is the host's pid.
pub fn outer_pid(host: u32, inner: i32) -> i32 {
    let Some(namespace) = session_namespace(host) else {
        return inner;
    };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return GONE;
    };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let Some(pid) = name.to_str() else { continue };
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if namespace_pids(pid).last() != Some(&inner) {
            continue;
        }
        let same = std::fs::read_link(format!("/proc/{pid}/ns/pid"))
            .is_ok_and(|link| link.to_string_lossy() == namespace);
        if same && let Ok(pid) = pid.parse() {
            return pid;
        }
    }
    GONE
}

/// Is a process alive (not a zombie)?
pub fn process_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().next())
                .unwrap_or("");
            state != "Z" && state != "X"
        }
        Err(_) => false,
    }
}

/// Waits until `pid` is gone, up to `limit`.
pub fn wait_until_dead(pid: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if !process_alive(pid) {
            return true;
        }
        thread::sleep(Duration::from_millis(20));
    }
    !process_alive(pid)
}

/// Whether this machine lets the tests make PID namespaces (root, or a
/// user namespace); when it does not, the tests fail unless
/// ENVHOST_SKIP_PRIVILEGED=1 says to skip them (CI runs as root).
pub fn skip_without_pid_namespaces(test: &str) -> bool {
    let works = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "true"])
        .status()
        .is_ok_and(|status| status.success());
    if works {
        return false;
    }
    skip_unprivileged(
        test,
        "a new PID namespace (`unshare --pid --fork --mount-proc`)",
    )
}

/// Whether a test whose mechanism this machine lacks (`missing` says why)
/// is skipped: only when ENVHOST_SKIP_PRIVILEGED=1 says so; otherwise it
/// fails (CI runs as root, where every mechanism is there).
pub fn skip_unprivileged(test: &str, missing: &str) -> bool {
    let opted_out = std::env::var_os("ENVHOST_SKIP_PRIVILEGED").is_some_and(|v| v == "1");
    assert!(
        opted_out,
        "{test} needs {missing}: run the tests as root, or set ENVHOST_SKIP_PRIVILEGED=1 to skip it"
    );
    eprintln!("SKIPPED {test}: no {missing} here and ENVHOST_SKIP_PRIVILEGED=1");
    true
}
