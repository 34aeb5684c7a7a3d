"""The task board itself: tasks, their states and notes, and the text the
agent sees. Plain Python with no WebAssembly in sight, so it is tested with
the machine's own python3 (`python3 -m unittest` in plugins/tasks).

This module owns the board's rules and wording; it must not know about the
host, the WIT bindings or how commands are parsed (`app.py` does that).
"""

import json
from dataclasses import dataclass, field

TODO = "todo"
DOING = "doing"
BLOCKED = "blocked"
DONE = "done"

MARKERS = {TODO: "[ ]", DOING: "[>]", BLOCKED: "[!]", DONE: "[x]"}

# The screen is read after every command: keep it short. Done tasks beyond
# the most recent few are summarised on one line, and a note is cut to one
# screen line.
DONE_SHOWN = 5
NOTE_WIDTH = 70


class UsageError(Exception):
    """A command the board cannot carry out. The message says why and what
    to do instead; the board is unchanged."""


class SnapshotError(Exception):
    """Bytes `Board.from_snapshot` cannot read back into a board. The
    message is one sentence saying why and what the agent can do."""


# The snapshot's format: compact JSON (UTF-8) of
#   {"version": 1, "next_number": 4, "finished": 1,
#    "tasks": [{"number": 1, "title": "...", "status": "done",
#               "notes": ["..."], "blocked_because": "", "done_order": 1}, ...]}
# with the tasks in board order. A change that an older build could not
# read gets a new version; `from_snapshot` refuses versions it does not
# know rather than guess.
SNAPSHOT_VERSION = 1


@dataclass
class Task:
    number: int
    title: str
    status: str = TODO
    notes: list = field(default_factory=list)
    blocked_because: str = ""
    # Order in which tasks were finished, for showing the latest ones.
    done_order: int = 0

    def line(self):
        text = f"{MARKERS[self.status]} {self.number}. {self.title}"
        if self.status == BLOCKED and self.blocked_because:
            text += f" (blocked: {shorten(self.blocked_because)})"
        elif self.notes:
            text += f" (note: {shorten(self.notes[-1])})"
        return text


def shorten(text, width=NOTE_WIDTH):
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 3].rstrip() + "..."


def _changes(method):
    """Marks a command that may change the board: the kept snapshot goes."""

    def changing(self, *args, **kwargs):
        self._snapshot = None
        return method(self, *args, **kwargs)

    changing.__name__ = method.__name__
    changing.__doc__ = method.__doc__
    return changing


