//! A snapshot of the process table from Linux's `/proc`.
//!
//! Used to find a process's descendants (for reaping) and the state of a
//! terminal's foreground job (for "waiting for input" detection). Reading
//! only: nothing here signals or waits.

use std::fs;
use std::time::Duration;

/// What `/proc/<pid>/stat` says about one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessInfo {
    /// The process id.
    pub pid: i32,
    /// Its parent's process id.
    pub parent: i32,
    /// Its process group.
    pub group: i32,
    /// Its session.
    pub session: i32,
    /// One-letter state: `R` running, `S` sleeping, `Z` zombie, `T` stopped…
    pub state: char,
}

/// Every process visible in `/proc` (threads excluded). Processes that exit
/// while the table is read are simply missing.
pub fn process_table() -> Vec<ProcessInfo> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(process_info)
        .collect()
}

/// One process's entry, if it still exists.
pub fn process_info(pid: i32) -> Option<ProcessInfo> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&stat)
}

/// Parses the `stat` line. The command name (field 2) is in parentheses and
/// may itself contain spaces and parentheses, so fields are counted from
/// the last `)`.
fn parse_stat(stat: &str) -> Option<ProcessInfo> {
    let pid = stat.split_whitespace().next()?.parse().ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let parent = fields.next()?.parse().ok()?;
    let group = fields.next()?.parse().ok()?;
    let session = fields.next()?.parse().ok()?;
    Some(ProcessInfo {
        pid,
        parent,
        group,
        session,
        state,
    })
}

/// When `pid` started, in clock ticks since boot (field 22 of
/// `/proc/<pid>/stat`, counted after the command name's closing `)`).
pub fn start_tick(pid: i32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')')
        .next()?
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// The clock tick `ago` before now, rounded down, on the clock that
/// [`start_tick`] counts on (ticks since boot); `None` when the clock
/// cannot be read or `ago` reaches back before boot.
pub fn tick_ago(ago: Duration) -> Option<u64> {
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME).ok()?;
    let since = Duration::from(now).checked_sub(ago)?;
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok()??;
    let hz = u64::try_from(hz).ok().filter(|&hz| hz > 0)?;
    Some((since.as_secs_f64() * hz as f64) as u64)
}

/// The signals `pid` ignores: the `SigIgn` mask of `/proc/<pid>/status`,
/// where bit N-1 is signal N.
pub fn ignored_signals(pid: i32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let mask = status
        .lines()
        .find_map(|line| line.strip_prefix("SigIgn:"))?;
    u64::from_str_radix(mask.trim(), 16).ok()
}

/// Whether a living child of `parent` (the host's numbering) is in the
/// process group `group` as `parent`'s own PID namespace numbers it (the
/// job ids a shell prints, which are not the host's numbers when the shell
/// runs in a namespace of its own). A shell's jobs are its children.
pub fn child_in_group(parent: i32, group: i32) -> bool {
    let Ok(children) = fs::read_to_string(format!("/proc/{parent}/task/{parent}/children")) else {
        return false;
    };
    children
        .split_whitespace()
        .filter_map(|child| child.parse::<i32>().ok())
        .any(|child| {
            let Ok(status) = fs::read_to_string(format!("/proc/{child}/status")) else {
                return false;
            };
            let field = |name: &str| {
                status
                    .lines()
                    .find_map(|line| line.strip_prefix(name))
                    .map(str::trim)
            };
            let living = field("State:").is_some_and(|state| !state.starts_with(['Z', 'X']));
            let own_group = field("NSpgid:")
                .and_then(|ids| ids.split_whitespace().last())
                .and_then(|id| id.parse::<i32>().ok());
            living && own_group == Some(group)
        })
}

/// All descendants of `root` in `table` (children, their children, ...).
pub fn descendants(table: &[ProcessInfo], root: i32) -> Vec<ProcessInfo> {
    let mut found = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for process in table.iter().filter(|p| p.parent == parent && p.pid != root) {
            if !found.iter().any(|f: &ProcessInfo| f.pid == process.pid) {
                found.push(*process);
                frontier.push(process.pid);
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_with_spaces_and_parentheses() {
        let info = parse_stat("4242 (my (odd) name) S 1 4242 4242 34816 4242 4194560 0").unwrap();
        assert_eq!(
            info,
            ProcessInfo {
                pid: 4242,
                parent: 1,
                group: 4242,
                session: 4242,
                state: 'S'
            }
        );
    }

    #[test]
    fn finds_this_process_and_its_parent() {
        let me = std::process::id() as i32;
        let info = process_info(me).expect("own /proc entry");
        assert_eq!(info.pid, me);
        assert!(process_table().iter().any(|p| p.pid == info.parent));
    }

    #[test]
    fn descendants_walk_the_tree() {
        let p = |pid, parent| ProcessInfo {
            pid,
            parent,
            group: pid,
            session: pid,
            state: 'S',
        };
        let table = [p(1, 0), p(10, 1), p(11, 10), p(12, 11), p(20, 1), p(13, 10)];
        let mut pids: Vec<i32> = descendants(&table, 10).iter().map(|d| d.pid).collect();
        pids.sort();
        assert_eq!(pids, [11, 12, 13]);
    }
}
