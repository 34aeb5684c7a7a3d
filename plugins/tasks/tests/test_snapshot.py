"""The board's snapshot (what the host keeps across a trap and a restart):
a round trip gives a board that cannot be told apart from the original,
and bytes it cannot read are refused with a sentence. The last test runs
`app.State` on componentize-py's bindings when they are built
(scripts/build-polyglot-plugins; ENVHOST_PY_BINDINGS names another folder)."""

import json
import os
import sys
import unittest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "src"))

from board import SNAPSHOT_VERSION, Board, SnapshotError, UsageError  # noqa: E402


def busy_board():
    """A board with every kind of task: to do, in progress, blocked, done
    (in a finishing order unlike their numbers), with notes, a dropped
    number and a title that is not ASCII."""
    board = Board()
    board.add(["Read the spec", "Write the parser", "Ship it", "Gone soon", "Résumé: ünïcode ✓"])
    board.start(2)
    board.note(2, "the bug is in parse_header\nsee src/lexer.rs:88")
    board.block(3, "waiting for review")
    board.done(5, "renamed")
    board.done(1)
    board.drop(4)
    return board


def everything(board):
    """All a board holds, for comparing two boards."""
    return (
        [(t.number, t.title, t.status, t.notes, t.blocked_because, t.done_order) for t in board.tasks.values()],
        board.next_number,
        board.finished,
    )


def snapshot(**changes):
    """The snapshot of `busy_board()` as a dict, with `changes` applied."""
    data = json.loads(busy_board().snapshot())
    data.update(changes)
    return json.dumps(data).encode()


class RoundTripTest(unittest.TestCase):
    def test_a_restored_board_is_the_same_board(self):
        board = busy_board()
        restored = Board.from_snapshot(board.snapshot())
        self.assertEqual(everything(restored), everything(board))
        self.assertEqual(restored.screen(), board.screen())
        for number in board.tasks:
            self.assertEqual(restored.show(number), board.show(number))
        # The same commands go on alike: done tasks keep their finishing
        # order (5 before 1), and numbering goes on where it was (4 was
        # dropped, 6 is next).
        self.assertEqual(restored.done(2), board.done(2))
        self.assertEqual(restored.add(["Next"]), "Added [ ] 6. Next")
        self.assertEqual(board.add(["Next"]), "Added [ ] 6. Next")
        self.assertEqual(restored.screen(), board.screen())

    def test_the_snapshot_is_compact_versioned_json(self):
        data = busy_board().snapshot()
        self.assertIsInstance(data, bytes)
        self.assertNotIn(b'": ', data)
        self.assertNotIn(b', "', data)
        self.assertNotIn(b"\n", data)
        value = json.loads(data.decode("utf-8"))
        self.assertEqual(value["version"], SNAPSHOT_VERSION)
        self.assertEqual(value["next_number"], 6)
        self.assertEqual(value["finished"], 2)
        self.assertEqual([t["number"] for t in value["tasks"]], [1, 2, 3, 5])
        self.assertEqual(
            value["tasks"][1],
            {
                "number": 2,
                "title": "Write the parser",
                "status": "doing",
                "notes": ["the bug is in parse_header\nsee src/lexer.rs:88"],
                "blocked_because": "",
                "done_order": 0,
            },
        )
        self.assertIn("Résumé: ünïcode ✓".encode("utf-8"), data)

    def test_an_empty_board_and_empty_bytes(self):
        self.assertEqual(everything(Board.from_snapshot(Board().snapshot())), everything(Board()))
        # No bytes is no state: an empty board.
        self.assertEqual(everything(Board.from_snapshot(b"")), everything(Board()))

    def test_a_restored_board_is_its_own(self):
        board = busy_board()
        restored = Board.from_snapshot(board.snapshot())
        restored.note(1, "only on the restored board")
        self.assertEqual(board.tasks[1].notes, [])
        with self.assertRaisesRegex(UsageError, "There is no task 4"):
            restored.start(4)


