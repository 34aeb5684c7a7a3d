//! The cost of naming the files a command produced, in a big project.
//!
//! A project of 100,000 files (100 folders of 1,000) is made in a
//! temporary folder (removed at the end). bash's working directory is one
//! of those folders. It times, through `envhost serve`: `true` in an empty
//! project (the floor: the same host with nothing to look at), `true` in
//! the big project (a command that writes nothing: the look itself), and a
//! command that changes one file of the big project (named in `files`),
//! and prints medians, p95 and their ratios to the floor.
//!
//! `cargo bench --bench changed_files` (add `--profile dev` for a quick
//! check). `ENVHOST_BENCH_ITERATIONS` sets the iterations per command
//! (default 500).

mod support;

use std::path::Path;
use std::time::Duration;

use support::{Serve, fmt_us, profile, summarize};

const FOLDERS: usize = 100;
const FILES_PER_FOLDER: usize = 1_000;
const WARM_UP: usize = 20;

fn iterations() -> usize {
    std::env::var("ENVHOST_BENCH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500)
}

fn big_project(root: &Path) {
    for folder in 0..FOLDERS {
        let dir = root.join(format!("d{folder:03}"));
        std::fs::create_dir(&dir).expect("create a folder");
        for file in 0..FILES_PER_FOLDER {
            std::fs::write(dir.join(format!("f{file:04}.txt")), b"x").expect("create a file");
        }
    }
}

/// Times `command` (built from the iteration's number) in bash.
fn time(serve: &mut Serve, command: impl Fn(usize) -> String, expect_file: bool) -> Vec<Duration> {
    let mut samples = Vec::new();
    for i in 0..WARM_UP + iterations() {
        let text = command(i);
        let (took, line) = serve.command("bash", &text);
        assert_eq!(
            line.contains("\"files\":[{\"path\":\"d042/f0007.txt\""),
            expect_file,
            "{text}: {line}"
        );
        if i >= WARM_UP {
            samples.push(took);
        }
    }
    samples
}

fn main() {
    println!("changed_files ({} profile)", profile());
    let empty = tempfile::tempdir().expect("temp dir");
    let big = tempfile::tempdir().expect("temp dir");
    big_project(big.path());
    println!(
        "project: {} files in {FOLDERS} folders; bash works in d042",
        FOLDERS * FILES_PER_FOLDER
    );

    let mut serve = Serve::start(empty.path(), &[]);
    let floor = time(&mut serve, |_| "true".into(), false);
    serve.stop();

    let mut serve = Serve::start(big.path(), &[]);
    serve.command("bash", "cd d042");
    let nothing = time(&mut serve, |_| "true".into(), false);
    let one = time(&mut serve, |i| format!("echo {i} > f0007.txt"), true);
    serve.stop();

    let floor = summarize(&floor);
    println!(
        "{:<44} median {:>9}  p95 {:>9}",
        "true, empty project (floor)",
        fmt_us(floor.median),
        fmt_us(floor.p95)
    );
    for (name, samples) in [
        ("true, 100,000-file project (writes nothing)", &nothing),
        ("one file changed, 100,000-file project", &one),
    ] {
        let s = summarize(samples);
        println!(
            "{name:<44} median {:>9}  p95 {:>9}  ratio {:.2}",
            fmt_us(s.median),
            fmt_us(s.p95),
            s.median.as_secs_f64() / floor.median.as_secs_f64()
        );
    }
    let nothing = summarize(&nothing);
    let one = summarize(&one);
    println!(
        "one file changed against writes nothing, same project: ratio {:.2}",
        one.median.as_secs_f64() / nothing.median.as_secs_f64()
    );
}
