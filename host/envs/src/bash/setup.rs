//! What a shell starts with: its private files and its environment.
//!
//! Each bash environment gets a private folder (mode 0700, removed when the
//! environment is dropped) holding:
//!
//! - `init.bash`, sourced by the first line the host types (bash itself
//!   runs with `--norc --noprofile`: no user or system rc file). It sets
//!   empty `PS1`/`PS2` and the `PROMPT_COMMAND` that writes the prompt
//!   report ([`super::marker`]); its prompt report number 0 says
//!   the shell is ready. It holds no secret: the report's authenticity
//!   comes from the socket it is written to, not from anything a command
//!   could read.
//! - `command`, the text of a long command. The host never types a
//!   command as such: a terminal in canonical mode truncates input lines at
//!   4095 bytes and a partial construct would leave bash waiting at `PS2`.
//!   It types one line that hands the text to `eval`: a short command
//!   inside that line as an escaped `$'…'` string, a long one through this
//!   file. Either way any text arrives whole, a syntax error is reported at
//!   once, and the command runs with the terminal as its stdin, stdout and
//!   stderr.
//! - `typed`, present only while text typed with `input` may be waiting
//!   on the terminal ([`TypedMark`]).
//! - `no-editor`, a script set as `EDITOR`/`VISUAL`/`GIT_EDITOR` that fails
//!   at once with a sentence saying what to do instead.
//!
//! - `state`, the prompt's dump of the shell's state when the session is
//!   recorded, and `restore-<random>.bash`, a saved state being restored.
//!
//! The host creates each file `O_EXCL` through the folder's handle and reads
//! the dump through it too ([`envhost_files::Folder`]): the commands run as
//! the same user and can swap any of them, for a symlink, a FIFO or a huge
//! file, and the host neither follows, blocks nor reads without bound.
//!
//! This module also decides the variables the shell starts with (secrets
//! filtered by [`SecretPolicy`], pagers off, `TERM=dumb`). It starts no
//! process.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::marker::ReportFormat;
use envhost_files::{Bound, FileRefusal, Folder};
use envhost_process::{PrivateFolder, SecretPolicy};

/// The most of the prompt's dump the host reads: a shell holding more in
/// its variables is not kept (its screen says so).
pub const STATE_DUMP: Bound = Bound::new(128 << 20, "the shell's state dump");

/// The dump's name in the private folder.
const STATE_FILE: &str = "state";

/// `TERM=dumb`: programs see a terminal (line-buffered output, job control,
/// password prompts behave) that cannot do colours or cursor movement, so
/// they print plain lines: `ls`, `git`, `grep`, pytest, cargo and pip turn
/// colours off; progress bars that redraw several lines at once, which no
/// text transcript can render, fall back to simple output. What escapes
/// still get through are removed by [`crate::output::terminal`].
pub const TERM: &str = "dumb";

/// Variables from the host that would change how the shell itself behaves
/// (PS1 is set empty instead, so that nothing shows before the set-up).
const SHELL_CONTROL_VARIABLES: [&str; 12] = [
    "PROMPT_COMMAND",
    "PS0",
    "PS1",
    "PS2",
    "PS4",
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "HISTFILE",
    "BASH_XTRACEFD",
    "IGNOREEOF",
];

/// The private folder of one bash environment.
pub struct SessionFiles {
    /// Removed, with everything in it, when the session files are dropped.
    dir: PrivateFolder,
    init: PathBuf,
    no_editor: PathBuf,
    command_file: File,
    typed: TypedMark,
    report_fd: i32,
    /// Where the prompt dumps the shell's state, when the session is
    /// recorded.
    state: Option<PathBuf>,
    /// The next command line asks the prompt for a dump.
    dump_next: bool,
    /// The next command could change the shell itself.
    look_next: bool,
    /// The last command could have: the shell's standard error is looked
    /// at before the next.
    look_at_stderr: bool,
    /// The last prompt reported status 0 without tracing: the next command
    /// line has nothing to carry over ([`SessionFiles::command_line`]).
    nothing_to_carry: bool,
}

impl SessionFiles {
    /// Creates the folder and its files under `parent` (normally the system
    /// temporary folder) for shells that get their report socket at
    /// `report_fd`.
    #[cfg(test)]
    pub fn create(parent: &Path, report_fd: i32) -> io::Result<SessionFiles> {
        Self::create_recording(parent, report_fd, false)
    }

