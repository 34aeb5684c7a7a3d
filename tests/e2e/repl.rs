//! `envhost repl`, the front end for people: driven through a pipe the way
//! `scripts/demo` drives it, and in a real pseudo-terminal the way a person
//! types into it (keys, Tab, Up, Ctrl-C, Ctrl-D).

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use portable_pty::{CommandBuilder, PtySize, native_pty_system};

use crate::harness::{Project, envhost_binary, wait_until_dead};

/// Runs the REPL on `project` with `input`; returns (exit code, stdout).
fn repl(project: &Project, input: &str) -> (Option<i32>, String) {
    let mut child = Command::new(envhost_binary())
        .args(["repl", "--project"])
        .arg(project.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start envhost repl");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write the session");
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().expect("try_wait").is_none() {
        assert!(Instant::now() < deadline, "the REPL did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().expect("output");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

#[test]
fn commands_blocks_and_meta_commands_work_through_a_pipe() {
    let project = Project::new();
    let session = "\
bash: echo hello from bash
python:
def f(x):

    return x + 1

f(41)
.
:screen
this line has no environment
:quit
bash: echo never runs
";
    let (code, out) = repl(&project, session);
    assert_eq!(code, Some(0), "{out}");
    // The first screen, then each command echoed, its status and output.
    assert!(
        out.starts_with("envhost repl: environments bash, python, editor."),
        "{out}"
    );
    assert!(
        out.contains(
            ">>> bash:\n>>>   echo hello from bash\n---- bash: ok ----\nhello from bash\n"
        ),
        "{out}"
    );
    // A multi-line block with a blank line inside a function.
    assert!(out.contains(">>>   def f(x):\n"), "{out}");
    assert!(out.contains("---- python: ok ----\n42\n"), "{out}");
    // After a command, only the sections that changed are printed.
    let after_python = &out[out.find("---- python: ok ----").unwrap()..];
    assert!(
        after_python.contains("PYTHON ===================="),
        "{out}"
    );
    assert!(after_python.contains("(unchanged: bash, editor)"), "{out}");
    // :screen prints every section again.
    let tail = &out[out.rfind("(unchanged: bash, editor)").unwrap()..];
    assert!(
        tail.contains("BASH ====================") && tail.contains("EDITOR ===================="),
        "{out}"
    );
    assert!(
        out.contains("Start the line with an environment name and a colon"),
        "{out}"
    );
    // :quit stopped reading.
    assert!(!out.contains("never runs\n---- bash"), "{out}");
}

/// Variables the figure opener may be given (the desktop's, the user's,
/// the locale's), and those a shell sets for itself.
fn an_openers_variable(name: &str) -> bool {
    [
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "TMPDIR",
        "TZ",
        "LANG",
        "LANGUAGE",
        "DISPLAY",
        "XAUTHORITY",
        "WAYLAND_DISPLAY",
        "DBUS_SESSION_BUS_ADDRESS",
        "DESKTOP_SESSION",
        "KDE_FULL_SESSION",
        "KDE_SESSION_VERSION",
        "GNOME_DESKTOP_SESSION_ID",
        "MATE_DESKTOP_SESSION_ID",
        "BROWSER",
        "PWD",
        "OLDPWD",
        "SHLVL",
        "_",
    ]
    .contains(&name)
        || name.starts_with("LC_")
        || name.starts_with("XDG_")
}

#[test]
fn the_figure_opener_gets_the_desktops_variables_and_no_secret() {
    let project = Project::new();
    let tools = tempfile::tempdir().expect("temp dir");
    let record = tools.path().join("environment.txt");
    let opener = tools.path().join("xdg-open");
    // A stand-in for xdg-open that writes down the environment it got.
    std::fs::write(
        &opener,
        format!(
            "#!/bin/sh\n/usr/bin/env -0 > '{record}.part'\n/bin/mv '{record}.part' '{record}'\n",
            record = record.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&opener, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        tools.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = Command::new(envhost_binary())
        .args([
            "repl",
            "--open-figures",
            "--pass-env",
            "DEMO_TOKEN",
            "--project",
        ])
        .arg(project.path())
        .env("PATH", &path)
        .env("HOME", tools.path())
        .env("LANG", "C.UTF-8")
        .env("DISPLAY", ":42")
        .env("XDG_RUNTIME_DIR", tools.path())
        .env("OPENAI_API_KEY", "sk-withheld-marker")
        .env("DEMO_TOKEN", "passed-to-commands-marker")
        .env("XDG_SESSION_TOKEN", "xdg-secret-marker")
        .env("DEMO_PLAIN", "not-needed-marker")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start envhost repl");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(
            b"bash: echo \"$DEMO_TOKEN\"; printf '\\x89PNG\\r\\n\\x1a\\n' > dot.png\n:quit\n",
        )
        .expect("write the session");
    let output = child.wait_with_output().expect("the REPL's output");
    let stdout = String::from_utf8_lossy(&output.stdout);
    // The environments get what --pass-env passes; the opener does not.
    assert!(stdout.contains("passed-to-commands-marker"), "{stdout}");
    assert!(stdout.contains("image: "), "{stdout}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !record.exists() && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
    let environment = std::fs::read_to_string(&record).expect("the opener was run");
    assert!(!environment.contains("marker"), "{environment}");
    for needed in [
        format!("PATH={path}"),
        format!("HOME={}", tools.path().display()),
        "LANG=C.UTF-8".to_owned(),
        "DISPLAY=:42".to_owned(),
        format!("XDG_RUNTIME_DIR={}", tools.path().display()),
    ] {
        assert!(
            environment.split('\0').any(|entry| entry == needed),
            "{needed} missing:\n{environment}"
        );
    }
    for entry in environment.split('\0').filter(|entry| !entry.is_empty()) {
        let name = entry.split_once('=').map_or(entry, |(name, _)| name);
        assert!(an_openers_variable(name), "the opener got {entry}");
    }
}

#[test]
fn meta_commands_with_nothing_to_act_on_say_what_to_do_and_the_repl_goes_on() {
    let project = Project::new();
    let session = ":wait\n:input yes\\n\n:restart\n:wait nowhere\n:frobnicate\nbash: echo after\n";
    let (code, out) = repl(&project, session);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(
        out.matches("Nothing is running: :wait, :input and :interrupt go on with a command that was left running").count(),
        2,
        "{out}"
    );
    assert!(
        out.contains(":restart takes the environment to restart, e.g. :restart python"),
        "{out}"
    );
    assert!(
        out.contains("Unknown environment: nowhere\nAvailable: bash, editor, python"),
        "{out}"
    );
    assert!(
        out.contains("Unknown REPL command :frobnicate. The REPL's commands: "),
        "{out}"
    );
    assert!(out.contains("---- bash: ok ----\nafter\n"), "{out}");
}

#[test]
fn end_of_input_stops_the_repl_and_its_shell() {
    let project = Project::new();
    let mut child = Command::new(envhost_binary())
        .args(["repl", "--project"])
        .arg(project.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start envhost repl");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(b"bash: sleep 300 & echo $$ $! > pids.tmp && mv pids.tmp pids\n")
        .expect("write the session");
    let pids_file = project.path().join("pids");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !pids_file.exists() {
        assert!(Instant::now() < deadline, "the command did not run");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The numbers the shell sees are its namespace's: the test's own, while
    // the REPL lives.
    let pids: Vec<i32> = project
        .read("pids")
        .split_whitespace()
        .map(|pid| crate::harness::outer_pid(child.id(), pid.parse().expect("pid")))
        .collect();
    assert_eq!(pids.len(), 2);
    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        assert!(Instant::now() < deadline, "the REPL did not end");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
    for pid in pids {
        assert!(
            crate::harness::wait_until_dead(pid, Duration::from_secs(10)),
            "process {pid} (the shell or its job) outlived the REPL"
        );
    }
}

#[test]
fn piped_output_has_no_escape_sequences() {
    let project = Project::new();
    let (_, out) = repl(&project, "bash: echo plain\nbash: false\n:screen\n");
    assert!(out.contains("---- bash: failed ----"), "{out}");
    assert!(!out.contains('\u{1b}'), "{out:?}");
}

// ---- At a terminal --------------------------------------------------------

/// How long the REPL may take to show what a test waits for.
const SHOWN_WITHIN: Duration = Duration::from_secs(60);

/// `envhost repl` in a pseudo-terminal of its own, as a person runs it.
struct Terminal {
    child: Box<dyn portable_pty::Child + Send + Sync>,
    writer: Box<dyn Write + Send>,
    /// Everything the terminal showed, escape sequences included.
    screen: Arc<Mutex<Vec<u8>>>,
    /// Where in `screen` the next [`Terminal::wait_for`] starts looking.
    mark: usize,
    _master: Box<dyn portable_pty::MasterPty + Send>,
}

impl Terminal {
    /// Starts the REPL on `project` with its history kept under `state`;
    /// colour is on unless `env` says otherwise.
    fn start(project: &Project, state: &Path, env: &[(&str, &str)]) -> Terminal {
        Terminal::start_with(project, state, env, &[])
    }

    /// Like [`start`](Terminal::start), with more of `envhost repl`'s
    /// options.
    fn start_with(
        project: &Project,
        state: &Path,
        env: &[(&str, &str)],
        options: &[&str],
    ) -> Terminal {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: 50,
                cols: 200,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("open a pseudo-terminal");
        let mut command = CommandBuilder::new(envhost_binary());
        command.args(["repl", "--project"]);
        command.arg(project.path());
        command.args(options);
        command.env("XDG_STATE_HOME", state);
        command.env("HOME", state);
        command.env("TERM", "xterm-256color");
        command.env_remove("NO_COLOR");
        for (key, value) in env {
            command.env(key, value);
        }
        let child = pair
            .slave
            .spawn_command(command)
            .expect("start envhost repl");
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().expect("terminal reader");
        let writer = pair.master.take_writer().expect("terminal writer");
        let screen = Arc::new(Mutex::new(Vec::new()));
        let shown = Arc::clone(&screen);
        thread::spawn(move || {
            let mut buffer = [0u8; 65536];
            while let Ok(n) = reader.read(&mut buffer) {
                if n == 0 {
                    return;
                }
                shown.lock().unwrap().extend_from_slice(&buffer[..n]);
            }
        });
        let mut terminal = Terminal {
            child,
            writer,
            screen,
            mark: 0,
            _master: pair.master,
        };
        terminal.wait_for("envhost> ");
        terminal
    }

    /// Types `keys` as a person would (`\r` is Enter, `\t` Tab, `\x1b[A`
    /// Up, `\x03` Ctrl-C, `\x04` Ctrl-D).
    fn keys(&mut self, keys: &str) {
        self.writer
            .write_all(keys.as_bytes())
            .expect("type into the terminal");
        self.writer.flush().expect("flush the terminal");
    }

    /// Types a line and Enter, and waits for its answer.
    fn enter(&mut self, line: &str) -> String {
        self.keys(&format!("{line}\r"));
        self.answer()
    }

    /// Waits for an answer: its status line, then the next prompt (the line
    /// editor redraws the prompt as keys are typed, so the prompt alone
    /// does not say that an answer came).
    fn answer(&mut self) -> String {
        let status = self.wait_for("\n---- ");
        status + &self.wait_for_any(&["envhost> ", "envhost ("])
    }

    /// Waits until the terminal shows `needle` (escape sequences removed)
    /// after what earlier waits consumed; returns the text up to it.
    fn wait_for(&mut self, needle: &str) -> String {
        self.wait_for_any(&[needle])
    }

    /// Like [`wait_for`](Terminal::wait_for), for the first of `needles`.
    fn wait_for_any(&mut self, needles: &[&str]) -> String {
        let deadline = Instant::now() + SHOWN_WITHIN;
        loop {
            let raw = self.screen.lock().unwrap()[self.mark..].to_vec();
            let text = plain(&raw);
            let first = needles
                .iter()
                .filter_map(|needle| text.find(needle).map(|at| (at, needle.len())))
                .min();
            if let Some((found, length)) = first {
                let needle_end = found + length;
                // Consume up to the needle in the raw bytes too.
                let mut consumed = self.mark;
                for end in 1..=raw.len() {
                    if plain(&raw[..end]).len() >= needle_end {
                        consumed = self.mark + end;
                        break;
                    }
                }
                self.mark = consumed;
                return text[..needle_end].to_owned();
            }
            assert!(
                Instant::now() < deadline,
                "the terminal never showed {needles:?}; it showed:\n{text}"
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Everything shown so far, escape sequences included.
    fn raw(&self) -> String {
        String::from_utf8_lossy(&self.screen.lock().unwrap()).into_owned()
    }

    /// Waits for the REPL to end; its exit code.
    fn exit_code(&mut self) -> u32 {
        let deadline = Instant::now() + SHOWN_WITHIN;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status.exit_code();
            }
            assert!(Instant::now() < deadline, "the REPL did not end");
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait()
            && let Some(pid) = self.child.process_id()
        {
            // SIGTERM: the REPL stops its environments and their processes.
            let pid = nix::unistd::Pid::from_raw(pid as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            if !wait_until_dead(pid.as_raw(), Duration::from_secs(20)) {
                let _ = self.child.kill();
            }
            let _ = self.child.wait();
        }
    }
}

/// Terminal output as a person reads it: escape sequences and carriage
/// returns removed.
fn plain(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                Some('[') => {
                    // CSI: parameters, then one final byte in @..~.
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                Some(']') => {
                    // OSC: up to BEL or ESC \.
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' || (c == '\u{1b}' && chars.next_if_eq(&'\\').is_some()) {
                            break;
                        }
                    }
                }
                _ => {}
            },
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}

/// A folder for the REPL's history, outside the real home.
fn state_folder() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("envhost-state-")
        .tempdir()
        .expect("a state folder")
}

#[test]
fn up_recalls_the_last_command_and_history_survives_a_restart() {
    let project = Project::new();
    let state = state_folder();
    let mut terminal = Terminal::start(&project, state.path(), &[]);
    let answer = terminal.enter("bash: echo ran-$((40+2))");
    assert!(answer.contains("---- bash: ok ----\nran-42\n"), "{answer}");
    terminal.keys("\u{1b}[A");
    terminal.wait_for("bash: echo ran-$((40+2))");
    let answer = terminal.enter("");
    assert!(
        answer.contains("ran-42"),
        "Up and Enter did not run it again:\n{answer}"
    );
    terminal.keys("\u{4}");
    assert_eq!(terminal.exit_code(), 0, "Ctrl-D at an empty prompt leaves");
    let history = std::fs::read_to_string(state.path().join("envhost/history")).unwrap();
    assert!(history.contains("bash: echo ran-$((40+2))"), "{history}");

    // A new session recalls it.
    let mut terminal = Terminal::start(&project, state.path(), &[]);
    terminal.keys("\u{1b}[A");
    terminal.wait_for("bash: echo ran-$((40+2))");
    let answer = terminal.enter("");
    assert!(answer.contains("---- bash: ok ----\nran-42"), "{answer}");
}

#[test]
fn ctrl_r_finds_an_older_command() {
    let project = Project::new();
    let state = state_folder();
    let mut terminal = Terminal::start(&project, state.path(), &[]);
    terminal.enter("bash: echo needle-$((6*7))");
    terminal.enter("bash: echo hay");
    terminal.enter("python: print('more hay')");
    terminal.keys("\u{12}needle");
    terminal.wait_for("bash: echo needle-$((6*7))");
    let answer = terminal.enter("");
    assert!(
        answer.contains("---- bash: ok ----\nneedle-42\n"),
        "{answer}"
    );
}

#[test]
fn up_after_an_environment_recalls_only_its_commands() {
    let project = Project::new();
    let state = state_folder();
    let mut terminal = Terminal::start(&project, state.path(), &[]);
    terminal.enter("python: print('py' + 'thon')");
    terminal.enter("bash: echo shell-one");
    terminal.enter("bash: echo shell-two");
    terminal.keys("python:\u{1b}[A");
    terminal.wait_for("python: print('py' + 'thon')");
    let answer = terminal.enter("");
    assert!(
        answer.contains("---- python: ok ----\npython\n"),
        "{answer}"
    );
}

#[test]
fn tab_completes_environments_commands_and_project_files() {
    let project = Project::new();
    project.write("notes/today.txt", "alpha\nbeta\n");
    let state = state_folder();
    let mut terminal = Terminal::start(&project, state.path(), &[]);
    terminal.keys("ba\t");
    terminal.wait_for("bash: ");
    let answer = terminal.enter("echo tabbed");
    assert!(answer.contains("---- bash: ok ----\ntabbed\n"), "{answer}");

    terminal.keys("editor: vi\t");
    terminal.wait_for("editor: view ");
    terminal.keys("no\t");
    terminal.wait_for("notes/");
    terminal.keys("to\t");
    terminal.wait_for("notes/today.txt ");
    let answer = terminal.enter("/alpha/ /beta/");
    assert!(answer.contains("---- editor: ok ----"), "{answer}");
    assert!(answer.contains("notes/today.txt"), "{answer}");
}

#[test]
fn tab_completes_a_plugins_environment_and_its_commands() {
    let project = Project::new();
    crate::plugins::install(&project, &[("timer", "timer")]);
    let state = state_folder();
    let mut terminal = Terminal::start(&project, state.path(), &[]);
    terminal.keys("ti\t");
    terminal.wait_for("timer: ");
    terminal.keys("res\t");
    terminal.wait_for("timer: reset");
    let answer = terminal.enter("");
    assert!(answer.contains("---- timer: ok ----"), "{answer}");
}

#[test]
fn blocks_run_when_they_are_complete() {
    let project = Project::new();
    let state = state_folder();
    let mut terminal = Terminal::start(&project, state.path(), &[]);
    // A python function over several lines ends at an empty line.
    terminal.keys("python: def double(x):\r    y = 2 * x\r");
    terminal.keys("    return y\r");
    let answer = terminal.enter("");
    assert!(answer.contains("---- python: ok ----"), "{answer}");
    let answer = terminal.enter("python: double(21)");
    assert!(answer.contains("---- python: ok ----\n42\n"), "{answer}");

    // A here-document ends at its delimiter.
    terminal.keys("bash: cat <<'END' > here.txt\rfirst $HOME\r");
    let answer = terminal.enter("END");
    assert!(answer.contains("---- bash: ok ----"), "{answer}");
    assert_eq!(project.read("here.txt"), "first $HOME\n");

    // The editor's content ends at a line holding a single dot.
    terminal.keys("editor: create made.txt\rone\r\rthree\r");
    let answer = terminal.enter(".");
    assert!(answer.contains("---- editor: ok ----"), "{answer}");
    assert_eq!(project.read("made.txt"), "one\n\nthree\n");

    // Up and Down move between a block's lines before the history.
    // (Up, Ctrl-E, a comment on the first line, Down, Ctrl-E, Enter.)
    terminal.keys("python: def seven():\r    return 7");
    terminal.keys("\u{1b}[A\u{5} # edited\u{1b}[B\u{5}\r");
    let answer = terminal.enter("");
    assert!(answer.contains("---- python: ok ----"), "{answer}");
    let answer = terminal.enter("python: seven()");
    assert!(answer.contains("---- python: ok ----\n7\n"), "{answer}");
    let history = std::fs::read_to_string(state.path().join("envhost/history")).unwrap();
    assert!(
        history.contains(r"python: def seven(): # edited\n    return 7\n"),
        "{history}"
    );

    // Alt-Enter runs a block as it stands.
    terminal.keys("bash: for i in 1 2; do\recho item-$i; done");
    terminal.keys("\u{1b}\r");
    let answer = terminal.answer();
    assert!(answer.contains("item-1\nitem-2\n"), "{answer}");
}

#[test]
fn ctrl_c_interrupts_the_command_or_clears_the_line() {
    let project = Project::new();
    let state = state_folder();
    let mut terminal = Terminal::start(&project, state.path(), &[]);
    terminal.keys("bash: cd /tmp; sleep 60; echo never\r");
    terminal.wait_for("sleep 60; echo never");
    thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    terminal.keys("\u{3}");
    let answer = terminal.answer();
    assert!(started.elapsed() < Duration::from_secs(30), "{answer}");
    assert!(answer.contains("---- bash: failed ----"), "{answer}");
    assert!(!answer.contains("never"), "{answer}");
    // The shell kept its state.
    let answer = terminal.enter("bash: pwd");
    assert!(answer.contains("---- bash: ok ----\n/tmp\n"), "{answer}");

    // At the prompt, Ctrl-C clears the line: what was typed never runs.
    // (Keys typed in the same instant as Ctrl-C are dropped with the line,
    // so the test waits for the new prompt, as a person would.)
    terminal.keys("bash: echo $((1000+1))");
    terminal.wait_for("$((1000+1))");
    terminal.keys("\u{3}");
    terminal.wait_for("envhost> ");
    let answer = terminal.enter("bash: echo next");
    assert!(answer.contains("---- bash: ok ----\nnext\n"), "{answer}");
    assert!(!terminal.raw().contains("1001"), "{}", terminal.raw());
}

#[test]
fn colour_for_people_and_none_with_no_color() {
    /// An SGR sequence, the kind that colours text.
    fn coloured(raw: &str) -> bool {
        raw.split('\u{1b}').skip(1).any(|sequence| {
            sequence.strip_prefix('[').is_some_and(|rest| {
                let end = rest.find(|c: char| !(c.is_ascii_digit() || c == ';'));
                end.is_some_and(|end| rest[end..].starts_with('m'))
            })
        })
    }
    let project = Project::new();
    let state = state_folder();
    let mut terminal = Terminal::start(&project, state.path(), &[]);
    terminal.enter("bash: false");
    assert!(coloured(&terminal.raw()), "{:?}", terminal.raw());

    let mut terminal = Terminal::start(&project, state.path(), &[("NO_COLOR", "1")]);
    let answer = terminal.enter("bash: false");
    assert!(answer.contains("---- bash: failed ----"), "{answer}");
    assert!(!coloured(&terminal.raw()), "{:?}", terminal.raw());
}

#[test]
fn a_script_read_from_a_pipe_is_plain_even_on_a_terminal() {
    let project = Project::new();
    let terminal = nix::pty::openpty(None, None).expect("open a pseudo-terminal");
    let mut child = Command::new(envhost_binary())
        .args(["repl", "--project"])
        .arg(project.path())
        .env("TERM", "xterm-256color")
        .env_remove("NO_COLOR")
        .stdin(Stdio::piped())
        .stdout(std::fs::File::from(terminal.slave))
        .stderr(Stdio::null())
        .spawn()
        .expect("start envhost repl");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"bash: echo scripted\nbash: false\n")
        .expect("write the session");
    let mut master = std::fs::File::from(terminal.master);
    let mut shown = Vec::new();
    let deadline = Instant::now() + SHOWN_WITHIN;
    let mut buffer = [0u8; 65536];
    while !String::from_utf8_lossy(&shown).contains("---- bash: failed ----") {
        assert!(
            Instant::now() < deadline,
            "{}",
            String::from_utf8_lossy(&shown)
        );
        match master.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => shown.extend_from_slice(&buffer[..n]),
        }
    }
    let status = child.wait().expect("wait");
    assert!(status.success());
    let shown = String::from_utf8_lossy(&shown);
    assert!(shown.contains(">>>   echo scripted"), "{shown}");
    assert!(!shown.contains('\u{1b}'), "{shown:?}");
}

/// bash leaves a command running when it waits for input or runs past
/// `--yield-after`; the REPL follows it, types into it and stops it.
#[test]
fn a_command_left_running_takes_input_wait_and_ctrl_c() {
    let project = Project::new();
    let state = state_folder();
    let mut terminal = Terminal::start_with(&project, state.path(), &[], &["--yield-after", "1s"]);

    // A prompt for input leaves the command running; the prompt names it.
    terminal.keys("bash: read -p 'name? ' name; echo hello-$name\r");
    let shown = terminal.wait_for("envhost (bash running)> ");
    assert!(shown.contains("---- bash: running ----"), "{shown}");
    assert!(shown.contains("name? "), "{shown}");
    assert!(shown.contains("it seems to wait for input"), "{shown}");
    // Other environments take commands meanwhile.
    let answer = terminal.enter("python: 6 * 7");
    assert!(answer.contains("---- python: ok ----\n42\n"), "{answer}");
    assert!(answer.ends_with("envhost ("), "{answer}");
    // :input answers the prompt, and the REPL follows the command to its end.
    terminal.keys(":input world\\n\r");
    let shown = terminal.wait_for("---- bash: ok ----") + &terminal.wait_for("envhost> ");
    assert!(shown.contains("hello-world"), "{shown}");

    // Past --yield-after a command is left running; :wait follows it again.
    terminal.keys("bash: sleep 3; echo slept\r");
    terminal.wait_for("envhost (bash running)> ");
    terminal.keys(":wait\r");
    let shown = terminal.wait_for("---- bash: ok ----") + &terminal.wait_for("envhost> ");
    assert!(shown.contains("slept"), "{shown}");

    // Ctrl-C while :wait follows a command stops that command.
    terminal.keys("bash: sleep 60; echo never\r");
    terminal.wait_for("envhost (bash running)> ");
    terminal.keys(":wait\r");
    terminal.wait_for("---- bash: running ----");
    thread::sleep(Duration::from_millis(500));
    terminal.keys("\u{3}");
    let shown = terminal.wait_for("---- bash: failed ----");
    assert!(!shown.contains("never"), "{shown}");
    terminal.wait_for("envhost> ");
    let answer = terminal.enter("bash: echo still-here");
    assert!(
        answer.contains("---- bash: ok ----\nstill-here\n"),
        "{answer}"
    );
}

/// The same as a person sees it with a plugin's program, which yields on
/// main today: sqlite3 through the sqlite plugin.
#[test]
fn a_plugin_command_left_running_is_followed_by_wait_and_stopped_by_ctrl_c() {
    let test = "a_plugin_command_left_running_is_followed_by_wait_and_stopped_by_ctrl_c";
    if crate::capabilities::skip(test, "sqlite3") {
        return;
    }
    let counting = |n: u64| {
        format!(
            "with recursive c(x) as (select 1 union all select x + 1 from c limit {n}) \
             select count(*) as n from c;"
        )
    };
    let project = Project::new();
    crate::plugins::install(&project, &[("sqlite", "sqlite")]);
    project.write(
        "env/envhost.toml",
        "[plugins.sqlite]\nprograms = [\"sqlite3\"]\n",
    );
    let state = state_folder();
    let mut terminal = Terminal::start_with(&project, state.path(), &[], &["--yield-after", "1s"]);

    // Past --yield-after the query is left running and the prompt names it;
    // other environments take commands meanwhile.
    terminal.keys(&format!("sqlite: {}\r", counting(20_000_000)));
    let shown = terminal.wait_for("envhost (sqlite running)> ");
    assert!(shown.contains("---- sqlite: running ----"), "{shown}");
    assert!(shown.contains("sqlite is still running"), "{shown}");
    let answer = terminal.enter("bash: echo meanwhile");
    assert!(
        answer.contains("---- bash: ok ----\nmeanwhile\n"),
        "{answer}"
    );
    // :wait follows it to its end.
    terminal.keys(":wait\r");
    let shown = terminal.wait_for("---- sqlite: ok ----") + &terminal.wait_for("envhost> ");
    assert!(shown.contains("20000000"), "{shown}");

    // Ctrl-C while :wait follows a query stops it; sqlite3 serves on.
    terminal.keys(&format!("sqlite: {}\r", counting(10_000_000_000)));
    terminal.wait_for("envhost (sqlite running)> ");
    terminal.keys(":wait\r");
    terminal.wait_for("---- sqlite: running ----");
    thread::sleep(Duration::from_millis(500));
    terminal.keys("\u{3}");
    terminal.wait_for("---- sqlite: ");
    terminal.wait_for("envhost> ");
    let answer = terminal.enter("sqlite: select 6 * 7;");
    assert!(answer.contains("---- sqlite: ok ----"), "{answer}");
    assert!(answer.contains("42"), "{answer}");
}

/// `bash:NAME:` lines run in that instance, `:close` ends it (issue #34).
#[test]
fn an_instance_line_runs_in_its_own_shell_and_close_ends_it() {
    let project = Project::new();
    let session = "\
bash:server: cd /tmp && X=1 && echo opened
bash: echo \"[$X]\"
bash:server: echo $X; pwd
:close bash:server
:close bash
:quit
";
    let (code, out) = repl(&project, session);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("---- bash:server: ok ----\nopened\n"), "{out}");
    assert!(out.contains("---- bash: ok ----\n[]\n"), "{out}");
    assert!(
        out.contains("---- bash:server: ok ----\n1\n/tmp\n"),
        "{out}"
    );
    assert!(out.contains("BASH:SERVER ===================="), "{out}");
    assert!(
        out.contains("Closed bash:server: ended the shell."),
        "{out}"
    );
    assert!(
        out.contains("bash is the default bash and cannot be closed"),
        "{out}"
    );
}
