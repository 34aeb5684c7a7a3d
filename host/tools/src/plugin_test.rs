//! `envhost test FILE.wasm SESSION...`: a plugin's regression tests, in
//! any language: each session file (`session_file`) runs against a fresh
//! instance of the plugin, loaded and called as `envhost call` does, and
//! every answer is compared with its expected block. A mismatch prints a
//! unified diff naming the file and line; `--bless` writes what the plugin
//! said into the blocks that differ (atomically: a temporary file renamed
//! over the session file).
//!
//! It must not know how a plugin is loaded or called (`call::Runner`) nor
//! the file syntax (`session_file`).

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::call::{Runner, RunnerError, Target};
use crate::session_file::{Answer, SessionFile};

/// What `envhost test` runs.
pub struct TestArgs {
    /// The plugin file; the environment is named after its stem.
    pub file: PathBuf,

    /// The session files (`.session`) to run, each on a fresh instance.
    pub sessions: Vec<PathBuf>,

    /// Rewrite the expected blocks that differ with what the plugin said.
    pub bless: bool,

    /// Which plugin, granted what, in which project.
    pub target: Target,
}

/// How one session file went.
enum Verdict {
    Passed,
    Blessed(usize),
    Failed,
}

/// `envhost test`: 0 when every session passes (or was blessed), 1
/// otherwise.
pub fn run(args: TestArgs) -> ExitCode {
    let mut out = io::stdout().lock();
    let mut failed = 0;
    for session in &args.sessions {
        let verdict = match run_session(&args, session, &mut out) {
            Ok(verdict) => verdict,
            Err(err) => {
                let _ = writeln!(out, "{}: error: {err:#}", session.display());
                Verdict::Failed
            }
        };
        let said = match verdict {
            Verdict::Passed => "ok".to_owned(),
            Verdict::Blessed(0) => "ok".to_owned(),
            Verdict::Blessed(count) => format!(
                "blessed ({count} block{} rewritten)",
                if count == 1 { "" } else { "s" }
            ),
            Verdict::Failed => {
                failed += 1;
                "FAILED".to_owned()
            }
        };
        let _ = writeln!(out, "{}: {said}", session.display());
    }
    let total = args.sessions.len();
    let _ = writeln!(
        out,
        "\n{} of {total} session{} passed",
        total - failed,
        if total == 1 { "" } else { "s" }
    );
    let _ = out.flush();
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Why a session file could not be run or rewritten (a session whose
/// answers differ is a verdict, not an error).
#[derive(Debug, thiserror::Error)]
pub enum PluginTestError {
    /// The session file is unreadable.
    #[error("cannot read the session file: {0}")]
    Read(io::Error),
    /// The session file is not in the format.
    #[error("{shown}:{line}: {message} (see docs/plugin-tools.md for the format)")]
    Parse {
        /// The file, as shown.
        shown: String,
        /// Its line.
        line: usize,
        /// What is wrong there.
        message: String,
    },
    /// The host could not start (the project, the containment).
    #[error(transparent)]
    Start(#[from] envhost_runtime::StartError),
    /// The plugin was refused.
    #[error("the plugin was refused: {0}")]
    Refused(String),
    /// The diff could not be written out.
    #[error("cannot write the report: {0}")]
    Report(io::Error),
    /// No temporary file beside the session file.
    #[error("cannot write beside {}: {source}", path.display())]
    Beside {
        /// The session file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The blessed session file could not be written or renamed into place.
    #[error("cannot rewrite {}: {source}", path.display())]
    Rewrite {
        /// The session file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

fn run_session(
    args: &TestArgs,
    path: &Path,
    out: &mut dyn Write,
) -> Result<Verdict, PluginTestError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(PluginTestError::Read)?;
    let file = SessionFile::parse(&text).map_err(|err| PluginTestError::Parse {
        shown: shown.clone(),
        line: err.line,
        message: err.message.clone(),
    })?;
    let runner = Runner::start(&args.file, &args.target).map_err(|err| match err {
        RunnerError::Start(err) => PluginTestError::Start(err),
        RunnerError::Refused(reason) => PluginTestError::Refused(reason),
    })?;
    let mut differing: Vec<(usize, Answer)> = Vec::new();
    for (index, step) in file.steps.iter().enumerate() {
        let answer = runner.run(&step.action);
        if !step.expected.matches(&answer) {
            if !args.bless {
                writeln!(
                    out,
                    "{}",
                    crate::session_file::diff(&file, step, &answer, &shown)
                )
                .map_err(PluginTestError::Report)?;
            }
            differing.push((index, answer));
        }
    }
    drop(runner);
    if differing.is_empty() {
        return Ok(Verdict::Passed);
    }
    if !args.bless {
        return Ok(Verdict::Failed);
    }
    let answers: Vec<(usize, &Answer)> = differing.iter().map(|(i, a)| (*i, a)).collect();
    write_atomically(path, &file.blessed(&answers))?;
    Ok(Verdict::Blessed(differing.len()))
}

fn write_atomically(path: &Path, text: &str) -> Result<(), PluginTestError> {
    let folder = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut temporary =
        tempfile::NamedTempFile::new_in(folder).map_err(|source| PluginTestError::Beside {
            path: path.to_owned(),
            source,
        })?;
    let rewrite = |source| PluginTestError::Rewrite {
        path: path.to_owned(),
        source,
    };
    temporary.write_all(text.as_bytes()).map_err(rewrite)?;
    if let Ok(metadata) = std::fs::metadata(path) {
        temporary
            .as_file()
            .set_permissions(metadata.permissions())
            .map_err(rewrite)?;
    }
    temporary.persist(path).map_err(|err| rewrite(err.error))?;
    Ok(())
}
