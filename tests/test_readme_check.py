"""tools/readme_check.py: which printed outputs count as the README's."""
import importlib.util
import os
import tempfile
import unittest

_spec = importlib.util.spec_from_file_location(
    "readme_check", os.path.join(os.path.dirname(__file__), "..", "tools", "readme_check.py"))
rc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rc)

EVAL = ["bits/dim     0.66906 +- 0.00895 (standard error over 1000 test images, all 784 dims)",
        "speed        4.81 images/s, 207.8 s, parallel form, batch 16"]


class Matches(unittest.TestCase):
    def test_times_may_differ_bits_per_dim_may_not(self):
        self.assertTrue(rc.matches(EVAL, [EVAL[0], "speed        12.5 images/s, 80.1 s, parallel form, batch 16"]))
        self.assertFalse(rc.matches(EVAL, [EVAL[0].replace("0.66906", "0.66907"), EVAL[1]]))
        self.assertFalse(rc.matches(EVAL, [EVAL[0], EVAL[1].replace("parallel", "rnn")]))

    def test_runs_of_spaces_count_as_one(self):
        self.assertTrue(rc.matches(["model  ./m.bin"], ["model ./m.bin"]))

    def test_ellipsis_takes_any_lines_and_order_holds(self):
        self.assertTrue(rc.matches(["a", "...", "z"], ["a", "b", "c", "z"]))
        self.assertTrue(rc.matches(["a", "...", "z"], ["a", "z"]))
        self.assertFalse(rc.matches(["a", "...", "z"], ["z", "a"]))
        self.assertFalse(rc.matches(["a", "z"], ["a", "b", "z"]))
        self.assertFalse(rc.matches(["a", "z"], ["a", "z", "more"]))

    def test_compare_rows_keep_their_bits_per_dim(self):
        row = "1 linear, RNN mode (state S, z)       0.6669      10.6        8.52x          990x  270.3 KB state           61.0 MB"
        self.assertTrue(rc.matches([row], [row.replace("10.6", "11.9").replace("990x", "1012x")]))
        self.assertFalse(rc.matches([row], [row.replace("0.6669", "0.6670")]))


class Commands(unittest.TestCase):
    def test_fenced_and_indented_blocks(self):
        text = ("Intro\n\n```\n$ lingen eval bits-per-dim\nline 1\nline 2\n$ lingen models\n...\n```\n\n"
                "    $ python3 -c 'print(1)'\n    1\n\n    lingen sample -n 4\n\n```\n$ ls\nx\n```\n")
        with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False) as f:
            f.write(text)
        try:
            got = rc.commands(f.name)
        finally:
            os.unlink(f.name)
        self.assertEqual(got, [("lingen eval bits-per-dim", ["line 1", "line 2"]), ("lingen models", ["..."]),
                               ("python3 -c 'print(1)'", ["1"])])


if __name__ == "__main__":
    unittest.main()
