//! The `python3` child process, its pipes, and the framing between the
//! host and the driver.
//!
//! The interpreter runs the driver embedded in the binary ([`DRIVER`]) in a
//! session of its own (a Ctrl-C at the host's terminal never reaches it; a
//! timeout signals its whole process group), with the parent-death signal
//! set (it dies with the host even if the host is killed), the secrets
//! filtered out of its environment, stdin on `/dev/null` and the project
//! directory as its working directory. It has three pipes:
//!
//! - output: its stdout *and* stderr, one pipe, so that prints, warnings,
//!   tracebacks and whatever C code or subprocesses write to fds 1 and 2
//!   arrive in the order they were written;
//! - requests (host → driver) and replies (driver → host): one JSON object
//!   per line, on their own file descriptors, so nothing the agent's code
//!   prints can ever be taken for a control message.
//!
//! This module owns starting, talking to, waiting for (with a deadline and
//! cancellation), signalling and reaping the interpreter. It must not decide
//! what a timeout or an exit means for the agent, nor format responses or
//! screens: that is the environment's job (`mod.rs`).

use std::ffi::OsString;
use std::io::{self, ErrorKind, PipeReader, PipeWriter, Read, Write};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, FdFlag, OFlag, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::Signal;
use serde::Deserialize;

use envhost_core::CancelFlag;
use envhost_process::signal_group;
use envhost_process::{ManagedPid, spawn_managed};

/// The driver program, shipped inside the binary.
pub const DRIVER: &str = include_str!("driver.py");

/// Runs the driver (argument 1) under a name of its own, so that a crash
/// dump (faulthandler) names its frames `<envhost-driver>`.
const BOOTSTRAP: &str = "import sys; exec(compile(sys.argv[1], '<envhost-driver>', 'exec'))";

/// Longest wait in `poll` before the cancel flag is looked at again.
const POLL_SLICE: Duration = Duration::from_millis(50);

/// Bytes read from the output pipe at a time.
const READ_CHUNK: usize = 64 * 1024;

/// Most bytes taken from the output pipe once the driver has answered: what
/// the code wrote is already in the pipe (at most its capacity); the bound
/// only stops a background process that never stops printing from holding
/// the answer up.
const DRAIN_LIMIT: usize = 4 * 1024 * 1024;

/// How long an interpreter that closed its reply pipe gets to exit.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// What an interpreter needs to start.
#[derive(Debug, Clone)]
pub struct Launch {
    pub program: PathBuf,
    pub working_dir: PathBuf,
    pub environment: Vec<(OsString, OsString)>,
}

/// A message from the driver on the reply pipe.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum DriverMessage {
    /// The driver is loaded (it also reports the Python version, unused).
    Ready {},
    Done(Done),
}

/// The driver's report when a command's code has finished.
#[derive(Debug, Clone, Deserialize)]
pub struct Done {
    /// `"ok"`, or `"error"` when the code raised (the traceback is in the
    /// output).
    pub status: String,
    /// `os.getcwd()` after the code ran.
    pub cwd: String,
    /// `[name, type name]` of every variable, in namespace order.
    pub variables: Vec<(String, String)>,
}

impl Done {
    pub fn succeeded(&self) -> bool {
        self.status == "ok"
    }
}

/// How an interpreter ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ending {
    /// `None` if its exit status could not be collected.
    pub status: Option<ExitStatus>,
}

impl Ending {
    pub fn exit_code(&self) -> Option<i32> {
        self.status.and_then(|s| s.code())
    }

    /// "exited with code 3", "was killed by signal SIGSEGV (segmentation
    /// fault)".
    pub fn describe(&self) -> String {
        let Some(status) = self.status else {
            return "ended (its exit status could not be collected)".to_owned();
        };
        if let Some(code) = status.code() {
            return format!("exited with code {code}");
        }
        match status.signal() {
            Some(number) => {
                let name = Signal::try_from(number)
                    .map(|s| s.as_str().to_owned())
                    .unwrap_or_else(|_| format!("signal {number}"));
                match signal_meaning(number) {
                    Some(meaning) => format!("was killed by signal {name} ({meaning})"),
                    None => format!("was killed by signal {name}"),
                }
            }
            None => format!("ended ({status})"),
        }
    }
}

