"""Deprecated name of ``glue_sparse.experiments.option_fields`` (how an option field is declared; the CLI's
flag builder is ``glue_sparse.cli.flags``); removed in glue-sparse 0.2.0."""

from __future__ import annotations

import warnings

from glue_sparse.experiments.option_fields import option, required

warnings.warn("glue_sparse.experiments.options is deprecated and goes in glue-sparse 0.2.0; import from "
              "glue_sparse.experiments.option_fields", DeprecationWarning, stacklevel=2)

__all__ = ["option", "required"]
