//! The flags of the operator's and author's commands (`add`, `install`,
//! `update`, `verify`, `remove`, `list`, `publish`, `new`, `call`, `test`)
//! and how they become envhost-tools' plain argument structs. It must not
//! run anything.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};

use envhost_core::text::parse_duration;
use envhost_tools::{call, distribution, new_project, plugin_test};

use crate::plugin_args::PluginArgs;

/// The distribution subcommands.
#[derive(Subcommand)]
pub(crate) enum Command {
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
#[derive(Args)]
pub(crate) struct ProjectArgs {
    /// The project directory (its plugins are in env/).
    #[arg(long, value_name = "DIR", default_value = ".")]
    project: PathBuf,

    /// The grants file, where pins are written and whose grants a fetched
    /// plugin is checked with [default: <project>/env/envhost.toml].
    #[arg(long, value_name = "FILE")]
    plugin_config: Option<PathBuf>,

    #[command(flatten)]
    plugins: PluginArgs,
}

/// How registries are reached.
#[derive(Args)]
pub(crate) struct NetworkArgs {
    /// A file holding registry credentials: `USER:TOKEN` (basic
    /// authentication) or a bare token (bearer). Without it, docker's
    /// config.json ($DOCKER_CONFIG or ~/.docker) is used, if any.
    #[arg(long, value_name = "FILE")]
    registry_token_file: Option<PathBuf>,

    /// Reach this registry (HOST or HOST:PORT) over plain HTTP. Loopback
    /// registries always are; anything else is HTTPS unless named here.
    /// Credentials are never sent over plain HTTP to a host that is not
    /// loopback.
    #[arg(long, value_name = "HOST")]
    insecure_registry: Vec<String>,

    /// Also send a registry's credentials to this host (HOST or
    /// HOST:PORT) when the registry names it as its auth realm (token
    /// service). Without it they go to the registry's own host only.
    #[arg(long, value_name = "HOST")]
    registry_auth_host: Vec<String>,

    /// Give up on a transfer when no byte has moved for this long
    /// (default 30s).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    registry_stall_timeout: Option<Duration>,

    /// Give up on a transfer (one request and its whole answer) that
    /// takes longer than this, however steadily its bytes come (default
    /// 10m).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    registry_deadline: Option<Duration>,
}

/// `envhost add`.
#[derive(Args)]
pub(crate) struct AddArgs {
    /// Where the plugin comes from.
    #[arg(value_name = "SOURCE")]
    source: String,

    /// The environment name (default: from the source's last path part).
    #[arg(long, value_name = "NAME")]
    name: Option<String>,

    /// Require a signature by this public key (PEM); recorded as the
    /// plugin's `verify` in the grants file.
    #[arg(long, value_name = "FILE", conflicts_with = "verify_identity")]
    verify_key: Option<PathBuf>,

    /// Require a Sigstore keyless signature by this identity (with
    /// --verify-issuer).
    #[arg(long, value_name = "IDENTITY", requires = "verify_issuer")]
    verify_identity: Option<String>,

    /// The OIDC issuer of --verify-identity.
    #[arg(long, value_name = "URL", requires = "verify_identity")]
    verify_issuer: Option<String>,

    #[command(flatten)]
    project: ProjectArgs,

    #[command(flatten)]
    network: NetworkArgs,
}

/// `envhost install`.
#[derive(Args)]
pub(crate) struct InstallArgs {
    /// Change nothing; fail if env/ or the pins differ from the lock.
    #[arg(long)]
    frozen: bool,

    /// Use only the cache, never the network.
    #[arg(long, conflicts_with = "frozen")]
    offline: bool,

    #[command(flatten)]
    project: ProjectArgs,

    #[command(flatten)]
    network: NetworkArgs,
}

/// `envhost update`.
#[derive(Args)]
pub(crate) struct UpdateArgs {
    /// Only this plugin (default: all).
    #[arg(value_name = "NAME")]
    name: Option<String>,

    /// Report the tags that now name another manifest; change nothing.
    #[arg(long)]
    dry_run: bool,

    #[command(flatten)]
    project: ProjectArgs,

    #[command(flatten)]
    network: NetworkArgs,
}

/// `envhost remove`.
#[derive(Args)]
pub(crate) struct RemoveArgs {
    /// The plugin.
    #[arg(value_name = "NAME")]
    name: String,

    #[command(flatten)]
    project: ProjectArgs,
}

/// `envhost publish`.
#[derive(Args)]
pub(crate) struct PublishArgs {
    /// The component.
    #[arg(value_name = "FILE.wasm")]
    file: PathBuf,

    /// Where to push it: oci://HOST[:PORT]/REPOSITORY:TAG.
    #[arg(value_name = "TARGET")]
    target: String,

    /// Sign the component's sha256 with this ECDSA P-256 private key
    /// (PKCS#8 PEM); the signature is pushed beside it.
    #[arg(long, value_name = "KEY")]
    sign_key: Option<PathBuf>,

    #[command(flatten)]
    network: NetworkArgs,
}

#[derive(Args)]
pub(crate) struct CallArgs {
    /// The plugin file; the environment is named after its stem.
    #[arg(value_name = "FILE.wasm")]
    file: PathBuf,

    /// The commands, one per argument (quote each: "put colour blue"); a
    /// newline in one starts its body.
    #[arg(value_name = "COMMAND", required = true)]
    commands: Vec<String>,

