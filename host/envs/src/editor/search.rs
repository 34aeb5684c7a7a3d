//! `search "<pattern>" <glob>`: every line of the project's files that
//! matches, as `path:line: text`, in path order, capped.
//!
//! This module owns which files are searched (the project's files, `.git`
//! and the host's own `.envhost` folder never, `.gitignore`d files and
//! well-known dependency/cache folders not, binary files skipped), glob
//! semantics (a glob without `/` matches a file name in any folder; with
//! `/` it matches the path from the project root; `**` spans folders), the
//! cap and its "N more" note, and stopping at the command's deadline. The
//! walk is ripgrep's (`ignore`, parallel) and so is the line search
//! (`grep-searcher`); the ignore files are read by [`IgnoreFiles`], and
//! each file is opened as a hostile one (a FIFO or a symlink swapped in
//! during the walk is refused, never waited on) and searched with a bound on
//! the longest line held. It must not know about views.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use grep_regex::RegexMatcher;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use ignore::{WalkBuilder, WalkState};

use super::ignore_files::IgnoreFiles;
use super::patterns::LinePattern;
use envhost_core::CancelFlag;
use envhost_files::{Folder, ProjectRoot};

/// The most memory the searcher holds for one file's lines: a file with a
/// longer line (a gigabyte of text with no newline) is not read further.
const MAX_LINE_BUFFER: usize = 64 << 20;

/// Matches listed in a response; the rest are counted.
pub const MAX_SHOWN_MATCHES: usize = 100;

/// Longest text shown for one matching line.
const MAX_MATCH_CHARS: usize = 300;

/// Folders never searched: version control, the host's own files, and
/// dependency or cache folders that are not the project's code (even when
/// no `.gitignore` says so). Name one in the glob's folder part
/// (`node_modules/pkg/*.js`) to search inside it.
pub const SKIPPED_FOLDERS: [&str; 6] = [
    ".git",
    ".hg",
    ".svn",
    ".envhost",
    "node_modules",
    "__pycache__",
];

/// What a search asks for.
pub struct Query<'a> {
    pub pattern: &'a LinePattern,
    pub globs: &'a [String],
}

/// Why a search stopped before the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    Deadline,
    Cancelled,
}

/// The outcome of a search.
#[derive(Debug, Default)]
pub struct Report {
    /// The first [`MAX_SHOWN_MATCHES`] matches in path order.
    pub shown: Vec<Hit>,
    pub total_matches: usize,
    pub files_with_matches: usize,
    pub files_searched: usize,
    pub binary_files: usize,
    pub unreadable_files: usize,
    /// Why ignore files could not be read (their patterns were not applied).
    pub ignore_files_refused: Vec<String>,
    pub stopped: Option<Stopped>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    pub path: String,
    pub line: u64,
    pub text: String,
}

/// Which files a set of globs selects, and where to start walking.
struct FileFilter {
    walk_root: PathBuf,
    by_name: GlobSet,
    by_path: GlobSet,
    any: bool,
}

