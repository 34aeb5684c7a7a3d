//! The shell's standard streams, seen from outside through `/proc`.
//!
//! A command may redirect the shell's own output (`exec > >(tee -a log)`).
//! The shell's prompt code says so in its report (and repairs a closed
//! stream itself); the host must then know when output may still be on its
//! way through the pipe. A [`PipeWatch`]
//! opens such a pipe through `/proc/<shell>/fd/<n>` (a new reference to the
//! same pipe, never read from) to ask the kernel how many bytes it still
//! holds, and finds the shell's descendants that read it (the `tee` of a
//! process substitution): the output is through once the pipe is empty and
//! every reader is blocked waiting for more input, rather than busy with
//! what it read (a `sleep` in a slow loop, a write not done yet).
//!
//! Reading only: nothing here writes to the shell or its streams.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};

use envhost_process::{descendants, process_table, waiting_for_any_input};
use nix::libc;

/// Pipes the shell writes to, opened to ask how much they still hold, and
/// the processes below the shell that read them.
#[derive(Default)]
pub struct PipeWatch {
    pipes: Vec<File>,
    readers: Vec<i32>,
}

impl PipeWatch {
    /// Watches descriptor `fd` of `shell` if it is a pipe (sockets cannot
    /// be reopened; they are waited for by time alone).
    ///
    /// The descriptor is first only looked at (`O_PATH`, which opens
    /// nothing): whatever a command put there, a terminal (which a host
    /// leading its session would take as its own), a watchdog or a tape
    /// (armed or rewound by an open), is never opened. Only a pipe is, and
    /// through the very inode looked at (`/proc/self/fd/<n>` of the
    /// `O_PATH` descriptor), so a swap in between changes nothing.
    pub fn add(&mut self, shell: i32, fd: i32) {
        use std::os::unix::fs::FileTypeExt;
        let looked_at = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
            .open(format!("/proc/{shell}/fd/{fd}"));
        let Ok(place) = looked_at else {
            return;
        };
        let Ok(metadata) = place.metadata() else {
            return;
        };
        if !metadata.file_type().is_fifo() {
            return;
        }
        let opened = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
            .open(format!("/proc/self/fd/{}", place.as_raw_fd()));
        let Ok(file) = opened else {
            return;
        };
        let inode = format!("pipe:[{}]", metadata.ino());
        let table = process_table();
        for process in descendants(&table, shell) {
            if reads_pipe(process.pid, &inode) && !self.readers.contains(&process.pid) {
                self.readers.push(process.pid);
            }
        }
        self.pipes.push(file);
    }

    /// Whether the output is through: the pipes are empty and each reader
    /// is blocked waiting for more.
    pub fn drained(&self) -> bool {
        !self.holds_bytes() && self.readers.iter().all(|&pid| waiting_for_any_input(pid))
    }

    /// Whether a watched pipe still holds bytes nobody has read.
    pub fn holds_bytes(&self) -> bool {
        self.pipes.iter().any(|pipe| {
            let mut pending: libc::c_int = 0;
            // SAFETY: FIONREAD writes one int through the pointer.
            let result = unsafe { libc::ioctl(pipe.as_raw_fd(), libc::FIONREAD, &mut pending) };
            result == 0 && pending > 0
        })
    }
}

/// Whether `pid` holds a read end of the pipe named `inode`
/// (`pipe:[N]`), according to `/proc/<pid>/fd` and `fdinfo`.
fn reads_pipe(pid: i32, inode: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    entries.filter_map(Result::ok).any(|entry| {
        if !std::fs::read_link(entry.path()).is_ok_and(|t| t.as_os_str() == inode) {
            return false;
        }
        let info = std::fs::read_to_string(format!(
            "/proc/{pid}/fdinfo/{}",
            entry.file_name().to_string_lossy()
        ))
        .unwrap_or_default();
        info.lines()
            .find_map(|line| line.strip_prefix("flags:"))
            .and_then(|flags| u32::from_str_radix(flags.trim(), 8).ok())
            .is_some_and(|flags| flags & 0o3 != 0o1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn pipes_report_what_they_hold_and_other_files_are_not_watched() {
        let me = std::process::id() as i32;
        let (reader, mut writer) = std::io::pipe().unwrap();
        let fd = writer.as_raw_fd();
        let file = tempfile::tempfile().unwrap();
        let mut not_a_pipe = PipeWatch::default();
        not_a_pipe.add(me, file.as_raw_fd());
        assert!(not_a_pipe.pipes.is_empty());
        let mut watch = PipeWatch::default();
        watch.add(me, fd);
        assert!(!watch.holds_bytes());
        writer.write_all(b"pending").unwrap();
        assert!(watch.holds_bytes());
        drop(reader);
    }

    #[test]
    fn what_is_not_a_pipe_is_only_looked_at_never_opened() {
        // An open of the file would show as IN_OPEN; a look (O_PATH) does
        // not. A device there (a terminal, a watchdog) would feel an open.
        let me = std::process::id() as i32;
        let file = tempfile::NamedTempFile::new().unwrap();
        let path = std::ffi::CString::new(file.path().as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: plain inotify calls on a descriptor this test owns.
        let events = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        assert!(events >= 0);
        let watch_id = unsafe { libc::inotify_add_watch(events, path.as_ptr(), libc::IN_OPEN) };
        assert!(watch_id >= 0);
        let mut watch = PipeWatch::default();
        watch.add(me, file.as_file().as_raw_fd());
        assert!(watch.pipes.is_empty());
        let mut buffer = [0u8; 256];
        // SAFETY: reads into a buffer of the length given.
        let read = unsafe { libc::read(events, buffer.as_mut_ptr().cast(), buffer.len()) };
        unsafe { libc::close(events) };
        assert_eq!(
            read, -1,
            "the file was opened ({read} bytes of inotify events)"
        );
    }
}
