//! What a tool call answers: one text block holding the output, then the
//! screen's sections that changed since this session last saw them, so the
//! model sees the state after every call as it would over NDJSON.
//!
//! A failed command is `isError: true` with the same words. Further content
//! blocks (images a command produced) belong after the text block, in
//! [`content`]. `structuredContent`, when the operator turns it on, stays
//! small: the facts a program would branch on, never the output again.

use base64::Engine;
use envhost_core::{Incident, Outcome, ProducedFile, Screen};
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::json;

/// The largest image a result carries as an image block; bigger ones are
/// named by path only (a model reads them from the project if it must).
pub(crate) const MAX_IMAGE_BYTES: u64 = 1024 * 1024;

/// Images one result carries at most; the others are named by path.
const MAX_IMAGES: usize = 4;

/// The image types MCP clients show (and models read).
const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// The answer to a command, `wait`, `input`, `interrupt` or `restart` in
/// `environment`; `before` is the screen this session saw last.
pub(crate) fn outcome(
    environment: &str,
    outcome: &Outcome,
    before: Option<&Screen>,
    structured: bool,
) -> CallToolResult {
    let mut text = outcome.output.clone();
    if !text.is_empty() {
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push('\n');
    }
    let (images, notes) = images(&outcome.files);
    for note in notes {
        text.push_str(&note);
        text.push('\n');
    }
    text.push_str(&outcome.screen.render_changes_since(before));
    let mut blocks = content(text);
    blocks.extend(images);
    let mut result = if outcome.success {
        CallToolResult::success(blocks)
    } else {
        CallToolResult::error(blocks)
    };
    if structured {
        let saved = outcome
            .incidents
            .iter()
            .find_map(|incident| match incident {
                Incident::OutputCapped { saved_to, .. } => Some(saved_to),
                _ => None,
            });
        let mut facts = json!({
            "environment": environment,
            "success": outcome.success,
            "running": outcome.running,
            "truncated": saved.is_some(),
        });
        if let Some(Some(path)) = saved {
            facts["saved_output"] = json!(path.display().to_string());
        }
        if !outcome.files.is_empty() {
            facts["files"] = outcome
                .files
                .iter()
                .map(|f| json!({"path": f.path, "size": f.size, "media_type": f.media_type}))
                .collect();
        }
        result.structured_content = Some(facts);
    }
    result
}

/// The image blocks for the images among `files` (a few, each at most
/// [`MAX_IMAGE_BYTES`]), and a line for each image left out.
fn images(files: &[ProducedFile]) -> (Vec<ContentBlock>, Vec<String>) {
    let mut blocks = Vec::new();
    let mut notes = Vec::new();
    for file in files {
        if !IMAGE_TYPES.contains(&file.media_type.as_str()) {
            continue;
        }
        let why = if file.size > MAX_IMAGE_BYTES {
            format!("{} bytes, over the {MAX_IMAGE_BYTES}-byte limit", file.size)
        } else if blocks.len() >= MAX_IMAGES {
            format!("{MAX_IMAGES} images are attached at most")
        } else {
            match file.read_bounded(MAX_IMAGE_BYTES) {
                Some(bytes) => {
                    let data = base64::engine::general_purpose::STANDARD.encode(bytes);
                    blocks.push(ContentBlock::image(data, file.media_type.clone()));
                    continue;
                }
                None => "it could not be read whole".to_owned(),
            }
        };
        notes.push(format!(
            "[envhost] Image {} is not attached ({why}); it is in the project.",
            file.path
        ));
    }
    (blocks, notes)
}

/// The answer to `screen`: all of it.
pub(crate) fn screen(screen: &Screen) -> CallToolResult {
    CallToolResult::success(content(screen.render_for_humans()))
}

/// A refusal of the call's arguments, as the model reads it.
pub(crate) fn refusal(message: &str) -> CallToolResult {
    CallToolResult::error(content(message.to_owned()))
}

/// The content blocks of a result: the text, trimmed at the end. Images a
/// command produced go after it, here.
fn content(mut text: String) -> Vec<ContentBlock> {
    text.truncate(text.trim_end().len());
    vec![ContentBlock::text(text)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use envhost_core::ScreenSection;
    use std::path::PathBuf;

    fn screen(bash: &str, python: &str) -> Screen {
        let mut screen = Screen::new();
        screen.push("bash", ScreenSection::new(bash));
        screen.push("python", ScreenSection::new(python));
        screen
    }

    fn text(result: &CallToolResult) -> &str {
        result.content[0]
            .as_text()
            .map(|t| t.text.as_str())
            .unwrap()
    }

    #[test]
    fn output_then_the_sections_that_changed() {
        let before = screen("cwd: /p", "no variables");
        let outcome = Outcome {
            output: "hello".into(),
            success: true,
            running: false,
            screen: screen("cwd: /tmp", "no variables"),
            incidents: Vec::new(),
            files: Vec::new(),
        };
        let result = super::outcome("bash", &outcome, Some(&before), false);
        assert_eq!(
            text(&result),
            "hello\n\n==================== BASH ====================\ncwd: /tmp\n\n(unchanged: python)"
        );
        assert_eq!(result.is_error, Some(false));
        assert!(result.structured_content.is_none());
        let first = super::outcome("bash", &outcome, None, false);
        assert!(text(&first).contains("== PYTHON =="));
    }

    #[test]
    fn a_failure_is_an_error_and_the_facts_are_small() {
        let outcome = Outcome {
            output: "exit 2".into(),
            success: false,
            running: false,
            screen: screen("a", "b"),
            incidents: vec![Incident::OutputCapped {
                total_bytes: 1 << 20,
                saved_to: Some(PathBuf::from("/p/.envhost/output/1.txt")),
            }],
            files: Vec::new(),
        };
        let result = super::outcome("bash", &outcome, None, true);
        assert_eq!(result.is_error, Some(true));
        assert_eq!(
            result.structured_content,
            Some(json!({
                "environment": "bash",
                "success": false,
                "running": false,
                "truncated": true,
                "saved_output": "/p/.envhost/output/1.txt",
            }))
        );
    }
}
