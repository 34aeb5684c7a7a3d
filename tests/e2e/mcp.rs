//! `envhost mcp` driven by rmcp's own client, as an MCP client would use
//! it; and by raw JSON-RPC lines for what no client library sends (bad
//! lines, the stateless revision) and for stopping the server.

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientRequest, ProgressNotificationParam, Tool,
};
use rmcp::service::{
    NotificationContext, PeerRequestOptions, RequestHandle, RoleClient, RunningService,
    ServiceError,
};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Value, json};

use crate::harness::{
    ANSWER_DEADLINE, Host, Project, envhost_binary, process_alive, wait_until_dead,
};
use crate::plugins::{events, guest, install, transcript};

/// The client's side: it records the progress notifications it gets.
#[derive(Clone, Default)]
struct Client {
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Client {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(params);
    }
}

/// A running `envhost mcp` and rmcp's client session with it.
struct Mcp {
    runtime: tokio::runtime::Runtime,
    session: Option<RunningService<RoleClient, Client>>,
    client: Client,
    pid: u32,
}

impl Mcp {
    /// `envhost mcp` on `project`, with its own plugin cache and a
    /// transcript (as the plugin tests start `serve`).
    fn start(project: &Project, extra: &[&str]) -> Mcp {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime for the client");
        let mut command = tokio::process::Command::new(envhost_binary());
        command
            .arg("mcp")
            .arg("--project")
            .arg(project.path())
            .arg("--plugin-cache")
            .arg(project.path().join(".plugin-cache"))
            .arg("--transcript")
            .arg(project.path().join("transcript.jsonl"))
            .args(extra);
        let client = Client::default();
        let (session, pid) = runtime.block_on(async {
            let (transport, stderr) = TokioChildProcess::builder(command)
                .stderr(Stdio::piped())
                .spawn()
                .expect("start envhost mcp");
            // Nobody reads the host's stderr otherwise; a full pipe would block it.
            if let Some(mut stderr) = stderr {
                tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await;
                });
            }
            let pid = transport.id().expect("the host's pid");
            let session = tokio::time::timeout(ANSWER_DEADLINE, client.clone().serve(transport))
                .await
                .expect("the MCP handshake within the deadline")
                .expect("the MCP handshake");
            (session, pid)
        });
        Mcp {
            runtime,
            session: Some(session),
            client,
            pid,
        }
    }

    fn session(&self) -> &RunningService<RoleClient, Client> {
        self.session.as_ref().expect("the session is open")
    }

    fn tools(&self) -> Vec<Tool> {
        self.runtime
            .block_on(self.session().list_all_tools())
            .expect("tools/list")
    }

    fn try_call(&self, tool: &str, arguments: Value) -> Result<CallToolResult, ServiceError> {
        let mut params = CallToolRequestParams::new(tool.to_owned());
        if let Value::Object(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        self.runtime.block_on(async {
            tokio::time::timeout(ANSWER_DEADLINE, self.session().call_tool(params))
                .await
                .unwrap_or_else(|_| panic!("no answer to {tool} within {ANSWER_DEADLINE:?}"))
        })
    }

    /// The call's result, which must not be a protocol error.
    fn call(&self, tool: &str, arguments: Value) -> CallToolResult {
        self.try_call(tool, arguments.clone())
            .unwrap_or_else(|err| panic!("{tool} {arguments}: {err}"))
    }

    /// Text of a call that must succeed.
    fn ok(&self, tool: &str, arguments: Value) -> String {
        let result = self.call(tool, arguments.clone());
        assert_eq!(
            result.is_error,
            Some(false),
            "{tool} {arguments} failed: {}",
            text(&result)
        );
        text(&result).to_owned()
    }

    /// Text of a call that must be an error result.
    fn failed(&self, tool: &str, arguments: Value) -> String {
        let result = self.call(tool, arguments.clone());
        assert_eq!(
            result.is_error,
            Some(true),
            "{tool} {arguments} should have failed: {}",
            text(&result)
        );
        text(&result).to_owned()
    }

    /// Sends a call without waiting for its answer.
    fn start_call(&self, tool: &str, arguments: Value) -> RequestHandle<RoleClient> {
        let Value::Object(arguments) = arguments else {
            panic!("arguments are an object");
        };
        let request = ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
            CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments),
        ));
        self.runtime
            .block_on(
                self.session()
                    .peer()
                    .send_cancellable_request(request, PeerRequestOptions::no_options()),
            )
            .expect("send the call")
    }

    fn progress(&self) -> Vec<ProgressNotificationParam> {
        self.client
            .progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Ends the session as a client does (closes the host's stdin) and
    /// waits for the host to exit.
    fn close(mut self) {
        if let Some(session) = self.session.take() {
            let _ = self.runtime.block_on(session.cancel());
        }
        assert!(
            wait_until_dead(self.pid as i32, Duration::from_secs(30)),
            "envhost mcp did not exit after its client left"
        );
    }
}

fn text(result: &CallToolResult) -> &str {
    assert_eq!(result.content.len(), 1, "one content block: {result:?}");
    result.content[0]
        .as_text()
        .map(|t| t.text.as_str())
        .expect("a text block")
}

/// Waits for `path` to exist, for a command that writes it when it starts.
/// The pid a command writes to `path` (`echo $$ > path`), once the whole
/// line is there: the file exists from the shell's `>` on, before the pid
/// is written.
fn wait_for_pid(path: &Path) -> i32 {
    let deadline = Instant::now() + ANSWER_DEADLINE;
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && text.ends_with('\n')
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        assert!(
            Instant::now() < deadline,
            "{} never held a pid",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn tools_are_the_environments_then_the_controls_with_truthful_hints() {
    let project = Project::new();
    install(&project, &[("timer", "timer")]);
    let mcp = Mcp::start(&project, &[]);
    let tools = mcp.tools();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "bash",
            "python",
            "editor",
            "timer",
            "screen",
            "wait",
            "input",
            "interrupt",
            "restart",
            "close"
        ]
    );
    let tool = |name: &str| tools.iter().find(|t| t.name == name).expect("listed");
    let hints = |name: &str| tool(name).annotations.clone().expect("annotations");

    for (name, destructive, open_world) in [
        ("bash", true, true),
        ("python", true, true),
        ("editor", true, false),
        ("timer", false, false),
    ] {
        let hints = hints(name);
        assert_eq!(hints.read_only_hint, Some(false), "{name}");
        assert_eq!(hints.destructive_hint, Some(destructive), "{name}");
        assert_eq!(hints.open_world_hint, Some(open_world), "{name}");
        let schema = &tool(name).input_schema;
        assert_eq!(schema["required"], json!(["command"]), "{name}");
        assert!(schema["properties"]["wait_seconds"].is_object(), "{name}");
    }
    assert_eq!(hints("screen").read_only_hint, Some(true));
    assert_eq!(
        tool("wait").input_schema["properties"]["environment"]["enum"],
        json!(["bash", "python", "editor", "timer"])
    );
    // The editor's and the plugin's commands, in their long help: the
    // screen's own renderer.
    let editor = tool("editor").description.as_deref().unwrap_or_default();
    assert!(editor.starts_with("Views of project files"), "{editor}");
    assert!(editor.contains("Commands:\n  view "), "{editor}");
    let timer = tool("timer").description.as_deref().unwrap_or_default();
    assert!(timer.contains("  start\n    Start the timer"), "{timer}");
    mcp.close();
}

#[test]
fn state_persists_and_each_result_shows_what_changed() {
    let project = Project::new();
    install(&project, &[("timer", "timer")]);
    project.write("notes.txt", "alpha\nbeta\ngamma\n");
    let mcp = Mcp::start(&project, &[]);

    let first = mcp.ok("bash", json!({"command": "mkdir -p sub && cd sub && X=41"}));
    for section in ["BASH", "PYTHON", "EDITOR", "TIMER"] {
        assert!(
            first.contains(&format!(
                "==================== {section} ===================="
            )),
            "the first result shows the whole screen: {first}"
        );
    }
    let second = mcp.ok(
        "bash",
        json!({"command": "echo $((X + 1)) $(basename $PWD)"}),
    );
    assert!(second.starts_with("42 sub\n"), "{second}");
    assert!(
        second.ends_with("(unchanged: bash, python, editor, timer)"),
        "nothing changed on the screen: {second}"
    );

    mcp.ok("python", json!({"command": "x = 20"}));
    let answer = mcp.ok("python", json!({"command": "print(x * 2 + 2)"}));
    assert!(answer.starts_with("42\n"), "{answer}");

    mcp.ok(
        "editor",
        json!({"command": "view notes.txt /^alpha/ /^gamma/"}),
    );
    let edited = mcp.ok("editor", json!({"command": "edit notes.txt 2-2\nBETA"}));
    assert!(
        edited.contains("== EDITOR =="),
        "the editor's section changed: {edited}"
    );
    assert_eq!(project.read("notes.txt"), "alpha\nBETA\ngamma\n");

    let started = mcp.ok("timer", json!({"command": "start"}));
    assert!(started.starts_with("Timer started"), "{started}");
    let again = mcp.failed("timer", json!({"command": "start"}));
    assert!(again.contains("already running"), "{again}");

    let screen = mcp.ok("screen", json!({}));
    assert!(
        screen.contains("== TIMER ==") && screen.contains("== BASH =="),
        "{screen}"
    );
    mcp.close();

    let record = transcript(&project);
    assert_eq!(events(&record, "host_started")[0]["mode"], "mcp");
    assert_eq!(events(&record, "command_finished").len(), 8);
    assert_eq!(
        events(&record, "host_stopping")[0]["reason"],
        "end of input"
    );
}

#[test]
fn failures_are_error_results_and_bad_calls_say_what_is_wrong() {
    let project = Project::new();
    let mcp = Mcp::start(&project, &[]);

    let failed = mcp.failed("bash", json!({"command": "echo to stderr >&2; false"}));
    assert!(failed.starts_with("to stderr\n"), "{failed}");
    assert!(
        failed.contains("== BASH =="),
        "an error shows the screen too: {failed}"
    );

    let unknown = mcp
        .try_call("nope", json!({}))
        .expect_err("a protocol error");
    let ServiceError::McpError(error) = unknown else {
        panic!("a JSON-RPC error, got {unknown:?}");
    };
    assert_eq!(error.code.0, -32602);
    assert_eq!(
        error.message,
        "Unknown tool: nope. The tools are: bash, python, editor, screen, wait, input, interrupt, restart, close."
    );

    let missing = mcp.failed("bash", json!({}));
    assert_eq!(missing, "The bash tool needs `command` (a string).");
    let extra = mcp.failed("python", json!({"command": "1", "cwd": "/"}));
    assert!(
        extra.starts_with("The python tool has no argument `cwd`"),
        "{extra}"
    );
    let negative = mcp.failed("bash", json!({"command": "ls", "wait_seconds": -1}));
    assert!(
        negative.starts_with("`wait_seconds` must be more than 0"),
        "{negative}"
    );

    let nowhere = mcp.failed("wait", json!({"environment": "ruby"}));
    assert!(
        nowhere.starts_with("Unknown environment: ruby\nAvailable: bash, editor, python"),
        "{nowhere}"
    );
    let idle = mcp.failed("interrupt", json!({"environment": "bash"}));
    assert!(idle.starts_with("Nothing is running in bash"), "{idle}");

    // The server still serves.
    assert!(
        mcp.ok("bash", json!({"command": "echo still here"}))
            .starts_with("still here")
    );
    mcp.close();
    let record = transcript(&project);
    let bad: Vec<&str> = events(&record, "protocol_error")
        .iter()
        .filter_map(|e| e["message"].as_str())
        .collect();
    assert_eq!(bad.len(), 4, "{bad:?}");
    assert!(bad[0].starts_with("Unknown tool: nope."), "{bad:?}");
}

#[test]
fn a_plugin_trap_is_an_error_result_and_the_next_call_works() {
    let project = Project::new();
    install(&project, &[("rogue", "rogue")]);
    let mcp = Mcp::start(&project, &[]);
    mcp.ok("rogue", json!({"command": "count"}));
    let trapped = mcp.failed(
        "rogue",
        json!({"command": "panic the plugin lost its marbles"}),
    );
    assert!(
        trapped.starts_with(
            "The rogue plugin stopped during this command: it panicked: the plugin lost its marbles"
        ),
        "{trapped}"
    );
    assert!(trapped.contains("Its state was lost"), "{trapped}");
    let looped = mcp.failed("rogue", json!({"command": "loop", "timeout_seconds": 0.3}));
    assert!(
        looped.contains("ran past its time limit of 300 ms"),
        "{looped}"
    );
    assert_eq!(
        mcp.ok("rogue", json!({"command": "count"})).lines().next(),
        Some("count = 1"),
        "a fresh instance answers"
    );
    assert!(
        mcp.ok("bash", json!({"command": "echo fine"}))
            .starts_with("fine")
    );
    mcp.close();
}

#[test]
fn progress_notifications_say_what_runs() {
    let project = Project::new();
    let mcp = Mcp::start(&project, &[]);
    let done = mcp.ok("bash", json!({"command": "sleep 4; echo done"}));
    assert!(done.starts_with("done\n"), "{done}");
    let progress = mcp.progress();
    assert!(!progress.is_empty(), "no progress during a 4 s command");
    let message = progress[0].message.as_deref().unwrap_or_default();
    assert!(
        message.starts_with("bash: `sleep 4; echo done` running for 3 s"),
        "{message}"
    );
    mcp.close();
}

#[test]
fn a_cancelled_call_interrupts_its_command() {
    let project = Project::new();
    let mcp = Mcp::start(&project, &[]);
    let pid_file = project.path().join("sleeper.pid");
    let call = mcp.start_call(
        "bash",
        json!({"command": "sh -c 'echo $$ > sleeper.pid; exec sleep 60'; echo finished"}),
    );
    let sleeper = crate::harness::outer_pid(mcp.pid, wait_for_pid(&pid_file));
    assert!(process_alive(sleeper));
    mcp.runtime
        .block_on(call.cancel(Some("the user pressed Esc".into())))
        .expect("send notifications/cancelled");
    assert!(
        wait_until_dead(sleeper, Duration::from_secs(30)),
        "the cancelled command still runs"
    );
    let after = mcp.ok("bash", json!({"command": "echo after"}));
    assert!(after.contains("after\n"), "{after}");
    assert!(!after.contains("finished"), "{after}");
    mcp.close();
    let record = transcript(&project);
    let finished = events(&record, "command_finished");
    assert_eq!(finished[0]["success"], false, "{:?}", finished[0]);
}

/// What the client libraries never send: lines that are not JSON,
/// requests rmcp cannot type, an old protocol version, the stateless
/// revision without `initialize`.
#[test]
fn bad_lines_get_json_rpc_errors_and_every_protocol_era_is_served() {
    let project = Project::new();
    let mut host = Host::builder().subcommand("mcp").start(project.path());
    host.send_raw(b"this is not json\n");
    let error = host.recv();
    assert_eq!(error["id"], Value::Null);
    assert_eq!(error["error"]["code"], -32700);
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Parse error: the line is not JSON"),
        "{error}"
    );
    host.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2024-11-05", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}}),
    );
    let initialized = host.recv();
    assert_eq!(initialized["result"]["protocolVersion"], "2024-11-05");
    assert_eq!(initialized["result"]["serverInfo"]["name"], "envhost");
    host.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    host.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": 3}}));
    let bad_params = host.recv();
    assert_eq!(bad_params["id"], 2);
    assert_eq!(bad_params["error"]["code"], -32602);
    assert_eq!(
        bad_params["error"]["message"],
        "Invalid params for tools/call: invalid type: integer `3`, expected a string."
    );
    host.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "files/delete"}));
    let unknown = host.recv();
    assert_eq!(unknown["error"]["code"], -32601);
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Unknown method: files/delete."),
        "{unknown}"
    );
    host.send(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "bash", "arguments": {"command": "echo served"}}}));
    let served = host.recv();
    assert_eq!(served["id"], 4);
    assert!(
        served["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .starts_with("served\n"),
        "{served}"
    );
    let (status, _) = host.finish();
    assert!(status.success());

    // The stateless revision: no initialize, every request says who asks.
    let mut stateless = Host::builder().subcommand("mcp").start(project.path());
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    });
    stateless.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "_meta": meta, "name": "python", "arguments": {"command": "print(6 * 7)"}}}),
    );
    let answer = stateless.recv();
    assert!(
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .starts_with("42\n"),
        "{answer}"
    );
    let (status, _) = stateless.finish();
    assert!(status.success());
}

