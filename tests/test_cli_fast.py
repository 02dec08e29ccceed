"""The CLI is fast (issue #39, item 5): ``glue-sparse --help``, every ``glue-sparse <command> --help`` and
``glue-sparse data`` import none of torch, transformers, lm-eval or datasets; only the command being run
loads them. Old HfArgumentParser-style command lines still parse as they did."""

from __future__ import annotations

import subprocess
import sys

import pytest

from glue_sparse.cli.commands import SUBCOMMANDS

HEAVY = ("torch", "transformers", "lm_eval", "datasets")
PROBE = """
import sys
from glue_sparse.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
assert code == 0, code
print("HEAVY", [m for m in {heavy!r} if m in sys.modules])
"""


def _probe(*argv: str) -> str:
    done = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY), *argv], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_top_level_help_lists_every_subcommand_and_imports_no_ml_library():
    out = _probe("--help")
    assert "HEAVY []" in out
    for name in [*SUBCOMMANDS, "eval"]:
        assert name in out


@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_each_command_help_imports_no_ml_library(command):
    out = _probe(command, "--help")
    assert "HEAVY []" in out, out[-500:]
    assert "usage: glue-sparse " + command in out


def test_data_command_runs_without_the_ml_stack(glue_fixture_dir):
    out = _probe("data", "--data-dir", str(glue_fixture_dir), "--no-hub")
    assert "HEAVY []" in out and "splits found" in out


def test_a_subcommand_still_gets_its_dataclass_flags():
    done = subprocess.run([sys.executable, "-m", "glue_sparse.cli.main", "pretrain", "--help"], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and "--target-removal" in done.stdout and "--data-lanes" in done.stdout


def test_old_hf_argument_parser_forms_still_parse_as_before():
    """The flags followed transformers' HfArgumentParser before one vocabulary (issue #63): what scripts wrote
    then (underscores, ``--prune no``, ``--no_train_pooler``) parses to the same options now."""
    from glue_sparse.cli.main import build_parser
    from glue_sparse.cli.vocabulary import normalise

    parser = build_parser(["finetune"])
    old = ["finetune", "--tasks", "rte", "--output", "o", "--train_limit", "64", "--no_train_pooler", "--prune", "no",
           "--report_to", "tensorboard", "wandb", "--target_removal", "0.5", "--learning-rate", "1e-3"]
    new = ["finetune", "--tasks", "rte", "--output", "o", "--train-limit", "64", "--no-train-pooler", "--no-prune",
           "--report-to", "tensorboard,wandb", "--target-removal", "0.5", "--lr", "1e-3"]
    a, b = (vars(parser.parse_args(normalise(argv, parser, "finetune"))) for argv in (old, new))
    a.pop("func"), b.pop("func")
    assert {k: v for k, v in a.items() if not k.startswith("_")} == {k: v for k, v in b.items() if not k.startswith("_")}
    assert (a["train_limit"], a["train_pooler"], a["prune"], a["report_to"], a["learning_rate"]) == (
        64, False, False, ["tensorboard", "wandb"], 1e-3)
