//! The editor environment: pattern views of files, verified line edits and
//! search, with long help for each command until it is first used.
//!
//! This module owns the `Environment` implementation: the command
//! descriptions the help system renders, routing each command to its
//! handler, the wording of every response, and the screen (`Views:` then
//! `Commands:`). The work itself lives in the submodules: `parse` (command
//! syntax), `files` (reading text files), `patterns` (Python-style regexes
//! on Rust's engine), `views` (pattern views and their rendering), `edit`
//! (verified splices), `search` and `ignore_files` (the project's ignore
//! files, read as hostile files); staying inside the project and writes
//! that lose nothing are the project-files crate's (`envhost_files`).
//! Nothing here knows about the protocol.

mod edit;
mod files;
mod ignore_files;
mod lines;
mod parse;
mod patterns;
mod search;
mod views;

use std::fmt::Write as _;
use std::io::ErrorKind;
use std::path::PathBuf;
use std::time::Instant;

use envhost_core::{
    CommandContext, CommandResponse, Environment, EnvironmentError, Incident, Reach, ScreenSection,
    Usage,
};
use envhost_core::{CommandHelp, CommandSpec, HelpError, text};

use edit::VisibleView;
use envhost_files::{ProjectRoot, ResolvedPath, WriteProblem, Written, writers};
use lines::split_lines;
use parse::LineRange;
use patterns::{LinePattern, PatternError};
use views::{MAX_VIEW_LINES, MAX_VIEWS, NewView, Shown, View, ViewSet};

/// The environment's name, which also names the fence of help examples.
pub const NAME: &str = "editor";

/// The screen section never gets fewer lines than this; views add theirs
/// (up to 5 × 1000), so the orchestrator never cuts a line an agent may
/// want to edit.
const MIN_SCREEN_LINES: usize = 100;

/// What the editor is, in a sentence, ahead of its commands' help.
const SUMMARY: &str = "Views of project files between two patterns, re-read from disk on every screen; edits change only lines a view shows, and only if they still hold what it showed.";

/// How long a search may take when its command came without a limit (a
/// command sent with `yield_ms` and no `timeout_ms`): the editor never
/// yields, so its searches always need one.
const SEARCH_LIMIT_WITHOUT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// How many times an edit reads, verifies and writes a file that another
/// process changes meanwhile before it gives up.
const WRITE_ATTEMPTS: usize = 3;

/// What the editor needs from the host's configuration.
#[derive(Debug, Clone)]
pub struct EditorSettings {
    /// The canonical project directory: paths are relative to it.
    pub project_dir: PathBuf,
    /// Let paths lead outside the project (`--allow-outside-project`).
    pub allow_outside_project: bool,
}

/// The descriptions of the editor's commands, for the progressive help.
pub fn command_specs() -> Vec<CommandSpec> {
    vec![
        CommandSpec::new(
            "view <file> /<start>/ /<end>/ [label]",
            "View a section of a file using regex patterns to define boundaries.\n\
             Patterns are Python-style regex, matched line by line. Multiple matches can be navigated with next_match/prev_match.",
            "view src/main.py /^def main/ /^if __name__/",
        )
        .with_summary("View file section by regex patterns"),
        CommandSpec::new(
            "edit <file> <start>-<end>",
            "Replace lines with new content. Lines must be visible in a view.\n\
             Content is provided on subsequent lines after the command.",
            "edit src/main.py 45-50\n\
             def process(verbose=False):\n    \
                 if not verbose:\n        \
                     return",
        )
        .with_summary("Replace lines (must be visible in a view)"),
        CommandSpec::new(
            "search \"<pattern>\" <glob>",
            "Find all occurrences of pattern in files matching glob.\n\
             Returns filepath:line_number for each match.",
            "search \"TODO\" *.py",
        )
        .with_summary("Find text matching pattern in files"),
        CommandSpec::new(
            "create <file>",
            "Create a new file with initial content.\n\
             Content is provided on subsequent lines after the command.",
            "create new_file.py\n# New module",
        ),
        CommandSpec::new("close <id>", "Close a view", "close 1").simple(),
        CommandSpec::new(
            "next_match <id>",
            "Show next pattern match for a view",
            "next_match 1",
        )
        .simple(),
        CommandSpec::new(
            "prev_match <id>",
            "Show previous pattern match for a view",
            "prev_match 1",
        )
        .simple(),
    ]
}

