//! The WIT contract as the host sees it: generated bindings, and the names
//! in them that messages quote, one module per version of `wit/` the host
//! accepts.
//!
//! Today there is one version, [`since_v0_1_0`], which is also `latest`.
//! When the WIT changes incompatibly, the new version gets its own
//! `since_vX_Y_Z.rs` beside it and becomes `latest`; the older module stays,
//! with the code that adapts its types to the latest ones, so that the host
//! accepts plugins built against either (the layout of Zed's extension
//! host, `wasm_host/wit/since_vX.rs`).
//!
//! These modules generate and name; they must not call into plugins or
//! import anything else of this crate (`with:` maps WIT resources to types
//! of other crates).

pub(crate) mod since_v0_1_0;

pub(crate) use since_v0_1_0 as latest;