fn signal_meaning(number: i32) -> Option<&'static str> {
    let signal = Signal::try_from(number).ok()?;
    Some(match signal {
        Signal::SIGSEGV => "segmentation fault",
        Signal::SIGABRT => "aborted",
        Signal::SIGBUS => "bus error",
        Signal::SIGFPE => "floating-point exception",
        Signal::SIGILL => "illegal instruction",
        Signal::SIGKILL => "killed; perhaps out of memory",
        Signal::SIGTERM => "terminated",
        Signal::SIGINT => "interrupted",
        _ => return None,
    })
}

/// What a wait for the driver came to.
#[derive(Debug)]
pub enum Wait {
    /// The code finished; the interpreter is ready for more.
    Done(Done),
    /// The interpreter ended (exit, crash, signal).
    Ended(Ending),
    /// The deadline passed first.
    Deadline,
    /// The cancel flag was set first.
    Cancelled,
}

/// Why an interpreter could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot run {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: io::Error,
    },
    #[error("{program} {how} before it was ready")]
    EndedEarly { program: String, how: String },
    #[error("{program} was not ready within {}", envhost_core::text::duration(*.limit))]
    TooSlow { program: String, limit: Duration },
    #[error("starting {program} was interrupted")]
    Cancelled { program: String },
    #[error("{0}")]
    Talk(#[from] TalkError),
}

/// A failure to talk to a running driver.
#[derive(Debug, thiserror::Error)]
pub enum TalkError {
    #[error("{context}: {source}")]
    Io {
        context: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("the python driver sent a message that is not valid ({0})")]
    Protocol(String),
}

/// A running interpreter with the driver loaded.
pub struct Interpreter {
    child: Child,
    /// Keeps the reaper's sweeper away from this child's exit status.
    _managed: Option<ManagedPid>,
    /// The interpreter's pid, which is also its process group and session.
    pid: i32,
    /// `None` once closed (the driver's cue to exit).
    requests: Option<PipeWriter>,
    replies: PipeReader,
    replies_open: bool,
    reply_buffer: Vec<u8>,
    output: PipeReader,
    output_open: bool,
    ended: Option<Ending>,
}

