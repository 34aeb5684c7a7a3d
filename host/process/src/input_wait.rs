//! Is a job blocked waiting for someone to type?
//!
//! An agent cannot type into a running program, so a foreground job that
//! waits for terminal input (`cat`, `read x`, a Python or Node REPL, a
//! password prompt) would only ever end at its timeout. Linux shows where
//! each thread is blocked: `/proc/<pid>/task/<tid>/syscall` gives the system
//! call and its arguments; `/proc/<pid>/fd/<n>` says what a descriptor is;
//! `/proc/<pid>/mem` holds the `poll`/`select` sets; `/proc/<pid>/fdinfo/<n>`
//! lists what an epoll instance watches. From those this module decides
//! whether a group of processes is idle and waiting on the terminal.
//!
//! Deliberately conservative: a group with any thread running, or any
//! thread waiting on a socket (`ssh` with a remote command, a server that
//! also reads commands from stdin), is not "waiting for input", and anything
//! that cannot be read (permissions, a process that just exited) counts as
//! "not waiting". Read-only: nothing here signals or waits.

use std::fs;
use std::os::unix::fs::FileExt;
use std::path::Path;

use nix::libc;

/// A process found blocked on terminal input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalReader {
    /// Its process id.
    pub pid: i32,
    /// The command name from `/proc/<pid>/comm` (e.g. `cat`, `python3`).
    pub name: String,
}

/// What one descriptor is, as far as this question goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Descriptor {
    Terminal,
    Socket,
    Other,
}

/// What one thread is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ThreadWait {
    /// Running, in uninterruptible sleep, or unreadable: busy as far as we know.
    Busy,
    /// Blocked on a socket (among other things, maybe): it has work coming
    /// from elsewhere than the terminal.
    Network,
    /// Blocked on something that is neither the terminal nor the network.
    Elsewhere,
    /// Blocked until the terminal has input.
    Terminal,
}

/// Looks at `pids` (a terminal's foreground process group). Returns the
/// process waiting for input from `terminal` (the slave side's path, e.g.
/// `/dev/pts/3`) when no thread of the group is busy or on the network and
/// at least one is blocked reading the terminal.
pub fn waiting_for_terminal(pids: &[i32], terminal: &Path) -> Option<TerminalReader> {
    let mut reader = None;
    for &pid in pids {
        match process_wait(pid, terminal) {
            ThreadWait::Busy | ThreadWait::Network => return None,
            ThreadWait::Elsewhere => {}
            ThreadWait::Terminal => {
                if reader.is_none() {
                    reader = Some(TerminalReader {
                        pid,
                        name: command_name(pid),
                    });
                }
            }
        }
    }
    reader
}

fn command_name(pid: i32) -> String {
    fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|name| name.trim_end().to_owned())
        .unwrap_or_else(|_| format!("pid {pid}"))
}

/// A process waits on the terminal when none of its threads is busy or on
/// the network and one of them is blocked on terminal input.
fn process_wait(pid: i32, terminal: &Path) -> ThreadWait {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return ThreadWait::Elsewhere; // gone: it is not holding anything up
    };
    let mut result = ThreadWait::Elsewhere;
    for task in tasks.filter_map(|t| t.ok()) {
        let Some(tid) = task
            .file_name()
            .to_str()
            .and_then(|t| t.parse::<i32>().ok())
        else {
            continue;
        };
        match thread_wait(pid, tid, terminal) {
            wait @ (ThreadWait::Busy | ThreadWait::Network) => return wait,
            ThreadWait::Terminal => result = ThreadWait::Terminal,
            ThreadWait::Elsewhere => {}
        }
    }
    result
}

fn thread_wait(pid: i32, tid: i32, terminal: &Path) -> ThreadWait {
    let base = format!("/proc/{pid}/task/{tid}");
    let Ok(stat) = fs::read_to_string(format!("{base}/stat")) else {
        return ThreadWait::Elsewhere;
    };
    let state = stat
        .rsplit(')')
        .next()
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or("");
    match state {
        "S" => {}
        "Z" | "X" | "T" | "t" => return ThreadWait::Elsewhere,
        _ => return ThreadWait::Busy, // R, D, ...
    }
    let Ok(syscall) = fs::read_to_string(format!("{base}/syscall")) else {
        return ThreadWait::Busy;
    };
    let Some(call) = Syscall::parse(&syscall) else {
        return ThreadWait::Elsewhere; // "running" raced with "S", or not in a call
    };
    let watched = match call.kind() {
        CallKind::Read => vec![call.args[0] as i32],
        CallKind::Poll => poll_fds(pid, call.args[0], call.args[1]),
        CallKind::Select => select_fds(pid, call.args[0], call.args[1]),
        CallKind::EpollWait => epoll_fds(pid, call.args[0] as i32),
        CallKind::Network => return ThreadWait::Network,
        CallKind::Other => return ThreadWait::Elsewhere,
    };
    let kinds: Vec<Descriptor> = watched
        .iter()
        .map(|&fd| describe_fd(pid, fd, terminal))
        .collect();
    if kinds.contains(&Descriptor::Socket) {
        ThreadWait::Network
    } else if kinds.contains(&Descriptor::Terminal) {
        ThreadWait::Terminal
    } else {
        ThreadWait::Elsewhere
    }
}

