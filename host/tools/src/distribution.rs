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

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};

use envhost_core::EnvironmentName;
use envhost_core::text::counted;
use envhost_plugin::{
    self as plugin, GrantsFile, PluginSettings, StderrSink, Verify, VerifyChange,
};
use envhost_registry::{
    self as registry, BlobCache, Client, Credentials, Lock, LockedPlugin, LockedSigner,
    OciReference, SignatureCheck, Signer, SigningKey, Source, TrustRoot,
};

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
pub fn run(command: Command) -> anyhow::Result<()> {
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
    fn open(args: &ProjectArgs) -> anyhow::Result<Project> {
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
    fn lock(&self) -> anyhow::Result<Lock> {
        match std::fs::read_to_string(&self.lock_path) {
            Ok(text) => Lock::parse(&text).map_err(|e| anyhow::anyhow!("env/envhost.lock:{e}")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Lock::default()),
            Err(e) => Err(e).with_context(|| format!("reading {}", self.lock_path.display())),
        }
    }

    /// The lock, which must exist.
    fn existing_lock(&self) -> anyhow::Result<Lock> {
        if !self.lock_path.exists() {
            bail!(
                "{} has no env/envhost.lock; add plugins with `envhost add SOURCE` first",
                self.dir.display()
            );
        }
        self.lock()
    }

    fn grants(&self) -> anyhow::Result<GrantsFile> {
        plugin::grants_file(&self.dir, &self.settings).map_err(|e| anyhow::anyhow!(e))
    }

    /// The sha256 of env/NAME.wasm, if there is such a file.
    fn installed(&self, name: &str) -> anyhow::Result<Option<registry::Sha256>> {
        let path = self.wasm(name);
        match std::fs::read(&path) {
            Ok(bytes) => Ok(Some(registry::Sha256::of(&bytes))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
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

    /// How a locked source is fetched: a path in the lock is relative to the
    /// project.
    fn resolved(&self, locked: &LockedPlugin) -> LockedPlugin {
        let mut resolved = locked.clone();
        if let Source::Path(path) = &locked.source
            && path.is_relative()
        {
            resolved.source = Source::Path(self.dir.join(path));
        }
        resolved
    }

    fn shown<'a>(&self, path: &'a Path) -> std::path::Display<'a> {
        path.strip_prefix(&self.dir).unwrap_or(path).display()
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
    fn write(&mut self, path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut temp = tempfile::Builder::new()
            .prefix(".envhost-")
            .tempfile_in(dir)
            .with_context(|| format!("writing in {}", dir.display()))?;
        temp.write_all(bytes)
            .and_then(|()| temp.as_file().sync_all())
            .with_context(|| format!("writing {}", path.display()))?;
        // The file keeps the permissions it had (a grants file kept private
        // stays private); a new one gets the usual 0644.
        let mode = std::fs::metadata(path)
            .map(|m| m.permissions())
            .unwrap_or_else(|_| std::os::unix::fs::PermissionsExt::from_mode(0o644));
        std::fs::set_permissions(temp.path(), mode)
            .with_context(|| format!("writing {}", path.display()))?;
        self.writes.push((temp, path.to_owned()));
        Ok(())
    }

    fn remove(&mut self, path: &Path) {
        self.removals.push(path.to_owned());
    }

    fn commit(self) -> anyhow::Result<()> {
        for (temp, path) in self.writes {
            temp.persist(&path)
                .with_context(|| format!("writing {}", path.display()))?;
        }
        for path in self.removals {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).with_context(|| format!("removing {}", path.display())),
            }
        }
        Ok(())
    }
}

// --- the network and signatures -------------------------------------------------

fn client(network: Option<&NetworkArgs>, offline: bool) -> anyhow::Result<Client> {
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
    fn for_project(project: &Project, verify: &Verify) -> anyhow::Result<Requirement> {
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

// --- checking against the host's contract ----------------------------------------

/// Checks fetched bytes as the plugin `name` of the project, printing the
/// report (what it offers, requests and is granted). Returns the world.
fn check(project: &Project, name: &str, bytes: &[u8]) -> anyhow::Result<String> {
    let dir = tempfile::Builder::new()
        .prefix("envhost-add-")
        .tempdir()
        .context("creating a temporary folder to check the plugin in")?;
    let path = dir.path().join(format!("{name}.wasm"));
    std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
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
        _ => bail!("plugin {name} was refused (see above); nothing was written"),
    }
}

// --- the commands -------------------------------------------------------------------

fn add(args: AddArgs) -> anyhow::Result<()> {
    let project = Project::open(&args.project)?;
    let mut source: Source = args.source.parse()?;
    let name = match &args.name {
        Some(name) => name.clone(),
        None => default_name(&source)?,
    };
    // The loader's rule, so that what is added is what the next start
    // loads: an identifier, not a built-in's name nor one that reads like
    // it (or like another plugin's, below).
    if let Err(refusal) = plugin::plugin_name(&name) {
        bail!("{refusal}; choose another with --name NAME");
    }
    let lock = project.lock()?;
    let grants = project.grants()?;
    if lock.get(&name).is_some() {
        bail!(
            "plugin {name} is already added (env/envhost.lock); `envhost update {name}` fetches it again, `envhost remove {name}` removes it"
        );
    }
    // A path source is kept relative to the project when it is inside it.
    let mut recorded = source.clone();
    if let Source::Path(path) = &source {
        let absolute = std::fs::canonicalize(path)
            .with_context(|| format!("the plugin file {} cannot be read", path.display()))?;
        if let Ok(inside) = absolute.strip_prefix(&project.dir) {
            recorded = Source::Path(inside.to_owned());
        } else {
            recorded = Source::Path(absolute.clone());
        }
        source = Source::Path(absolute);
    }
    let target = project.wasm(&name);
    let adopting = matches!(&source, Source::Path(path) if *path == target);
    if target.exists() && !adopting {
        bail!(
            "{} exists and is not in the lock; remove it, add it as it is (`envhost add env/{name}.wasm`), or choose another --name",
            project.shown(&target)
        );
    }
    if let Some(refusal) = plugin::reads_like_plugin(
        &name,
        project.plugin_names(&lock).iter().map(String::as_str),
    ) {
        bail!("{refusal}; choose another with --name NAME");
    }
    // A requirement given on the command line is written into the grants
    // file; otherwise the one already there (if any) applies.
    let flagged = match (&args.verify_key, &args.verify_identity, &args.verify_issuer) {
        (Some(key), _, _) => Some(Verify::Key {
            key: relative_to(&project.dir, key)?,
        }),
        (None, Some(identity), Some(issuer)) => Some(Verify::Keyless {
            identity: identity.clone(),
            issuer: issuer.clone(),
            trusted_root: None,
        }),
        _ => None,
    };
    let verify = flagged
        .clone()
        .or_else(|| grants.entry(&name).and_then(|entry| entry.verify.clone()));
    let requirement = verify
        .as_ref()
        .map(|v| Requirement::for_project(&project, v))
        .transpose()?;

    let client = client(Some(&args.network), false)?;
    let fetched = client.fetch(
        &source,
        requirement.as_ref().map(Requirement::check).as_ref(),
    )?;
    for warning in &fetched.warnings {
        eprintln!("envhost: warning: {warning}");
    }
    let world = check(&project, &name, &fetched.component)?;

    let mut lock = lock;
    lock.insert(LockedPlugin {
        name: name.clone(),
        source: recorded.clone(),
        manifest: fetched.manifest,
        sha256: fetched.sha256,
        size: fetched.size,
        world,
        signer: verify.as_ref().map(Requirement::locked),
        signature: fetched.signature,
    });
    let verify_change = flagged.map_or(VerifyChange::Keep, VerifyChange::Set);
    let pinned = plugin::with_pin(
        grants.text.as_deref().unwrap_or(""),
        &name,
        Some(&fetched.sha256.hex()),
        &verify_change,
    )
    .map_err(|e| anyhow::anyhow!("{}: {e}", grants.shown))?;
    let mut changes = Changes::default();
    if !adopting {
        changes.write(&target, &fetched.component)?;
    }
    changes.write(&grants.path, pinned.as_bytes())?;
    changes.write(&project.lock_path, lock.to_text().as_bytes())?;
    changes.commit()?;

    println!(
        "added {name}: env/{name}.wasm, sha256 {} ({} bytes){}{}",
        fetched.sha256.hex(),
        fetched.size,
        fetched
            .manifest
            .map(|m| format!(", manifest {m}"))
            .unwrap_or_default(),
        requirement
            .as_ref()
            .map(|r| format!(", signed by {}", r.signer))
            .unwrap_or_default()
    );
    println!(
        "pinned in {} (nothing granted beyond what it already had); locked in env/envhost.lock",
        grants.shown
    );
    Ok(())
}

/// `NAME` from `…/NAME:tag`, `…/NAME.wasm`, with other characters as `_`.
fn default_name(source: &Source) -> anyhow::Result<String> {
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
    let name: String = raw
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if EnvironmentName::new(&name).is_err() {
        bail!("no environment name can be made from {source}; pass --name NAME");
    }
    Ok(name)
}

/// `path` as written into the grants file: relative to the project when it
/// is inside it.
fn relative_to(project: &Path, path: &Path) -> anyhow::Result<String> {
    let absolute = std::fs::canonicalize(path)
        .with_context(|| format!("the key file {} cannot be read", path.display()))?;
    Ok(absolute
        .strip_prefix(project)
        .unwrap_or(&absolute)
        .display()
        .to_string())
}

fn install(args: InstallArgs) -> anyhow::Result<()> {
    let project = Project::open(&args.project)?;
    let lock = project.existing_lock()?;
    let grants = project.grants()?;
    let mut differences: Vec<String> = Vec::new();
    let mut to_fetch: Vec<&LockedPlugin> = Vec::new();
    let mut to_pin: Vec<&LockedPlugin> = Vec::new();
    for locked in &lock.plugins {
        let name = &locked.name;
        match project.installed(name)? {
            Some(sha) if sha == locked.sha256 => {}
            Some(sha) => {
                differences.push(format!(
                    "env/{name}.wasm has sha256 {}, the lock says {}",
                    sha.hex(),
                    locked.sha256.hex()
                ));
                to_fetch.push(locked);
            }
            None => {
                differences.push(format!("env/{name}.wasm is missing"));
                to_fetch.push(locked);
            }
        }
        let pin = grants.entry(name).and_then(|e| e.sha256.as_deref());
        if pin != Some(locked.sha256.hex().as_str()) {
            differences.push(match pin {
                Some(pin) => format!(
                    "the pin of {name} in {} is {pin}, the lock says {}",
                    grants.shown,
                    locked.sha256.hex()
                ),
                None => format!("{name} has no pin in {}", grants.shown),
            });
            to_pin.push(locked);
        }
    }
    let unlocked = project.unlocked(&lock);
    if args.frozen {
        for name in &unlocked {
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
        bail!(
            "env/ differs from env/envhost.lock in {} (listed above); `envhost install` without --frozen restores what the lock says",
            counted(differences.len(), "way")
        );
    }

    let mut changes = Changes::default();
    let client = client(Some(&args.network), args.offline)?;
    for locked in &to_fetch {
        let name = &locked.name;
        let requirement = grants
            .entry(name)
            .and_then(|e| e.verify.as_ref())
            .map(|v| Requirement::for_project(&project, v))
            .transpose()?;
        let fetched = client
            .fetch_locked(
                &project.resolved(locked),
                requirement.as_ref().map(Requirement::check).as_ref(),
            )
            .with_context(|| format!("installing {name}"))?;
        for warning in &fetched.warnings {
            eprintln!("envhost: warning: {warning}");
        }
        check(&project, name, &fetched.component)?;
        changes.write(&project.wasm(name), &fetched.component)?;
    }
    if !to_pin.is_empty() {
        let mut text = grants.text.clone().unwrap_or_default();
        for locked in &to_pin {
            text = plugin::with_pin(
                &text,
                &locked.name,
                Some(&locked.sha256.hex()),
                &VerifyChange::Keep,
            )
            .map_err(|e| anyhow::anyhow!("{}: {e}", grants.shown))?;
        }
        changes.write(&grants.path, text.as_bytes())?;
    }
    changes.commit()?;
    for name in &unlocked {
        eprintln!(
            "envhost: note: env/{name}.wasm is not in the lock (`envhost add env/{name}.wasm` locks it)"
        );
    }
    println!(
        "installed: {} in the lock, {} written, {} set",
        counted(lock.plugins.len(), "plugin"),
        to_fetch.len(),
        counted(to_pin.len(), "pin")
    );
    Ok(())
}

fn update(args: UpdateArgs) -> anyhow::Result<()> {
    let project = Project::open(&args.project)?;
    let mut lock = project.existing_lock()?;
    let grants = project.grants()?;
    if let Some(name) = &args.name
        && lock.get(name).is_none()
    {
        bail!("plugin {name} is not in env/envhost.lock (`envhost list` lists it)");
    }
    let client = client(Some(&args.network), false)?;
    let mut changes = Changes::default();
    let mut text = grants.text.clone().unwrap_or_default();
    let mut moved = 0;
    let entries: Vec<LockedPlugin> = lock
        .plugins
        .iter()
        .filter(|p| args.name.as_ref().is_none_or(|n| *n == p.name))
        .cloned()
        .collect();
    for locked in entries {
        let name = &locked.name;
        let (fetch_from, manifest): (Source, Option<registry::Sha256>) = match &locked.source {
            Source::Oci(reference) if reference.digest.is_none() => {
                let now = client.resolve(reference)?;
                if Some(now) == locked.manifest {
                    println!("{name}: {} still names {now}", locked.source);
                    continue;
                }
                println!(
                    "{name}: {} now names {now} (locked: {})",
                    locked.source,
                    locked
                        .manifest
                        .map(|m| m.to_string())
                        .unwrap_or_else(|| "none".to_owned())
                );
                (Source::Oci(reference.with_digest(now)), Some(now))
            }
            Source::Path(_) => {
                let resolved = project.resolved(&locked);
                let Source::Path(path) = &resolved.source else {
                    unreachable!("a path stays a path")
                };
                let bytes = std::fs::read(path)
                    .with_context(|| format!("{name}: reading {}", path.display()))?;
                let now = registry::Sha256::of(&bytes);
                if now == locked.sha256 {
                    println!("{name}: {} is unchanged", locked.source);
                    continue;
                }
                println!(
                    "{name}: {} now has sha256 {} (locked: {})",
                    locked.source,
                    now.hex(),
                    locked.sha256.hex()
                );
                (resolved.source.clone(), None)
            }
            _ => {
                println!(
                    "{name}: {} is pinned by its digest; nothing to update",
                    locked.source
                );
                continue;
            }
        };
        moved += 1;
        if args.dry_run {
            continue;
        }
        let verify = grants.entry(name).and_then(|e| e.verify.clone());
        let requirement = verify
            .as_ref()
            .map(|v| Requirement::for_project(&project, v))
            .transpose()?;
        let fetched = client.fetch(
            &fetch_from,
            requirement.as_ref().map(Requirement::check).as_ref(),
        )?;
        let world = check(&project, name, &fetched.component)?;
        changes.write(&project.wasm(name), &fetched.component)?;
        text = plugin::with_pin(
            &text,
            name,
            Some(&fetched.sha256.hex()),
            &VerifyChange::Keep,
        )
        .map_err(|e| anyhow::anyhow!("{}: {e}", grants.shown))?;
        lock.insert(LockedPlugin {
            manifest: manifest.or(fetched.manifest),
            sha256: fetched.sha256,
            size: fetched.size,
            world,
            signer: verify.as_ref().map(Requirement::locked),
            signature: fetched.signature,
            ..locked.clone()
        });
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

fn verify(args: ProjectArgs) -> anyhow::Result<()> {
    let project = Project::open(&args)?;
    let lock = project.existing_lock()?;
    let grants = project.grants()?;
    let cache = blob_cache();
    let mut problems: Vec<String> = Vec::new();
    for locked in &lock.plugins {
        let name = &locked.name;
        let path = project.wasm(name);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                problems.push(format!("env/{name}.wasm is missing"));
                continue;
            }
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
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
    bail!(
        "{} between env/, the pins and the lock (listed above)",
        counted(problems.len(), "difference")
    )
}

fn remove(args: RemoveArgs) -> anyhow::Result<()> {
    let project = Project::open(&args.project)?;
    let mut lock = project.lock()?;
    let grants = project.grants()?;
    let name = &args.name;
    let target = project.wasm(name);
    let locked = lock.remove(name);
    if locked.is_none() && !target.exists() {
        bail!(
            "there is no plugin {name}: env/{name}.wasm does not exist and the lock does not name it"
        );
    }
    let text = grants.text.clone().unwrap_or_default();
    let unpinned = plugin::with_pin(&text, name, None, &VerifyChange::Remove)
        .map_err(|e| anyhow::anyhow!("{}: {e}", grants.shown))?;
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

fn list(args: ProjectArgs) -> anyhow::Result<()> {
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

fn publish(args: PublishArgs) -> anyhow::Result<()> {
    let Source::Oci(target) = args.target.parse::<Source>()? else {
        bail!(
            "{} is not a registry address; write oci://HOST[:PORT]/REPOSITORY:TAG",
            args.target
        );
    };
    let bytes =
        std::fs::read(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
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

    fn name_from(source: &str) -> anyhow::Result<String> {
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

    #[test]
    fn a_digest_is_shown_by_its_first_twelve_characters() {
        assert_eq!(short("0123456789abcdef0123"), "0123456789ab");
        assert_eq!(short("abc"), "abc");
    }
}