impl Interpreter {
    /// Starts the interpreter and waits until the driver says it is ready.
    /// Anything the interpreter prints meanwhile goes to `output`.
    pub fn start(
        launch: &Launch,
        limit: Duration,
        cancel: &CancelFlag,
        output: &mut dyn FnMut(&[u8]),
    ) -> Result<Interpreter, StartError> {
        let program = launch.program.display().to_string();
        let spawn_error = |source| StartError::Spawn {
            program: program.clone(),
            source,
        };
        let (output_reader, output_writer) = io::pipe().map_err(spawn_error)?;
        let (request_reader, request_writer) = io::pipe().map_err(spawn_error)?;
        let (reply_reader, reply_writer) = io::pipe().map_err(spawn_error)?;
        let request_fd = request_reader.as_raw_fd();
        let reply_fd = reply_writer.as_raw_fd();
        let output_for_stderr = output_writer.try_clone().map_err(spawn_error)?;

        let mut command = Command::new(&launch.program);
        command
            .arg("-u")
            .arg("-c")
            .arg(BOOTSTRAP)
            .arg(DRIVER)
            .arg(request_fd.to_string())
            .arg(reply_fd.to_string())
            .stdin(Stdio::null())
            .stdout(output_writer)
            .stderr(output_for_stderr)
            .env_clear()
            .envs(launch.environment.iter().map(|(k, v)| (k, v)))
            .current_dir(&launch.working_dir);
        let host_pid = nix::unistd::getpid();
        // SAFETY: the closure runs between fork and exec and only makes
        // async-signal-safe system calls (setsid, prctl, getppid, fcntl);
        // it allocates nothing.
        unsafe {
            command.pre_exec(move || prepare_child(host_pid, request_fd, reply_fd));
        }
        let (child, managed) =
            spawn_managed(|| command.spawn(), |c| Some(c.id())).map_err(spawn_error)?;
        // The child's ends now live in the child only; the parent must not
        // keep them, or it would never see the driver close them.
        drop(command);
        drop(request_reader);
        drop(reply_writer);

        let pid = i32::try_from(child.id()).unwrap_or(i32::MAX);
        let request_fd_host = request_writer.as_raw_fd();
        let mut interpreter = Interpreter {
            child,
            _managed: managed,
            pid,
            requests: Some(request_writer),
            replies: reply_reader,
            replies_open: true,
            reply_buffer: Vec::new(),
            output: output_reader,
            output_open: true,
            ended: None,
        };
        for fd in [
            request_fd_host,
            interpreter.replies.as_raw_fd(),
            interpreter.output.as_raw_fd(),
        ] {
            set_nonblocking(fd).map_err(|source| TalkError::Io {
                context: "cannot configure the pipes to python",
                source,
            })?;
        }

        let deadline = Instant::now() + limit;
        match interpreter.next_message(deadline, Some(cancel), output)? {
            Received::Message(DriverMessage::Ready {}) => Ok(interpreter),
            Received::Message(DriverMessage::Done(_)) => Err(StartError::Talk(
                TalkError::Protocol("a result before the ready message".into()),
            )),
            Received::Ended(ending) => Err(StartError::EndedEarly {
                program,
                how: ending.describe(),
            }),
            Received::Deadline => Err(StartError::TooSlow { program, limit }),
            Received::Cancelled => Err(StartError::Cancelled { program }),
        }
    }