class RefusalTest(unittest.TestCase):
    def refused(self, data, *fragments):
        with self.assertRaises(SnapshotError) as caught:
            Board.from_snapshot(data)
        message = str(caught.exception)
        for fragment in fragments:
            self.assertIn(fragment, message)
        # One clause the host quotes inside its own sentence, saying what
        # to do.
        self.assertTrue(message.endswith("; `add` puts the plan back on the empty board"), message)
        self.assertNotIn("\n", message)
        return message

    def test_bytes_that_are_not_json(self):
        self.refused(b"not json", "the snapshot is not the JSON the task board writes (Expecting value")
        self.refused(b"\xff{", "the snapshot is not the JSON the task board writes ('utf-8' codec")
        self.refused(b"[" * 100000, "the snapshot is not the JSON the task board writes")

    def test_json_that_is_not_an_object(self):
        self.refused(b"[1, 2]", "the snapshot is a list, not the JSON object the task board writes")
        self.refused(b'"board"', "the snapshot is a string")

    def test_an_unknown_or_missing_version(self):
        self.assertEqual(
            self.refused(snapshot(version=2)),
            "the snapshot has format version 2, and this build of the task board reads only version 1; "
            "`add` puts the plan back on the empty board",
        )
        self.refused(snapshot(version="1"), 'format version "1"')
        self.refused(snapshot(version=True), "format version true")
        self.refused(b'{"tasks": []}', "the snapshot has no format version")

    def test_wrong_shapes(self):
        self.refused(snapshot(next_number=0), "the snapshot's next_number is 0, not a whole number of at least 1")
        self.refused(snapshot(next_number=2.5), "next_number is 2.5")
        self.refused(snapshot(finished=None), "the snapshot's finished is missing")
        self.refused(snapshot(tasks={"1": "x"}), "the snapshot's tasks are an object, not a list")
        self.refused(snapshot(tasks=["x"]), "task 1 of the snapshot is a string, not an object")

        def with_task(**changes):
            task = {"number": 1, "title": "t", "status": "todo", "notes": [], "blocked_because": "", "done_order": 0}
            task.update(changes)
            return snapshot(tasks=[task])

        self.assertEqual(everything(Board.from_snapshot(with_task()))[0], [(1, "t", "todo", [], "", 0)])
        self.refused(with_task(number=True), "task 1 of the snapshot's number is true")
        self.refused(with_task(title=7), "task 1 of the snapshot's title is a number, not a string")
        self.refused(with_task(title="  "), "task 1 of the snapshot has an empty title")
        self.refused(with_task(status="later"), 'task 1 of the snapshot has the status "later"; a task is one of todo, doing, blocked, done')
        self.refused(with_task(notes=["a", 2]), "task 1 of the snapshot's notes are not a list of strings")
        self.refused(with_task(notes="a"), "notes are not a list of strings")
        self.refused(with_task(blocked_because=None), "task 1 of the snapshot's blocked_because is missing")
        self.refused(with_task(done_order=-1), "task 1 of the snapshot's done_order is -1")
        self.refused(with_task(number=6), "the snapshot holds task 6 but numbers the next task 6, which would reuse a number")
        task = json.loads(with_task())["tasks"][0]
        self.refused(snapshot(tasks=[task, task]), "the snapshot holds task 1 twice")


def bindings():
    folder = os.environ.get("ENVHOST_PY_BINDINGS") or os.path.join(
        HERE, "..", "..", "..", "target", "polyglot", "python-bindings"
    )
    return folder if os.path.isdir(os.path.join(folder, "wit_world")) else None


@unittest.skipUnless(bindings(), "componentize-py's bindings are not built (scripts/build-polyglot-plugins)")
class StateExportTest(unittest.TestCase):
    """`app.State` on the real bindings: restore replaces the module's
    board, which the next command and the screen then use."""

    def setUp(self):
        sys.path.insert(0, bindings())
        import app

        self.app = app
        self.addCleanup(sys.path.remove, bindings())
        self.addCleanup(setattr, app, "BOARD", app.BOARD)

    def test_restore_replaces_the_board_the_commands_use(self):
        app = self.app
        app.BOARD = busy_board()
        data = app.State().snapshot()
        self.assertEqual(data, busy_board().snapshot())
        app.BOARD = Board()
        self.assertIsNone(app.State().restore(data))
        self.assertEqual(app.Environment().get_screen().content, busy_board().screen())
        self.assertEqual(app.Environment().handle_command("add Next").output, "Added [ ] 6. Next")

    def test_a_refused_snapshot_is_the_err_of_the_result(self):
        from componentize_py_types import Err

        app = self.app
        app.BOARD = Board()
        with self.assertRaises(Err) as caught:
            app.State().restore(b"not json")
        self.assertIsInstance(caught.exception.value, str)
        self.assertTrue(caught.exception.value.startswith("the snapshot is not the JSON the task board writes"))
        self.assertEqual(app.BOARD.tasks, {})


if __name__ == "__main__":
    unittest.main()


class KeptSnapshotTest(unittest.TestCase):
    """The host asks for a snapshot after every command: the bytes are kept
    while only reading commands run, and every command that may change
    the board makes the next snapshot anew."""

    def test_reading_keeps_the_bytes_and_every_change_makes_new_ones(self):
        board = busy_board()
        first = board.snapshot()
        board.show(2)
        board.screen()
        self.assertIs(board.snapshot(), first)
        changes = [
            lambda b: b.add(["One more"]),
            lambda b: b.start(6),
            lambda b: b.note(6, "a note"),
            lambda b: b.block(6, "a reason"),
            lambda b: b.rename(6, "Another title"),
            lambda b: b.done(6),
            lambda b: b.clear(),
            lambda b: b.add(["Last"]),
            lambda b: b.drop(7),
        ]
        for change in changes:
            before = board.snapshot()
            change(board)
            after = board.snapshot()
            self.assertNotEqual(after, before)
            self.assertEqual(everything(Board.from_snapshot(after)), everything(board))
