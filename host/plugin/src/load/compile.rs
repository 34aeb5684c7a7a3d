//! Compiling a plugin to machine code, bounded in time and memory.
//!
//! Cranelift's time and memory grow with the component: a 56 MB component
//! took 33 s and 1.6 GB, and nothing in wasmtime stops a compilation once
//! started. So the host does not compile in its own process: it runs a copy
//! of its own binary (`/proc/self/exe compile-plugin`), hands it the
//! component on stdin and reads the compiled code (wasmtime's serialized
//! form, for the same engine configuration) from its stdout. That process
//! runs with a limit on its data memory (`RLIMIT_DATA`) and on its CPU time
//! (`RLIMIT_CPU`), is killed when its wall-clock time (twice the CPU
//! limit) runs out, and dies with the host (`PR_SET_PDEATHSIG`). A
//! component too slow or too large to compile is refused in a sentence;
//! the host and every other plugin carry on.
//!
//! It carries nothing of the host's: an empty environment (the host's
//! holds the secrets withheld from the environments), and it makes itself
//! not dumpable before it reads the component, so that no process of its
//! user can read its memory.
//!
//! The same process compiles either tier's code (`compile-plugin
//! --baseline` for Winch's). A compilation for the cache made while the
//! plugin already runs on baseline code can be stopped (the host is
//! shutting down): the compiler is killed and nothing is returned.
//!
//! Benchmarks and unit tests, which are not the `envhost` binary, compile
//! in-process ([`Compiler::InProcess`]). This module must not cache
//! (`cache`) or decide what to load (`loader`).

use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use envhost_core::text;
use wasmtime::Engine;

use crate::engine_config::{Tier, engine_config};

/// The hidden subcommand of the `envhost` binary that compiles.
pub const COMPILE_SUBCOMMAND: &str = "compile-plugin";

/// Largest compiled code read back (a Python or JavaScript plugin's is
/// 35-37 MB).
const MAX_COMPILED_BYTES: u64 = 1 << 30;

/// Most bytes of the compiler's stderr kept, for the refusal's detail.
const MAX_STDERR_BYTES: u64 = 16 * 1024;

/// How plugins are compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compiler {
    /// In this process, unbounded (benchmarks, unit tests).
    InProcess,
    /// In a process running `program compile-plugin`, bounded.
    Bounded {
        /// The envhost binary (`/proc/self/exe`).
        program: PathBuf,
        /// CPU time the compilation may use, all its threads together; its
        /// wall-clock time may be twice that.
        cpu_time: Duration,
        /// Bytes of data memory the compiling process may use.
        memory: u64,
    },
}

/// Why a component was not compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// wasmtime refused it: not a valid component, or unsupported features.
    #[error("{0}")]
    Invalid(String),
    #[error(
        "compiling it took longer than the {} the host allows (--plugin-compile-time)",
        text::duration(*limit)
    )]
    TooSlow { limit: Duration },
    #[error(
        "compiling it needed more memory than the {} the host allows (--plugin-compile-memory)",
        text::bytes(*limit)
    )]
    TooLarge { limit: u64 },
    /// The compiler could not be run, or failed for another reason.
    #[error("the compiler failed: {0}")]
    Failed(String),
    /// The host stopped it (it is shutting down).
    #[error("the compilation was stopped: the host is shutting down")]
    Stopped,
}

/// Compiles `bytes` with `compiler` for `engine`, which is the engine of
/// `tier`'s code: the serialized code. Setting `stop` ends a bounded
/// compilation early ([`CompileError::Stopped`]).
pub fn compile(
    compiler: &Compiler,
    engine: &Engine,
    tier: Tier,
    bytes: &[u8],
    stop: Option<&AtomicBool>,
) -> Result<Vec<u8>, CompileError> {
    match compiler {
        Compiler::InProcess => engine
            .precompile_component(bytes)
            .map_err(|err| CompileError::Invalid(crate::failure::error_chain(&err))),
        Compiler::Bounded {
            program,
            cpu_time,
            memory,
        } => compile_bounded(program, *cpu_time, *memory, tier, bytes, stop),
    }
}

