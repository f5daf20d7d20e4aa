"""Regenerate (or check) the command outputs shown in README.md and docs/user-guide.md.

Their ``console`` blocks hold commands (lines starting with ``$ ``), each followed by
what it prints (stdout and stderr, in the order a terminal shows them). This script runs
every command of a page in one fresh temporary folder, in order (so ``kansym prune
model.pt`` finds the ``model.pt`` that ``kansym train`` wrote), and writes what they print
now under them. ``<!-- setup: COMMAND -->`` lines run where they stand, unseen in the
rendered page (they make the example data). Every ``python`` block is run too, after
the commands before it (it must not fail).

    python docs/make_user_guide.py           # rewrite both pages
    python docs/make_user_guide.py --check   # exit 1 and show a diff if one is out of date

``tests/test_user_guide.py`` runs the check.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = (ROOT / "README.md", ROOT / "docs" / "user-guide.md")
FENCE = re.compile(r"^```(\w*)\s*$")
SETUP = re.compile(r"^<!-- setup: (.*) -->\s*$")


def _env() -> dict:
    bin_dir = str(Path(sys.executable).parent)  # the kansym of this interpreter's environment
    return {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "PYTHONUNBUFFERED": "1",
            "COLUMNS": "120", "PYTHONWARNINGS": "ignore"}


def _run(command: str, cwd: Path) -> str:
    proc = subprocess.run(["bash", "-c", command + " 2>&1"], cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=600)
    return proc.stdout.rstrip("\n")


def render(text: str, cwd: Path) -> str:
    """The guide with every console block's outputs replaced by what its commands print in ``cwd``."""
    out, block, kind = [], None, None
    for line in text.splitlines():
        fence = FENCE.match(line)
        if block is None:
            setup = SETUP.match(line)
            if setup:
                _run(setup.group(1), cwd)
            if fence and fence.group(1):
                block, kind = [], fence.group(1)
            out.append(line)
            continue
        if fence and not fence.group(1):  # the block ends
            if kind == "console":
                for command in [b[2:] for b in block if b.startswith("$ ")]:
                    out.append(f"$ {command}")
                    printed = _run(command.split("  # ")[0], cwd)
                    if printed:
                        out.extend(printed.splitlines())
            else:
                out.extend(block)
                if kind == "python":
                    run_python("\n".join(block), cwd)
            out.append(line)
            block = kind = None
            continue
        block.append(line)
    return "\n".join(out) + "\n"


def run_python(source: str, cwd: Path) -> None:
    """Run a Python block of the docs in ``cwd``; raise with its output if it fails."""
    proc = subprocess.run([sys.executable, "-c", source], cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"a Python block of the docs failed:\n{source}\n--- output ---\n{proc.stdout}{proc.stderr}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 with a diff when out of date")
    args = parser.parse_args(argv)
    stale = False
    for page in PAGES:
        old = page.read_text(encoding="utf-8")
        with tempfile.TemporaryDirectory(prefix="kansym-docs-") as tmp:
            new = render(old, Path(tmp))
        name = str(page.relative_to(ROOT))
        if args.check:
            if new != old:
                stale = True
                sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True), name,
                                                           "what the commands print now"))
            else:
                print(f"{name} matches what its commands print")
        elif new != old:
            page.write_text(new, encoding="utf-8")
            print(f"wrote {name}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