#[test]
fn closing_stdin_or_sigterm_stops_the_server_and_reaps_everything() {
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    let call = |id: u64, command: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "bash", "arguments": {"command": command}}})
    };

    // End of input, with a background job left in the shell.
    let project = Project::new();
    let mut host = Host::builder()
        .subcommand("mcp")
        .arg("--transcript")
        .arg(
            project
                .path()
                .join("transcript.jsonl")
                .to_str()
                .expect("utf-8"),
        )
        .start(project.path());
    host.send(&initialize);
    host.recv();
    host.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    host.send(&call(1, "sleep 300 & echo $! > background.pid"));
    host.recv();
    let background = host.outer_pid(wait_for_pid(&project.path().join("background.pid")));
    assert!(process_alive(background));
    let (status, _) = host.finish();
    assert!(status.success());
    assert!(
        wait_until_dead(background, Duration::from_secs(10)),
        "the background job outlived the host"
    );
    let record = transcript(&project);
    assert_eq!(
        events(&record, "host_stopping")[0]["reason"],
        "end of input"
    );

    // SIGTERM while a command runs.
    let project = Project::new();
    let mut host = Host::builder().subcommand("mcp").start(project.path());
    host.send(&initialize);
    host.recv();
    host.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    host.send(&call(1, "sh -c 'echo $$ > sleeper.pid; exec sleep 60'"));
    let pid_file = project.path().join("sleeper.pid");
    let sleeper = host.outer_pid(wait_for_pid(&pid_file));
    let started = Instant::now();
    host.signal("TERM");
    let status = host.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "it did not hang"
    );
    assert!(
        wait_until_dead(sleeper, Duration::from_secs(10)),
        "the command outlived the host"
    );
}

