//! The bash section of the screen:
//!
//! ```text
//! Working directory: /home/user/project
//! Last exit code: 0
//! Background jobs: [1] 12345 ./server
//!
//! Any bash command. Use & for background jobs.
//! ```
//!
//! Before the first command, a minimal form, `Bash shell (ready)`,
//! with the same one-line help under it. This module renders from the state
//! recorded at the last prompt; it never talks to the shell, so the screen
//! costs no round trip (only a `kill(pgid, 0)` per running job, to mark
//! jobs that finished since).

use std::path::PathBuf;

use super::jobs::Job;

pub const HELP: &str = "Any bash command. Use & for background jobs.";
pub const READY: &str = "Bash shell (ready)";

/// Longest job command shown; longer ones are cut with `…`.
const MAX_JOB_COMMAND_CHARS: usize = 100;

/// What the screen shows, as of the last prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellStatus {
    /// Set by the first command.
    pub used: bool,
    pub cwd: PathBuf,
    pub last_exit_code: i32,
    pub jobs: Vec<Job>,
    /// Set when the shell ended; cleared when the next one starts.
    pub ended: Option<String>,
}

impl ShellStatus {
    pub fn new(cwd: PathBuf) -> Self {
        ShellStatus {
            used: false,
            cwd,
            last_exit_code: 0,
            jobs: Vec::new(),
            ended: None,
        }
    }

    pub fn render(&self) -> String {
        if !self.used {
            return format!("{READY}\n\n{HELP}");
        }
        let mut text = format!(
            "Working directory: {}\nLast exit code: {}\n",
            self.cwd.display(),
            self.last_exit_code
        );
        let label = "Background jobs: ";
        for (index, job) in self.jobs.iter().enumerate() {
            if index == 0 {
                text.push_str(label);
            } else {
                text.push_str(&" ".repeat(label.len()));
            }
            text.push_str(&describe_job(job));
            text.push('\n');
        }
        if let Some(ended) = &self.ended {
            text.push_str(ended);
            text.push('\n');
        }
        text.push('\n');
        text.push_str(HELP);
        text
    }
}

/// `[1] 12345 ./server`, with the state when it is not simply running.
fn describe_job(job: &Job) -> String {
    let mut command: String = job.command.chars().take(MAX_JOB_COMMAND_CHARS).collect();
    if command.len() < job.command.len() {
        command.push('…');
    }
    let state = if job.is_running() {
        if job.group_exists() {
            None
        } else {
            Some("finished")
        }
    } else {
        Some(job.state.as_str())
    };
    match state {
        None => format!("[{}] {} {command}", job.number, job.pid),
        Some(state) => format!("[{}] {} {command} ({state})", job.number, job.pid),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(number: u32, pid: i32, state: &str, command: &str) -> Job {
        Job {
            number,
            pid,
            state: state.into(),
            command: command.into(),
        }
    }

    #[test]
    fn minimal_form_before_first_use() {
        let status = ShellStatus::new("/p".into());
        assert_eq!(
            status.render(),
            "Bash shell (ready)\n\nAny bash command. Use & for background jobs."
        );
    }

    #[test]
    fn the_section_without_and_with_jobs() {
        let mut status = ShellStatus::new("/home/user/project".into());
        status.used = true;
        assert_eq!(
            status.render(),
            "Working directory: /home/user/project\nLast exit code: 0\n\nAny bash command. Use & for background jobs."
        );
        let me = std::process::id() as i32;
        // This test's own process group exists; a group of pid 2^22+ does not.
        let own_group = nix::unistd::getpgrp().as_raw();
        status.last_exit_code = 2;
        status.jobs = vec![
            job(1, own_group, "Running", "./server"),
            job(2, me, "Stopped", "cat"),
            job(3, 4_194_300, "Running", "sleep 1"),
        ];
        assert_eq!(
            status.render(),
            format!(
                "Working directory: /home/user/project\nLast exit code: 2\n\
                 Background jobs: [1] {own_group} ./server\n                 \
                 [2] {me} cat (Stopped)\n                 \
                 [3] 4194300 sleep 1 (finished)\n\
                 \nAny bash command. Use & for background jobs."
            )
        );
    }

    #[test]
    fn an_ended_shell_says_so() {
        let mut status = ShellStatus::new("/p".into());
        status.used = true;
        status.ended = Some("The shell exited with code 3.".into());
        assert!(
            status
                .render()
                .contains("Last exit code: 0\nThe shell exited with code 3.\n\nAny bash")
        );
    }
}
