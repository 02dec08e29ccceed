"""``glue-sparse perplexity``: causal-LM perplexity under named protocols. Every flag is a field of
``PerplexityOptions``."""

from __future__ import annotations

from glue_sparse.cli.options import options_from
from glue_sparse.experiments.perplexity import PerplexityOptions, run_perplexity

PARSER_DATACLASSES = (PerplexityOptions,)


def run(args) -> int:
    run_perplexity(options_from(args, PerplexityOptions))
    return 0