fn describe_fd(pid: i32, fd: i32, terminal: &Path) -> Descriptor {
    match fs::read_link(format!("/proc/{pid}/fd/{fd}")) {
        Ok(target) if target == terminal || target == Path::new("/dev/tty") => Descriptor::Terminal,
        Ok(target) if target.to_string_lossy().starts_with("socket:") => Descriptor::Socket,
        _ => Descriptor::Other,
    }
}

/// `/proc/<pid>/task/<tid>/syscall`: `nr arg0 … arg5 sp pc`.
struct Syscall {
    number: i64,
    args: [u64; 6],
}

enum CallKind {
    /// `read(fd, …)` and friends: the descriptor is the first argument.
    Read,
    /// `poll(fds, nfds, …)`, `ppoll`.
    Poll,
    /// `select(nfds, readfds, …)`, `pselect6`.
    Select,
    /// `epoll_wait(epfd, …)` and friends.
    EpollWait,
    /// `accept`, `connect`, `recvfrom`, `recvmsg`: blocked on a socket.
    Network,
    Other,
}

impl Syscall {
    fn parse(text: &str) -> Option<Syscall> {
        let mut fields = text.split_whitespace();
        let number: i64 = fields.next()?.parse().ok()?;
        if number < 0 {
            return None;
        }
        let mut args = [0u64; 6];
        for arg in &mut args {
            let field = fields.next()?;
            *arg = u64::from_str_radix(field.trim_start_matches("0x"), 16).ok()?;
        }
        Some(Syscall { number, args })
    }

    fn kind(&self) -> CallKind {
        let n = self.number;
        if n == libc::SYS_read || n == libc::SYS_readv || n == libc::SYS_pread64 {
            return CallKind::Read;
        }
        if n == libc::SYS_ppoll {
            return CallKind::Poll;
        }
        if n == libc::SYS_pselect6 {
            return CallKind::Select;
        }
        if n == libc::SYS_epoll_pwait || n == libc::SYS_epoll_pwait2 {
            return CallKind::EpollWait;
        }
        if [
            libc::SYS_accept,
            libc::SYS_accept4,
            libc::SYS_connect,
            libc::SYS_recvfrom,
            libc::SYS_recvmsg,
            libc::SYS_recvmmsg,
        ]
        .contains(&n)
        {
            return CallKind::Network;
        }
        #[cfg(target_arch = "x86_64")]
        {
            if n == libc::SYS_poll {
                return CallKind::Poll;
            }
            if n == libc::SYS_select {
                return CallKind::Select;
            }
            if n == libc::SYS_epoll_wait {
                return CallKind::EpollWait;
            }
        }
        CallKind::Other
    }
}

/// Bounds on what is read from another process's memory.
const MAX_POLL_FDS: u64 = 1024;
const MAX_SELECT_FDS: u64 = 1024;

fn read_memory(pid: i32, address: u64, length: usize) -> Option<Vec<u8>> {
    let file = fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    let mut buffer = vec![0u8; length];
    file.read_exact_at(&mut buffer, address).ok()?;
    Some(buffer)
}

/// The descriptors of a `struct pollfd` array that wait for input.
fn poll_fds(pid: i32, address: u64, count: u64) -> Vec<i32> {
    let count = count.min(MAX_POLL_FDS) as usize;
    let Some(memory) = read_memory(pid, address, count * 8) else {
        return Vec::new();
    };
    let wants_input: i16 = libc::POLLIN | libc::POLLRDNORM | libc::POLLPRI;
    memory
        .chunks_exact(8)
        .filter_map(|entry| {
            let fd = i32::from_ne_bytes([entry[0], entry[1], entry[2], entry[3]]);
            let events = i16::from_ne_bytes([entry[4], entry[5]]);
            (fd >= 0 && events & wants_input != 0).then_some(fd)
        })
        .collect()
}

/// The descriptors set in a `select` read set of `nfds` bits.
fn select_fds(pid: i32, nfds: u64, address: u64) -> Vec<i32> {
    if address == 0 {
        return Vec::new();
    }
    let nfds = nfds.min(MAX_SELECT_FDS);
    let words = nfds.div_ceil(64) as usize;
    let Some(memory) = read_memory(pid, address, words * 8) else {
        return Vec::new();
    };
    let mut fds = Vec::new();
    for (index, word) in memory.chunks_exact(8).enumerate() {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        let bits = u64::from_ne_bytes(bytes);
        for bit in 0..64 {
            let fd = (index * 64 + bit) as u64;
            if fd < nfds && bits & (1 << bit) != 0 {
                fds.push(fd as i32);
            }
        }
    }
    fds
}

