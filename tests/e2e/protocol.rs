//! The NDJSON contract: shapes, bad input, ordering, ids, shutdown and the
//! transcript, through the real binary.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{Host, Project, Reply};

/// After a bad line, the host must still answer a good one.
fn assert_still_serving(host: &mut Host) {
    let reply = host.screen();
    assert_eq!(reply.kind(), "screen", "host stopped serving: {}", reply.0);
}

fn expect_error(host: &mut Host, raw: &[u8], fragment: &str) -> Value {
    host.send_raw(raw);
    let answer = host.recv();
    assert_eq!(
        answer["type"],
        "error",
        "for {:?}: {answer}",
        String::from_utf8_lossy(raw)
    );
    let message = answer["message"].as_str().expect("error message");
    assert!(
        message.contains(fragment),
        "for {:?}: message {message:?} lacks {fragment:?}",
        String::from_utf8_lossy(raw)
    );
    assert_still_serving(host);
    answer
}

#[test]
fn every_bad_input_gets_a_clear_error_and_the_host_keeps_serving() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    expect_error(&mut host, b"this is not json\n", "invalid JSON");
    expect_error(&mut host, b"{\"type\":\"command\",\n", "invalid JSON");
    expect_error(
        &mut host,
        b"[1,2,3]\n",
        "expected a JSON object, got an array",
    );
    expect_error(
        &mut host,
        b"\"command\"\n",
        "expected a JSON object, got a string",
    );
    expect_error(&mut host, b"42\n", "expected a JSON object, got a number");
    expect_error(&mut host, b"{}\n", "missing field \"type\"");
    expect_error(
        &mut host,
        b"{\"type\":7}\n",
        "field \"type\" must be a string",
    );
    expect_error(
        &mut host,
        b"{\"type\":\"launch\"}\n",
        "unknown type \"launch\"",
    );
    expect_error(
        &mut host,
        b"{\"type\":\"command\",\"command\":\"ls\"}\n",
        "missing field \"environment\"",
    );
    expect_error(
        &mut host,
        b"{\"type\":\"command\",\"environment\":\"bash\"}\n",
        "missing field \"command\"",
    );
    expect_error(
        &mut host,
        b"{\"type\":\"command\",\"environment\":[\"bash\"],\"command\":\"ls\"}\n",
        "field \"environment\" must be a string, got an array",
    );
    expect_error(
        &mut host,
        b"{\"type\":\"command\",\"environment\":\"bash\",\"command\":{\"x\":1}}\n",
        "field \"command\" must be a string, got an object",
    );
    expect_error(
        &mut host,
        b"{\"type\":\"command\",\"environment\":\"bash\",\"command\":\"ls\",\"timeout_ms\":-5}\n",
        "\"timeout_ms\" must be a whole number",
    );
    expect_error(
        &mut host,
        b"{\"type\":\"command\",\"environment\":\"bash\",\"command\":\"ls\",\"timeout\":5}\n",
        "unknown field \"timeout\"",
    );
    expect_error(
        &mut host,
        b"{\"type\":\"command\",\xff\xfe}\n",
        "invalid UTF-8 at byte offset 18",
    );
    let (status, _) = host.finish();
    assert!(status.success());
}

#[test]
fn a_line_over_the_size_cap_is_skipped_in_bounded_memory() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    // 17 MiB of JSON string, over the 16 MiB cap.
    let mut line = b"{\"type\":\"command\",\"environment\":\"bash\",\"command\":\"".to_vec();
    line.extend(std::iter::repeat_n(b'x', 17 * 1024 * 1024));
    line.extend_from_slice(b"\"}\n");
    host.send_raw(&line);
    let answer = host.recv();
    assert_eq!(answer["type"], "error");
    let message = answer["message"].as_str().unwrap();
    assert!(message.starts_with("line too long:"), "{message}");
    assert!(message.contains("the line was skipped"), "{message}");
    assert_still_serving(&mut host);
}

#[test]
fn unknown_environment_is_a_failed_response_listing_the_available_ones() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let reply = host.command("cobol", "DISPLAY 'HI'");
    assert_eq!(reply.kind(), "response");
    let output = reply.failed();
    assert!(
        output.starts_with("Unknown environment: cobol\nAvailable: "),
        "{output}"
    );
    let available = output
        .lines()
        .nth(1)
        .unwrap()
        .trim_start_matches("Available: ");
    // Environments' sections, without the first answer's notices.
    let mut names: Vec<String> = reply
        .section_names()
        .into_iter()
        .filter(|name| name != "isolation")
        .collect();
    names.sort();
    if names.is_empty() {
        assert_eq!(available, "(none loaded)");
    } else {
        assert_eq!(available, names.join(", "));
    }
    assert!(reply.0["screen"].is_object());
}

#[test]
fn blank_lines_get_no_answer_and_crlf_is_accepted() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    host.send_raw(b"\n   \n\t\r\n");
    host.expect_silence(Duration::from_millis(300));
    host.send_raw(b"{\"type\":\"screen\",\"id\":\"crlf\"}\r\n");
    let answer = host.recv();
    assert_eq!(answer["type"], "screen");
    assert_eq!(answer["id"], "crlf");
}

