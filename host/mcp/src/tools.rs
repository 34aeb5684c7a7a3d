//! The tool list: one tool per environment, named as the environment and
//! described by its usage (the same text its screen's help is rendered
//! from), then the tools that go on with a running command and the screen.
//!
//! It is made once, at start, and never changes: clients ignore
//! `tools/list_changed`. Annotations say what is true of each environment
//! ([`Reach`]): an environment that claims nothing is assumed to reach
//! anything.

use std::sync::Arc;
use std::time::Duration;

use envhost_core::{Description, EnvironmentKind, Reach, render_usage, text};
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

/// What a tool does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ToolKind {
    /// Runs a command in the environment of this name.
    Environment(String),
    /// Shows every environment's section.
    Screen,
    /// Collects a running command's output.
    Wait,
    /// Types into a running command.
    Input,
    /// Stops a running command.
    Interrupt,
    /// Starts an environment afresh.
    Restart,
    /// Ends a named instance (`bash:server`).
    Close,
}

/// The tools that are not environments, in the order listed. An
/// environment of one of these names gets its tool name with `_env` after
/// it.
const CONTROL_TOOLS: [&str; 6] = ["screen", "wait", "input", "interrupt", "restart", "close"];

/// The tool list, fixed for the life of the process.
pub(crate) struct ToolSet {
    tools: Vec<(Tool, ToolKind)>,
    environments: Vec<String>,
    /// Environments with no tool, and why (said on stderr at start).
    pub(crate) skipped: Vec<String>,
}

impl ToolSet {
    /// The tools for `environments` (in display order), whose commands
    /// answer while running after `yield_after` by default.
    pub(crate) fn new(environments: &[Description], yield_after: Duration) -> ToolSet {
        let mut tools = Vec::new();
        let mut skipped = Vec::new();
        let mut taken: Vec<String> = CONTROL_TOOLS.iter().map(|t| (*t).to_owned()).collect();
        for described in environments {
            let name = described.name.as_str();
            if !valid_tool_name(name) {
                skipped.push(format!(
                    "the environment `{name}` has no MCP tool: MCP tool names are ASCII letters, digits, `_`, `-` and `.` (at most 128); rename its file"
                ));
                continue;
            }
            let mut tool_name = name.to_owned();
            while taken.contains(&tool_name) {
                tool_name.push_str("_env");
            }
            taken.push(tool_name.clone());
            tools.push((
                environment_tool(&tool_name, described, yield_after),
                ToolKind::Environment(name.to_owned()),
            ));
        }
        let names: Vec<String> = environments
            .iter()
            .map(|d| d.name.as_str().to_owned())
            .filter(|name| valid_tool_name(name))
            .collect();
        let reach = environments.iter().fold(Reach::CONTAINED, |all, d| Reach {
            destructive: all.destructive || d.reach.destructive,
            open_world: all.open_world || d.reach.open_world,
        });
        let kinds: Vec<String> = environments
            .iter()
            .filter(|d| d.instances)
            .map(|d| d.name.as_str().to_owned())
            .collect();
        tools.extend(
            control_tools(&names, &kinds, reach, yield_after)
                .into_iter()
                // Nothing to close where no environment has instances.
                .filter(|(_, kind)| *kind != ToolKind::Close || !kinds.is_empty()),
        );
        ToolSet {
            tools,
            environments: names,
            skipped,
        }
    }

    /// The tools, in their fixed order.
    pub(crate) fn list(&self) -> Vec<Tool> {
        self.tools.iter().map(|(tool, _)| tool.clone()).collect()
    }

    /// What the tool named `name` does.
    pub(crate) fn find(&self, name: &str) -> Option<&ToolKind> {
        self.tools
            .iter()
            .find(|(tool, _)| tool.name == name)
            .map(|(_, kind)| kind)
    }

    /// The tool named `name`.
    #[cfg(test)]
    pub(crate) fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools
            .iter()
            .find(|(tool, _)| tool.name == name)
            .map(|(tool, _)| tool)
    }

    /// The tools' names, in order, for messages.
    pub(crate) fn names(&self) -> Vec<&str> {
        self.tools
            .iter()
            .map(|(tool, _)| tool.name.as_ref())
            .collect()
    }

    /// The environments that have a tool, in display order.
    #[cfg(test)]
    pub(crate) fn environments(&self) -> &[String] {
        &self.environments
    }

    /// What the server tells a client at the handshake.
    pub(crate) fn instructions(&self, yield_after: Duration) -> String {
        format!(
            "envhost gives you persistent environments: {}. Each has a tool of its name that runs \
             one command; what a command changes (variables, the working directory, open files, \
             a plugin's state) stays for the next call. Every result is the command's output, \
             then the screen: each environment's state and how to use it (the first time all of \
             it, afterwards the sections that changed; the screen tool shows all of it). A \
             command still running after {} answers with its output so far and goes on running: \
             continue with wait, input or interrupt; restart starts an environment afresh.",
            self.environments.join(", "),
            text::duration(yield_after)
        )
    }
}

