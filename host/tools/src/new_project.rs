//! `envhost new NAME --lang rust|python|js`: writes a working plugin
//! project — a small key-value environment using the language's SDK, the
//! WIT it builds against (`wit/v0.2.1`, WASI included), the toolchain
//! pinned, a build script, a grants stub and a session test.
//!
//! Everything it writes is embedded in the binary when it is built: the
//! templates (`host/envhost/templates`), the Python and JavaScript SDKs,
//! the Rust SDK's sources (listed by `build.rs`), the WIT, and the pins the
//! repository's own plugins build with (componentize-py's hashes from
//! `plugins/tasks/requirements.txt`, jco's lock from
//! `plugins/regex/package-lock.json`, the Rust SDK's dependencies from the
//! workspace's `Cargo.lock`), so a project made offline builds with what
//! the repository tests. This module owns the name and folder rules and the
//! files; it knows nothing of how the host loads plugins.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{self, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

include!(concat!(env!("OUT_DIR"), "/rust_sdk.rs"));

/// Why `envhost new` wrote no project. Each message says what to do next;
/// a failure while writing leaves no half-written folder.
#[derive(Debug, thiserror::Error)]
pub enum NewProjectError {
    /// The name is not one every language (and the host) accepts.
    #[error(
        "`{name}` cannot name a plugin: a name is lowercase letters, digits and `_`, starting with a letter, at most 64 \
         (it is the environment's name, the .wasm file's stem and the package's name); e.g. `envhost new {example} ...`"
    )]
    BadName {
        /// The name given.
        name: String,
        /// A name made from it that would do.
        example: String,
    },

    /// The name reads like a built-in environment's.
    #[error(
        "`{name}` cannot name a plugin: it reads like the built-in environment `{builtin}`, whose section it would \
         forge; choose another name, e.g. `my_{name}`"
    )]
    ReadsLikeBuiltin {
        /// The name given.
        name: String,
        /// The built-in it reads like.
        builtin: &'static str,
    },

    /// The folder exists and holds files.
    #[error(
        "{} exists and is not empty: envhost new writes a whole project and does not mix it with other \
         files; choose another folder with --dir, or remove this one first",
        .0.display()
    )]
    FolderNotEmpty(PathBuf),

    /// The folder's path names a file.
    #[error("{} exists and is a file, not a folder; choose another folder with --dir", .0.display())]
    FolderIsAFile(PathBuf),

    /// The folder cannot be read.
    #[error("cannot read {}", path.display())]
    ReadFolder {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },

    /// A folder cannot be created (the project's parent, one inside it, or
    /// the project itself when it is renamed into place).
    #[error("cannot create {}", path.display())]
    CreateFolder {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },

    /// The staging folder cannot be created beside the project.
    #[error("cannot create a folder in {}", parent.display())]
    Staging {
        /// The folder it would be created in.
        parent: PathBuf,
        /// Why.
        source: io::Error,
    },

    /// A file of the project cannot be written.
    #[error("cannot write {}", path.display())]
    WriteFile {
        /// The file (in the staging folder).
        path: PathBuf,
        /// Why.
        source: io::Error,
    },

    /// A script of the project cannot be made executable.
    #[error("cannot make {} executable", path.display())]
    Executable {
        /// The file (in the staging folder).
        path: PathBuf,
        /// Why.
        source: io::Error,
    },

    /// The new folder's permissions cannot be set.
    #[error("cannot set the new folder's permissions")]
    Permissions(#[source] io::Error),

    /// A JSON file embedded in the binary does not parse, or cannot be
    /// written back (a defect of the build, not of the input).
    #[error("{what}")]
    EmbeddedJson {
        /// What was being done.
        what: &'static str,
        /// Why it failed.
        source: serde_json::Error,
    },

    /// A TOML file embedded in the binary does not parse (a defect of the
    /// build, not of the input).
    #[error("{file} is not TOML")]
    EmbeddedToml {
        /// The file, in words.
        file: &'static str,
        /// Why it does not parse.
        source: toml::de::Error,
    },

    /// The Rust SDK's manifest inherits a field this module cannot write
    /// out (a defect of the build, not of the input).
    #[error(
        "the Rust SDK's Cargo.toml inherits `{0}` from the workspace, which envhost new cannot write out"
    )]
    InheritedField(String),

    /// The workspace's lock holds none of the Rust SDK's dependencies (a
    /// defect of the build, not of the input).
    #[error("the workspace's Cargo.lock holds none of the Rust SDK's dependencies")]
    NoSdkDependencies,
}

