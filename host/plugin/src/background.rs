//! Work a sandbox runs on threads of its own (the optimised compilation
//! of a plugin that started on baseline code, `load::tiering`), stopped
//! with the sandbox: a stop flag the work looks at, and its threads,
//! joined when stopped. Knows nothing of what the work is.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// The background work of one sandbox; dropping it stops it.
#[derive(Default)]
pub struct Background {
    stop: Arc<AtomicBool>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Background {
    /// Runs `work` on a thread named `name`, with the flag that says to
    /// stop. Nothing starts once stopped.
    pub(crate) fn spawn(
        &self,
        name: &str,
        work: impl FnOnce(&AtomicBool) + Send + 'static,
    ) -> std::io::Result<()> {
        if self.stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        let stop = Arc::clone(&self.stop);
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || work(&stop))?;
        self.threads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(thread);
        Ok(())
    }

    /// Stops every piece of work (each looks at the flag and ends) and
    /// waits for its thread; later ones do not start.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|p| p.into_inner()));
        for thread in threads {
            let _ = thread.join();
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop();
    }
}