/// MCP's rule for tool names: 1 to 128 of ASCII letters, digits, `_`, `-`
/// and `.`.
fn valid_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

fn environment_tool(tool_name: &str, described: &Description, yield_after: Duration) -> Tool {
    let name = described.name.as_str();
    let usage = render_usage(name, &described.usage.summary, &described.usage.commands);
    let origin = match described.kind {
        EnvironmentKind::Builtin => "environment",
        EnvironmentKind::Plugin => "plugin environment",
    };
    let description = format!(
        "{usage}\n\nRuns one command in the persistent `{name}` {origin}; what it changes stays \
         for the next call. The result is the output, then the screen sections that changed. A \
         command still running after wait_seconds (default {}) answers with its output so far \
         and goes on running: continue with wait, input or interrupt.",
        text::duration(yield_after)
    );
    let mut properties = json!({
            "command": {
                "type": "string",
                "description": format!("The command for {name}, as you would type it."),
            },
            "timeout_seconds": {
                "type": "number",
                "exclusiveMinimum": 0,
                "description": "Stop the command once it has run this long (an interrupt, then harder). Default: no limit once it answers while running; stop it with interrupt.",
            },
            "wait_seconds": {
                "type": "number",
                "exclusiveMinimum": 0,
                "description": format!(
                    "Answer after this many seconds with the output so far if the command is still running (default {}).",
                    yield_after.as_secs_f64()
                ),
            },
    });
    if described.instances {
        properties["instance"] = json!({
            "type": "string",
            "description": format!(
                "Another {name}, by name (e.g. `server` for {name}:server: a letter, then \
                 letters, digits, `_` or `-`, at most 32). Its first command opens it in the \
                 project directory; it keeps its own state and screen section until the close \
                 tool ends it. Default: the default {name}."
            ),
        });
    }
    let schema = object_schema(properties, &["command"]);
    Tool::new(tool_name.to_owned(), description, schema)
        .with_title(format!("{name} ({origin})"))
        .with_annotations(annotations(Some(described.reach), false, false))
}

fn control_tools(
    environments: &[String],
    kinds: &[String],
    reach: Reach,
    yield_after: Duration,
) -> Vec<(Tool, ToolKind)> {
    let environment = json!({
        "type": "string",
        "enum": environments,
        "description": "The environment, by name.",
    });
    let instance = instance_schema(kinds);
    let wait_seconds = |default: &str| {
        json!({
            "type": "number",
            "exclusiveMinimum": 0,
            "description": format!(
                "Answer after this many seconds with the new output if the command is still running (default {default})."
            ),
        })
    };
    vec![
        screen_tool(),
        (
            Tool::new(
                "wait",
                format!(
                    "Waits for the command still running in an environment: answers with the \
                     output it produced since the last answer, as soon as it ends or after \
                     wait_seconds. A call that is cancelled interrupts the command. (A command \
                     answers while running after {} by default.)",
                    text::duration(yield_after)
                ),
                object_schema(
                    json!({
                        "environment": environment,
                        "instance": instance,
                        "wait_seconds": wait_seconds("10"),
                    }),
                    &["environment"],
                ),
            )
            .with_title("wait for a running command")
            .with_annotations(ToolAnnotations::new().read_only(true).open_world(false)),
            ToolKind::Wait,
        ),
        (
            Tool::new(
                "input",
                "Types text into the command still running in an environment (its terminal or \
                 its standard input), then answers as wait does. End a line with \"\\n\"; \
                 control characters are allowed (\"\\u0003\" is Ctrl-C, \"\\u0004\" Ctrl-D).",
                object_schema(
                    json!({
                        "environment": environment,
                        "instance": instance,
                        "text": {"type": "string", "description": "What to type."},
                        "wait_seconds": wait_seconds("1"),
                    }),
                    &["environment", "text"],
                ),
            )
            .with_title("type into a running command")
            .with_annotations(annotations(Some(reach), false, false)),
            ToolKind::Input,
        ),
        (
            Tool::new(
                "interrupt",
                "Stops the command still running in an environment, as its timeout would (an \
                 interrupt, then harder), and answers with its last output.",
                object_schema(
                    json!({"environment": environment, "instance": instance}),
                    &["environment"],
                ),
            )
            .with_title("stop a running command")
            .with_annotations(annotations(None, true, true)),
            ToolKind::Interrupt,
        ),
        (
            Tool::new(
                "restart",
                "Ends an environment, and whatever runs in it, and starts it afresh in the \
                 project directory. Its state is lost; the answer says what.",
                object_schema(
                    json!({"environment": environment, "instance": instance}),
                    &["environment"],
                ),
            )
            .with_title("start an environment afresh")
            .with_annotations(annotations(None, true, false)),
            ToolKind::Restart,
        ),
        close_tool(kinds),
    ]
}