fn compile_bounded(
    program: &PathBuf,
    cpu_time: Duration,
    memory: u64,
    tier: Tier,
    bytes: &[u8],
    stop: Option<&AtomicBool>,
) -> Result<Vec<u8>, CompileError> {
    let mut command = compiler_command(program, cpu_time, memory, tier);
    // Registered with the host's reaper, which would otherwise take the
    // compiler's exit status for an orphan's.
    let (mut child, _managed) =
        envhost_process::spawn_managed(|| command.spawn(), |child| Some(child.id())).map_err(
            |err| CompileError::Failed(format!("cannot start {}: {err}", program.display())),
        )?;
    let ran = supervise(&mut child, bytes, cpu_time, stop)?;
    verdict(ran, cpu_time, memory)
}

/// The compiler's command: this binary's compile subcommand, with nothing
/// of the host's environment, dying with the host, its memory and CPU
/// time bounded.
fn compiler_command(program: &PathBuf, cpu_time: Duration, memory: u64, tier: Tier) -> Command {
    let cpu_seconds = cpu_time.as_secs().max(1);
    let mut command = Command::new(program);
    command.arg(COMPILE_SUBCOMMAND);
    if tier == Tier::Baseline {
        command.arg(BASELINE_FLAG);
    }
    // Nothing of the host's environment: the compiler needs no variable,
    // and the host's holds the secrets withheld from the environments,
    // which would otherwise sit in this process's memory (its copy of
    // the environment) for as long as it compiles.
    command
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: only async-signal-safe system calls (prctl, setrlimit)
    // between fork and exec.
    unsafe {
        command.pre_exec(move || {
            use nix::sys::resource::{Resource, setrlimit};
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)?;
            setrlimit(Resource::RLIMIT_DATA, memory, memory)?;
            // SIGXCPU at the soft limit, SIGKILL at the hard one.
            setrlimit(Resource::RLIMIT_CPU, cpu_seconds, cpu_seconds + 5)?;
            Ok(())
        });
    }
    command
}

/// How the compiler's run ended, and what it wrote.
struct CompilerRun {
    status: std::io::Result<std::process::ExitStatus>,
    /// Killed past its deadline, or stopped.
    killed: bool,
    /// Stopped because the host asked (`stop`).
    stopped: bool,
    output: std::io::Result<Vec<u8>>,
    errors: String,
}

/// Feeds the compiler `bytes`, reads its output and errors, and waits for
/// it: at most twice its CPU time, or until `stop` is set.
fn supervise(
    child: &mut std::process::Child,
    bytes: &[u8],
    cpu_time: Duration,
    stop: Option<&AtomicBool>,
) -> Result<CompilerRun, CompileError> {
    let (Some(mut stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(CompileError::Failed("no pipes to the compiler".to_owned()));
    };
    Ok(std::thread::scope(|scope| {
        scope.spawn(move || {
            // The compiler reads it all before it starts; a compiler that
            // died early closes the pipe, which ends this write.
            let _ = stdin.write_all(bytes);
        });
        let output = scope.spawn(move || {
            let mut output = Vec::new();
            stdout
                .take(MAX_COMPILED_BYTES)
                .read_to_end(&mut output)
                .map(|_| output)
        });
        let errors = scope.spawn(move || {
            let mut text = Vec::new();
            let _ = stderr.take(MAX_STDERR_BYTES).read_to_end(&mut text);
            String::from_utf8_lossy(&text).into_owned()
        });
        let deadline = Instant::now() + cpu_time * 2;
        let mut killed = false;
        let mut stopped = false;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Ok(status),
                Ok(None) if stop.is_some_and(|stop| stop.load(Ordering::SeqCst)) => {
                    stopped = true;
                    let _ = child.kill();
                    let _ = child.wait();
                }
                Ok(None) if Instant::now() >= deadline => {
                    killed = true;
                    let _ = child.kill();
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                Err(err) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break Err(err);
                }
            }
        };
        CompilerRun {
            status,
            killed: killed || stopped,
            stopped,
            output: output.join().unwrap_or_else(|_| Ok(Vec::new())),
            errors: errors.join().unwrap_or_default(),
        }
    }))
}

