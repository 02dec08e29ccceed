"""Deprecated home of ``options_from`` (now ``glue_sparse.cli.flags``, beside the flag builder); removed
in glue-sparse 0.2.0."""

from __future__ import annotations

import warnings

from glue_sparse.cli.flags import options_from

warnings.warn("glue_sparse.cli.options is deprecated and goes in glue-sparse 0.2.0; import options_from from "
              "glue_sparse.cli.flags", DeprecationWarning, stacklevel=2)

__all__ = ["options_from"]
