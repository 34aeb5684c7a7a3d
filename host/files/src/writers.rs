//! Who else has a file open for writing, from Linux's `/proc`.
//!
//! An edit replaces a file's content; a process that holds the file open
//! for writing (a logger appending through its descriptor, a Python session
//! with an unclosed `open(..., "w")`) would go on writing to the old content
//! or over the new one, and its bytes would be lost. [`replace_verified`]
//! asks this module first and refuses to write such a file; the caller
//! names the processes ([`describe`]).
//!
//! [`replace_verified`]: crate::replace_verified
//!
//! The kernel is asked first, through a read lease ([`lease_check`]): it
//! grants one only when no descriptor anywhere has the file open for
//! writing (every process, including those the host may not inspect, and
//! writable shared mappings whose descriptor was closed), in three system
//! calls. Only when it refuses (or leases are not available for the file:
//! another user's file, a file system without them) is `/proc` searched,
//! to name the writers: that search stats every descriptor of every
//! process on the machine and took 1–45 ms here with a few hundred
//! descriptors (a busy process's `/proc/<pid>/fd` is slow to list).
//!
//! A descriptor is matched by what it points to (device and inode, so
//! every hard link of the file counts) and counted as a writer when its
//! `fdinfo` flags say write-only or read-write. Processes the host may not
//! inspect (other users', without privileges) are not seen by the search.
//! Nothing here changes the file; the lease lives for two system calls, and
//! a process that opens the file for writing in between waits for its
//! release (its break is announced with SIGURG, ignored by default, instead
//! of SIGIO, which ends the host).

use std::fs::{self, File};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;

/// A process that has the file open for writing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Writer {
    /// Its process id.
    pub pid: i32,
    /// Its command name (`/proc/<pid>/comm`), e.g. `python3`.
    pub name: String,
}

/// What the kernel says of a file's writers when asked for a read lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseAnswer {
    /// No descriptor anywhere has the file open for writing.
    NoWriter,
    /// Some descriptor (perhaps this process's own) has it open for writing.
    Writers,
    /// Leases are not available for this file (not its owner, a file
    /// system without them, leases turned off): the kernel did not say.
    Unknown,
}

/// Asks the kernel whether anyone has `file` open for writing: a read
/// lease is granted only when nobody has (`file` must be open read-only).
/// The lease is released at once.
pub fn lease_check(file: &File) -> LeaseAnswer {
    use nix::libc;
    // <fcntl.h> on Linux (every architecture); the libc crate does not
    // name it.
    const F_SETSIG: libc::c_int = 10;
    let fd = file.as_raw_fd();
    // A writer that opens the file while the lease is held makes the kernel
    // signal the lease's owner, this process: SIGURG (ignored unless
    // handled) instead of the default SIGIO, which the server treats as
    // deadly.
    // SAFETY: fcntl on a descriptor `file` owns, with integer arguments.
    if unsafe { libc::fcntl(fd, F_SETSIG, libc::SIGURG) } != 0 {
        return LeaseAnswer::Unknown;
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_RDLCK) } == 0 {
        // SAFETY: as above. Should the release fail, the lease ends when
        // `file` is closed.
        let _ = unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_UNLCK) };
        return LeaseAnswer::NoWriter;
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::EAGAIN) => LeaseAnswer::Writers,
        _ => LeaseAnswer::Unknown,
    }
}

/// The processes other than this one with descriptors open for writing on
/// `file` (open read-only), whose device and inode numbers are given: none
/// when the kernel grants a read lease ([`lease_check`]), otherwise those
/// a search of `/proc` finds.
pub fn others_writing_file(file: &File, device: u64, inode: u64) -> Vec<Writer> {
    match lease_check(file) {
        LeaseAnswer::NoWriter => Vec::new(),
        LeaseAnswer::Writers | LeaseAnswer::Unknown => others_writing(device, inode),
    }
}

/// The processes other than this one with descriptors open for writing on
/// the file with this device and inode number, from a search of `/proc`.
pub fn others_writing(device: u64, inode: u64) -> Vec<Writer> {
    let own = std::process::id();
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut writers = Vec::new();
    for pid in entries
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != own)
    {
        if writes_to(pid, device, inode) {
            writers.push(Writer {
                pid: i32::try_from(pid).unwrap_or(i32::MAX),
                name: fs::read_to_string(format!("/proc/{pid}/comm"))
                    .map(|name| name.trim_end().to_owned())
                    .unwrap_or_else(|_| "?".to_owned()),
            });
        }
    }
    writers
}

fn writes_to(pid: u32, device: u64, inode: u64) -> bool {
    let Ok(descriptors) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    descriptors.filter_map(|entry| entry.ok()).any(|entry| {
        // `metadata` follows the descriptor's link to what it is open on.
        fs::metadata(entry.path()).is_ok_and(|m| m.dev() == device && m.ino() == inode)
            && opened_for_writing(pid, &entry.file_name().to_string_lossy())
    })
}

