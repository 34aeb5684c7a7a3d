//! The screen as the orchestrator composes it: each environment's section
//! in display order (a busy one shows its last section, marked busy; a
//! broken one an error section of its own), the notices after them, and
//! the sentences that say a command is still running. It must not know
//! what any environment draws.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::PoisonError;
use std::time::Instant;

use super::{ERROR_SECTION_LINES, Orchestrator, RESUMED_LINE, SESSION_KEY, SESSION_LINES};
use crate::environment::{RunningCommand, ScreenSection};
use crate::events::{Event, panic_message};
use crate::instance;
use crate::running;
use crate::screen::{NoticeSection, Screen};

use super::slot::Slot;

impl Orchestrator {
    /// Every environment's section, in display order, then the notices. An
    /// environment with a running command shows it first; one that another
    /// request is inside shows its last section, marked busy.
    pub fn screen(&self) -> Screen {
        // A screen asked for before the first command shows the first
        // notice too; the first command's answer says it and ends it.
        let first = self
            .first_notice
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        self.screen_with(&first, false)
    }

    /// The screen, with `first` (the notice of the first answer) and,
    /// when states are saved again after they were not (`resumed`), a
    /// session line that says so. While states are not being saved, the
    /// session line says that, on every screen.
    pub(super) fn screen_with(&self, first: &[(NoticeSection, bool)], resumed: bool) -> Screen {
        let mut screen = Screen::new();
        let instances = self
            .instances
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for slot in &self.slots() {
            let mut section = self.section(slot);
            if self.factory(slot.name.as_str()).is_some() {
                section = with_instance_hint(section, slot.name.as_str());
            }
            screen.push(slot.name.as_str(), section);
            for instance in instances
                .iter()
                .filter(|instance| instance.instance_of.as_ref() == Some(&slot.name))
            {
                screen.push(instance.name.as_str(), self.section(instance));
            }
        }
        for notice in &self.notices {
            screen.push(notice.key.clone(), notice.section.clone());
        }
        let failing = self
            .keeping
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .failing
            .clone();
        let line = match failing {
            Some(reason) => Some(format!(
                "Session state is not being kept: {reason}. envhost tries again after every answer."
            )),
            None => resumed.then(|| RESUMED_LINE.to_owned()),
        };
        for (notice, _) in first {
            screen.push(notice.key.clone(), notice.section.clone());
        }
        if let Some(line) = line {
            screen.push(
                SESSION_KEY,
                ScreenSection::with_max_lines(line, SESSION_LINES),
            );
        }
        screen
    }

    pub(super) fn section(&self, slot: &Slot) -> ScreenSection {
        let mut environment = match slot.for_screen() {
            Ok(environment) => environment,
            Err(busy) => return busy,
        };
        // The guard stays outside the unwinding closure: a panicking screen
        // does not poison the environment's lock.
        let section = match catch_unwind(AssertUnwindSafe(|| environment.screen())) {
            Ok(Ok(section)) => section,
            Ok(Err(err)) => {
                drop(environment);
                return self.failed_section(slot, err.to_string());
            }
            Err(panic) => {
                drop(environment);
                let message = format!("panic: {}", panic_message(panic.as_ref()));
                return self.failed_section(slot, message);
            }
        };
        let section = match self.running_in(slot, &**environment) {
            Some(running) => with_running_block(section, &running),
            None => section,
        };
        slot.view().last = Some(section.clone());
        section
    }

    pub(super) fn failed_section(&self, slot: &Slot, message: String) -> ScreenSection {
        let name = slot.name.as_str();
        let section = error_section(name, &message);
        slot.view().last = Some(section.clone());
        self.emit(Event::Error {
            context: format!("{name} screen"),
            message,
        });
        section
    }
}

/// `section` (a default instance's) with the one line that says how to
/// open another instance of its kind.
pub(super) fn with_instance_hint(section: ScreenSection, kind: &str) -> ScreenSection {
    ScreenSection::with_max_lines(
        format!("{}\n{}", section.content, instance::hint(kind)),
        section.max_lines.saturating_add(1),
    )
}

pub(super) fn error_section(name: &str, message: &str) -> ScreenSection {
    ScreenSection::with_max_lines(
        format!("[Error getting screen from {name}: {message}]"),
        ERROR_SECTION_LINES,
    )
}

/// `section` headed by the block that shows its running command; the block
/// adds to the section's lines rather than pushing its own lines out.
pub(super) fn with_running_block(
    section: ScreenSection,
    running: &RunningCommand,
) -> ScreenSection {
    let block = running::screen_block(running, Instant::now());
    let block_lines = block.lines().count() + 1;
    ScreenSection::with_max_lines(
        format!("{block}\n{}", section.content),
        section.max_lines.saturating_add(block_lines),
    )
}
