"""Markdown of ``bench/feynman.py``'s rows: per run, and across runs by half, noise and units.

Every row of a run carries ``id``, ``method``, ``half`` (``tuning`` or ``validation``),
``noise`` and ``units_given`` (the run's ``--no-units`` left off); kansym's rows also say
whether units were used for that equation (``units``: the CSV may have none). Peers never
get units, so their rows are grouped by noise only.
"""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import platform
import statistics
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from formula_guard import guardrail_line
from sr_peers import INDISTINGUISHABLE



def _method(row: dict) -> str:
    return row.get("method", "kansym")


def _units_key(row: dict) -> str:
    if _method(row) != "kansym":
        return "—"  # peers get the variables only
    return "given" if row.get("units_given", row.get("units", False)) else "not given"


def _config(row: dict) -> tuple[str, str, float, str]:
    return _method(row), row.get("half", "?"), float(row.get("noise", math.nan)), _units_key(row)


def _rate(rows: list[dict]) -> str:
    rec = sum(bool(r.get("recovered")) for r in rows)
    return f"{rec}/{len(rows)} ({100 * rec / max(len(rows), 1):.1f} %)"


def _median_seconds(rows: list[dict]) -> float:
    secs = [r["seconds"] for r in rows if isinstance(r.get("seconds"), (int, float))]
    return statistics.median(secs) if secs else math.nan


def wrong_unflagged(row: dict) -> bool:
    """A formula printed as the answer that is not the law, without a warning: the mission's
    worst case (peers print no warnings, so each of their wrong formulas counts)."""
    return (not row.get("recovered") and bool(row.get("formula")) and not row.get("warning")
            and not row.get("timed_out") and "error" not in row)


def indistinguishable(row: dict) -> bool:
    """A wrong formula the fitting rows cannot tell from the law (``lambda_truth`` below
    :data:`sr_peers.INDISTINGUISHABLE`: a term under the noise, an approximation closer than it)."""
    lam = row.get("lambda_truth")
    return lam is not None and lam < INDISTINGUISHABLE


def halves_table(rows: Iterable[dict]) -> list[str]:
    """One Markdown line per (method, half, noise, units): exact recoveries (and how many of them
    carry a WARNING: the guard's false alarms), median seconds, wrong formulas printed without a
    warning (and how many of them the rows cannot tell from the law, :func:`indistinguishable`),
    equations stopped at the limit, and errors; methods in the order they first appear."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault(_config(row), []).append(row)
    order = list(dict.fromkeys(k[0] for k in groups))
    lines = ["| method | half | noise | units | exact | of which warned | median s | wrong, no warning | of which the "
             "rows cannot tell (λ < 6.6) | stopped at the limit | errors |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for key in sorted(groups, key=lambda k: (order.index(k[0]), k[2], k[3], k[1])):
        mine = groups[key]
        stopped = sum(bool(r.get("timed_out")) for r in mine)
        errors = sum("error" in r and not r.get("timed_out") for r in mine)
        wrong = sum(wrong_unflagged(r) for r in mine)
        hidden = sum(wrong_unflagged(r) and indistinguishable(r) for r in mine)
        warned = sum(bool(r.get("recovered")) and bool(r.get("warning")) for r in mine)
        lines.append(f"| {key[0]} | {key[1]} | {key[2]:g} | {key[3]} | {_rate(mine)} | {warned} | "
                     f"{_median_seconds(mine):.1f} | {wrong} | {hidden} | {stopped} | {errors} |")
    return lines


def _groups(row: dict) -> str:
    """The dimensionless groups the law was reduced to (``0`` for a monomial, ``—`` without units)."""
    red = row.get("reduction")
    if not red:
        return "—"
    return str(len(red["groups"])) + (": " + ", ".join(f"`{g}`" for g in red["groups"].values()) if red["groups"] else "")


def summary(rows: list[dict], equations: list, args) -> str:
    """Markdown of one run: the command, each method's recovery rate and median seconds,
    the halves table, kansym's guardrail counts, and one line per equation and method."""
    by_id = {e.id: e for e in equations}
    lines = [
        f"command: `python bench/feynman.py {' '.join(sys.argv[1:])}`",
        f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; machine: {platform.machine()}, "
        f"{mp.cpu_count()} CPUs, {args.jobs} job(s), 1 thread each",
        f"units {'given (dimensional analysis first)' if args.units else 'not given (--no-units)'}; "
        f"noise {args.noise}, {args.rows} rows (+{args.test_rows} held out), time limit {args.time_limit:g} s, "
        f"seed {args.seed}, half {args.half}",
        "",
    ]
    for method in dict.fromkeys(_method(r) for r in rows):
        mine = [r for r in rows if _method(r) == method]
        lines.append(f"**{method}: recovered {_rate(mine)}, median {_median_seconds(mine):.1f} s per equation**  ")
    lines.append(guardrail_line(rows))
    lines += ["", *halves_table(rows), "",
              "| id | method | half | truth | groups | recovered | R² test | complexity | s | guardrails | formula |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        r2 = r.get("r2_test")
        r2s = "—" if r2 is None else f"{r2:.6f}"
        form = r.get("formula") or r.get("error", "")
        form = form if len(form) <= 90 else form[:87] + "..."
        guards = ", ".join(r.get("guardrails", [])) or "—"
        lines.append(f"| {r['id']} | {_method(r)} | {r.get('half', '?')} | `{by_id[r['id']].formula}` | {_groups(r)} | "
                     f"{'yes' if r.get('recovered') else ('no (warned)' if r.get('warning') else 'no')} | {r2s} | {r.get('complexity', '—')} | "
                     f"{r.get('seconds', '—')} | {guards} | `{form}` |")
    return "\n".join(lines) + "\n"


def read_rows(paths: Iterable[Path]) -> list[dict]:
    """The JSON lines of earlier runs; a later row of the same (id, method, noise, units)
    replaces an earlier one (peers' rows from a run with and one without units are one run)."""
    rows: dict[tuple, dict] = {}
    for path in paths:
        for line in Path(path).read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                method, _, noise, units = _config(row)
                rows[row["id"], method, noise, units] = row
    return list(rows.values())


def report(rows: list[dict], paths: Iterable[Path]) -> str:
    """Markdown across runs: the halves table and each method's guardrail counts."""
    lines = [f"command: `python bench/feynman.py {' '.join(sys.argv[1:])}`",
             "from: " + ", ".join(f"`{p}`" for p in paths), "", *halves_table(rows), ""]
    for method in dict.fromkeys(_method(r) for r in rows):
        lines.append(guardrail_line(rows, method))
    return "\n".join(lines) + "\n"
