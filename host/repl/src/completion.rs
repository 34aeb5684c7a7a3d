//! What Tab completes at the REPL's prompt:
//!
//! - at the start of a line, an environment's name (`ba` → `bash: `) or one
//!   of the REPL's `:` commands, and after `:wait`, `:interrupt` and
//!   `:restart`, an environment's name; the named instances open now
//!   (`bash:server`) complete wherever an environment's name does, and
//!   after `bash:`;
//! - after `ENV:`, the names of the commands the environment describes
//!   (the editor's and plugins', from the same descriptions the help is
//!   rendered from);
//! - where a described command takes a file (a parameter named like
//!   `<file>`, `<path>`, `<dir>` or `<glob>` in its signature), a path in
//!   the project: relative to the project's folder, folders ending in `/`.
//!
//! Names holding control characters (a hostile file name or plugin) are
//! never offered: they would be printed to the terminal. This module must
//! not know the terminal; the line editor calls it.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use envhost_core::Usage;

use super::entry::META_COMMANDS;

/// Most candidates listed for one Tab.
const MAX_CANDIDATES: usize = 500;

/// One way to complete the word under the cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// What the list shows.
    pub display: String,
    /// What replaces the word.
    pub replacement: String,
}

/// A described command: its name and its parameters as its signature
/// writes them (`<file>`, `/<start>/`, `[label]`).
#[derive(Debug, Clone)]
struct Shape {
    name: String,
    parameters: Vec<String>,
}

/// The named instances open now (`bash:server`): the REPL updates it
/// after every answer, completion reads it.
pub type LiveInstances = Arc<Mutex<Vec<String>>>;

/// What can be completed, gathered once at start (and the live instances).
#[derive(Debug, Clone, Default)]
pub struct Completions {
    environments: Vec<String>,
    /// The kinds that have named instances (bash, python).
    kinds: Vec<String>,
    instances: LiveInstances,
    commands: HashMap<String, Vec<Shape>>,
    project: PathBuf,
}

