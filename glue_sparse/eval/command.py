"""``glue-sparse eval``: lm-eval's own arguments, passed through (``main`` gives this command the raw
argument list, because lm-eval parses it); its help is lm-eval's."""

from __future__ import annotations

#: the one-line help ``glue-sparse --help`` shows
HELP = ("lm-eval run with glue_sparse tasks and models registered: lm-eval's own arguments, passed through as they are "
        "(so --model is lm-eval's model type, --output_path its output; same as `lm_eval run`)")


def run(argv: list[str]) -> int:
    from glue_sparse.eval.run import run_lm_eval  # lm-eval's CLI: loaded only for `glue-sparse eval`

    return run_lm_eval(argv)