/// A long command answers with its output so far when its `wait_seconds`
/// is up; the other environments serve meanwhile; the `wait` tool collects
/// the rest, and nothing shown is shown twice. In bash and in python.
#[test]
fn a_long_command_yields_and_wait_collects_the_rest() {
    let project = Project::new();
    let mcp = Mcp::start(&project, &[]);

    let first = mcp.ok(
        "bash",
        json!({"command": "echo first; sleep 3; echo second", "wait_seconds": 0.5}),
    );
    assert!(first.starts_with("first\n"), "{first}");
    assert!(!output_part(&first).contains("second"), "{first}");
    assert!(
        first.contains("[envhost] The command is still running"),
        "the result says the command goes on: {first}"
    );

    let meanwhile = mcp.ok("python", json!({"command": "print(6 * 7)"}));
    assert!(meanwhile.starts_with("42\n"), "{meanwhile}");

    let rest = mcp.ok("wait", json!({"environment": "bash", "wait_seconds": 30}));
    assert!(rest.starts_with("second\n"), "{rest}");
    assert!(
        !output_part(&rest).contains("first"),
        "shown once only: {rest}"
    );
    assert!(!rest.contains("still running"), "{rest}");

    let started = mcp.ok(
        "python",
        json!({
            "command": "import time\nprint('a', flush=True)\ntime.sleep(3)\nprint('b')",
            "wait_seconds": 0.5
        }),
    );
    assert!(started.starts_with("a\n"), "{started}");
    assert!(started.contains("still running"), "{started}");
    let ended = mcp.ok("wait", json!({"environment": "python", "wait_seconds": 30}));
    assert!(ended.starts_with("b\n"), "{ended}");
    mcp.close();
}

