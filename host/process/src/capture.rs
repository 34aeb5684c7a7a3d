//! Output that cannot flood: a byte cap with head and tail kept, and the
//! full text saved to a file (large data goes to a file the agent can
//! read piece by piece).
//!
//! [`OutputCapture`] holds at most the cap in memory whatever a command
//! prints. Up to the cap, the output is returned whole. Past it, the text is
//! streamed to a file under the project's `.envhost/output/` folder (created
//! on first need, ignored by git, the newest [`RETAINED_FILES`] kept) and the
//! response holds the first and last halves of the cap with a marker saying
//! how many bytes were left out and where the whole text is.
//!
//! Commands can write in that folder. So it is reached from the project
//! without following any symlink (a `.envhost` or `output` that leads
//! elsewhere is refused, so nothing is written or pruned there), and each
//! file is created `O_EXCL` at a name with a random part: a name planted in
//! advance (a symlink to the host's own stdout) is never written through.

use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use envhost_core::Incident;
use envhost_files::Folder;

/// Default cap on the output returned for one command: 128 KiB. An agent's
/// context is the scarce resource; a build log or a data dump bigger than
/// this is better read from the saved file with `grep`, `tail` or a view.
pub const DEFAULT_CAP_BYTES: usize = 128 * 1024;

/// Default cap on a saved output file: 256 MiB. A runaway command writes at
/// disk speed for its whole timeout (gigabytes a minute); nobody reads more
/// than this of a log, and the response keeps the output's tail anyway.
pub const DEFAULT_SPILL_LIMIT_BYTES: u64 = 256 * 1024 * 1024;

/// How many saved output files are kept in the output folder.
pub const RETAINED_FILES: usize = 20;

/// Where and how much.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputLimits {
    /// Bytes of output returned in a response.
    pub cap_bytes: usize,
    /// Folder for full outputs over the cap.
    pub spill_dir: PathBuf,
    /// The folder below which `spill_dir` is reached without following a
    /// symlink (the project); a `spill_dir` outside it is the operator's.
    pub spill_root: PathBuf,
    /// Largest full-output file written.
    pub spill_limit_bytes: u64,
}

impl OutputLimits {
    /// The defaults for a project: files go to `<project>/.envhost/output`.
    pub fn for_project(project: &Path) -> Self {
        OutputLimits {
            cap_bytes: DEFAULT_CAP_BYTES,
            spill_dir: project.join(".envhost").join("output"),
            spill_root: project.to_path_buf(),
            spill_limit_bytes: DEFAULT_SPILL_LIMIT_BYTES,
        }
    }
}

enum Spill {
    Writing {
        folder: Folder,
        name: OsString,
        path: PathBuf,
        file: BufWriter<File>,
        written: u64,
    },
    Failed {
        reason: String,
    },
}

/// Collects one command's output within the cap.
pub struct OutputCapture {
    limits: OutputLimits,
    label: String,
    /// Everything, until the cap is passed; then the head only.
    head: String,
    /// The most recent output once the cap is passed (between `half` and
    /// `2 * half` bytes; trimmed at [`finish`](OutputCapture::finish)).
    tail: String,
    total: u64,
    spill: Option<Spill>,
}

/// The text to return and what happened to the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapturedOutput {
    /// The text to return: whole, or its head and tail with a marker.
    pub text: String,
    /// The size of the whole output.
    pub total_bytes: u64,
    /// Set when the output went over the cap.
    pub overflow: Option<Overflow>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
/// What went over the cap.
pub struct Overflow {
    /// Bytes left out of the text.
    pub omitted_bytes: u64,
    /// The file holding the whole output, if it could be saved.
    pub saved_to: Option<PathBuf>,
}

impl CapturedOutput {
    /// The incident to report when the output was capped.
    pub fn incident(&self) -> Option<Incident> {
        self.overflow
            .as_ref()
            .map(|overflow| Incident::OutputCapped {
                total_bytes: self.total_bytes,
                saved_to: overflow.saved_to.clone(),
            })
    }
}

impl OutputCapture {
    /// `label` names the saved file (`bash`, `python`, `bash-server`).
    pub fn new(limits: &OutputLimits, label: &str) -> Self {
        OutputCapture {
            limits: limits.clone(),
            label: label.to_owned(),
            head: String::new(),
            tail: String::new(),
            total: 0,
            spill: None,
        }
    }

