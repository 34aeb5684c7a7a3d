//! Editor benchmark: not a timed test, a measurement.
//!
//! 1. Screen generation with 5 views over one 100,000-line file (the views
//!    re-read and re-match the file on every screen). Target: < 5 ms.
//! 2. `search` over 10,000 files (~100 MB) beside `grep -rn` on the same
//!    tree, both producing every match. Target: ratio ≤ 1×.
//! 3. `edit` of one line in a 1,000-line and a 100,000-line file (read,
//!    verify, check that the file is unchanged and nobody else writes it,
//!    write, switch, flush the folder), then the screen (the view re-reads
//!    the file), beside the floor in the same run: read the file, write a
//!    temporary file, flush it, rename it; read it again. The floor's
//!    folder flush is timed apart, for the ratio to a durable floor.
//!
//! Run: `cargo bench --bench editor [-- screen|search|edit]` (release; what
//! the numbers mean) or
//! `cargo bench --profile dev --bench editor` (a quick check that it runs).
//! The search tree is generated once under the target directory and reused.

#[path = "../../envhost/benches/support/stats.rs"]
mod stats;

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use envhost_core::{CancelFlag, CommandContext, Environment};
use envhost_envs::{EditorEnvironment, EditorSettings};
use stats::{Summary, millis, summarize};

const FILE_LINES: usize = 100_000;
const SCREEN_ROUNDS: usize = 200;
const TREE_FILES: usize = 10_000;
const FILE_BYTES: usize = 10 * 1024;
const SEARCH_ROUNDS: usize = 5;

fn main() {
    let data = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("editor-bench");
    println!("editor benchmark (data in {})", data.display());
    // `cargo bench --bench editor -- edit` runs only the parts named.
    let named: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted = |part: &str| named.is_empty() || named.iter().any(|n| n == part);
    if wanted("screen") {
        bench_screen(&data.join("screen"));
    }
    if wanted("search") {
        bench_search(&data.join("search"));
    }
    if wanted("edit") {
        bench_edit(&data.join("edit"));
    }
}

const EDIT_ROUNDS: usize = 200;
const BIG_EDIT_ROUNDS: usize = 40;

fn bench_edit(project: &Path) {
    edit_rounds(project, 1000, EDIT_ROUNDS);
    edit_rounds(project, FILE_LINES, BIG_EDIT_ROUNDS);
    writers_check(project);
}

/// The edit's look for other writers, both ways, alternating: the kernel's
/// read lease (what an edit asks first) and the search of `/proc` (what it
/// did before, and still does to name writers when there are some).
fn writers_check(project: &Path) {
    use envhost_files::writers;
    use std::os::unix::fs::MetadataExt;
    let file = project.join("writers.txt");
    fs::write(&file, "x").expect("write");
    let reading = fs::File::open(&file).expect("open");
    let metadata = reading.metadata().expect("metadata");
    let (mut leases, mut searches) = (Vec::new(), Vec::new());
    for _ in 0..EDIT_ROUNDS / 4 {
        let started = Instant::now();
        std::hint::black_box(writers::lease_check(&reading));
        leases.push(started.elapsed());
        let started = Instant::now();
        std::hint::black_box(writers::others_writing(metadata.dev(), metadata.ino()));
        searches.push(started.elapsed());
    }
    let processes = fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
                .count()
        })
        .unwrap_or(0);
    let lease = summarize(&leases).median;
    let search = summarize(&searches).median;
    println!(
        "look for other writers ({processes} processes, medians): read lease {:.1} µs ({:?}), search of /proc {:.3} ms; ratio {:.4}x",
        lease.as_secs_f64() * 1e6,
        writers::lease_check(&reading),
        millis(search),
        lease.as_secs_f64() / search.as_secs_f64().max(f64::MIN_POSITIVE)
    );
}

