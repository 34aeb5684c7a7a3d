//! A tool call's arguments, checked and turned into the orchestrator's
//! request.
//!
//! The rule is the NDJSON protocol's: every field has one type, unknown
//! fields are refused, and each refusal says what to send instead. An
//! unknown environment is not refused here: the orchestrator answers it,
//! listing the environments, as it does for every front end.

use std::time::Duration;

use envhost_core::text::json_kind;
use envhost_core::{CommandRequest, Control, ControlRequest, RequestId};
use rmcp::model::JsonObject;
use serde_json::Value;

use crate::tools::ToolKind;

/// The longest wait or timeout a call may ask for: a day.
const LONGEST: Duration = Duration::from_secs(24 * 60 * 60);

/// What a tool call asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Call {
    /// A request about an environment.
    Run(Request),
    /// Show the whole screen.
    Screen,
}

/// A request about one environment, for the orchestrator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Request {
    /// Run a command.
    Command(CommandRequest),
    /// Go on with a running command, or restart an environment.
    Control(ControlRequest),
}

impl Request {
    /// The environment it is about.
    pub(crate) fn environment(&self) -> &str {
        match self {
            Request::Command(request) => &request.environment,
            Request::Control(request) => &request.environment,
        }
    }
}

/// The call `tool` (of `kind`) makes with `arguments`, or what is wrong
/// with them. A command yields after `yield_after` unless it says.
pub(crate) fn parse(
    tool: &str,
    kind: &ToolKind,
    arguments: Option<&JsonObject>,
    id: Option<RequestId>,
    yield_after: Duration,
) -> Result<Call, BadArguments> {
    let empty = JsonObject::new();
    let fields = Fields {
        tool,
        object: arguments.unwrap_or(&empty),
    };
    match kind {
        ToolKind::Environment(environment) => {
            fields.only(&["command", "instance", "timeout_seconds", "wait_seconds"])?;
            Ok(Call::Run(Request::Command(CommandRequest {
                environment: fields.instance_of(environment)?,
                command: fields.string("command")?,
                timeout: fields.seconds("timeout_seconds")?,
                yield_after: Some(fields.seconds("wait_seconds")?.unwrap_or(yield_after)),
                id,
            })))
        }
        ToolKind::Screen => {
            fields.only(&[])?;
            Ok(Call::Screen)
        }
        ToolKind::Wait => {
            fields.only(&["environment", "instance", "wait_seconds"])?;
            fields.control(
                Control::Wait {
                    timeout: fields.seconds("wait_seconds")?,
                },
                id,
            )
        }
        ToolKind::Input => {
            fields.only(&["environment", "instance", "text", "wait_seconds"])?;
            fields.control(
                Control::Input {
                    text: fields.string("text")?,
                    timeout: fields.seconds("wait_seconds")?,
                },
                id,
            )
        }
        ToolKind::Interrupt => {
            fields.only(&["environment", "instance"])?;
            fields.control(Control::Interrupt, id)
        }
        ToolKind::Restart => {
            fields.only(&["environment", "instance"])?;
            fields.control(Control::Restart, id)
        }
        ToolKind::Close => {
            fields.only(&["environment", "instance"])?;
            if !fields.object.contains_key("instance") {
                return Err(BadArguments::CloseNeedsInstance);
            }
            fields.control(Control::Close, id)
        }
    }
}

/// What is wrong with a tool call's arguments, and what to send instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BadArguments {
    #[error("The {tool} tool takes no arguments; remove `{unknown}`.")]
    NoneTaken { tool: String, unknown: String },
    #[error("The {tool} tool has no argument `{unknown}`; it takes {allowed}.")]
    Unknown {
        tool: String,
        unknown: String,
        /// The arguments it takes, in words.
        allowed: String,
    },
    #[error("`{name}` must be a string, got {kind}.")]
    NotAString { name: String, kind: &'static str },
    #[error("The {tool} tool needs `{name}` (a string).")]
    Missing { tool: String, name: String },
    #[error("`{name}` must be a number of seconds, got {kind}.")]
    NotSeconds { name: String, kind: &'static str },
    #[error("`{name}` must be more than 0 and at most {longest} seconds.")]
    SecondsOutOfRange { name: String, longest: u64 },
    #[error(
        "The close tool needs `instance` (a string): the name of the instance to close, \
         e.g. `server` for bash:server. The default instance cannot be closed: restart it."
    )]
    CloseNeedsInstance,
    #[error("`instance` must be a string (e.g. \"server\" for {environment}:server), got {kind}.")]
    InstanceNotAString {
        environment: String,
        kind: &'static str,
    },
}

struct Fields<'a> {
    tool: &'a str,
    object: &'a JsonObject,
}