#[test]
fn ids_are_echoed_on_responses_screens_and_errors() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    host.send(&json!({"type":"command","environment":"nowhere","command":"x","id":"abc-1"}));
    let answer = host.recv();
    assert_eq!(answer["type"], "response");
    assert_eq!(answer["id"], "abc-1");
    host.send(&json!({"type":"screen","id":17}));
    assert_eq!(host.recv()["id"], 17);
    host.send(&json!({"type":"command","environment":"nowhere","id":2.5}));
    let answer = host.recv();
    assert_eq!(answer["type"], "error");
    assert_eq!(answer["id"], 2.5);
    // Without an id there is no id field.
    host.send(&json!({"type":"screen"}));
    assert!(host.recv().get("id").is_none());
    // An id of the wrong type cannot be echoed; the error says why.
    host.send(&json!({"type":"screen","id":{"nested":true}}));
    let answer = host.recv();
    assert_eq!(answer["type"], "error");
    assert!(answer.get("id").is_none());
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .contains("\"id\" must be a string or a number")
    );
}

#[test]
fn wait_input_interrupt_and_restart_are_parsed_and_bad_ones_refused() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    for (line, fragment) in [
        (
            r#"{"type":"wait"}"#,
            "missing field \"environment\": a wait needs",
        ),
        (
            r#"{"type":"wait","environment":7}"#,
            "field \"environment\" must be a string, got a number",
        ),
        (
            r#"{"type":"wait","environment":"bash","timeout_ms":-1}"#,
            "\"timeout_ms\" must be a whole number of milliseconds from 0",
        ),
        (
            r#"{"type":"wait","environment":"bash","timeout_ms":1.5}"#,
            "got 1.5",
        ),
        (
            r#"{"type":"wait","environment":"bash","text":"x"}"#,
            "unknown field \"text\"; this message type takes: type, environment, id, timeout_ms",
        ),
        (
            r#"{"type":"input","environment":"bash"}"#,
            "missing field \"text\": an input needs \"environment\" and \"text\" strings",
        ),
        (
            r#"{"type":"input","environment":"bash","text":["a"]}"#,
            "field \"text\" must be a string, got an array",
        ),
        (
            r#"{"type":"input","environment":"bash","text":"a","yield_ms":5}"#,
            "unknown field \"yield_ms\"",
        ),
        (
            r#"{"type":"interrupt"}"#,
            "missing field \"environment\": an interrupt needs",
        ),
        (
            r#"{"type":"interrupt","environment":"bash","timeout_ms":5}"#,
            "unknown field \"timeout_ms\"; this message type takes: type, environment, id",
        ),
        (
            r#"{"type":"restart","environment":"bash","force":true}"#,
            "unknown field \"force\"",
        ),
        (
            r#"{"type":"restart","environment":null}"#,
            "field \"environment\" must be a string, got null",
        ),
        (
            r#"{"type":"command","environment":"bash","command":"ls","yield_ms":0}"#,
            "\"yield_ms\" must be a whole number of milliseconds from 1",
        ),
        (
            r#"{"type":"command","environment":"bash","command":"ls","yield_ms":"10"}"#,
            "got \"10\"",
        ),
        (
            r#"{"type":"command","environment":"bash","command":"ls","yield":10}"#,
            "unknown field \"yield\"",
        ),
        (
            r#"{"type":"stop"}"#,
            r#"expected "command", "wait", "input", "interrupt", "restart", "close", "screen", "read_file" or "write_file""#,
        ),
    ] {
        let answer = expect_error(&mut host, format!("{line}\n").as_bytes(), fragment);
        assert!(answer.get("id").is_none());
    }
    // Valid requests while nothing runs: a response saying so, id echoed,
    // and no `running` field.
    for (kind, what) in [
        ("wait", "to wait for"),
        ("input", "to type into"),
        ("interrupt", "to interrupt"),
    ] {
        let mut request = json!({"type": kind, "environment": "bash", "id": kind});
        if kind == "input" {
            request["text"] = json!("John\n");
        }
        let reply = host.request(&request);
        assert_eq!(reply.kind(), "response");
        assert_eq!(reply.0["id"], kind);
        assert!(!reply.running());
        let output = reply.failed();
        assert!(
            output.starts_with(&format!(
                "Nothing is running in bash, so there is nothing {what}"
            )),
            "{output}"
        );
        assert!(!reply.screen("bash").is_empty());
    }
    for kind in ["wait", "input", "interrupt", "restart"] {
        let mut request = json!({"type": kind, "environment": "cobol", "id": 5});
        if kind == "input" {
            request["text"] = json!("John\n");
        }
        let reply = host.request(&request);
        assert_eq!(reply.0["id"], 5);
        assert!(
            reply
                .failed()
                .starts_with("Unknown environment: cobol\nAvailable: ")
        );
    }
    // A command with yield_ms that ends in time is an ordinary answer.
    let reply = host.request(
        &json!({"type":"command","environment":"bash","command":"echo quick","yield_ms":5000}),
    );
    assert_eq!(reply.ok(), "quick\n");
    assert!(!reply.running());
    assert!(reply.0["response"].get("running").is_none());
    let (status, _) = host.finish();
    assert!(status.success());
}