    /// The interpreter's pid (also its process group and session id).
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Sends code to run. `Ok(false)` if the interpreter is gone or did not
    /// take the request by `deadline`.
    pub fn send(&mut self, code: &str, deadline: Instant) -> Result<bool, TalkError> {
        let mut line = serde_json::to_vec(&serde_json::json!({ "code": code }))
            .map_err(|e| TalkError::Protocol(e.to_string()))?;
        line.push(b'\n');
        let Some(requests) = self.requests.as_mut() else {
            return Ok(false);
        };
        let mut written = 0;
        while written < line.len() {
            match requests.write(&line[written..]) {
                Ok(0) => return Ok(false),
                Ok(n) => written += n,
                Err(err) if err.kind() == ErrorKind::Interrupted => {}
                Err(err) if err.kind() == ErrorKind::WouldBlock => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Ok(false);
                    }
                    let mut fds = [PollFd::new(requests.as_fd(), PollFlags::POLLOUT)];
                    match poll(&mut fds, poll_timeout(deadline - now)) {
                        Ok(_) | Err(Errno::EINTR) => {}
                        Err(errno) => {
                            return Err(TalkError::Io {
                                context: "waiting to send code to python failed",
                                source: errno.into(),
                            });
                        }
                    }
                }
                Err(err) if err.kind() == ErrorKind::BrokenPipe => return Ok(false),
                Err(source) => {
                    return Err(TalkError::Io {
                        context: "sending code to python failed",
                        source,
                    });
                }
            }
        }
        Ok(true)
    }

    /// Waits for the driver to finish the code it was sent, passing output
    /// on as it arrives. `cancel` is not looked at when `None` (while an
    /// interruption is already under way).
    pub fn wait(
        &mut self,
        deadline: Instant,
        cancel: Option<&CancelFlag>,
        output: &mut dyn FnMut(&[u8]),
    ) -> Result<Wait, TalkError> {
        loop {
            return Ok(match self.next_message(deadline, cancel, output)? {
                Received::Message(DriverMessage::Done(done)) => Wait::Done(done),
                // A second "ready" would be a driver bug; skip it.
                Received::Message(DriverMessage::Ready {}) => continue,
                Received::Ended(ending) => Wait::Ended(ending),
                Received::Deadline => Wait::Deadline,
                Received::Cancelled => Wait::Cancelled,
            });
        }
    }

    /// Output written since the last command (by a background thread or
    /// process), so that it is not lost.
    pub fn collect_stray_output(&mut self, output: &mut dyn FnMut(&[u8])) {
        self.drain_output(output);
    }

    /// Sends `signal` to the interpreter's process group: the interpreter
    /// and every process its code started that did not leave the group.
    pub fn signal(&self, signal: Signal) -> bool {
        signal_group(self.pid, signal)
    }

    /// If the interpreter has ended by itself since the last look, how.
    /// Cheap (one non-blocking `waitpid`); never talks to the driver.
    pub fn ended_by_itself(&mut self) -> Option<Ending> {
        if self.ended.is_none()
            && let Ok(Some(status)) = self.child.try_wait()
        {
            self.ended = Some(Ending {
                status: Some(status),
            });
            self.end_leftovers();
        }
        self.ended
    }

    /// Stops the interpreter: closes its request pipe so the driver returns
    /// (and `atexit` handlers run), then escalates to SIGTERM and SIGKILL
    /// for its group if it does not exit in time.
    pub fn shutdown(mut self) {
        if self.ended.is_some() {
            return;
        }
        // Closing our end of the request pipe is the driver's cue to exit.
        self.requests = None;
        let mut discard = |_: &[u8]| {};
        let deadline = Instant::now() + Duration::from_secs(1);
        while self.ended_by_itself().is_none() && Instant::now() < deadline {
            // Keep the output pipe flowing so that a chatty atexit handler
            // cannot block on a full pipe.
            if self
                .poll_once(Duration::from_millis(10), &mut discard)
                .is_err()
            {
                break;
            }
        }
        if self.ended.is_none() {
            self.kill();
        }
    }

    /// Ends the interpreter and its group now (SIGTERM, then SIGKILL) and
    /// collects its exit status.
    pub fn kill(&mut self) -> Ending {
        if let Some(ending) = self.ended_by_itself() {
            return ending;
        }
        self.signal(Signal::SIGTERM);
        self.signal(Signal::SIGCONT);
        let ending = match self.reap_within(Duration::from_secs(1)) {
            Some(ending) => ending,
            None => {
                self.signal(Signal::SIGKILL);
                let _ = self.child.kill();
                self.reap_within(EXIT_GRACE)
                    .unwrap_or(Ending { status: None })
            }
        };
        self.ended = Some(ending);
        self.end_leftovers();
        ending
    }

    /// Processes the code started that are still in the interpreter's
    /// group once it has ended: their handles died with the namespace.
    fn end_leftovers(&self) {
        self.signal(Signal::SIGTERM);
        self.signal(Signal::SIGCONT);
    }

    fn next_message(
        &mut self,
        deadline: Instant,
        cancel: Option<&CancelFlag>,
        output: &mut dyn FnMut(&[u8]),
    ) -> Result<Received, TalkError> {
        loop {
            if let Some(message) = self.take_message()? {
                self.drain_output(output);
                return Ok(Received::Message(message));
            }
            if !self.replies_open {
                // The driver is gone: collect its last words and its status.
                self.drain_output(output);
                let ending = self.reap_within(EXIT_GRACE).unwrap_or_else(|| self.kill());
                self.ended = Some(ending);
                self.end_leftovers();
                self.drain_output(output);
                return Ok(Received::Ended(ending));
            }
            if cancel.is_some_and(CancelFlag::is_cancelled) {
                return Ok(Received::Cancelled);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(Received::Deadline);
            }
            self.poll_once((deadline - now).min(POLL_SLICE), output)?;
        }
    }

    /// One `poll` on the reply and output pipes, reading what is ready.
    fn poll_once(
        &mut self,
        timeout: Duration,
        output: &mut dyn FnMut(&[u8]),
    ) -> Result<(), TalkError> {
        let (reply_ready, output_ready) = {
            let mut fds = Vec::with_capacity(2);
            if self.replies_open {
                fds.push(PollFd::new(self.replies.as_fd(), PollFlags::POLLIN));
            }
            if self.output_open {
                fds.push(PollFd::new(self.output.as_fd(), PollFlags::POLLIN));
            }
            if fds.is_empty() {
                thread::sleep(timeout);
                return Ok(());
            }
            match poll(&mut fds, poll_timeout(timeout)) {
                Ok(_) => {}
                Err(Errno::EINTR) => return Ok(()),
                Err(errno) => {
                    return Err(TalkError::Io {
                        context: "waiting for python failed",
                        source: errno.into(),
                    });
                }
            }
            let ready = |fd: &PollFd| fd.revents().is_some_and(|r| !r.is_empty());
            let mut fds = fds.iter();
            let reply_ready = self.replies_open && fds.next().is_some_and(ready);
            let output_ready = self.output_open && fds.next().is_some_and(ready);
            (reply_ready, output_ready)
        };
        if output_ready {
            self.read_output_once(output);
        }
        if reply_ready {
            self.read_replies()?;
        }
        Ok(())
    }

    fn read_output_once(&mut self, output: &mut dyn FnMut(&[u8])) -> usize {
        let mut buffer = [0u8; READ_CHUNK];
        loop {
            match self.output.read(&mut buffer) {
                Ok(0) => {
                    self.output_open = false;
                    return 0;
                }
                Ok(n) => {
                    output(&buffer[..n]);
                    return n;
                }
                Err(err) if err.kind() == ErrorKind::Interrupted => continue,
                Err(err) if err.kind() == ErrorKind::WouldBlock => return 0,
                Err(_) => {
                    self.output_open = false;
                    return 0;
                }
            }
        }
    }

    /// Reads whatever is already in the output pipe, without waiting.
    fn drain_output(&mut self, output: &mut dyn FnMut(&[u8])) {
        let mut taken = 0;
        while self.output_open && taken < DRAIN_LIMIT {
            match self.read_output_once(output) {
                0 => return,
                n => taken += n,
            }
        }
    }

    fn read_replies(&mut self) -> Result<(), TalkError> {
        let mut buffer = [0u8; READ_CHUNK];
        loop {
            match self.replies.read(&mut buffer) {
                Ok(0) => {
                    self.replies_open = false;
                    return Ok(());
                }
                Ok(n) => self.reply_buffer.extend_from_slice(&buffer[..n]),
                Err(err) if err.kind() == ErrorKind::Interrupted => {}
                Err(err) if err.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(source) => {
                    self.replies_open = false;
                    return Err(TalkError::Io {
                        context: "reading from python failed",
                        source,
                    });
                }
            }
        }
    }

    fn take_message(&mut self) -> Result<Option<DriverMessage>, TalkError> {
        let Some(end) = self.reply_buffer.iter().position(|&b| b == b'\n') else {
            return Ok(None);
        };
        let line: Vec<u8> = self.reply_buffer.drain(..=end).collect();
        serde_json::from_slice(&line)
            .map(Some)
            .map_err(|e| TalkError::Protocol(e.to_string()))
    }

    fn reap_within(&mut self, limit: Duration) -> Option<Ending> {
        if let Some(ending) = self.ended {
            return Some(ending);
        }
        let deadline = Instant::now() + limit;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    return Some(Ending {
                        status: Some(status),
                    });
                }
                Ok(None) => {}
                Err(err) if err.kind() == ErrorKind::Interrupted => {}
                // ECHILD: someone else collected it; it is gone all the same.
                Err(_) => return Some(Ending { status: None }),
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Interpreter {
    fn drop(&mut self) {
        if self.ended.is_none() {
            self.kill();
        }
    }
}