    /// [`create`](SessionFiles::create), and with `record` the prompt dumps
    /// the shell's state to [`state_path`](SessionFiles::state_path) after
    /// every command.
    pub fn create_recording(
        parent: &Path,
        report_fd: i32,
        record: bool,
    ) -> io::Result<SessionFiles> {
        let dir = PrivateFolder::create(parent, "bash")?;
        let state = record.then(|| dir.path().join(STATE_FILE));
        let init = dir.path().join("init.bash");
        let command = dir.path().join("command");
        let no_editor = dir.path().join("no-editor");
        let folder = dir.folder();
        let typed = TypedMark {
            path: Arc::new(dir.path().join("typed")),
            set: Arc::new(AtomicBool::new(false)),
        };
        let created = (|| {
            let script = init_script(&command, &typed.path, report_fd, state.as_deref());
            folder
                .create_new("init.bash", 0o600)?
                .write_all(script.as_bytes())?;
            folder
                .create_new("no-editor", 0o700)?
                .write_all(NO_EDITOR_SCRIPT.as_bytes())?;
            folder.create_new("command", 0o600)
        })();
        match created {
            Ok(command_file) => Ok(SessionFiles {
                dir,
                init,
                no_editor,
                command_file,
                typed,
                report_fd,
                state,
                dump_next: false,
                look_next: false,
                look_at_stderr: false,
                nothing_to_carry: false,
            }),
            // Dropping the folder removes what was made of it.
            Err(err) => Err(err),
        }
    }

    /// The line typed into a new shell to set it up.
    pub fn init_line(&self) -> String {
        format!(". {}\n", shell_quote(&self.init))
    }

    /// Says that the next command could change the shell itself (its
    /// streams, its options) or runs traced (`set -x`): the prompt after it
    /// turns tracing off and looks at the shell's streams, and the next
    /// command line looks at its standard error. After other commands the
    /// prompt code only reports.
    pub fn look_after_next(&mut self) {
        self.look_next = true;
    }

    /// Says that the shell's last prompt reported status 0 with tracing
    /// off, so the next command line need not set `$?` to the last status
    /// nor turn tracing back on: a short command is then typed without a
    /// call into the plumbing, which is most of what the shell's side of a
    /// round trip costs beyond the command itself. Holds for one line.
    pub fn nothing_to_carry_over(&mut self) {
        self.nothing_to_carry = true;
    }

    /// Has the prompt after the next command dump the shell's state (when
    /// the session is recorded).
    pub fn request_dump(&mut self) {
        self.dump_next = self.state.is_some();
    }

    /// The prompt's last dump of the shell's state, if the session is
    /// recorded (`Missing` before the first dump).
    pub fn read_state(&self) -> Option<Result<Vec<u8>, FileRefusal>> {
        self.state.as_ref()?;
        Some(self.folder().read(STATE_FILE, STATE_DUMP))
    }

    /// Writes `script` to a new file beside the other private files, at a
    /// name nobody can plant in advance, and returns its path (for the
    /// shell to source; [`remove`](SessionFiles::remove) it after).
    pub fn write_restore(&self, script: &str) -> io::Result<PathBuf> {
        let (name, mut file) = self.folder().create_unique("restore-", ".bash", 0o600)?;
        let path = self.folder().join(&name);
        if let Err(err) = file.write_all(script.as_bytes()) {
            let _ = self.folder().remove(&name);
            return Err(err);
        }
        Ok(path)
    }

    /// Removes a file [`write_restore`](SessionFiles::write_restore) wrote.
    pub fn remove(&self, path: &Path) {
        if let Some(name) = path.file_name() {
            let _ = self.folder().remove(name);
        }
    }

    fn folder(&self) -> &Folder {
        self.dir.folder()
    }

    /// What says that text was typed into the running command.
    pub fn typed_mark(&self) -> TypedMark {
        self.typed.clone()
    }

    /// The descriptor number the shell's report socket has in bash.
    pub fn report_fd(&self) -> i32 {
        self.report_fd
    }

