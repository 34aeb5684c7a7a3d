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

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use envhost_core::EnvironmentName;
use envhost_core::text::counted;
use envhost_plugin::{
    self as plugin, GrantsFile, GrantsFileError, NameRefusal, PinEditError, PluginSettings,
    StderrSink, Verify, VerifyChange,
};
use envhost_registry::{
    self as registry, BadSource, BlobCache, Client, Credentials, Fetched, Lock, LockError,
    LockedPlugin, LockedSigner, OciReference, SignatureCheck, SignatureError, Signer, SigningKey,
    Source, TrustRoot,
};

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
type Result<T, E = DistributionError> = std::result::Result<T, E>;

/// The distribution subcommands.
pub enum Command {
    /// Fetch, verify and check a plugin, then add it to env/, pinned and locked.
    ///
    /// SOURCE is oci://HOST[:PORT]/REPOSITORY:TAG, oci://HOST/REPOSITORY@sha256:…,
    /// https://…/NAME.wasm#sha256=… or a path. The tag is resolved once and
    /// everything is fetched by digest; the component is checked as the host
    /// would load it; then env/NAME.wasm, its sha256 pin in the grants file
    /// (granting nothing new) and its entry in env/envhost.lock are written.
    /// A refusal at any step writes nothing.
    Add(AddArgs),
    /// Make env/ and the pins match env/envhost.lock.
    ///
    /// Fetches by digest, from the cache when it has the bytes (a tag that
    /// moved since changes nothing). `--frozen` changes nothing and fails if
    /// env/ or the pins differ from the lock (for CI).
    Install(InstallArgs),
    /// Install what the locked plugins' tags name now.
    ///
    /// `--dry-run` only reports the tags that now name another manifest.
    Update(UpdateArgs),
    /// Re-hash every plugin in env/ against its pin and the lock.
    ///
    /// Required signatures are checked again from the cache. Exits non-zero
    /// on any mismatch; uses no network.
    Verify(ProjectArgs),
    /// Remove a plugin: its file in env/, its pin and its lock entry.
    ///
    /// The grants written for it stay in the grants file.
    Remove(RemoveArgs),
    /// List the locked plugins: name, source, version, digest, world, grants.
    List(ProjectArgs),
    /// Push a component to an OCI registry, optionally signed.
    ///
    /// The artifact is in the CNCF Wasm layout, which `oras`, `wkg` and
    /// other OCI tools read.
    Publish(PublishArgs),
}

/// Where the project is, and how plugins are checked.
pub struct ProjectArgs {
    /// The project directory (its plugins are in env/).
    pub project: PathBuf,

    /// How plugins are checked, with the grants file where pins are
    /// written and whose grants a fetched plugin is checked with
    /// (`config_file`; `None`: <project>/env/envhost.toml).
    pub settings: PluginSettings,
}

/// How registries are reached.
pub struct NetworkArgs {
    /// A file holding registry credentials: `USER:TOKEN` (basic
    /// authentication) or a bare token (bearer). Without it, docker's
    /// config.json ($DOCKER_CONFIG or ~/.docker) is used, if any.
    pub registry_token_file: Option<PathBuf>,

    /// Reach this registry (HOST or HOST:PORT) over plain HTTP. Loopback
    /// registries always are; anything else is HTTPS unless named here.
    /// Credentials are never sent over plain HTTP to a host that is not
    /// loopback.
    pub insecure_registry: Vec<String>,

    /// Also send a registry's credentials to this host (HOST or
    /// HOST:PORT) when the registry names it as its auth realm (token
    /// service). Without it they go to the registry's own host only.
    pub registry_auth_host: Vec<String>,

    /// Give up on a transfer when no byte has moved for this long
    /// (default 30s).
    pub registry_stall_timeout: Option<Duration>,

    /// Give up on a transfer (one request and its whole answer) that
    /// takes longer than this, however steadily its bytes come (default
    /// 10m).
    pub registry_deadline: Option<Duration>,
}

/// `envhost add`.
pub struct AddArgs {
    /// Where the plugin comes from.
    pub source: String,

    /// The environment name (default: from the source's last path part).
    pub name: Option<String>,

    /// Require a signature by this public key (PEM); recorded as the
    /// plugin's `verify` in the grants file.
    pub verify_key: Option<PathBuf>,

    /// Require a Sigstore keyless signature by this identity (with
    /// --verify-issuer).
    pub verify_identity: Option<String>,

    /// The OIDC issuer of --verify-identity.
    pub verify_issuer: Option<String>,

    /// Where the project is, and how plugins are checked.
    pub project: ProjectArgs,

    /// How registries are reached.
    pub network: NetworkArgs,
}

/// `envhost install`.
pub struct InstallArgs {
    /// Change nothing; fail if env/ or the pins differ from the lock.
    pub frozen: bool,

    /// Use only the cache, never the network.
    pub offline: bool,

    /// Where the project is, and how plugins are checked.
    pub project: ProjectArgs,

    /// How registries are reached.
    pub network: NetworkArgs,
}

/// `envhost update`.
pub struct UpdateArgs {
    /// Only this plugin (default: all).
    pub name: Option<String>,

    /// Report the tags that now name another manifest; change nothing.
    pub dry_run: bool,

    /// Where the project is, and how plugins are checked.
    pub project: ProjectArgs,

    /// How registries are reached.
    pub network: NetworkArgs,
}

/// `envhost remove`.
pub struct RemoveArgs {
    /// The plugin.
    pub name: String,

    /// Where the project is, and how plugins are checked.
    pub project: ProjectArgs,
}

/// `envhost publish`.
pub struct PublishArgs {
    /// The component.
    pub file: PathBuf,

    /// Where to push it: oci://HOST[:PORT]/REPOSITORY:TAG.
    pub target: String,

    /// Sign the component's sha256 with this ECDSA P-256 private key
    /// (PKCS#8 PEM); the signature is pushed beside it.
    pub sign_key: Option<PathBuf>,

    /// How registries are reached.
    pub network: NetworkArgs,
}

/// Runs one distribution command.
pub fn run(command: Command) -> Result<()> {
    match command {
        Command::Add(args) => add(args),
        Command::Install(args) => install(args),
        Command::Update(args) => update(args),
        Command::Verify(args) => verify(args),
        Command::Remove(args) => remove(args),
        Command::List(args) => list(args),
        Command::Publish(args) => publish(args),
    }
}

// --- the project's files ------------------------------------------------------

/// A project's plugin files.
struct Project {
    dir: PathBuf,
    env: PathBuf,
    lock_path: PathBuf,
    settings: PluginSettings,
}

impl Project {
    fn open(args: &ProjectArgs) -> Result<Project> {
        let dir = envhost_runtime::resolve_project(&args.project)?;
        let env = dir.join("env");
        Ok(Project {
            lock_path: env.join(registry::LOCK_FILE_NAME),
            env,
            dir,
            settings: args.settings.clone(),
        })
    }