/// Edits one line of a `lines`-line file through a view, then draws the
/// screen (the view re-reads the file), `rounds` times; beside the floor
/// in the same run: read the file, write a temporary file, flush it, rename
/// it, read it again. The flush of the folder that makes the floor's rename
/// durable (the editor flushes it too) is timed on its own, right after.
fn edit_rounds(project: &Path, lines: usize, rounds: usize) {
    fs::create_dir_all(project).expect("bench folder");
    let file = project.join(format!("edit{lines}.py"));
    let text: String = (1..=lines).map(|n| format!("line {n}\n")).collect();
    fs::write(&file, &text).expect("write the edit file");
    let name = file
        .file_name()
        .and_then(|n| n.to_str())
        .expect("file name");
    let mut editor = editor_on(project);
    let view = editor
        .handle_command(&format!("view {name} /^line 1$/ /^line 5$/"), &context())
        .expect("view");
    assert!(view.success, "{}", view.output);
    editor.screen().expect("screen");
    let mut edits = Vec::with_capacity(rounds);
    let mut screens = Vec::with_capacity(rounds);
    let mut edit_floors = Vec::with_capacity(rounds);
    let mut view_floors = Vec::with_capacity(rounds);
    let mut folder_flushes = Vec::with_capacity(rounds);
    let temp = project.join(format!(".{name}.floor.tmp"));
    // Editor and floor alternate, so that the machine's load falls on both.
    for round in 0..rounds {
        let command = format!("edit {name} 3-3\nvalue {round}");
        let started = Instant::now();
        let response = editor.handle_command(&command, &context()).expect("edit");
        edits.push(started.elapsed());
        assert!(response.success, "{}", response.output);
        // The orchestrator draws the screen after every command; the views
        // take their new lines from it.
        let started = Instant::now();
        std::hint::black_box(editor.screen().expect("screen"));
        screens.push(started.elapsed());

        let started = Instant::now();
        let mut bytes = fs::read(&file).expect("read");
        bytes.extend_from_slice(format!("{round}").as_bytes());
        let mut out = fs::File::create(&temp).expect("temp");
        out.write_all(&bytes).expect("write");
        out.sync_all().expect("sync");
        fs::rename(&temp, &file).expect("rename");
        edit_floors.push(started.elapsed());
        let started = Instant::now();
        fs::File::open(project)
            .and_then(|folder| folder.sync_all())
            .expect("flush the folder");
        folder_flushes.push(started.elapsed());
        let started = Instant::now();
        std::hint::black_box(fs::read(&file).expect("read again"));
        view_floors.push(started.elapsed());
        let len = bytes.len() - format!("{round}").len();
        bytes.truncate(len);
        // Flushed before the next round, so that the disk writes of this
        // restore (not timed) do not fall into the editor's next edit.
        let mut restored = fs::File::create(&file).expect("restore");
        restored.write_all(&bytes).expect("restore");
        restored.sync_all().expect("flush the restore");
    }
    let edit = millis(summarize(&edits).median);
    let screen = millis(summarize(&screens).median);
    let edit_floor = millis(summarize(&edit_floors).median);
    let view_floor = millis(summarize(&view_floors).median);
    let folder_flush = millis(summarize(&folder_flushes).median);
    println!(
        "edit + view: one line of a {lines}-line file ({} rounds, medians): editor edit {edit:.3} ms + screen {screen:.3} ms = {:.3} ms; \
         floor (read, write a temporary file, flush, rename; read again) {edit_floor:.3} + {view_floor:.3} = {:.3} ms; \
         ratio edit {:.2}x, edit + view {:.2}x; \
         the floor's folder flush {folder_flush:.3} ms: ratio to the durable floor, edit {:.2}x, edit + view {:.2}x",
        rounds,
        edit + screen,
        edit_floor + view_floor,
        edit / edit_floor.max(f64::MIN_POSITIVE),
        (edit + screen) / (edit_floor + view_floor).max(f64::MIN_POSITIVE),
        edit / (edit_floor + folder_flush).max(f64::MIN_POSITIVE),
        (edit + screen) / (edit_floor + folder_flush + view_floor).max(f64::MIN_POSITIVE)
    );
}

fn context() -> CommandContext {
    CommandContext::new(Duration::from_secs(600), CancelFlag::new())
}

fn editor_on(project: &Path) -> EditorEnvironment {
    let settings = EditorSettings {
        project_dir: project.canonicalize().expect("canonical bench project"),
        allow_outside_project: false,
    };
    EditorEnvironment::new(settings).expect("editor help is valid")
}

/// A 100,000-line Python-like module: a function every 20 lines, a class
/// every 1,000.
fn write_big_module(path: &Path) {
    let mut text = String::with_capacity(FILE_LINES * 40);
    let mut line = 1;
    while line <= FILE_LINES {
        if line % 1000 == 1 {
            text.push_str(&format!("class Section{}:\n", line / 1000));
        } else if line % 20 == 1 {
            text.push_str(&format!("def function_{line}(value, scale=2):\n"));
        } else if line % 20 == 0 {
            text.push('\n');
        } else {
            text.push_str(&format!("    value = value * scale + {line}  # step\n"));
        }
        line += 1;
    }
    fs::write(path, text).expect("write the big module");
}

fn bench_screen(project: &Path) {
    fs::create_dir_all(project).expect("bench folder");
    let module = project.join("big.py");
    if !module.exists() {
        write_big_module(&module);
    }
    let bytes = fs::metadata(&module).map(|m| m.len()).unwrap_or(0);
    let mut editor = editor_on(project);
    let views = [
        r"view big.py /^def function_21\(/ /^def /",
        r"view big.py /^def function_50021\(/ /^$/ middle",
        r"view big.py /^def function_99961\(/ /^def |^class / near the end",
        r"view big.py /^class Section\d+/ /^class / whole class",
        r"view big.py /^def function_7\d+41\(/ /^\s*$/",
    ];
    for command in views {
        let response = editor
            .handle_command(command, &context())
            .expect("view command");
        assert!(response.success, "{command}: {}", response.output);
    }
    let first = editor.screen().expect("screen").content;
    let shown_lines = first.lines().count();
    let mut times = Vec::with_capacity(SCREEN_ROUNDS);
    for _ in 0..SCREEN_ROUNDS {
        let started = Instant::now();
        let screen = editor.screen().expect("screen");
        times.push(started.elapsed());
        std::hint::black_box(screen);
    }
    let Summary {
        median, min: best, ..
    } = summarize(&times);
    println!(
        "screen: 5 views over a {FILE_LINES}-line file ({:.1} MB, {shown_lines} screen lines): median {:.3} ms, best {:.3} ms over {SCREEN_ROUNDS} screens (target < 5 ms)",
        bytes as f64 / 1e6,
        millis(median),
        millis(best)
    );
}

