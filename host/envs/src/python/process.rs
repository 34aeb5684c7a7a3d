//! The `python3` child process, its pipes, and its conversation with the
//! driver.
//!
//! The interpreter runs the driver embedded in the binary ([`DRIVER`]) in a
//! session of its own (a Ctrl-C at the host's terminal never reaches it; a
//! timeout signals its whole process group), with the parent-death signal
//! set (it dies with the host even if the host is killed), the secrets
//! filtered out of its environment, stdin on `/dev/null` and the project
//! directory as its working directory. It has these channels:
//!
//! - output: its stdout *and* stderr, one pipe, so that prints, warnings,
//!   tracebacks and whatever C code or subprocesses write to fds 1 and 2
//!   arrive in the order they were written;
//! - requests (host → driver): a pipe, one tagged line per request;
//! - replies (driver → host): a pipe, one tagged line per reply, each
//!   written whole in one `write` of at most `PIPE_BUF` bytes (which the
//!   kernel never interleaves with another writer's bytes) and starting
//!   with a newline, so that whatever someone else wrote before it ends
//!   there and can never run into one of the driver's lines;
//! - large replies (driver → host): a `SOCK_SEQPACKET` socket pair, for the
//!   rare `done` too long for one pipe write (a very long working
//!   directory, many figures); its own record, which nothing can run into
//!   either. A `done` is the last reply to its request, so the host reads
//!   the pipe (everything the driver wrote before) ahead of the records it
//!   took off the socket. The host also passes over this socket
//!   (SCM_RIGHTS) the read end of a pipe the agent types into: stdin for
//!   the commands that may wait for input (passed with the first such
//!   command, and again after Ctrl-D closed it); other commands read
//!   `/dev/null`.
//!
//! The pipe is the common way because it is the cheaper one: a round trip
//! through it costs a few microseconds less than through the socket. What
//! is believed on either is [`channel`]'s business.
//!
//! [`channel`]: super::channel
//!
//! This module owns starting, talking to, waiting for (with a deadline and
//! cancellation), signalling, inspecting (`/proc`) and reaping the
//! interpreter. It must not decide what a timeout, a stop or an exit means
//! for the agent, nor format responses or screens: that is the
//! environment's job (`mod.rs`).

