//! Why a distribution command stopped: one error type whose messages say what to do next.

use std::io;
use std::path::PathBuf;

use envhost_core::text::counted;
use envhost_plugin::{GrantsFileError, NameRefusal, PinEditError};
use envhost_registry::{self as registry, BadSource, LockError, SignatureError, Source};

/// Why a distribution command stopped. Each message says what to do next.
/// Every refusal comes before anything is written (the files are renamed
/// into place only after every step succeeded). An error from a library
/// below (the project's folder, the grants file, the registry, a key) is
/// carried as it is, with its own words; an I/O error is the source of the
/// variant that names the file, so `{:#}` of the chain reads
/// `reading env/x.wasm: Permission denied (os error 13)`.
#[derive(Debug, thiserror::Error)]
pub enum DistributionError {
    // --- the project's files
    /// The project directory cannot be used.
    #[error(transparent)]
    Project(#[from] envhost_runtime::StartError),

    /// env/envhost.lock does not parse (the error says where and why).
    #[error("env/envhost.lock:{0}")]
    Lock(LockError),

    /// The command needs env/envhost.lock and the project has none.
    #[error(
        "{} has no env/envhost.lock; add plugins with `envhost add SOURCE` first",
        project.display()
    )]
    NoLock {
        /// The project directory.
        project: PathBuf,
    },

    /// The grants file cannot be read, or has a mistake.
    #[error(transparent)]
    Grants(#[from] GrantsFileError),

    /// A plugin's pin cannot be written into the grants file's text.
    #[error("{grants}: {error}")]
    Pin {
        /// The grants file, as messages show it.
        grants: String,
        /// Why the pin cannot be written (it says how to fix the file).
        error: PinEditError,
    },

    /// A file of the project, or a source file, cannot be read.
    #[error("reading {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },

    /// A folder for the files being written cannot be created.
    #[error("creating {}", path.display())]
    CreateFolder {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },

    /// No temporary file can be made in the folder of a file being written.
    #[error("writing in {}", folder.display())]
    WriteIn {
        /// The folder.
        folder: PathBuf,
        /// Why.
        source: io::Error,
    },

    /// A file cannot be written (or renamed into place).
    #[error("writing {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },

    /// A locked plugin's source file cannot be read (`update`).
    #[error("{name}: reading {}", path.display())]
    ReadSource {
        /// The plugin.
        name: String,
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },

    /// A removed plugin's file cannot be deleted.
    #[error("removing {}", path.display())]
    Remove {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },

    // --- sources, names and signatures
    /// A source that does not parse (the error says how to write one).
    #[error(transparent)]
    Source(#[from] BadSource),

    /// The name asked for (or made from the source) is one the loader
    /// refuses.
    #[error("{0}; choose another with --name NAME")]
    Name(NameRefusal),

    /// The source's last path part makes no environment name.
    #[error("no environment name can be made from {source_given}; pass --name NAME")]
    NoDefaultName {
        /// The source.
        source_given: Source,
    },

    /// The plugin file given as the source cannot be read.
    #[error("the plugin file {} cannot be read", path.display())]
    PluginFile {
        /// The path as given.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },

    /// The key file of `--verify-key` cannot be read.
    #[error("the key file {} cannot be read", path.display())]
    KeyFile {
        /// The path as given.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },

    /// A key or trust root that cannot be used.
    #[error(transparent)]
    Signature(#[from] SignatureError),

    /// `publish` was given a target that is not an OCI reference.
    #[error("{target} is not a registry address; write oci://HOST[:PORT]/REPOSITORY:TAG")]
    NotARegistry {
        /// The target as given.
        target: String,
    },

    // --- the registry and the contract
    /// Fetching, verifying or publishing failed.
    #[error(transparent)]
    Registry(#[from] registry::Error),

    /// A locked plugin could not be fetched by its locked digest.
    #[error("installing {name}")]
    Install {
        /// The plugin.
        name: String,
        /// Why (boxed: a registry error is large, and this variant would
        /// make every result of this module as large).
        source: Box<registry::Error>,
    },

    /// No temporary folder can be made to check a fetched plugin in.
    #[error("creating a temporary folder to check the plugin in")]
    CheckFolder(#[source] io::Error),

    /// The fetched component fails the host's contract (the report above
    /// says why).
    #[error("plugin {name} was refused (see above); nothing was written")]
    Refused {
        /// The plugin.
        name: String,
    },

    // --- the state of the project's plugins
    /// `add` of a name the lock has.
    #[error(
        "plugin {name} is already added (env/envhost.lock); `envhost update {name}` fetches it again, `envhost remove {name}` removes it"
    )]
    AlreadyAdded {
        /// The plugin.
        name: String,
    },

    /// `add` would overwrite a plugin file the lock does not name.
    #[error(
        "{} exists and is not in the lock; remove it, add it as it is (`envhost add env/{name}.wasm`), or choose another --name",
        shown.display()
    )]
    UnlockedFileInTheWay {
        /// The file, relative to the project.
        shown: PathBuf,
        /// The plugin's name.
        name: String,
    },

    /// `update NAME` of a name the lock does not have.
    #[error("plugin {name} is not in env/envhost.lock (`envhost list` lists it)")]
    NotInLock {
        /// The plugin.
        name: String,
    },

    /// `remove` of a plugin that is neither in env/ nor in the lock.
    #[error(
        "there is no plugin {name}: env/{name}.wasm does not exist and the lock does not name it"
    )]
    NoSuchPlugin {
        /// The plugin.
        name: String,
    },

    /// `install --frozen` found env/ or the pins not as the lock says
    /// (the differences are printed above).
    #[error(
        "env/ differs from env/envhost.lock in {} (listed above); `envhost install` without --frozen restores what the lock says",
        counted(*.differences, "way")
    )]
    NotAsLocked {
        /// How many differences.
        differences: usize,
    },

    /// `verify` found differences (printed above).
    #[error(
        "{} between env/, the pins and the lock (listed above)",
        counted(*.differences, "difference")
    )]
    Unverified {
        /// How many differences.
        differences: usize,
    },
}

/// The result of a distribution step.
pub(super) type Result<T, E = DistributionError> = std::result::Result<T, E>;