enum Received {
    Message(DriverMessage),
    Ended(Ending),
    Deadline,
    Cancelled,
}

/// In the child, between fork and exec: a session of its own, death with
/// the host, and the two control pipes kept open across exec.
fn prepare_child(host_pid: nix::unistd::Pid, request_fd: RawFd, reply_fd: RawFd) -> io::Result<()> {
    nix::unistd::setsid()?;
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
    if nix::unistd::getppid() != host_pid {
        // The host died before the parent-death signal was armed.
        return Err(io::Error::other(
            "the host exited while python was starting",
        ));
    }
    for fd in [request_fd, reply_fd] {
        fcntl(fd, FcntlArg::F_SETFD(FdFlag::empty()))?;
    }
    Ok(())
}

fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL)?);
    fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    Ok(())
}

/// `poll`'s timeout in whole milliseconds, rounded up so that a wait for
/// less than a millisecond does not spin.
fn poll_timeout(duration: Duration) -> PollTimeout {
    let millis = duration.as_micros().div_ceil(1000);
    PollTimeout::try_from(millis).unwrap_or(PollTimeout::MAX)
}

/// Finds the interpreter to run: `requested` (a path, or a command name
/// looked up on `PATH`), or `python3` on `PATH`.
pub fn find_interpreter(requested: Option<&Path>) -> Result<PathBuf, String> {
    let path_var = std::env::var_os("PATH").unwrap_or_default();
    match requested {
        None => search_path("python3", &path_var).ok_or_else(|| {
            "python3 was not found on PATH. Install Python 3, or start envhost with \
             --python /path/to/python3."
                .to_owned()
        }),
        Some(program) if program.components().count() > 1 || program.is_absolute() => {
            if is_executable_file(program) {
                // Absolute (against envhost's directory, not the project's),
                // but not canonical: a virtualenv's python is a symlink and
                // must keep its path to find the environment.
                std::path::absolute(program).map_err(|e| {
                    format!(
                        "{} (given with --python) cannot be used: {e}.",
                        program.display()
                    )
                })
            } else if program.exists() {
                Err(format!(
                    "{} (given with --python) is not an executable file.",
                    program.display()
                ))
            } else {
                Err(format!(
                    "{} (given with --python) does not exist.",
                    program.display()
                ))
            }
        }
        Some(name) => search_path(&name.to_string_lossy(), &path_var).ok_or_else(|| {
            format!(
                "{} (given with --python) was not found on PATH.",
                name.display()
            )
        }),
    }
}