    /// An empty capture with the same limits and label.
    pub fn empty_like(&self) -> Self {
        OutputCapture::new(&self.limits, &self.label)
    }

    /// Bytes pushed so far.
    pub fn total_bytes(&self) -> u64 {
        self.total
    }

    /// Adds text to the output.
    pub fn push(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.total += text.len() as u64;
        if self.spill.is_none() {
            if self.head.len() + text.len() <= self.limits.cap_bytes {
                self.head.push_str(text);
                return;
            }
            self.start_spilling(text);
            return;
        }
        self.write_spill(text);
        self.tail.push_str(text);
        let half = self.half();
        if self.tail.len() > 2 * half.max(4096) {
            let cut = self.tail.floor_char_boundary(self.tail.len() - half);
            self.tail.drain(..cut);
        }
    }

    fn half(&self) -> usize {
        self.limits.cap_bytes / 2
    }

    fn start_spilling(&mut self, text: &str) {
        let mut all = std::mem::take(&mut self.head);
        all.push_str(text);
        self.spill = Some(match open_spill_file(&self.limits, &self.label) {
            Ok((folder, name, file)) => Spill::Writing {
                path: folder.join(&name),
                folder,
                name,
                file,
                written: 0,
            },
            Err(reason) => Spill::Failed {
                reason: reason.to_string(),
            },
        });
        self.write_spill(&all);
        let half = self.half();
        let head_end = all.floor_char_boundary(half);
        let tail_start = all.ceil_char_boundary(all.len().saturating_sub(half).max(head_end));
        self.tail = all[tail_start..].to_owned();
        all.truncate(head_end);
        self.head = all;
    }

    fn write_spill(&mut self, text: &str) {
        let limit = self.limits.spill_limit_bytes;
        if let Some(Spill::Writing {
            file,
            written,
            path,
            folder,
            name,
        }) = &mut self.spill
        {
            let room = limit.saturating_sub(*written);
            let take = usize::try_from(room).unwrap_or(usize::MAX).min(text.len());
            if take == 0 {
                return;
            }
            if let Err(err) = file.write_all(&text.as_bytes()[..take]) {
                let reason = match folder.remove(name) {
                    Ok(()) => format!(
                        "writing {} failed ({err}); the partial file was removed",
                        path.display()
                    ),
                    Err(_) => format!("writing {} failed ({err})", path.display()),
                };
                self.spill = Some(Spill::Failed { reason });
                return;
            }
            *written += take as u64;
        }
    }

    /// The text for the response.
    pub fn finish(self) -> CapturedOutput {
        let total = self.total;
        let Some(spill) = self.spill else {
            return CapturedOutput {
                text: self.head,
                total_bytes: total,
                overflow: None,
            };
        };
        let half = self.limits.cap_bytes / 2;
        let tail = &self.tail[self
            .tail
            .ceil_char_boundary(self.tail.len().saturating_sub(half))..];
        let omitted = total - self.head.len() as u64 - tail.len() as u64;
        let (saved_to, where_) = match spill {
            Spill::Writing {
                path,
                mut file,
                written,
                folder,
                name,
            } => match file.flush() {
                Ok(()) if written < total => (
                    Some(path.clone()),
                    format!(
                        "the first {written} bytes are saved in {} (the file is limited to {} bytes)",
                        path.display(),
                        self.limits.spill_limit_bytes
                    ),
                ),
                Ok(()) => (
                    Some(path.clone()),
                    format!("the full output is saved in {}", path.display()),
                ),
                // A full disk, most likely: a partial file is removed rather
                // than left taking the space that is missing.
                Err(err) => {
                    let removed = if folder.remove(&name).is_ok() {
                        "; the partial file was removed"
                    } else {
                        ""
                    };
                    (
                        None,
                        format!(
                            "the full output could not be saved: writing {} failed ({err}){removed}",
                            path.display()
                        ),
                    )
                }
            },
            Spill::Failed { reason } => (
                None,
                format!("the full output could not be saved: {reason}"),
            ),
        };
        let mut text = self.head;
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!(
            "[... output too long: {total} bytes in all, the {omitted} bytes in the middle are omitted; {where_} ...]\n"
        ));
        text.push_str(tail);
        CapturedOutput {
            text,
            total_bytes: total,
            overflow: Some(Overflow {
                omitted_bytes: omitted,
                saved_to,
            }),
        }
    }
}

