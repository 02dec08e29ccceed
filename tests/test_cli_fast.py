"""The CLI is fast (issue #39, item 5): ``glue-sparse --help``, every ``glue-sparse <command> --help`` and
``glue-sparse data`` import none of torch, transformers, lm-eval or datasets; only the command being run
loads them. The flags are built by ``glue_sparse.cli.flags``, which must behave as transformers'
HfArgumentParser (the flags were built by it before), checked here against HfArgumentParser itself."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys

import pytest

from glue_sparse.cli.commands import SUBCOMMANDS
from glue_sparse.cli.flags import add_dataclass_flags

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
    assert done.returncode == 0 and "--target_removal" in done.stdout and "--data_lanes" in done.stdout


def _option_dataclasses() -> list[type]:
    found = []
    for module_name, _ in SUBCOMMANDS.values():
        found += list(getattr(importlib.import_module(module_name), "PARSER_DATACLASSES", ()))
    assert len(found) >= 7  # finetune, perplexity, posttrain, pretrain, pretrain-report, speed, demo
    return found


def _actions(parser: argparse.ArgumentParser) -> list[tuple]:
    return [(a.option_strings, a.dest, a.default, a.nargs, a.const, a.required, a.help, type(a).__name__,
             getattr(a.type, "__name__", a.type)) for a in parser._actions if a.dest != "help"]


@pytest.mark.parametrize("options", _option_dataclasses(), ids=lambda c: c.__name__)
def test_flags_are_the_ones_hf_argument_parser_builds(options):
    from transformers import HfArgumentParser

    ours = argparse.ArgumentParser()
    add_dataclass_flags(ours, options)
    theirs = HfArgumentParser(options)
    assert _actions(ours) == _actions(theirs)


@pytest.mark.parametrize("argv", [
    ["--task", "rte", "--method", "gates", "--train-limit", "64", "--no-train-pooler", "--prune", "--lr", "1e-3"],
    ["--task", "sst2", "--prune", "no", "--report_to", "tensorboard", "wandb", "--target_removal", "0.5"],
])
def test_parsed_values_match_hf_argument_parser(argv):
    from transformers import HfArgumentParser

    from glue_sparse.finetune.options import FinetuneConfig

    ours = argparse.ArgumentParser()
    add_dataclass_flags(ours, FinetuneConfig)
    assert vars(ours.parse_args(argv)) == vars(HfArgumentParser(FinetuneConfig).parse_args(argv))
    assert ours.parse_args(argv).train_pooler is ("--no-train-pooler" not in argv)