/// The optional `instance` argument: a named instance of one of `kinds`.
fn instance_schema(kinds: &[String]) -> Value {
    json!({
        "type": "string",
        "description": format!(
            "A named instance of the environment ({}), e.g. `server` for bash:server. Default: \
             the environment itself.",
            kinds
                .iter()
                .map(|kind| format!("{kind}:NAME"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

/// The screen tool: the whole screen, changing nothing.
fn screen_tool() -> (Tool, ToolKind) {
    (
        Tool::new(
            "screen",
            "Every environment's current state and how to use it (the whole screen, as \
             after a command). Changes nothing.",
            object_schema(json!({}), &[]),
        )
        .with_title("envhost screen")
        .with_annotations(ToolAnnotations::new().read_only(true).open_world(false)),
        ToolKind::Screen,
    )
}

/// The close tool: ends a named instance of one of `kinds`.
fn close_tool(kinds: &[String]) -> (Tool, ToolKind) {
    (
        Tool::new(
            "close",
            "Ends a named instance (bash:NAME, python:NAME: the instance argument of the \
             bash and python tools) and everything it runs (its background jobs, a running \
             command), and removes its screen section; the answer says what was ended. The \
             default instances cannot be closed: restart them.",
            object_schema(
                json!({
                    "environment": {
                        "type": "string",
                        "enum": kinds,
                        "description": "The instance's kind.",
                    },
                    "instance": {"type": "string", "description": "The instance's name (`server` for bash:server)."},
                }),
                &["environment", "instance"],
            ),
        )
        .with_title("close an instance")
        .with_annotations(annotations(None, true, true)),
        ToolKind::Close,
    )
}

/// `reach` of the environment a tool runs commands in (`None`: the tool
/// only stops or restarts what runs).
fn annotations(reach: Option<Reach>, destructive: bool, idempotent: bool) -> ToolAnnotations {
    let annotations = ToolAnnotations::new().read_only(false);
    match reach {
        Some(reach) => annotations
            .destructive(reach.destructive)
            .open_world(reach.open_world),
        None => annotations
            .destructive(destructive)
            .idempotent(idempotent)
            .open_world(false),
    }
}

fn object_schema(properties: Value, required: &[&str]) -> Arc<JsonObject> {
    let mut schema = JsonObject::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), properties);
    if !required.is_empty() {
        schema.insert("required".into(), json!(required));
    }
    schema.insert("additionalProperties".into(), json!(false));
    Arc::new(schema)
}

/// The tool's name as the client sent it, for messages.
pub(crate) fn shown(name: &str) -> String {
    if name.is_empty() {
        "(empty)".to_owned()
    } else {
        name.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envhost_core::{CommandSpec, EnvironmentName, Usage};

    fn described(name: &str, kind: EnvironmentKind, reach: Reach) -> Description {
        Description {
            name: EnvironmentName::new(name).unwrap(),
            kind,
            usage: Usage {
                summary: format!("{name} summary."),
                commands: Vec::<CommandSpec>::new(),
                ..Usage::default()
            },
            reach,
            instances: name == "bash" || name == "python",
        }
    }

    #[test]
    fn environments_first_in_display_order_then_the_controls() {
        let set = ToolSet::new(
            &[
                described("bash", EnvironmentKind::Builtin, Reach::UNBOUNDED),
                described("timer", EnvironmentKind::Plugin, Reach::CONTAINED),
            ],
            DEFAULT,
        );
        assert_eq!(
            set.names(),
            [
                "bash",
                "timer",
                "screen",
                "wait",
                "input",
                "interrupt",
                "restart",
                "close"
            ]
        );
        let timer = set.tool("timer").unwrap();
        let hints = timer.annotations.as_ref().unwrap();
        assert_eq!(hints.destructive_hint, Some(false));
        assert_eq!(hints.open_world_hint, Some(false));
        assert!(
            timer
                .description
                .as_deref()
                .unwrap()
                .starts_with("timer summary.")
        );
        let bash = set.tool("bash").unwrap().annotations.as_ref().unwrap();
        assert_eq!(bash.destructive_hint, Some(true));
        assert_eq!(bash.open_world_hint, Some(true));
        let screen = set.tool("screen").unwrap().annotations.as_ref().unwrap();
        assert_eq!(screen.read_only_hint, Some(true));
    }

    #[test]
    fn a_plugin_named_like_a_control_tool_gets_a_suffix() {
        let set = ToolSet::new(
            &[described("wait", EnvironmentKind::Plugin, Reach::CONTAINED)],
            DEFAULT,
        );
        assert_eq!(
            set.find("wait_env"),
            Some(&ToolKind::Environment("wait".into()))
        );
        assert_eq!(set.find("wait"), Some(&ToolKind::Wait));
        assert_eq!(set.environments(), ["wait"]);
    }

    #[test]
    fn a_name_mcp_cannot_carry_is_skipped_with_a_reason() {
        let set = ToolSet::new(
            &[described(
                "données",
                EnvironmentKind::Plugin,
                Reach::CONTAINED,
            )],
            DEFAULT,
        );
        assert!(set.find("données").is_none());
        assert!(
            set.skipped[0].contains("rename its file"),
            "{:?}",
            set.skipped
        );
    }

    const DEFAULT: Duration = crate::settings::DEFAULT_YIELD_AFTER;
}
