//! Plain sentences for plugins the host refuses.
//!
//! The decision is always wasmtime's (its parser, its linker, its
//! type-check at instantiation) or the help system's (`help.rs` refuses
//! duplicate command names); this module only explains it: which plugin,
//! which export or import, what the host expected and what the plugin has,
//! with wasmtime's own words kept at the end. It reads the component's type
//! (its imports and exports) to say what was found. It must not load,
//! cache or run plugins, except the one probe that names the function whose
//! signature is wrong (wasmtime's error does not).

use std::fmt;
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::types::{ComponentFunc, ComponentItem};
use wasmtime::component::{Component, Type};

use std::sync::Arc;

use crate::exports::{ExportsError, PluginPre};
use crate::failure::error_chain;
use crate::grants::{Grants, MAX_REQUEST_TEXT, MAX_REQUESTS, Power, Request};
use crate::limits::HELP_BYTES_LIMIT;
use crate::plugin_text;
use crate::sandbox::Sandbox;
use crate::wit::latest::{CommandResponse, Description, ScreenSection};
use crate::wit::{EXPORTED_FUNCTIONS, Version, latest, since_v0_1_0 as v0_1_0};
use envhost_core::text;
use envhost_core::{CommandHelp, CommandSpec};

/// At most this many described commands.
pub const MAX_COMMANDS: usize = 100;
/// At most this many bytes in one described text (a signature, a
/// description, an example, the summary).
pub const MAX_DESCRIBED_TEXT: usize = 16 * 1024;

/// A plugin the host will not load, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The environment name it would have had (or the file's stem).
    pub plugin: String,
    pub file: PathBuf,
    /// What is wrong, as a sentence about the plugin ("it does not export
    /// ..."), saying what was expected.
    pub problem: String,
    /// wasmtime's words, when they came from wasmtime.
    pub detail: Option<String>,
}

impl Refusal {
    pub fn new(plugin: &str, file: &Path, problem: impl Into<String>) -> Self {
        Refusal {
            // A file's stem may hold anything, line breaks and escape
            // sequences included.
            plugin: plugin_text::name(plugin).into_owned(),
            file: file.to_owned(),
            problem: problem.into(),
            detail: None,
        }
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        let detail = detail.into();
        if !detail.is_empty() {
            self.detail = Some(detail);
        }
        self
    }

    /// One paragraph for stderr, the screen and `envhost check`, with the
    /// file shown relative to `base` when it is inside it.
    pub fn sentence(&self, base: Option<&Path>) -> String {
        let shown = base
            .and_then(|base| self.file.strip_prefix(base).ok())
            .unwrap_or(&self.file);
        let mut text = format!(
            "plugin `{}` ({}) was refused: {}",
            self.plugin,
            plugin_text::name(&shown.to_string_lossy()),
            self.problem
        );
        if let Some(detail) = &self.detail {
            text.push_str(&format!(" (wasmtime: {detail})"));
        }
        text
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.sentence(None))
    }
}

/// What is wrong with a plugin's bytes, description or requests, in the
/// words of its refusal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PluginDefect(String);

impl From<String> for PluginDefect {
    fn from(message: String) -> Self {
        PluginDefect(message)
    }
}

const BUILD_HINT: &str = "build it for the `wasm32-wasip2` target (which makes a component) against envhost's wit/v0.2.1, e.g. with the envhost-sdk crate";

/// Checks the 8-byte header before anything is compiled: WebAssembly at
/// all, and a component rather than a core module.
pub fn check_header(bytes: &[u8]) -> Result<(), PluginDefect> {
    const MAGIC: &[u8] = b"\0asm";
    if bytes.is_empty() {
        return Err(format!("the file is empty; {BUILD_HINT}").into());
    }
    if bytes.len() < 8 || &bytes[..4] != MAGIC {
        let start: String = bytes
            .iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(" ");
        return Err(format!(
            "it is not a WebAssembly file (it starts with bytes {start}, not the WebAssembly magic 00 61 73 6d); {BUILD_HINT}"
        ).into());
    }
    match &bytes[4..8] {
        [0x01, 0x00, 0x00, 0x00] => Err(format!(
            "it is a core WebAssembly module, not a component. A plugin must be a component for the world `{}`: {BUILD_HINT} (the wasm32-wasip1 and wasm32-unknown-unknown targets make core modules; `wasm-tools component new` wraps one)",
            Version::LATEST.name("plugin")
        ).into()),
        [0x0d, 0x00, 0x01, 0x00] => Ok(()),
        other => Err(format!(
            "it is a WebAssembly binary of an unknown version or layer ({}); this host reads components (version 0d 00, layer 01 00)",
            other
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(" ")
        ).into()),
    }
}

