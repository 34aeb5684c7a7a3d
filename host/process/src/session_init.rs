//! The session namespaces' init, as the modules that must spare it or end
//! it see it: its pid, and how to end it.
//!
//! [`crate::isolation`] makes the init and registers it here; the reaper
//! (which ends it last at shutdown) and the limit watch (which never ends
//! it) only read it. Knows no other module of the crate, so that none of
//! them needs to know the isolation module.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, PoisonError};

/// The init's pid in the host's numbering; 0 while there is none.
static INIT: AtomicI32 = AtomicI32::new(0);
/// How the module that made the init ends it (and the namespaces with it).
static END: Mutex<Option<fn()>> = Mutex::new(None);

/// Registers the live init and the function that ends it.
pub(crate) fn register(pid: i32, end: fn()) {
    *END.lock().unwrap_or_else(PoisonError::into_inner) = Some(end);
    INIT.store(pid, Ordering::SeqCst);
}

/// Forgets the init `pid` (it ended), unless another has replaced it.
pub(crate) fn forget(pid: i32) {
    let _ = INIT.compare_exchange(pid, 0, Ordering::SeqCst, Ordering::SeqCst);
}

/// The init's pid while the namespaces live.
pub(crate) fn pid() -> Option<i32> {
    Some(INIT.load(Ordering::SeqCst)).filter(|&pid| pid > 0)
}

/// Ends the init, and with it everything left in its namespaces.
pub(crate) fn end() {
    let end = *END.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(end) = end {
        end();
    }
}
