//! The component's one plugin instance, and the glue between the generated
//! bindings and the [`Plugin`] trait. Nothing here is public API.

use std::cell::RefCell;
use std::marker::PhantomData;

use crate::bindings::exports::envhost::environment::capabilities as wit_capabilities;
use crate::bindings::exports::envhost::environment::environment as wit;
use crate::bindings::exports::envhost::environment::screen_changes as wit_screen_changes;
use crate::bindings::exports::envhost::environment::state as wit_state;
use crate::plugin::{Description, Plugin, Power, ScreenChanges};

thread_local! {
    // A component instance is single-threaded and holds one plugin; the
    // host makes a new component instance (fresh memory, so a fresh
    // `None` here) after a trap.
    static INSTANCE: RefCell<Option<Box<dyn Plugin>>> = const { RefCell::new(None) };
}

/// Implements the generated `Guest` trait for plugin type `P`; the
/// [`export!`](crate::export) macro names it.
pub struct Adapter<P>(PhantomData<P>);

fn with_plugin<P: Plugin + Default, R>(f: impl FnOnce(&mut dyn Plugin) -> R) -> R {
    INSTANCE.with(|cell| {
        let mut slot = cell.borrow_mut();
        let plugin = slot.get_or_insert_with(|| Box::new(P::default()));
        f(plugin.as_mut())
    })
}

impl<P: Plugin + Default> wit::Guest for Adapter<P> {
    fn describe() -> wit::Description {
        let Description { summary, commands } = with_plugin::<P, _>(|p| p.describe());
        wit::Description {
            summary,
            commands: commands
                .into_iter()
                .map(|c| wit::CommandSpec {
                    signature: c.signature,
                    description: c.description,
                    summary: c.summary,
                    example: c.example,
                    simple: c.simple,
                })
                .collect(),
        }
    }

    fn handle_command(command: String) -> wit::CommandResponse {
        let response = with_plugin::<P, _>(|p| p.handle(&command));
        wit::CommandResponse {
            output: response.output,
            success: response.success,
        }
    }

    fn get_screen() -> wit::ScreenSection {
        let screen = with_plugin::<P, _>(|p| p.screen());
        wit::ScreenSection {
            content: screen.content,
            max_lines: screen.max_lines,
        }
    }

    fn shutdown() {
        with_plugin::<P, _>(|p| p.shutdown());
    }
}

impl<P: Plugin + Default> wit_capabilities::Guest for Adapter<P> {
    fn requested() -> Vec<wit_capabilities::Request> {
        with_plugin::<P, _>(|p| p.requests())
            .into_iter()
            .map(|request| wit_capabilities::Request {
                power: match request.power {
                    Power::ReadDirectory(dir) => wit_capabilities::Power::ReadDirectory(dir),
                    Power::WriteDirectory(dir) => wit_capabilities::Power::WriteDirectory(dir),
                    Power::Variable(name) => wit_capabilities::Power::Variable(name),
                    Power::Program(program) => wit_capabilities::Power::Program(program),
                    Power::Memory(bytes) => wit_capabilities::Power::Memory(bytes),
                    Power::Network(pattern) => wit_capabilities::Power::Network(pattern),
                },
                reason: request.reason,
            })
            .collect()
    }
}

impl<P: Plugin + Default> wit_state::Guest for Adapter<P> {
    fn snapshot() -> Vec<u8> {
        with_plugin::<P, _>(|p| p.snapshot())
    }

    fn restore(snapshot: Vec<u8>) -> Result<(), String> {
        with_plugin::<P, _>(|p| p.restore(&snapshot)).map_err(|err| err.message().to_owned())
    }
}

impl<P: Plugin + Default> wit_screen_changes::Guest for Adapter<P> {
    fn screen_changes() -> wit_screen_changes::When {
        match with_plugin::<P, _>(|p| p.screen_changes()) {
            ScreenChanges::AnyTime => wit_screen_changes::When::AnyTime,
            ScreenChanges::WhenCalled => wit_screen_changes::When::WhenCalled,
        }
    }
}
