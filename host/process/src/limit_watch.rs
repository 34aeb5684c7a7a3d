//! The session's limits, watched after every answer: says when the kernel
//! refused forks at the process limit or ended processes at the memory
//! limit, and relieves a fork bomb by ending the session's biggest process
//! group.
//!
//! Owns the watching and the relief; the cgroups and their counter files
//! are [`crate::containment`]'s, the list of programs to spare the
//! reaper's. Knows nothing of environments or of the protocol: it speaks to
//! the orchestrator through [`HostWatch`].

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use envhost_core::{HostWatch, text};

use crate::containment::{LimitCounters, limits, session_members};

/// How long the relief keeps ending what the fork bomb forks.
const RELIEF_WAIT: Duration = Duration::from_secs(2);

/// Watches the session's limits over every answer ([`HostWatch`]): says
/// when the kernel refused forks at the process limit — and then ends the
/// session's biggest process group ([`relieve_process_limit`]), so that the
/// shells can fork again — or ended processes at the memory limit. Its
/// files stay open and are re-read in place: two reads per answer.
#[derive(Debug)]
pub struct LimitWatch {
    processes: Option<(u64, File)>,
    memory: Option<(u64, File)>,
    last: Mutex<LimitCounters>,
}

impl LimitWatch {
    /// The watch over the limits in force; `None` when none is.
    pub fn new() -> Option<LimitWatch> {
        let limits = limits();
        let open = |(limit, events): &(u64, PathBuf)| Some((*limit, File::open(events).ok()?));
        let processes = limits.processes_watched().and_then(open);
        let memory = limits.memory_watched().and_then(open);
        if processes.is_none() && memory.is_none() {
            return None;
        }
        let watch = LimitWatch {
            processes,
            memory,
            last: Mutex::new(LimitCounters::default()),
        };
        *watch.last.lock().unwrap_or_else(PoisonError::into_inner) = watch.counters();
        Some(watch)
    }

    fn counters(&self) -> LimitCounters {
        let read = |file: &File, name: &str| -> u64 {
            use std::os::unix::fs::FileExt;
            let mut buffer = [0u8; 512];
            let Ok(read) = file.read_at(&mut buffer, 0) else {
                return 0;
            };
            String::from_utf8_lossy(&buffer[..read])
                .lines()
                .find_map(|line| {
                    let (key, value) = line.split_once(' ')?;
                    (key == name).then(|| value.trim().parse().ok())?
                })
                .unwrap_or(0)
        };
        LimitCounters {
            forks_refused: self
                .processes
                .as_ref()
                .map_or(0, |(_, file)| read(file, "max")),
            oom_kills: self
                .memory
                .as_ref()
                .map_or(0, |(_, file)| read(file, "oom_kill")),
        }
    }
}

impl HostWatch for LimitWatch {
    fn after_answer(&self) -> Vec<String> {
        let now = self.counters();
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let before = std::mem::replace(&mut *last, now);
        drop(last);
        let mut sentences = Vec::new();
        if let Some((limit, _)) = &self.processes
            && now.forks_refused > before.forks_refused
        {
            let refused = now.forks_refused - before.forks_refused;
            let mut sentence = format!(
                "The session reached its process limit ({limit} processes, --max-processes): {} failed.",
                text::counted(refused as usize, "fork")
            );
            match relieve_process_limit(&crate::reaper::managed_pids()) {
                Some(relief) if relief.ended > 0 => sentence.push_str(&format!(
                    " envhost ended the biggest group of the session's processes ({} running {}) so that the shells can fork again; raise the limit with --max-processes if the work needs more.",
                    relief.ended, relief.program
                )),
                _ => sentence.push_str(" Raise it with --max-processes if the work needs more."),
            }
            sentences.push(sentence);
            // What the relief itself ran into is not news.
            let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
            last.forks_refused = self.counters().forks_refused;
        }
        if let Some((limit, _)) = &self.memory
            && now.oom_kills > before.oom_kills
        {
            let killed = (now.oom_kills - before.oom_kills) as usize;
            sentences.push(format!(
                "The session reached its memory limit ({}, --max-memory): the kernel ended {} with SIGKILL (exit code 137) to stay within it; envhost itself is outside the limit.",
                text::bytes(*limit),
                text::counted(killed, "process")
            ));
        }
        sentences
    }
}

/// What [`relieve_process_limit`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relief {
    /// How many processes it ended.
    pub ended: usize,
    /// The name of the program most of them ran (`bash`, `python3`).
    pub program: String,
}

/// At the process limit (a fork bomb), ends the biggest process group of
/// the session, sparing the processes in `spared` (the environments' own
/// shells and interpreters): what the kernel's out-of-memory killer does
/// for memory, for processes. `None` when there is nothing to end.
pub fn relieve_process_limit(spared: &[i32]) -> Option<Relief> {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let group_of = |pid: i32| crate::procfs::process_info(pid).map(|info| info.group);
    let mut groups: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    let init = crate::session_init::pid();
    for pid in session_members() {
        if spared.contains(&pid) || Some(pid) == init {
            continue;
        }
        if let Some(group) = group_of(pid) {
            groups.entry(group).or_default().push(pid);
        }
    }
    let (&group, members) = groups.iter().max_by_key(|(_, members)| members.len())?;
    let program = fs::read_to_string(format!("/proc/{}/comm", members[0]))
        .map(|name| name.trim().to_owned())
        .unwrap_or_else(|_| "a program".to_owned());
    let whole_group = !spared.iter().any(|&pid| group_of(pid) == Some(group));
    let mut ended = std::collections::BTreeSet::new();
    let deadline = Instant::now() + RELIEF_WAIT;
    loop {
        let left: Vec<i32> = session_members()
            .into_iter()
            .filter(|pid| !spared.contains(pid) && Some(*pid) != init)
            .filter(|&pid| group_of(pid) == Some(group))
            .collect();
        if left.is_empty() || Instant::now() >= deadline {
            break;
        }
        // Stopped first, so that none forks while the others are killed.
        for &pid in &left {
            let _ = kill(Pid::from_raw(pid), Signal::SIGSTOP);
        }
        if whole_group {
            let _ = nix::sys::signal::killpg(Pid::from_raw(group), Signal::SIGKILL);
        }
        for &pid in &left {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            ended.insert(pid);
        }
        thread::sleep(Duration::from_millis(5));
    }
    Some(Relief {
        ended: ended.len(),
        program,
    })
}
