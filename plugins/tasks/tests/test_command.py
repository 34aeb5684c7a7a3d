"""The command-splitting rule against the cases every implementation
shares (`wit/command-split-cases.json`)."""

import json
import os
import sys
import unittest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "src"))

from command import split_command  # noqa: E402

CASES = os.path.join(HERE, "..", "..", "..", "wit", "command-split-cases.json")


class SplitCommandTest(unittest.TestCase):
    def test_the_shared_cases(self):
        with open(CASES, encoding="utf-8") as file:
            cases = json.load(file)["cases"]
        self.assertGreater(len(cases), 20)
        for case in cases:
            with self.subTest(case["why"]):
                self.assertEqual(
                    split_command(case["text"]),
                    (case["name"], case["arguments"], case["body"]),
                )


if __name__ == "__main__":
    unittest.main()