/// The editor: pattern views, verified edits, search, create.
pub struct EditorEnvironment {
    root: ProjectRoot,
    help: CommandHelp,
    views: ViewSet,
    /// The state last handed out for a saved session.
    last_kept: Option<String>,
}

/// The editor's state in a saved session.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct KeptEditor {
    views: Vec<views::KeptView>,
    next_view_id: u32,
    /// The commands used (their help is short).
    used: Vec<String>,
}

impl EditorEnvironment {
    /// An editor for the project in `settings`.
    pub fn new(settings: EditorSettings) -> Result<Self, HelpError> {
        Ok(EditorEnvironment {
            root: ProjectRoot::new(settings.project_dir, settings.allow_outside_project),
            help: CommandHelp::new(NAME, command_specs())?,
            views: ViewSet::new(),
            last_kept: None,
        })
    }

    fn kept(&self) -> Option<String> {
        let (views, next_view_id) = self.views.kept();
        serde_json::to_string(&KeptEditor {
            views,
            next_view_id,
            used: self.help.used(),
        })
        .ok()
    }

    /// A saved view, opened again: its path resolved and its patterns
    /// compiled as `view` does; the file itself is read by the screen.
    fn reopen(&self, kept: views::KeptView) -> Result<View, ViewLost> {
        let path = self.root.resolve(&kept.file)?;
        let start = LinePattern::compile(&kept.start)?;
        let end = LinePattern::compile(&kept.end)?;
        Ok(View {
            id: kept.id,
            written: kept.file,
            display: path.display,
            real: path.real,
            start,
            end,
            match_index: kept.match_index,
            label: kept.label,
            shown: None,
        })
    }

    fn view(&mut self, arguments: &str) -> CommandResponse {
        let args = match parse::view_args(arguments) {
            Ok(args) => args,
            Err(bad) => return CommandResponse::failure(bad.to_string()),
        };
        let start = match LinePattern::compile(&args.start) {
            Ok(pattern) => pattern,
            Err(err) => return CommandResponse::failure(pattern_failure(&err, "start")),
        };
        let end = match LinePattern::compile(&args.end) {
            Ok(pattern) => pattern,
            Err(err) => return CommandResponse::failure(pattern_failure(&err, "end")),
        };
        let file = match files::read_text(&self.root, &args.file) {
            Ok(file) => file,
            Err((display, problem)) => {
                return CommandResponse::failure(format!(
                    "{}\nNo view was created.",
                    problem.sentence(&display)
                ));
            }
        };
        let display = file.path.display.clone();
        if file.bytes.is_empty() {
            return CommandResponse::failure(format!(
                "{display} is empty, so no pattern can match and no view was created. \
                 To give it content, remove it (bash: rm {display}) and use create, or write it with bash."
            ));
        }
        let Some(section) = views::locate(&start, &end, &file.bytes, 0) else {
            return CommandResponse::failure(format!(
                "No line of {display} matches the start pattern /{}/, so no view was created.\n\
                 Patterns are matched line by line (^ and $ are the line's start and end); \
                 search \"{}\" {display} shows which lines match.",
                args.start, args.start
            ));
        };
        let truncation = section.truncation;
        let match_count = section.match_count;
        let shown = Shown {
            first_line: section.first_line,
            lines: section.lines.iter().map(|line| line.to_vec()).collect(),
        };
        let (added, closed) = self.views.add(NewView {
            written: args.file.clone(),
            display,
            real: file.path.real,
            start,
            end,
            label: args.label,
            shown,
        });
        let mut output = format!("Added view {}", added.describe());
        if match_count > 1 {
            let _ = write!(
                output,
                "\nThe start pattern matches {match_count} lines; showing match 1/{match_count} (next_match {} shows the next).",
                added.id
            );
        }
        if let Some(truncation) = truncation {
            let _ = write!(
                output,
                "\nThe end pattern was not found within {MAX_VIEW_LINES} lines of the start, or before the end of the file: the view is marked {}.",
                truncation.marker()
            );
        }
        if let Some(closed) = closed {
            let _ = write!(
                output,
                "\nClosed view {} to make room: at most {MAX_VIEWS} views are open, and the oldest is closed first.",
                closed.describe()
            );
        }
        CommandResponse::success(output)
    }