/// A result's output, without the screen sections after it (which show
/// the running command's text).
fn output_part(result: &str) -> &str {
    result
        .split_once("\n====================")
        .map_or(result, |(output, _)| output)
}

/// A 1 × 1 PNG.
const DOT_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

fn image_bytes(block: &rmcp::model::ContentBlock) -> (String, Vec<u8>) {
    use base64::Engine;
    let image = block.as_image().expect("an image block");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(&image.data)
        .expect("base64 image data");
    (image.mime_type.clone(), bytes)
}

#[test]
fn images_a_command_writes_come_back_as_image_blocks_up_to_a_mebibyte() {
    let project = Project::new();
    let mcp = Mcp::start(&project, &[]);
    let result = mcp.call(
        "bash",
        json!({"command": format!(
            "echo {DOT_PNG} | base64 -d > dot.png && head -c 2000000 /dev/zero > big.png && echo x > a.txt"
        )}),
    );
    assert_eq!(result.is_error, Some(false), "{result:?}");
    assert_eq!(result.content.len(), 2, "text, then one image: {result:?}");
    let words = result.content[0]
        .as_text()
        .expect("text first")
        .text
        .clone();
    assert!(
        words.starts_with(
            "[envhost] Image big.png is not attached (2000000 bytes, over the 1048576-byte \
             limit); it is in the project.\n"
        ),
        "{words}"
    );
    let (media_type, bytes) = image_bytes(&result.content[1]);
    assert_eq!(media_type, "image/png");
    assert_eq!(
        bytes,
        std::fs::read(project.path().join("dot.png")).unwrap()
    );
    assert_eq!(crate::figures::png_bytes_size(&bytes), (1, 1));
    // A command that writes nothing carries no image.
    let result = mcp.call("bash", json!({"command": "true"}));
    assert_eq!(result.content.len(), 1, "{result:?}");
    mcp.close();
}

