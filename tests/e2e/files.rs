//! Moving files (`read_file` / `write_file`) through the real binary: any
//! bytes, chunks of up to 8 MiB, 50 MiB files in bounded memory, writes
//! that appear whole, and paths that stay inside the project.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::harness::{Host, Project};

const CHUNK: usize = 8 * 1024 * 1024;

fn write(host: &mut Host, path: &str, content: &[u8], append: bool, more: bool) -> Value {
    host.send(&json!({
        "type": "write_file", "path": path, "content_base64": STANDARD.encode(content),
        "append": append, "more": more,
    }));
    host.recv()
}

fn read(host: &mut Host, path: &str, offset: u64, length: Option<u64>) -> Value {
    let mut request = json!({"type": "read_file", "path": path, "offset": offset});
    if let Some(length) = length {
        request["length"] = json!(length);
    }
    host.send(&request);
    host.recv()
}

fn content(answer: &Value) -> Vec<u8> {
    assert_eq!(answer["type"], "file", "{answer}");
    STANDARD
        .decode(answer["content_base64"].as_str().expect("content_base64"))
        .expect("valid base64")
}

/// Reads a whole file chunk by chunk, as a client does.
fn read_all(host: &mut Host, path: &str) -> Vec<u8> {
    let mut bytes = Vec::new();
    loop {
        let answer = read(host, path, bytes.len() as u64, None);
        let chunk = content(&answer);
        assert!(chunk.len() <= CHUNK, "a chunk of {} bytes", chunk.len());
        bytes.extend_from_slice(&chunk);
        if answer["eof"] == true {
            assert_eq!(answer["size"], bytes.len() as u64);
            return bytes;
        }
        assert!(!chunk.is_empty(), "an empty chunk before the end: {answer}");
    }
}

fn refused(answer: &Value, reason: &str, fragment: &str) {
    assert_eq!(answer["type"], "error", "{answer}");
    assert_eq!(answer["reason"], reason, "{answer}");
    let message = answer["message"].as_str().expect("message");
    assert!(message.contains(fragment), "{message:?} lacks {fragment:?}");
}

/// Deterministic bytes that do not compress or repeat (xorshift).
fn noise(size: usize) -> Vec<u8> {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..size)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

fn peak_memory_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .expect("VmHWM in /proc/PID/status")
}

#[test]
fn every_byte_value_round_trips() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let mut bytes: Vec<u8> = (0..=255u8).cycle().take(3 * 256).collect();
    bytes.extend_from_slice(b"\r\n\0\xff\xfe");
    let answer = write(&mut host, "data/every-byte.bin", &bytes, false, false);
    assert_eq!(
        answer,
        json!({"type": "file_written", "path": "data/every-byte.bin", "size": bytes.len(), "complete": true})
    );
    assert_eq!(
        std::fs::read(project.path().join("data/every-byte.bin")).unwrap(),
        bytes
    );
    assert_eq!(read_all(&mut host, "data/every-byte.bin"), bytes);
    // An absolute path inside the project names the same file.
    let absolute = project.canonical().join("data/every-byte.bin");
    assert_eq!(read_all(&mut host, absolute.to_str().unwrap()), bytes);
    // Offsets and lengths.
    let middle = read(&mut host, "data/every-byte.bin", 250, Some(10));
    assert_eq!(content(&middle), bytes[250..260]);
    assert_eq!(
        (middle["offset"].as_u64(), middle["eof"].as_bool()),
        (Some(250), Some(false))
    );
    // An empty file is one empty chunk.
    write(&mut host, "empty", b"", false, false);
    let empty = read(&mut host, "empty", 0, None);
    assert_eq!(
        (content(&empty).len(), empty["eof"].as_bool()),
        (0, Some(true))
    );
    // ids come back.
    host.send(&json!({"type": "read_file", "path": "empty", "id": "r-1"}));
    assert_eq!(host.recv()["id"], "r-1");
}

#[test]
fn fifty_mebibytes_move_in_chunks_in_bounded_memory() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    // One full chunk each way first: the host's peak with a chunk in flight.
    let one = noise(CHUNK);
    write(&mut host, "one-chunk.bin", &one, false, false);
    assert!(read_all(&mut host, "one-chunk.bin") == one);
    let peak_with_one_chunk = peak_memory_kib(host.pid());
    let size = 50 * 1024 * 1024;
    let bytes = noise(size);
    let chunks: Vec<&[u8]> = bytes.chunks(CHUNK).collect();
    for (index, chunk) in chunks.iter().enumerate() {
        let last = index + 1 == chunks.len();
        let answer = write(&mut host, "big/noise.bin", chunk, index > 0, !last);
        assert_eq!(answer["type"], "file_written", "{answer}");
        assert_eq!(answer["complete"], last, "{answer}");
        assert_eq!(answer["size"], ((index * CHUNK) + chunk.len()) as u64);
        if !last {
            assert!(
                !project.path().join("big/noise.bin").exists(),
                "visible before the last chunk"
            );
        }
    }
    assert!(std::fs::read(project.path().join("big/noise.bin")).unwrap() == bytes);
    assert!(read_all(&mut host, "big/noise.bin") == bytes);
    // The host holds a chunk at a time (a line of ~11 MB, parsed, and its
    // bytes), never the file: moving 50 MiB raises its peak by less than
    // a chunk over moving one chunk.
    let peak = peak_memory_kib(host.pid());
    assert!(
        peak < peak_with_one_chunk + 8 * 1024,
        "the host's peak memory grew from {peak_with_one_chunk} KiB (one chunk) to {peak} KiB (50 MiB)"
    );
}