type Result<T, E = NewProjectError> = std::result::Result<T, E>;

/// Arguments of `envhost new`.
pub struct NewArgs {
    /// The plugin's name: the environment's name, the .wasm file's stem
    /// and the package's name (lowercase letters, digits and `_`, starting
    /// with a letter).
    pub name: String,

    /// The language to write it in.
    pub lang: Lang,

    /// The folder to create (it must not exist, or be empty) [default:
    /// ./NAME].
    pub dir: Option<PathBuf>,
}

/// A language `envhost new` writes projects in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    /// Rust, with the envhost SDK vendored (cargo, wasm32-wasip2).
    Rust,
    /// Python, with componentize-py.
    Python,
    /// JavaScript, with jco and componentize-js.
    Js,
}

/// One file of a new project.
struct File {
    path: String,
    text: String,
    executable: bool,
}

impl File {
    fn new(path: impl Into<String>, text: impl Into<String>) -> Self {
        File {
            path: path.into(),
            text: text.into(),
            executable: false,
        }
    }

    fn executable(mut self) -> Self {
        self.executable = true;
        self
    }
}

const WIT: [(&str, &str); 8] = [
    (
        "wit/v0.2.1/environment.wit",
        include_str!("../../../wit/v0.2.1/environment.wit"),
    ),
    (
        "wit/v0.2.1/deps/cli.wit",
        include_str!("../../../wit/v0.2.1/deps/cli.wit"),
    ),
    (
        "wit/v0.2.1/deps/clocks.wit",
        include_str!("../../../wit/v0.2.1/deps/clocks.wit"),
    ),
    (
        "wit/v0.2.1/deps/filesystem.wit",
        include_str!("../../../wit/v0.2.1/deps/filesystem.wit"),
    ),
    (
        "wit/v0.2.1/deps/http.wit",
        include_str!("../../../wit/v0.2.1/deps/http.wit"),
    ),
    (
        "wit/v0.2.1/deps/io.wit",
        include_str!("../../../wit/v0.2.1/deps/io.wit"),
    ),
    (
        "wit/v0.2.1/deps/random.wit",
        include_str!("../../../wit/v0.2.1/deps/random.wit"),
    ),
    (
        "wit/v0.2.1/deps/sockets.wit",
        include_str!("../../../wit/v0.2.1/deps/sockets.wit"),
    ),
];

/// Runs `envhost new`.
pub fn run(args: &NewArgs) -> Result<()> {
    check_name(&args.name)?;
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(&args.name));
    check_folder(&dir)?;
    let files = project_files(args.lang, &args.name)?;
    write_project(&dir, &files)?;
    let shown = dir.display();
    let name = &args.name;
    println!(
        "Created the {lang} plugin `{name}` in {shown}.\n\
         Next:\n  \
           cd {shown}\n  \
           ./build.sh\n  \
           envhost check env/{name}.wasm --grants env/envhost.toml\n  \
           envhost test env/{name}.wasm tests/{name}.session --grants env/envhost.toml\n\
         The folder is an envhost project: `envhost repl` there tries the plugin.",
        lang = language(args.lang),
    );
    Ok(())
}

fn language(lang: Lang) -> &'static str {
    match lang {
        Lang::Rust => "Rust",
        Lang::Python => "Python",
        Lang::Js => "JavaScript",
    }
}