impl FileFilter {
    fn new(root: &ProjectRoot, globs: &[String]) -> Result<Self, SearchRefused> {
        let mut by_name = GlobSetBuilder::new();
        let mut by_path = GlobSetBuilder::new();
        let mut prefixes = Vec::new();
        for written in globs {
            let mut glob = written.trim_start_matches("./").to_owned();
            if glob.starts_with('/') {
                return Err(SearchRefused::BadGlob(format!(
                    "the glob {written} is absolute; globs are relative to the project, e.g. src/**/*.py"
                )));
            }
            if Path::new(&glob)
                .components()
                .any(|c| c == std::path::Component::ParentDir)
            {
                return Err(SearchRefused::BadGlob(format!(
                    "the glob {written} leaves the project with `..`; search only looks inside the project"
                )));
            }
            let literal = !glob.contains(['*', '?', '[', '{']);
            if literal && !glob.is_empty() && root.path().join(&glob).is_dir() {
                glob = format!("{}/**", glob.trim_end_matches('/'));
            }
            let compiled = GlobBuilder::new(&glob)
                .literal_separator(true)
                .build()
                .map_err(|e| SearchRefused::BadGlob(format!("invalid glob {written}: {e}")))?;
            if glob.contains('/') {
                by_path.add(compiled);
                prefixes.push(literal_folder(&glob));
            } else {
                by_name.add(compiled);
                prefixes.push(String::new());
            }
        }
        // Walk from the folder every glob lies under (the project root
        // unless all globs name one folder).
        let common = match prefixes.split_first() {
            Some((first, rest)) if rest.iter().all(|p| p == first) => first.clone(),
            _ => String::new(),
        };
        let walk_root = if common.is_empty() {
            root.path().to_path_buf()
        } else {
            let resolved = root.resolve(&common).map_err(SearchRefused::Folder)?;
            resolved.real
        };
        Ok(FileFilter {
            walk_root,
            by_name: by_name
                .build()
                .map_err(|e| SearchRefused::BadGlob(e.to_string()))?,
            by_path: by_path
                .build()
                .map_err(|e| SearchRefused::BadGlob(e.to_string()))?,
            any: globs.is_empty(),
        })
    }

    fn selects(&self, relative: &Path) -> bool {
        if self.any {
            return true;
        }
        let name_matches = relative
            .file_name()
            .is_some_and(|name| self.by_name.is_match(name));
        name_matches || self.by_path.is_match(relative)
    }
}

/// The folder part of a glob before its first wildcard: `src/app` for
/// `src/app/**/*.py`.
fn literal_folder(glob: &str) -> String {
    let parts: Vec<&str> = glob.split('/').collect();
    let literal: Vec<&str> = parts[..parts.len() - 1]
        .iter()
        .take_while(|part| !part.contains(['*', '?', '[', '{']))
        .copied()
        .collect();
    literal.join("/")
}

/// The first matches in path order, bounded in memory however many there
/// are: files that sort after the first [`MAX_SHOWN_MATCHES`] are dropped.
#[derive(Default)]
struct Collected {
    kept: BTreeMap<String, Vec<(u64, String)>>,
    kept_count: usize,
    total_matches: usize,
    files_with_matches: usize,
}

impl Collected {
    fn add(&mut self, path: String, hits: Vec<(u64, String)>, count: usize) {
        self.total_matches += count;
        self.files_with_matches += 1;
        self.kept_count += hits.len();
        self.kept.insert(path, hits);
        while let Some(entry) = self.kept.last_entry() {
            let last = entry.get().len();
            if self.kept_count - last < MAX_SHOWN_MATCHES {
                break;
            }
            self.kept_count -= last;
            entry.remove();
        }
    }
}

/// One file's matches, as the searcher reports them.
struct FileSink {
    hits: Vec<(u64, String)>,
    count: usize,
    binary: bool,
}

impl Sink for FileSink {
    type Error = io::Error;

    fn matched(&mut self, _searcher: &Searcher, found: &SinkMatch<'_>) -> Result<bool, io::Error> {
        self.count += 1;
        if self.hits.len() < MAX_SHOWN_MATCHES {
            let text = String::from_utf8_lossy(found.bytes());
            self.hits
                .push((found.line_number().unwrap_or(0), shorten(text.trim_end())));
        }
        Ok(true)
    }