/// The descriptors an epoll instance watches for input, from its fdinfo:
/// `tfd:        5 events:       19 data: …`.
fn epoll_fds(pid: i32, epoll_fd: i32) -> Vec<i32> {
    let Ok(info) = fs::read_to_string(format!("/proc/{pid}/fdinfo/{epoll_fd}")) else {
        return Vec::new();
    };
    info.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            if fields.next()? != "tfd:" {
                return None;
            }
            let fd: i32 = fields.next()?.parse().ok()?;
            if fields.next()? != "events:" {
                return None;
            }
            let events = u32::from_str_radix(fields.next()?, 16).ok()?;
            (events & (libc::EPOLLIN as u32 | libc::EPOLLPRI as u32) != 0).then_some(fd)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    /// The stdin pipe of `child` stands in for the terminal.
    fn stdin_identity(child: &Child) -> PathBuf {
        fs::read_link(format!("/proc/{}/fd/0", child.id())).unwrap()
    }

    /// Polls until `check` holds, failing after a generous deadline.
    fn eventually(mut check: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if check() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    fn spawn(program: &str, args: &[&str]) -> Child {
        Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap()
    }

    fn finish(mut child: Child) {
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn a_blocking_read_is_waiting() {
        let child = spawn("cat", &[]);
        let identity = stdin_identity(&child);
        let pid = child.id() as i32;
        assert!(eventually(|| {
            waiting_for_terminal(&[pid], &identity).is_some_and(|r| r.name == "cat")
        }));
        finish(child);
    }

    #[test]
    fn select_on_the_terminal_is_waiting() {
        let child = spawn(
            "python3",
            &[
                "-c",
                "import select, sys; select.select([sys.stdin], [], [])",
            ],
        );
        let identity = stdin_identity(&child);
        let pid = child.id() as i32;
        assert!(eventually(
            || waiting_for_terminal(&[pid], &identity).is_some()
        ));
        finish(child);
    }

    #[test]
    fn sleeping_or_reading_elsewhere_is_not_waiting() {
        let sleeper = spawn("sleep", &["30"]);
        let identity = stdin_identity(&sleeper);
        let pid = sleeper.id() as i32;
        // Once asleep in nanosleep, it must never count as waiting.
        assert!(eventually(|| {
            fs::read_to_string(format!("/proc/{pid}/syscall"))
                .is_ok_and(|s| s.split_whitespace().next() != Some("running"))
        }));
        assert_eq!(waiting_for_terminal(&[pid], &identity), None);
        finish(sleeper);
    }

    #[test]
    fn a_busy_member_means_the_group_is_not_waiting() {
        let reader = spawn("cat", &[]);
        let identity = stdin_identity(&reader);
        let reader_pid = reader.id() as i32;
        assert!(eventually(|| {
            waiting_for_terminal(&[reader_pid], &identity).is_some()
        }));
        let busy = spawn("sh", &["-c", "while :; do :; done"]);
        let busy_pid = busy.id() as i32;
        assert!(eventually(|| {
            waiting_for_terminal(&[reader_pid, busy_pid], &identity).is_none()
        }));
        finish(reader);
        finish(busy);
    }

    #[test]
    fn a_program_also_serving_the_network_is_not_waiting() {
        // One thread reads stdin, another waits for connections.
        let child = spawn(
            "python3",
            &[
                "-c",
                "import socket, sys, threading\n\
                 s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n\
                 threading.Thread(target=s.accept, daemon=True).start()\n\
                 print('ready', flush=True); sys.stdin.readline()",
            ],
        );
        let identity = stdin_identity(&child);
        let pid = child.id() as i32;
        // Wait until one thread blocks in read and the other in accept.
        let calls = || -> Vec<i64> {
            fs::read_dir(format!("/proc/{pid}/task"))
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|t| fs::read_to_string(t.path().join("syscall")).ok())
                .filter_map(|s| Syscall::parse(&s).map(|call| call.number))
                .collect()
        };
        assert!(eventually(|| {
            let calls = calls();
            calls.contains(&libc::SYS_read)
                && (calls.contains(&libc::SYS_accept4) || calls.contains(&libc::SYS_accept))
        }));
        assert_eq!(waiting_for_terminal(&[pid], &identity), None);
        finish(child);
    }

    #[test]
    fn syscall_lines_parse() {
        let call = Syscall::parse("0 0x3 0x556f23e2c0d0 0x2000 0x0 0x0 0x0 0x7ffd 0x7f2").unwrap();
        assert_eq!(call.number, 0);
        assert_eq!(call.args[0], 3);
        assert!(Syscall::parse("running").is_none());
        assert!(Syscall::parse("-1 0x7ffd 0x7f2").is_none());
    }
}