/// A name must be an environment name the host accepts, and a package name
/// in all three languages: lowercase ASCII letters, digits and `_`.
fn check_name(name: &str) -> Result<()> {
    let mut chars = name.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && name.len() <= 64;
    if !valid {
        let suggestion: String = name
            .chars()
            .map(|c| c.to_ascii_lowercase())
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let suggestion = suggestion.trim_start_matches(|c: char| !c.is_ascii_lowercase());
        let example = if suggestion.is_empty() {
            "kv".to_owned()
        } else {
            suggestion.chars().take(64).collect()
        };
        return Err(NewProjectError::BadName {
            name: name.to_owned(),
            example,
        });
    }
    if let Some(builtin) = envhost_plugin::reads_like_builtin(name) {
        return Err(NewProjectError::ReadsLikeBuiltin {
            name: name.to_owned(),
            builtin,
        });
    }
    Ok(())
}

fn check_folder(dir: &Path) -> Result<()> {
    match fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(NewProjectError::FolderNotEmpty(dir.to_owned()));
            }
            Ok(())
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(err) if err.kind() == io::ErrorKind::NotADirectory => {
            Err(NewProjectError::FolderIsAFile(dir.to_owned()))
        }
        Err(source) => Err(NewProjectError::ReadFolder {
            path: dir.to_owned(),
            source,
        }),
    }
}

/// Writes the files into a fresh folder beside `dir`, then renames it into
/// place: a failure leaves no half-written project.
fn write_project(dir: &Path, files: &[File]) -> Result<()> {
    let parent = match dir.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&parent).map_err(|source| NewProjectError::CreateFolder {
        path: parent.clone(),
        source,
    })?;
    let staging = tempfile::Builder::new()
        .prefix(".envhost-new-")
        .tempdir_in(&parent)
        .map_err(|source| NewProjectError::Staging {
            parent: parent.clone(),
            source,
        })?;
    for file in files {
        write_file(&staging.path().join(&file.path), file)?;
    }
    // The staging folder is private (0700); the project is the user's.
    fs::set_permissions(staging.path(), fs::Permissions::from_mode(0o755))
        .map_err(NewProjectError::Permissions)?;
    // Renaming onto an empty folder replaces it; onto a non-empty one fails
    // (someone wrote there since the check), leaving it as it was.
    fs::rename(staging.path(), dir).map_err(|source| NewProjectError::CreateFolder {
        path: dir.to_owned(),
        source,
    })?;
    // The folder was renamed away: nothing left for the guard to remove.
    let _ = staging.keep();
    Ok(())
}

/// Writes one file of the project at `path`, creating its folder.
fn write_file(path: &Path, file: &File) -> Result<()> {
    if let Some(folder) = path.parent() {
        fs::create_dir_all(folder).map_err(|source| NewProjectError::CreateFolder {
            path: folder.to_owned(),
            source,
        })?;
    }
    let cannot_write = |source| NewProjectError::WriteFile {
        path: path.to_owned(),
        source,
    };
    let mut out = fs::File::create(path).map_err(cannot_write)?;
    out.write_all(file.text.as_bytes()).map_err(cannot_write)?;
    if file.executable {
        out.set_permissions(fs::Permissions::from_mode(0o755))
            .map_err(|source| NewProjectError::Executable {
                path: path.to_owned(),
                source,
            })?;
    }
    Ok(())
}

fn fill(template: &str, name: &str) -> String {
    template.replace("{{name}}", name)
}

/// Every file of a new project in `lang` named `name`.
fn project_files(lang: Lang, name: &str) -> Result<Vec<File>> {
    let mut files: Vec<File> = WIT
        .iter()
        .map(|(path, text)| File::new(*path, *text))
        .collect();
    files.push(File::new(
        "env/envhost.toml",
        fill(include_str!("../templates/common/envhost.toml"), name),
    ));
    files.push(File::new(
        format!("tests/{name}.session"),
        fill(include_str!("../templates/common/session"), name),
    ));
    files.push(File::new(
        "notes/.keep",
        "The plugin's notes (granted read-write in env/envhost.toml).\n",
    ));
    let (sources, sdk, toolchain) = match lang {
        Lang::Python => python_files(name, &mut files),
        Lang::Js => javascript_files(name, &mut files)?,
        Lang::Rust => rust_files(name, &mut files)?,
    };
    let readme = fill(include_str!("../templates/common/README.md"), name)
        .replace("{{language}}", language(lang))
        .replace("{{lang}}", lang_flag(lang))
        .replace("{{sources}}", sources)
        .replace("{{sdk}}", sdk)
        .replace("{{toolchain}}", toolchain);
    files.push(File::new("README.md", readme));
    Ok(files)
}

