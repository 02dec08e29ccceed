"""``glue-sparse cache list|verify|clear``: what the cache holds, whether each entry is whole, and clearing
it. Flags are the fields of ``CacheOptions``; the action is a positional word."""

from __future__ import annotations

import argparse

from glue_sparse.cache.options import ACTIONS, CacheOptions
from glue_sparse.cli.flags import options_from

PARSER_DATACLASSES = (CacheOptions,)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=ACTIONS, help="list: entries by kind with size, age and what made them; verify: "
                   "check every entry, name the damaged ones, exit 1 if any; clear: remove the entries --kind and "
                   "--older-than name")


def run(args: argparse.Namespace) -> int:
    from glue_sparse.cache.run import run_cache  # nothing heavy, but the room's work loads when it runs

    return run_cache(args.action, options_from(args, CacheOptions))