/// The descriptor's `flags:` line (octal) has O_WRONLY or O_RDWR.
fn opened_for_writing(pid: u32, fd: &str) -> bool {
    let Ok(info) = fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")) else {
        return false;
    };
    info.lines()
        .find_map(|line| line.strip_prefix("flags:"))
        .and_then(|flags| u32::from_str_radix(flags.trim(), 8).ok())
        .is_some_and(|flags| flags & 0o3 != 0)
}

/// "process 123 (python3)", "processes 123 (python3) and 456 (tee)".
pub fn describe(writers: &[Writer]) -> String {
    let named: Vec<String> = writers
        .iter()
        .map(|w| format!("{} ({})", w.pid, w.name))
        .collect();
    match named.as_slice() {
        [one] => format!("process {one}"),
        [init @ .., last] => format!("processes {} and {last}", init.join(", ")),
        [] => "no process".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    #[test]
    fn a_child_writing_is_found_and_a_reader_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.txt");
        fs::write(&path, "x").unwrap();
        let metadata = fs::metadata(&path).unwrap();
        let find = || {
            others_writing(metadata.dev(), metadata.ino())
                .into_iter()
                .map(|w| w.pid)
                .collect::<Vec<_>>()
        };
        let mut reader = Command::new("sleep")
            .arg("30")
            .stdin(fs::File::open(&path).unwrap())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let reader_pid = reader.id() as i32;
        let mut writer = Command::new("sleep")
            .arg("30")
            .stdout(fs::OpenOptions::new().append(true).open(&path).unwrap())
            .spawn()
            .unwrap();
        let writer_pid = writer.id() as i32;
        let found = find();
        let _ = (writer.kill(), reader.kill(), writer.wait(), reader.wait());
        assert!(found.contains(&writer_pid), "{found:?}");
        assert!(!found.contains(&reader_pid), "{found:?}");
    }

    #[test]
    fn the_kernel_says_whether_anyone_writes_and_the_search_names_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.txt");
        fs::write(&path, "x").unwrap();
        let metadata = fs::metadata(&path).unwrap();
        let reading = File::open(&path).unwrap();
        // The test runs as the file's owner, so leases are available
        // unless the file system lacks them.
        let quiet = lease_check(&reading);
        assert_ne!(quiet, LeaseAnswer::Writers);
        assert!(others_writing_file(&reading, metadata.dev(), metadata.ino()).is_empty());
        let mut writer = Command::new("sleep")
            .arg("30")
            .stdout(fs::OpenOptions::new().append(true).open(&path).unwrap())
            .spawn()
            .unwrap();
        let writer_pid = writer.id() as i32;
        let answer = lease_check(&reading);
        let found: Vec<i32> = others_writing_file(&reading, metadata.dev(), metadata.ino())
            .into_iter()
            .map(|w| w.pid)
            .collect();
        let _ = (writer.kill(), writer.wait());
        if quiet == LeaseAnswer::NoWriter {
            assert_eq!(answer, LeaseAnswer::Writers);
        }
        assert!(found.contains(&writer_pid), "{found:?}");
    }

    #[test]
    fn a_writer_that_closed_its_descriptor_but_kept_a_writable_mapping_is_seen() {
        // The search of `/proc` looks at descriptors only; the kernel's
        // count of writers includes a shared writable mapping.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mapped.txt");
        fs::write(&path, "0123456789").unwrap();
        let script = format!(
            "import ctypes, os, time\n\
             libc = ctypes.CDLL(None, use_errno=True)\n\
             libc.mmap.restype = ctypes.c_void_p\n\
             libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]\n\
             fd = os.open({:?}, os.O_RDWR)\n\
             # mmap(2) itself: Python's mmap module keeps a copy of the descriptor.\n\
             address = libc.mmap(None, 10, 3, 1, fd, 0)\n\
             assert address not in (None, ctypes.c_void_p(-1).value)\n\
             os.close(fd)\n\
             print('mapped', flush=True)\n\
             time.sleep(30)\n",
            path.to_str().unwrap()
        );
        let mut child = Command::new("python3")
            .args(["-c", &script])
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 is needed for this test");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let reading = File::open(&path).unwrap();
        let metadata = reading.metadata().unwrap();
        let answer = lease_check(&reading);
        let searched = others_writing(metadata.dev(), metadata.ino());
        let _ = (child.kill(), child.wait());
        assert_eq!(line.trim(), "mapped");
        assert!(
            searched.is_empty(),
            "the search sees no descriptor: {searched:?}"
        );
        assert_eq!(answer, LeaseAnswer::Writers);
    }

    #[test]
    fn writers_are_named_in_a_list() {
        let w = |pid, name: &str| Writer {
            pid,
            name: name.to_owned(),
        };
        assert_eq!(describe(&[w(1, "a")]), "process 1 (a)");
        assert_eq!(
            describe(&[w(1, "a"), w(2, "b"), w(3, "c")]),
            "processes 1 (a), 2 (b) and 3 (c)"
        );
    }
}