#[test]
fn ids_beyond_64_bits_and_any_json_number_are_echoed_exactly() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    for id in [
        "18446744073709551617",
        "-18446744073709551617",
        "340282366920938463463374607431768211457",
        "1.50",
        "2e3",
        "1e400",
        "0.30000000000000000001",
    ] {
        for line in [
            format!(r#"{{"type":"screen","id":{id}}}"#),
            format!(r#"{{"type":"command","environment":"nowhere","command":"x","id":{id}}}"#),
            format!(r#"{{"type":"wait","environment":"bash","id":{id}}}"#),
            format!(r#"{{"type":"bogus","id":{id}}}"#),
        ] {
            host.send_raw(format!("{line}\n").as_bytes());
            let answer = host.recv_text();
            assert!(
                answer.contains(&format!(r#""id":{id},"#)),
                "{line} -> {answer}"
            );
        }
    }
}

#[test]
fn a_thousand_pipelined_commands_are_answered_in_order() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let mut batch = Vec::new();
    for i in 0..1000 {
        let request = match i % 4 {
            0 => json!({"type":"screen","id":i}),
            1 => {
                json!({"type":"command","environment":"bash","command":format!("echo n{i}"),"id":i})
            }
            2 => json!({"type":"command","environment":"nowhere","command":"x","id":i}),
            _ => json!({"type":"bogus","id":i}),
        };
        batch.extend(serde_json::to_vec(&request).unwrap());
        batch.push(b'\n');
    }
    // One write: the host answers while it is still arriving (the harness
    // drains answers on its own thread, so neither side blocks).
    host.send_raw(&batch);
    for i in 0..1000 {
        let answer = host.recv();
        assert_eq!(answer["id"], i, "answer {i} out of order: {answer}");
        let expected = ["screen", "response", "response", "error"][i % 4];
        assert_eq!(answer["type"], expected);
        if i % 4 == 1 {
            // The real shell's output belongs to this very request.
            assert_eq!(answer["response"]["output"], format!("n{i}\n"), "{answer}");
        }
    }
}

#[test]
fn end_of_input_and_signals_stop_the_host_cleanly() {
    let project = Project::new();
    let host = Host::start(project.path());
    let (status, _) = host.finish();
    assert_eq!(status.code(), Some(0), "EOF");

    for signal in ["TERM", "INT", "HUP"] {
        let mut host = Host::start(project.path());
        assert_still_serving(&mut host);
        host.signal(signal);
        let status = host.wait_exit(Duration::from_secs(30));
        assert_eq!(status.code(), Some(0), "SIG{signal}");
    }
}

#[test]
fn the_transcript_survives_kill_9() {
    let project = Project::new();
    let transcript = project.path().join("session.jsonl");
    let mut host = Host::builder()
        .arg("--transcript")
        .arg(transcript.to_str().unwrap())
        .start(project.path());
    for i in 0..5 {
        host.send(
            &json!({"type":"command","environment":"nowhere","command":format!("cmd {i}"),"id":i}),
        );
        host.recv();
    }
    host.send_raw(b"not json\n");
    host.recv();
    host.signal("KILL");
    host.wait_exit(Duration::from_secs(10));

    let text = std::fs::read_to_string(&transcript).expect("transcript exists");
    assert!(text.ends_with('\n'), "last line is complete");
    let events: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).expect("every line is JSON"))
        .collect();
    assert_eq!(events[0]["event"], "host_started");
    for event in &events {
        let ts = event["ts"].as_str().expect("timestamp");
        assert!(
            ts.ends_with('Z') && ts.contains('T') && ts.len() == 24,
            "UTC ISO-8601: {ts}"
        );
    }
    let finished: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "command_finished")
        .collect();
    assert_eq!(finished.len(), 5);
    assert_eq!(finished[4]["id"], 4);
    assert!(finished[0]["duration_ms"].as_f64().is_some());
    let received: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "command_received")
        .collect();
    assert_eq!(received[2]["command"], "cmd 2");
    assert!(events.iter().any(|e| e["event"] == "protocol_error"));
}

#[test]
fn verbose_mode_narrates_on_stderr_and_keeps_stdout_clean() {
    let project = Project::new();
    let mut host = Host::builder().arg("-v").start(project.path());
    let reply: Reply = host.command("nowhere", "hello");
    assert_eq!(reply.kind(), "response");
    let (status, stderr) = host.finish();
    assert!(status.success());
    assert!(stderr.contains("started (serve)"), "{stderr}");
    assert!(stderr.contains("nowhere <- \"hello\""), "{stderr}");
    assert!(stderr.contains("nowhere -> FAILED"), "{stderr}");
    assert!(stderr.contains("stopping: end of input"), "{stderr}");
}

#[test]
fn a_missing_project_directory_is_a_clear_startup_error() {
    let output = std::process::Command::new(crate::harness::envhost_binary())
        .args(["serve", "--project", "/definitely/not/here"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("the project directory /definitely/not/here cannot be used"),
        "{stderr}"
    );
}