    fn wasm(&self, name: &str) -> PathBuf {
        self.env.join(format!("{name}.wasm"))
    }

    /// The lock; a missing file is an empty lock.
    fn lock(&self) -> Result<Lock> {
        match std::fs::read_to_string(&self.lock_path) {
            Ok(text) => Lock::parse(&text).map_err(DistributionError::Lock),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Lock::default()),
            Err(source) => Err(DistributionError::Read {
                path: self.lock_path.clone(),
                source,
            }),
        }
    }

    /// The lock, which must exist.
    fn existing_lock(&self) -> Result<Lock> {
        if !self.lock_path.exists() {
            return Err(DistributionError::NoLock {
                project: self.dir.clone(),
            });
        }
        self.lock()
    }

    fn grants(&self) -> Result<GrantsFile> {
        Ok(plugin::grants_file(&self.dir, &self.settings)?)
    }

    /// The bytes of env/NAME.wasm, if there is such a file.
    fn plugin_bytes(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let path = self.wasm(name);
        match std::fs::read(&path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(DistributionError::Read { path, source }),
        }
    }

    /// The sha256 of env/NAME.wasm, if there is such a file.
    fn installed(&self, name: &str) -> Result<Option<registry::Sha256>> {
        Ok(self
            .plugin_bytes(name)?
            .map(|bytes| registry::Sha256::of(&bytes)))
    }

    /// Every plugin's name the project has: the lock's and the files' in
    /// env/ (`NAME.wasm`, not `_`-prefixed).
    fn plugin_names(&self, lock: &Lock) -> Vec<String> {
        let mut names: Vec<String> = lock.plugins.iter().map(|p| p.name.clone()).collect();
        names.extend(self.unlocked(lock));
        names
    }

    /// The plugins in env/ (`NAME.wasm`, not `_`-prefixed) that the lock
    /// does not name.
    fn unlocked(&self, lock: &Lock) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.env) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .flatten()
            .filter_map(|entry| {
                let name = entry
                    .file_name()
                    .to_str()?
                    .strip_suffix(".wasm")?
                    .to_owned();
                (!name.starts_with('_') && entry.path().is_file() && lock.get(&name).is_none())
                    .then_some(name)
            })
            .collect();
        names.sort();
        names
    }

    /// Where a path source is read from: a path in the lock is relative to
    /// the project.
    fn source_path(&self, path: &Path) -> PathBuf {
        if path.is_relative() {
            self.dir.join(path)
        } else {
            path.to_owned()
        }
    }

    /// How a locked source is fetched.
    fn resolved(&self, locked: &LockedPlugin) -> LockedPlugin {
        let mut resolved = locked.clone();
        if let Source::Path(path) = &locked.source {
            resolved.source = Source::Path(self.source_path(path));
        }
        resolved
    }

    /// `path` relative to the project when it is inside it.
    fn shown<'a>(&self, path: &'a Path) -> &'a Path {
        path.strip_prefix(&self.dir).unwrap_or(path)
    }
}

/// The files one command writes, staged as temporary files beside their
/// targets and renamed into place together at the end.
#[derive(Default)]
struct Changes {
    writes: Vec<(tempfile::NamedTempFile, PathBuf)>,
    removals: Vec<PathBuf>,
}

impl Changes {
    fn write(&mut self, path: &Path, bytes: &[u8]) -> Result<()> {
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|source| DistributionError::CreateFolder {
            path: dir.to_owned(),
            source,
        })?;
        let mut temp = tempfile::Builder::new()
            .prefix(".envhost-")
            .tempfile_in(dir)
            .map_err(|source| DistributionError::WriteIn {
                folder: dir.to_owned(),
                source,
            })?;
        let written = |source| DistributionError::Write {
            path: path.to_owned(),
            source,
        };
        temp.write_all(bytes)
            .and_then(|()| temp.as_file().sync_all())
            .map_err(written)?;
        // The file keeps the permissions it had (a grants file kept private
        // stays private); a new one gets the usual 0644.
        let mode = std::fs::metadata(path)
            .map(|m| m.permissions())
            .unwrap_or_else(|_| std::os::unix::fs::PermissionsExt::from_mode(0o644));
        std::fs::set_permissions(temp.path(), mode).map_err(written)?;
        self.writes.push((temp, path.to_owned()));
        Ok(())
    }

    fn remove(&mut self, path: &Path) {
        self.removals.push(path.to_owned());
    }

    fn commit(self) -> Result<()> {
        for (temp, path) in self.writes {
            if let Err(refused) = temp.persist(&path) {
                return Err(DistributionError::Write {
                    path,
                    source: refused.error,
                });
            }
        }
        for path in self.removals {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => return Err(DistributionError::Remove { path, source }),
            }
        }
        Ok(())
    }
}

/// `text` (the grants file's) with the pin of `name` set to `sha256` (or
/// removed), its `verify` changed as `verify` says.
fn with_pin(
    grants: &GrantsFile,
    text: &str,
    name: &str,
    sha256: Option<&registry::Sha256>,
    verify: &VerifyChange,
) -> Result<String> {
    let hex = sha256.map(registry::Sha256::hex);
    plugin::with_pin(text, name, hex.as_deref(), verify).map_err(|error| DistributionError::Pin {
        grants: grants.shown.clone(),
        error,
    })
}

// --- the network and signatures -------------------------------------------------

fn client(network: Option<&NetworkArgs>, offline: bool) -> Result<Client> {
    let mut options = registry::Options {
        offline,
        ..registry::Options::default()
    };
    if let Some(network) = network {
        if let Some(file) = &network.registry_token_file {
            options.credentials = Credentials::TokenFile(file.clone());
        }
        options.insecure_hosts = network.insecure_registry.clone();
        options.auth_hosts = network.registry_auth_host.clone();
        if let Some(stall) = network.registry_stall_timeout {
            options.stall_timeout = stall;
        }
        if let Some(deadline) = network.registry_deadline {
            options.deadline = deadline;
        }
    }
    Ok(Client::new(options)?)
}

/// A cache to read, even with no client (for `verify`).
fn blob_cache() -> Option<BlobCache> {
    BlobCache::default_directory().map(BlobCache::new)
}

/// A `verify` requirement made ready to check.
struct Requirement {
    signer: Signer,
    trust: TrustRoot,
}

impl Requirement {
    fn for_project(project: &Project, verify: &Verify) -> Result<Requirement> {
        Ok(match verify {
            Verify::Key { key } => Requirement {
                signer: Signer::key_file(&project.dir.join(key))?,
                trust: TrustRoot::public_good()?,
            },
            Verify::Keyless {
                identity,
                issuer,
                trusted_root,
            } => Requirement {
                signer: Signer::Keyless {
                    identity: identity.clone(),
                    issuer: issuer.clone(),
                },
                trust: match trusted_root {
                    Some(root) => TrustRoot::from_file(&project.dir.join(root))?,
                    None => TrustRoot::public_good()?,
                },
            },
        })
    }

