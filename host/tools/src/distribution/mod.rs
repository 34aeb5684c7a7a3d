//! The commands that distribute plugins: `add`, `install`, `update`,
//! `verify`, `remove`, `list` and `publish`.
//!
//! Every command that changes the project runs in one order: fetch and
//! verify (digests, media types, the signature the operator requires:
//! envhost-registry), check the component against the host's contract with
//! the grants the project gives it (envhost-plugin's `check_as`, the checks
//! `envhost check` runs), and only then write — the component, its pin in
//! the grants file, its lock entry — each to a temporary file renamed into
//! place at the end, so a refusal at any step leaves the project as it
//! was. The network belongs to envhost-registry, the contract and the
//! grants file to envhost-plugin; this module owns the order and the
//! project's files. Nothing here runs when a session starts.

mod add;
mod args;
mod contract;
mod error;
mod install;
mod list;
mod network;
mod project;
mod publish;
mod remove;
#[cfg(test)]
mod tests;
mod update;
mod verify;

pub use args::{
    AddArgs, Command, InstallArgs, NetworkArgs, ProjectArgs, PublishArgs, RemoveArgs, UpdateArgs,
};
pub use error::DistributionError;
use error::Result;

/// Runs one distribution command.
pub fn run(command: Command) -> Result<()> {
    match command {
        Command::Add(args) => add::add(args),
        Command::Install(args) => install::install(args),
        Command::Update(args) => update::update(args),
        Command::Verify(args) => verify::verify(args),
        Command::Remove(args) => remove::remove(args),
        Command::List(args) => list::list(args),
        Command::Publish(args) => publish::publish(args),
    }
}
