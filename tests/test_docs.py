"""docs/benchmarks.md is a results page: short, and every table says how and when it was measured."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "benchmarks.md"
MAX_LINES = 300
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
COMMAND = re.compile(r"^(python bench/\S+\.py\b|kansym )")


def sections(text: str) -> list[tuple[str, list[str]]]:
    """(heading, lines) for each Markdown heading; '#' lines inside code fences are not headings."""
    out: list[tuple[str, list[str]]] = [("(top)", [])]
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and re.match(r"#{1,6} ", line):
            out.append((line, []))
        else:
            out[-1][1].append(line)
    return out


def commands(lines: list[str]) -> list[str]:
    """Commands named in the lines: each line of a code block (fenced or indented), each inline code span."""
    found, fenced = [], False
    for line in lines:
        if line.startswith("```"):
            fenced = not fenced
        elif fenced or line.startswith("    "):
            found.append(line.split("  #")[0].strip())
        else:
            found += re.findall(r"`([^`]+)`", line)
    return [c for c in found if COMMAND.match(c)]


def has_table(lines: list[str]) -> bool:
    return any(re.match(r"\|\s*:?-{3,}", line) for line in lines)


def problems(text: str) -> list[str]:
    """What keeps the text from being the results page: length, and tables without command or date."""
    found = []
    n = len(text.splitlines())
    if n > MAX_LINES:
        found.append(f"{n} lines (at most {MAX_LINES})")
    for heading, lines in sections(text):
        if not has_table(lines):
            continue
        if not commands(lines):
            found.append(f"{heading!r}: a table without a command (`python bench/...` or `kansym ...` in code)")
        if not any(DATE.search(line) for line in lines):
            found.append(f"{heading!r}: a table without a date (YYYY-MM-DD)")
    return found


def test_benchmarks_page_is_short_and_every_table_names_its_command_and_date():
    assert problems(PAGE.read_text(encoding="utf-8")) == []


def test_the_check_rejects_a_diary_and_an_undated_table():
    undated = "## Layer\n\n```\npython bench/layer.py\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    assert problems(undated) == ["'## Layer': a table without a date (YYYY-MM-DD)"]
    no_command = "## Layer\n\nRun on 2026-11-30.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    assert problems(no_command) == [
        "'## Layer': a table without a command (`python bench/...` or `kansym ...` in code)"
    ]
    assert problems("line\n" * (MAX_LINES + 1)) == [f"{MAX_LINES + 1} lines (at most {MAX_LINES})"]


def test_every_bench_command_names_an_existing_script_and_its_flags():
    cli_source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "kansym" / "cli").glob("*.py"))
    for command in commands(PAGE.read_text(encoding="utf-8").splitlines()):
        words = command.split()
        if words[0] == "python":
            script = ROOT / words[1]
            assert script.is_file(), command
            source = script.read_text(encoding="utf-8")
        else:
            source = cli_source
        for word in words:
            if word.startswith("--"):
                flag = word.split("=")[0]
                assert f'"{flag}"' in source, f"{flag} is not an option of {words[1]}: {command}"