/// The compiled code, or what the compiler's ending says went wrong.
fn verdict(ran: CompilerRun, cpu_time: Duration, memory: u64) -> Result<Vec<u8>, CompileError> {
    let CompilerRun {
        status,
        killed,
        stopped,
        output,
        errors,
    } = ran;
    if stopped {
        return Err(CompileError::Stopped);
    }
    let status = status.map_err(|err| CompileError::Failed(format!("waiting for it: {err}")))?;
    let errors = errors.trim().to_owned();
    if killed || status.signal() == Some(libc_signal(nix::sys::signal::Signal::SIGXCPU)) {
        return Err(CompileError::TooSlow { limit: cpu_time });
    }
    let lower = errors.to_lowercase();
    if !status.success()
        && [
            "memory allocation of ",
            "cannot allocate memory",
            "out of memory",
        ]
        .iter()
        .any(|sign| lower.contains(sign))
    {
        return Err(CompileError::TooLarge { limit: memory });
    }
    match status.code() {
        Some(0) => output.map_err(|err| CompileError::Failed(format!("reading its output: {err}"))),
        Some(INVALID_EXIT) => Err(CompileError::Invalid(errors)),
        _ if status.signal() == Some(libc_signal(nix::sys::signal::Signal::SIGKILL)) => {
            // The hard CPU limit, or the kernel out of memory.
            Err(CompileError::TooSlow { limit: cpu_time })
        }
        _ => Err(CompileError::Failed(format!(
            "it ended with {status}{}",
            if errors.is_empty() {
                String::new()
            } else {
                format!(": {errors}")
            }
        ))),
    }
}

fn libc_signal(signal: nix::sys::signal::Signal) -> i32 {
    signal as i32
}

/// The compiler's exit code for a component wasmtime refused.
const INVALID_EXIT: i32 = 3;

/// The flag of `compile-plugin` that asks for baseline (Winch) code.
pub const BASELINE_FLAG: &str = "--baseline";

/// `envhost compile-plugin [--baseline]`: reads a component on stdin,
/// writes its compiled code (for the sandbox's engine configuration of
/// that tier) on stdout. The exit code says what happened: 0 compiled, 3
/// refused by wasmtime (its words on stderr), 1 anything else.
pub fn serve_compile(baseline: bool) -> ExitCode {
    // Not dumpable before it reads anything: other processes of its user
    // (the commands the host runs) may then neither trace it nor read its
    // memory or descriptors through /proc. Set here, not between fork and
    // exec, because exec makes a process dumpable again.
    if let Err(err) = nix::sys::prctl::set_dumpable(false) {
        eprintln!("cannot make the compiler undumpable: {err}");
        return ExitCode::FAILURE;
    }
    let tier = if baseline {
        Tier::Baseline
    } else {
        Tier::Optimised
    };
    let mut bytes = Vec::new();
    if let Err(err) = std::io::stdin().lock().read_to_end(&mut bytes) {
        eprintln!("cannot read the component: {err}");
        return ExitCode::FAILURE;
    }
    let engine = match Engine::new(&engine_config(tier)) {
        Ok(engine) => engine,
        Err(err) => {
            eprintln!("cannot configure the engine: {err}");
            return ExitCode::FAILURE;
        }
    };
    match engine.precompile_component(&bytes) {
        Ok(compiled) => {
            let mut stdout = std::io::stdout().lock();
            if stdout
                .write_all(&compiled)
                .and_then(|()| stdout.flush())
                .is_err()
            {
                return ExitCode::FAILURE;
            }
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("{}", crate::failure::error_chain(&err));
            ExitCode::from(INVALID_EXIT as u8)
        }
    }
}