use std::ffi::OsString;
use std::io::IoSlice;
use std::io::{self, ErrorKind, PipeReader, PipeWriter, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::Signal;
use nix::sys::socket::{
    AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType, sendmsg, socketpair,
};

use envhost_core::CancelFlag;
use envhost_process::signal_group;
use envhost_process::{
    ManagedChild, ignored_signals, is_executable_file, process_info, process_table, search_path,
    set_nonblocking, spawn_managed_command, start_tick, tick_ago, waiting_for_terminal,
};

use super::channel::{Done, Key, Reply, Request, Tampering};

/// The driver program, shipped inside the binary.
pub const DRIVER: &str = include_str!("driver.py");

/// Runs the driver (argument 1) under a name of its own, so that a crash
/// dump (faulthandler) names its frames `<envhost-driver>`.
const BOOTSTRAP: &str = "import sys; exec(compile(sys.argv[1], '<envhost-driver>', 'exec'))";

/// Longest wait in `poll` before the cancel flag is looked at again.
const POLL_SLICE: Duration = Duration::from_millis(50);

/// Bytes read from the output pipe at a time.
const READ_CHUNK: usize = 64 * 1024;

/// The largest reply record read whole from the socket; the driver's stay
/// well below (its long variable lists come in parts on the pipe), and a
/// longer forged one is cut by the kernel and fails its tag check.
const RECORD_BUFFER: usize = 64 * 1024;

/// The longest line kept from the reply pipe: the driver's are at most
/// `PIPE_BUF` (4 KiB) bytes; anything longer is someone else's, skipped up
/// to its end and counted.
const LINE_LIMIT: usize = 8 * 1024;

/// Most bytes taken from the output pipe once the driver has answered: what
/// the code wrote is already in the pipe (at most its capacity); the bound
/// only stops a background process that never stops printing from holding
/// the answer up.
const DRAIN_LIMIT: usize = 4 * 1024 * 1024;

/// How long the processes an interrupted command left behind get to end
/// on SIGTERM before SIGKILL.
const STRAY_GRACE: Duration = Duration::from_millis(500);

/// How long an interpreter whose reply channel closed gets to exit before
/// the close is taken for the code's doing.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// Capacity asked for the output pipe: room for a command that yielded to
/// go on printing while nobody reads (the kernel's default is 64 KiB;
/// unprivileged processes may ask for up to 1 MiB).
const OUTPUT_PIPE_BYTES: i32 = 1024 * 1024;

/// The line the driver sends, untagged, when the code calls `input()`
/// with a stdin to read: a hint only, believed once `/proc` shows the
/// interpreter blocked reading that stdin.
const INPUT_HINT: &[u8] = b"input-hint";

/// What an interpreter needs to start.
#[derive(Debug, Clone)]
pub struct Launch {
    pub program: PathBuf,
    pub working_dir: PathBuf,
    pub environment: Vec<(OsString, OsString)>,
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
    /// The driver answered a `sync`: it is idle, and the code request sent
    /// before the sync never reached it (something else read it off the
    /// pipe, or garbled it).
    Synced,
    /// The interpreter ended (exit, crash, signal).
    Ended(Ending),
    /// The interpreter lives, but the driver can no longer talk to the host:
    /// the code closed or replaced its descriptors.
    ChannelLost,
    /// The code says it waits for a line of input (to be checked with
    /// [`Interpreter::reads_input`]).
    InputWanted,
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
}

/// A running interpreter with the driver loaded.
pub struct Interpreter {
    /// The interpreter, registered with the reaper (its exit status is
    /// ours) and holding its cgroup.
    child: ManagedChild,
    /// The interpreter's pid, which is also its process group and session.
    pid: i32,
    key: Key,
    /// The last sequence number used for a request.
    last_seq: u64,
    /// `None` once closed (the driver's cue to exit).
    requests: Option<PipeWriter>,
    /// The reply pipe: one line per reply.
    reply_lines: PipeReader,
    /// The start of a line whose end has not arrived yet.
    partial_line: Vec<u8>,
    /// Skipping the rest of a line longer than [`LINE_LIMIT`].
    skipping_line: bool,
    /// The socket for replies too long for the pipe (and stdin handover).
    reply_records: OwnedFd,
    /// Both reply channels are open.
    replies_open: bool,
    record_buffer: Vec<u8>,
    /// Where output is read into: kept, because zeroing 64 KiB for every
    /// read showed up in each round trip.
    output_buffer: Vec<u8>,
    /// The code request whose `done` is awaited.
    awaiting: Option<u64>,
    /// The `sync` request whose answer is awaited.
    sync_pending: Option<u64>,
    /// Variables from `vars` parts of the awaited request.
    parts: Vec<(String, String)>,
    /// Believed replies not yet handed out.
    ready: bool,
    finished: Option<Done>,
    synced: bool,
    lost: bool,
    tampering: Tampering,
    input_hint: bool,
    /// The running command's stdin, when it may wait for input.
    input: Option<Input>,
    output: PipeReader,
    output_open: bool,
    ended: Option<Ending>,
}

impl Interpreter {
    /// Starts the interpreter, hands the driver its key and waits until the
    /// driver says it is ready. Anything the interpreter prints meanwhile
    /// goes to `output`.
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
        let key = Key::generate().map_err(|err| spawn_error(io::Error::other(err)))?;
        let (output_reader, output_writer) = io::pipe().map_err(spawn_error)?;
        let (request_reader, request_writer) = io::pipe().map_err(spawn_error)?;
        let (reply_reader, reply_writer) = io::pipe().map_err(spawn_error)?;
        let (record_host, record_driver) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .map_err(|errno| spawn_error(errno.into()))?;
        let request_fd = request_reader.as_raw_fd();
        let reply_fd = reply_writer.as_raw_fd();
        let record_fd = record_driver.as_raw_fd();
        let output_for_stderr = output_writer.try_clone().map_err(spawn_error)?;

        let mut command = Command::new(&launch.program);
        command
            .arg("-u")
            .arg("-c")
            .arg(BOOTSTRAP)
            .arg(DRIVER)
            .arg(request_fd.to_string())
            .arg(reply_fd.to_string())
            .arg(record_fd.to_string())
            .stdin(Stdio::null())
            .stdout(output_writer)
            .stderr(output_for_stderr)
            .env_clear()
            .envs(launch.environment.iter().map(|(k, v)| (k, v)))
            .current_dir(&launch.working_dir);
        // A session of its own (out of reach of the host's terminal
        // signals), and the three control channels kept open across exec.
        let child =
            spawn_managed_command(&mut command, "python", &[request_fd, reply_fd, record_fd])
                .map_err(spawn_error)?;
        // The child's ends now live in the child only; the parent must not
        // keep them, or it would never see the driver close them.
        drop(command);
        drop(request_reader);
        drop(reply_writer);
        drop(record_driver);

        let pid = child.id();
        let mut interpreter = Interpreter {
            child,
            pid,
            key,
            last_seq: 0,
            requests: Some(request_writer),
            reply_lines: reply_reader,
            partial_line: Vec::new(),
            skipping_line: false,
            reply_records: record_host,
            replies_open: true,
            record_buffer: vec![0; RECORD_BUFFER],
            output_buffer: vec![0; READ_CHUNK],
            awaiting: None,
            sync_pending: None,
            parts: Vec::new(),
            ready: false,
            finished: None,
            synced: false,
            lost: false,
            tampering: Tampering::default(),
            input_hint: false,
            input: None,
            output: output_reader,
            output_open: true,
            ended: None,
        };
        interpreter.configure_channels()?;
        interpreter.hand_over_key(program, limit, cancel, output)?;
        Ok(interpreter)
    }

    /// The host's ends of the channels made non-blocking, the output pipe
    /// widened.
    fn configure_channels(&self) -> Result<(), TalkError> {
        let configure = |source| TalkError::Io {
            context: "cannot configure the channels to python",
            source,
        };
        if let Some(requests) = &self.requests {
            set_nonblocking(requests).map_err(configure)?;
        }
        set_nonblocking(&self.reply_lines).map_err(configure)?;
        set_nonblocking(&self.reply_records).map_err(configure)?;
        set_nonblocking(&self.output).map_err(configure)?;
        // Best effort: with the default capacity a yielded command waits
        // sooner for its output to be read, nothing more.
        let _ = fcntl(
            self.output.as_raw_fd(),
            FcntlArg::F_SETPIPE_SZ(OUTPUT_PIPE_BYTES),
        );
        Ok(())
    }

    /// Hands the driver its key and waits, at most `limit`, until it says
    /// it is ready.
    fn hand_over_key(
        &mut self,
        program: String,
        limit: Duration,
        cancel: &CancelFlag,
        output: &mut dyn FnMut(&[u8]),
    ) -> Result<(), StartError> {
        let deadline = Instant::now() + limit;
        let handover = self.key.handover_line();
        self.write_request(&handover, deadline)?;
        while !self.ready {
            if !self.replies_open || self.lost {
                let how = match self.next_event(deadline, Some(cancel), output)? {
                    Wait::Ended(ending) => ending.describe(),
                    _ => "closed its reply channel".to_owned(),
                };
                return Err(StartError::EndedEarly { program, how });
            }
            if cancel.is_cancelled() {
                return Err(StartError::Cancelled { program });
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(StartError::TooSlow { program, limit });
            }
            self.poll_once((deadline - now).min(POLL_SLICE), output)?;
        }
        Ok(())
    }

    /// The interpreter's pid (also its process group and session id).
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Sends code to run; its `done` is what [`wait`](Self::wait) then
    /// waits for. With `input`, the code reads the pipe that
    /// [`type_input`](Self::type_input) writes to (else `/dev/null`, and
    /// `input()` fails at once). `Ok(false)` if the interpreter is gone or
    /// did not take the request by `deadline`.
    pub fn send_code(
        &mut self,
        code: &str,
        input: bool,
        deadline: Instant,
    ) -> Result<bool, TalkError> {
        self.last_seq += 1;
        let seq = self.last_seq;
        self.awaiting = Some(seq);
        self.parts.clear();
        self.finished = None;
        self.input_hint = false;
        let mut passed = false;
        if input && !self.takes_input() {
            // A stdin that cannot be handed over leaves the code on
            // /dev/null: input() then fails with its message, nothing worse.
            if let Ok(pipe) = self.hand_over_input(seq) {
                self.input = Some(pipe);
                passed = true;
            }
        }
        let line = self.key.request(&Request {
            seq,
            op: "run",
            code: Some(code),
            input: input && self.takes_input(),
            stdin: passed,
        });
        self.write_request(&line, deadline)
    }

    /// A fresh pipe whose read end goes to the driver (SCM_RIGHTS, with the
    /// request's sequence number, so that a stale one is never taken).
    fn hand_over_input(&mut self, seq: u64) -> io::Result<Input> {
        let (reader, writer) = io::pipe()?;
        let name = format!(
            "pipe:[{}]",
            nix::sys::stat::fstat(writer.as_raw_fd())?.st_ino
        );
        set_nonblocking(&writer)?;
        let payload = seq.to_string();
        let fds = [reader.as_raw_fd()];
        sendmsg::<()>(
            self.reply_records.as_raw_fd(),
            &[IoSlice::new(payload.as_bytes())],
            &[ControlMessage::ScmRights(&fds)],
            MsgFlags::MSG_DONTWAIT,
            None,
        )?;
        Ok(Input {
            writer: Some(writer),
            pending: Vec::new(),
            close_when_written: false,
            name: PathBuf::from(name),
        })
    }

    /// Types `bytes` into the stdin of the commands that may wait for input
    /// (what does not fit now is written as the code reads; what a command
    /// leaves unread stays for the next one). `false` if there is none (or
    /// it was closed with Ctrl-D).
    pub fn type_input(&mut self, bytes: &[u8]) -> bool {
        let Some(input) = self.input.as_mut().filter(|i| i.writer.is_some()) else {
            return false;
        };
        input.pending.extend_from_slice(bytes);
        input.flush();
        true
    }

    /// Ends the stdin once what was typed is written: the next read sees
    /// the end of input (Ctrl-D); the next command that may wait for input
    /// gets a new one.
    pub fn close_input(&mut self) {
        if let Some(input) = self.input.as_mut() {
            input.close_when_written = true;
            input.flush();
        }
    }

    /// Whether there is a stdin the agent can type into.
    pub fn takes_input(&self) -> bool {
        self.input.as_ref().is_some_and(|i| i.writer.is_some())
    }

    /// Whether a process of the interpreter's group is blocked reading the
    /// running command's stdin, with nothing else of the group busy (from
    /// `/proc`; a few hundred microseconds).
    pub fn reads_input(&self) -> bool {
        let Some(input) = &self.input else {
            return false;
        };
        let group: Vec<i32> = process_table()
            .into_iter()
            .filter(|p| p.group == self.pid)
            .map(|p| p.pid)
            .collect();
        // The detector compares what descriptors point to: a pipe's
        // `pipe:[inode]` stands in for a terminal's path.
        waiting_for_terminal(&group, &input.name).is_some()
    }

    /// Asks the driver to say that it is idle: answered with
    /// [`Wait::Synced`] once every earlier request is behind it (after the
    /// awaited `done`, if the code is still running).
    pub fn send_sync(&mut self, deadline: Instant) -> Result<bool, TalkError> {
        self.last_seq += 1;
        let seq = self.last_seq;
        self.sync_pending = Some(seq);
        let line = self.key.request(&Request {
            seq,
            op: "sync",
            code: None,
            input: false,
            stdin: false,
        });
        self.write_request(&line, deadline)
    }

    /// What was set aside since the last call.
    pub fn take_tampering(&mut self) -> Tampering {
        std::mem::take(&mut self.tampering)
    }

    fn write_request(&mut self, line: &[u8], deadline: Instant) -> Result<bool, TalkError> {
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

    /// Waits for the driver's next answer (the awaited `done`, or a
    /// `sync`'s answer), passing output on as it arrives. `cancel` is not
    /// looked at when `None` (while an interruption is already under way).
    pub fn wait(
        &mut self,
        deadline: Instant,
        cancel: Option<&CancelFlag>,
        output: &mut dyn FnMut(&[u8]),
    ) -> Result<Wait, TalkError> {
        self.next_event(deadline, cancel, output)
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

    /// The interpreter is stopped (SIGSTOP, SIGTSTP...: state `T` in
    /// `/proc`), so it cannot run anything, not even a signal handler,
    /// until it is continued.
    pub fn is_stopped(&self) -> bool {
        is_stopped(self.pid)
    }

    /// The interpreter ignores SIGINT (`SIG_IGN`), so KeyboardInterrupt
    /// cannot reach its code.
    pub fn ignores_sigint(&self) -> bool {
        ignored_signals(self.pid).is_some_and(|mask| mask & (1 << (Signal::SIGINT as u32 - 1)) != 0)
    }

    /// Ends what a command that started `ago` ago left running in the
    /// interpreter's process group: the processes it started that are still
    /// there once its code stopped (children that ignore SIGINT, such as the
    /// background jobs of `sh -c 'sleep 100 &'`). Processes started by
    /// earlier commands are not touched (nor, since `/proc` counts start
    /// times in clock ticks, one started within the command's first tick).
    /// SIGTERM, then SIGKILL for those
    /// still there after [`STRAY_GRACE`]. Returns how many were ended.
    pub fn end_strays_of_command(&self, ago: Duration) -> usize {
        // Start times are whole ticks (10 ms), rounded down: a process
        // that started in the command's first tick cannot be told from
        // one an earlier command started just before, and is spared.
        let Some(first_tick) = tick_ago(ago).map(|tick| tick + 1) else {
            return 0;
        };
        let strays = || -> Vec<i32> {
            process_table()
                .into_iter()
                .filter(|p| p.group == self.pid && p.pid != self.pid && p.state != 'Z')
                .filter(|p| start_tick(p.pid).is_some_and(|tick| tick >= first_tick))
                .map(|p| p.pid)
                .collect()
        };
        let found = strays();
        if found.is_empty() {
            return 0;
        }
        for &pid in &found {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGTERM);
        }
        let until = Instant::now() + STRAY_GRACE;
        let mut left = strays();
        while !left.is_empty() && Instant::now() < until {
            thread::sleep(Duration::from_millis(20));
            left = strays();
        }
        for pid in left {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL);
        }
        found.len()
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
        let ending = match self.reap_within(Duration::from_secs(1), &mut |_| {}) {
            Some(ending) => ending,
            None => {
                self.signal(Signal::SIGKILL);
                let _ = self.child.kill();
                self.reap_within(EXIT_GRACE, &mut |_| {})
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

    fn next_event(
        &mut self,
        deadline: Instant,
        cancel: Option<&CancelFlag>,
        output: &mut dyn FnMut(&[u8]),
    ) -> Result<Wait, TalkError> {
        loop {
            if let Some(done) = self.finished.take() {
                self.drain_output(output);
                return Ok(Wait::Done(done));
            }
            if std::mem::take(&mut self.synced) {
                self.drain_output(output);
                return Ok(Wait::Synced);
            }
            if self.lost {
                self.drain_output(output);
                return Ok(Wait::ChannelLost);
            }
            if std::mem::take(&mut self.input_hint) {
                self.drain_output(output);
                return Ok(Wait::InputWanted);
            }
            if !self.replies_open {
                // An exit closes the channel; so does code that closes the
                // driver's descriptor, and then the interpreter lives on.
                self.drain_output(output);
                let Some(ending) = self.reap_within(EXIT_GRACE, output) else {
                    self.lost = true;
                    return Ok(Wait::ChannelLost);
                };
                self.ended = Some(ending);
                self.end_leftovers();
                self.drain_output(output);
                return Ok(Wait::Ended(ending));
            }
            if cancel.is_some_and(CancelFlag::is_cancelled) {
                return Ok(Wait::Cancelled);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(Wait::Deadline);
            }
            self.poll_once((deadline - now).min(POLL_SLICE), output)?;
        }
    }

    /// One `poll` on the reply and output channels (and the command's
    /// stdin while typed bytes wait), reading and writing what is ready.
    fn poll_once(
        &mut self,
        timeout: Duration,
        output: &mut dyn FnMut(&[u8]),
    ) -> Result<(), TalkError> {
        let typing = self
            .input
            .as_ref()
            .and_then(|i| i.writer.as_ref().filter(|_| !i.pending.is_empty()));
        let (lines_ready, records_ready, output_ready, input_ready) = {
            let mut fds = Vec::with_capacity(4);
            if self.replies_open {
                fds.push(PollFd::new(self.reply_lines.as_fd(), PollFlags::POLLIN));
                fds.push(PollFd::new(self.reply_records.as_fd(), PollFlags::POLLIN));
            }
            if self.output_open {
                fds.push(PollFd::new(self.output.as_fd(), PollFlags::POLLIN));
            }
            if let Some(writer) = typing {
                fds.push(PollFd::new(writer.as_fd(), PollFlags::POLLOUT));
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
            let (lines_ready, records_ready) = if self.replies_open {
                (fds.next().is_some_and(ready), fds.next().is_some_and(ready))
            } else {
                (false, false)
            };
            let output_ready = self.output_open && fds.next().is_some_and(ready);
            let input_ready = typing.is_some() && fds.next().is_some_and(ready);
            (lines_ready, records_ready, output_ready, input_ready)
        };
        if output_ready {
            self.read_output_once(output);
        }
        if input_ready && let Some(input) = self.input.as_mut() {
            input.flush();
        }
        if lines_ready || records_ready {
            self.read_replies(records_ready)?;
        }
        Ok(())
    }

    fn read_output_once(&mut self, output: &mut dyn FnMut(&[u8])) -> usize {
        loop {
            match self.output.read(&mut self.output_buffer) {
                Ok(0) => {
                    self.output_open = false;
                    return 0;
                }
                Ok(n) => {
                    output(&self.output_buffer[..n]);
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

    /// Reads the replies waiting on the pipe, and on the socket too when
    /// `records_ready`. The socket's records are taken first but believed
    /// last: a record there is a `done`, the last reply to its request, and
    /// the pipe then already holds every line the driver wrote before it.
    fn read_replies(&mut self, records_ready: bool) -> Result<(), TalkError> {
        let mut buffer = std::mem::take(&mut self.record_buffer);
        let mut records = Vec::new();
        let mut result = loop {
            if !records_ready {
                break Ok(());
            }
            match nix::unistd::read(self.reply_records.as_raw_fd(), &mut buffer) {
                // End of the channel, or an empty record (which the driver
                // never sends): only a hang-up tells them apart.
                Ok(0) if self.records_hung_up() => {
                    self.replies_open = false;
                    break Ok(());
                }
                Ok(0) => self.tampering.forged_replies += 1,
                Ok(n) => records.push(buffer[..n].to_vec()),
                Err(Errno::EINTR) => {}
                Err(Errno::EAGAIN) => break Ok(()),
                Err(errno) => {
                    self.replies_open = false;
                    break Err(TalkError::Io {
                        context: "reading from python failed",
                        source: errno.into(),
                    });
                }
            }
        };
        loop {
            match nix::unistd::read(self.reply_lines.as_raw_fd(), &mut buffer) {
                // Every write end is closed: the driver is gone, or the code
                // closed its descriptor.
                Ok(0) => {
                    self.replies_open = false;
                    break;
                }
                Ok(n) => {
                    self.take_lines(&buffer[..n]);
                    // A pipe gives everything it holds, up to the buffer:
                    // a short read emptied it (what comes later, the next
                    // poll sees).
                    if n < buffer.len() {
                        break;
                    }
                }
                Err(Errno::EINTR) => {}
                Err(Errno::EAGAIN) => break,
                Err(errno) => {
                    self.replies_open = false;
                    if result.is_ok() {
                        result = Err(TalkError::Io {
                            context: "reading from python failed",
                            source: errno.into(),
                        });
                    }
                    break;
                }
            }
        }
        for record in records {
            self.take_record(&record);
        }
        self.record_buffer = buffer;
        result
    }

    fn records_hung_up(&self) -> bool {
        let mut fds = [PollFd::new(self.reply_records.as_fd(), PollFlags::empty())];
        poll(&mut fds, PollTimeout::ZERO).is_ok()
            && fds[0]
                .revents()
                .is_some_and(|r| r.contains(PollFlags::POLLHUP))
    }

    /// Splits what was read from the reply pipe into lines and takes each
    /// whole one; the start of an unfinished line waits for its end.
    fn take_lines(&mut self, mut bytes: &[u8]) {
        while let Some(end) = bytes.iter().position(|&b| b == b'\n') {
            let (line, rest) = (&bytes[..end], &bytes[end + 1..]);
            bytes = rest;
            if std::mem::take(&mut self.skipping_line) {
                continue;
            }
            if self.partial_line.is_empty() {
                if !line.is_empty() {
                    self.take_record(line);
                }
            } else if self.partial_line.len() + line.len() > LINE_LIMIT {
                self.partial_line.clear();
                self.tampering.forged_replies += 1;
            } else {
                let mut whole = std::mem::take(&mut self.partial_line);
                whole.extend_from_slice(line);
                self.take_record(&whole);
            }
        }
        if bytes.is_empty() || self.skipping_line {
            return;
        }
        if self.partial_line.len() + bytes.len() > LINE_LIMIT {
            self.partial_line.clear();
            self.skipping_line = true;
            self.tampering.forged_replies += 1;
        } else {
            self.partial_line.extend_from_slice(bytes);
        }
    }

    /// Believes a record only with the key's tag, and only for the request
    /// it answers; everything else is counted and set aside.
    fn take_record(&mut self, record: &[u8]) {
        if record == INPUT_HINT {
            self.input_hint = self.takes_input();
            return;
        }
        let Some(reply) = self.key.open(record) else {
            self.tampering.forged_replies += 1;
            return;
        };
        let seq = reply.seq();
        match reply {
            Reply::Ready { .. } if seq == 0 && !self.ready => self.ready = true,
            Reply::Vars { variables, .. } if Some(seq) == self.awaiting => {
                self.parts.extend(variables);
            }
            Reply::Done { mut done, .. } if Some(seq) == self.awaiting => {
                self.awaiting = None;
                self.tampering.refused_requests += done.rejected;
                let mut variables = std::mem::take(&mut self.parts);
                variables.append(&mut done.variables);
                done.variables = variables;
                self.finished = Some(done);
            }
            Reply::Synced { rejected, .. } if Some(seq) == self.sync_pending => {
                self.sync_pending = None;
                self.tampering.refused_requests += rejected;
                // Requests are answered in order: a code request sent
                // before this sync and still awaited never reached the
                // driver. (One sent after it is simply not run yet.)
                if self.awaiting.is_some_and(|awaited| awaited < seq) {
                    self.awaiting = None;
                    self.parts.clear();
                    self.synced = true;
                }
            }
            Reply::Lost { .. } => self.lost = true,
            _ => self.tampering.out_of_step += 1,
        }
    }

    /// Waits up to `limit` for the interpreter to exit, keeping its output
    /// flowing.
    fn reap_within(&mut self, limit: Duration, output: &mut dyn FnMut(&[u8])) -> Option<Ending> {
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
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            if self.output_open {
                self.read_output_once(output);
            }
            thread::sleep((deadline - now).min(Duration::from_millis(5)));
        }
    }
}

/// The stdin of a command that may wait for input: the write end of its
/// pipe, and what was typed but not yet taken.
struct Input {
    /// `None` once closed (Ctrl-D).
    writer: Option<PipeWriter>,
    pending: Vec<u8>,
    close_when_written: bool,
    /// What `/proc/<pid>/fd/<n>` shows for the pipe (`pipe:[inode]`).
    name: PathBuf,
}

impl Input {
    /// Writes what the pipe takes now; closes it once all is written if
    /// asked to. A reader that went away (EPIPE) drops what is left.
    fn flush(&mut self) {
        let Some(writer) = self.writer.as_mut() else {
            return;
        };
        while !self.pending.is_empty() {
            match writer.write(&self.pending) {
                Ok(0) => break,
                Ok(n) => {
                    self.pending.drain(..n);
                }
                Err(err) if err.kind() == ErrorKind::Interrupted => {}
                Err(err) if err.kind() == ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.pending.clear();
                    self.writer = None;
                    return;
                }
            }
        }
        if self.pending.is_empty() && self.close_when_written {
            self.writer = None;
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

/// `poll`'s timeout in whole milliseconds, rounded up so that a wait for
/// less than a millisecond does not spin.
fn poll_timeout(duration: Duration) -> PollTimeout {
    let millis = duration.as_micros().div_ceil(1000);
    PollTimeout::try_from(millis).unwrap_or(PollTimeout::MAX)
}

/// Why there is no Python interpreter to start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoInterpreter {
    /// No `python3` on `PATH`.
    #[error(
        "python3 was not found on PATH. Install Python 3, or start envhost with --python /path/to/python3."
    )]
    NotOnPath,
    /// The `--python` path cannot be made absolute.
    #[error("{} (given with --python) cannot be used: {reason}.", .program.display())]
    Unusable {
        /// The path given.
        program: PathBuf,
        /// The system's words.
        reason: String,
    },
    /// The `--python` path is not an executable file.
    #[error("{} (given with --python) is not an executable file.", .0.display())]
    NotExecutable(PathBuf),
    /// The `--python` path does not exist.
    #[error("{} (given with --python) does not exist.", .0.display())]
    Missing(PathBuf),
    /// The `--python` name is not on `PATH`.
    #[error("{} (given with --python) was not found on PATH.", .0.display())]
    NamedNotOnPath(PathBuf),
}

pub fn find_interpreter(requested: Option<&Path>) -> Result<PathBuf, NoInterpreter> {
    match requested {
        None => search_path("python3").ok_or(NoInterpreter::NotOnPath),
        Some(program) if program.components().count() > 1 || program.is_absolute() => {
            if is_executable_file(program) {
                // Absolute (against envhost's directory, not the project's),
                // but not canonical: a virtualenv's python is a symlink and
                // must keep its path to find the environment.
                std::path::absolute(program).map_err(|e| NoInterpreter::Unusable {
                    program: program.to_owned(),
                    reason: e.to_string(),
                })
            } else if program.exists() {
                Err(NoInterpreter::NotExecutable(program.to_owned()))
            } else {
                Err(NoInterpreter::Missing(program.to_owned()))
            }
        }
        Some(name) => search_path(&name.to_string_lossy())
            .ok_or_else(|| NoInterpreter::NamedNotOnPath(name.to_owned())),
    }
}

/// Process `pid` is stopped (state `T` in `/proc`).
pub fn is_stopped(pid: i32) -> bool {
    process_info(pid).is_some_and(|process| process.state == 'T')
}

#[cfg(test)]
mod tests {
    use super::*;
    use envhost_process::search_path_in;

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
        assert_eq!(search_path_in("python3", &path_var), None, "not executable");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(search_path_in("python3", &path_var), Some(fake.clone()));
        assert_eq!(find_interpreter(Some(&fake)), Ok(fake));
        let missing = dir.path().join("nope");
        assert!(
            find_interpreter(Some(&missing))
                .unwrap_err()
                .to_string()
                .contains("does not exist")
        );
        assert!(
            find_interpreter(Some(dir.path()))
                .unwrap_err()
                .to_string()
                .contains("not an executable file")
        );
    }
}
