//! Finding and loading plugins: `<project>/env/*.wasm` → checked, compiled
//! (or taken from the cache), linked, test-instantiated and described.
//!
//! Discovery: every `*.wasm` in `env/`, names starting with
//! `_` skipped, the file's stem is the environment's name and must be an
//! identifier; a name that reads like a built-in's (bash, python, editor)
//! or like an earlier plugin's is refused (`names`), and so is every
//! plugin past the most the host loads. Loading runs the whole type-check
//! — the file's size, the operator's pin first, then compile (bounded:
//! `compile`; in a session, a large plugin not yet cached to baseline
//! code first, its optimised code left to `tiering`), link against the host's imports, instantiate with the plugin's
//! grants (signature mismatches only show there), call `describe` and the
//! optional `capabilities` export and check them — so that `envhost check`
//! and start-up give the same verdict. Plugins load in parallel (compiling is the slow part).
//! This module decides the order of those steps; it must not word refusals
//! (`validate` does), keep compiled code (`cache`) or register environments
//! (the caller does).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wasmtime::component::Component;

use crate::exports::PluginPre;
use crate::grants::{Grants, Request};
use crate::guest_io::CallOutput;
use crate::instance::LiveInstance;
use crate::load::cache::{CacheOutcome, CodeCache, Compiled, Miss, content_sha256};
use crate::load::compile::{self, CompileError};
use crate::load::file_hashes::{FileHashes, FileIdentity};
use crate::load::names;
use crate::load::refusals::{self, CheckedDescription, Refusal};
use crate::load::tiering::Pending;
use crate::sandbox::{Sandbox, Tier};
use crate::settings::PluginSettings;
use envhost_core::EnvironmentName;
use envhost_core::text;

/// A file that looks like a plugin and has a usable name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub name: EnvironmentName,
    pub path: PathBuf,
}

/// What `env/` holds.
#[derive(Debug, Default)]
pub struct Discovery {
    pub candidates: Vec<Candidate>,
    /// Files refused by name alone, and an unreadable folder.
    pub refusals: Vec<Refusal>,
}

/// Lists the plugins in `env_dir`, in name order, at most `max_plugins` of
/// them. A missing folder is an empty list.
pub fn discover(env_dir: &Path, max_plugins: usize) -> Discovery {
    let mut discovery = Discovery::default();
    let entries = match fs::read_dir(env_dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return discovery,
        Err(err) => {
            discovery.refusals.push(Refusal::new(
                "env",
                env_dir,
                format!("the plugin folder cannot be read: {err}"),
            ));
            return discovery;
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "wasm"))
        .collect();
    paths.sort();
    let mut admitted: Vec<String> = Vec::new();
    for path in paths {
        let found = match candidate(&path) {
            Ok(Some(found)) => found,
            Ok(None) => continue,
            Err(refusal) => {
                discovery.refusals.push(refusal);
                continue;
            }
        };
        if let Err(refusal) = admit(&found, &admitted, max_plugins) {
            discovery.refusals.push(refusal);
            continue;
        }
        admitted.push(found.name.as_str().to_owned());
        discovery.candidates.push(found);
    }
    discovery
}

/// Whether `found` may join the plugins already admitted (`admitted`, by
/// name): the rules that depend on the others, one function for start-up
/// ([`discover`]) and for a plugin file that appears or changes while a
/// watching host runs. A name that reads like an admitted plugin's is
/// refused, and so is a plugin past the most the host loads; a name
/// already admitted is the same plugin rebuilt, which takes its own place.
pub fn admit(found: &Candidate, admitted: &[String], max_plugins: usize) -> Result<(), Refusal> {
    let name = found.name.as_str();
    if let Some(refusal) = names::reads_like_plugin(name, admitted.iter().map(String::as_str)) {
        return Err(Refusal::new(
            name,
            &found.path,
            format!("{refusal}; rename one of them"),
        ));
    }
    let replaces = admitted.iter().any(|other| other == name);
    if !replaces && admitted.len() >= max_plugins {
        return Err(Refusal::new(
            name,
            &found.path,
            format!(
                "the host loads at most {max_plugins} plugins and env/ has more; they load in name order (--max-plugins N raises the limit)"
            ),
        ));
    }
    Ok(())
}