    /// The requirement `verify` makes, if any.
    fn optional(project: &Project, verify: Option<&Verify>) -> Result<Option<Requirement>> {
        verify
            .map(|v| Requirement::for_project(project, v))
            .transpose()
    }

    fn check(&self) -> SignatureCheck<'_> {
        SignatureCheck {
            signer: &self.signer,
            trust: &self.trust,
        }
    }

    fn locked(verify: &Verify) -> LockedSigner {
        match verify {
            Verify::Key { key } => LockedSigner::Key(key.clone()),
            Verify::Keyless {
                identity, issuer, ..
            } => LockedSigner::Keyless {
                identity: identity.clone(),
                issuer: issuer.clone(),
            },
        }
    }
}

/// Shows the cache trouble that did not stop a fetch.
fn print_warnings(fetched: &Fetched) {
    for warning in &fetched.warnings {
        eprintln!("envhost: warning: {warning}");
    }
}

// --- checking against the host's contract ----------------------------------------

/// Checks fetched bytes as the plugin `name` of the project, printing the
/// report (what it offers, requests and is granted). Returns the world.
fn check(project: &Project, name: &str, bytes: &[u8]) -> Result<String> {
    let dir = tempfile::Builder::new()
        .prefix("envhost-add-")
        .tempdir()
        .map_err(DistributionError::CheckFolder)?;
    let path = dir.path().join(format!("{name}.wasm"));
    std::fs::write(&path, bytes).map_err(|source| DistributionError::Write {
        path: path.clone(),
        source,
    })?;
    let report = plugin::check_as(
        &path,
        name,
        &project.dir,
        &project.settings,
        Arc::new(StderrSink),
    );
    let text = report
        .text
        .replace(&path.display().to_string(), &format!("env/{name}.wasm"));
    print!("{text}");
    match (report.ok, report.world) {
        (true, Some(world)) => Ok(world),
        _ => Err(DistributionError::Refused {
            name: name.to_owned(),
        }),
    }
}

// --- add -------------------------------------------------------------------------------

fn add(args: AddArgs) -> Result<()> {
    let project = Project::open(&args.project)?;
    let source: Source = args.source.parse()?;
    let name = chosen_name(args.name.as_deref(), &source)?;
    let lock = project.lock()?;
    let grants = project.grants()?;
    if lock.get(&name).is_some() {
        return Err(DistributionError::AlreadyAdded { name });
    }
    let placement = Placement::of(&project, &name, source)?;
    if let Some(refusal) = plugin::reads_like_plugin(
        &name,
        project.plugin_names(&lock).iter().map(String::as_str),
    ) {
        return Err(DistributionError::Name(refusal));
    }
    // A requirement given on the command line is written into the grants
    // file; otherwise the one already there (if any) applies.
    let flagged = flagged_verify(
        &project.dir,
        args.verify_key.as_deref(),
        args.verify_identity.as_deref(),
        args.verify_issuer.as_deref(),
    )?;
    let verify = flagged
        .clone()
        .or_else(|| grants.entry(&name).and_then(|entry| entry.verify.clone()));
    let requirement = Requirement::optional(&project, verify.as_ref())?;

    let client = client(Some(&args.network), false)?;
    let fetched = client.fetch(
        &placement.fetch_from,
        requirement.as_ref().map(Requirement::check).as_ref(),
    )?;
    print_warnings(&fetched);
    let world = check(&project, &name, &fetched.component)?;

    let entry = LockedPlugin {
        name: name.clone(),
        source: placement.recorded,
        manifest: fetched.manifest,
        sha256: fetched.sha256,
        size: fetched.size,
        world,
        signer: verify.as_ref().map(Requirement::locked),
        signature: fetched.signature,
    };
    let verify_change = flagged.map_or(VerifyChange::Keep, VerifyChange::Set);
    let component = (!placement.adopting).then_some(fetched.component.as_slice());
    write_added(&project, lock, &grants, entry, component, &verify_change)?;
    report_added(&name, &fetched, requirement.as_ref(), &grants);
    Ok(())
}

/// The name a plugin is added under: `--name`, or one made from the
/// source. The loader's rule applies, so that what is added is what the
/// next start loads: an identifier, not a built-in's name nor one that
/// reads like it (one that reads like another plugin's is refused once the
/// project's plugins are known).
fn chosen_name(given: Option<&str>, source: &Source) -> Result<String> {
    let name = match given {
        Some(name) => name.to_owned(),
        None => default_name(source)?,
    };
    plugin::plugin_name(&name).map_err(DistributionError::Name)?;
    Ok(name)
}