    fn close(&mut self, arguments: &str) -> CommandResponse {
        let id = match parse::view_id(arguments, "close") {
            Ok(id) => id,
            Err(bad) => return CommandResponse::failure(bad.to_string()),
        };
        match self.views.close(id) {
            Some(_) => CommandResponse::success(format!("Closed view [{id}]")),
            None => CommandResponse::failure(format!(
                "There is no view [{id}]; {}.",
                self.views.summary()
            )),
        }
    }

    fn step_match(&mut self, arguments: &str, forward: bool) -> CommandResponse {
        let command = if forward { "next_match" } else { "prev_match" };
        let id = match parse::view_id(arguments, command) {
            Ok(id) => id,
            Err(bad) => return CommandResponse::failure(bad.to_string()),
        };
        let summary = self.views.summary();
        let root = &self.root;
        let Some(view) = self.views.get_mut(id) else {
            return CommandResponse::failure(format!("There is no view [{id}]; {summary}."));
        };
        let bytes = match files::read_text(root, &view.written) {
            Ok(file) => file.bytes,
            Err((display, problem)) => return CommandResponse::failure(problem.sentence(&display)),
        };
        let count = views::matching_lines(&view.start, &bytes).len();
        if count == 0 {
            return CommandResponse::failure(format!(
                "No line of {} matches the start pattern /{}/ any more; the screen shows the view as broken and removes it.",
                view.display,
                view.start.source()
            ));
        }
        let current = view.match_index.min(count - 1);
        let (next, wrapped) = if forward {
            if current + 1 < count {
                (current + 1, false)
            } else {
                (0, count > 1)
            }
        } else if current > 0 {
            (current - 1, false)
        } else {
            (count - 1, count > 1)
        };
        view.match_index = next;
        let mut output = format!("Showing match {}/{count}", next + 1);
        if count == 1 {
            output.push_str(" (the start pattern matches only one line)");
        } else if wrapped {
            output.push_str(if forward {
                " (wrapped around from the last match)"
            } else {
                " (wrapped around from the first match)"
            });
        }
        CommandResponse::success(output)
    }

    fn create(&mut self, arguments: &str, body: Option<&str>) -> CommandResponse {
        let file = match parse::file_arg(
            arguments,
            "create <file>, with the content on the following lines",
        ) {
            Ok(file) => file,
            Err(bad) => return CommandResponse::failure(bad.to_string()),
        };
        let path = match self.root.resolve(&file) {
            Ok(path) => path,
            Err(err) => return CommandResponse::failure(err.to_string()),
        };
        let mut content = body.unwrap_or("").replace("\r\n", "\n");
        if !content.is_empty() && !content.ends_with('\n') {
            content.push('\n');
        }
        let display = &path.display;
        if path.real.is_dir() {
            return CommandResponse::failure(format!(
                "Cannot create {display}: it is a folder. To create a file in it, give the file's \
                 path inside it (create {}/new_file.py).",
                display.trim_end_matches('/')
            ));
        }
        match envhost_files::create_new(&path.real, content.as_bytes()) {
            Ok(()) => {
                let mut response = CommandResponse::success(format!("Created {display}"));
                response.files.push(path.real.clone());
                response
            }
            Err(err) if err.kind() == ErrorKind::AlreadyExists => {
                CommandResponse::failure(format!(
                    "Cannot create {display}: it already exists, and create never overwrites a file.\n\
                     To change it, view the part to change (view {display} /<start>/ /<end>/) and edit the lines shown; \
                     to replace it entirely, delete it first (bash: rm {display}) and create it again."
                ))
            }
            Err(err) => CommandResponse::failure(format!("Cannot create {display}: {err}")),
        }
    }