    fn binary_data(&mut self, _searcher: &Searcher, _offset: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}

fn shorten(text: &str) -> String {
    match text.char_indices().nth(MAX_MATCH_CHARS) {
        None => text.to_owned(),
        Some((cut, _)) => format!("{}…", &text[..cut]),
    }
}

/// Why a search cannot start.
#[derive(Debug, thiserror::Error)]
pub enum SearchRefused {
    /// A glob that is absolute, leaves the project or does not parse.
    #[error("{0}")]
    BadGlob(String),
    /// The folder every glob names cannot be resolved inside the project.
    #[error("{0}")]
    Folder(envhost_files::PathError),
    /// The project folder cannot be opened.
    #[error("the project folder cannot be opened: {0}")]
    ProjectUnopenable(io::Error),
}

/// Runs a search over the project; stops (with what it found so far) at
/// `deadline` or when `cancel` is set.
pub fn run(
    root: &ProjectRoot,
    query: &Query<'_>,
    deadline: Instant,
    cancel: &CancelFlag,
) -> Result<Report, SearchRefused> {
    let filter = FileFilter::new(root, query.globs)?;
    let project = root.path().to_path_buf();
    let open_root = || Folder::open(&project).map_err(SearchRefused::ProjectUnopenable);
    let root_folder = open_root()?;
    let ignore_files = Arc::new(IgnoreFiles::new(open_root()?));
    let tally = Tally::default();
    let walk = Walk {
        filter: &filter,
        project: &project,
        root_folder: &root_folder,
        deadline,
        cancel,
        tally: &tally,
    };
    let matcher: &RegexMatcher = query.pattern.matcher();
    walker(&filter.walk_root, Arc::clone(&ignore_files))
        .build_parallel()
        .run(|| {
            let mut searcher = SearcherBuilder::new()
                .line_number(true)
                .binary_detection(BinaryDetection::quit(0))
                .heap_limit(Some(MAX_LINE_BUFFER))
                .build();
            let matcher = matcher.clone();
            let walk = &walk;
            Box::new(move |entry| walk.visit(&mut searcher, &matcher, entry))
        });
    Ok(tally.report(ignore_files.refused()))
}

/// The parallel walk from `walk_root`: hidden files included, links not
/// followed, skipped folders and ignored files left out.
fn walker(walk_root: &Path, skips: Arc<IgnoreFiles>) -> WalkBuilder {
    let mut builder = WalkBuilder::new(walk_root);
    builder
        .hidden(false)
        // Read by `IgnoreFiles` instead, as hostile files.
        .ignore(false)
        .git_ignore(false)
        .git_exclude(false)
        .git_global(false)
        .parents(false)
        .require_git(false)
        .follow_links(false)
        .threads(
            std::thread::available_parallelism()
                .map_or(2, |n| n.get())
                .min(8),
        )
        .filter_entry(move |entry| {
            if entry.depth() == 0 {
                return true;
            }
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            let skipped_folder = is_dir
                && entry
                    .file_name()
                    .to_str()
                    .is_some_and(|name| SKIPPED_FOLDERS.contains(&name));
            !skipped_folder && !skips.ignored(entry.path(), is_dir)
        });
    builder
}

/// What the walk's threads add up.
#[derive(Default)]
struct Tally {
    collected: Mutex<Collected>,
    files_searched: AtomicUsize,
    binary_files: AtomicUsize,
    unreadable_files: AtomicUsize,
    deadline_hit: AtomicBool,
    cancelled: AtomicBool,
}

impl Tally {
    fn unreadable(&self) -> WalkState {
        self.unreadable_files.fetch_add(1, Ordering::Relaxed);
        WalkState::Continue
    }

    /// The report of the whole walk.
    fn report(self, ignore_files_refused: Vec<String>) -> Report {
        let collected = self
            .collected
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let shown = collected
            .kept
            .into_iter()
            .flat_map(|(path, hits)| {
                hits.into_iter().map(move |(line, text)| Hit {
                    path: path.clone(),
                    line,
                    text,
                })
            })
            .take(MAX_SHOWN_MATCHES)
            .collect();
        let stopped = if self.cancelled.into_inner() {
            Some(Stopped::Cancelled)
        } else if self.deadline_hit.into_inner() {
            Some(Stopped::Deadline)
        } else {
            None
        };
        Report {
            shown,
            total_matches: collected.total_matches,
            files_with_matches: collected.files_with_matches,
            files_searched: self.files_searched.into_inner(),
            binary_files: self.binary_files.into_inner(),
            unreadable_files: self.unreadable_files.into_inner(),
            ignore_files_refused,
            stopped,
        }
    }
}

/// One search's fixed inputs, shared by the walk's threads.
struct Walk<'a> {
    filter: &'a FileFilter,
    project: &'a Path,
    root_folder: &'a Folder,
    deadline: Instant,
    cancel: &'a CancelFlag,
    tally: &'a Tally,
}

