//! What a command produces on disk: matplotlib figures and PIL images
//! saved as PNG by the python environment, and the `files` list of every
//! response (bash and python, found by a bounded look at the working
//! directory and the project root).
//!
//! The figure tests run python from `target/figures-venv` (matplotlib and
//! Pillow pinned in tests/figures/requirements.txt, installed by
//! scripts/install-figure-libs), or `ENVHOST_FIGURES_PYTHON`. Without it
//! they fail, unless `ENVHOST_SKIP_FIGURES=1` says to skip them.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::harness::{Host, Project, Reply, target_dir};

/// The python that has matplotlib and Pillow, or `None` when the skip is
/// asked for.
pub fn figures_python() -> Option<PathBuf> {
    if std::env::var_os("ENVHOST_SKIP_FIGURES").is_some_and(|v| v == "1") {
        eprintln!("ENVHOST_SKIP_FIGURES=1: the figure test is skipped");
        return None;
    }
    let python = std::env::var_os("ENVHOST_FIGURES_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("figures-venv/bin/python"));
    let has_them = std::process::Command::new(&python)
        .args(["-c", "import matplotlib, PIL"])
        .status()
        .is_ok_and(|status| status.success());
    assert!(
        has_them,
        "{} cannot import matplotlib and PIL: run scripts/install-figure-libs (or set \
         ENVHOST_FIGURES_PYTHON to a python that has them, or ENVHOST_SKIP_FIGURES=1 to skip)",
        python.display()
    );
    Some(python)
}

fn python_host(project: &Project, python: &Path) -> Host {
    Host::builder()
        .arg("--python")
        .arg(python.display().to_string())
        .start(project.path())
}

/// Width and height from a PNG file's IHDR chunk, after checking the
/// signature.
fn png_size(path: &Path) -> (u32, u32) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    png_bytes_size(&bytes)
}

