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
//! A descriptor is matched by what it points to (device and inode, so
//! every hard link of the file counts) and counted as a writer when its
//! `fdinfo` flags say write-only or read-write. Processes the host may not
//! inspect (other users', without privileges) are not seen. Read-only:
//! nothing here signals or changes anything.

use std::fs;
use std::os::unix::fs::MetadataExt;

/// A process that has the file open for writing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Writer {
    /// Its process id.
    pub pid: i32,
    /// Its command name (`/proc/<pid>/comm`), e.g. `python3`.
    pub name: String,
}

/// The processes other than this one with descriptors open for writing on
/// the file with this device and inode number.
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