impl Walk<'_> {
    /// Searches one entry the walk found, if it is a selected file; stops
    /// the walk when cancelled or past the deadline.
    fn visit(
        &self,
        searcher: &mut Searcher,
        matcher: &RegexMatcher,
        entry: Result<ignore::DirEntry, ignore::Error>,
    ) -> WalkState {
        let tally = self.tally;
        if self.cancel.is_cancelled() {
            tally.cancelled.store(true, Ordering::Relaxed);
            return WalkState::Quit;
        }
        if Instant::now() >= self.deadline {
            tally.deadline_hit.store(true, Ordering::Relaxed);
            return WalkState::Quit;
        }
        let Ok(entry) = entry else {
            return tally.unreadable();
        };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            return WalkState::Continue;
        }
        let path = entry.path();
        let relative = path.strip_prefix(self.project).unwrap_or(path);
        if !self.filter.selects(relative) {
            return WalkState::Continue;
        }
        tally.files_searched.fetch_add(1, Ordering::Relaxed);
        let mut sink = FileSink {
            hits: Vec::new(),
            count: 0,
            binary: false,
        };
        // Swapped since the walk listed it: refused, never waited on.
        let Ok(opened) = self.root_folder.open_within(path) else {
            return tally.unreadable();
        };
        if searcher
            .search_file(matcher, opened.file(), &mut sink)
            .is_err()
        {
            return tally.unreadable();
        }
        if sink.binary {
            tally.binary_files.fetch_add(1, Ordering::Relaxed);
            return WalkState::Continue;
        }
        if sink.count > 0 {
            let shown_path = relative_display(relative);
            if let Ok(mut collected) = tally.collected.lock() {
                collected.add(shown_path, sink.hits, sink.count);
            }
        }
        WalkState::Continue
    }
}