/// The candidate for one `*.wasm` path; `None` for private (`_name.wasm`).
pub fn candidate(path: &Path) -> Result<Option<Candidate>, Refusal> {
    let stem = path.file_stem().unwrap_or_default();
    let Some(stem) = stem.to_str() else {
        let shown = stem.to_string_lossy().into_owned();
        return Err(Refusal::new(
            &shown,
            path,
            "its file name is not valid UTF-8; rename it to an identifier such as my_env.wasm",
        ));
    };
    if stem.starts_with('_') {
        return Ok(None);
    }
    let name = names::plugin_name(stem).map_err(|refusal| {
        let remedy = match &refusal {
            names::NameRefusal::NotAnIdentifier(_) => {
                let suggestion = EnvironmentName::suggested_by(stem);
                if suggestion.starts_with(|c: char| c.is_ascii_digit()) {
                    format!("rename it, e.g. to env_{suggestion}.wasm")
                } else {
                    format!("rename it, e.g. to {suggestion}.wasm")
                }
            }
            _ => "rename the file".to_owned(),
        };
        Refusal::new(stem, path, format!("{refusal}; {remedy}"))
    })?;
    Ok(Some(Candidate {
        name,
        path: path.to_owned(),
    }))
}

/// A plugin that passed every check, with its first instance running.
pub struct LoadedPlugin {
    pub name: EnvironmentName,
    pub path: PathBuf,
    pub size: u64,
    pub sha256: String,
    pub compile: CacheOutcome,
    pub compile_time: Duration,
    pub imports: Vec<String>,
    pub description: CheckedDescription,
    /// What it asks for (empty without a `capabilities` export).
    pub requests: Vec<Request>,
    /// What the operator granted it.
    pub grants: Arc<Grants>,
    pub pre: PluginPre,
    pub instance: LiveInstance,
    /// What the plugin said while starting and describing itself.
    pub start_output: CallOutput,
    /// Started on baseline code: what compiling its optimised code needs.
    pub pending: Option<Pending>,
}

/// Loads one plugin, or says why not. A slow first compile and a cache
/// that cannot be written are said on stderr.
pub fn load(
    sandbox: &Sandbox,
    settings: &PluginSettings,
    candidate: &Candidate,
    grants: &Arc<Grants>,
) -> Result<LoadedPlugin, Refusal> {
    let cache = &settings.cache;
    let name = candidate.name.as_str();
    let path = &candidate.path;
    let refuse = |problem: String| Refusal::new(name, path, problem);
    // Taken before the file is read: a change during the read then shows
    // as a changed identity at the next start.
    let identity = FileIdentity::of(path).ok();
    if let Some(identity) = &identity {
        too_large(identity.size(), settings.max_size).map_err(|large| refuse(large.to_string()))?;
    }
    let hashes = match cache {
        CodeCache::Directory(dir) => Some(FileHashes::in_cache(dir)),
        CodeCache::Disabled => None,
    };
    // A warm start of an unchanged, unpinned plugin needs neither its bytes
    // nor their hash: the compiled code is mapped straight from the cache.
    // A pin is always checked against the bytes themselves.
    let remembered = match (&hashes, &identity, &grants.pin) {
        (Some(hashes), Some(identity), None) => hashes
            .lookup(path, identity)
            .and_then(|sha256| Some((cache.load_cached(sandbox.engine(), &sha256).ok()?, sha256))),
        _ => None,
    };
    let (compiled, sha256, size, pending) = match (remembered, identity) {
        (Some((compiled, sha256)), Some(identity)) => (compiled, sha256, identity.size(), None),
        _ => {
            let (compiled, sha256, size, pending) =
                read_and_compile(sandbox, settings, candidate, grants)?;
            if let (Some(hashes), Some(identity)) = (&hashes, &identity) {
                hashes.record(path, identity, &sha256);
            }
            (compiled, sha256, size, pending)
        }
    };
    let component = compiled.component;
    let checked = link_and_start(sandbox, &component, name, grants)
        .map_err(|(problem, detail)| refuse(problem).with_detail(detail))?;
    Ok(LoadedPlugin {
        name: candidate.name.clone(),
        path: path.clone(),
        size,
        sha256,
        compile: compiled.outcome,
        compile_time: compiled.took,
        imports: refusals::imports_of(&component, component.engine()),
        description: checked.description,
        requests: checked.requests,
        grants: Arc::clone(grants),
        pre: checked.pre,
        instance: checked.instance,
        start_output: checked.output,
        pending,
    })
}