    fn edit(&mut self, arguments: &str, body: Option<&str>) -> CommandResponse {
        let (file, range) = match parse::edit_args(arguments) {
            Ok(parsed) => parsed,
            Err(bad) => return CommandResponse::failure(bad.to_string()),
        };
        let path = match self.root.resolve(&file) {
            Ok(path) => path,
            Err(err) => return CommandResponse::failure(err.to_string()),
        };
        let display = path.display.clone();
        let visible: Vec<VisibleView<'_>> = self
            .views
            .iter()
            .filter(|v| v.real == path.real)
            .filter_map(|v| {
                v.shown
                    .as_ref()
                    .map(|shown| VisibleView { id: v.id, shown })
            })
            .collect();
        if visible.is_empty() {
            let suggestion = suggest_view(&self.root, &path, &display, range);
            return CommandResponse::failure(edit::no_view_help(&display, range, &suggestion));
        }
        let new_lines = parse::content_lines(body);
        // The file may change between reading and writing (another process
        // writing to it): the write checks that the file is still the one
        // read, and the edit is verified again on what the file now holds.
        let mut attempt = 0;
        let (new_bytes, written) = loop {
            attempt += 1;
            let (read, bytes) = match files::read_for_edit(&self.root, &path) {
                Ok(read) => read,
                Err(problem) => {
                    return CommandResponse::failure(format!(
                        "Cannot edit {}\nNothing was written.",
                        problem.sentence(&display)
                    ));
                }
            };
            if let Err(refusal) = edit::verify(range, &visible, &bytes) {
                return CommandResponse::failure(edit::describe_refusal(
                    &refusal, &display, range, &visible,
                ));
            }
            let new_bytes = edit::splice(&bytes, range, &new_lines);
            match envhost_files::replace_verified(read, &bytes, &new_bytes) {
                Ok(written) => break (new_bytes, written),
                Err(WriteProblem::Changed) if attempt < WRITE_ATTEMPTS => continue,
                Err(problem) => return write_failure(&display, problem),
            }
        };
        let mut output = format!("Edited {display} lines {}-{}", range.first, range.last);
        let old_len = range.len();
        if new_lines.len() != old_len {
            let shift = new_lines.len() as i64 - old_len as i64;
            let now = if new_lines.is_empty() {
                "were deleted".to_owned()
            } else {
                format!(
                    "are now lines {}-{}",
                    range.first,
                    range.first + new_lines.len() - 1
                )
            };
            let _ = write!(
                output,
                "\n{} replaced by {}: they {now}; lines below moved {} by {}.",
                text::counted(old_len, "line"),
                text::counted(new_lines.len(), "line"),
                if shift > 0 { "down" } else { "up" },
                shift.unsigned_abs()
            );
        }
        if written == Written::InPlace {
            output.push_str(
                "\nThe file has other hard links, so it was written in place: every link shows the edit.",
            );
        }
        for note in self.follow_edit(&path.real, range, new_lines.len(), &new_bytes) {
            output.push('\n');
            output.push_str(&note);
        }
        let mut response = CommandResponse::success(output);
        response.files.push(path.real.clone());
        response
    }