/// What the README says of a language: its sources, its SDK, its toolchain.
type Readme = (&'static str, &'static str, &'static str);

/// The Python project's own files; what its README says of them.
fn python_files(name: &str, files: &mut Vec<File>) -> Readme {
    files.extend([
        File::new(
            "src/app.py",
            fill(include_str!("../templates/python/src/app.py"), name),
        ),
        File::new(
            "src/envhost_plugin.py",
            include_str!("../../../guest-sdk-python/envhost_plugin.py"),
        ),
        File::new("requirements.txt", python_requirements()),
        File::new(
            "build.sh",
            fill(include_str!("../templates/python/build.sh"), name),
        )
        .executable(),
        File::new(
            ".gitignore",
            fill(include_str!("../templates/python/gitignore"), name),
        ),
    ]);
    (
        "src/app.py",
        "src/envhost_plugin.py",
        "componentize-py 0.25.1, pinned with its hashes in requirements.txt",
    )
}

/// The JavaScript project's own files; what its README says of them.
fn javascript_files(name: &str, files: &mut Vec<File>) -> Result<Readme> {
    files.extend([
        File::new(
            "src/plugin.js",
            fill(include_str!("../templates/js/src/plugin.js"), name),
        ),
        File::new(
            "src/envhost-plugin.js",
            include_str!("../../../guest-sdk-js/envhost-plugin.js"),
        ),
        File::new(
            "src/envhost-files.js",
            include_str!("../../../guest-sdk-js/envhost-files.js"),
        ),
        File::new(
            "package.json",
            fill(include_str!("../templates/js/package.json"), name),
        ),
        File::new("package-lock.json", javascript_lock(name)?),
        File::new(
            "build.sh",
            fill(include_str!("../templates/js/build.sh"), name),
        )
        .executable(),
        File::new(
            ".gitignore",
            fill(include_str!("../templates/js/gitignore"), name),
        ),
    ]);
    Ok((
        "src/plugin.js",
        "src/envhost-plugin.js, src/envhost-files.js",
        "jco 1.35.0 and componentize-js 0.23.0, locked in package-lock.json",
    ))
}

/// The Rust project's own files (the SDK vendored); what its README says of them.
fn rust_files(name: &str, files: &mut Vec<File>) -> Result<Readme> {
    files.extend([
        File::new(
            "Cargo.toml",
            fill(include_str!("../templates/rust/Cargo.toml"), name),
        ),
        File::new(
            "src/lib.rs",
            fill(include_str!("../templates/rust/src/lib.rs"), name),
        ),
        File::new("Cargo.lock", rust_lock()?),
        File::new("envhost-sdk/Cargo.toml", rust_sdk_manifest()?),
        File::new(
            "build.sh",
            fill(include_str!("../templates/rust/build.sh"), name),
        )
        .executable(),
        File::new(
            ".gitignore",
            fill(include_str!("../templates/rust/gitignore"), name),
        ),
    ]);
    files.extend(
        RUST_SDK_SOURCES
            .iter()
            .map(|(path, text)| File::new(format!("envhost-sdk/{path}"), *text)),
    );
    Ok((
        "src/lib.rs",
        "envhost-sdk/",
        "cargo for wasm32-wasip2; the SDK's dependencies locked in Cargo.lock",
    ))
}

fn lang_flag(lang: Lang) -> &'static str {
    match lang {
        Lang::Rust => "rust",
        Lang::Python => "python",
        Lang::Js => "js",
    }
}