/// Why a command's full output cannot be saved to a file, in words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct UnusableOutputFolder(String);

impl From<String> for UnusableOutputFolder {
    fn from(message: String) -> Self {
        UnusableOutputFolder(message)
    }
}

impl From<&str> for UnusableOutputFolder {
    fn from(message: &str) -> Self {
        UnusableOutputFolder(message.to_owned())
    }
}

/// Opens the output folder (made if missing, ignored by git), removes the
/// oldest files beyond [`RETAINED_FILES`], and creates a new file in it:
/// `<label>-<UTC time>-<random>.txt`. Returns the folder and the name.
fn open_spill_file(
    limits: &OutputLimits,
    label: &str,
) -> Result<(Folder, OsString, BufWriter<File>), UnusableOutputFolder> {
    let folder = output_folder(limits)?;
    // Best effort: the folder works without it, git just shows it.
    if let Ok(mut ignore) = folder.create_new(".gitignore", 0o666) {
        let _ = ignore.write_all(b"# envhost's saved command outputs\n*\n");
    }
    prune_old_files(&folder, RETAINED_FILES.saturating_sub(1));
    let stamp = humantime::format_rfc3339_seconds(SystemTime::now())
        .to_string()
        .replace(':', "");
    let (name, file) = folder
        .create_unique(&format!("{label}-{stamp}-"), ".txt", 0o666)
        .map_err(|e| format!("cannot create a file in {}: {e}", folder.path().display()))?;
    Ok((folder, name, BufWriter::with_capacity(256 * 1024, file)))
}

/// The output folder, made if missing: below the project, reached without
/// following a symlink.
fn output_folder(limits: &OutputLimits) -> Result<Folder, UnusableOutputFolder> {
    let dir = &limits.spill_dir;
    let cannot = |why: String| format!("cannot use the output folder {}: {why}", dir.display());
    match dir.strip_prefix(&limits.spill_root) {
        Ok(relative) if !relative.as_os_str().is_empty() => {
            Folder::beneath(&limits.spill_root, relative, Some(0o777))
                .map_err(|refusal| UnusableOutputFolder(refusal.to_string()))
        }
        _ => fs::create_dir_all(dir)
            .and_then(|()| Folder::open(dir))
            .map_err(|e| UnusableOutputFolder(cannot(e.to_string()))),
    }
}