    /// Keeps the views of an edited file on the same lines: a replaced
    /// boundary line becomes an escaped literal pattern, and each
    /// view keeps showing the match that starts where its section now is.
    fn follow_edit(
        &mut self,
        real: &std::path::Path,
        range: LineRange,
        new_len: usize,
        new_bytes: &[u8],
    ) -> Vec<String> {
        // Only boundary lines are looked up: no index of the file.
        let text_of = |line: usize| {
            (line > 0)
                .then(|| lines::line_starting_at(new_bytes, lines::line_start(new_bytes, line)))
                .flatten()
                .map(|l| String::from_utf8_lossy(l.text).into_owned())
        };
        let mut notes = Vec::new();
        for view in self.views.iter_mut().filter(|v| v.real == real) {
            let Some(shown) = &view.shown else { continue };
            let Some(after) =
                edit::boundaries_after(shown.first_line, shown.last_line(), range, new_len)
            else {
                continue;
            };
            if after.start_replaced
                && let Some(text) = text_of(after.first_line)
                && let Ok(pattern) = LinePattern::literal(&text)
            {
                notes.push(format!(
                    "View [{}]: its start line was edited, so its start pattern is now /{}/",
                    view.id,
                    pattern.source()
                ));
                view.start = pattern;
            }
            if after.end_replaced
                && after.last_line > after.first_line
                && let Some(text) = text_of(after.last_line)
                && let Ok(pattern) = LinePattern::literal(&text)
            {
                notes.push(format!(
                    "View [{}]: its end line was edited, so its end pattern is now /{}/",
                    view.id,
                    pattern.source()
                ));
                view.end = pattern;
            }
            // Start lines are matched one line at a time (`\A` and `\z`
            // aside, which only the first and the last line can match): an
            // edit below a start line that kept its pattern leaves every
            // line up to it, and so which start match it is, as it was.
            if range.first > shown.first_line {
                continue;
            }
            let starts = views::matching_lines(&view.start, new_bytes);
            if let Some(index) = starts.iter().position(|&line| line == after.first_line) {
                view.match_index = index;
            }
        }
        notes
    }

    fn search(&mut self, arguments: &str, context: &CommandContext) -> CommandResponse {
        let args = match parse::search_args(arguments) {
            Ok(args) => args,
            Err(bad) => return CommandResponse::failure(bad.to_string()),
        };
        let pattern = match LinePattern::compile(&args.pattern) {
            Ok(pattern) => pattern,
            Err(err) => return CommandResponse::failure(err.to_string()),
        };
        let started = Instant::now();
        let deadline = started + context.timeout.unwrap_or(SEARCH_LIMIT_WITHOUT_TIMEOUT);
        let query = search::Query {
            pattern: &pattern,
            globs: &args.globs,
        };
        let report = match search::run(&self.root, &query, deadline, &context.cancel) {
            Ok(report) => report,
            Err(refused) => return CommandResponse::failure(refused.to_string()),
        };
        let text = report.render(&args.pattern, &args.globs);
        let nothing_to_search = report.files_searched == 0 && report.stopped.is_none();
        let mut response = if nothing_to_search {
            CommandResponse::failure(text)
        } else {
            CommandResponse::success(text)
        };
        if report.stopped == Some(search::Stopped::Deadline) {
            response = response.with_incident(Incident::TimedOut {
                after: started.elapsed(),
            });
        }
        response
    }
}

/// A `view` command that would show the lines an edit asked for: their
/// first and last lines as literal patterns when the file has them, the
/// help's example otherwise.
fn suggest_view(
    root: &ProjectRoot,
    path: &ResolvedPath,
    display: &str,
    range: LineRange,
) -> String {
    let fallback = format!("view {display} /^def main/ /^$/");
    let Ok(bytes) = files::read_resolved(root, path) else {
        return fallback;
    };
    let all = split_lines(&bytes);
    let prefix_pattern = |line: usize| -> Option<String> {
        let text = String::from_utf8_lossy(all.get(line - 1)?.text).into_owned();
        let trimmed = text.trim_end();
        if trimmed.trim().is_empty() {
            return None;
        }
        let prefix: String = trimmed.chars().take(60).collect();
        Some(format!("^{}", regex::escape(&prefix).replace('/', "\\/")))
    };
    match (
        prefix_pattern(range.first),
        prefix_pattern(range.last.max(range.first + 1)),
    ) {
        (Some(start), Some(end)) => format!("view {display} /{start}/ /{end}/"),
        (Some(start), None) => format!("view {display} /{start}/ /^$/"),
        _ => fallback,
    }
}

fn pattern_failure(err: &PatternError, which: &str) -> String {
    format!("The {which} pattern is not usable: {err}\nNo view was created.")
}

