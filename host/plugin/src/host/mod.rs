//! The host-side implementations of the WIT interfaces plugins import, one
//! file (or folder) per interface, all on [`HostState`](crate::state::HostState):
//! envhost's own (`logging`, `interactive`), outgoing HTTP (`http`:
//! wasmtime-wasi-http behind the plugin's `allowed-hosts`), and the WASI
//! calls the host does itself rather than leave to wasmtime-wasi (`poll`
//! and `streams`: waits bounded by the call's time; `files`: granted
//! directories, opens and symlinks).
//!
//! This module declares them and links the replacements; it holds no
//! other code.

mod files;
mod http;
mod interactive;
mod logging;
mod poll;
mod streams;

use wasmtime::component::Linker;

use crate::state::HostState;

/// The version of the WASI 0.2 interfaces wasmtime-wasi 48 provides (its
/// `wit/deps`); a plugin built against any 0.2.x is linked to them.
const WASI_VERSION: &str = "0.2.12";

/// Puts the host's own WASI calls in place of wasmtime-wasi's in `linker`,
/// which must already hold wasmtime-wasi's.
pub(crate) fn replace_wasi_calls(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    poll::shadow(linker)?;
    streams::shadow(linker)?;
    files::shadow(linker)?;
    linker.allow_shadowing(false);
    Ok(())
}

/// Links `wasi:http/types` and `wasi:http/outgoing-handler` (every request
/// checked against the plugin's grants) into `linker`, which must already
/// hold WASI.
pub(crate) fn add_http_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    http::add_to_linker(linker)
}