#[test]
fn a_matplotlib_plot_comes_back_as_an_image() {
    let Some(python) = crate::figures::figures_python() else {
        return;
    };
    let project = Project::new();
    let python = python.display().to_string();
    let mcp = Mcp::start(&project, &["--python", &python]);
    let result = mcp.call(
        "python",
        json!({"command": "import matplotlib.pyplot as plt\nplt.figure(figsize=(3, 2), dpi=40)\nplt.plot([1, 3, 2])\nplt.show()"}),
    );
    assert_eq!(result.is_error, Some(false), "{result:?}");
    assert_eq!(result.content.len(), 2, "{result:?}");
    let words = result.content[0]
        .as_text()
        .expect("text first")
        .text
        .clone();
    assert!(
        words.starts_with("[Figure saved: .envhost/figures/figure-1.png (120 × 80 pixels)]\n"),
        "{words}"
    );
    let (media_type, bytes) = image_bytes(&result.content[1]);
    assert_eq!(media_type, "image/png");
    assert_eq!(crate::figures::png_bytes_size(&bytes), (120, 80));
    mcp.close();
}

/// `envhost mcp --resume` brings back what `envhost mcp` recorded, and the
/// first tool result says so.
#[test]
fn mcp_resumes_a_recorded_session() {
    let project = Project::new();
    let mcp = Mcp::start(&project, &[]);
    mcp.ok("bash", json!({"command": "kept=yes; cd /tmp"}));
    mcp.close();
    let mcp = Mcp::start(&project, &["--resume"]);
    let first = mcp.ok("bash", json!({"command": "echo \"kept=$kept in $PWD\""}));
    assert!(first.contains("Session resumed"), "{first}");
    assert!(first.contains("kept=yes in /tmp"), "{first}");
    mcp.close();
}

