//! The distribution commands' arguments, as the binary's argument parser fills them (no clap here).

use std::path::PathBuf;
use std::time::Duration;

use envhost_plugin::PluginSettings;

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
