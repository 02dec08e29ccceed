"""Each default is written once (the option dataclasses of the experiment layer): the CLI's flags and
the defaults table in docs/fine-tuning.md come from there, and these tests fail when either drifts."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from glue_sparse.cli.main import build_parser
from glue_sparse.finetune.defaults_doc import defaults_markdown
from glue_sparse.finetune.options import FinetuneConfig, TrainingOptions
from glue_sparse.perplexity.options import PerplexityOptions, ProtocolOptions
from glue_sparse.perplexity.protocols import galore_perplexity, sparsegpt_perplexity
from glue_sparse.posttrain.options import PosttrainOptions
from glue_sparse.speed.options import SpeedOptions

DEFAULTS_DOC = Path(__file__).resolve().parent.parent / "docs" / "fine-tuning.md"


def test_readme_defaults_table_is_the_generated_one():
    text = DEFAULTS_DOC.read_text()
    block = re.search(r"<!-- defaults:begin -->\n(.*?)\n<!-- defaults:end -->", text, re.S)
    assert block, "docs/fine-tuning.md has no defaults block"
    assert block.group(1) == defaults_markdown(), "docs/fine-tuning.md defaults drifted: paste defaults_markdown()"


@pytest.mark.parametrize("command, options, required", [
    ("finetune", TrainingOptions, ["--tasks", "rte", "--output", "x"]),
    ("perplexity", PerplexityOptions, []),
    ("posttrain", PosttrainOptions, ["--output", "x"]),
    ("speed", SpeedOptions, []),
])
def test_cli_defaults_are_the_dataclass_defaults(command, options, required):
    args = build_parser().parse_args([command, *required])
    for f in dataclasses.fields(options):
        if (f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING) or \
                f.metadata.get("flag", "") is None:  # no flag (e.g. seed: --seeds runs one per seed)
            continue
        expected = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        assert getattr(args, f.name) == expected, f"--{f.name} of {command}"


def test_flags_keep_their_old_names():
    args = build_parser().parse_args(["finetune", "--tasks", "rte", "--output", "x", "--lr", "0.5", "--gate-lr",
                                      "0.25", "--grad-accum", "2", "--from", "runs/full", "--select", "best",
                                      "--target-removal", "0.3", "--prune", "--no-hub"])
    assert (args.learning_rate, args.gate_learning_rate, args.gradient_accumulation_steps) == (0.5, 0.25, 2)
    assert (args.from_run, args.model_selection, args.target_removal, args.prune, args.hub) == (
        "runs/full", "best", 0.3, True, False)


def test_protocol_function_defaults_are_the_option_defaults():
    import inspect

    sparsegpt = inspect.signature(sparsegpt_perplexity).parameters
    galore = inspect.signature(galore_perplexity).parameters
    assert sparsegpt["n_samples"].default == ProtocolOptions.n_samples == 256
    assert sparsegpt["seqlen"].default == ProtocolOptions.seqlen
    assert galore["token_budget"].default == ProtocolOptions.token_budget


def test_finetune_config_is_training_options_plus_what_it_trains_on():
    extra = {f.name for f in dataclasses.fields(FinetuneConfig)} - {f.name for f in dataclasses.fields(TrainingOptions)}
    assert extra == {"task", "seed", "base_model"}


def test_a_repeated_list_flag_adds_instead_of_replacing():
    args = build_parser().parse_args(["speed", "--adapter", "a", "--adapter", "b", "c"])
    assert args.adapter == ["a", "b", "c"]  # argparse alone would keep only the last --adapter