    /// The line to type into the terminal to run `text` as command number
    /// `seq`. A short command travels in the line itself, quoted as
    /// `$'…'` with every control character escaped (so the line is one
    /// line, well under the terminal's 4095-byte limit, and nothing in it
    /// is special to the terminal); a longer one goes through the command
    /// file. The command runs with the report socket closed, so neither it
    /// nor anything it starts holds it. Tracing (`set -x`) is off until the
    /// command itself starts, so none of this shows in a trace.
    ///
    /// `__envhost_load` sets `$?` to the last command's status before the
    /// command starts and turns tracing back on; after a prompt that
    /// reported status 0 without tracing
    /// ([`nothing_to_carry_over`](SessionFiles::nothing_to_carry_over))
    /// there is nothing to do, and a short command is typed as
    /// `__envhost_seq=N; eval $'…'` (the assignment leaves `$?` at 0).
    pub fn command_line(&mut self, seq: u64, text: &str) -> io::Result<String> {
        // The last command's prompt has looked at the terminal by now.
        self.typed.clear();
        let plain = std::mem::take(&mut self.nothing_to_carry);
        let fd = self.report_fd;
        let run = match ansi_c_quote(text, MAX_INLINE_COMMAND) {
            Some(quoted) if plain => format!("__envhost_seq={seq}; eval {quoted} {fd}>&-"),
            Some(quoted) => {
                format!("__envhost_load {seq} {quoted}; eval \"$__envhost_cmd\" {fd}>&-")
            }
            None => {
                self.write_command(text)?;
                format!("__envhost_load {seq}; eval \"$__envhost_cmd\" {fd}>&-")
            }
        };
        let mut line = String::with_capacity(run.len() + 80);
        if std::mem::replace(&mut self.look_at_stderr, self.look_next) {
            line.push_str("__envhost_stderr; ");
        }
        if std::mem::take(&mut self.look_next) {
            line.push_str("__envhost_look=1; ");
        }
        if std::mem::take(&mut self.dump_next) {
            line.push_str("__envhost_dump=1; ");
        }
        line.push_str(&run);
        line.push('\n');
        Ok(line)
    }

    /// Puts `text` (which holds no NUL) at the start of the command file,
    /// ended by a NUL: the shell's `read -d ''` stops there, so the file is
    /// never truncated (truncating costs a file-system transaction).
    fn write_command(&mut self, text: &str) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        let mut bytes = Vec::with_capacity(text.len() + 1);
        bytes.extend_from_slice(text.as_bytes());
        bytes.push(0);
        self.command_file.write_all_at(&bytes, 0)
    }

    #[cfg(test)]
    pub fn command_path(&self) -> PathBuf {
        self.dir.path().join("command")
    }
}

/// The `typed` file: tells the prompt code that text typed with `input`
/// may be waiting on the terminal, unread by the command that ended. Only
/// then does it look (a `read -t 0` cost a sixth of the shell's prompt
/// code). Set before the text is typed, cleared when the next command is
/// typed. A command can create or remove the file (it is the shell's
/// user's): that only decides whether the shell reads leftover lines as
/// commands, which the command could run itself.
#[derive(Clone)]
pub struct TypedMark {
    path: Arc<PathBuf>,
    set: Arc<AtomicBool>,
}

impl TypedMark {
    /// Marks that text is about to be typed. An error means the prompt
    /// code would not look for leftovers: type nothing then.
    pub fn set(&self) -> io::Result<()> {
        if !self.set.load(Ordering::SeqCst) {
            // O_EXCL: whatever a command put there (a FIFO, a symlink) is
            // never opened; it being there already is the mark.
            let created = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(self.path.as_path());
            match created {
                Ok(_) => {}
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
                Err(err) => return Err(err),
            }
            self.set.store(true, Ordering::SeqCst);
        }
        Ok(())
    }

    fn clear(&self) {
        if self.set.swap(false, Ordering::SeqCst) {
            let _ = fs::remove_file(self.path.as_path());
        }
    }
}

const NO_EDITOR_SCRIPT: &str = "#!/bin/sh
# envhost: set as EDITOR, VISUAL and GIT_EDITOR in the bash environment.
echo \"envhost: no interactive editor here: nobody can type into it. Give the text on the command line instead (e.g. git commit -m 'message'), or write files with the editor environment.\" >&2
exit 1
";

