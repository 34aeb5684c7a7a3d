//! One environment as the orchestrator holds it: its lock, what other
//! threads see of it while a request is inside (busy since when, the
//! section last shown), and its place in the display order. It must not
//! know the orchestrator's registry or routing.

use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};
use std::thread;
use std::time::{Duration, Instant};

use crate::environment::{Environment, EnvironmentKind, EnvironmentName, ScreenSection, Usage};
use crate::running;

/// Display order of the built-in environments; plugins follow, by name.
const BUILTIN_ORDER: [&str; 3] = ["bash", "python", "editor"];

/// How long a screen waits for an environment that another thread holds
/// without a request inside (it is drawing its own screen) before it shows
/// the environment as busy.
const SCREEN_PATIENCE: Duration = Duration::from_millis(100);

pub(super) struct Slot {
    pub(super) name: EnvironmentName,
    pub(super) kind: EnvironmentKind,
    /// For a named instance (`bash:server`), its kind (`bash`).
    pub(super) instance_of: Option<EnvironmentName>,
    /// How to use it, asked once: it is fixed for the environment's life.
    pub(super) usage: Usage,
    pub(super) environment: Mutex<Box<dyn Environment>>,
    pub(super) view: Mutex<View>,
}

/// What other threads see of an environment while a request is inside it.
#[derive(Default)]
pub(super) struct View {
    /// The request inside, and since when.
    pub(super) inside: Option<(&'static str, Instant)>,
    /// The section last shown.
    pub(super) last: Option<ScreenSection>,
}

/// A request inside an environment: holds its lock, and marks the
/// environment busy for screens taken meanwhile until dropped.
pub(super) struct Inside<'a> {
    pub(super) slot: &'a Slot,
    pub(super) environment: MutexGuard<'a, Box<dyn Environment>>,
}

impl Slot {
    pub(super) fn enter(&self, what: &'static str) -> Inside<'_> {
        let environment = self
            .environment
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.view().inside = Some((what, Instant::now()));
        Inside {
            slot: self,
            environment,
        }
    }

    pub(super) fn view(&self) -> MutexGuard<'_, View> {
        self.view.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The environment for a screen, or the busy section to show instead.
    pub(super) fn for_screen(&self) -> Result<MutexGuard<'_, Box<dyn Environment>>, ScreenSection> {
        let began = Instant::now();
        loop {
            match self.environment.try_lock() {
                Ok(environment) => return Ok(environment),
                Err(TryLockError::Poisoned(poisoned)) => return Ok(poisoned.into_inner()),
                Err(TryLockError::WouldBlock) => {}
            }
            let view = self.view();
            let busy = match view.inside {
                Some(inside) => Some(inside),
                None if began.elapsed() >= SCREEN_PATIENCE => Some(("screen", began)),
                None => None,
            };
            if let Some((what, since)) = busy {
                return Err(busy_section(view.last.as_ref(), what, since.elapsed()));
            }
            drop(view);
            thread::sleep(Duration::from_millis(1));
        }
    }
}

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        self.slot.view().inside = None;
    }
}

pub(super) fn display_rank(slot: &Slot) -> (usize, String) {
    let builtin = BUILTIN_ORDER
        .iter()
        .position(|b| *b == slot.name.as_str() && slot.kind == EnvironmentKind::Builtin);
    match builtin {
        Some(position) => (position, String::new()),
        None => (BUILTIN_ORDER.len(), slot.name.to_string()),
    }
}

/// The section shown while another request (`what`, for `busy_for`) is
/// inside the environment: the last one shown, under a line saying so.
pub(super) fn busy_section(
    last: Option<&ScreenSection>,
    what: &str,
    busy_for: Duration,
) -> ScreenSection {
    let line = running::busy_line(what, busy_for, last.is_some());
    match last {
        Some(last) => ScreenSection::with_max_lines(
            format!("{line}\n{}", last.content),
            last.max_lines.saturating_add(1),
        ),
        None => ScreenSection::new(line),
    }
}