class Board:
    def __init__(self):
        self.tasks = {}
        self.next_number = 1
        self.finished = 0
        # The last snapshot's bytes, until a command that may change the
        # board (`_changes`): the host asks after every command, and most
        # commands an agent sends between changes only read.
        self._snapshot = None

    # The board as bytes, and back: what the host keeps across a trap and a
    # restart (`State` in app.py).

    def snapshot(self):
        """Everything the board holds as compact JSON bytes, so that
        `Board.from_snapshot` gives a board that cannot be told apart from
        this one (the next task number included)."""
        if self._snapshot is None:
            self._snapshot = self._encode()
        return self._snapshot

    def _encode(self):
        data = {
            "version": SNAPSHOT_VERSION,
            "next_number": self.next_number,
            "finished": self.finished,
            "tasks": [
                {
                    "number": t.number,
                    "title": t.title,
                    "status": t.status,
                    "notes": list(t.notes),
                    "blocked_because": t.blocked_because,
                    "done_order": t.done_order,
                }
                for t in self.tasks.values()
            ],
        }
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_snapshot(cls, data):
        """The board `snapshot` gave `data` for. Raises SnapshotError when
        the bytes are not a snapshot this board can read, saying why and
        what to do (one sentence, no full stop: the host quotes it inside
        its own). Empty bytes (no state) are an empty board."""
        board = cls()
        if not data:
            return board
        try:
            board._read(data)
        except SnapshotError as err:
            raise SnapshotError(f"{err}; `add` puts the plan back on the empty board") from None
        return board

    def _read(self, data):
        """Fills this (new) board from `data`, or raises SnapshotError."""
        try:
            value = json.loads(bytes(data).decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as err:
            raise SnapshotError(f"the snapshot is not the JSON the task board writes ({err})") from None
        if not isinstance(value, dict):
            raise SnapshotError(f"the snapshot is {_json_kind(value)}, not the JSON object the task board writes")
        version = value.get("version")
        if "version" not in value:
            raise SnapshotError("the snapshot has no format version, so it is not one the task board wrote")
        if type(version) is not int or version != SNAPSHOT_VERSION:
            raise SnapshotError(
                f"the snapshot has format version {json.dumps(version)}, and this build of the task board "
                f"reads only version {SNAPSHOT_VERSION}"
            )
        self.next_number = _count(value, "next_number", "the snapshot", least=1)
        self.finished = _count(value, "finished", "the snapshot")
        tasks = value.get("tasks")
        if not isinstance(tasks, list):
            raise SnapshotError(f"the snapshot's tasks are {_json_kind(tasks)}, not a list")
        for index, item in enumerate(tasks, 1):
            task = _task(item, f"task {index} of the snapshot")
            if task.number in self.tasks:
                raise SnapshotError(f"the snapshot holds task {task.number} twice")
            if task.number >= self.next_number:
                raise SnapshotError(
                    f"the snapshot holds task {task.number} but numbers the next task "
                    f"{self.next_number}, which would reuse a number"
                )
            self.tasks[task.number] = task

    # Commands. Each returns the text of a successful response or raises
    # UsageError.

    @_changes
    def add(self, titles):
        titles = [" ".join(t.split()) for t in titles]
        titles = [t for t in titles if t]
        if not titles:
            raise UsageError(
                "add needs a task title, e.g. `add Write the parser`; "
                "put more tasks on the following lines to add several at once."
            )
        added = []
        for title in titles:
            task = Task(self.next_number, title)
            self.tasks[task.number] = task
            self.next_number += 1
            added.append(task)
        if len(added) == 1:
            return f"Added {added[0].line()}"
        return f"Added {len(added)} tasks:\n" + "\n".join(t.line() for t in added)

    @_changes
    def start(self, number):
        task = self.task(number)
        if task.status == DOING:
            raise UsageError(f"Task {task.number} is already in progress.")
        was = task.status
        task.status = DOING
        task.blocked_because = ""
        verb = "Resumed" if was in (BLOCKED, DONE) else "Started"
        return f"{verb} {task.line()}"

    @_changes
    def done(self, number, note=""):
        task = self.task(number)
        if task.status == DONE:
            raise UsageError(f"Task {task.number} is already done.")
        task.status = DONE
        task.blocked_because = ""
        self.finished += 1
        task.done_order = self.finished
        if note.strip():
            task.notes.append(note.strip())
        return f"Done {task.line()}\n{self.progress()}"

    @_changes
    def block(self, number, reason):
        task = self.task(number)
        reason = " ".join(reason.split())
        if not reason:
            raise UsageError(
                f"block needs a reason, e.g. `block {task.number} waiting for the API key`."
            )
        if task.status == DONE:
            raise UsageError(
                f"Task {task.number} is done; `start {task.number}` reopens it first."
            )
        task.status = BLOCKED
        task.blocked_because = reason
        return f"Blocked {task.line()}"

    @_changes
    def note(self, number, text):
        task = self.task(number)
        text = text.strip()
        if not text:
            raise UsageError(
                f"note needs some text, e.g. `note {task.number} the bug is in lexer.rs:88`."
            )
        task.notes.append(text)
        return f"Noted on task {task.number} ({len(task.notes)} note{plural(task.notes)})."

    @_changes
    def rename(self, number, title):
        task = self.task(number)
        title = " ".join(title.split())
        if not title:
            raise UsageError(
                f"edit needs the new title, e.g. `edit {task.number} Fix the lexer`."
            )
        task.title = title
        return f"Renamed {task.line()}"

    @_changes
    def drop(self, number):
        task = self.task(number)
        del self.tasks[task.number]
        return f"Dropped {task.number}. {task.title}"

    @_changes
    def clear(self):
        finished = [n for n, t in self.tasks.items() if t.status == DONE]
        if not finished:
            raise UsageError("No task is done yet; nothing to clear.")
        for number in finished:
            del self.tasks[number]
        return f"Cleared {len(finished)} done task{plural(finished)}."

    def show(self, number):
        task = self.task(number)
        lines = [f"{task.number}. {task.title}", f"Status: {task.status}"]
        if task.status == BLOCKED:
            lines.append(f"Blocked because: {task.blocked_because}")
        if task.notes:
            lines.append(f"Notes ({len(task.notes)}):")
            for index, text in enumerate(task.notes, 1):
                first, *rest = text.splitlines() or [""]
                lines.append(f"  {index}. {first}")
                lines.extend(f"     {line}" for line in rest)
        else:
            lines.append("Notes: none")
        return "\n".join(lines)

    # Reading the board.

    def task(self, number):
        task = self.tasks.get(number)
        if task is None:
            if not self.tasks:
                raise UsageError(
                    f"There is no task {number}: the board is empty. `add` creates tasks."
                )
            numbers = ", ".join(str(n) for n in self.tasks)
            raise UsageError(f"There is no task {number}. The board has: {numbers}.")
        return task

    def counts(self):
        counts = {TODO: 0, DOING: 0, BLOCKED: 0, DONE: 0}
        for task in self.tasks.values():
            counts[task.status] += 1
        return counts

    def progress(self):
        counts = self.counts()
        return f"{counts[DONE]} of {len(self.tasks)} done."

    def screen(self):
        if not self.tasks:
            return "Tasks: none yet. Plan your work with `add`, one task per line."
        counts = self.counts()
        header = (
            f"Tasks: {len(self.tasks)} ({counts[DOING]} in progress, "
            f"{counts[TODO]} to do, {counts[BLOCKED]} blocked, {counts[DONE]} done)"
        )
        finished = sorted(
            (t for t in self.tasks.values() if t.status == DONE),
            key=lambda t: t.done_order,
        )
        hidden = finished[:-DONE_SHOWN] if len(finished) > DONE_SHOWN else []
        hidden_numbers = {t.number for t in hidden}
        lines = [header]
        lines.extend(
            "  " + t.line() for t in self.tasks.values() if t.number not in hidden_numbers
        )
        if hidden:
            numbers = ", ".join(str(t.number) for t in sorted(hidden, key=lambda t: t.number))
            lines.append(
                f"  ... and {len(hidden)} earlier done task{plural(hidden)} ({numbers}): "
                "`show <n>` reads one, `clear` removes all done tasks"
            )
        return "\n".join(lines)


def _json_kind(value):
    if value is None:
        return "missing"
    for kind, name in ((bool, "a boolean"), (int, "a number"), (float, "a number"), (str, "a string"), (list, "a list"), (dict, "an object")):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _count(fields, key, where, least=0):
    value = fields.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise SnapshotError(
            f"{where}'s {key} is {json.dumps(value) if isinstance(value, (int, float)) else _json_kind(value)}, "
            f"not a whole number of at least {least}"
        )
    return value


def _text(fields, key, where):
    value = fields.get(key)
    if not isinstance(value, str):
        raise SnapshotError(f"{where}'s {key} is {_json_kind(value)}, not a string")
    return value


def _task(item, where):
    if not isinstance(item, dict):
        raise SnapshotError(f"{where} is {_json_kind(item)}, not an object")
    number = _count(item, "number", where, least=1)
    where = f"task {number} of the snapshot"
    title = _text(item, "title", where)
    if not title.strip():
        raise SnapshotError(f"{where} has an empty title")
    status = item.get("status")
    if status not in MARKERS:
        known = ", ".join(MARKERS)
        raise SnapshotError(f"{where} has the status {json.dumps(status)}; a task is one of {known}")
    notes = item.get("notes")
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise SnapshotError(f"{where}'s notes are not a list of strings")
    return Task(
        number=number,
        title=title,
        status=status,
        notes=list(notes),
        blocked_because=_text(item, "blocked_because", where),
        done_order=_count(item, "done_order", where),
    )


def plural(items):
    return "" if len(items) == 1 else "s"