/// A component that does not compile (corrupt or unsupported features).
pub fn compile_problem(err: &wasmtime::Error) -> (String, String) {
    (
        format!(
            "it is not a valid WebAssembly component, or uses features this host does not support; {BUILD_HINT}"
        ),
        error_chain(err),
    )
}

/// `linker.instantiate_pre` failed: an import the host does not provide.
pub fn link_problem(err: &wasmtime::Error) -> (String, String) {
    let detail = error_chain(err);
    let messages: Vec<String> = err.chain().map(|c| c.to_string()).collect();
    let interface = messages.iter().find_map(|m| {
        between(
            m,
            "component imports instance `",
            "`, but a matching implementation was not found",
        )
    });
    let item = messages
        .iter()
        .find_map(|m| between(m, "instance export `", "` has the wrong type"));
    let missing_function = messages
        .iter()
        .any(|m| m.contains("function implementation is missing"));
    let problem = match (interface, item) {
        (Some(interface), Some(item)) if is_ours(&interface) => {
            // Quote the version the plugin was built against.
            let version = interface
                .rsplit_once('@')
                .and_then(|(_, number)| {
                    Version::of_export(&format!("{}@{number}", crate::wit::ENVIRONMENT_INTERFACE))
                })
                .and_then(Result::ok)
                .unwrap_or(Version::LATEST);
            format!(
                "it imports `{item}` from `{interface}`, which this host does not provide{}. This host's `{}` offers `log`, and `{}` offers `start` and the `session` resource (the contract in {}); was the plugin built against a newer envhost wit/?",
                if missing_function {
                    " (no such function)"
                } else {
                    " with that type"
                },
                version.name("logging"),
                version.name("interactive"),
                version.wit_folder()
            )
        }
        (Some(interface), Some(item)) => format!(
            "it imports `{item}` from `{interface}`, which this host does not provide with that type. {}",
            offered_imports()
        ),
        (Some(interface), None) => format!(
            "it imports the interface `{interface}`, which this host does not provide. {}",
            offered_imports()
        ),
        _ => format!(
            "it needs an import this host does not provide. {}",
            offered_imports()
        ),
    };
    (problem, detail)
}

fn offered_imports() -> String {
    let versions: Vec<&str> = Version::ALL.iter().map(|v| v.number()).collect();
    format!(
        "Plugins get envhost's `logging` and `interactive` (`envhost:environment/logging@VERSION` and `interactive@VERSION`, VERSION {}) and WASI 0.2 (wasi:cli, wasi:clocks, wasi:filesystem, wasi:http, wasi:io, wasi:random, wasi:sockets; sandboxed), nothing else",
        versions.join(" or ")
    )
}

fn is_ours(interface: &str) -> bool {
    interface.starts_with("envhost:environment/")
}

/// `PluginPre::new` failed: no `environment` export of a version the host
/// accepts, or one lacking a function.
pub fn export_problem(err: &ExportsError) -> (String, String) {
    match err {
        ExportsError::Incomplete { version, error } => {
            let detail = error_chain(error);
            let missing = error.chain().find_map(|c| {
                let text = c.to_string();
                Some((
                    between(&text, "instance export `", "`")?,
                    between(&text, "does not have export `", "`")?,
                ))
            });
            let problem = match missing {
                Some((interface, function)) => {
                    let expected = version
                        .expected_signature(&function)
                        .map(|s| {
                            format!("; the host expects `{s}` (from {})", version.wit_folder())
                        })
                        .unwrap_or_default();
                    format!("its export `{interface}` lacks the function `{function}`{expected}")
                }
                None => format!(
                    "its export `{}` is incomplete; every function of {}'s `environment` must be there",
                    version.exported_interface(),
                    version.wit_folder()
                ),
            };
            (problem, detail)
        }
        ExportsError::OtherVersion { export } => (
            format!(
                "it exports `{export}`, a version of the plugin interface this host does not speak: this host loads {} (0.1.x or 0.2.x). Rebuild the plugin against this envhost's {}",
                Version::accepted(),
                Version::LATEST.wit_folder()
            ),
            String::new(),
        ),
        ExportsError::NoEnvironment { exports } => {
            let found = if exports.is_empty() {
                "it exports nothing".to_owned()
            } else {
                format!("it exports only {}", text::quoted_list(exports))
            };
            (
                format!(
                    "it does not export the interface every plugin exports, {} (the worlds of {}, {} and {}); {found}. Is it a component for another world, such as a command-line program? To make a plugin, {BUILD_HINT}",
                    Version::accepted(),
                    Version::V0_2_1.wit_folder(),
                    Version::V0_2_0.wit_folder(),
                    Version::V0_1_0.wit_folder(),
                ),
                String::new(),
            )
        }
    }
}

