"""Real `python -m kansym` processes given bad input print one error line and no traceback.

CliRunner (tests/reliability/test_bad_input.py) covers every case in-process; this runs one
case of each kind through the console entry point, where an uncaught exception would
print a Python traceback. The processes run side by side to bound the cost of importing
torch in each.
"""

import os
import pickle
import subprocess
import sys

import pytest


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.slow
def test_bad_invocations_print_one_error_line_and_no_traceback(tmp_path, kan_checkpoint, write_csv):
    table = write_csv(tmp_path / "d.csv")
    latin = tmp_path / "latin.csv"
    latin.write_bytes("temp\xe9rature,y\n1,2\n2,3\n".encode("latin-1"))
    evil = tmp_path / "evil.pt"
    evil.write_bytes(pickle.dumps({"format": "kansym", "x": _Evil(tmp_path / "pwned")}, protocol=2))
    text = tmp_path / "t.txt"
    text.write_text("some text to learn from. " * 40)
    cases = [  # one of each kind: table, option, pickle with code, kind swap, KAN-GPT option
        (["train", str(latin), "-t", "y", "-o", str(tmp_path / "m.pt")], "not UTF-8"),
        (["fit", str(table), "-t", "y", "--device", "mps", "-o", str(tmp_path / "o")], "mps"),
        (["symbolify", str(evil)], "refused for safety"),
        (["gpt", "sample", str(kan_checkpoint)], "kansym prune"),
        (["gpt", "train", "--text", str(text), "-o", str(tmp_path / "run"), "--n-embd", "15", "--n-head", "2"], "divisible"),
    ]
    env = {**os.environ, "PYTHONWARNINGS": "default"}  # warnings would show up as extra lines
    procs = [subprocess.Popen([sys.executable, "-m", "kansym", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env, cwd=tmp_path) for args, _ in cases]
    for (args, needle), proc in zip(cases, procs):
        out, err = proc.communicate(timeout=300)
        assert "Traceback" not in err and "Traceback" not in out, (args, err)
        assert proc.returncode == 2, (args, proc.returncode, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], (args, err)
    assert not (tmp_path / "pwned").exists()
    assert not (tmp_path / "m.pt").exists() and not (tmp_path / "o").exists() and not (tmp_path / "run").exists()
