//! The REPL's history: where it is kept across sessions, and how Up and
//! Down walk it.
//!
//! Every entry is kept as typed (`bash: ls`, a whole python block) in one
//! file, `$XDG_STATE_HOME/envhost/history` (else
//! `~/.local/state/envhost/history`), readable by its owner only; a line
//! typed with a leading space is not kept. Up recalls the entries that
//! start like what is typed: on an empty line every entry, after `py` the
//! ones starting `py`, and after `python:` (or `python: imp`) only python
//! commands (starting `imp`) — so each environment's commands are walked
//! apart from the others'. Down walks back, and past the newest entry
//! brings back what was typed.
//!
//! This module must not know the terminal; the line editor calls it.

use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::entry::{Entry, parse_entry};

/// How many entries are kept.
pub const MAX_ENTRIES: usize = 5000;

/// The history file for this user, if there is a place for it.
pub fn file() -> Option<PathBuf> {
    let state = match std::env::var_os("XDG_STATE_HOME").map(PathBuf::from) {
        // The XDG rule: a relative path is invalid and ignored.
        Some(state) if state.is_absolute() => state,
        _ => {
            let home = PathBuf::from(std::env::var_os("HOME")?);
            // A relative HOME would put the history wherever the REPL was
            // started (inside a project, say); no history is better.
            if !home.is_absolute() {
                return None;
            }
            home.join(".local/state")
        }
    };
    Some(state.join("envhost").join("history"))
}

/// Creates the history's folder and file, private to their owner (a
/// history holds whatever was typed, secrets included).
pub fn prepare(path: &Path) -> io::Result<()> {
    if let Some(folder) = path.parent() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(folder)?;
    }
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)?;
    let permissions = file.metadata()?.permissions();
    if permissions.mode() & 0o077 != 0 {
        file.set_permissions(fs::Permissions::from_mode(0o600))?;
    }
    Ok(())
}

/// Whether an entry is kept (one typed with a leading space is not).
pub fn keeps(entry: &str) -> bool {
    !entry.trim().is_empty() && !entry.starts_with(' ')
}

/// Up and Down over the entries (see the module's rule).
#[derive(Debug, Default)]
pub struct Walk {
    entries: Vec<String>,
    at: Option<Position>,
}

#[derive(Debug)]
struct Position {
    /// What was typed when the walk began.
    typed: String,
    /// The entry shown.
    index: usize,
}

impl Walk {
    /// A walk over `entries`, oldest first.
    pub fn new(entries: Vec<String>) -> Self {
        Walk { entries, at: None }
    }

    /// Adds an entry just run (not twice in a row); ends any walk.
    pub fn add(&mut self, entry: &str) {
        self.at = None;
        if keeps(entry) && self.entries.last().is_none_or(|last| last != entry) {
            self.entries.push(entry.to_owned());
            if self.entries.len() > MAX_ENTRIES {
                self.entries.remove(0);
            }
        }
    }

    /// The older entry to show in place of `buffer`, if any.
    pub fn older(&mut self, buffer: &str) -> Option<String> {
        let (typed, from) = self.resume(buffer);
        let shown = from.map(|index| self.entries[index].clone());
        let found = (0..from.unwrap_or(self.entries.len())).rev().find(|&i| {
            recalls(&self.entries[i], &typed) && Some(&self.entries[i]) != shown.as_ref()
        });
        match found {
            Some(index) => {
                self.at = Some(Position { typed, index });
                Some(self.entries[index].clone())
            }
            None => {
                // The oldest is shown: the walk stays there.
                if let Some(index) = from {
                    self.at = Some(Position { typed, index });
                }
                None
            }
        }
    }

    /// The newer entry to show in place of `buffer`; past the newest,
    /// what was typed. `None` when no walk is under way.
    pub fn newer(&mut self, buffer: &str) -> Option<String> {
        let (typed, from) = self.resume(buffer);
        let from = from?;
        let shown = self.entries[from].as_str();
        match (from + 1..self.entries.len())
            .find(|&i| recalls(&self.entries[i], &typed) && self.entries[i] != shown)
        {
            Some(index) => {
                self.at = Some(Position { typed, index });
                Some(self.entries[index].clone())
            }
            None => {
                self.at = None;
                Some(typed)
            }
        }
    }

