"""README.md's and docs/user-guide.md's command outputs are what the commands print now (issue 18).

``docs/make_user_guide.py --check`` runs every command and Python block of both pages in a
fresh folder and compares; after a change that alters an output, run
``python docs/make_user_guide.py`` and review the diff.
"""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # every command of the two pages: about 40 s
def test_the_pages_show_what_the_commands_print():
    proc = subprocess.run([sys.executable, str(ROOT / "docs" / "make_user_guide.py"), "--check"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]


def test_the_checker_sees_a_stale_block(tmp_path):
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import make_user_guide as m
    finally:
        sys.path.pop(0)
    page = "text\n<!-- setup: printf 'a\\n' > f.txt -->\n```console\n$ cat f.txt\nstale\n```\n"
    assert m.render(page, tmp_path) == "text\n<!-- setup: printf 'a\\n' > f.txt -->\n```console\n$ cat f.txt\na\n```\n"
