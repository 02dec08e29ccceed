"""``glue-sparse perplexity``: causal-LM perplexity under named protocols. Every flag is a field of
``PerplexityOptions``."""

from __future__ import annotations

from glue_sparse.cli.flags import options_from
from glue_sparse.perplexity.options import PerplexityOptions

PARSER_DATACLASSES = (PerplexityOptions,)


def run(args) -> int:
    from glue_sparse.perplexity.run import run_perplexity  # torch: only when the command runs

    run_perplexity(options_from(args, PerplexityOptions))
    return 0
