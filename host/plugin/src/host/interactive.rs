//! The host side of `envhost:environment/interactive`: plugins run granted
//! programs in a pseudo-terminal and drive them line by line.
//!
//! This module is the host side of `interface interactive` in the WIT: it
//! checks each `start` against the plugin's grants, gives the program its
//! small environment, keeps sessions in the store's resource table (so they
//! end when the plugin drops them or its store is dropped: after a trap,
//! at a restart, at shutdown), bounds every wait by the command's own time
//! limit, and turns what happened into the WIT's `reply` and `error`. While
//! a command that may outlive the agent's wait runs, each wait tells its
//! `LiveCall` which program it waits on, so the host can answer the agent
//! with that program's output so far and type into it or interrupt it.
//! Running the program and finding its prompt is
//! [`envhost_process::Session`]'s job.

use std::ffi::OsString;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::component::Resource;

use envhost_process::{AtDeadline, Prompt, Session, SessionError, Waited};

use crate::limits::{ANSWER_GRACE, MAX_SESSIONS, QUICK_CALL_LIMIT};
use crate::live_call::LiveCall;
use crate::state::HostState;
use crate::wit::latest::interactive::{Ending, Error, Host, HostSession, Reply};
use envhost_core::text;

/// The host's variables every program gets (when set), besides those
/// granted to the plugin: enough to find programs and speak the user's
/// language, nothing secret.
pub const BASE_VARIABLES: [&str; 10] = [
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
    "TMPDIR",
];

/// How long a wait of a command without a limit may last: as long as the
/// program runs (the agent interrupts it), written as a year.
const UNLIMITED_WAIT: Duration = Duration::from_secs(365 * 24 * 3600);

/// Most bytes of arguments, and of text typed in one call.
const MAX_ARGUMENT_BYTES: usize = 64 * 1024;
const MAX_TYPED_BYTES: usize = 1 << 20;

/// The environment a granted program starts with.
pub fn program_environment(granted: &[(String, String)]) -> Vec<(OsString, OsString)> {
    let mut environment: Vec<(OsString, OsString)> = BASE_VARIABLES
        .iter()
        .filter_map(|name| std::env::var_os(name).map(|value| (OsString::from(name), value)))
        .collect();
    for (name, value) in [
        ("TERM", "dumb".to_owned()),
        ("PAGER", "cat".to_owned()),
        ("GIT_PAGER", "cat".to_owned()),
        ("COLUMNS", envhost_process::TERMINAL_COLUMNS.to_string()),
        ("LINES", envhost_process::TERMINAL_ROWS.to_string()),
    ] {
        environment.push((name.into(), value.into()));
    }
    for (name, value) in granted {
        environment.retain(|(existing, _)| existing != name.as_str());
        environment.push((name.into(), value.into()));
    }
    environment
}

fn session_error(err: SessionError) -> Error {
    match err {
        SessionError::CannotStart(why) => Error::CannotStart(why),
        SessionError::Ended { .. } => Error::Ended(err.to_string()),
        SessionError::OutOfTime { .. } => Error::OutOfTime(err.to_string()),
        SessionError::Io { .. } => Error::Failed(err.to_string()),
    }
}

fn lost_session() -> Error {
    Error::Failed("this session no longer exists in the host".to_owned())
}

impl Host for HostState {
    fn start(&mut self, program: String, args: Vec<String>) -> Result<Resource<Session>, Error> {
        let grants = self.grants();
        let (granted, path) = grants.program(&program).map_err(|refused| match refused {
            crate::grants::ProgramRefused::NotGranted { .. } => {
                Error::NotGranted(refused.to_string())
            }
            crate::grants::ProgramRefused::NotFound { .. } => {
                Error::CannotStart(refused.to_string())
            }
        })?;
        if self.session_count() >= MAX_SESSIONS {
            return Err(Error::Failed(format!(
                "this plugin already runs {MAX_SESSIONS} programs, the most it may; drop a session before starting another"
            )));
        }
        let argument_bytes: usize = args.iter().map(String::len).sum();
        if argument_bytes > MAX_ARGUMENT_BYTES || args.iter().any(|a| a.contains('\0')) {
            return Err(Error::CannotStart(format!(
                "{granted}: the arguments must be under {MAX_ARGUMENT_BYTES} bytes in all, without NUL characters"
            )));
        }
        let environment = program_environment(&grants.variable_values());
        let session = Session::start(&granted, &path, &args, &grants.project_dir, environment)
            .map_err(session_error)?;
        let resource = self
            .table()
            .push(session)
            .map_err(|err| Error::Failed(format!("keeping the session failed: {err}")))?;
        self.session_started();
        Ok(resource)
    }
}