/// Issue #34 over MCP: the bash and python tools take `instance`, each
/// instance keeps its own state and section, the controls reach it, and the
/// `close` tool ends it and everything it runs.
#[test]
fn instances_over_mcp_keep_their_own_state_and_close_ends_what_they_run() {
    let project = Project::new();
    let mcp = Mcp::start(&project, &["--max-instances", "3"]);
    let tools = mcp.tools();
    let schema = |name: &str| {
        let tool = tools.iter().find(|t| t.name == name).expect("listed");
        Value::Object((*tool.input_schema).clone())
    };
    assert_eq!(schema("bash")["properties"]["instance"]["type"], "string");
    assert_eq!(schema("python")["properties"]["instance"]["type"], "string");
    assert!(schema("editor")["properties"].get("instance").is_none());
    assert_eq!(
        schema("close")["required"],
        json!(["environment", "instance"])
    );
    assert_eq!(
        schema("close")["properties"]["environment"]["enum"],
        json!(["bash", "python"])
    );

    let opened = mcp.ok(
        "bash",
        json!({"command": "cd /tmp && X=1 && echo opened", "instance": "server"}),
    );
    assert!(opened.starts_with("opened\n"), "{opened}");
    assert!(opened.contains("== BASH:SERVER =="), "{opened}");
    let default = mcp.ok("bash", json!({"command": "echo \"[$X]\"; pwd"}));
    assert!(
        default.starts_with(&format!("[]\n{}\n", project.canonical().display())),
        "{default}"
    );
    let again = mcp.ok(
        "bash",
        json!({"command": "echo $X; pwd", "instance": "server"}),
    );
    assert!(again.starts_with("1\n/tmp\n"), "{again}");
    mcp.ok("python", json!({"command": "v = 7", "instance": "w"}));
    let python = mcp.ok("python", json!({"command": "'v' in dir()"}));
    assert!(python.starts_with("False"), "{python}");

    // A job and a command left running end with close (back in the
    // project, where the test reads their pids).
    let back = format!("cd '{}'", project.canonical().display());
    mcp.ok(
        "bash",
        json!({"command": format!("{back}; sleep 300 & echo $! > job.pid"), "instance": "server"}),
    );
    let job = wait_for_pid(&project.path().join("job.pid"));
    let running = mcp.ok(
        "bash",
        json!({
            "command": "sh -c 'echo $$ > run.pid; exec sleep 301'",
            "instance": "server",
            "wait_seconds": 0.5
        }),
    );
    assert!(running.contains("still running"), "{running}");
    let command = wait_for_pid(&project.path().join("run.pid"));
    let waited = mcp.ok(
        "wait",
        json!({"environment": "bash", "instance": "server", "wait_seconds": 0.2}),
    );
    assert!(waited.contains("still running"), "{waited}");
    let closed = mcp.ok(
        "close",
        json!({"environment": "bash", "instance": "server"}),
    );
    assert!(
        closed.starts_with("Closed bash:server: ended the shell, background job %1 `sleep 300`"),
        "{closed}"
    );
    assert!(closed.contains("the running command `sh -c"), "{closed}");
    for pid in [job, command] {
        let pid = crate::harness::outer_pid(mcp.pid, pid);
        assert!(
            wait_until_dead(pid, Duration::from_secs(10)),
            "{pid} outlived close"
        );
    }
    let gone = mcp.failed(
        "interrupt",
        json!({"environment": "bash", "instance": "server"}),
    );
    assert!(gone.starts_with("bash:server is not open"), "{gone}");

    // Refusals in words; the server goes on.
    let bad = mcp.failed("bash", json!({"command": "true", "instance": "my server"}));
    assert!(
        bad.contains("bash:my server is not an instance name"),
        "{bad}"
    );
    let editor = mcp.failed("editor", json!({"command": "search x", "instance": "x"}));
    assert!(editor.contains("editor has one instance only"), "{editor}");
    match mcp.try_call("close", json!({"environment": "bash"})) {
        Ok(result) => {
            assert_eq!(result.is_error, Some(true));
            assert!(text(&result).contains("restart"), "{}", text(&result));
        }
        Err(err) => assert!(err.to_string().contains("restart"), "{err}"),
    }
    let kept = mcp.ok("python", json!({"command": "v", "instance": "w"}));
    assert!(kept.starts_with('7'), "{kept}");
    mcp.close();
}

