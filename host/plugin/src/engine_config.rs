//! The engine configuration of each compiler tier: Cranelift (optimised)
//! and Winch (baseline). Both the sandbox, which runs the code, and the
//! compiler process, which makes it, read it here, so that code made in
//! one loads in the other. Knows nothing of plugins, stores or the cache.

use wasmtime::{Config, OptLevel, Strategy};

/// Which compiler made a plugin's code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// Cranelift: what the cache holds and plugins run once warm.
    Optimised,
    /// Winch: a first start's code while the optimised code is compiled.
    Baseline,
}

/// The configuration of the engine for `tier`'s code; the compiler process
/// uses the same, so that the code it makes loads here.
pub(crate) fn engine_config(tier: Tier) -> Config {
    let mut config = Config::new();
    config.epoch_interruption(true);
    if tier == Tier::Baseline {
        config.strategy(Strategy::Winch);
        config.cranelift_opt_level(OptLevel::None);
    }
    config
}
