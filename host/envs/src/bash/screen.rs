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
//! costs no round trip (only a look at the shell's children, through the
//! caller's `job_alive`, to mark jobs that finished since).

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

    /// The section; `job_alive(pgid)` says whether a job's process group
    /// (as the shell numbers it) still has a process.
    pub fn render(&self, job_alive: &dyn Fn(i32) -> bool) -> String {
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
            text.push_str(&describe_job(job, job_alive));
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
fn describe_job(job: &Job, job_alive: &dyn Fn(i32) -> bool) -> String {
    let mut command: String = job.command.chars().take(MAX_JOB_COMMAND_CHARS).collect();
    if command.len() < job.command.len() {
        command.push('…');
    }
    let state = if job.is_running() {
        if job.pid > 1 && job_alive(job.pid) {
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
            status.render(&|_| true),
            "Bash shell (ready)\n\nAny bash command. Use & for background jobs."
        );
    }

    #[test]
    fn the_section_without_and_with_jobs() {
        let mut status = ShellStatus::new("/home/user/project".into());
        status.used = true;
        assert_eq!(
            status.render(&|_| true),
            "Working directory: /home/user/project\nLast exit code: 0\n\nAny bash command. Use & for background jobs."
        );
        status.last_exit_code = 2;
        status.jobs = vec![
            job(1, 40, "Running", "./server"),
            job(2, 41, "Stopped", "cat"),
            job(3, 42, "Running", "sleep 1"),
        ];
        assert_eq!(
            status.render(&|group| group == 40),
            "Working directory: /home/user/project\nLast exit code: 2\n\
             Background jobs: [1] 40 ./server\n                 \
             [2] 41 cat (Stopped)\n                 \
             [3] 42 sleep 1 (finished)\n\
             \nAny bash command. Use & for background jobs."
        );
    }

    #[test]
    fn an_ended_shell_says_so() {
        let mut status = ShellStatus::new("/p".into());
        status.used = true;
        status.ended = Some("The shell exited with code 3.".into());
        assert!(
            status
                .render(&|_| true)
                .contains("Last exit code: 0\nThe shell exited with code 3.\n\nAny bash")
        );
    }
}