/// componentize-py pinned as the repository's Python plugin pins it.
fn python_requirements() -> String {
    let pins: String = include_str!("../../../plugins/tasks/requirements.txt")
        .lines()
        .filter(|line| !line.starts_with('#'))
        .map(|line| format!("{line}\n"))
        .collect();
    format!(
        "# The toolchain that builds this plugin: componentize-py, exactly this\n\
         # version (it embeds CPython 3.14 in the component), checked against\n\
         # PyPI's hashes: `pip install --require-hashes -r requirements.txt`.\n{pins}"
    )
}

/// The repository's JavaScript lock, renamed for the new package.
fn javascript_lock(name: &str) -> Result<String> {
    let mut lock: serde_json::Value = serde_json::from_str(include_str!(
        "../../../plugins/regex/package-lock.json"
    ))
    .map_err(|source| NewProjectError::EmbeddedJson {
        what: "the embedded package-lock.json is not JSON",
        source,
    })?;
    let package = serde_json::Value::String(format!("{name}-plugin"));
    lock["name"] = package.clone();
    lock["packages"][""]["name"] = package;
    let mut text =
        serde_json::to_string_pretty(&lock).map_err(|source| NewProjectError::EmbeddedJson {
            what: "writing package-lock.json",
            source,
        })?;
    text.push('\n');
    Ok(text)
}

/// The Rust SDK's manifest, standing alone: the workspace's inherited
/// fields written out, and no dev-dependencies (its tests stay in the
/// repository).
fn rust_sdk_manifest() -> Result<String> {
    let source = include_str!("../../../guest-sdk/Cargo.toml");
    let mut out = String::new();
    let mut skipping = false;
    for line in source.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            skipping = trimmed == "[dev-dependencies]";
        }
        if skipping {
            continue;
        }
        let line = match trimmed {
            "version.workspace = true" => format!("version = \"{}\"", env!("CARGO_PKG_VERSION")),
            "edition.workspace = true" => "edition = \"2024\"".to_owned(),
            "rust-version.workspace = true" => {
                format!("rust-version = \"{}\"", env!("CARGO_PKG_RUST_VERSION"))
            }
            "license.workspace = true" => format!("license = \"{}\"", env!("CARGO_PKG_LICENSE")),
            other if other.contains(".workspace = true") || other.contains("workspace = true") => {
                return Err(NewProjectError::InheritedField(other.to_owned()));
            }
            _ => line.to_owned(),
        };
        out.push_str(&line);
        out.push('\n');
    }
    Ok(out)
}

/// `text`, a TOML file embedded in the binary (`file` names it).
fn embedded_toml(text: &str, file: &'static str) -> Result<toml::Table> {
    text.parse()
        .map_err(|source| NewProjectError::EmbeddedToml { file, source })
}