/// `NAME` from `…/NAME:tag`, `…/NAME.wasm`, with other characters as `_`.
fn default_name(source: &Source) -> Result<String> {
    let raw = match source {
        Source::Oci(reference) => reference
            .repository
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned(),
        Source::Url(url) => url
            .url
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .trim_end_matches(".wasm")
            .to_owned(),
        Source::Path(path) => path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    let name = EnvironmentName::suggested_by(&raw);
    if EnvironmentName::new(&name).is_err() {
        return Err(DistributionError::NoDefaultName {
            source_given: source.clone(),
        });
    }
    Ok(name)
}

/// Where an added plugin is fetched from and how the lock records its
/// source.
struct Placement {
    /// The source to fetch (a path made absolute).
    fetch_from: Source,
    /// The source as the lock records it (a path inside the project
    /// relative to it).
    recorded: Source,
    /// The source is env/NAME.wasm itself: it is locked where it is, not
    /// copied.
    adopting: bool,
}

impl Placement {
    /// Where the plugin `name` from `source` comes from. A file already at
    /// env/NAME.wasm that is not the source is refused: the lock does not
    /// name it, and adding would overwrite it.
    fn of(project: &Project, name: &str, source: Source) -> Result<Placement> {
        let (fetch_from, recorded) = match source {
            Source::Path(path) => {
                let absolute = std::fs::canonicalize(&path)
                    .map_err(|source| DistributionError::PluginFile { path, source })?;
                let recorded = match absolute.strip_prefix(&project.dir) {
                    Ok(inside) => inside.to_owned(),
                    Err(_) => absolute.clone(),
                };
                (Source::Path(absolute), Source::Path(recorded))
            }
            other => (other.clone(), other),
        };
        let target = project.wasm(name);
        let adopting = matches!(&fetch_from, Source::Path(path) if *path == target);
        if target.exists() && !adopting {
            return Err(DistributionError::UnlockedFileInTheWay {
                shown: project.shown(&target).to_owned(),
                name: name.to_owned(),
            });
        }
        Ok(Placement {
            fetch_from,
            recorded,
            adopting,
        })
    }
}

/// The signature requirement given on the command line (`--verify-key`,
/// or `--verify-identity` with `--verify-issuer`), as the grants file
/// records it.
fn flagged_verify(
    project: &Path,
    key: Option<&Path>,
    identity: Option<&str>,
    issuer: Option<&str>,
) -> Result<Option<Verify>> {
    Ok(match (key, identity, issuer) {
        (Some(key), _, _) => Some(Verify::Key {
            key: relative_to(project, key)?,
        }),
        (None, Some(identity), Some(issuer)) => Some(Verify::Keyless {
            identity: identity.to_owned(),
            issuer: issuer.to_owned(),
            trusted_root: None,
        }),
        _ => None,
    })
}

/// `path` as written into the grants file: relative to the project when it
/// is inside it.
fn relative_to(project: &Path, path: &Path) -> Result<String> {
    let absolute = std::fs::canonicalize(path).map_err(|source| DistributionError::KeyFile {
        path: path.to_owned(),
        source,
    })?;
    Ok(absolute
        .strip_prefix(project)
        .unwrap_or(&absolute)
        .display()
        .to_string())
}

/// Writes what `add` fetched and checked, all or nothing: env/NAME.wasm
/// (`component`; `None` when the plugin is adopted where it is), its pin
/// in the grants file (granting nothing new; its `verify` changed as
/// `verify` says) and its entry in the lock.
fn write_added(
    project: &Project,
    mut lock: Lock,
    grants: &GrantsFile,
    entry: LockedPlugin,
    component: Option<&[u8]>,
    verify: &VerifyChange,
) -> Result<()> {
    let pinned = with_pin(
        grants,
        grants.text.as_deref().unwrap_or(""),
        &entry.name,
        Some(&entry.sha256),
        verify,
    )?;
    let mut changes = Changes::default();
    if let Some(component) = component {
        changes.write(&project.wasm(&entry.name), component)?;
    }
    changes.write(&grants.path, pinned.as_bytes())?;
    lock.insert(entry);
    changes.write(&project.lock_path, lock.to_text().as_bytes())?;
    changes.commit()
}

fn report_added(
    name: &str,
    fetched: &Fetched,
    requirement: Option<&Requirement>,
    grants: &GrantsFile,
) {
    println!(
        "added {name}: env/{name}.wasm, sha256 {} ({} bytes){}{}",
        fetched.sha256.hex(),
        fetched.size,
        fetched
            .manifest
            .map(|m| format!(", manifest {m}"))
            .unwrap_or_default(),
        requirement
            .map(|r| format!(", signed by {}", r.signer))
            .unwrap_or_default()
    );
    println!(
        "pinned in {} (nothing granted beyond what it already had); locked in env/envhost.lock",
        grants.shown
    );
}

// --- install -----------------------------------------------------------------------------

fn install(args: InstallArgs) -> Result<()> {
    let project = Project::open(&args.project)?;
    let lock = project.existing_lock()?;
    let grants = project.grants()?;
    let drift = Drift::between(&project, &lock, &grants)?;
    let unlocked = project.unlocked(&lock);
    if args.frozen {
        return frozen(&lock, drift.differences, &unlocked);
    }
    let mut changes = Changes::default();
    let client = client(Some(&args.network), args.offline)?;
    stage_locked_files(&mut changes, &client, &project, &grants, &drift.to_fetch)?;
    stage_locked_pins(&mut changes, &grants, &drift.to_pin)?;
    changes.commit()?;
    for name in &unlocked {
        eprintln!(
            "envhost: note: env/{name}.wasm is not in the lock (`envhost add env/{name}.wasm` locks it)"
        );
    }
    println!(
        "installed: {} in the lock, {} written, {} set",
        counted(lock.plugins.len(), "plugin"),
        drift.to_fetch.len(),
        counted(drift.to_pin.len(), "pin")
    );
    Ok(())
}

/// How env/ and the pins differ from the lock.
struct Drift<'lock> {
    /// Each difference, in words.
    differences: Vec<String>,
    /// The plugins whose file is missing or has other bytes.
    to_fetch: Vec<&'lock LockedPlugin>,
    /// The plugins whose pin is missing or another.
    to_pin: Vec<&'lock LockedPlugin>,
}

impl<'lock> Drift<'lock> {
    fn between(project: &Project, lock: &'lock Lock, grants: &GrantsFile) -> Result<Self> {
        let mut drift = Drift {
            differences: Vec::new(),
            to_fetch: Vec::new(),
            to_pin: Vec::new(),
        };
        for locked in &lock.plugins {
            let name = &locked.name;
            match project.installed(name)? {
                Some(sha) if sha == locked.sha256 => {}
                Some(sha) => {
                    drift.differences.push(format!(
                        "env/{name}.wasm has sha256 {}, the lock says {}",
                        sha.hex(),
                        locked.sha256.hex()
                    ));
                    drift.to_fetch.push(locked);
                }
                None => {
                    drift
                        .differences
                        .push(format!("env/{name}.wasm is missing"));
                    drift.to_fetch.push(locked);
                }
            }
            let pin = grants.entry(name).and_then(|e| e.sha256.as_deref());
            if pin != Some(locked.sha256.hex().as_str()) {
                drift.differences.push(match pin {
                    Some(pin) => format!(
                        "the pin of {name} in {} is {pin}, the lock says {}",
                        grants.shown,
                        locked.sha256.hex()
                    ),
                    None => format!("{name} has no pin in {}", grants.shown),
                });
                drift.to_pin.push(locked);
            }
        }
        Ok(drift)
    }
}

/// `install --frozen`: says so when env/ and the pins are as the lock says
/// and every plugin in env/ is locked; otherwise prints each difference and
/// fails. Changes nothing.
fn frozen(lock: &Lock, mut differences: Vec<String>, unlocked: &[String]) -> Result<()> {
    for name in unlocked {
        differences.push(format!(
            "env/{name}.wasm is not in the lock (`envhost add env/{name}.wasm` locks it)"
        ));
    }
    if differences.is_empty() {
        println!(
            "env/ matches env/envhost.lock: {}, each pinned",
            counted(lock.plugins.len(), "plugin")
        );
        return Ok(());
    }
    for difference in &differences {
        eprintln!("  {difference}");
    }
    Err(DistributionError::NotAsLocked {
        differences: differences.len(),
    })
}

/// Fetches each plugin of `to_fetch` by its locked digest (from the cache
/// when it has the bytes), checks it as the host would load it, and
/// stages env/NAME.wasm.
fn stage_locked_files(
    changes: &mut Changes,
    client: &Client,
    project: &Project,
    grants: &GrantsFile,
    to_fetch: &[&LockedPlugin],
) -> Result<()> {
    for locked in to_fetch {
        let name = &locked.name;
        let verify = grants.entry(name).and_then(|e| e.verify.as_ref());
        let requirement = Requirement::optional(project, verify)?;
        let fetched = client
            .fetch_locked(
                &project.resolved(locked),
                requirement.as_ref().map(Requirement::check).as_ref(),
            )
            .map_err(|source| DistributionError::Install {
                name: name.clone(),
                source: Box::new(source),
            })?;
        print_warnings(&fetched);
        check(project, name, &fetched.component)?;
        changes.write(&project.wasm(name), &fetched.component)?;
    }
    Ok(())
}