/// How long one `expect` waits, and what ends the wait.
struct WaitPlan {
    started: Instant,
    until: Instant,
    /// The command's own deadline, when one applies.
    deadline: Option<Instant>,
    /// The command's deadline comes before the wait's own limit.
    cut_by_command: bool,
    /// The command may outlive the agent's wait and has no limit of its own.
    unlimited: bool,
}

impl HostState {
    /// When a wait of `timeout_ms` (the plugin's own limit, if any) ends.
    fn wait_plan(&self, live_call: Option<&Arc<LiveCall>>, timeout_ms: Option<u32>) -> WaitPlan {
        // A command that may outlive the agent's wait and has no limit of
        // its own waits on its programs without a deadline (the agent
        // interrupts it); only its own WebAssembly work counts against its
        // call limit.
        let unlimited = live_call.is_some_and(|call| call.waits_unlimited());
        let deadline = if unlimited {
            None
        } else {
            self.budget().deadline()
        };
        let now = Instant::now();
        let own = timeout_ms.map(|ms| now + Duration::from_millis(u64::from(ms)));
        let until = match (own, deadline) {
            (Some(own), Some(deadline)) => own.min(deadline),
            (Some(own), None) => own,
            (None, Some(deadline)) => deadline,
            (None, None) if unlimited => now + UNLIMITED_WAIT,
            (None, None) => now + QUICK_CALL_LIMIT,
        };
        WaitPlan {
            started: now,
            until,
            deadline,
            cut_by_command: deadline.is_some_and(|d| own.is_none_or(|own| d <= own)),
            unlimited,
        }
    }

    /// The plugin's answer for how the wait ended; a cut by the command's
    /// deadline or an interruption leaves it a moment to answer.
    fn reply(
        &mut self,
        waited: Waited,
        plan: &WaitPlan,
        live_call: Option<&Arc<LiveCall>>,
        timeout_ms: Option<u32>,
    ) -> Reply {
        match waited {
            Waited::Prompt { before, prompt } => Reply {
                output: before,
                ending: Ending::Prompt(prompt),
            },
            Waited::TimedOut { output, how } => {
                let limit = match (plan.cut_by_command, plan.deadline) {
                    (true, Some(_)) => {
                        // The command's own time is up: the plugin gets a
                        // moment to answer, and nothing more.
                        self.budget_mut().spend(ANSWER_GRACE);
                        self.budget_mut().note_host_timeout();
                        "the command's time limit".to_owned()
                    }
                    _ => format!(
                        "the wait's limit of {}",
                        text::duration(Duration::from_millis(u64::from(timeout_ms.unwrap_or(0))))
                    ),
                };
                Reply {
                    output,
                    ending: Ending::TimedOut(format!("no prompt within {limit}: {how}")),
                }
            }
            Waited::Exited { output, status } => Reply {
                output,
                ending: Ending::Exited(status),
            },
            Waited::Cancelled { output, how } => {
                // The plugin survives the interruption, as a shell would:
                // it gets a moment to answer, and the host's cancellation
                // is not held against the rest of this call.
                self.budget_mut().spend(ANSWER_GRACE);
                self.budget_mut().forgive_cancellation();
                let why = if live_call.is_some_and(|call| call.interrupt_was_asked()) {
                    "interrupted as the agent asked"
                } else {
                    "the host was interrupted (Ctrl-C or a signal)"
                };
                // Not a time limit: 0.2.0's own ending (a 0.1.0 plugin
                // still gets `timed-out`, through its adapter).
                Reply {
                    output,
                    ending: Ending::Interrupted(format!("{why}: {how}")),
                }
            }
        }
    }
}

impl HostSession for HostState {
    fn send_line(&mut self, session: Resource<Session>, text: String) -> Result<(), Error> {
        self.type_text(session, text, true)
    }

    fn send(&mut self, session: Resource<Session>, text: String) -> Result<(), Error> {
        self.type_text(session, text, false)
    }