    #[command(flatten)]
    target: Target,
}

/// Which plugin, granted what, in which project: shared by `call` and
/// `test`.
#[derive(Args)]
pub(crate) struct Target {
    /// The grants file to apply, read as a session reads
    /// <project>/env/envhost.toml [default: nothing is granted].
    #[arg(long, value_name = "FILE")]
    grants: Option<PathBuf>,

    /// The project directory its grants are relative to.
    #[arg(long, value_name = "DIR", default_value = ".")]
    project: PathBuf,

    /// The time each command may take.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "120s")]
    timeout: Duration,

    #[command(flatten)]
    plugins: PluginArgs,
}

#[derive(Args)]
pub(crate) struct TestArgs {
    /// The plugin file; the environment is named after its stem.
    #[arg(value_name = "FILE.wasm")]
    file: PathBuf,

    /// The session files (`.session`) to run, each on a fresh instance.
    #[arg(value_name = "SESSION", required = true)]
    sessions: Vec<PathBuf>,

    /// Rewrite the expected blocks that differ with what the plugin said.
    #[arg(long)]
    bless: bool,

    #[command(flatten)]
    target: Target,
}

/// Arguments of `envhost new`.
#[derive(Args)]
pub(crate) struct NewArgs {
    /// The plugin's name: the environment's name, the .wasm file's stem
    /// and the package's name (lowercase letters, digits and `_`, starting
    /// with a letter).
    name: String,

    /// The language to write it in.
    #[arg(long, value_enum)]
    lang: Lang,

    /// The folder to create (it must not exist, or be empty) [default:
    /// ./NAME].
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// A language `envhost new` writes projects in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Lang {
    /// Rust, with the envhost SDK vendored (cargo, wasm32-wasip2).
    Rust,
    /// Python, with componentize-py.
    Python,
    /// JavaScript, with jco and componentize-js.
    Js,
}

// --- into envhost-tools' plain arguments ------------------------------------------

impl Command {
    /// The distribution command these flags name.
    pub(crate) fn into_plain(self) -> distribution::Command {
        use distribution::Command as Plain;
        match self {
            Command::Add(args) => Plain::Add(args.into_plain()),
            Command::Install(args) => Plain::Install(distribution::InstallArgs {
                frozen: args.frozen,
                offline: args.offline,
                project: args.project.into_plain(),
                network: args.network.into_plain(),
            }),
            Command::Update(args) => Plain::Update(distribution::UpdateArgs {
                name: args.name,
                dry_run: args.dry_run,
                project: args.project.into_plain(),
                network: args.network.into_plain(),
            }),
            Command::Verify(args) => Plain::Verify(args.into_plain()),
            Command::Remove(args) => Plain::Remove(distribution::RemoveArgs {
                name: args.name,
                project: args.project.into_plain(),
            }),
            Command::List(args) => Plain::List(args.into_plain()),
            Command::Publish(args) => Plain::Publish(distribution::PublishArgs {
                file: args.file,
                target: args.target,
                sign_key: args.sign_key,
                network: args.network.into_plain(),
            }),
        }
    }
}

impl AddArgs {
    fn into_plain(self) -> distribution::AddArgs {
        distribution::AddArgs {
            source: self.source,
            name: self.name,
            verify_key: self.verify_key,
            verify_identity: self.verify_identity,
            verify_issuer: self.verify_issuer,
            project: self.project.into_plain(),
            network: self.network.into_plain(),
        }
    }
}

impl ProjectArgs {
    fn into_plain(self) -> distribution::ProjectArgs {
        distribution::ProjectArgs {
            settings: self.plugins.settings(self.plugin_config),
            project: self.project,
        }
    }
}

impl NetworkArgs {
    fn into_plain(self) -> distribution::NetworkArgs {
        distribution::NetworkArgs {
            registry_token_file: self.registry_token_file,
            insecure_registry: self.insecure_registry,
            registry_auth_host: self.registry_auth_host,
            registry_stall_timeout: self.registry_stall_timeout,
            registry_deadline: self.registry_deadline,
        }
    }
}

impl Target {
    fn into_plain(self) -> call::Target {
        call::Target {
            settings: self.plugins.settings(self.grants.clone()),
            grants: self.grants,
            project: self.project,
            timeout: self.timeout,
        }
    }
}

impl CallArgs {
    /// What `envhost call` runs.
    pub(crate) fn into_plain(self) -> call::CallArgs {
        call::CallArgs {
            file: self.file,
            commands: self.commands,
            target: self.target.into_plain(),
        }
    }
}

impl TestArgs {
    /// What `envhost test` runs.
    pub(crate) fn into_plain(self) -> plugin_test::TestArgs {
        plugin_test::TestArgs {
            file: self.file,
            sessions: self.sessions,
            bless: self.bless,
            target: self.target.into_plain(),
        }
    }
}

impl NewArgs {
    /// What `envhost new` writes.
    pub(crate) fn into_plain(self) -> new_project::NewArgs {
        new_project::NewArgs {
            name: self.name,
            lang: match self.lang {
                Lang::Rust => new_project::Lang::Rust,
                Lang::Python => new_project::Lang::Python,
                Lang::Js => new_project::Lang::Js,
            },
            dir: self.dir,
        }
    }
}