fn relative_display(relative: &Path) -> String {
    relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

impl Report {
    /// The response text: the `Matches:` list, then what was left
    /// out and why.
    pub fn render(&self, pattern: &str, globs: &[String]) -> String {
        let scope = if globs.is_empty() {
            "the project's files".to_owned()
        } else {
            format!("files matching {}", globs.join(" "))
        };
        let mut out = String::new();
        if self.shown.is_empty() {
            if self.files_searched == 0 && self.stopped.is_none() {
                let _ = write!(
                    out,
                    "No files match {}. A glob without / matches file names in every folder (*.py); with / it matches paths from the project root (src/**/*.py). Ignored files (.gitignore) and {} are not searched.",
                    globs.join(" "),
                    SKIPPED_FOLDERS.join(", ")
                );
            } else {
                let _ = write!(
                    out,
                    "No matches for /{pattern}/ in {} ({} searched).",
                    scope,
                    count(self.files_searched, "file")
                );
            }
        } else {
            out.push_str("Matches:\n");
            for hit in &self.shown {
                let _ = writeln!(out, "  {}:{}: {}", hit.path, hit.line, hit.text);
            }
            let hidden = self.total_matches.saturating_sub(self.shown.len());
            if hidden > 0 {
                let _ = writeln!(
                    out,
                    "... and {hidden} more {} ({} in {} in all); narrow the pattern or the glob to see them.",
                    if hidden == 1 { "match" } else { "matches" },
                    count(self.total_matches, "match"),
                    count(self.files_with_matches, "file")
                );
            }
        }
        let mut notes = Vec::new();
        if self.binary_files > 0 {
            notes.push(format!(
                "skipped {}",
                count(self.binary_files, "binary file")
            ));
        }
        if self.unreadable_files > 0 {
            notes.push(format!(
                "could not read {}",
                count(self.unreadable_files, "file")
            ));
        }
        if !self.ignore_files_refused.is_empty() {
            notes.push(format!(
                "ignore files not read, so what they list was searched too: {}",
                self.ignore_files_refused.join("; ")
            ));
        }
        if !notes.is_empty() {
            if !out.ends_with('\n') {
                out.push('\n');
            }
            let _ = writeln!(out, "({})", notes.join("; "));
        }
        match self.stopped {
            Some(Stopped::Deadline) => {
                if !out.ends_with('\n') {
                    out.push('\n');
                }
                out.push_str("[search stopped at the command's timeout: the results above are partial; narrow the glob or raise timeout_ms]\n");
            }
            Some(Stopped::Cancelled) => {
                if !out.ends_with('\n') {
                    out.push('\n');
                }
                out.push_str("[search interrupted: the results above are partial]\n");
            }
            None => {}
        }
        out.trim_end().to_owned()
    }
}

fn count(n: usize, noun: &str) -> String {
    let plural = if n == 1 {
        noun.to_owned()
    } else if noun.ends_with("ch") {
        format!("{noun}es")
    } else {
        format!("{noun}s")
    };
    format!("{n} {plural}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collected_keeps_the_first_matches_in_path_order() {
        let mut collected = Collected::default();
        let hits = |n: usize| {
            (1..=n as u64)
                .map(|l| (l, String::new()))
                .collect::<Vec<_>>()
        };
        collected.add("z.txt".into(), hits(80), 80);
        collected.add("m.txt".into(), hits(80), 80);
        collected.add("a.txt".into(), hits(30), 30);
        // a (30) + m (80) already make 100: z can go.
        assert_eq!(
            collected.kept.keys().collect::<Vec<_>>(),
            ["a.txt", "m.txt"]
        );
        assert_eq!(collected.total_matches, 190);
        assert_eq!(collected.files_with_matches, 3);
    }

    fn small_project() -> (tempfile::TempDir, ProjectRoot) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for n in 0..20 {
            std::fs::write(root.join(format!("f{n}.txt")), "needle\n").unwrap();
        }
        (dir, ProjectRoot::new(root, false))
    }

    #[test]
    fn a_passed_deadline_or_a_cancel_stops_the_search() {
        let (_dir, root) = small_project();
        let pattern = LinePattern::compile("needle").unwrap();
        let query = Query {
            pattern: &pattern,
            globs: &[],
        };
        let complete = run(
            &root,
            &query,
            Instant::now() + std::time::Duration::from_secs(60),
            &CancelFlag::new(),
        )
        .unwrap();
        assert_eq!((complete.total_matches, complete.stopped), (20, None));

        let late = run(&root, &query, Instant::now(), &CancelFlag::new()).unwrap();
        assert_eq!(late.stopped, Some(Stopped::Deadline));
        assert!(
            late.render("needle", &[])
                .contains("[search stopped at the command's timeout")
        );

        let cancel = CancelFlag::new();
        cancel.cancel();
        let interrupted = run(
            &root,
            &query,
            Instant::now() + std::time::Duration::from_secs(60),
            &cancel,
        )
        .unwrap();
        assert_eq!(interrupted.stopped, Some(Stopped::Cancelled));
        assert_eq!(interrupted.total_matches, 0);
    }

    #[test]
    fn globs_that_leave_the_project_are_refused() {
        let (_dir, root) = small_project();
        let pattern = LinePattern::compile("needle").unwrap();
        for glob in ["../*.txt", "/etc/*"] {
            let globs = [glob.to_owned()];
            let query = Query {
                pattern: &pattern,
                globs: &globs,
            };
            let err = run(
                &root,
                &query,
                Instant::now() + std::time::Duration::from_secs(60),
                &CancelFlag::new(),
            )
            .unwrap_err();
            assert!(err.to_string().contains("project"), "{err}");
        }
    }

    #[test]
    fn glob_folders() {
        assert_eq!(literal_folder("src/app/**/*.py"), "src/app");
        assert_eq!(literal_folder("src/*.py"), "src");
        assert_eq!(literal_folder("*/x.py"), "");
    }

    #[test]
    fn counts_read_naturally() {
        assert_eq!(count(1, "match"), "1 match");
        assert_eq!(count(2, "match"), "2 matches");
        assert_eq!(count(3, "binary file"), "3 binary files");
    }
}