    /// The walk under way if `buffer` still shows its entry, else a new
    /// one from `buffer`.
    fn resume(&mut self, buffer: &str) -> (String, Option<usize>) {
        match self.at.take() {
            Some(at) if self.entries.get(at.index).is_some_and(|e| e == buffer) => {
                (at.typed, Some(at.index))
            }
            _ => (buffer.to_owned(), None),
        }
    }
}

/// Whether Up recalls `entry` for what was `typed`: an environment's
/// command after `ENV:`, else an entry starting with the typed text.
fn recalls(entry: &str, typed: &str) -> bool {
    if typed.trim().is_empty() {
        return true;
    }
    let first_line = |text: &str| text.split('\n').next().unwrap_or("").to_owned();
    match parse_entry(&first_line(typed)) {
        Entry::Command {
            environment,
            command,
        } if !typed.contains('\n') => match parse_entry(&first_line(entry)) {
            Entry::Command {
                environment: theirs,
                command: their_command,
            } => {
                theirs == environment
                    && their_command.trim_start().starts_with(command.trim_start())
            }
            _ => false,
        },
        Entry::StartBlock { environment } if !typed.contains('\n') => {
            match parse_entry(&first_line(entry)) {
                Entry::Command {
                    environment: theirs,
                    ..
                }
                | Entry::StartBlock {
                    environment: theirs,
                } => theirs == environment,
                _ => false,
            }
        }
        _ => entry.starts_with(typed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk() -> Walk {
        Walk::new(
            [
                "bash: ls",
                "python: import os",
                "bash:cd src",
                "python: def f():\n    return 1\n",
                "editor: view a.py",
                "python: x = 1",
            ]
            .map(String::from)
            .to_vec(),
        )
    }

    #[test]
    fn up_on_an_empty_line_walks_everything_and_down_comes_back() {
        let mut walk = walk();
        assert_eq!(walk.older("").unwrap(), "python: x = 1");
        assert_eq!(walk.older("python: x = 1").unwrap(), "editor: view a.py");
        assert_eq!(walk.newer("editor: view a.py").unwrap(), "python: x = 1");
        assert_eq!(walk.newer("python: x = 1").unwrap(), "");
        assert_eq!(walk.newer(""), None);
    }

    #[test]
    fn up_after_an_environment_walks_only_its_commands() {
        let mut walk = walk();
        assert_eq!(walk.older("python:").unwrap(), "python: x = 1");
        assert_eq!(
            walk.older("python: x = 1").unwrap(),
            "python: def f():\n    return 1\n"
        );
        assert_eq!(
            walk.older("python: def f():\n    return 1\n").unwrap(),
            "python: import os"
        );
        assert_eq!(walk.older("python: import os"), None);
        // Down past the newest brings back what was typed.
        assert_eq!(
            walk.newer("python: import os").unwrap(),
            "python: def f():\n    return 1\n"
        );
        assert_eq!(
            walk.newer("python: def f():\n    return 1\n").unwrap(),
            "python: x = 1"
        );
        assert_eq!(walk.newer("python: x = 1").unwrap(), "python:");

        // With a command begun, and without the space after the colon.
        let mut walk = self::walk();
        assert_eq!(walk.older("bash: cd").unwrap(), "bash:cd src");
        assert_eq!(walk.older("bash:cd src"), None);
        assert_eq!(walk.older("py").unwrap(), "python: x = 1");
    }

    #[test]
    fn editing_a_recalled_entry_starts_a_new_walk() {
        let mut walk = walk();
        assert_eq!(walk.older("").unwrap(), "python: x = 1");
        // The person edits it into "bash: l": a new walk, for bash.
        assert_eq!(walk.older("bash: l").unwrap(), "bash: ls");
        walk.add("bash: ls -la");
        walk.add("bash: ls -la");
        walk.add(" bash: echo secret");
        assert_eq!(walk.older("").unwrap(), "bash: ls -la");
        assert_eq!(walk.older("bash: ls -la").unwrap(), "python: x = 1");
    }

    #[test]
    fn the_file_is_private_and_under_the_state_folder() {
        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("state/envhost/history");
        prepare(&path).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        prepare(&path).unwrap();
        assert_eq!(mode(&path), 0o600);
    }
}