/// [`png_size`] of a PNG's bytes.
pub fn png_bytes_size(bytes: &[u8]) -> (u32, u32) {
    assert!(bytes.len() > 33, "too short for a PNG");
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    assert_eq!(&bytes[12..16], b"IHDR");
    let number = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    // The IHDR's CRC covers its type and data: the header is intact.
    let crc = crc32(&bytes[12..29]);
    assert_eq!(crc, number(29), "IHDR checksum");
    assert!(bytes.ends_with(b"IEND\xaeB`\x82"), "no IEND at the end");
    (number(16), number(20))
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = 0xffff_ffffu32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// `path: size, media type` of each file the answer names.
fn files(reply: &Reply) -> Vec<(String, u64, String)> {
    match reply.0["response"].get("files") {
        None => Vec::new(),
        Some(Value::Array(files)) => files
            .iter()
            .map(|f| {
                (
                    f["path"].as_str().expect("path").to_owned(),
                    f["size"].as_u64().expect("size"),
                    f["media_type"].as_str().expect("media_type").to_owned(),
                )
            })
            .collect(),
        Some(other) => panic!("files must be a list, got {other}"),
    }
}

#[test]
fn matplotlib_figures_shown_or_left_open_are_saved_as_png() {
    let Some(python) = figures_python() else {
        return;
    };
    let project = Project::new();
    let mut host = python_host(&project, &python);
    let reply = host.command(
        "python",
        "import matplotlib.pyplot as plt\n\
         plt.figure(figsize=(4, 3), dpi=50)\n\
         plt.plot([1, 2, 3], [3, 1, 2])\n\
         plt.show()\n\
         fig, ax = plt.subplots(figsize=(2, 1.5), dpi=100)\n\
         ax.bar(['a', 'b'], [1, 2])\n\
         print('drawn')",
    );
    let output = reply.ok();
    assert!(!output.contains("non-interactive"), "{output}");
    assert!(
        output.contains(
            "drawn\n[Figure saved: .envhost/figures/figure-1.png (200 × 150 pixels)]\n\
             [Figure saved: .envhost/figures/figure-2.png (200 × 150 pixels)]\n"
        ),
        "{output}"
    );
    let folder = project.canonical().join(".envhost/figures");
    assert_eq!(png_size(&folder.join("figure-1.png")), (200, 150));
    assert_eq!(png_size(&folder.join("figure-2.png")), (200, 150));
    let named = files(&reply);
    assert_eq!(named.len(), 2, "{named:?}");
    for (i, (path, size, media_type)) in named.iter().enumerate() {
        assert_eq!(path, &format!(".envhost/figures/figure-{}.png", i + 1));
        assert_eq!(
            *size,
            std::fs::metadata(folder.join(&path[17..])).unwrap().len()
        );
        assert_eq!(media_type, "image/png");
    }
    let screen = reply.screen("python");
    assert!(
        screen.contains(
            "  .envhost/figures/figure-2.png (200 × 150 pixels)\n  \
             .envhost/figures/figure-1.png (200 × 150 pixels)\n"
        ),
        "{screen}"
    );
    // Shown figures are closed: the next command saves nothing again, and
    // the backend is the non-interactive one.
    let reply = host.command("python", "plt.get_backend(), len(plt.get_fignums())");
    assert_eq!(reply.ok(), "('agg', 0)\n");
    assert!(files(&reply).is_empty());
}

#[test]
fn a_pil_image_as_the_last_expression_is_saved() {
    let Some(python) = figures_python() else {
        return;
    };
    let project = Project::new();
    let mut host = python_host(&project, &python);
    let reply = host.command(
        "python",
        "from PIL import Image\nimg = Image.new('CMYK', (33, 17))\nimg",
    );
    assert_eq!(
        reply.ok(),
        "[Figure saved: .envhost/figures/figure-1.png (33 × 17 pixels)]\n"
    );
    let path = project.canonical().join(".envhost/figures/figure-1.png");
    assert_eq!(png_size(&path), (33, 17));
    // Anything else is shown as before, `_` included.
    assert_eq!(host.command("python", "_.size").ok(), "(33, 17)\n");
}

#[test]
fn without_matplotlib_nothing_is_saved() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let reply = host.command("python", "import sys\n'matplotlib' in sys.modules");
    assert_eq!(reply.ok(), "False\n");
    assert!(!project.path().join(".envhost/figures").exists());
}

#[test]
fn a_figures_folder_leading_outside_the_project_is_not_used() {
    let Some(python) = figures_python() else {
        return;
    };
    let project = Project::new();
    let elsewhere = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(project.path().join(".envhost")).unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), project.path().join(".envhost/figures")).unwrap();
    let mut host = python_host(&project, &python);
    let reply = host.command(
        "python",
        "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()",
    );
    let output = reply.ok();
    assert!(
        output.contains("leads outside the project; figures are not saved"),
        "{output}"
    );
    assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
}

#[test]
fn files_a_bash_command_writes_are_named_once() {
    let project = Project::new();
    // An hour old: a file written in the clock tick before a command
    // starts may be named by it (the kernel may stamp it finer than the
    // coarse clock the start is read from), which is not what this checks.
    let old = std::fs::File::options()
        .write(true)
        .open(project.write("old.txt", "old"))
        .expect("open old.txt");
    old.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(3600))
        .expect("age old.txt");
    drop(old);
    let mut host = Host::start(project.path());
    let reply = host.command(
        "bash",
        "printf 'a,b\\n' > data.csv && echo hi > notes.txt && mkdir -p out && printf '{}' > out/r.json",
    );
    reply.ok();
    assert_eq!(
        files(&reply),
        [
            ("data.csv".to_owned(), 4, "text/csv".to_owned()),
            ("notes.txt".to_owned(), 3, "text/plain".to_owned()),
            ("out/r.json".to_owned(), 2, "application/json".to_owned()),
        ]
    );
    // A command that writes nothing names nothing, and the field is absent.
    let reply = host.command("bash", "cat notes.txt");
    assert_eq!(reply.ok(), "hi\n");
    assert!(reply.0["response"].get("files").is_none(), "{}", reply.0);
    // A change in the working directory after cd.
    let reply = host.command("bash", "cd out && echo more >> r.json");
    reply.ok();
    assert_eq!(
        files(&reply),
        [("out/r.json".to_owned(), 7, "application/json".to_owned())]
    );
}

