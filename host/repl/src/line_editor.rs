//! The line editor a person types into: rustyline, run on its own thread so
//! that the REPL can wait for a line and for signals together.
//!
//! It owns the terminal while a line is read (raw mode: Ctrl-C and Ctrl-D
//! arrive as keys) and only then; while a command runs the terminal is as
//! the REPL found it, so Ctrl-C there is a signal the REPL acts on. Keys
//! beyond readline's usual ones (cursor movement, Ctrl-R search, Tab):
//! Enter runs a complete entry and otherwise adds a line to the block
//! (`blocks` says which); Alt-Enter runs the block as it stands; Up and
//! Down walk the history as `history` says, or move between the lines of
//! a block. History is appended to its file after every entry, so two
//! sessions at once, or one that is killed, lose nothing.
//!
//! This module must not run commands; it hands each entry to the REPL.

use std::borrow::Cow;
use std::io;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;

use nix::sys::termios::{SetArg, Termios, tcgetattr, tcsetattr};
use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::{CmdKind, Highlighter};
use rustyline::hint::Hinter;
use rustyline::history::FileHistory;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{
    Behavior, Cmd, ColorMode, CompletionType, ConditionalEventHandler, Config, Context, Editor,
    Event, EventContext, EventHandler, Helper, KeyCode, KeyEvent, Modifiers, Movement, RepeatCount,
};

use super::blocks::Blocks;
use super::colour::Colours;
use super::completion::Completions;
use super::history::{self, Walk};
use super::input::Input;

/// What the editor needs to know about the session.
pub struct Setup {
    pub completions: Completions,
    pub blocks: Blocks,
    pub colours: Colours,
    /// The history file, when there is a place for one.
    pub history: Option<PathBuf>,
}

/// The editor's thread: asked for one entry at a time, it answers on the
/// REPL's input channel.
pub struct LineEditor {
    requests: Sender<String>,
    /// The terminal's settings before the editor started, put back when
    /// the REPL ends (even while the editor waits in raw mode).
    terminal: Option<Termios>,
}

impl LineEditor {
    /// Starts the editor's thread; entries and the end of input go to
    /// `answers`.
    pub fn start(setup: Setup, answers: SyncSender<Input>) -> io::Result<Self> {
        let terminal = tcgetattr(io::stdin()).ok();
        let (requests, prompts) = mpsc::channel::<String>();
        let (ready, started) = mpsc::channel::<Result<(), String>>();
        thread::Builder::new()
            .name("envhost-repl-editor".into())
            .spawn(move || match editor(setup) {
                Ok((editor, walk, history)) => {
                    let _ = ready.send(Ok(()));
                    serve(editor, walk, history, prompts, answers);
                }
                Err(err) => {
                    let _ = ready.send(Err(err.to_string()));
                }
            })?;
        match started.recv() {
            Ok(Ok(())) => Ok(LineEditor { requests, terminal }),
            Ok(Err(err)) => Err(io::Error::other(err)),
            Err(_) => Err(io::Error::other("the line editor's thread ended")),
        }
    }

    /// Asks for the next entry; it arrives on the input channel.
    pub fn read(&self, prompt: String) -> bool {
        self.requests.send(prompt).is_ok()
    }
}

impl Drop for LineEditor {
    fn drop(&mut self) {
        if let Some(terminal) = &self.terminal {
            let _ = tcsetattr(io::stdin(), SetArg::TCSANOW, terminal);
        }
    }
}

type ReplEditor = Editor<ReplHelper, FileHistory>;

fn editor(setup: Setup) -> rustyline::Result<(ReplEditor, Arc<Mutex<Walk>>, Option<PathBuf>)> {
    let config = Config::builder()
        .behavior(Behavior::PreferTerm)
        .completion_type(CompletionType::List)
        .max_history_size(history::MAX_ENTRIES)?
        .history_ignore_dups(true)?
        .history_ignore_space(true)
        .auto_add_history(false)
        .color_mode(if setup.colours.enabled() {
            ColorMode::Enabled
        } else {
            ColorMode::Disabled
        })
        .build();
    let history = FileHistory::with_config(&config);
    let mut editor = ReplEditor::with_history(config, history)?;
    let mut history_file = setup.history;
    if let Some(path) = &history_file {
        let loaded = history::prepare(path)
            .map_err(ReadlineError::Io)
            .and_then(|()| editor.load_history(path));
        if let Err(err) = loaded {
            eprintln!(
                "envhost: the REPL's history ({}) cannot be used: {err}; this session's is not kept",
                path.display()
            );
            history_file = None;
        }
    }
    let walk = Arc::new(Mutex::new(Walk::new(
        editor.history().iter().cloned().collect(),
    )));
    editor.set_helper(Some(ReplHelper {
        completions: setup.completions,
        blocks: setup.blocks,
        colours: setup.colours,
    }));
    editor.bind_sequence(
        KeyEvent(KeyCode::Enter, Modifiers::NONE),
        EventHandler::Conditional(Box::new(Enter)),
    );
    editor.bind_sequence(
        KeyEvent(KeyCode::Enter, Modifiers::ALT),
        EventHandler::Simple(Cmd::AcceptLine),
    );
    for (key, direction) in [
        (KeyEvent(KeyCode::Up, Modifiers::NONE), Direction::Older),
        (KeyEvent::ctrl('P'), Direction::Older),
        (KeyEvent(KeyCode::Down, Modifiers::NONE), Direction::Newer),
        (KeyEvent::ctrl('N'), Direction::Newer),
    ] {
        editor.bind_sequence(
            key,
            EventHandler::Conditional(Box::new(Recall {
                walk: Arc::clone(&walk),
                direction,
            })),
        );
    }
    Ok((editor, walk, history_file))
}