/// `--watch` is the host's, not a front end's: under `envhost mcp` a
/// plugin rebuilt in env/ is swapped in before the next call to it, which
/// says so, and the tool keeps its name (the tool list is fixed).
#[test]
fn mcp_watch_swaps_in_a_rebuilt_plugin_and_says_so() {
    let project = Project::new();
    install(&project, &[("notes", "manual")]);
    let mcp = Mcp::start(&project, &["--watch"]);
    let first = mcp.ok("notes", json!({"command": "one"}));
    assert!(first.starts_with("Noted (1 so far)"), "{first}");
    let timer = std::fs::read(guest("timer")).expect("the timer plugin");
    let staged = project.write("env/.notes.staged", &timer);
    std::fs::rename(&staged, project.path().join("env/notes.wasm")).expect("rename");
    let reloaded = mcp.ok("notes", json!({"command": "start"}));
    assert!(
        reloaded.starts_with(
            "[envhost] reloaded notes from env/notes.wasm (changed on disk). The old instance was shut down; notes starts with fresh state.\n\nTimer started"
        ),
        "{reloaded}"
    );
    // Said once: the next call runs quietly on the new build.
    let next = mcp.ok("notes", json!({"command": "reset"}));
    assert!(next.starts_with("Timer reset"), "{next}");
    mcp.close();
}
