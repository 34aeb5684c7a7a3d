//! Write envhost environments ("plugins") in Rust.
//!
//! A plugin is a WebAssembly component that the envhost host loads from
//! `<project>/env/NAME.wasm`: the agent sends it commands and sees its
//! screen section after every command. This crate hides the component
//! plumbing (the WIT world `envhost:environment/full-plugin@0.2.1` in
//! `wit/v0.2.1/`, the
//! bindings, the exported functions, the single plugin instance) behind two
//! traits and one macro.
//!
//! **Declarative style**: list your
//! commands with a signature, a description and an example; each one is a
//! method. The host routes by the first word, answers unknown commands
//! itself, and shows LONG help for commands the agent has not used yet and
//! SHORT help for those it has, under your state text.
//!
//! ```
//! use envhost_sdk::{Call, Command, Declarative, Result};
//!
//! #[derive(Default)]
//! struct Counter {
//!     count: u64,
//! }
//!
//! impl Declarative for Counter {
//!     const SUMMARY: &'static str = "A counter that only goes up";
//!     const COMMANDS: &'static [Command<Self>] = &[
//!         Command::new("add <n>", Self::add)
//!             .description("Add n to the counter.")
//!             .example("add 3"),
//!     ];
//!
//!     fn state(&self) -> String {
//!         format!("Count: {}", self.count)
//!     }
//! }
//!
//! impl Counter {
//!     fn add(&mut self, call: &Call) -> Result<String> {
//!         let n: u64 = call.args.parse()?;
//!         self.count += n;
//!         Ok(format!("Count is now {}", self.count))
//!     }
//! }
//!
//! envhost_sdk::export!(Counter);
//! # fn main() {}
//! ```
//!
//! **Manual style**: implement [`Plugin`] yourself to handle any text and own
//! the whole screen section (or describe commands and still handle them
//! yourself).
//!
//! **Interactive style**: wrap a
//! program such as gdb or sqlite3 with a command, a prompt and a
//! description ([`Interactive`], [`export_interactive!`]); or drive one
//! from your own commands with [`Program`].
//!
//! Build with `cargo build --target wasm32-wasip2 --release` (a `cdylib`
//! crate); the result is a component. `envhost check NAME.wasm` says whether
//! the host accepts it and shows the screen it would get.
//!
//! What a plugin can use: memory (bounded by the host), clocks, random
//! numbers, [`log`] lines for its author. What it cannot, unless the
//! operator grants it in `env/envhost.toml`: files (granted directories
//! appear at `/` + their path in the project), environment variables,
//! programs (through [`Program`]), outgoing HTTP to allowed hosts
//! (through [`http::get`]). Denied calls fail with an error the plugin can
//! report (the `http` module's names the grant to ask for). Say what you need with
//! [`Plugin::requests`]: the operator sees it next to what is granted. A
//! panic ends the call: the agent is told, and the host starts a fresh
//! instance, whose state is lost unless the plugin keeps it as bytes with
//! [`Plugin::snapshot`] and [`Plugin::restore`] (then the host puts back the
//! last snapshot, after a trap and after a host restart with `--resume`).

// The generated export macro names this crate by its public name, also from
// inside the crate.
extern crate self as envhost_sdk;

mod bindings;
mod declarative;
pub mod http;
pub mod interactive;
pub mod log;
mod plugin;
mod runtime;

pub use declarative::{Call, Command, Declarative};
pub use interactive::{Interactive, Program};
pub use plugin::{
    CommandSpec, Description, Error, Plugin, Power, Request, Response, Result, Screen,
    ScreenChanges,
};

/// The most commonly used items, for `use envhost_sdk::prelude::*`.
pub mod prelude {
    pub use crate::{
        Call, Command, CommandSpec, Declarative, Description, Error, Interactive, Plugin, Power,
        Program, Request, Response, Result, Screen, ScreenChanges, fail,
    };
}

/// Not public API: what [`export!`] expands to needs these.
#[doc(hidden)]
pub mod __private {
    pub use crate::bindings::*;
    pub use crate::runtime::Adapter;
}

/// Exports a [`Plugin`] (or a [`Declarative`] environment, which is one) as
/// the component's environment. The type must implement `Default`: the
/// host creates one instance when it loads the plugin, and a fresh one after
/// a trap.
///
/// Use it once, at the root of a `cdylib` crate.
#[macro_export]
macro_rules! export {
    ($plugin:ty) => {
        // Only a WebAssembly build exports the component's functions (their
        // names, `envhost:environment/environment@0.2.1#describe`, are not
        // valid native symbol names); a native build, for unit tests and
        // lints, only checks that the type can be exported.
        #[cfg(target_family = "wasm")]
        const _: () = {
            type __EnvhostPlugin = $crate::__private::Adapter<$plugin>;
    $crate::__private::export_plugin!(__EnvhostPlugin with_types_in $crate::__private);
        };
        #[cfg(not(target_family = "wasm"))]
        const _: () = {
            fn exportable<P: $crate::Plugin + ::core::default::Default>() {}
            let _ = exportable::<$plugin>;
        };
    };
}