/// Stages the grants file with each plugin of `to_pin` pinned to its
/// locked sha256 (its grants and `verify` kept).
fn stage_locked_pins(
    changes: &mut Changes,
    grants: &GrantsFile,
    to_pin: &[&LockedPlugin],
) -> Result<()> {
    if to_pin.is_empty() {
        return Ok(());
    }
    let mut text = grants.text.clone().unwrap_or_default();
    for locked in to_pin {
        text = with_pin(
            grants,
            &text,
            &locked.name,
            Some(&locked.sha256),
            &VerifyChange::Keep,
        )?;
    }
    changes.write(&grants.path, text.as_bytes())
}

// --- update -------------------------------------------------------------------------------

fn update(args: UpdateArgs) -> Result<()> {
    let project = Project::open(&args.project)?;
    let mut lock = project.existing_lock()?;
    let grants = project.grants()?;
    let entries = to_update(&lock, args.name.as_deref())?;
    let client = client(Some(&args.network), false)?;
    let mut changes = Changes::default();
    let mut text = grants.text.clone().unwrap_or_default();
    let mut moved = 0;
    for locked in entries {
        let Some(newer) = newer_source(&client, &project, &locked)? else {
            continue;
        };
        moved += 1;
        if args.dry_run {
            continue;
        }
        let updated = stage_newer(&mut changes, &client, &project, &grants, &locked, newer)?;
        text = with_pin(
            &grants,
            &text,
            &updated.name,
            Some(&updated.sha256),
            &VerifyChange::Keep,
        )?;
        lock.insert(updated);
    }
    if args.dry_run {
        println!(
            "{} would change; nothing was written (run `envhost update` to install)",
            counted(moved, "plugin")
        );
        return Ok(());
    }
    if moved > 0 {
        changes.write(&grants.path, text.as_bytes())?;
        changes.write(&project.lock_path, lock.to_text().as_bytes())?;
        changes.commit()?;
    }
    println!("{} updated", counted(moved, "plugin"));
    Ok(())
}

/// The locked plugins `update` looks at: the one named, or all.
fn to_update(lock: &Lock, name: Option<&str>) -> Result<Vec<LockedPlugin>> {
    if let Some(name) = name
        && lock.get(name).is_none()
    {
        return Err(DistributionError::NotInLock {
            name: name.to_owned(),
        });
    }
    Ok(lock
        .plugins
        .iter()
        .filter(|p| name.is_none_or(|n| n == p.name))
        .cloned()
        .collect())
}

/// Where a locked plugin's newer bytes are.
struct Newer {
    /// The source to fetch them from (a tag resolved to its digest).
    fetch_from: Source,
    /// The manifest the tag names now (a tag's source).
    manifest: Option<registry::Sha256>,
}

/// What a locked plugin's source names now, when it is not what is
/// locked; prints what it found either way. A source pinned by its digest
/// never moves.
fn newer_source(
    client: &Client,
    project: &Project,
    locked: &LockedPlugin,
) -> Result<Option<Newer>> {
    match &locked.source {
        Source::Oci(reference) if reference.digest.is_none() => {
            moved_tag(client, reference, locked)
        }
        Source::Path(path) => changed_file(project, path, locked),
        _ => {
            println!(
                "{}: {} is pinned by its digest; nothing to update",
                locked.name, locked.source
            );
            Ok(None)
        }
    }
}

/// The manifest an OCI tag names now, when it is not the locked one.
fn moved_tag(
    client: &Client,
    reference: &OciReference,
    locked: &LockedPlugin,
) -> Result<Option<Newer>> {
    let name = &locked.name;
    let now = client.resolve(reference)?;
    if Some(now) == locked.manifest {
        println!("{name}: {} still names {now}", locked.source);
        return Ok(None);
    }
    println!(
        "{name}: {} now names {now} (locked: {})",
        locked.source,
        locked
            .manifest
            .map(|m| m.to_string())
            .unwrap_or_else(|| "none".to_owned())
    );
    Ok(Some(Newer {
        fetch_from: Source::Oci(reference.with_digest(now)),
        manifest: Some(now),
    }))
}

/// A path source whose bytes are no longer the locked ones.
fn changed_file(project: &Project, path: &Path, locked: &LockedPlugin) -> Result<Option<Newer>> {
    let name = &locked.name;
    let path = project.source_path(path);
    let bytes = std::fs::read(&path).map_err(|source| DistributionError::ReadSource {
        name: name.clone(),
        path: path.clone(),
        source,
    })?;
    let now = registry::Sha256::of(&bytes);
    if now == locked.sha256 {
        println!("{name}: {} is unchanged", locked.source);
        return Ok(None);
    }
    println!(
        "{name}: {} now has sha256 {} (locked: {})",
        locked.source,
        now.hex(),
        locked.sha256.hex()
    );
    Ok(Some(Newer {
        fetch_from: Source::Path(path),
        manifest: None,
    }))
}

/// Fetches a locked plugin's newer bytes, checks them as the host would
/// load them, stages env/NAME.wasm, and returns the plugin's new lock
/// entry.
fn stage_newer(
    changes: &mut Changes,
    client: &Client,
    project: &Project,
    grants: &GrantsFile,
    locked: &LockedPlugin,
    newer: Newer,
) -> Result<LockedPlugin> {
    let name = &locked.name;
    let verify = grants.entry(name).and_then(|e| e.verify.clone());
    let requirement = Requirement::optional(project, verify.as_ref())?;
    let fetched = client.fetch(
        &newer.fetch_from,
        requirement.as_ref().map(Requirement::check).as_ref(),
    )?;
    let world = check(project, name, &fetched.component)?;
    changes.write(&project.wasm(name), &fetched.component)?;
    Ok(LockedPlugin {
        manifest: newer.manifest.or(fetched.manifest),
        sha256: fetched.sha256,
        size: fetched.size,
        world,
        signer: verify.as_ref().map(Requirement::locked),
        signature: fetched.signature,
        ..locked.clone()
    })
}

// --- verify, remove, list, publish --------------------------------------------------------