/// The workspace's `Cargo.lock`, cut to the Rust SDK's dependencies: the
/// new project builds with exactly the crates the repository tests (and
/// from cargo's cache, when they are in it). Cargo adds the project's own
/// packages at the first build.
fn rust_lock() -> Result<String> {
    let lock = embedded_toml(
        include_str!("../../../Cargo.lock"),
        "the embedded Cargo.lock",
    )?;
    let manifest = embedded_toml(
        include_str!("../../../guest-sdk/Cargo.toml"),
        "the Rust SDK's Cargo.toml",
    )?;
    let packages: Vec<&toml::Table> = lock
        .get("package")
        .and_then(toml::Value::as_array)
        .map(|all| all.iter().filter_map(toml::Value::as_table).collect())
        .unwrap_or_default();
    let field = |package: &toml::Table, key: &str| -> String {
        package
            .get(key)
            .and_then(toml::Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    // A dependency in a lock is `name`, `name version` or `name version (source)`.
    let matching = |reference: &str| -> Vec<usize> {
        let mut words = reference.split_whitespace();
        let name = words.next().unwrap_or_default();
        let version = words.next();
        packages
            .iter()
            .enumerate()
            .filter(|(_, p)| {
                field(p, "name") == name
                    && p.contains_key("source")
                    && version.is_none_or(|v| field(p, "version") == v)
            })
            .map(|(index, _)| index)
            .collect()
    };
    let mut wanted: Vec<usize> = Vec::new();
    if let Some(dependencies) = manifest.get("dependencies").and_then(toml::Value::as_table) {
        for (name, spec) in dependencies {
            let exact = spec
                .as_table()
                .and_then(|t| t.get("version"))
                .or(Some(spec))
                .and_then(toml::Value::as_str)
                .and_then(|v| v.strip_prefix('='));
            let reference = match exact {
                Some(version) => format!("{name} {version}"),
                None => name.clone(),
            };
            wanted.extend(matching(&reference));
        }
    }
    let mut kept = BTreeSet::new();
    while let Some(index) = wanted.pop() {
        if !kept.insert(index) {
            continue;
        }
        if let Some(dependencies) = packages[index]
            .get("dependencies")
            .and_then(toml::Value::as_array)
        {
            for dependency in dependencies.iter().filter_map(toml::Value::as_str) {
                wanted.extend(matching(dependency));
            }
        }
    }
    if kept.is_empty() {
        return Err(NewProjectError::NoSdkDependencies);
    }
    let mut sorted: BTreeMap<(String, String), &toml::Table> = BTreeMap::new();
    for index in kept {
        let package = packages[index];
        sorted.insert((field(package, "name"), field(package, "version")), package);
    }
    let mut out = String::from(
        "# This file is automatically @generated by Cargo.\n# It is not intended for manual editing.\nversion = 4\n",
    );
    // Cargo's own layout, so that its first build rewrites nothing.
    for package in sorted.values() {
        out.push_str("\n[[package]]\n");
        for key in ["name", "version", "source", "checksum"] {
            if package.contains_key(key) {
                out.push_str(&format!("{key} = {:?}\n", field(package, key)));
            }
        }
        if let Some(dependencies) = package.get("dependencies").and_then(toml::Value::as_array) {
            out.push_str("dependencies = [\n");
            for dependency in dependencies.iter().filter_map(toml::Value::as_str) {
                out.push_str(&format!(" {dependency:?},\n"));
            }
            out.push_str("]\n");
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_identifiers_in_every_language() {
        for good in ["kv", "kv_store", "a1", "notes2"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        let bad = check_name("Kv-Store").expect_err("uppercase and a dash");
        assert!(
            bad.to_string().starts_with(
                "`Kv-Store` cannot name a plugin: a name is lowercase letters, digits and `_`"
            ),
            "{bad}"
        );
        assert!(
            bad.to_string().ends_with("e.g. `envhost new kv_store ...`"),
            "{bad}"
        );
        for bad in ["", "1kv", "_kv", "kv.wasm", "ké"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        let builtin = check_name("bash").expect_err("a built-in's name");
        assert!(
            builtin
                .to_string()
                .contains("reads like the built-in environment `bash`"),
            "{builtin}"
        );
    }

    #[test]
    fn every_template_is_filled() {
        for lang in [Lang::Rust, Lang::Python, Lang::Js] {
            let files = project_files(lang, "kv").expect("the project's files");
            for file in &files {
                assert!(
                    !file.text.contains("{{"),
                    "{lang:?}: {} keeps a placeholder",
                    file.path
                );
            }
            let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
            for expected in [
                "build.sh",
                "env/envhost.toml",
                "tests/kv.session",
                "wit/v0.2.1/deps/filesystem.wit",
                "README.md",
            ] {
                assert!(paths.contains(&expected), "{lang:?} lacks {expected}");
            }
        }
    }

    #[test]
    fn the_rust_sdk_stands_alone() {
        let manifest = rust_sdk_manifest().expect("the SDK's manifest");
        assert!(!manifest.contains("workspace"), "{manifest}");
        assert!(manifest.contains("wit-bindgen"), "{manifest}");
        let parsed: toml::Table = manifest.parse().expect("TOML");
        assert!(parsed["package"].get("version").is_some());
        assert!(
            RUST_SDK_SOURCES
                .iter()
                .any(|(path, _)| *path == "src/lib.rs")
        );
        let lock = rust_lock().expect("the lock");
        let parsed: toml::Table = lock.parse().expect("TOML");
        let names: Vec<&str> = parsed["package"]
            .as_array()
            .expect("packages")
            .iter()
            .map(|p| p["name"].as_str().expect("a name"))
            .collect();
        assert!(names.contains(&"wit-bindgen"), "{names:?}");
        assert!(names.contains(&"wit-bindgen-rust-macro"), "{names:?}");
        assert!(
            !names.contains(&"wasmtime"),
            "only the SDK's closure: {names:?}"
        );
    }

    #[test]
    fn the_pins_are_the_repository_pins() {
        let requirements = python_requirements();
        assert!(requirements.contains("componentize-py==0.25.1"));
        assert_eq!(requirements.matches("--hash=sha256:").count(), 5);
        let lock: serde_json::Value =
            serde_json::from_str(&javascript_lock("kv").expect("the lock")).expect("JSON");
        assert_eq!(lock["packages"][""]["name"], "kv-plugin");
        assert_eq!(
            lock["packages"]["node_modules/@bytecodealliance/componentize-js"]["version"],
            "0.23.0"
        );
    }

    #[test]
    fn a_file_in_the_way_is_named_with_what_to_do() {
        let temp = tempfile::tempdir().expect("a temporary folder");
        let file = temp.path().join("kv");
        fs::write(&file, "mine").expect("write");
        let said = check_folder(&file).expect_err("a file").to_string();
        assert_eq!(
            said,
            format!(
                "{} exists and is a file, not a folder; choose another folder with --dir",
                file.display()
            )
        );
        assert!(check_folder(&temp.path().join("absent")).is_ok());
    }

    #[test]
    fn each_file_is_written_in_its_folder_and_scripts_are_executable() {
        let temp = tempfile::tempdir().expect("a temporary folder");
        let script = temp.path().join("deep/er/build.sh");
        write_file(&script, &File::new("build.sh", "#!/bin/sh\n").executable()).expect("written");
        assert_eq!(fs::read_to_string(&script).expect("read"), "#!/bin/sh\n");
        let mode = fs::metadata(&script).expect("stat").permissions().mode();
        assert_eq!(mode & 0o777, 0o755);

        // A file where a folder must go: the error names the folder, and the
        // operating system's reason follows it as its source.
        let blocked = temp.path().join("deep/er/build.sh/inside.txt");
        let err = write_file(&blocked, &File::new("inside.txt", "x")).expect_err("blocked");
        assert_eq!(
            err.to_string(),
            format!("cannot create {}", script.display())
        );
        let source = std::error::Error::source(&err).expect("the io error");
        assert!(source.to_string().contains("(os error "), "{source}");
    }

    #[test]
    fn a_non_empty_folder_is_refused_and_kept() {
        let temp = tempfile::tempdir().expect("a temporary folder");
        let dir = temp.path().join("kv");
        fs::create_dir(&dir).expect("mkdir");
        fs::write(dir.join("mine.txt"), "keep me").expect("write");
        let err = check_folder(&dir).expect_err("not empty");
        assert!(err.to_string().ends_with("exists and is not empty: envhost new writes a whole project and does not mix it with other files; choose another folder with --dir, or remove this one first"), "{err}");
        let files = project_files(Lang::Python, "kv").expect("files");
        assert!(write_project(&dir, &files).is_err());
        assert_eq!(
            fs::read_to_string(dir.join("mine.txt")).expect("kept"),
            "keep me"
        );
        let empty = temp.path().join("empty");
        fs::create_dir(&empty).expect("mkdir");
        write_project(&empty, &files).expect("an empty folder is fine");
        let mode = fs::metadata(empty.join("build.sh"))
            .expect("build.sh")
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0o111);
        let leftovers: Vec<_> = fs::read_dir(temp.path())
            .expect("list")
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(".envhost-new-"))
            .collect();
        assert!(leftovers.is_empty(), "no staging folder left behind");
    }
}
