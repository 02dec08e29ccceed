"""``glue-sparse data``'s options: which tasks to list, where to look, and how to print."""

from __future__ import annotations

from dataclasses import dataclass

from glue_sparse.common.option_fields import option


@dataclass(kw_only=True)
class DataOptions:
    """Which GLUE splits to look for and where (each field is a flag of ``glue-sparse data``)."""

    data_dir: str | None = option(None, "local GLUE folder (else $GLUE_SPARSE_DATA_DIR, then the Hub)")
    tasks: str = option("all", "comma-separated task names, or 'all'")
    hub: bool = option(True, "ask the Hugging Face Hub for splits not found locally (--no-hub: faster offline)")
    json: bool = option(False, "print machine-readable JSON")