fn search_path(name: &str, path_var: &std::ffi::OsStr) -> Option<PathBuf> {
    std::env::split_paths(path_var)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable_file(candidate))
        .and_then(|found| std::path::absolute(found).ok())
}

fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endings_are_described_in_words() {
        let code = Ending {
            status: Some(ExitStatus::from_raw(3 << 8)),
        };
        assert_eq!(code.describe(), "exited with code 3");
        assert_eq!(code.exit_code(), Some(3));
        let segfault = Ending {
            status: Some(ExitStatus::from_raw(Signal::SIGSEGV as i32)),
        };
        assert_eq!(
            segfault.describe(),
            "was killed by signal SIGSEGV (segmentation fault)"
        );
        assert_eq!(segfault.exit_code(), None);
    }

    #[test]
    fn interpreters_are_found_or_explained() {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("python3");
        std::fs::write(&fake, "#!/bin/sh\n").unwrap();
        let path_var = std::env::join_paths([dir.path()]).unwrap();
        assert_eq!(search_path("python3", &path_var), None, "not executable");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(search_path("python3", &path_var), Some(fake.clone()));
        assert_eq!(find_interpreter(Some(&fake)), Ok(fake));
        let missing = dir.path().join("nope");
        assert!(
            find_interpreter(Some(&missing))
                .unwrap_err()
                .contains("does not exist")
        );
        assert!(
            find_interpreter(Some(dir.path()))
                .unwrap_err()
                .contains("not an executable file")
        );
    }
}