/// Reads the plugin, checks its pin and header, and compiles it (or maps
/// its cached code); returns the code, the bytes' sha256 and their size,
/// and, for code compiled to the baseline tier, what compiling its
/// optimised code needs.
fn read_and_compile(
    sandbox: &Sandbox,
    settings: &PluginSettings,
    candidate: &Candidate,
    grants: &Arc<Grants>,
) -> Result<(Compiled, String, u64, Option<Pending>), Refusal> {
    let cache = &settings.cache;
    let name = candidate.name.as_str();
    let path = &candidate.path;
    let refuse = |problem: String| Refusal::new(name, path, problem);
    let bytes = read_plugin(path, settings.max_size)
        .map_err(|unreadable| refuse(unreadable.to_string()))?;
    let sha256 = content_sha256(&bytes);
    if let Some(mismatch) = pin_mismatch(grants, name, &sha256) {
        return Err(refuse(mismatch));
    }
    refusals::check_header(&bytes).map_err(|defect| refuse(defect.to_string()))?;
    let size = bytes.len() as u64;
    let tiered = matches!(cache, CodeCache::Directory(_))
        && settings.baseline_above.is_some_and(|above| size > above);
    if tiered {
        let rejected = match cache.load_cached(sandbox.engine(), &sha256) {
            Ok(hit) => return Ok((hit, sha256, size, None)),
            Err(Miss::Absent) => None,
            Err(Miss::Rejected(why)) => Some(why),
        };
        eprintln!(
            "envhost: compiling plugin {name} ({}) to baseline code; its optimised code is compiled in the background and cached",
            text::bytes(size)
        );
        match compile_baseline(sandbox, settings, &bytes) {
            Ok((component, took)) => {
                let compiled = Compiled {
                    component,
                    outcome: CacheOutcome::Baseline { rejected },
                    took,
                };
                let pending = Pending {
                    bytes,
                    sha256: sha256.clone(),
                };
                return Ok((compiled, sha256, size, Some(pending)));
            }
            // The limits are the host's, whichever the compiler.
            Err(err @ (CompileError::TooSlow { .. } | CompileError::TooLarge { .. })) => {
                return Err(refuse(err.to_string()));
            }
            // Winch does not compile everything Cranelift does (tail
            // calls, exceptions, relaxed SIMD): the optimised compilation
            // below runs the plugin or words the refusal.
            Err(_) => {}
        }
    }
    if bytes.len() > 1 << 20 && !cache.has_entry(sandbox.engine(), &sha256) {
        eprintln!(
            "envhost: compiling plugin {name} ({}); this happens once, the result is cached",
            text::bytes(bytes.len() as u64)
        );
    }
    let compiled = cache
        .load_or_compile(sandbox.engine(), &bytes, &sha256, |bytes| {
            compile::compile(
                &settings.compiler,
                sandbox.engine(),
                Tier::Optimised,
                bytes,
                None,
            )
            .map_err(wasmtime::Error::from)
        })
        .map_err(|err| match err.downcast_ref::<CompileError>() {
            Some(CompileError::Invalid(detail)) => {
                let (problem, _) = refusals::compile_problem(&err);
                refuse(problem).with_detail(detail.clone())
            }
            Some(bounded) => refuse(bounded.to_string()),
            // The compiled code did not load (cannot happen with code this
            // host made, but is said if it does).
            None => {
                let (problem, detail) = refusals::compile_problem(&err);
                refuse(problem).with_detail(detail)
            }
        })?;
    say_cache_trouble(name, &compiled.outcome);
    Ok((compiled, sha256, size, None))
}

/// Why the bytes' `sha256` is not the pin in the grants file, if it is not.
fn pin_mismatch(grants: &Grants, name: &str, sha256: &str) -> Option<String> {
    let pin = grants.pin.as_ref().filter(|pin| pin.value != sha256)?;
    Some(format!(
        "its content does not match the pin in {}: the file's sha256 is {sha256}, the pin (line {}, [plugins.{name}] sha256) is {}. If you replaced the plugin on purpose, check the new file (`envhost check`) and put its sha256 in the pin",
        grants.source.file, pin.at.line, pin.value
    ))
}

/// Tells the operator (on stderr) when cached code was not used or the
/// compiled code could not be cached: the next start pays for it again.
fn say_cache_trouble(name: &str, outcome: &CacheOutcome) {
    if let CacheOutcome::Compiled {
        saved, rejected, ..
    } = outcome
    {
        if let Some(why) = rejected {
            eprintln!(
                "envhost: plugin {name}: its cached compiled code was not used ({why}); it was compiled again"
            );
        }
        if let Err(why) = saved {
            eprintln!(
                "envhost: plugin {name}: the compiled code was not cached ({why}); the next start compiles it again"
            );
        }
    }
}

