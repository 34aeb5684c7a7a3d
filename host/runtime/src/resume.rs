//! `--resume`: what the session recorder kept goes back into the
//! environments before the first command, and the first answer says, in
//! the agent's words, what came back and what did not.

use envhost_core::{NoticeSection, Orchestrator, ScreenSection};

use crate::session::{Identity, SessionStore};

/// Records the session in `identity`'s project (restoring it first with
/// `resume`); when the folder cannot be made, says so on stderr and records
/// nothing.
pub(crate) fn record_session(
    orchestrator: &mut Orchestrator,
    identity: Identity,
    resume: bool,
    plugins: &[String],
) {
    let store = SessionStore::new(identity);
    let words = resume.then(|| resume_session(orchestrator, &store, plugins));
    if !resume {
        store.clear();
    }
    match store.prepare() {
        Ok(()) => orchestrator.keep_states(Box::new(store)),
        Err(err) => eprintln!(
            "envhost: cannot create {} ({err}); the session is not recorded.",
            store.dir().display()
        ),
    }
    if let Some(words) = words {
        orchestrator.announce_once(NoticeSection {
            key: "session".to_owned(),
            section: ScreenSection::with_max_lines(words, 30),
        });
    }
}

/// Restores what `store` holds into the environments and says, in the
/// agent's words, what came back and what did not.
fn resume_session(orchestrator: &Orchestrator, store: &SessionStore, plugins: &[String]) -> String {
    let mut lines = Vec::new();
    let mut saved_plugins = Vec::new();
    match store.load() {
        Err(reason) => {
            store.clear();
            lines.push(format!(
                "Session not resumed: {reason}. Every environment starts fresh (the saved state was removed)."
            ));
        }
        Ok(states) if states.is_empty() => lines.push(format!(
            "Session not resumed: nothing was saved in {}. Every environment starts fresh.",
            store.dir().display()
        )),
        Ok(states) => {
            lines.push(format!("Session resumed from {}:", store.dir().display()));
            saved_plugins.extend(states.iter().map(|(name, _)| name.clone()));
            for (name, result) in orchestrator.restore_states(&states) {
                match result {
                    Ok(words) => lines.push(format!("- {name}: {words}")),
                    Err(why) => {
                        store.forget(&name);
                        lines.push(format!("- {name}: not restored ({why}); it starts fresh."));
                    }
                }
            }
            for name in orchestrator.environment_names() {
                if !states.iter().any(|(saved, _)| *saved == name) && !plugins.contains(&name) {
                    lines.push(format!("- {name}: starts fresh (nothing of it was saved)."));
                }
            }
        }
    }
    for name in plugins.iter().filter(|name| !saved_plugins.contains(name)) {
        lines.push(format!(
            "- {name}: a plugin, restarted fresh (nothing of it was saved: only a plugin that exports `state` keeps its state across a restart)."
        ));
    }
    lines.join("\n")
}
