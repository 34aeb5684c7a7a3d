//! Keeping the host out of reach of what it starts.
//!
//! Every program the host starts (through [`crate::spawn`]) gets a seccomp
//! filter, inherited by everything it starts, that refuses with `EPERM` the
//! system calls that would signal, trace or read the memory of the host
//! itself: `kill` of the host's pid, of its process group (which holds the
//! agent that started it), of the agent by pid (the host's parent, and the
//! leader of its process group) and of every process (`kill -1`), `tgkill` /
//! `tkill` / `rt_sigqueueinfo` / `rt_tgsigqueueinfo` aimed at the host,
//! `pidfd_open` of the host, `pidfd_send_signal` altogether (its target
//! cannot be read from its arguments; programs fall back to `kill`),
//! `ptrace` of the host and `process_vm_readv` / `process_vm_writev` on it.
//! Everything else is allowed, so `kill -9 $PPID` or `pkill envhost` fails
//! with "Operation not permitted" while every other signal works.
//!
//! The host also makes itself not dumpable ([`prepare`]) and takes
//! `CAP_SYS_PTRACE` out of every program it starts (its bounding and
//! ambient sets, where the host may). The kernel then lets no program the
//! host started into `/proc/<host>/fd` or `/proc/<host>/mem`: otherwise a
//! command could open the host's own stdout there and write answers the
//! agent would take for envhost's, or open its stdin for writing and send
//! commands in the agent's name. This part needs no privilege and holds for
//! every user, root included. (`/proc/<host>/environ` stays readable on
//! some kernels; [`crate::secrets`] wipes the secrets from what it shows.)
//!
//! Installing a filter needs `CAP_SYS_ADMIN` or the no-new-privileges flag.
//! The host never sets that flag itself (it would stop `sudo` and every
//! other set-uid program in the shell), so the guard is on only when the
//! host has `CAP_SYS_ADMIN` (root, most containers that run as root) or
//! already runs with no-new-privileges. It does not cover: the host's other
//! threads by their thread ids, 32-bit system calls (a 32-bit program, or
//! `int 0x80`), writing `/proc/<host>/mem` where ptrace rules allow it, and
//! root, which can remove the filter's premise altogether.
//!
//! This module knows pids and system calls, nothing of environments.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use nix::libc;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

static FILTER: OnceLock<Option<Vec<libc::sock_filter>>> = OnceLock::new();

/// Why programs started from now on are not guarded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardUnavailable {
    /// No filter is built for this processor.
    #[error("seccomp filters are not built for {0}")]
    Architecture(&'static str),
    /// Installing a filter needs a privilege the host lacks.
    #[error(
        "the host has neither CAP_SYS_ADMIN nor no-new-privileges, which installing a seccomp filter needs"
    )]
    NoPrivilege,
}

/// Whether programs started from now on are guarded, and why not.
pub fn status() -> Result<(), GuardUnavailable> {
    match prepared() {
        Some(_) => Ok(()),
        None => Err(unavailable_reason()),
    }
}

fn unavailable_reason() -> GuardUnavailable {
    if std::env::consts::ARCH != "x86_64" && std::env::consts::ARCH != "aarch64" {
        GuardUnavailable::Architecture(std::env::consts::ARCH)
    } else {
        GuardUnavailable::NoPrivilege
    }
}

/// The filter for this host, built once (at the first spawn, or earlier
/// through [`prepare`]); `None` when it cannot be installed here.
pub(crate) fn prepared() -> Option<&'static [libc::sock_filter]> {
    FILTER.get_or_init(build).as_deref()
}

/// At start-up, before threads and children: makes the host not dumpable
/// (see the module doc) and builds the filter.
pub fn prepare() {
    // Not dumpable: /proc/<host>/{fd,environ,mem} and ptrace then need
    // CAP_SYS_PTRACE, which no program the host starts keeps. It also means
    // no core dump of the host (which holds the channels' keys).
    if let Err(err) = nix::sys::prctl::set_dumpable(false) {
        eprintln!(
            "envhost: cannot make the host undumpable ({err}); commands may reach its \
             descriptors through /proc"
        );
    }
    let _ = prepared();
}

/// `CAP_SYS_PTRACE`'s number (linux/capability.h).
const CAP_SYS_PTRACE: libc::c_ulong = 19;

/// In a program between fork and exec: `CAP_SYS_PTRACE` out of its
/// bounding set (so that not even root regains it at exec) and its ambient
/// set. Each fails harmlessly where the program never had it or the host
/// may not drop it (no `CAP_SETPCAP`; the host then cannot pass it on
/// either, unless it holds it itself as an unprivileged user).
///
/// # Safety
/// Async-signal-safe (two `prctl` calls); for the child after fork.
pub(crate) unsafe fn drop_ptrace_capability() {
    // SAFETY: plain system calls with integer arguments.
    unsafe {
        libc::prctl(libc::PR_CAPBSET_DROP, CAP_SYS_PTRACE, 0, 0, 0);
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_LOWER as libc::c_ulong,
            CAP_SYS_PTRACE,
            0,
            0,
        );
    }
}

