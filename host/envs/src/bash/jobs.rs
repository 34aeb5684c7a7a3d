//! The shell's background jobs, read from its own job table.
//!
//! The prompt report carries the output of `jobs -l` (background jobs are
//! the shell's, not tracked by the host). This module parses that text
//! into [`Job`]s. It does not run anything.

/// One line of `jobs -l`, with its continuation lines folded in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// `%1` is number 1.
    pub number: u32,
    /// The process group leader (the first process of the pipeline).
    pub pid: i32,
    /// `Running`, `Stopped`, `Stopped (tty input)`, `Done`, `Exit 1`, ...
    pub state: String,
    /// The command as bash shows it, on one line, without the final `&`.
    pub command: String,
}

impl Job {
    pub fn is_running(&self) -> bool {
        self.state == "Running"
    }
}

/// Parses the output of `jobs -l`.
pub fn parse_jobs(text: &str) -> Vec<Job> {
    let mut jobs: Vec<Job> = Vec::new();
    for line in text.lines() {
        let line = line.trim_end_matches('\r');
        if let Some(job) = parse_job_line(line) {
            jobs.push(job);
        } else if let Some(job) = jobs.last_mut() {
            append_continuation(job, line);
        }
    }
    for job in &mut jobs {
        let trimmed = job.command.trim_end();
        let trimmed = trimmed.strip_suffix('&').unwrap_or(trimmed).trim_end();
        job.command = trimmed.to_owned();
    }
    jobs
}

/// `[1]+ 22554 Running                 sleep 100`
fn parse_job_line(line: &str) -> Option<Job> {
    let rest = line.strip_prefix('[')?;
    let close = rest.find(']')?;
    let number = rest[..close].parse().ok()?;
    let rest = rest[close + 1..]
        .trim_start_matches(['+', '-'])
        .trim_start();
    let pid_end = rest.find(|c: char| !c.is_ascii_digit())?;
    let pid = rest[..pid_end].parse().ok()?;
    let rest = rest[pid_end..].trim_start();
    // The state is padded to a fixed width; states may contain single
    // spaces ("Stopped (tty input)", "Exit 1"), so split at the padding.
    let (state, command) = match rest.find("  ") {
        Some(gap) => (&rest[..gap], rest[gap..].trim_start()),
        None => rest.split_once(' ').unwrap_or((rest, "")),
    };
    Some(Job {
        number,
        pid,
        state: state.trim().to_owned(),
        command: command.to_owned(),
    })
}

/// A pipeline member (`     22555                       | cat &`) or a line
/// of a multi-line command.
fn append_continuation(job: &mut Job, line: &str) {
    let trimmed = line.trim();
    if trimmed.is_empty() {
        return;
    }
    let after_pid = trimmed.trim_start_matches(|c: char| c.is_ascii_digit());
    let text = if after_pid.len() < trimmed.len() && after_pid.starts_with(' ') {
        after_pid.trim_start()
    } else {
        trimmed
    };
    job.command.push(' ');
    job.command.push_str(text);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_single_pipeline_and_multiline_jobs() {
        let text = "[1]- 22554 Running                 sleep 100\r\n     22555                       | cat &\r\n[2]+ 22574 Running                 for i in 1 2;\r\ndo\r\n    sleep 50;\r\ndone &\r\n[3]  22580 Stopped (tty input)     cat\r\n[4]  22590 Exit 1                  false\r\n";
        let jobs = parse_jobs(text);
        assert_eq!(
            jobs,
            vec![
                Job {
                    number: 1,
                    pid: 22554,
                    state: "Running".into(),
                    command: "sleep 100 | cat".into()
                },
                Job {
                    number: 2,
                    pid: 22574,
                    state: "Running".into(),
                    command: "for i in 1 2; do sleep 50; done".into()
                },
                Job {
                    number: 3,
                    pid: 22580,
                    state: "Stopped (tty input)".into(),
                    command: "cat".into()
                },
                Job {
                    number: 4,
                    pid: 22590,
                    state: "Exit 1".into(),
                    command: "false".into()
                },
            ]
        );
        assert!(jobs[0].is_running());
        assert!(!jobs[2].is_running());
    }

    #[test]
    fn no_jobs_is_empty() {
        assert!(parse_jobs("").is_empty());
    }
}
