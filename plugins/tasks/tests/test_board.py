"""Unit tests of the task board's rules, on the machine's own python3:
`python3 -m unittest discover -s plugins/tasks/tests` (scripts/test runs
them). The component itself is tested through the host in
tests/e2e/polyglot.rs."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from board import DONE_SHOWN, Board, UsageError  # noqa: E402


class BoardTest(unittest.TestCase):
    def setUp(self):
        self.board = Board()
        self.board.add(["Read the spec", "Write the parser", "Ship it"])

    def test_numbers_are_never_reused(self):
        self.board.drop(3)
        self.assertEqual(self.board.add(["Again"]), "Added [ ] 4. Again")

    def test_blank_titles_are_skipped_and_spaces_collapsed(self):
        answer = Board().add(["  one   two ", "", "   "])
        self.assertEqual(answer, "Added [ ] 1. one two")
        with self.assertRaisesRegex(UsageError, "add needs a task title"):
            Board().add(["", " "])

    def test_lifecycle_and_progress(self):
        self.assertEqual(self.board.start(2), "Started [>] 2. Write the parser")
        with self.assertRaisesRegex(UsageError, "already in progress"):
            self.board.start(2)
        self.assertEqual(
            self.board.block(2, "  waiting   for review "),
            "Blocked [!] 2. Write the parser (blocked: waiting for review)",
        )
        self.assertEqual(self.board.start(2), "Resumed [>] 2. Write the parser")
        self.assertEqual(
            self.board.done(2, "merged"),
            "Done [x] 2. Write the parser (note: merged)\n1 of 3 done.",
        )
        with self.assertRaisesRegex(UsageError, "already done"):
            self.board.done(2)
        with self.assertRaisesRegex(UsageError, "reopens it first"):
            self.board.block(2, "no")

    def test_mistakes_change_nothing(self):
        before = self.board.screen()
        for mistake in (
            lambda: self.board.start(9),
            lambda: self.board.block(1, "   "),
            lambda: self.board.note(1, "\n"),
            lambda: self.board.rename(1, ""),
            lambda: self.board.clear(),
        ):
            with self.assertRaises(UsageError):
                mistake()
        self.assertEqual(self.board.screen(), before)
        with self.assertRaisesRegex(UsageError, "The board has: 1, 2, 3."):
            self.board.drop(7)
        with self.assertRaisesRegex(UsageError, "the board is empty"):
            Board().start(1)

    def test_the_newest_note_shows_on_one_line(self):
        self.board.note(1, "first")
        self.board.note(1, "second line one\nline two " + "x" * 100)
        line = self.board.screen().splitlines()[1]
        self.assertTrue(line.startswith("  [ ] 1. Read the spec (note: second line one line two xxx"))
        self.assertTrue(line.endswith("...)"), line)
        self.assertIn("  2. second line one\n     line two", self.board.show(1))

    def test_old_done_tasks_fold_into_one_line(self):
        board = Board()
        board.add([f"task {n}" for n in range(1, 10)])
        for number in range(1, 9):
            board.done(number)
        lines = board.screen().splitlines()
        self.assertEqual(lines[0], "Tasks: 9 (0 in progress, 1 to do, 0 blocked, 8 done)")
        shown = [line for line in lines if line.startswith("  [x]")]
        self.assertEqual(len(shown), DONE_SHOWN)
        self.assertEqual(
            lines[-1],
            "  ... and 3 earlier done tasks (1, 2, 3): `show <n>` reads one, `clear` removes all done tasks",
        )
        self.assertEqual(board.clear(), "Cleared 8 done tasks.")
        self.assertEqual(board.screen().splitlines()[1:], ["  [ ] 9. task 9"])


if __name__ == "__main__":
    unittest.main()