fn build() -> Option<Vec<libc::sock_filter>> {
    if !may_install() {
        return None;
    }
    let arch = TargetArch::try_from(std::env::consts::ARCH).ok()?;
    let host = std::process::id() as i32;
    let group = nix::unistd::getpgrp().as_raw();
    let parent = nix::unistd::getppid().as_raw();
    let program = filter(arch, host, group, parent).ok()?;
    Some(program)
}

/// `CAP_SYS_ADMIN` in the effective set, or no-new-privileges already on.
fn may_install() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .map(str::trim)
            .map(str::to_owned)
    };
    let cap_sys_admin = field("CapEff:")
        .and_then(|hex| u64::from_str_radix(&hex, 16).ok())
        .is_some_and(|caps| caps & (1 << 21) != 0);
    let no_new_privs = field("NoNewPrivs:").is_some_and(|flag| flag == "1");
    cap_sys_admin || no_new_privs
}

/// The filter: refuse what reaches `host` (pid) or its process `group`,
/// and `kill` of the agent that started it: its `parent` and the group's
/// leader, by pid.
fn filter(
    arch: TargetArch,
    host: i32,
    group: i32,
    parent: i32,
) -> Result<Vec<libc::sock_filter>, seccompiler::Error> {
    let equals = |arg: u8, value: i32| {
        SeccompCondition::new(
            arg,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Eq,
            value as u32 as u64,
        )
    };
    let rule = |arg: u8, value: i32| SeccompRule::new(vec![equals(arg, value)?]);
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let mut kill_targets = vec![rule(0, host)?, rule(0, -1)?];
    // `kill -- -$(ps -o pgid= $PPID)` in a shell splits into `-` and the
    // leader's pid: the agent must be out of reach by pid as well as by
    // group. Pid 1 (a container's init, or the host's parent after the agent
    // died) is left alone: the kernel already protects it.
    if group > 1 {
        kill_targets.push(rule(0, -group)?);
        if group != host {
            kill_targets.push(rule(0, group)?);
        }
    }
    if parent > 1 && parent != group {
        kill_targets.push(rule(0, parent)?);
    }
    rules.insert(libc::SYS_kill, kill_targets);
    for (syscall, arg) in [
        (libc::SYS_tkill, 0),
        (libc::SYS_tgkill, 0),
        (libc::SYS_rt_sigqueueinfo, 0),
        (libc::SYS_rt_tgsigqueueinfo, 0),
        (libc::SYS_pidfd_open, 0),
        (libc::SYS_ptrace, 1),
        (libc::SYS_process_vm_readv, 0),
        (libc::SYS_process_vm_writev, 0),
    ] {
        rules.insert(syscall, vec![rule(arg, host)?]);
    }
    // No condition: every call.
    rules.insert(libc::SYS_pidfd_send_signal, Vec::new());
    let compiled: BpfProgram = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )?
    .try_into()?;
    // seccompiler kills a process whose system call is of another
    // architecture (a 32-bit program); such calls are let through instead,
    // before its own check: the guard protects, it must not break programs.
    let mut program = vec![load_arch(), jump_if_equal(audit_arch(arch), 1, 0), allow()];
    program.extend(compiled.into_iter().map(|instruction| libc::sock_filter {
        code: instruction.code,
        jt: instruction.jt,
        jf: instruction.jf,
        k: instruction.k,
    }));
    Ok(program)
}

fn audit_arch(arch: TargetArch) -> u32 {
    match arch {
        TargetArch::aarch64 => 0xC000_00B7,
        TargetArch::riscv64 => 0xC000_00F3,
        _ => 0xC000_003E,
    }
}

fn load_arch() -> libc::sock_filter {
    // BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)
    libc::sock_filter {
        code: 0x20,
        jt: 0,
        jf: 0,
        k: 4,
    }
}

fn jump_if_equal(value: u32, jt: u8, jf: u8) -> libc::sock_filter {
    // BPF_JMP | BPF_JEQ | BPF_K
    libc::sock_filter {
        code: 0x15,
        jt,
        jf,
        k: value,
    }
}

fn allow() -> libc::sock_filter {
    // BPF_RET | BPF_K, SECCOMP_RET_ALLOW
    libc::sock_filter {
        code: 0x06,
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ALLOW,
    }
}

/// Installs `program` in the calling process. Between fork and exec: one
/// system call, no allocation. A failure leaves the child unguarded (it
/// still runs).
///
/// # Safety
///
/// `program` must be a valid filter (it comes from [`prepared`]).
pub(crate) unsafe fn install(program: &[libc::sock_filter]) -> bool {
    let fprog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: `fprog` points at `program`, alive for the call.
    let result = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0,
            &fprog as *const libc::sock_fprog,
        )
    };
    result == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_lets_other_architectures_through_before_any_check() {
        let program = filter(TargetArch::x86_64, 4242, 4240, 4241).unwrap();
        assert_eq!(program[0].code, 0x20);
        assert_eq!(program[1].k, 0xC000_003E);
        assert_eq!(program[2].k, libc::SECCOMP_RET_ALLOW);
        assert!(program.len() < 200, "{}", program.len());
    }
}
