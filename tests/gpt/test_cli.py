"""``kansym gpt`` through click's CliRunner: the whole flow, and bad input as one-line errors."""

import json

import pytest
from click.testing import CliRunner

from kansym.cli.main import cli

TINY = ["--n-layer", "2", "--n-head", "2", "--n-embd", "16", "--block-size", "8", "--batch-size", "4",
        "--eval-interval", "5", "--eval-iters", "2", "--grid-size", "3", "--quiet"]


def one_line_error(result, needle):
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], result.stderr


@pytest.fixture()
def runner():
    return CliRunner()


@pytest.mark.parametrize("command", ["train", "sample", "prune", "edges"])
def test_help(runner, command):
    result = runner.invoke(cli, ["gpt", command, "--help"])
    assert result.exit_code == 0 and "--seed" in result.output


def test_a_warmup_longer_than_the_run_is_noted(runner, text_file, tmp_path):
    base = ["gpt", "train", "--text", str(text_file), *[a for a in TINY if a != "--quiet"], "--max-iters", "3"]
    short = runner.invoke(cli, [*base, "-o", str(tmp_path / "a"), "--warmup-iters", "5"])
    assert short.exit_code == 0, short.output
    notes = [line for line in short.stderr.splitlines() if line.startswith("note: ")]
    assert notes == ["note: --warmup-iters 5 >= --max-iters 3: the learning rate stayed below --lr for the whole "
                     "run (lower --warmup-iters for short runs)"]
    fine = runner.invoke(cli, [*base, "-o", str(tmp_path / "b"), "--warmup-iters", "1"])
    assert fine.exit_code == 0 and "note: " not in fine.stderr


def test_train_resume_sample_prune_edges(runner, text_file, tmp_path):
    out = tmp_path / "run"
    args = ["gpt", "train", "--text", str(text_file), "--ffn", "mlp,kan", "-o", str(out), *TINY]
    result = runner.invoke(cli, [*args, "--max-iters", "10", "--lamb", "1e-3"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["iter"] == 10
    result = runner.invoke(cli, ["gpt", "train", "--text", str(text_file), "-o", str(out), "--resume", "--max-iters", "15", "-q"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["iter"] == 15
    assert len((out / "log.jsonl").read_text().splitlines()) == 3

    sample = ["gpt", "sample", str(out / "last.pt"), "--prompt", "First", "--tokens", "25", "--top-k", "5", "--seed", "3"]
    a, b = runner.invoke(cli, sample), runner.invoke(cli, sample)
    assert a.exit_code == 0 and a.stdout == b.stdout and a.stdout.startswith("First")

    pruned = tmp_path / "p.pt"
    result = runner.invoke(cli, ["gpt", "prune", str(out / "last.pt"), "--theta", "1e-3", "-o", str(pruned), "--text", str(text_file)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert {"val_loss_before", "val_loss_after", "hidden_after"} <= set(report)
    assert runner.invoke(cli, ["gpt", "sample", str(pruned), "--tokens", "5"]).exit_code == 0
    sampled = tmp_path / "ps.pt"
    result = runner.invoke(cli, ["gpt", "prune", str(out / "last.pt"), "--theta", "0.5", "--score", "output", "--relative",
                                 "--score-batches", "2", "-o", str(sampled), "--text", str(text_file)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["score"] == "output" and report["relative"] and 1 <= report["hidden_after"] <= report["hidden_before"]
    one_line_error(runner.invoke(cli, ["gpt", "prune", str(out / "last.pt"), "--score", "sample", "-o", str(sampled), "--force"]),
                   "--text")
    for bad, needle in [(["--score-batches", "0"], "--score-batches"), (["--relative", "--theta", "2"], "(0, 1]")]:
        one_line_error(runner.invoke(cli, ["gpt", "prune", str(out / "last.pt"), "--score", "output", *bad, "-o",
                                           str(sampled), "--force", "--text", str(text_file)]), needle)

    png = tmp_path / "edges.png"
    result = runner.invoke(cli, ["gpt", "edges", str(pruned), "--layer", "1", "-o", str(png)])
    assert result.exit_code == 0, result.output
    assert png.read_bytes()[:4] == b"\x89PNG"
    one_line_error(runner.invoke(cli, ["gpt", "edges", str(pruned), "--layer", "0", "-o", str(png), "--force"]), "MLP")
    one_line_error(runner.invoke(cli, [*args, "--max-iters", "5"]), "already holds a run")
    one_line_error(runner.invoke(cli, [*args[:-1], "--resume", "--lr", "0.5"]), "cannot resume")


def test_missing_text_file(runner, tmp_path):
    result = runner.invoke(cli, ["gpt", "train", "--text", str(tmp_path / "nope.txt"), "-o", str(tmp_path / "o")])
    one_line_error(result, "does not exist")
    assert not (tmp_path / "o").exists()  # refused before the output folder was made
    binary = tmp_path / "random.pt"
    binary.write_bytes(bytes(range(256)) * 4)
    one_line_error(runner.invoke(cli, ["gpt", "train", "--text", str(binary), "-o", str(tmp_path / "o")]), "random.pt")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("args, needle", [
    (["--ffn", "mlp,kan,kan"], "2 layers"),
    (["--ffn", "rnn"], "unknown FFN"),
    (["--n-embd", "15"], "divisible"),
])
def test_bad_options(runner, text_file, tmp_path, args, needle):
    result = runner.invoke(cli, ["gpt", "train", "--text", str(text_file), "-o", str(tmp_path / "o"), *TINY, *args])
    one_line_error(result, needle)


def test_bad_checkpoint(runner, tmp_path):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    one_line_error(runner.invoke(cli, ["gpt", "sample", str(bad)]), "bad.pt")