/// Removes the oldest of the regular `*.txt` files in `folder` beyond
/// `keep`.
fn prune_old_files(folder: &Folder, keep: usize) {
    let Ok(entries) = folder.entries() else {
        return;
    };
    let mut files: Vec<(SystemTime, OsString)> = entries
        .into_iter()
        .filter(|(name, _)| Path::new(name).extension().is_some_and(|x| x == "txt"))
        .filter_map(|(name, stat)| {
            let stat = stat.filter(envhost_files::untrusted::is_regular)?;
            let since_epoch = Duration::new(
                u64::try_from(stat.st_mtime).ok()?,
                u32::try_from(stat.st_mtime_nsec).ok()?,
            );
            Some((SystemTime::UNIX_EPOCH + since_epoch, name))
        })
        .collect();
    if files.len() <= keep {
        return;
    }
    files.sort();
    for (_, name) in &files[..files.len() - keep] {
        let _ = folder.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(cap: usize, name: &str) -> OutputLimits {
        let dir =
            std::env::temp_dir().join(format!("envhost-capture-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        OutputLimits {
            cap_bytes: cap,
            spill_dir: dir,
            spill_root: std::env::temp_dir(),
            spill_limit_bytes: DEFAULT_SPILL_LIMIT_BYTES,
        }
    }

    #[test]
    fn output_under_the_cap_is_returned_whole() {
        let limits = limits(100, "under");
        let mut capture = OutputCapture::new(&limits, "bash");
        capture.push("hello ");
        capture.push("world\n");
        let out = capture.finish();
        assert_eq!(out.text, "hello world\n");
        assert_eq!(out.overflow, None);
        assert!(!limits.spill_dir.exists(), "no folder unless needed");
    }

    #[test]
    fn output_over_the_cap_keeps_head_tail_and_saves_everything() {
        let limits = limits(1000, "over");
        let mut capture = OutputCapture::new(&limits, "bash");
        let mut expected = String::new();
        for i in 0..10_000 {
            let line = format!("line {i}\n");
            expected.push_str(&line);
            capture.push(&line);
        }
        let out = capture.finish();
        assert!(out.text.starts_with("line 0\nline 1\n"));
        assert!(out.text.ends_with("line 9999\n"));
        assert!(out.text.len() < 1300, "{}", out.text.len());
        let overflow = out.overflow.clone().unwrap();
        let saved = overflow.saved_to.unwrap();
        assert_eq!(fs::read_to_string(&saved).unwrap(), expected);
        assert!(
            out.text
                .contains(&format!("{} bytes in all", expected.len()))
        );
        assert!(out.text.contains(&saved.display().to_string()));
        assert!(limits.spill_dir.join(".gitignore").exists());
        assert!(matches!(
            out.incident(),
            Some(Incident::OutputCapped { .. })
        ));
        fs::remove_dir_all(&limits.spill_dir).unwrap();
    }

    #[test]
    fn multibyte_text_is_cut_on_character_boundaries() {
        let limits = limits(11, "utf8");
        let mut capture = OutputCapture::new(&limits, "python");
        capture.push(&"é".repeat(50));
        let out = capture.finish();
        assert!(out.text.starts_with("éé\n"), "{:?}", out.text);
        assert!(out.text.ends_with("]\néé"), "{:?}", out.text);
        fs::remove_dir_all(&limits.spill_dir).unwrap();
    }

    #[test]
    fn an_unwritable_folder_is_reported_not_fatal() {
        let mut limits = limits(10, "unwritable");
        limits.spill_dir = PathBuf::from("/proc/envhost-cannot-exist/output");
        let mut capture = OutputCapture::new(&limits, "bash");
        capture.push(&"x".repeat(100));
        let out = capture.finish();
        assert!(out.text.contains("could not be saved"));
        assert_eq!(out.overflow.unwrap().saved_to, None);
    }

    #[test]
    fn old_files_are_pruned() {
        let limits = limits(4, "prune");
        for _ in 0..RETAINED_FILES + 5 {
            let mut capture = OutputCapture::new(&limits, "bash");
            capture.push("0123456789");
            capture.finish();
        }
        let count = fs::read_dir(&limits.spill_dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "txt")
            })
            .count();
        assert_eq!(count, RETAINED_FILES);
        fs::remove_dir_all(&limits.spill_dir).unwrap();
    }

    #[test]
    fn a_spill_folder_reached_through_a_symlink_is_neither_written_nor_pruned() {
        let root = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        for n in 0..RETAINED_FILES + 5 {
            fs::write(elsewhere.path().join(format!("{n}.txt")), "mine").unwrap();
        }
        std::os::unix::fs::symlink(elsewhere.path(), root.path().join("link")).unwrap();
        let limits = OutputLimits {
            cap_bytes: 10,
            spill_dir: root.path().join("link/output"),
            spill_root: root.path().to_owned(),
            spill_limit_bytes: DEFAULT_SPILL_LIMIT_BYTES,
        };
        let mut capture = OutputCapture::new(&limits, "bash");
        capture.push(&"x".repeat(100));
        let out = capture.finish();
        assert!(out.text.contains("could not be saved"), "{}", out.text);
        assert!(out.text.contains("lies behind the symlink"), "{}", out.text);
        assert_eq!(
            fs::read_dir(elsewhere.path()).unwrap().count(),
            RETAINED_FILES + 5
        );
    }

    #[test]
    fn saved_files_get_names_nobody_can_plant_in_advance() {
        let limits = limits(10, "names");
        let mut names = Vec::new();
        for _ in 0..2 {
            let mut capture = OutputCapture::new(&limits, "bash");
            capture.push(&"x".repeat(100));
            let saved = capture.finish().overflow.unwrap().saved_to.unwrap();
            names.push(saved.file_name().unwrap().to_string_lossy().into_owned());
        }
        // `bash-<time>-<16 random hex digits>.txt`
        for name in &names {
            let random = name.trim_end_matches(".txt").rsplit('-').next().unwrap();
            assert_eq!(random.len(), 16, "{name}");
            assert!(random.bytes().all(|b| b.is_ascii_hexdigit()), "{name}");
        }
        assert_ne!(names[0], names[1]);
        fs::remove_dir_all(&limits.spill_dir).unwrap();
    }
}
