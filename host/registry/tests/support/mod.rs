//! What the registry tests share: a real OCI registry (the distribution
//! project's reference registry, Debian's `docker-registry`) started on a
//! free loopback port and killed when the test ends, components to publish,
//! and signing keys made by openssl.
//!
//! A missing `docker-registry` or `openssl` fails the tests with the
//! command that installs it, unless `ENVHOST_SKIP_REGISTRY_TESTS=1` says to
//! skip them (and then each test says it was skipped).

#![allow(dead_code)]

pub mod hostile;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use envhost_registry::{BlobCache, Client, Credentials, Options, Sha256};

pub const SKIP_VARIABLE: &str = "ENVHOST_SKIP_REGISTRY_TESTS";

/// A user and password the authenticated registry accepts (a bcrypt hash
/// of "s3cret-for-tests", cost 4).
pub const USER: &str = "tester";
pub const PASSWORD: &str = "s3cret-for-tests";
const HTPASSWD: &str = "tester:$2b$04$I7n6jysb9o6P.sTP3dJpK.EG0ZpXawVlU05AV9XM91ohHx3yxV9oy\n";

/// Whether `program` can be run (`PATH` lookup).
pub fn have(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// `None` (after saying so) when the tests may be skipped; panics with the
/// install command otherwise.
pub fn require(program: &str, install: &str) -> bool {
    if have(program) {
        return true;
    }
    if std::env::var_os(SKIP_VARIABLE).is_some() {
        eprintln!("skipped: `{program}` is not installed and {SKIP_VARIABLE} is set");
        return false;
    }
    panic!(
        "`{program}` is needed by this test: {install} (or set {SKIP_VARIABLE}=1 to skip the registry tests)"
    );
}

/// A running registry; stopped (killed and reaped) on drop.
pub struct Registry {
    child: Child,
    /// `127.0.0.1:PORT` (or another address it was bound to).
    pub address: String,
    /// The registry's storage folder.
    pub storage: PathBuf,
    /// Holds the storage, the config and the log until the registry stops.
    _dir: tempfile::TempDir,
}

pub struct RegistrySettings {
    pub host: String,
    pub htpasswd: bool,
}

impl Default for RegistrySettings {
    fn default() -> Self {
        RegistrySettings {
            host: Ipv4Addr::LOCALHOST.to_string(),
            htpasswd: false,
        }
    }
}

impl Registry {
    /// A registry on 127.0.0.1, or `None` when the tests are skipped.
    pub fn start() -> Option<Registry> {
        Registry::start_with(RegistrySettings::default())
    }

    pub fn start_with(settings: RegistrySettings) -> Option<Registry> {
        if !require("docker-registry", "apt-get install -y docker-registry") {
            return None;
        }
        let dir = tempfile::tempdir().expect("temporary folder");
        let storage = dir.path().join("storage");
        std::fs::create_dir(&storage).expect("storage folder");
        let mut auth = String::new();
        if settings.htpasswd {
            let path = dir.path().join("htpasswd");
            std::fs::write(&path, HTPASSWD).expect("htpasswd");
            auth = format!(
                "auth:\n  htpasswd:\n    realm: envhost-tests\n    path: {}\n",
                path.display()
            );
        }
        let mut last_log = String::new();
        // A port found free may be taken before the registry binds it;
        // then the registry exits and another port is tried.
        for _attempt in 0..5 {
            let port = free_port(&settings.host);
            let address = format!("{}:{port}", settings.host);
            let config = dir.path().join("config.yml");
            std::fs::write(
                &config,
                format!(
                    "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {address}\n{auth}",
                    storage.display()
                ),
            )
            .expect("registry config");
            let log_path = dir.path().join("registry.log");
            let log = std::fs::File::create(&log_path).expect("registry log");
            let mut child = Command::new("docker-registry")
                .arg("serve")
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log handle"))
                .stderr(log)
                .spawn()
                .expect("starting docker-registry");
            if wait_ready(&mut child, &address, Duration::from_secs(30)) {
                return Some(Registry {
                    child,
                    address,
                    storage,
                    _dir: dir,
                });
            }
            let _ = child.kill();
            let _ = child.wait();
            last_log = std::fs::read_to_string(&log_path).unwrap_or_default();
        }
        panic!("docker-registry did not start; its log:\n{last_log}");
    }

    /// Stops the registry now (for the offline tests).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// `oci://ADDRESS/REPOSITORY:TAG`.
    pub fn reference(&self, repository_and_tag: &str) -> String {
        format!("oci://{}/{repository_and_tag}", self.address)
    }

    /// The file the registry keeps a blob in.
    pub fn blob_path(&self, digest: &Sha256) -> PathBuf {
        let hex = digest.hex();
        self.storage
            .join("docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(&hex)
            .join("data")
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Waits until the registry answers `GET /v2/` (200, or 401 when it wants
/// credentials); false if it exits or does not answer in time.
fn wait_ready(child: &mut Child, address: &str, limit: Duration) -> bool {
    let started = Instant::now();
    while started.elapsed() < limit {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        if let Ok(mut stream) = TcpStream::connect(address) {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            let request = format!("GET /v2/ HTTP/1.0\r\nHost: {address}\r\n\r\n");
            let mut answer = String::new();
            if stream.write_all(request.as_bytes()).is_ok()
                && stream.read_to_string(&mut answer).is_ok()
                && (answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.0 401"))
            {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn free_port(host: &str) -> u16 {
    TcpListener::bind((host, 0))
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free port")
}

/// A valid (empty) component whose bytes differ by `label`: the component
/// preamble and one custom section.
pub fn component(label: &str) -> Vec<u8> {
    let mut bytes = b"\0asm\x0d\x00\x01\x00".to_vec();
    let name = b"envhost-test";
    let mut payload = vec![name.len() as u8];
    payload.extend_from_slice(name);
    payload.extend_from_slice(label.as_bytes());
    bytes.push(0); // custom section
    leb128(&mut bytes, payload.len());
    bytes.extend_from_slice(&payload);
    bytes
}

/// A core WebAssembly module (valid, empty): not a component.
pub const CORE_MODULE: &[u8] = b"\0asm\x01\x00\x00\x00";

fn leb128(out: &mut Vec<u8>, mut value: usize) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// A client with its own empty cache in `dir`, using no docker config.
pub fn client(dir: &Path) -> Client {
    client_with(dir, |_| {})
}

pub fn client_with(dir: &Path, change: impl FnOnce(&mut Options)) -> Client {
    let mut options = Options {
        cache: Some(BlobCache::new(dir.join("cache"))),
        credentials: Credentials::DockerConfig {
            dir: Some(dir.join("no-docker-config")),
        },
        stall_timeout: Duration::from_secs(20),
        ..Options::default()
    };
    change(&mut options);
    Client::new(options).expect("client")
}

/// Every file under `dir` (none if it does not exist).
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// An ECDSA P-256 key pair made by openssl: (private PKCS#8 PEM, public PEM).
pub fn key_pair(dir: &Path, name: &str) -> Option<(PathBuf, PathBuf)> {
    if !require("openssl", "apt-get install -y openssl") {
        return None;
    }
    let private = dir.join(format!("{name}.key"));
    let public = dir.join(format!("{name}.pub"));
    let run = |args: &[&str]| {
        let status = Command::new("openssl")
            .args(args)
            .stdout(Stdio::null())
            .status()
            .expect("running openssl");
        assert!(status.success(), "openssl {args:?} failed");
    };
    run(&[
        "genpkey",
        "-algorithm",
        "EC",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-out",
        private.to_str().expect("utf-8 path"),
    ]);
    run(&[
        "pkey",
        "-in",
        private.to_str().expect("utf-8 path"),
        "-pubout",
        "-out",
        public.to_str().expect("utf-8 path"),
    ]);
    Some((private, public))
}

/// A static file server on 127.0.0.1 for `http://` sources: serves `files`
/// (path → bytes; anything else is 404) until dropped.
pub struct FileServer {
    pub address: String,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FileServer {
    pub fn start(files: Vec<(String, Vec<u8>)>) -> FileServer {
        use std::io::{BufRead, BufReader};
        use std::sync::atomic::Ordering;
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let address = listener.local_addr().expect("address").to_string();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            while !stopping.load(Ordering::Relaxed) {
                let stream = match listener.accept() {
                    Ok((stream, _)) => stream,
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(10));
                        continue;
                    }
                };
                let _ = stream.set_nonblocking(false);
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let mut request = String::new();
                let _ = reader.read_line(&mut request);
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                }
                let path = request.split_whitespace().nth(1).unwrap_or("");
                let mut stream = stream;
                match files.iter().find(|(p, _)| p == path) {
                    Some((_, body)) => {
                        let _ = write!(
                            stream,
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            body.len()
                        );
                        let _ = stream.write_all(body);
                    }
                    None => {
                        let _ = stream.write_all(
                            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        );
                    }
                }
            }
        });
        FileServer {
            address,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
