//! envhost's core: what an environment is, and how the host turns one
//! command into a response plus a screen.
//!
//! Data flows one way:
//!
//! ```text
//! front end (NDJSON, REPL) ─► Orchestrator ─► Environment
//!                                  │
//!        response + Screen ◄───────┘── Event ─► observers (transcript, console)
//! ```
//!
//! This crate owns:
//!
//! - the [`Environment`] trait and the values that cross it
//!   ([`CommandContext`], [`CancelFlag`], [`CommandResponse`], [`Incident`],
//!   [`ScreenSection`], [`EnvironmentName`], [`EnvironmentError`]), and
//!   [`LoadedEnvironment`], the form in which the crates that create
//!   environments hand them over; and [`StateKeeper`], where the
//!   orchestrator hands an environment's saved state after each answer
//!   (crash-safe sessions; the state's format is the environment's own);
//! - the requests a front end hands the orchestrator ([`CommandRequest`],
//!   [`ControlRequest`] to wait for, type into, interrupt a running command
//!   or restart an environment) and the agent's exact [`RequestId`];
//! - the [`Orchestrator`]: the registry, routing (usable from several
//!   threads at once, one request at a time per environment), screen
//!   collection and panic containment;
//! - [`instance`]: the rule for an instance's address (`bash:server`)
//!   and the factory that makes another instance of a kind;
//! - [`running`]: the words about a command that is still running (the
//!   note that ends its answer, the busy refusal, its block on the screen);
//! - the [`Screen`] and its truncation rule;
//! - progressive help ([`CommandHelp`]: long help until a command is first
//!   used, short help after) and the one rule that splits a command into
//!   its name, arguments and body ([`split_command`]);
//! - the [`Event`]s, the [`EventBus`] and its observers
//!   ([`TranscriptObserver`], [`ConsoleObserver`]);
//! - [`text`]: the words the agent reads about durations, sizes, counts and
//!   interruptions.
//!
//! It must not know the wire format (`envhost-protocol`), processes
//! (`envhost-process`), or any particular environment (`envhost-envs`,
//! `envhost-plugin`).
//!
//! ```
//! use std::time::Duration;
//! use envhost_core::{CancelFlag, CommandRequest, EventBus, Orchestrator, OrchestratorSettings};
//!
//! let settings = OrchestratorSettings::new(Duration::from_secs(120));
//! let orchestrator = Orchestrator::new(settings, EventBus::new(), CancelFlag::new());
//! let outcome = orchestrator.execute(&CommandRequest {
//!     environment: "nowhere".into(),
//!     command: "ls".into(),
//!     timeout: None,
//!     yield_after: None,
//!     id: None,
//! });
//! assert!(!outcome.success);
//! ```

#![deny(missing_docs)]

mod console;
mod environment;
mod events;
mod help;
pub mod instance;
mod orchestrator;
mod request;
pub mod running;
mod screen;
pub mod text;
mod transcript;

pub use crate::console::ConsoleObserver;
pub use crate::environment::{
    CancelFlag, CommandContext, CommandResponse, DEFAULT_MAX_LINES, Environment, EnvironmentError,
    EnvironmentKind, EnvironmentName, HostWatch, Incident, InputRule, InvalidName, LoadFailure,
    LoadedEnvironment, Reach, RunningCommand, ScreenSection, StateKeeper, Usage,
};
pub use crate::events::{Event, EventBus, Observer, ObserverError, StampedEvent, panic_message};
pub use crate::help::{
    CommandHelp, CommandSpec, HelpError, Routed, UnknownCommand, render_usage, split_command,
};
pub use crate::orchestrator::{
    Description, Orchestrator, OrchestratorSettings, Outcome, RegisterError, Reload,
};
pub use crate::request::{
    CommandRequest, Control, ControlRequest, DEFAULT_INPUT_WAIT, DEFAULT_WAIT, InvalidId, RequestId,
};
pub use crate::screen::{NoticeSection, Screen, ScreenMarks, truncate_lines};
pub use crate::transcript::TranscriptObserver;
pub use envhost_files::changes::ProducedFile;