/// The plugin compiled to baseline code (bounded like any compilation),
/// and what that took.
fn compile_baseline(
    sandbox: &Sandbox,
    settings: &PluginSettings,
    bytes: &[u8],
) -> Result<(Component, Duration), CompileError> {
    let started = std::time::Instant::now();
    let engine = &sandbox.runtime(Tier::Baseline).engine;
    let serialized = compile::compile(&settings.compiler, engine, Tier::Baseline, bytes, None)?;
    let component = crate::load::cache::from_serialized(engine, &serialized)
        .map_err(|err| CompileError::Failed(crate::failure::error_chain(&err)))?;
    Ok((component, started.elapsed()))
}

struct Started {
    pre: PluginPre,
    instance: LiveInstance,
    description: CheckedDescription,
    requests: Vec<Request>,
    output: CallOutput,
}

/// The type-check proper: link, instantiate, describe, ask for requests.
fn link_and_start(
    sandbox: &Sandbox,
    component: &Component,
    name: &str,
    grants: &Arc<Grants>,
) -> Result<Started, (String, String)> {
    let instance_pre = sandbox
        .linker(component.engine())
        .instantiate_pre(component)
        .map_err(|err| refusals::link_problem(&err))?;
    let pre = PluginPre::new(instance_pre.clone(), component.engine())
        .map_err(|err| refusals::export_problem(&err))?;
    // A signature mismatch only shows at instantiation, hence its own
    // explanation there.
    let mut instance = LiveInstance::instantiate(sandbox, &pre, grants).map_err(|(err, _)| {
        refusals::instantiate_problem(&err, sandbox, &pre, component, grants)
    })?;
    let described = instance.describe(sandbox);
    let mut output = described.output;
    let description = described.result.map_err(|failure| {
        (
            format!("it failed while describing itself: {}", failure.cause),
            failure.detail,
        )
    })?;
    let description = refusals::check_description(name, &description)
        .map_err(|defect| (defect.to_string(), String::new()))?;
    let asked = instance.requested(sandbox);
    output.append(asked.output);
    let requests = asked.result.map_err(|failure| {
        (
            format!(
                "its `capabilities` export failed when asked what it requests: {}",
                failure.cause
            ),
            failure.detail,
        )
    })?;
    refusals::check_requests(&requests).map_err(|defect| (defect.to_string(), String::new()))?;
    let asked = instance.ask_screen_changes(sandbox);
    output.append(asked.output);
    asked.result.map_err(|failure| {
        (
            format!(
                "its `screen-changes` export failed when asked when its screen changes: {}",
                failure.cause
            ),
            failure.detail,
        )
    })?;
    Ok(Started {
        pre,
        instance,
        description,
        requests,
        output,
    })
}

/// Why a plugin file cannot be read for compiling.
#[derive(Debug, thiserror::Error)]
pub enum UnreadablePlugin {
    /// Nothing is there.
    #[error("the file cannot be read: it does not exist")]
    Missing,
    /// Reading it failed.
    #[error("the file cannot be read: {0}")]
    Io(std::io::Error),
    /// Over the size the host compiles.
    #[error(
        "the file is {}, over the {} the host compiles (compiling costs time and memory in proportion; --plugin-max-size raises the limit)",
        text::bytes(*.size),
        text::bytes(*.max_size)
    )]
    TooLarge {
        /// The file's size in bytes.
        size: u64,
        /// The most the host compiles.
        max_size: u64,
    },
    /// Not a file the host reads from env/ (a symlink, a FIFO…).
    #[error("it {0}")]
    Refused(envhost_files::RefusalReason),
}

/// A file over the size the host compiles is refused before it is read.
fn too_large(size: u64, max_size: u64) -> Result<(), UnreadablePlugin> {
    if size > max_size {
        return Err(UnreadablePlugin::TooLarge { size, max_size });
    }
    Ok(())
}

/// The sha256 of the plugin file at `path`, read as [`load`] reads it (no
/// symlink followed, at most `max_size` bytes); `None` when it cannot be
/// read that way (loading it then says why).
pub fn file_sha256(path: &Path, max_size: u64) -> Option<String> {
    read_plugin(path, max_size)
        .ok()
        .map(|bytes| content_sha256(&bytes))
}