impl Completions {
    /// Completions for these environments (in display order) in `project`.
    pub fn new<'a>(
        environments: impl IntoIterator<Item = (&'a str, Option<&'a Usage>)>,
        project: &Path,
    ) -> Self {
        let mut names = Vec::new();
        let mut commands = HashMap::new();
        for (name, usage) in environments {
            names.push(name.to_owned());
            let shapes = usage
                .map(|usage| {
                    usage
                        .commands
                        .iter()
                        .filter(|spec| printable(spec.name()))
                        .map(|spec| Shape {
                            name: spec.name().to_owned(),
                            parameters: spec
                                .signature
                                .split_whitespace()
                                .skip(1)
                                .map(str::to_owned)
                                .collect(),
                        })
                        .collect()
                })
                .unwrap_or_default();
            commands.insert(name.to_owned(), shapes);
        }
        Completions {
            environments: names,
            kinds: Vec::new(),
            instances: LiveInstances::default(),
            commands,
            project: project.to_owned(),
        }
    }

    /// The same, completing also the instances of `kinds` listed in
    /// `instances` as they come and go.
    pub fn with_instances(mut self, kinds: &[String], instances: LiveInstances) -> Self {
        self.kinds = kinds.to_vec();
        self.instances = instances;
        self
    }

    /// Every name an environment goes by now: the environments, then the
    /// open instances.
    fn names(&self) -> Vec<String> {
        let live = self
            .instances
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let mut names = self.environments.clone();
        names.extend(live.into_iter().filter(|name| printable(name)));
        names
    }

    /// Where the completed word starts in `line` and its candidates, for
    /// the cursor at byte `pos`.
    pub fn complete(&self, line: &str, pos: usize) -> (usize, Vec<Candidate>) {
        let before = &line[..pos];
        // Only the first line of a block holds names.
        if before.contains('\n') {
            return (pos, Vec::new());
        }
        let start_of_first = before.len() - before.trim_start().len();
        let first = &before[start_of_first..];
        if let Some(meta) = first.strip_prefix(':') {
            return self.complete_meta(start_of_first, meta);
        }
        let Some((environment, rest)) = first.split_once(':') else {
            if first.contains(char::is_whitespace) {
                return (pos, Vec::new());
            }
            let candidates = self
                .names()
                .iter()
                .filter(|name| name.starts_with(first))
                .map(|name| Candidate {
                    display: format!("{name}:"),
                    replacement: format!("{name}: "),
                })
                .collect();
            return (start_of_first, candidates);
        };
        if self.kinds.iter().any(|kind| kind == environment)
            && !rest.contains(|c: char| c.is_whitespace() || c == ':')
        {
            let candidates: Vec<Candidate> = self
                .names()
                .iter()
                .filter(|name| name.contains(':') && name.starts_with(first))
                .map(|name| Candidate {
                    display: format!("{name}:"),
                    replacement: format!("{name}: "),
                })
                .collect();
            if !candidates.is_empty() {
                return (start_of_first, candidates);
            }
        }
        let Some(shapes) = self.commands.get(environment.trim()) else {
            return (pos, Vec::new());
        };
        let rest_start = pos - rest.len();
        let words = words(rest);
        let Some(&(word_start, word)) = words.last() else {
            return (pos, Vec::new());
        };
        let word_start = rest_start + word_start;
        if words.len() == 1 {
            let candidates = shapes
                .iter()
                .filter(|shape| shape.name.starts_with(word))
                .map(|shape| Candidate {
                    display: shape.name.clone(),
                    replacement: format!("{} ", shape.name),
                })
                .collect();
            return (word_start, candidates);
        }
        let takes_path = shapes
            .iter()
            .find(|shape| shape.name == words[0].1)
            .and_then(|shape| shape.parameters.get(words.len() - 2))
            .is_some_and(|parameter| names_a_path(parameter));
        if !takes_path {
            return (pos, Vec::new());
        }
        let quote = usize::from(word.starts_with('"'));
        (word_start + quote, self.paths(&word[quote..]))
    }

    fn complete_meta(&self, start: usize, meta: &str) -> (usize, Vec<Candidate>) {
        match meta.split_once(char::is_whitespace) {
            None => {
                let typed = format!(":{meta}");
                let candidates = META_COMMANDS
                    .iter()
                    .filter(|name| name.starts_with(&typed))
                    .map(|name| Candidate {
                        display: (*name).to_owned(),
                        replacement: format!("{name} "),
                    })
                    .collect();
                (start, candidates)
            }
            Some(("wait" | "interrupt" | "restart" | "close", arguments)) => {
                let word = arguments.trim_start();
                if word.contains(char::is_whitespace) {
                    return (start + 1 + meta.len(), Vec::new());
                }
                let word_start = start + 1 + meta.len() - word.len();
                let candidates = self
                    .names()
                    .iter()
                    .filter(|environment| environment.starts_with(word))
                    .map(|environment| Candidate {
                        display: environment.clone(),
                        replacement: format!("{environment} "),
                    })
                    .collect();
                (word_start, candidates)
            }
            Some(_) => (start + 1 + meta.len(), Vec::new()),
        }
    }

    /// The project's paths that complete `typed`.
    fn paths(&self, typed: &str) -> Vec<Candidate> {
        let (folder, prefix) = match typed.rfind('/') {
            Some(slash) => (&typed[..=slash], &typed[slash + 1..]),
            None => ("", typed),
        };
        let base = if folder.starts_with('/') {
            PathBuf::from(folder)
        } else {
            self.project.join(folder)
        };
        let Ok(entries) = fs::read_dir(&base) else {
            return Vec::new();
        };
        let mut candidates: Vec<Candidate> = entries
            .filter_map(Result::ok)
            .filter_map(|entry| {
                let name = entry.file_name().into_string().ok()?;
                if !name.starts_with(prefix)
                    || !printable(&name)
                    || (name.starts_with('.') && !prefix.starts_with('.'))
                {
                    return None;
                }
                // Follows links: a link to a folder completes as one.
                let is_folder = fs::metadata(entry.path()).is_ok_and(|m| m.is_dir());
                Some(if is_folder {
                    Candidate {
                        display: format!("{name}/"),
                        replacement: format!("{folder}{name}/"),
                    }
                } else {
                    Candidate {
                        display: name.clone(),
                        replacement: format!("{folder}{name} "),
                    }
                })
            })
            .take(MAX_CANDIDATES)
            .collect();
        candidates.sort_by(|a, b| a.display.cmp(&b.display));
        candidates
    }
}

/// The words of `text` with where each starts; a `"..."` is one word. An
/// empty last word stands for a word not begun yet.
fn words(text: &str) -> Vec<(usize, &str)> {
    let mut words = Vec::new();
    let mut start: Option<usize> = None;
    let mut quoted = false;
    for (index, c) in text.char_indices() {
        match start {
            None if c.is_whitespace() => {}
            None => {
                start = Some(index);
                quoted = c == '"';
            }
            Some(_) if quoted && c == '"' => quoted = false,
            Some(begin) if !quoted && c.is_whitespace() => {
                words.push((begin, &text[begin..index]));
                start = None;
            }
            Some(_) => {}
        }
    }
    match start {
        Some(begin) => words.push((begin, &text[begin..])),
        None => words.push((text.len(), "")),
    }
    words
}

/// Whether a signature's parameter names a file, folder or glob.
fn names_a_path(parameter: &str) -> bool {
    let name = parameter.to_ascii_lowercase();
    ["file", "path", "dir", "folder", "glob"]
        .iter()
        .any(|word| name.contains(word))
}

/// Whether `name` is safe to print to a terminal.
fn printable(name: &str) -> bool {
    !name.is_empty() && !name.chars().any(char::is_control)
}

#[cfg(test)]
mod tests {
    use super::*;
    use envhost_core::CommandSpec;