/// Instantiation failed. A signature mismatch is only caught here, and
/// wasmtime's error does not name the function: this probes each export in
/// a fresh instance to find it.
pub fn instantiate_problem(
    err: &wasmtime::Error,
    sandbox: &Sandbox,
    pre: &PluginPre,
    component: &Component,
    grants: &Arc<Grants>,
) -> (String, String) {
    let detail = error_chain(err);
    let version = pre.version();
    let is_type_error = err.chain().any(|c| {
        let text = c.to_string();
        text.contains("type mismatch") || text.contains("failed to convert function")
    });
    if is_type_error {
        if let Some((interface, function, probe_detail)) =
            find_mistyped_function(sandbox, pre, grants)
        {
            let expected = version.expected_signature(function).unwrap_or("?");
            let found = found_signature(component, component.engine(), &interface, function)
                .map(|s| format!(", the plugin has `{s}`"))
                .unwrap_or_default();
            let records = expected_records(version, expected);
            return (
                format!(
                    "its function `{function}` has the wrong signature: the host expects `{expected}`{records} (from {}){found}",
                    version.wit_folder()
                ),
                probe_detail,
            );
        }
        return (
            format!(
                "one of its exported functions has the wrong signature; the host expects {} (from {})",
                EXPORTED_FUNCTIONS
                    .iter()
                    .filter_map(|f| version.expected_signature(f))
                    .map(|s| format!("`{s}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                version.wit_folder()
            ),
            detail,
        );
    }
    let cause = crate::failure::classify(err, "").cause;
    (format!("it failed to start: {cause}"), detail)
}

fn expected_records(version: Version, signature: &str) -> String {
    let mut parts = Vec::new();
    for record in ["command-response", "screen-section", "description"] {
        if signature.contains(record)
            && let Some(fields) = version.record_fields(record)
        {
            parts.push(format!("{record} is `record {{ {fields} }}`"));
        }
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" (where {})", parts.join("; "))
    }
}

/// The first exported function whose type is not the version's: its
/// interface, its name and wasmtime's words.
fn find_mistyped_function(
    sandbox: &Sandbox,
    pre: &PluginPre,
    grants: &Arc<Grants>,
) -> Option<(String, &'static str, String)> {
    let version = pre.version();
    let mut store = sandbox.new_store(
        pre.instance_pre().engine(),
        crate::guest_io::GuestOutput::new(),
        grants,
    );
    let instance = {
        let _call = sandbox.begin_call(&mut store, crate::limits::QUICK_CALL_LIMIT, None);
        pre.instance_pre().instantiate(&mut store).ok()?
    };
    let mut functions: Vec<(&str, &'static str)> = EXPORTED_FUNCTIONS
        .iter()
        .map(|function| ("environment", *function))
        .collect();
    functions.push(("capabilities", "requested"));
    if version.has_state_interface() {
        functions.extend([("state", "snapshot"), ("state", "restore")]);
    }
    if version == Version::V0_2_1 {
        functions.push(("screen-changes", "screen-changes"));
    }
    for (interface_name, function) in functions {
        let interface_name = version.name(interface_name);
        let Some(interface) = instance.get_export_index(&mut store, None, &interface_name) else {
            continue;
        };
        let index = instance.get_export_index(&mut store, Some(&interface), function)?;
        let checked = match (function, version) {
            ("describe", _) => instance
                .get_typed_func::<(), (Description,)>(&mut store, &index)
                .map(drop),
            ("handle-command", _) => instance
                .get_typed_func::<(String,), (CommandResponse,)>(&mut store, &index)
                .map(drop),
            ("get-screen", _) => instance
                .get_typed_func::<(), (ScreenSection,)>(&mut store, &index)
                .map(drop),
            ("requested", Version::V0_1_0) => instance
                .get_typed_func::<(), (Vec<v0_1_0::Request>,)>(&mut store, &index)
                .map(drop),
            ("requested", _) => instance
                .get_typed_func::<(), (Vec<latest::Request>,)>(&mut store, &index)
                .map(drop),
            ("snapshot", _) => instance
                .get_typed_func::<(), (Vec<u8>,)>(&mut store, &index)
                .map(drop),
            ("restore", _) => instance
                .get_typed_func::<(&[u8],), (Result<(), String>,)>(&mut store, &index)
                .map(drop),
            ("screen-changes", _) => instance
                .get_typed_func::<(), (latest::When,)>(&mut store, &index)
                .map(drop),
            _ => instance
                .get_typed_func::<(), ()>(&mut store, &index)
                .map(drop),
        };
        if let Err(err) = checked {
            return Some((interface_name, function, error_chain(&err)));
        }
    }
    None
}

/// The signature of one of the component's exported functions, in WIT
/// syntax with records spelled out.
pub fn found_signature(
    component: &Component,
    engine: &Engine,
    interface: &str,
    function: &str,
) -> Option<String> {
    let component_type = component.component_type();
    let (_, interface) = component_type
        .exports(engine)
        .find(|(name, _)| name.split('@').next() == interface.split('@').next())?;
    let ComponentItem::ComponentInstance(instance) = interface.ty else {
        return None;
    };
    let export = instance.get_export(engine, function)?;
    let ComponentItem::ComponentFunc(func) = export.ty else {
        return None;
    };
    Some(format!("{function}: {}", render_func(&func)))
}

fn render_func(func: &ComponentFunc) -> String {
    let params: Vec<String> = func
        .params()
        .map(|(name, ty)| format!("{name}: {}", render_type(&ty)))
        .collect();
    let results: Vec<String> = func.results().map(|ty| render_type(&ty)).collect();
    let mut text = format!("func({})", params.join(", "));
    match results.len() {
        0 => {}
        1 => text.push_str(&format!(" -> {}", results[0])),
        _ => text.push_str(&format!(" -> tuple<{}>", results.join(", "))),
    }
    text
}

/// A component-model type in WIT-like syntax.
pub fn render_type(ty: &Type) -> String {
    match ty {
        Type::Bool => "bool".into(),
        Type::S8 => "s8".into(),
        Type::U8 => "u8".into(),
        Type::S16 => "s16".into(),
        Type::U16 => "u16".into(),
        Type::S32 => "s32".into(),
        Type::U32 => "u32".into(),
        Type::S64 => "s64".into(),
        Type::U64 => "u64".into(),
        Type::Float32 => "f32".into(),
        Type::Float64 => "f64".into(),
        Type::Char => "char".into(),
        Type::String => "string".into(),
        Type::List(list) => format!("list<{}>", render_type(&list.ty())),
        Type::Record(record) => format!(
            "record {{ {} }}",
            record
                .fields()
                .map(|f| format!("{}: {}", f.name, render_type(&f.ty)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Type::Tuple(tuple) => format!(
            "tuple<{}>",
            tuple
                .types()
                .map(|t| render_type(&t))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Type::Variant(variant) => format!(
            "variant {{ {} }}",
            variant
                .cases()
                .map(|case| match &case.ty {
                    Some(ty) => format!("{}({})", case.name, render_type(ty)),
                    None => case.name.to_owned(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Type::Enum(e) => format!("enum {{ {} }}", e.names().collect::<Vec<_>>().join(", ")),
        Type::Option(option) => format!("option<{}>", render_type(&option.ty())),
        Type::Result(result) => match (result.ok(), result.err()) {
            (None, None) => "result".into(),
            (Some(ok), None) => format!("result<{}>", render_type(&ok)),
            (None, Some(err)) => format!("result<_, {}>", render_type(&err)),
            (Some(ok), Some(err)) => format!("result<{}, {}>", render_type(&ok), render_type(&err)),
        },
        Type::Flags(flags) => format!(
            "flags {{ {} }}",
            flags.names().collect::<Vec<_>>().join(", ")
        ),
        Type::Own(_) => "own<resource>".into(),
        Type::Borrow(_) => "borrow<resource>".into(),
        Type::Map(map) => format!(
            "map<{}, {}>",
            render_type(&map.key()),
            render_type(&map.value())
        ),
        Type::FixedLengthList(list) => format!("list<{}, {}>", render_type(&list.ty()), list.len()),
        Type::Future(future) => match future.ty() {
            Some(ty) => format!("future<{}>", render_type(&ty)),
            None => "future".into(),
        },
        Type::Stream(stream) => match stream.ty() {
            Some(ty) => format!("stream<{}>", render_type(&ty)),
            None => "stream".into(),
        },
        Type::ErrorContext => "error-context".into(),
    }
}

/// The imports a component uses, by name.
pub fn imports_of(component: &Component, engine: &Engine) -> Vec<String> {
    component
        .component_type()
        .imports(engine)
        .map(|(name, _)| name.to_owned())
        .collect()
}

/// A plugin's description, checked and turned into the help system's
/// commands. An empty command list is the manual style.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedDescription {
    pub summary: String,
    pub commands: Vec<CommandSpec>,
}

pub fn check_description(
    environment: &str,
    description: &Description,
) -> Result<CheckedDescription, PluginDefect> {
    if description.commands.len() > MAX_COMMANDS {
        return Err(format!(
            "its description lists {} commands; the host takes at most {MAX_COMMANDS}",
            description.commands.len()
        )
        .into());
    }
    let too_long = |what: &str, text: &str| -> Result<(), PluginDefect> {
        if text.len() > MAX_DESCRIBED_TEXT {
            Err(format!(
                "its description's {what} is {} bytes long; the host takes at most {MAX_DESCRIBED_TEXT}",
                text.len()
            ).into())
        } else {
            Ok(())
        }
    };
    too_long("summary", &description.summary)?;
    let mut commands = Vec::with_capacity(description.commands.len());
    for (index, spec) in description.commands.iter().enumerate() {
        let label = format!(
            "command #{} (`{}`)",
            index + 1,
            plugin_text::line(spec.signature.trim())
        );
        too_long(&format!("{label} signature"), &spec.signature)?;
        too_long(&format!("{label} description"), &spec.description)?;
        too_long(&format!("{label} example"), &spec.example)?;
        if let Some(summary) = &spec.summary {
            too_long(&format!("{label} summary"), summary)?;
        }
        // A signature is one line of the help, as written: a line break in
        // it would add lines (a fake section header, say) to the screen.
        if plugin_text::has_hidden_or_break(spec.signature.trim()) {
            return Err(format!(
                "its {label} signature has a line break or a control character; a signature is one line of plain text, such as `add <name> [--fast]`"
            ).into());
        }
        commands.push(CommandSpec {
            signature: spec.signature.clone(),
            description: plugin_text::block(&spec.description).into_owned(),
            summary: spec.summary.as_deref().map(plugin_text::line),
            example: plugin_text::block(&spec.example).into_owned(),
            simple: spec.simple,
        });
    }
    let help = CommandHelp::new(environment, commands.clone())
        .map_err(|err| format!("its description cannot drive the help system: {err}"))?;
    // Until each command is used, the agent sees every command's long help
    // in every response.
    let first_shown = help.render().len();
    if first_shown > HELP_BYTES_LIMIT {
        return Err(format!(
            "its help, as the agent first sees it, is {} ({} commands), over the {} a plugin's help may take on the screen; shorten the descriptions and examples, or give commands a short `summary`",
            text::bytes(first_shown as u64),
            commands.len(),
            text::bytes(HELP_BYTES_LIMIT as u64)
        ).into());
    }
    let summary = plugin_text::block(&description.summary)
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("")
        .to_owned();
    Ok(CheckedDescription { summary, commands })
}

/// A plugin's requests, checked for size (they are shown to the operator).
pub fn check_requests(requests: &[Request]) -> Result<(), PluginDefect> {
    if requests.len() > MAX_REQUESTS {
        return Err(format!(
            "it asks for {} powers in its `capabilities` export; the host takes at most {MAX_REQUESTS}",
            requests.len()
        ).into());
    }
    for request in requests {
        let text = match &request.power {
            Power::ReadDirectory(s)
            | Power::WriteDirectory(s)
            | Power::Variable(s)
            | Power::Program(s)
            | Power::Network(s) => s.as_str(),
            Power::Memory(_) | Power::TimeLimit(_) => "",
        };
        if text.len() > MAX_REQUEST_TEXT || request.reason.len() > MAX_REQUEST_TEXT {
            return Err(format!(
                "a request in its `capabilities` export is over {MAX_REQUEST_TEXT} bytes long"
            )
            .into());
        }
        if plugin_text::has_hidden_or_break(text) {
            return Err(format!(
                "its `capabilities` export asks for {:?}, which is not a name or a path",
                text
            )
            .into());
        }
    }
    Ok(())
}

fn between(text: &str, start: &str, end: &str) -> Option<String> {
    let from = text.find(start)? + start.len();
    let to = text[from..].find(end)? + from;
    Some(text[from..to].to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wit::latest::CommandSpec as WitSpec;

    #[test]
    fn headers_are_told_apart_before_compiling() {
        assert!(check_header(b"").unwrap_err().to_string().contains("empty"));
        let text = check_header(b"hello world").unwrap_err().to_string();
        assert!(text.contains("not a WebAssembly file"), "{text}");
        assert!(text.contains("68 65 6c 6c 6f 20 77 6f"), "{text}");
        let core = check_header(b"\0asm\x01\0\0\0").unwrap_err().to_string();
        assert!(
            core.contains("core WebAssembly module, not a component"),
            "{core}"
        );
        assert!(core.contains("wasm32-wasip2"), "{core}");
        assert!(check_header(b"\0asm\x0d\0\x01\0rest").is_ok());
        assert!(
            check_header(b"\0asm\x0e\0\x01\0")
                .unwrap_err()
                .to_string()
                .contains("unknown version")
        );
    }

    #[test]
    fn link_errors_name_the_import() {
        let err = wasmtime::Error::msg("function implementation is missing")
            .context("instance export `log-level` has the wrong type")
            .context(
                "component imports instance `envhost:environment/logging@0.1.0`, but a matching implementation was not found in the linker",
            );
        let (problem, detail) = link_problem(&err);
        assert!(
            problem.starts_with(
                "it imports `log-level` from `envhost:environment/logging@0.1.0`, which this host does not provide (no such function)"
            ),
            "{problem}"
        );
        assert!(
            detail.contains("function implementation is missing"),
            "{detail}"
        );
        let foreign = wasmtime::Error::msg(
            "component imports instance `wasi:http/outgoing-handler@0.2.0`, but a matching implementation was not found in the linker",
        );
        let (problem, _) = link_problem(&foreign);
        assert!(
            problem.starts_with(
                "it imports the interface `wasi:http/outgoing-handler@0.2.0`, which this host does not provide"
            ),
            "{problem}"
        );
    }

    fn spec(signature: &str) -> WitSpec {
        WitSpec {
            signature: signature.into(),
            description: "Does it.".into(),
            summary: None,
            example: String::new(),
            simple: false,
        }
    }

    #[test]
    fn descriptions_are_checked_by_the_help_system() {
        let good = Description {
            summary: "A timer\nsecond line ignored".into(),
            commands: vec![spec("start"), spec("stop")],
        };
        let checked = check_description("timer", &good).unwrap();
        assert_eq!(checked.summary, "A timer");
        assert_eq!(checked.commands.len(), 2);
        let duplicate = Description {
            summary: "x".into(),
            commands: vec![spec("go <n>"), spec("go")],
        };
        assert_eq!(
            check_description("x", &duplicate).unwrap_err().to_string(),
            "its description cannot drive the help system: two commands are named \"go\"; each command's first word must be unique"
        );
        let many = Description {
            summary: "x".into(),
            commands: (0..=MAX_COMMANDS).map(|i| spec(&format!("c{i}"))).collect(),
        };
        assert!(
            check_description("x", &many)
                .unwrap_err()
                .to_string()
                .contains("at most 100")
        );
    }

    #[test]
    fn refusals_read_as_one_sentence() {
        let refusal = Refusal::new("rogue", Path::new("/p/env/rogue.wasm"), "it is broken")
            .with_detail("wasm trap: interrupt");
        assert_eq!(
            refusal.sentence(Some(Path::new("/p"))),
            "plugin `rogue` (env/rogue.wasm) was refused: it is broken (wasmtime: wasm trap: interrupt)"
        );
    }
}
