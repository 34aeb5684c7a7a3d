//! The GDB environment: a command, a prompt and a description.
//! The operator must grant the program (`programs = ["gdb"]` in the
//! plugin's entry of `env/envhost.toml`); every line the agent sends is
//! typed into gdb and answered with what gdb prints before its next prompt.

#[derive(Default)]
struct Gdb;

impl envhost_sdk::Interactive for Gdb {
    // -q: no banner; -nx: no .gdbinit files, the same gdb everywhere.
    const COMMAND: &'static str = "gdb -q -nx";
    const PROMPT: &'static str = r"\(gdb\) ";
    const DESCRIPTION: &'static str = "GDB debugger";
    // No pager prompts, no y/n questions, no lookups on the network: any of
    // them would stop gdb waiting for an answer nobody types.
    const SETUP: &'static [&'static str] = &[
        "set pagination off",
        "set confirm off",
        "set width 0",
        "set debuginfod enabled off",
    ];
}

envhost_sdk::export_interactive!(Gdb);
