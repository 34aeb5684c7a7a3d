//! Tiered compilation: a large plugin whose optimised code is not in the
//! cache starts at once on baseline code, and its optimised code is made
//! for the cache in the background.
//!
//! Cranelift takes 10-13 s of CPU for a Python or JavaScript plugin
//! (12-18 MB); Winch, wasmtime's baseline compiler, 6-8x less, for code
//! that runs slower. So a session's first start of such a plugin compiles
//! it with Winch (bounded, like every compilation: `compile`), runs it, and
//! hands the optimised compilation to a thread of this sandbox
//! ([`Background`]), at a lower priority (its nice value, which the
//! compiler process it starts inherits) so that the agent's first
//! commands are not starved on a small machine. When it is done, the code
//! is saved in the cache (its atomic, authenticated write), so the next
//! start maps it; and the running environment is offered it
//! ([`Upgrade`]).
//!
//! A running instance never switches: its memory and state live in a
//! store of the baseline engine and cannot move to another engine's code.
//! The environment takes the optimised code at its next fresh instance
//! (after a failed call, an interruption or `restart`), which starts from
//! nothing or from the plugin's snapshot anyway; until then it runs on
//! baseline code for the rest of the session.
//!
//! The background compilation ends with the host: dropping the sandbox
//! (the host shutting down, SIGTERM included) kills the compiler process
//! and joins the thread, and nothing is saved; a host that dies without
//! unwinding takes the thread with it and the compiler dies with its
//! parent (`PR_SET_PDEATHSIG`). Either way no entry is written half: the
//! cache writes a temporary file and renames it.
//!
//! Small plugins are not tiered (Cranelift compiles them in tens of
//! milliseconds), nor are the one-shot commands (`check`, `call`, `test`):
//! they would exit before the background compilation ended, and they are
//! what warms the cache. This module must not decide what to load
//! (`loader`) nor word refusals.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use envhost_core::text;

use crate::background::Background;
use crate::exports::PluginPre;
use crate::guest_io::LogSink;
use crate::load::cache::CodeCache;
use crate::load::compile::{self, CompileError, Compiler};
use crate::sandbox::{Runtime, Tier};

/// Nice value of the background compilation (and of the compiler process
/// it starts): under contention it gets about a tenth of what the agent's
/// commands get.
const BACKGROUND_NICE: i32 = 10;

/// The optimised code for a running environment, once compiled in the
/// background; taken at its next fresh instance.
#[derive(Clone, Default)]
pub struct Upgrade(Arc<Mutex<Option<PluginPre>>>);

impl Upgrade {
    /// The optimised code, if it is ready (once).
    pub(crate) fn take(&self) -> Option<PluginPre> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    fn offer(&self, pre: PluginPre) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(pre);
    }
}

/// A plugin started on baseline code, whose optimised code is still to be
/// made: what the background compilation needs.
pub struct Pending {
    pub bytes: Vec<u8>,
    pub sha256: String,
}

/// One background compilation.
pub(crate) struct Job {
    pub name: String,
    pub pending: Pending,
    pub cache: CodeCache,
    pub compiler: Compiler,
    pub optimised: Runtime,
    pub upgrade: Upgrade,
    pub log: Arc<dyn LogSink>,
}

/// Starts `job` on a background thread of `background`. A thread that
/// cannot be started costs only time: the next start compiles again.
pub(crate) fn start(background: &Background, job: Job) {
    let name = job.name.clone();
    let log = Arc::clone(&job.log);
    if let Err(err) = background.spawn("envhost-tiering", move |stop| run(job, stop)) {
        log.line(&format!(
            "envhost: plugin {name}: its optimised code cannot be compiled in the background ({err}); it runs on baseline code, and the next start compiles again"
        ));
    }
}

fn run(job: Job, stop: &AtomicBool) {
    lower_priority();
    let Job {
        name,
        pending,
        cache,
        compiler,
        optimised,
        upgrade,
        log,
    } = job;
    let started = Instant::now();
    let Pending { bytes, sha256 } = pending;
    let compiled = compile::compile(
        &compiler,
        &optimised.engine,
        Tier::Optimised,
        &bytes,
        Some(stop),
    );
    drop(bytes);
    let serialized = match compiled {
        Ok(serialized) => serialized,
        Err(CompileError::Stopped) => return,
        Err(err) => {
            log.line(&format!(
                "envhost: plugin {name}: its optimised code could not be compiled in the background ({err}); it runs on baseline code, and the next start tries again"
            ));
            return;
        }
    };
    // The host may have begun to shut down while the compiler finished: the
    // entry would still be whole (written aside, then renamed), but the
    // host is waiting for this thread.
    if stop.load(Ordering::SeqCst) {
        return;
    }
    let saved = cache.save_compiled(&optimised.engine, &sha256, &serialized);
    let took = text::duration(started.elapsed());
    match &saved {
        Ok(_) => log.line(&format!(
            "envhost: plugin {name}: its optimised code was compiled in the background in {took} and cached; the next start uses it"
        )),
        Err(why) => log.line(&format!(
            "envhost: plugin {name}: its optimised code was compiled in the background in {took} but not cached ({why})"
        )),
    }
    // Mapped back from the entry just written (checked again, in a sealed
    // copy) rather than copied from `serialized`: the host never holds the
    // code twice. Without an entry, from the bytes.
    let component = match saved {
        Ok(_) => {
            drop(serialized);
            cache
                .load_cached(&optimised.engine, &sha256)
                .ok()
                .map(|compiled| compiled.component)
        }
        Err(_) => crate::load::cache::from_serialized(&optimised.engine, &serialized).ok(),
    };
    let pre = component
        .and_then(|component| optimised.linker.instantiate_pre(&component).ok())
        .and_then(|instance_pre| PluginPre::new(instance_pre, &optimised.engine).ok());
    if let Some(pre) = pre {
        upgrade.offer(pre);
    }
}

/// Lowers this thread's scheduling priority (Linux: per thread, and
/// inherited by the processes it starts).
fn lower_priority() {
    let tid = nix::unistd::gettid().as_raw();
    // SAFETY: setpriority takes plain integers and changes only the
    // scheduling priority of this thread. It fails only without the
    // right to change it, which leaves the priority as it was.
    unsafe {
        nix::libc::setpriority(nix::libc::PRIO_PROCESS, tid as u32, BACKGROUND_NICE);
    }
}