    fn expect(
        &mut self,
        session: Resource<Session>,
        prompt: String,
        timeout_ms: Option<u32>,
    ) -> Result<Reply, Error> {
        let prompt = Prompt::cached(&prompt).map_err(|bad| Error::BadPattern(bad.to_string()))?;
        if self.budget().is_spent() {
            return Err(Error::OutOfTime(
                "the command's time limit is spent (an earlier wait was interrupted); return your answer now".to_owned(),
            ));
        }
        let live_call = self.live_call();
        let plan = self.wait_plan(live_call.as_ref(), timeout_ms);
        let cancel = self.budget().cancel_flag();
        let limits = self.grants().output_limits.clone();
        let label = self.grants().plugin.clone();
        let waited = {
            let entry = self.table().get_mut(&session).map_err(|_| lost_session())?;
            let label = format!("{label}-{}", entry.program());
            let at_deadline = if plan.cut_by_command {
                AtDeadline::Interrupt
            } else {
                AtDeadline::LeaveRunning
            };
            let _shown = live_call.as_ref().map(|call| call.waiting_on(entry.live()));
            entry
                .wait(
                    &prompt,
                    plan.until,
                    at_deadline,
                    cancel.as_ref(),
                    &limits,
                    &label,
                )
                .map_err(session_error)?
        };
        if plan.unlimited {
            self.budget_mut().extend(plan.started.elapsed());
        }
        Ok(self.reply(waited, &plan, live_call.as_ref(), timeout_ms))
    }

    fn interrupt(&mut self, session: Resource<Session>) -> Result<(), Error> {
        let entry = self.table().get_mut(&session).map_err(|_| lost_session())?;
        entry.interrupt().map_err(session_error)
    }

    fn exit_status(&mut self, session: Resource<Session>) -> Option<i32> {
        self.table()
            .get(&session)
            .ok()
            .and_then(Session::exit_status)
    }

    fn drop(&mut self, session: Resource<Session>) -> wasmtime::Result<()> {
        // Dropping the session ends its program (see `Session`'s `Drop`).
        let removed = self.table().delete(session);
        if removed.is_ok() {
            self.session_ended();
        }
        drop(removed);
        Ok(())
    }
}

impl HostState {
    fn type_text(
        &mut self,
        session: Resource<Session>,
        text: String,
        line: bool,
    ) -> Result<(), Error> {
        if text.len() > MAX_TYPED_BYTES {
            return Err(Error::Failed(format!(
                "{} bytes is too much to type at once; the most is {MAX_TYPED_BYTES}",
                text.len()
            )));
        }
        let until = self.budget().deadline();
        let cancel = self.budget().cancel_flag();
        let entry = self.table().get_mut(&session).map_err(|_| lost_session())?;
        entry
            .send(&text, line, until, cancel.as_ref())
            .map_err(session_error)
    }
}

/// 0.1.0's `interactive` is the latest's without the `interrupted` ending:
/// its calls go to the latest's, their results converted (an interrupt
/// reaches a 0.1.0 plugin as `timed-out`, as it always did).
mod since_v0_1_0 {
    use wasmtime::component::Resource;

    use envhost_process::Session;

    use crate::state::HostState;
    use crate::wit::latest::interactive as latest;
    use crate::wit::since_v0_1_0::interactive::{Error, Host, HostSession, Reply};

    impl Host for HostState {
        fn start(
            &mut self,
            program: String,
            args: Vec<String>,
        ) -> Result<Resource<Session>, Error> {
            latest::Host::start(self, program, args).map_err(Error::from)
        }
    }

    impl HostSession for HostState {
        fn send_line(&mut self, session: Resource<Session>, text: String) -> Result<(), Error> {
            latest::HostSession::send_line(self, session, text).map_err(Error::from)
        }

        fn send(&mut self, session: Resource<Session>, text: String) -> Result<(), Error> {
            latest::HostSession::send(self, session, text).map_err(Error::from)
        }

        fn expect(
            &mut self,
            session: Resource<Session>,
            prompt: String,
            timeout_ms: Option<u32>,
        ) -> Result<Reply, Error> {
            latest::HostSession::expect(self, session, prompt, timeout_ms)
                .map(Reply::from)
                .map_err(Error::from)
        }

        fn interrupt(&mut self, session: Resource<Session>) -> Result<(), Error> {
            latest::HostSession::interrupt(self, session).map_err(Error::from)
        }

        fn exit_status(&mut self, session: Resource<Session>) -> Option<i32> {
            latest::HostSession::exit_status(self, session)
        }

        fn drop(&mut self, session: Resource<Session>) -> wasmtime::Result<()> {
            latest::HostSession::drop(self, session)
        }
    }
}