#[test]
fn files_never_name_the_transcript_the_host_keeps_in_the_project() {
    let project = Project::new();
    let mut host = Host::builder()
        .arg("--transcript")
        .arg(
            project
                .path()
                .join("transcript.jsonl")
                .display()
                .to_string(),
        )
        .start(project.path());
    for _ in 0..3 {
        let reply = host.command("bash", "echo hi > notes.txt");
        reply.ok();
        assert_eq!(
            files(&reply),
            [("notes.txt".to_owned(), 3, "text/plain".to_owned())],
            "{}",
            reply.0
        );
    }
    assert!(project.read("transcript.jsonl").contains("notes.txt"));
}

#[test]
fn files_python_writes_and_saved_output_are_named() {
    let project = Project::new();
    let mut host = Host::builder()
        .arg("--output-cap")
        .arg("1000")
        .start(project.path());
    let reply = host.command("python", "open('result.txt', 'w').write('42')");
    assert_eq!(
        files(&reply),
        [("result.txt".to_owned(), 2, "text/plain".to_owned())]
    );
    let reply = host.request(&json!({
        "type": "command", "environment": "bash", "command": "seq 1 5000"
    }));
    let named = files(&reply);
    assert_eq!(named.len(), 1, "{}", reply.0);
    assert!(named[0].0.starts_with(".envhost/output/"), "{named:?}");
    assert!(named[0].1 > 1000, "{named:?}");
}

#[test]
fn the_repl_prints_image_paths_and_opens_them_with_the_desktops_viewer() {
    let project = Project::new();
    let tools = tempfile::tempdir().expect("temp dir");
    let record = tools.path().join("opened.txt");
    let opener = tools.path().join("xdg-open");
    std::fs::write(
        &opener,
        format!("#!/bin/sh\necho \"$1\" >> '{}'\n", record.display()),
    )
    .unwrap();
    std::fs::set_permissions(&opener, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        tools.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = std::process::Command::new(crate::harness::envhost_binary())
        .args(["repl", "--open-figures", "--project"])
        .arg(project.path())
        .env("PATH", path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start envhost repl");
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(
            b"bash: printf '\\x89PNG\\r\\n\\x1a\\n' > dot.png && echo text > notes.txt\n:quit\n",
        )
        .expect("write the session");
    let output = child.wait_with_output().expect("the REPL's output");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let image = project.canonical().join("dot.png");
    assert!(
        stdout.contains(&format!("image: {}\n", image.display())),
        "{stdout}"
    );
    assert_eq!(stdout.matches("image: ").count(), 1, "{stdout}");
    // The viewer runs in the background: give it a moment to say it ran.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !record.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(
        std::fs::read_to_string(&record).expect("xdg-open was run"),
        format!("{}\n", image.display())
    );
}

#[test]
fn files_the_editor_writes_are_named() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let reply = host.command("editor", "create src/app.py\nprint('hi')\n");
    reply.ok();
    assert_eq!(
        files(&reply),
        [("src/app.py".to_owned(), 12, "text/plain".to_owned())]
    );
    host.command("editor", "view src/app.py /^print/ /^print/")
        .ok();
    let reply = host.command("editor", "edit src/app.py 1-1\nprint('hello')\n");
    reply.ok();
    assert_eq!(
        files(&reply),
        [("src/app.py".to_owned(), 15, "text/plain".to_owned())]
    );
}

#[test]
fn fifos_and_symlinks_a_command_makes_are_not_named() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let reply = host.command(
        "bash",
        "mkfifo pipe.png && ln -s /etc/hostname link.png && mkdir -p d && ln -s / d/root",
    );
    reply.ok();
    assert!(files(&reply).is_empty(), "{}", reply.0);
}