/// The descriptor number of the report socket in bash: above the numbers
/// bash gives descriptors itself (10 and up for `{var}>` and for the copies
/// it keeps aside, 255 and down for its terminal and process
/// substitutions), within the limit on open files.
pub fn report_fd_number() -> i32 {
    const PREFERRED: i32 = 301;
    let soft = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map(|(soft, _)| soft)
        .unwrap_or(1024);
    if soft > PREFERRED as u64 + 1 {
        PREFERRED
    } else {
        i32::try_from(soft.saturating_sub(1))
            .unwrap_or(PREFERRED)
            .max(3)
    }
}

/// Where the prompt code's standard error goes (its trace under `set -x`,
/// the errors of a repair that failed): a sink no command uses for its own
/// output, so that the host can tell from `/proc` that the shell is still
/// inside its prompt code (its standard error hidden there).
pub const PLUMBING_SINK: &str = "/dev/zero";

/// Longest quoted command typed inline; longer ones use the command file.
const MAX_INLINE_COMMAND: usize = 3000;

/// `text` as a bash `$'…'` string with `\`, `'` and every control byte
/// escaped, if that is at most `limit` bytes long.
fn ansi_c_quote(text: &str, limit: usize) -> Option<String> {
    if text.len() + 3 > limit {
        return None;
    }
    let mut quoted = String::with_capacity(text.len() + 8);
    quoted.push_str("$'");
    for c in text.chars() {
        match c {
            '\\' => quoted.push_str("\\\\"),
            '\'' => quoted.push_str("\\'"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                quoted.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => quoted.push(c),
        }
        if quoted.len() + 1 > limit {
            return None;
        }
    }
    quoted.push('\'');
    Some(quoted)
}

/// Single-quotes `path` for bash.
fn shell_quote(path: &Path) -> String {
    let text = path.to_string_lossy();
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// The set-up script. See the module docs and [`super::marker`]. Plumbing
/// runs with its standard error on [`PLUMBING_SINK`] so that `set -x` does
/// not trace it, `$?` is
/// carried over from one command to the next, and `set -e` in a command
/// does not make the plumbing itself end the shell. Only a command that
/// could change the shell itself ([`super::state::could_change_state`]:
/// `exec`, `set`, `source`, the agent's functions, …) can break the
/// shell's streams, so only after one does the prompt code look at them
/// (standard input, which the shell reads its commands from, must be the
/// terminal; standard output must be open and may be a pipe whose output
/// is still on its way) and the next command line at standard error (the
/// prompt code's own redirection hides it from the prompt code); what they
/// repair or find they note in the report. After any other command the
/// prompt code only reports, and looks for text typed with `input` (one
/// `stat`). Without jobs (`\j`, the prompt escape for their number, is 0)
/// the report is a single write. The plumbing is read-only:
/// a command that sets `PROMPT_COMMAND` gets bash's "readonly variable"
/// error instead of silently breaking the session.
fn init_script(command_file: &Path, typed: &Path, report_fd: i32, state: Option<&Path>) -> String {
    format!(
        r#"# envhost bash set-up, sourced by the host's first line (no rc file runs)
PS1=''
export -n PS1
PS2=''
PS4='+ '
unset PS0 HISTFILE
set +o history +o histexpand
# Kept open for the session: redirecting to an open fd is a dup, where
# opening a file for every prompt was the costliest system call of a
# round trip.
exec {{__envhost_sink}}>{sink}
__envhost_seq=0
__envhost_last=0
__envhost_flags=
__envhost_notes=
__envhost_report={report_fd}
__envhost_state={state}
__envhost_dump={first_dump}
# Set (by the command line) for a command that could change the shell
# itself, and for the first prompt: its prompt looks at the shell's
# streams and dumps its state if asked. Other commands cannot have.
__envhost_look=1
__envhost_load() {{
  if (( $# > 1 )); then
    __envhost_cmd=$2
  else
    IFS= read -r -d '' __envhost_cmd < {command} || :
  fi
  __envhost_seq=$1
  if [[ $__envhost_flags == *x* ]]; then __envhost_cmd="set -x; $__envhost_cmd"; fi
  [[ $- == *e* ]] || return "$__envhost_last"
}}
__envhost_jobs='\j'
# Runs with its standard error hidden (`PROMPT_COMMAND` below): no trace,
# no error of its own reaches the command's output. The report is its
# last act. After most commands (not traced, unable to change the shell,
# nothing typed) it is only the report.
__envhost_prompt() {{
  __envhost_last=$?
  if [[ -n $__envhost_look || -e {typed} ]]; then
    __envhost_repair
  elif [[ ${{__envhost_jobs@P}} == 0 ]]; then
    printf '{head}{end}' "$__envhost_seq" "$__envhost_last" "$-" "$__envhost_notes" "$PWD" >&{report_fd}
  else
    __envhost_send "$-"
  fi
}}
__envhost_send() {{
  if [[ ${{__envhost_jobs@P}} == 0 ]]; then
    printf '{head}{end}' "$__envhost_seq" "$__envhost_last" "$1" "$__envhost_notes" "$PWD" >&"$__envhost_report"
  else
    {{ printf '{head}' "$__envhost_seq" "$__envhost_last" "$1" "$__envhost_notes" "$PWD"; jobs -l; printf '{end}'; }} >&"$__envhost_report"
  fi
}}
{repair}PROMPT_COMMAND='{{ __envhost_prompt; }} 2>&"$__envhost_sink"'
readonly PROMPT_COMMAND __envhost_jobs __envhost_sink __envhost_report __envhost_state
readonly -f __envhost_load __envhost_prompt __envhost_send __envhost_repair __envhost_stderr
"#,
        command = shell_quote(command_file),
        typed = shell_quote(typed),
        sink = PLUMBING_SINK,
        head = ReportFormat::HEAD,
        end = ReportFormat::END,
        first_dump = if state.is_some() { "1" } else { "" },
        state = state.map(shell_quote).unwrap_or_default(),
        repair = repair_functions(typed),
    )
}

/// The prompt code's repairs, part of [`init_script`]: after a command that
/// could change the shell, `__envhost_repair` (its streams, its tracing,
/// lines typed with `input` that it never read) and `__envhost_stderr`.
fn repair_functions(typed: &Path) -> String {
    format!(
        r#"# After a command that could change the shell or ran traced, or text
# typed into it; ends with the report.
__envhost_repair() {{
  # Tracing stays off until the next command starts (`__envhost_load`
  # turns it back on for the command): the report and the next command
  # line are not traced.
  __envhost_flags=$-
  set +x
  __envhost_look=
  __envhost_notes+=l
  unset __envhost_cmd
  {dump}
  [[ -t 0 ]] || {{ exec 0</dev/tty; __envhost_notes+=0; }}
  # Lines typed with `input` that the command never read: read next, the
  # shell would run them as commands. (A partial line is erased by the
  # kill character the host types before the next command.)
  if [[ -e {typed} ]] && read -t 0; then
    while read -t 0 && IFS= read -r __envhost_line; do :; done
    unset __envhost_line
    __envhost_notes+=d
  fi
  if [[ ! -t 1 ]]; then
    if [[ ! -e /dev/fd/1 ]]; then exec 1>/dev/tty; __envhost_notes+=1
    elif [[ -p /dev/fd/1 || -S /dev/fd/1 ]]; then __envhost_notes+=p; fi
  fi
  __envhost_send "$__envhost_flags"
  __envhost_notes=
}}
# Standard error, looked at from the command line after a command that
# could change the shell (the prompt code's own redirection hides it).
__envhost_stderr() {{
  __envhost_notes+=e
  __envhost_look=1
  if [[ -t 2 ]]; then :
  elif [[ ! -e /dev/fd/2 ]]; then exec 2>/dev/tty; __envhost_notes+=2
  elif [[ -p /dev/fd/2 || -S /dev/fd/2 ]]; then __envhost_notes+=P; fi
  :
}}
"#,
        typed = shell_quote(typed),
        dump = super::state::DUMP,
    )
}

/// The variables the shell starts with: the host's own minus secrets and
/// shell-control variables, plus the terminal hygiene settings.
pub fn shell_environment(
    secrets: &SecretPolicy,
    files: &SessionFiles,
) -> Vec<(OsString, OsString)> {
    let mut vars: Vec<(OsString, OsString)> = secrets
        .filtered_environment()
        .into_iter()
        .filter(|(name, _)| {
            !SHELL_CONTROL_VARIABLES
                .iter()
                .any(|control| name.as_os_str() == *control)
        })
        .collect();
    let editor = files.no_editor.clone().into_os_string();
    let settings: [(&str, OsString); 10] = [
        ("PS1", "".into()),
        ("TERM", TERM.into()),
        ("PAGER", "cat".into()),
        ("GIT_PAGER", "cat".into()),
        ("MANPAGER", "cat".into()),
        ("SYSTEMD_PAGER", "cat".into()),
        ("EDITOR", editor.clone()),
        ("VISUAL", editor.clone()),
        ("GIT_EDITOR", editor),
        // git asks for credentials on the terminal; fail instead.
        ("GIT_TERMINAL_PROMPT", "0".into()),
    ];
    for (name, value) in settings {
        vars.retain(|(existing, _)| existing.as_os_str() != name);
        vars.push((name.into(), value));
    }
    vars
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_private_and_removed_on_drop() {
        use std::os::unix::fs::PermissionsExt;
        let mut files = SessionFiles::create(&std::env::temp_dir(), 301).unwrap();
        let dir = files.dir.path().to_owned();
        let mode = fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let long = "x".repeat(MAX_INLINE_COMMAND);
        let line = files.command_line(7, &long).unwrap();
        assert_eq!(line, "__envhost_load 7; eval \"$__envhost_cmd\" 301>&-\n");
        files
            .command_line(8, &"y".repeat(MAX_INLINE_COMMAND * 2))
            .unwrap();
        files.command_line(9, &long).unwrap();
        let content = fs::read(files.command_path()).unwrap();
        assert!(content.starts_with(format!("{long}\0").as_bytes()));
        let line = files.command_line(10, "ls").unwrap();
        assert_eq!(
            line,
            "__envhost_load 10 $'ls'; eval \"$__envhost_cmd\" 301>&-\n"
        );
        // After a clean prompt, a short command needs no call into the
        // plumbing; for one line only, and a long one still reads its file.
        files.nothing_to_carry_over();
        let line = files.command_line(11, "ls").unwrap();
        assert_eq!(line, "__envhost_seq=11; eval $'ls' 301>&-\n");
        let line = files.command_line(12, "ls").unwrap();
        assert_eq!(
            line,
            "__envhost_load 12 $'ls'; eval \"$__envhost_cmd\" 301>&-\n"
        );
        files.nothing_to_carry_over();
        let line = files.command_line(13, &long).unwrap();
        assert_eq!(line, "__envhost_load 13; eval \"$__envhost_cmd\" 301>&-\n");
        let init = fs::read_to_string(&files.init).unwrap();
        assert!(init.contains("PROMPT_COMMAND="));
        assert!(
            !init.contains('\x1b'),
            "the escape byte must not be in the script"
        );
        drop(files);
        assert!(!dir.exists());
    }

    #[test]
    fn inline_commands_are_one_line_without_terminal_controls() {
        let quoted = ansi_c_quote("a'b\\c\nd\te\u{7f}\u{3}é", 100).unwrap();
        assert_eq!(quoted, r"$'a\'b\\c\x0ad\x09e\x7f\x03é'");
        assert!(quoted.bytes().all(|b| b >= 0x20 && b != 0x7f));
        assert_eq!(ansi_c_quote(&"\n".repeat(30), 100), None);
    }

    #[test]
    fn quoting_survives_single_quotes() {
        assert_eq!(shell_quote(Path::new("/tmp/it's")), r"'/tmp/it'\''s'");
    }

    #[test]
    fn environment_drops_secrets_and_sets_hygiene() {
        let files = SessionFiles::create(&std::env::temp_dir(), 301).unwrap();
        let vars = shell_environment(&SecretPolicy::default(), &files);
        let get = |name: &str| {
            vars.iter()
                .find(|(n, _)| n.as_os_str() == name)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(get("TERM"), Some("dumb".into()));
        assert_eq!(get("PAGER"), Some("cat".into()));
        assert_eq!(get("PROMPT_COMMAND"), None);
        assert_eq!(
            vars.iter().filter(|(n, _)| n.as_os_str() == "TERM").count(),
            1
        );
    }
}
