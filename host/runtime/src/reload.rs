//! `--watch` under every front end: the [`Watcher`] behind the
//! orchestrator's [`Reload`] hook, which the orchestrator asks before each
//! command whatever the front end.

use std::sync::{Mutex, PoisonError};

use envhost_core::{Orchestrator, Reload};

use crate::watch::Watcher;

/// The watcher, one command at a time (MCP serves several at once).
pub(crate) struct WatchedPlugins(pub(crate) Mutex<Watcher>);

impl Reload for WatchedPlugins {
    fn before_command(&self, orchestrator: &Orchestrator) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .refresh(orchestrator)
    }
}