/// The response when an edit's content could not go in cleanly.
fn write_failure(display: &str, problem: WriteProblem) -> CommandResponse {
    CommandResponse::failure(match problem {
        WriteProblem::Changed => format!(
            "Cannot edit {display}: it kept changing while the edit was being written (another \
             process is writing to it). Nothing was written; try again once it is quiet."
        ),
        WriteProblem::OpenForWriting(holders) => format!(
            "Cannot edit {display}: it is open for writing by another process: {}. An edit now \
             could lose what that process writes next. Nothing was written. Stop that process or \
             let it finish, then edit again.",
            writers::describe(&holders)
        ),
        WriteProblem::Io(err) => {
            format!("Cannot write {display}: {err}\nThe file was not changed.")
        }
        WriteProblem::ChangedDuringSwitch => format!(
            "{display} was edited, but another process wrote to it at the same moment, and what \
             it wrote then may be lost. View the file to check it."
        ),
    })
}

/// Why a saved view cannot be opened again.
#[derive(Debug, thiserror::Error)]
enum ViewLost {
    #[error(transparent)]
    Path(#[from] envhost_files::PathError),
    #[error(transparent)]
    Pattern(#[from] PatternError),
}

impl Environment for EditorEnvironment {
    fn usage(&self) -> Usage {
        Usage {
            summary: SUMMARY.to_owned(),
            commands: self.help.commands().to_vec(),
            ..Usage::default()
        }
    }

    /// It writes and deletes lines of files on this machine, nothing else.
    fn reach(&self) -> Reach {
        Reach {
            destructive: true,
            open_world: false,
        }
    }

    fn handle_command(
        &mut self,
        command: &str,
        context: &CommandContext,
    ) -> Result<CommandResponse, EnvironmentError> {
        let routed = match self.help.route(command) {
            Ok(routed) => routed,
            Err(unknown) => return Ok(CommandResponse::failure(unknown.to_string())),
        };
        let arguments = routed.arguments;
        let body = routed.body;
        let response = match routed.name {
            "view" => self.view(arguments),
            "edit" => self.edit(arguments, body),
            "search" => self.search(arguments, context),
            "create" => self.create(arguments, body),
            "close" => self.close(arguments),
            "next_match" => self.step_match(arguments, true),
            "prev_match" => self.step_match(arguments, false),
            other => CommandResponse::failure(format!("The {other} command has no handler.")),
        };
        Ok(response)
    }

    /// Closes every view and brings back the long help of every command;
    /// files are not touched (nothing else is kept between commands).
    fn restart(&mut self, _context: &CommandContext) -> Result<CommandResponse, EnvironmentError> {
        let closed: Vec<String> = self
            .views
            .iter()
            .map(|v| format!("[{}] {}", v.id, v.display))
            .collect();
        self.views = ViewSet::new();
        self.help = CommandHelp::new(NAME, command_specs())
            .map_err(|err| EnvironmentError::Failed(err.to_string()))?;
        let views = if closed.is_empty() {
            "no view was open".to_owned()
        } else {
            format!(
                "closed {} ({})",
                text::counted(closed.len(), "view"),
                closed.join(", ")
            )
        };
        Ok(CommandResponse::success(format!(
            "Restarted the editor: {views}, and every command shows its long help again until \
             it is used. Files are not touched."
        ))
        .with_incident(Incident::Restarted {
            reason: "the agent asked for a restart".to_owned(),
            lost: "its views and which commands were used".to_owned(),
        }))
    }

    fn save_state(&mut self) -> Option<String> {
        let text = self.kept()?;
        if self.last_kept.as_deref() == Some(text.as_str()) {
            return None;
        }
        self.last_kept = Some(text.clone());
        Some(text)
    }

    fn restore_state(
        &mut self,
        state: &str,
        _context: &CommandContext,
    ) -> Result<String, EnvironmentError> {
        let kept: KeptEditor = serde_json::from_str(state).map_err(|err| {
            EnvironmentError::Failed(format!("the saved editor state is unreadable: {err}"))
        })?;
        let mut views = Vec::new();
        let mut lost = Vec::new();
        for view in kept.views {
            let name = format!("[{}] {}", view.id, view.file);
            match self.reopen(view) {
                Ok(view) => views.push(view),
                Err(why) => lost.push(format!("{name} ({why})")),
            }
        }
        let described: Vec<String> = views.iter().map(View::describe).collect();
        self.views = ViewSet::restored(views, kept.next_view_id);
        let used: Vec<String> = kept
            .used
            .into_iter()
            .filter(|name| self.help.mark_used(name))
            .collect();
        let mut words = if described.is_empty() {
            "restored no view".to_owned()
        } else {
            format!(
                "restored {}: {}",
                text::counted(described.len(), "view"),
                described.join(", ")
            )
        };
        if !used.is_empty() {
            words.push_str(&format!(
                "; short help for the commands already used ({})",
                used.join(", ")
            ));
        }
        words.push('.');
        if !lost.is_empty() {
            words.push_str(&format!(" Not restored: {}.", lost.join("; ")));
        }
        // Written with the next answer, without what did not come back.
        self.last_kept = None;
        Ok(words)
    }

    fn screen(&mut self) -> Result<ScreenSection, EnvironmentError> {
        let state = self.views.render(&self.root);
        let content = self.help.screen_with_state(&state);
        let lines = content.lines().count();
        Ok(ScreenSection::with_max_lines(
            content,
            lines.max(MIN_SCREEN_LINES),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_descriptions_are_valid() {
        let help = CommandHelp::new(NAME, command_specs()).unwrap();
        assert_eq!(help.commands().len(), 7);
    }

    #[test]
    fn views_keep_their_start_match_through_edits_above_and_below_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("m.py");
        std::fs::write(&file, "def a\n  x\ndef b\n  y\ndef c\n  z\n").unwrap();
        let mut editor = EditorEnvironment::new(EditorSettings {
            project_dir: dir.path().canonicalize().unwrap(),
            allow_outside_project: false,
        })
        .unwrap();
        let context = CommandContext::new(
            std::time::Duration::from_secs(60),
            envhost_core::CancelFlag::new(),
        );
        let mut run = |command: &str| {
            let response = editor.handle_command(command, &context).unwrap();
            assert!(response.success, "{command}: {}", response.output);
            editor.screen().unwrap().content
        };
        run("view m.py /^def a/ /^  x/");
        run("view m.py /^def / /^  /");
        let screen = run("next_match 2");
        assert!(
            screen.contains("(match 2/3)\n      3  def b\n      4    y\n"),
            "{screen}"
        );
        // Below the start line: a new start match after it changes nothing
        // before it.
        let screen = run("edit m.py 4-4\n  y\ndef new");
        assert!(
            screen.contains("(match 2/4)\n      3  def b\n      4    y\n"),
            "{screen}"
        );
        // Above it: one more start match before it, and the view follows
        // its section to the third match.
        let screen = run("edit m.py 2-2\ndef inserted\n  x");
        assert!(
            screen.contains("(match 3/5)\n      4  def b\n      5    y\n"),
            "{screen}"
        );
    }

    #[test]
    fn before_first_use_the_screen_shows_long_help() {
        let dir = tempfile::tempdir().unwrap();
        let mut editor = EditorEnvironment::new(EditorSettings {
            project_dir: dir.path().canonicalize().unwrap(),
            allow_outside_project: false,
        })
        .unwrap();
        let screen = editor.screen().unwrap().content;
        assert!(screen.starts_with("Views:\n  (no views)\n\nCommands:\n  view <file> /<start>/ /<end>/ [label]\n    View a section of a file using regex patterns to define boundaries.\n"), "{screen}");
        assert!(screen.ends_with("  close <id> - Close a view\n  next_match <id> - Show next pattern match for a view\n  prev_match <id> - Show previous pattern match for a view\n"), "{screen}");
        assert!(screen.contains("    Example:\n      ```editor\n      edit src/main.py 45-50\n      def process(verbose=False):\n          if not verbose:\n              return\n      ```\n"), "{screen}");
    }
}