fn verify(args: ProjectArgs) -> Result<()> {
    let project = Project::open(&args)?;
    let lock = project.existing_lock()?;
    let grants = project.grants()?;
    let cache = blob_cache();
    let mut problems: Vec<String> = Vec::new();
    for locked in &lock.plugins {
        let name = &locked.name;
        let Some(bytes) = project.plugin_bytes(name)? else {
            problems.push(format!("env/{name}.wasm is missing"));
            continue;
        };
        let sha = registry::Sha256::of(&bytes);
        let mut ok = true;
        if sha != locked.sha256 {
            problems.push(format!(
                "env/{name}.wasm has sha256 {}, the lock says {}",
                sha.hex(),
                locked.sha256.hex()
            ));
            ok = false;
        }
        let entry = grants.entry(name);
        match entry.and_then(|e| e.sha256.as_deref()) {
            Some(pin) if pin == sha.hex() => {}
            Some(pin) => {
                problems.push(format!(
                    "env/{name}.wasm has sha256 {}, its pin in {} is {pin}",
                    sha.hex(),
                    grants.shown
                ));
                ok = false;
            }
            None => {
                problems.push(format!("{name} has no pin in {}", grants.shown));
                ok = false;
            }
        }
        let mut signed = String::new();
        if let Some(verify) = entry.and_then(|e| e.verify.as_ref()) {
            let requirement = Requirement::for_project(&project, verify)?;
            let bundle = locked
                .signature
                .and_then(|digest| cache.as_ref()?.get(&digest, 1 << 20).ok().flatten());
            match bundle {
                Some(bundle) => {
                    match registry::verify_signature(
                        &requirement.signer,
                        &requirement.trust,
                        &sha,
                        &bundle,
                        &format!("plugin {name}"),
                    ) {
                        Ok(()) => signed = format!(", signed by {}", requirement.signer),
                        Err(e) => {
                            problems.push(e.to_string());
                            ok = false;
                        }
                    }
                }
                None => {
                    problems.push(format!(
                        "plugin {name} must be signed by {}, and the signature verified when it was installed is not in the cache; `envhost install` after deleting env/{name}.wasm fetches and checks it again",
                        requirement.signer
                    ));
                    ok = false;
                }
            }
        }
        if ok {
            println!("{name}: ok (sha256 {}{signed})", sha.hex());
        }
    }
    for name in project.unlocked(&lock) {
        problems.push(format!(
            "env/{name}.wasm is not in the lock (`envhost add env/{name}.wasm` locks it)"
        ));
    }
    if problems.is_empty() {
        return Ok(());
    }
    for problem in &problems {
        eprintln!("  {problem}");
    }
    Err(DistributionError::Unverified {
        differences: problems.len(),
    })
}

fn remove(args: RemoveArgs) -> Result<()> {
    let project = Project::open(&args.project)?;
    let mut lock = project.lock()?;
    let grants = project.grants()?;
    let name = &args.name;
    let target = project.wasm(name);
    let locked = lock.remove(name);
    if locked.is_none() && !target.exists() {
        return Err(DistributionError::NoSuchPlugin { name: name.clone() });
    }
    let text = grants.text.clone().unwrap_or_default();
    let unpinned = with_pin(&grants, &text, name, None, &VerifyChange::Remove)?;
    let mut changes = Changes::default();
    changes.remove(&target);
    if grants.text.is_some() && unpinned != text {
        changes.write(&grants.path, unpinned.as_bytes())?;
    }
    if locked.is_some() {
        changes.write(&project.lock_path, lock.to_text().as_bytes())?;
    }
    changes.commit()?;
    println!(
        "removed {name}: env/{name}.wasm, its pin{}",
        if locked.is_some() {
            " and its lock entry"
        } else {
            ""
        }
    );
    Ok(())
}

fn list(args: ProjectArgs) -> Result<()> {
    let project = Project::open(&args)?;
    let lock = project.lock()?;
    let grants = project.grants()?;
    let mut rows: Vec<[String; 6]> = vec![[
        "NAME".into(),
        "SOURCE".into(),
        "VERSION".into(),
        "SHA256".into(),
        "WORLD".into(),
        "GRANTS".into(),
    ]];
    let mut sorted: Vec<&LockedPlugin> = lock.plugins.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    for locked in sorted {
        let version = match &locked.source {
            Source::Oci(OciReference { tag: Some(tag), .. }) => tag.clone(),
            Source::Oci(OciReference {
                digest: Some(digest),
                ..
            }) => format!("@{}", short(&digest.hex())),
            _ => "-".to_owned(),
        };
        let granted = grants
            .entry(&locked.name)
            .map(|e| e.grants.join("; "))
            .filter(|g| !g.is_empty())
            .unwrap_or_else(|| "nothing".to_owned());
        rows.push([
            locked.name.clone(),
            locked.source.to_string(),
            version,
            short(&locked.sha256.hex()),
            locked.world.clone(),
            granted,
        ]);
    }
    let widths: Vec<usize> = (0..6)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    for row in &rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<width$}  ", width = widths[i]));
            }
        }
        println!("{}", line.trim_end());
    }
    for name in project.unlocked(&lock) {
        println!("{name}: env/{name}.wasm, not locked (`envhost add env/{name}.wasm` locks it)");
    }
    Ok(())
}

fn short(hex: &str) -> String {
    hex.chars().take(12).collect()
}

