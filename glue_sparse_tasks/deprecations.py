"""When the names kept only for old scripts go: the pre-rename ``SparseGated*`` classes, the lm-eval model
``sparse-gated`` and the CLI flag spellings replaced by one vocabulary. One release and one date for all of
them, written once; each warning says both, and ``CHANGELOG.md`` lists what goes."""

from __future__ import annotations

#: the release that removes them
REMOVED_IN = "0.2.0"
#: and not before this date (so a user who pinned 0.1.x has a stated window)
NOT_BEFORE = "2027-03-01"


def removal_notice() -> str:
    """The clause every deprecation warning ends with."""
    return f"it goes in glue-sparse {REMOVED_IN} (not before {NOT_BEFORE})"