    fn completions(project: &Path) -> Completions {
        let editor = Usage {
            summary: String::new(),
            commands: vec![
                CommandSpec::new("view <file> /<start>/ /<end>/ [label]", "", "view a"),
                CommandSpec::new("search \"<pattern>\" <glob>", "", "search x *"),
                CommandSpec::new("create <file>", "", "create a\nb"),
                CommandSpec::new("close <id>", "", "close 1"),
                CommandSpec::new("evil\u{1b}]0;x", "", "evil"),
            ],
            ..Usage::default()
        };
        Completions::new(
            [
                ("bash", None),
                ("python", None),
                ("editor", Some(&editor)),
                ("timer", Some(&Usage::default())),
            ],
            project,
        )
    }

    fn replacements(completions: &Completions, line: &str) -> (usize, Vec<String>) {
        let (start, candidates) = completions.complete(line, line.len());
        (
            start,
            candidates.into_iter().map(|c| c.replacement).collect(),
        )
    }

    #[test]
    fn environment_names_and_meta_commands_at_the_start() {
        let c = completions(Path::new("/nonexistent"));
        assert_eq!(replacements(&c, "ba"), (0, vec!["bash: ".to_owned()]));
        assert_eq!(
            replacements(&c, ""),
            (
                0,
                ["bash: ", "python: ", "editor: ", "timer: "]
                    .map(String::from)
                    .to_vec()
            )
        );
        assert_eq!(replacements(&c, ":w"), (0, vec![":wait ".to_owned()]));
        assert_eq!(
            replacements(&c, ":interrupt py"),
            (11, vec!["python ".to_owned()])
        );
        assert_eq!(replacements(&c, "echo x").1, Vec::<String>::new());
    }

    #[test]
    fn open_instances_complete_as_they_come_and_go() {
        let live = LiveInstances::default();
        let c = completions(Path::new("/nonexistent"))
            .with_instances(&["bash".to_owned(), "python".to_owned()], Arc::clone(&live));
        assert_eq!(replacements(&c, "bash:").1, Vec::<String>::new());
        live.lock()
            .unwrap()
            .extend(["bash:server".to_owned(), "bash:db".to_owned()]);
        assert_eq!(
            replacements(&c, "bash:s"),
            (0, vec!["bash:server: ".to_owned()])
        );
        assert_eq!(
            replacements(&c, "ba"),
            (
                0,
                ["bash: ", "bash:server: ", "bash:db: "]
                    .map(String::from)
                    .to_vec()
            )
        );
        assert_eq!(
            replacements(&c, ":close bash:d"),
            (7, vec!["bash:db ".to_owned()])
        );
        live.lock().unwrap().clear();
        assert_eq!(replacements(&c, "bash:s").1, Vec::<String>::new());
    }

    #[test]
    fn command_names_after_the_environment() {
        let c = completions(Path::new("/nonexistent"));
        assert_eq!(
            replacements(&c, "editor: c"),
            (8, vec!["create ".to_owned(), "close ".to_owned()])
        );
        assert_eq!(replacements(&c, "editor:v"), (7, vec!["view ".to_owned()]));
        // Never a name with control characters; nothing for bash.
        assert!(replacements(&c, "editor: e").1.is_empty());
        assert!(replacements(&c, "bash: l").1.is_empty());
        assert!(replacements(&c, "editor: close 1").1.is_empty());
    }

    #[test]
    fn project_paths_where_a_command_takes_a_file() {
        let project = tempfile::tempdir().unwrap();
        fs::create_dir_all(project.path().join("src/deep")).unwrap();
        fs::write(project.path().join("src/main.py"), "").unwrap();
        fs::write(project.path().join("src/mod.py"), "").unwrap();
        fs::write(project.path().join("README.md"), "").unwrap();
        fs::write(project.path().join(".hidden"), "").unwrap();
        fs::write(project.path().join("src/bad\u{1b}[2Jname"), "").unwrap();
        let c = completions(project.path());
        assert_eq!(
            replacements(&c, "editor: view s"),
            (13, vec!["src/".to_owned()])
        );
        assert_eq!(
            replacements(&c, "editor: view src/m"),
            (
                13,
                vec!["src/main.py ".to_owned(), "src/mod.py ".to_owned()]
            )
        );
        assert_eq!(
            replacements(&c, "editor: view src/"),
            (
                13,
                ["src/deep/", "src/main.py ", "src/mod.py "]
                    .map(String::from)
                    .to_vec()
            )
        );
        assert_eq!(
            replacements(&c, "editor: view ."),
            (13, vec![".hidden ".to_owned()])
        );
        // The glob after a quoted pattern with a space in it.
        assert_eq!(
            replacements(&c, "editor: search \"a b\" R"),
            (21, vec!["README.md ".to_owned()])
        );
        // Not where the parameter is no file.
        assert!(replacements(&c, "editor: view a.py /s").1.is_empty());
        assert!(replacements(&c, "editor: search s").1.is_empty());
        assert!(replacements(&c, "editor: close s").1.is_empty());
    }
}