fn publish(args: PublishArgs) -> Result<()> {
    let Source::Oci(target) = args.target.parse::<Source>()? else {
        return Err(DistributionError::NotARegistry {
            target: args.target,
        });
    };
    let bytes = std::fs::read(&args.file).map_err(|source| DistributionError::Read {
        path: args.file.clone(),
        source,
    })?;
    let key = args
        .sign_key
        .as_ref()
        .map(|path| SigningKey::from_file(path))
        .transpose()?;
    let client = client(Some(&args.network), false)?;
    let published = client.publish(&bytes, &target, key.as_ref())?;
    println!(
        "published {} as {} (component sha256 {}, {} bytes)",
        args.file.display(),
        published.reference,
        published.sha256.hex(),
        published.size
    );
    if let Some(tag) = &published.signature_tag {
        println!(
            "signed: the signature is at oci://{}/{}:{tag}",
            target.registry, target.repository
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name_from(source: &str) -> Result<String> {
        default_name(&source.parse::<Source>()?)
    }

    #[test]
    fn the_default_name_is_the_sources_last_path_part() {
        assert_eq!(
            name_from("oci://127.0.0.1:5000/plugins/kv-store:1.0").unwrap(),
            "kv_store"
        );
        assert_eq!(
            name_from("https://example.com/files/timer.wasm#sha256=0000000000000000000000000000000000000000000000000000000000000000").unwrap(),
            "timer"
        );
        assert_eq!(name_from("./build/sqlite.wasm").unwrap(), "sqlite");
    }

    #[test]
    fn a_source_that_makes_no_name_asks_for_name() {
        let said = match default_name(&Source::Path(PathBuf::from("/"))) {
            Ok(name) => panic!("a name was made from /: {name}"),
            Err(err) => err.to_string(),
        };
        assert!(said.contains("pass --name NAME"), "{said}");
    }

    #[test]
    fn a_key_inside_the_project_is_written_relative_to_it() {
        let project = tempfile::tempdir().unwrap();
        let project_dir = project.path().canonicalize().unwrap();
        let key = project_dir.join("keys").join("signer.pem");
        std::fs::create_dir_all(key.parent().unwrap()).unwrap();
        std::fs::write(&key, "key").unwrap();
        assert_eq!(relative_to(&project_dir, &key).unwrap(), "keys/signer.pem");
        let outside = tempfile::NamedTempFile::new().unwrap();
        let shown = relative_to(&project_dir, outside.path()).unwrap();
        assert!(Path::new(&shown).is_absolute(), "{shown}");
    }

    #[test]
    fn a_missing_key_file_is_named_in_the_error() {
        let project = tempfile::tempdir().unwrap();
        let missing = project.path().join("absent.pem");
        let said = format!("{:#}", relative_to(project.path(), &missing).unwrap_err());
        assert!(said.contains("absent.pem"), "{said}");
    }

    // --- the words of typical failures --------------------------------------------

    /// An error and each source under it, as the binary prints it (`{:#}`
    /// of the anyhow error it becomes).
    fn chain(error: &DistributionError) -> String {
        let mut said = error.to_string();
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            said.push_str(&format!(": {cause}"));
            source = cause.source();
        }
        said
    }

    fn open(dir: &Path) -> Project {
        Project::open(&ProjectArgs {
            project: dir.to_owned(),
            settings: PluginSettings::default(),
        })
        .expect("a project folder")
    }

    fn locked(name: &str, bytes: &[u8], source: &str) -> LockedPlugin {
        LockedPlugin {
            name: name.to_owned(),
            source: source.parse().expect("a source"),
            manifest: None,
            sha256: registry::Sha256::of(bytes),
            size: bytes.len() as u64,
            world: "envhost:environment/full-plugin@0.2.0".to_owned(),
            signer: None,
            signature: None,
        }
    }

    fn write_lock(project: &Project, plugins: &[LockedPlugin]) -> Lock {
        let mut lock = Lock::default();
        for plugin in plugins {
            lock.insert(plugin.clone());
        }
        std::fs::create_dir_all(&project.env).unwrap();
        std::fs::write(&project.lock_path, lock.to_text()).unwrap();
        lock
    }

    #[test]
    fn a_project_without_a_lock_is_told_to_add_plugins_first() {
        let dir = tempfile::tempdir().unwrap();
        let project = open(dir.path());
        let said = project.existing_lock().unwrap_err().to_string();
        assert!(
            said.ends_with("has no env/envhost.lock; add plugins with `envhost add SOURCE` first"),
            "{said}"
        );
        assert!(said.contains(&project.dir.display().to_string()), "{said}");
    }

    #[test]
    fn a_lock_that_does_not_parse_is_named_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let project = open(dir.path());
        std::fs::create_dir_all(&project.env).unwrap();
        std::fs::write(&project.lock_path, "version = 1\nnot = toml = here\n").unwrap();
        let said = chain(&project.lock().unwrap_err());
        assert!(said.starts_with("env/envhost.lock:2:"), "{said}");
    }

    #[test]
    fn an_install_that_fails_says_which_plugin_and_then_why() {
        let error = DistributionError::Install {
            name: "timer".to_owned(),
            source: Box::new(registry::Error::Offline {
                what: "the manifest of oci://127.0.0.1:5000/plugins/timer:1.0".to_owned(),
                reason: "it is not in the cache".to_owned(),
            }),
        };
        assert_eq!(error.to_string(), "installing timer");
        let said = chain(&error);
        assert!(
            said.starts_with("installing timer: the manifest of"),
            "{said}"
        );
        assert!(
            said.ends_with(
                "and the network is off; run the command once with the network to fill the cache"
            ),
            "{said}"
        );
    }

    #[test]
    fn a_grants_file_that_is_not_toml_is_to_be_fixed_by_hand() {
        let grants = GrantsFile {
            path: PathBuf::from("/p/env/envhost.toml"),
            shown: "env/envhost.toml".to_owned(),
            text: Some("[plugins\n".to_owned()),
            entries: Vec::new(),
        };
        let text = grants.text.clone().unwrap();
        let said = with_pin(&grants, &text, "timer", None, &VerifyChange::Keep)
            .unwrap_err()
            .to_string();
        assert!(
            said.starts_with("env/envhost.toml: it is not valid TOML"),
            "{said}"
        );
        assert!(said.ends_with("; fix it by hand first"), "{said}");
    }

    #[test]
    fn a_file_error_keeps_the_io_error_as_its_source() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("absent.wasm");
        let error = DistributionError::Read {
            path: missing.clone(),
            source: std::fs::read(&missing).unwrap_err(),
        };
        assert_eq!(error.to_string(), format!("reading {}", missing.display()));
        assert!(chain(&error).ends_with("No such file or directory (os error 2)"));
    }

    // --- add's steps ------------------------------------------------------------------

    #[test]
    fn a_name_the_loader_refuses_is_refused_before_anything_is_read() {
        let source: Source = "oci://127.0.0.1:5000/plugins/timer:1.0".parse().unwrap();
        assert_eq!(chosen_name(None, &source).unwrap(), "timer");
        assert_eq!(chosen_name(Some("clock"), &source).unwrap(), "clock");
        let said = chosen_name(Some("bash"), &source).unwrap_err().to_string();
        assert!(
            said.contains("`bash` belongs to a built-in environment"),
            "{said}"
        );
        assert!(
            said.ends_with("; choose another with --name NAME"),
            "{said}"
        );
    }

    #[test]
    fn a_path_inside_the_project_is_recorded_relative_and_env_files_are_adopted() {
        let dir = tempfile::tempdir().unwrap();
        let project = open(dir.path());
        std::fs::create_dir_all(project.dir.join("build")).unwrap();
        std::fs::create_dir_all(&project.env).unwrap();
        std::fs::write(project.dir.join("build/timer.wasm"), b"component").unwrap();

        let given = Source::Path(project.dir.join("build/../build/timer.wasm"));
        let placed = Placement::of(&project, "timer", given).unwrap();
        assert_eq!(
            placed.recorded,
            Source::Path(PathBuf::from("build/timer.wasm"))
        );
        assert_eq!(
            placed.fetch_from,
            Source::Path(project.dir.join("build/timer.wasm"))
        );
        assert!(!placed.adopting);

        std::fs::write(project.wasm("clock"), b"component").unwrap();
        let adopted =
            Placement::of(&project, "clock", Source::Path(project.wasm("clock"))).unwrap();
        assert!(adopted.adopting);
        assert_eq!(
            adopted.recorded,
            Source::Path(PathBuf::from("env/clock.wasm"))
        );

        let said = Placement::of(
            &project,
            "clock",
            "oci://127.0.0.1:5000/p/clock:1".parse().unwrap(),
        )
        .err()
        .expect("a file in the way")
        .to_string();
        assert_eq!(
            said,
            "env/clock.wasm exists and is not in the lock; remove it, add it as it is (`envhost add env/clock.wasm`), or choose another --name"
        );

        let missing = Placement::of(
            &project,
            "gone",
            Source::Path(project.dir.join("gone.wasm")),
        )
        .err()
        .expect("no such file");
        assert!(
            chain(&missing).starts_with(&format!(
                "the plugin file {} cannot be read: ",
                project.dir.join("gone.wasm").display()
            )),
            "{missing}"
        );
    }

    #[test]
    fn the_flags_make_the_requirement_the_grants_file_records() {
        let dir = tempfile::tempdir().unwrap();
        let project = open(dir.path());
        let key = project.dir.join("alice.pub");
        std::fs::write(&key, "key").unwrap();
        assert_eq!(
            flagged_verify(&project.dir, Some(&key), None, None).unwrap(),
            Some(Verify::Key {
                key: "alice.pub".to_owned()
            })
        );
        assert_eq!(
            flagged_verify(
                &project.dir,
                None,
                Some("me@example.com"),
                Some("https://issuer")
            )
            .unwrap(),
            Some(Verify::Keyless {
                identity: "me@example.com".to_owned(),
                issuer: "https://issuer".to_owned(),
                trusted_root: None,
            })
        );
        assert_eq!(
            flagged_verify(&project.dir, None, None, None).unwrap(),
            None
        );
    }

    #[test]
    fn an_added_plugin_is_written_pinned_and_locked_together() {
        let dir = tempfile::tempdir().unwrap();
        let project = open(dir.path());
        let grants = project.grants().unwrap();
        let entry = locked(
            "timer",
            b"component",
            "oci://127.0.0.1:5000/plugins/timer:1.0",
        );
        let sha = entry.sha256.hex();
        write_added(
            &project,
            Lock::default(),
            &grants,
            entry.clone(),
            Some(b"component"),
            &VerifyChange::Keep,
        )
        .unwrap();
        assert_eq!(std::fs::read(project.wasm("timer")).unwrap(), b"component");
        assert_eq!(project.lock().unwrap().get("timer"), Some(&entry));
        let pinned = project.grants().unwrap();
        assert_eq!(
            pinned.entry("timer").and_then(|e| e.sha256.clone()),
            Some(sha)
        );
        let leftovers: Vec<_> = std::fs::read_dir(&project.env)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(".envhost-"))
            .collect();
        assert!(leftovers.is_empty(), "no temporary file left behind");
    }

    // --- install's steps --------------------------------------------------------------

    #[test]
    fn drift_lists_missing_and_changed_files_and_pins() {
        let dir = tempfile::tempdir().unwrap();
        let project = open(dir.path());
        let timer = locked("timer", b"timer", "oci://127.0.0.1:5000/plugins/timer:1.0");
        let clock = locked("clock", b"clock", "oci://127.0.0.1:5000/plugins/clock:1.0");
        let lock = write_lock(&project, &[timer.clone(), clock.clone()]);
        std::fs::write(project.wasm("timer"), b"tampered").unwrap();
        std::fs::write(
            project.env.join("envhost.toml"),
            format!("[plugins.clock]\nsha256 = \"{}\"\n", clock.sha256.hex()),
        )
        .unwrap();
        let grants = project.grants().unwrap();
        let drift = Drift::between(&project, &lock, &grants).unwrap();
        let names = |plugins: &[&LockedPlugin]| -> Vec<String> {
            plugins.iter().map(|p| p.name.clone()).collect()
        };
        assert_eq!(names(&drift.to_fetch), ["timer", "clock"]);
        assert_eq!(names(&drift.to_pin), ["timer"]);
        assert_eq!(
            drift.differences,
            [
                format!(
                    "env/timer.wasm has sha256 {}, the lock says {}",
                    registry::Sha256::of(b"tampered").hex(),
                    timer.sha256.hex()
                ),
                "timer has no pin in env/envhost.toml".to_owned(),
                "env/clock.wasm is missing".to_owned(),
            ]
        );
    }

    #[test]
    fn frozen_counts_each_difference_and_says_how_to_restore() {
        let lock = Lock::default();
        assert!(frozen(&lock, Vec::new(), &[]).is_ok());
        let said = frozen(
            &lock,
            vec!["env/timer.wasm is missing".to_owned()],
            &["stray".to_owned()],
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            said,
            "env/ differs from env/envhost.lock in 2 ways (listed above); `envhost install` without --frozen restores what the lock says"
        );
    }

    #[test]
    fn locked_pins_are_staged_and_other_entries_kept() {
        let dir = tempfile::tempdir().unwrap();
        let project = open(dir.path());
        std::fs::create_dir_all(&project.env).unwrap();
        let old = registry::Sha256::of(b"old").hex();
        std::fs::write(
            project.env.join("envhost.toml"),
            format!("[plugins.timer]\nsha256 = \"{old}\"\nread-only = [\"data\"]\n"),
        )
        .unwrap();
        let grants = project.grants().unwrap();
        let timer = locked("timer", b"timer", "oci://127.0.0.1:5000/plugins/timer:1.0");
        let mut changes = Changes::default();
        stage_locked_pins(&mut changes, &grants, &[&timer]).unwrap();
        let before = std::fs::read_to_string(&grants.path).unwrap();
        assert!(before.contains(&old), "staged, not yet written: {before}");
        changes.commit().unwrap();
        let entry = project.grants().unwrap().entry("timer").cloned().unwrap();
        assert_eq!(entry.sha256, Some(timer.sha256.hex()));
        assert_eq!(entry.grants, ["reads data"]);
    }

    // --- update's steps ---------------------------------------------------------------

    #[test]
    fn update_of_a_name_not_in_the_lock_says_where_names_are_listed() {
        let timer = locked("timer", b"timer", "oci://127.0.0.1:5000/plugins/timer:1.0");
        let mut lock = Lock::default();
        lock.insert(timer.clone());
        assert_eq!(
            to_update(&lock, None).unwrap(),
            std::slice::from_ref(&timer)
        );
        assert_eq!(to_update(&lock, Some("timer")).unwrap(), [timer]);
        let said = to_update(&lock, Some("clock")).unwrap_err().to_string();
        assert_eq!(
            said,
            "plugin clock is not in env/envhost.lock (`envhost list` lists it)"
        );
    }

    #[test]
    fn a_path_source_moves_when_its_bytes_change() {
        let dir = tempfile::tempdir().unwrap();
        let project = open(dir.path());
        std::fs::write(project.dir.join("timer.wasm"), b"timer").unwrap();
        let timer = locked("timer", b"timer", "timer.wasm");
        let relative = Path::new("timer.wasm");
        assert!(changed_file(&project, relative, &timer).unwrap().is_none());
        std::fs::write(project.dir.join("timer.wasm"), b"timer, rebuilt").unwrap();
        let newer = changed_file(&project, relative, &timer)
            .unwrap()
            .expect("moved");
        assert_eq!(
            newer.fetch_from,
            Source::Path(project.dir.join("timer.wasm"))
        );
        assert_eq!(newer.manifest, None);
        std::fs::remove_file(project.dir.join("timer.wasm")).unwrap();
        let said = changed_file(&project, relative, &timer)
            .err()
            .expect("gone")
            .to_string();
        assert_eq!(
            said,
            format!(
                "timer: reading {}",
                project.dir.join("timer.wasm").display()
            )
        );
    }

    #[test]
    fn a_digest_is_shown_by_its_first_twelve_characters() {
        assert_eq!(short("0123456789abcdef0123"), "0123456789ab");
        assert_eq!(short("abc"), "abc");
    }
}