impl Fields<'_> {
    fn only(&self, allowed: &[&str]) -> Result<(), BadArguments> {
        match self.object.keys().find(|k| !allowed.contains(&k.as_str())) {
            None => Ok(()),
            Some(unknown) if allowed.is_empty() => Err(BadArguments::NoneTaken {
                tool: self.tool.to_owned(),
                unknown: unknown.clone(),
            }),
            Some(unknown) => Err(BadArguments::Unknown {
                tool: self.tool.to_owned(),
                unknown: unknown.clone(),
                allowed: list(allowed),
            }),
        }
    }

    fn string(&self, name: &str) -> Result<String, BadArguments> {
        match self.object.get(name) {
            Some(Value::String(text)) => Ok(text.clone()),
            Some(other) => Err(BadArguments::NotAString {
                name: name.to_owned(),
                kind: json_kind(other),
            }),
            None => Err(BadArguments::Missing {
                tool: self.tool.to_owned(),
                name: name.to_owned(),
            }),
        }
    }

    fn seconds(&self, name: &str) -> Result<Option<Duration>, BadArguments> {
        let value = match self.object.get(name) {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Number(number)) => number.as_f64(),
            Some(other) => {
                return Err(BadArguments::NotSeconds {
                    name: name.to_owned(),
                    kind: json_kind(other),
                });
            }
        };
        match value.and_then(|s| Duration::try_from_secs_f64(s).ok()) {
            Some(duration) if !duration.is_zero() && duration <= LONGEST => Ok(Some(duration)),
            _ => Err(BadArguments::SecondsOutOfRange {
                name: name.to_owned(),
                longest: LONGEST.as_secs(),
            }),
        }
    }

    /// `environment`, or its named instance when the call gives one
    /// (`bash` and `server` make `bash:server`; the orchestrator checks
    /// the name and refuses a kind that has no instances).
    fn instance_of(&self, environment: &str) -> Result<String, BadArguments> {
        match self.object.get("instance") {
            None | Some(Value::Null) => Ok(environment.to_owned()),
            Some(Value::String(name)) => Ok(format!("{environment}:{name}")),
            Some(other) => Err(BadArguments::InstanceNotAString {
                environment: environment.to_owned(),
                kind: json_kind(other),
            }),
        }
    }

    fn control(&self, control: Control, id: Option<RequestId>) -> Result<Call, BadArguments> {
        Ok(Call::Run(Request::Control(ControlRequest {
            environment: self.instance_of(&self.string("environment")?)?,
            control,
            id,
        })))
    }
}

fn list(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    match quoted.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => "nothing".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const YIELD: Duration = Duration::from_secs(25);

    fn parse_json(kind: &ToolKind, arguments: Value) -> Result<Call, String> {
        let object = arguments.as_object().cloned();
        parse("bash", kind, object.as_ref(), None, YIELD).map_err(|bad| bad.to_string())
    }

    #[test]
    fn a_command_yields_after_the_default_unless_it_says() {
        let bash = ToolKind::Environment("bash".into());
        let Ok(Call::Run(Request::Command(request))) = parse_json(&bash, json!({"command": "ls"}))
        else {
            panic!("a command");
        };
        assert_eq!(request.yield_after, Some(YIELD));
        assert_eq!(request.timeout, None);
        let Ok(Call::Run(Request::Command(request))) = parse_json(
            &bash,
            json!({"command": "make", "wait_seconds": 2.5, "timeout_seconds": 60}),
        ) else {
            panic!("a command");
        };
        assert_eq!(request.yield_after, Some(Duration::from_millis(2500)));
        assert_eq!(request.timeout, Some(Duration::from_secs(60)));
    }

    #[test]
    fn bad_arguments_say_what_to_send() {
        let bash = ToolKind::Environment("bash".into());
        assert_eq!(
            parse_json(&bash, json!({})).unwrap_err(),
            "The bash tool needs `command` (a string)."
        );
        assert_eq!(
            parse_json(&bash, json!({"command": 1})).unwrap_err(),
            "`command` must be a string, got a number."
        );
        assert_eq!(
            parse_json(&bash, json!({"command": "ls", "cwd": "/"})).unwrap_err(),
            "The bash tool has no argument `cwd`; it takes `command`, `instance`, `timeout_seconds` and `wait_seconds`."
        );
        for bad in [json!(0), json!(-1), json!(1e12)] {
            assert!(
                parse_json(&bash, json!({"command": "ls", "wait_seconds": bad}))
                    .unwrap_err()
                    .starts_with("`wait_seconds` must be more than 0")
            );
        }
        assert_eq!(
            parse(
                "screen",
                &ToolKind::Screen,
                json!({"x": 1}).as_object(),
                None,
                YIELD
            )
            .unwrap_err()
            .to_string(),
            "The screen tool takes no arguments; remove `x`."
        );
    }

    #[test]
    fn controls_name_their_environment() {
        let Call::Run(request) = parse_json(
            &ToolKind::Input,
            json!({"environment": "python", "text": "y\n"}),
        )
        .unwrap() else {
            panic!("a request");
        };
        assert_eq!(request.environment(), "python");
        assert!(matches!(
            request,
            Request::Control(ControlRequest {
                control: Control::Input { timeout: None, .. },
                ..
            })
        ));
    }
}