fn serve(
    mut editor: ReplEditor,
    walk: Arc<Mutex<Walk>>,
    history_file: Option<PathBuf>,
    prompts: Receiver<String>,
    answers: SyncSender<Input>,
) {
    for prompt in prompts {
        let answer = match editor.readline(&prompt) {
            Ok(entry) => {
                if history::keeps(&entry) {
                    let _ = editor.add_history_entry(entry.as_str());
                    walk.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .add(&entry);
                    if let Some(path) = &history_file
                        && let Err(err) = editor.append_history(path)
                    {
                        eprintln!(
                            "envhost: cannot add to the history ({}): {err}",
                            path.display()
                        );
                    }
                }
                Input::Line(entry)
            }
            Err(ReadlineError::Interrupted) => Input::Cleared,
            Err(ReadlineError::Eof) => Input::End,
            Err(err) => {
                eprintln!("envhost: the line editor failed ({err}); the REPL stops");
                Input::End
            }
        };
        let end = matches!(answer, Input::End);
        if answers.send(answer).is_err() || end {
            return;
        }
    }
}

struct ReplHelper {
    completions: Completions,
    blocks: Blocks,
    colours: Colours,
}

impl Helper for ReplHelper {}

impl Completer for ReplHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let (start, candidates) = self.completions.complete(line, pos);
        Ok((
            start,
            candidates
                .into_iter()
                .map(|c| Pair {
                    display: c.display,
                    replacement: c.replacement,
                })
                .collect(),
        ))
    }
}

impl Validator for ReplHelper {
    fn validate(&self, context: &mut ValidationContext<'_>) -> rustyline::Result<ValidationResult> {
        Ok(if self.blocks.is_complete(context.input()) {
            ValidationResult::Valid(None)
        } else {
            ValidationResult::Incomplete
        })
    }
}

impl Highlighter for ReplHelper {
    fn highlight_prompt<'b, 's: 'b, 'p: 'b>(&'s self, prompt: &'p str, _: bool) -> Cow<'b, str> {
        Cow::Owned(self.colours.prompt(prompt))
    }

    fn highlight_char(&self, _: &str, _: usize, _: CmdKind) -> bool {
        false
    }
}

impl Hinter for ReplHelper {
    type Hint = String;
}

/// Enter: in a one-line entry it runs the entry wherever the cursor is (or
/// adds a line if the entry is not complete); in a block it adds a line
/// unless the cursor is at the end of a complete block.
struct Enter;

impl ConditionalEventHandler for Enter {
    fn handle(&self, _: &Event, _: RepeatCount, _: bool, context: &EventContext) -> Option<Cmd> {
        Some(Cmd::AcceptOrInsertLine {
            accept_in_the_middle: !context.line().contains('\n'),
        })
    }
}

#[derive(Clone, Copy)]
enum Direction {
    Older,
    Newer,
}

/// Up and Down: between a block's lines, else through the history.
struct Recall {
    walk: Arc<Mutex<Walk>>,
    direction: Direction,
}

impl ConditionalEventHandler for Recall {
    fn handle(&self, _: &Event, _: RepeatCount, _: bool, context: &EventContext) -> Option<Cmd> {
        let line = context.line();
        let pos = context.pos().min(line.len());
        let mut walk = self.walk.lock().unwrap_or_else(PoisonError::into_inner);
        let recalled = match self.direction {
            Direction::Older if line[..pos].contains('\n') => return None,
            Direction::Newer if line[pos..].contains('\n') => return None,
            Direction::Older => walk.older(line),
            Direction::Newer => walk.newer(line),
        };
        Some(match recalled {
            Some(entry) => Cmd::Replace(Movement::WholeBuffer, Some(entry)),
            None => Cmd::Noop,
        })
    }
}
