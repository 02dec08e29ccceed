"""``glue-sparse cache``'s options: what to do (list, verify, clear) and to which entries."""

from __future__ import annotations

from dataclasses import dataclass

from glue_sparse.common.option_fields import option

ACTIONS = ("list", "verify", "clear")


@dataclass(kw_only=True)
class CacheOptions:
    """Which cache entries (each field is a flag of ``glue-sparse cache``)."""

    kind: str | None = option(None, "only entries of this kind: tokens, teacher_logits, tokenizers or models "
                                    "(default: every kind)")
    older_than: str | None = option(None, "clear: only entries built longer ago than this, e.g. 7d, 12h or 30m "
                                          "(default: whatever the age)")
