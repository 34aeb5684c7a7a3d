"""The `tasks` environment: a task board an agent plans its work on, as an
envhost plugin written in Python (componentize-py).

The agent adds tasks (a whole plan at once, one per line), marks them in
progress, done or blocked, and attaches notes; the board is its screen
section, so the plan stays in view after every command. The commands are
described to the host (`describe`), which routes them by first word and
renders their help: LONG until a command is used, SHORT after.

This module is the WIT adapter: it parses command text, calls the board and
wraps the answers in the WIT records. The board's rules live in `board.py`.
A `UsageError` becomes a failed response and leaves the board as it was;
any other exception is a bug and is deliberately not caught: the call traps,
the host reports the traceback and starts a fresh instance.

It builds the world `full-plugin` of wit/v0.2.1 (see
scripts/build-polyglot-plugins). Besides `Environment` it exports
`ScreenChanges`, answering `when-called`: the board is drawn from the
board alone (no clock, no files), so it changes only during the host's
calls, and the host stops asking for it after commands to other
environments. It requests nothing
(`Capabilities`), and it keeps its board (`State`): the snapshot is the
whole board as compact JSON (`Board.snapshot` in board.py), which the host
takes after every command that returned and puts back into a fresh instance
after a trap and when it resumes a saved session (`--resume`). A crash
therefore costs at most the command that crashed.
"""

from wit_world import exports
from wit_world.exports.environment import (
    CommandResponse,
    CommandSpec,
    Description,
    ScreenSection,
)
from wit_world.exports.screen_changes import When
from componentize_py_types import Err

from board import Board, SnapshotError, UsageError
from command import split_command

SUMMARY = "A task board to plan work on: add tasks, track progress and notes; the plan stays on screen"

# The board's own lines; the host adds the commands' help below them.
SCREEN_LINES = 40


class Command:
    """One command: what the host shows about it, and how to run it."""

    def __init__(self, signature, run, description, example="", summary=None, simple=False):
        self.signature = signature
        self.name = signature.split()[0]
        self.run = run
        self.spec = CommandSpec(
            signature=signature,
            description=description,
            summary=summary,
            example=example,
            simple=simple,
        )


def task_number(args, command):
    """The task number at the start of `args`, and the rest of the line."""
    word, rest = (args.split(None, 1) + ["", ""])[:2]
    digits = word.lstrip("#")
    if not digits.isdigit():
        shown = f" (got {word!r})" if word else ""
        raise UsageError(
            f"{command} needs a task number{shown}, e.g. `{command} 2`; the board shows each task's number."
        )
    return int(digits), rest.strip()


def with_body(first, body):
    """The rest of the first line and the lines after it, as one text."""
    return "\n".join(part for part in (first, body) if part.strip())


def add(board, args, body):
    return board.add([args, *body.splitlines()])


def start(board, args, body):
    number, _ = task_number(args, "start")
    return board.start(number)


def done(board, args, body):
    number, note = task_number(args, "done")
    return board.done(number, with_body(note, body))


def block(board, args, body):
    number, reason = task_number(args, "block")
    return board.block(number, with_body(reason, body))


def note(board, args, body):
    number, text = task_number(args, "note")
    return board.note(number, with_body(text, body))


def show(board, args, body):
    number, _ = task_number(args, "show")
    return board.show(number)


def edit(board, args, body):
    number, title = task_number(args, "edit")
    return board.rename(number, title)


def drop(board, args, body):
    number, _ = task_number(args, "drop")
    return board.drop(number)


def clear(board, args, body):
    return board.clear()


COMMANDS = [
    Command(
        "add <title>",
        add,
        "Add a task at the end of the board.\n"
        "Each further line adds one more task, so a whole plan goes in at once.",
        example="add Reproduce the crash\nWrite a failing test\nFix the parser",
        summary="Add a task; each further line adds another",
    ),
    Command(
        "start <n>",
        start,
        "Mark task n as in progress (this also reopens a blocked or done task).",
        example="start 1",
    ),
    Command(
        "done <n> [note]",
        done,
        "Mark task n as done, with an optional note on the outcome.",
        example="done 1 crashes on an empty header, see test_empty_header",
    ),
    Command(
        "note <n> <text>",
        note,
        "Attach a note to task n: a finding, a file, a command to remember.\n"
        "The newest note shows on the board; lines after the first belong to the note.",
        example="note 3 the bug is in parse_header (src/lexer.rs:88)",
        summary="Attach a note to task n",
    ),
    Command(
        "block <n> <reason>",
        block,
        "Mark task n as blocked and say why; `start <n>` when it can go on.",
        example="block 3 waiting for the staging credentials",
    ),
    Command("show <n>", show, "Show task n with all its notes.", simple=True),
    Command("edit <n> <title>", edit, "Give task n a new title.", simple=True),
    Command("drop <n>", drop, "Remove task n from the board.", simple=True),
    Command("clear", clear, "Remove every done task from the board.", simple=True),
]

BY_NAME = {command.name: command for command in COMMANDS}


# The board lives as long as the component instance: componentize-py
# creates a new `Environment` object for every call, so state kept on
# `self` would be gone by the next one. After a trap the host starts a
# fresh instance, and with it an empty board, which `State.restore` then
# replaces with the board of the last snapshot. Read it as `BOARD` at each
# call (never bind it elsewhere): restore rebinds the name.
BOARD = Board()


class Environment(exports.Environment):
    """The component's export: the four functions of the WIT interface."""

    def describe(self) -> Description:
        return Description(summary=SUMMARY, commands=[c.spec for c in COMMANDS])

    def handle_command(self, command: str) -> CommandResponse:
        name, args, body = split_command(command)
        # The board ignores newlines that end a command's body.
        body = (body or "").rstrip("\n")
        # The host sends only described commands; answer anything else
        # rather than trap on it.
        chosen = BY_NAME.get(name)
        if chosen is None:
            known = ", ".join(BY_NAME)
            return CommandResponse(output=f"Unknown command: {name}\nAvailable: {known}", success=False)
        try:
            output = chosen.run(BOARD, args, body)
        except UsageError as problem:
            return CommandResponse(output=str(problem), success=False)
        return CommandResponse(output=output, success=True)

    def get_screen(self) -> ScreenSection:
        return ScreenSection(content=BOARD.screen(), max_lines=SCREEN_LINES)

    def shutdown(self) -> None:
        pass



class Capabilities(exports.Capabilities):
    """Asks the operator for nothing: the board needs no files, programs or
    network."""

    def requested(self) -> list:
        return []


class State(exports.State):
    """Keeps the board: the host asks for `snapshot` after every command
    that returned and hands it to `restore` on a fresh instance (after a
    trap, or when it resumes a saved session)."""

    def snapshot(self) -> bytes:
        return BOARD.snapshot()

    def restore(self, snapshot: bytes) -> None:
        global BOARD
        try:
            BOARD = Board.from_snapshot(snapshot)
        except SnapshotError as refused:
            # componentize-py turns `Err(value)` into the `err` of
            # restore's `result<_, string>`; the board stays empty.
            raise Err(str(refused)) from None


class ScreenChanges(exports.ScreenChanges):
    """The screen is `BOARD.screen()`: it changes only when a command
    changes the board."""

    def screen_changes(self) -> When:
        return When.WHEN_CALLED
