//! The host's own `wasi:io/poll` `poll` and `pollable.block`, in place of
//! wasmtime-wasi's synchronous ones, which wait as long as the plugin asks
//! (a `sleep(3600)` held the host for an hour). These wait for the same
//! pollables, with wasmtime-wasi-io's own futures, but never past the
//! call's deadline nor past the host's cancellation
//! ([`limits::wait_within`](crate::limits)): then the call stops as an
//! endless loop does.

use wasmtime::component::{Linker, Resource, ResourceTable};
use wasmtime_wasi_io::bindings::wasi::io::poll::{Host as PollHost, HostPollable};
use wasmtime_wasi_io::poll::DynPollable;

use crate::host::WASI_VERSION;
use crate::limits::wait_within;
use crate::state::HostState;

/// Replaces wasmtime-wasi's `poll` and `pollable.block` in `linker` (which
/// must allow shadowing).
pub(crate) fn shadow(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    let mut poll = linker.instance(&format!("wasi:io/poll@{WASI_VERSION}"))?;
    poll.func_wrap(
        "poll",
        |mut store, (pollables,): (Vec<Resource<DynPollable>>,)| {
            let state = store.data_mut();
            let watch = state.budget().watch();
            let ready = wait_within(
                watch,
                <ResourceTable as PollHost>::poll(state.table(), pollables),
            )??;
            Ok((ready,))
        },
    )?;
    poll.func_wrap(
        "[method]pollable.block",
        |mut store, (pollable,): (Resource<DynPollable>,)| {
            let state = store.data_mut();
            let watch = state.budget().watch();
            wait_within(
                watch,
                <ResourceTable as HostPollable>::block(state.table(), pollable),
            )??;
            Ok(())
        },
    )?;
    Ok(())
}