/// 10,000 files of ~10 KiB in 100 folders; about one line in 60 has a TODO.
fn write_tree(root: &Path) {
    let marker = root.join(".complete");
    if marker.exists() {
        return;
    }
    let _ = fs::remove_dir_all(root);
    let words = [
        "alpha", "beta", "gamma", "delta", "value", "index", "buffer", "result", "config", "parse",
        "render", "window", "thread", "socket", "stream", "update",
    ];
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for file in 0..TREE_FILES {
        let folder = root.join(format!("pkg{:02}/mod{:02}", file % 10, (file / 10) % 10));
        fs::create_dir_all(&folder).expect("bench tree folder");
        let mut text = String::with_capacity(FILE_BYTES + 128);
        let mut line = 0;
        while text.len() < FILE_BYTES {
            line += 1;
            let roll = next();
            if roll % 60 == 0 {
                text.push_str(&format!("    # TODO: revisit item {line} in file {file}\n"));
            } else {
                let a = words[(roll >> 8) as usize % words.len()];
                let b = words[(roll >> 16) as usize % words.len()];
                text.push_str(&format!(
                    "    {a}_{line} = compute_{b}({a}, {}) + {line}\n",
                    roll % 997
                ));
            }
        }
        let mut handle =
            fs::File::create(folder.join(format!("file{file:05}.py"))).expect("bench file");
        handle.write_all(text.as_bytes()).expect("write bench file");
    }
    fs::write(marker, b"").expect("marker");
}

fn bench_search(root: &Path) {
    let started = Instant::now();
    write_tree(root);
    let generated = started.elapsed();
    let tree_bytes: u64 = walk_bytes(root);
    println!(
        "search tree: {TREE_FILES} files, {:.1} MB (ready in {:.1} s)",
        tree_bytes as f64 / 1e6,
        generated.as_secs_f64()
    );
    let mut editor = editor_on(root);
    let cases = [
        ("literal", "TODO", "TODO"),
        (
            "regex",
            r"item \d+ in file 7\d",
            "item [0-9]+ in file 7[0-9]",
        ),
    ];
    for (kind, ours, posix) in cases {
        // Warm the page cache and check both find the same lines.
        let (grep_lines, _) = run_grep(posix, root);
        let response = editor
            .handle_command(&format!("search \"{ours}\""), &context())
            .expect("search");
        let total = reported_total(&response.output);
        assert_eq!(
            total, grep_lines,
            "search and grep -rn disagree on the number of matches for {ours}"
        );
        let mut ours_times = Vec::new();
        let mut grep_times = Vec::new();
        for _ in 0..SEARCH_ROUNDS {
            let started = Instant::now();
            let response = editor
                .handle_command(&format!("search \"{ours}\""), &context())
                .expect("search");
            ours_times.push(started.elapsed());
            std::hint::black_box(response);
            let (_, elapsed) = run_grep(posix, root);
            grep_times.push(elapsed);
        }
        let ours_median = summarize(&ours_times).median;
        let grep_median = summarize(&grep_times).median;
        println!(
            "search ({kind}, {grep_lines} matches): editor {:.1} ms, grep -rn {:.1} ms, ratio {:.2}x (target <= 1x)",
            millis(ours_median),
            millis(grep_median),
            ours_median.as_secs_f64() / grep_median.as_secs_f64()
        );
    }
}

/// Runs `grep -rn` with its output read in full (GNU grep stops at the
/// first match when its output is /dev/null, which would not be a fair
/// comparison); returns the number of lines and the time.
fn run_grep(pattern: &str, root: &Path) -> (usize, Duration) {
    let started = Instant::now();
    let mut child = Command::new("grep")
        .args(["-rn", "-E", pattern])
        .arg(root)
        .stdout(Stdio::piped())
        .spawn()
        .expect("run grep");
    let mut output = Vec::new();
    child
        .stdout
        .take()
        .expect("grep stdout")
        .read_to_end(&mut output)
        .expect("read grep output");
    child.wait().expect("wait for grep");
    let elapsed = started.elapsed();
    (output.iter().filter(|&&b| b == b'\n').count(), elapsed)
}

/// The number of matches a search response reports in all.
fn reported_total(output: &str) -> usize {
    let listed = output.lines().filter(|l| l.starts_with("  ")).count();
    match output.lines().find(|l| l.starts_with("... and ")) {
        Some(line) => line
            .split('(')
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(listed),
        None => listed,
    }
}

fn walk_bytes(root: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![root.to_path_buf()];
    while let Some(folder) = stack.pop() {
        let Ok(entries) = fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => stack.push(entry.path()),
                Ok(_) => total += entry.metadata().map(|m| m.len()).unwrap_or(0),
                Err(_) => {}
            }
        }
    }
    total
}