#[test]
fn a_chunked_write_replaces_the_old_file_all_at_once_and_keeps_its_mode() {
    use std::os::unix::fs::PermissionsExt;
    let project = Project::new();
    let target = project.write("run.sh", "old\n");
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o750)).unwrap();
    let mut host = Host::start(project.path());
    let first = write(&mut host, "run.sh", b"echo ", false, true);
    assert_eq!(first["complete"], false);
    assert_eq!(project.read("run.sh"), "old\n");
    // Other requests go on meanwhile.
    assert_eq!(host.command("bash", "cat run.sh").ok(), "old\n");
    write(&mut host, "run.sh", b"new\n", true, false);
    assert_eq!(project.read("run.sh"), "echo new\n");
    assert_eq!(
        std::fs::metadata(&target).unwrap().permissions().mode() & 0o777,
        0o750
    );
    let leftovers: Vec<_> = std::fs::read_dir(project.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains(".envhost-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    refused(
        &write(&mut host, "run.sh", b"x", true, false),
        "no_write_in_progress",
        "without \"append\"",
    );
}

#[test]
fn an_unfinished_write_leaves_nothing_behind_at_shutdown() {
    let project = Project::new();
    project.write("kept.txt", "original\n");
    let mut host = Host::start(project.path());
    write(&mut host, "kept.txt", b"half of a new", false, true);
    write(&mut host, "new/never.txt", b"half", false, true);
    let (status, _) = host.finish();
    assert!(status.success());
    assert_eq!(project.read("kept.txt"), "original\n");
    assert!(!project.path().join("new/never.txt").exists());
    let names: Vec<String> = walk(project.path());
    assert!(
        names.iter().all(|name| !name.contains(".envhost-")),
        "{names:?}"
    );
}

fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        names.push(entry.file_name().to_string_lossy().into_owned());
        if entry.file_type().unwrap().is_dir() {
            names.extend(walk(&entry.path()));
        }
    }
    names
}

#[test]
fn paths_outside_the_project_and_odd_files_are_refused_with_a_reason() {
    let project = Project::new();
    let outside = Project::new();
    outside.write("secret", "secret\n");
    std::os::unix::fs::symlink(outside.path(), project.path().join("escape")).unwrap();
    std::fs::create_dir(project.path().join("folder")).unwrap();
    nix::unistd::mkfifo(&project.path().join("pipe"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let mut host = Host::start(project.path());
    let secret = outside.canonical().join("secret");
    let secret = secret.to_str().unwrap();
    refused(
        &read(&mut host, "missing", 0, None),
        "not_found",
        "does not exist",
    );
    refused(
        &read(&mut host, "folder", 0, None),
        "is_directory",
        "is a folder",
    );
    refused(
        &read(&mut host, "pipe", 0, None),
        "not_a_file",
        "not a regular file",
    );
    refused(
        &read(&mut host, "../x", 0, None),
        "outside_project",
        "--allow-outside-project",
    );
    refused(
        &read(&mut host, secret, 0, None),
        "outside_project",
        "absolute path outside",
    );
    refused(
        &read(&mut host, "escape/secret", 0, None),
        "outside_project",
        "symlink",
    );
    refused(
        &write(&mut host, "escape/planted", b"x", false, false),
        "outside_project",
        "symlink",
    );
    refused(
        &write(&mut host, "folder", b"x", false, false),
        "is_directory",
        "is a folder",
    );
    assert!(!outside.path().join("planted").exists());
    // Malformed requests are protocol errors (no reason) and lose nothing.
    host.send_raw(b"{\"type\":\"write_file\",\"path\":\"a\",\"content_base64\":\"%%%\"}\n");
    let answer = host.recv();
    assert_eq!(answer["type"], "error");
    assert!(answer.get("reason").is_none(), "{answer}");
    assert!(answer["message"].as_str().unwrap().contains("base64"));
    assert_eq!(
        host.command("bash", "echo still serving").ok(),
        "still serving\n"
    );
}

#[test]
fn allow_outside_project_lifts_the_rule() {
    let project = Project::new();
    let outside = Project::new();
    let mut host = Host::builder()
        .arg("--allow-outside-project")
        .start(project.path());
    let target = outside.canonical().join("note");
    let answer = write(&mut host, target.to_str().unwrap(), b"hi", false, false);
    assert_eq!(answer["complete"], true, "{answer}");
    assert_eq!(outside.read("note"), "hi");
    assert_eq!(
        content(&read(&mut host, target.to_str().unwrap(), 0, None)),
        b"hi"
    );
}

#[test]
fn the_transcript_records_file_transfers() {
    let project = Project::new();
    let records = Project::new();
    let transcript = records.path().join("t.jsonl");
    let mut host = Host::builder()
        .arg("--transcript")
        .arg(transcript.to_str().unwrap())
        .start(project.path());
    write(&mut host, "a.txt", b"abc", false, false);
    read(&mut host, "a.txt", 0, None);
    read(&mut host, "missing", 0, None);
    host.finish();
    let events: Vec<Value> = std::fs::read_to_string(&transcript)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let find = |name: &str| {
        events
            .iter()
            .find(|event| event["event"] == name)
            .unwrap_or_else(|| panic!("no {name} event in {events:?}"))
            .clone()
    };
    assert_eq!(find("file_written")["bytes"], 3);
    assert_eq!(find("file_read")["bytes"], 3);
    assert_eq!(find("file_refused")["reason"], "not_found");
}
