//! sqlite3 as an environment: the agent sends SQL and dot-commands, and
//! gets what sqlite3 prints before its next prompt. The operator must grant
//! the program (`programs = ["sqlite3"]` in the plugin's entry of
//! `env/envhost.toml`). sqlite3 runs in the project folder, so
//! `.open data/app.db` opens a file of the project.

use envhost_sdk::Interactive;

#[derive(Default)]
struct Sqlite;

impl Interactive for Sqlite {
    // -interactive: prompts even if the terminal looked odd to it.
    const COMMAND: &'static str = "sqlite3 -interactive";
    // The main prompt and the continuation prompt of a statement that
    // spans lines: each line sent waits for one of them.
    const PROMPT: &'static str = r"(sqlite|   \.\.\.)> ";
    const DESCRIPTION: &'static str = "SQLite shell";
    const SETUP: &'static [&'static str] = &[".headers on", ".mode table"];

    /// sqlite3 reports errors in its output and carries on.
    fn failed(&self, output: &str) -> bool {
        output.lines().any(|line| {
            ["Parse error", "Runtime error", "Error:"]
                .iter()
                .any(|start| line.starts_with(start))
        })
    }

    fn usage(&self) -> String {
        "Send SQL statements (end them with `;`) and dot-commands, one per line: `.open FILE` opens a database of the project (the default is an in-memory one), `.tables` and `.schema` describe it. The connection persists across commands."
            .to_owned()
    }
}

envhost_sdk::export_interactive!(Sqlite);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_errors_fail_the_command() {
        assert!(Sqlite.failed("Parse error: near \"selec\": syntax error\n"));
        assert!(Sqlite.failed("1\nRuntime error: no such table\n"));
        assert!(!Sqlite.failed("+---+\n| 1 |\n+---+\n"));
    }
}