/// The plugin's bytes. Commands can write in `env/`: a symlink there is
/// not followed, a FIFO not waited on, and at most `max_size` bytes are
/// read (through the same handle, one byte past the limit: a file that
/// grows in between is caught too).
fn read_plugin(path: &Path, max_size: u64) -> Result<Vec<u8>, UnreadablePlugin> {
    use envhost_files::{Bound, RefusalReason};
    let problem = |reason: RefusalReason| match reason {
        RefusalReason::Missing => UnreadablePlugin::Missing,
        RefusalReason::Io(err) => UnreadablePlugin::Io(err),
        RefusalReason::TooLarge { size, .. } => UnreadablePlugin::TooLarge { size, max_size },
        other => UnreadablePlugin::Refused(other),
    };
    let opened =
        envhost_files::untrusted::open_file(path).map_err(|refusal| problem(refusal.reason))?;
    too_large(opened.metadata().len(), max_size)?;
    opened
        .read(Bound::new(max_size, "a plugin"))
        .map_err(|refusal| problem(refusal.reason))
}

/// Loads every candidate with its grants, several at a time, keeping their
/// order.
pub fn load_all(
    sandbox: &Sandbox,
    settings: &PluginSettings,
    candidates: &[(Candidate, Arc<Grants>)],
) -> Vec<Result<LoadedPlugin, Refusal>> {
    let workers = std::thread::available_parallelism()
        .map(usize::from)
        .unwrap_or(1)
        .min(candidates.len());
    if workers <= 1 {
        return candidates
            .iter()
            .map(|(c, grants)| load(sandbox, settings, c, grants))
            .collect();
    }
    let next = Mutex::new(0usize);
    let results: Mutex<Vec<Option<Result<LoadedPlugin, Refusal>>>> =
        Mutex::new((0..candidates.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let index = {
                        let mut next = next.lock().unwrap_or_else(|p| p.into_inner());
                        let index = *next;
                        *next += 1;
                        index
                    };
                    let Some((candidate, grants)) = candidates.get(index) else {
                        return;
                    };
                    let loaded = load(sandbox, settings, candidate, grants);
                    results.lock().unwrap_or_else(|p| p.into_inner())[index] = Some(loaded);
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_iter()
        .zip(candidates)
        .map(|(result, (candidate, _))| {
            result.unwrap_or_else(|| {
                Err(Refusal::new(
                    candidate.name.as_str(),
                    &candidate.path,
                    "loading it did not finish (a loader thread failed)",
                ))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admitting_beside_loaded_plugins_applies_the_start_up_rules() {
        let found = |name: &str| Candidate {
            name: EnvironmentName::new(name).unwrap(),
            path: PathBuf::from(format!("env/{name}.wasm")),
        };
        let loaded = ["notes".to_owned(), "timer".to_owned()];
        assert!(admit(&found("extra"), &loaded, 3).is_ok());
        let refused = admit(&found("extra"), &loaded, 2).unwrap_err();
        assert!(
            refused.problem.contains("the host loads at most 2 plugins"),
            "{}",
            refused.problem
        );
        // A rebuilt plugin takes its own place: neither the cap nor its
        // own name refuses it.
        assert!(admit(&found("timer"), &loaded, 2).is_ok());
        let refused = admit(&found("Timer"), &loaded, 10).unwrap_err();
        assert!(
            refused
                .problem
                .contains("reads like that of the plugin `timer`"),
            "{}",
            refused.problem
        );
    }

    #[test]
    fn discovery_names_environments_after_their_files() {
        let dir = tempfile::tempdir().unwrap();
        for file in [
            "timer.wasm",
            "_private.wasm",
            "my-env.wasm",
            "2fast.wasm",
            "bash.wasm",
            "notes.txt",
            "données.wasm",
        ] {
            fs::write(dir.path().join(file), b"").unwrap();
        }
        let found = discover(dir.path(), 10);
        let names: Vec<&str> = found.candidates.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["données", "timer"]);
        let refused: Vec<(&str, &str)> = found
            .refusals
            .iter()
            .map(|r| (r.plugin.as_str(), r.problem.as_str()))
            .collect();
        assert_eq!(refused.len(), 3, "{refused:?}");
        assert!(
            refused[0].0 == "2fast" && refused[0].1.contains("rename it, e.g. to env_2fast.wasm")
        );
        assert!(refused[1].0 == "bash" && refused[1].1.contains("belongs to a built-in"));
        assert!(refused[2].0 == "my-env" && refused[2].1.contains("e.g. to my_env.wasm"));
    }

    #[test]
    fn a_missing_folder_has_no_plugins() {
        let found = discover(Path::new("/nonexistent/envhost/env"), 10);
        assert!(found.candidates.is_empty() && found.refusals.is_empty());
    }
}
