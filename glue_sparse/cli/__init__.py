"""Layer 5, the ``glue-sparse`` command: the entry point (``main``: error lines, exit codes, ``-v``), the
subcommand registry (``commands``) and the flag builder (``flags``). Each subcommand lives in its
workflow's room as ``command.py`` (``glue_sparse/<room>/command.py``), turning flags into one call of
that room's ``run``.

Importing this package sets the quiet environment (unless ``-v``/``--verbose`` is on the command line)
before any library loads: tqdm, transformers and datasets read those switches once, at import time.
"""

import sys

from glue_sparse_tasks.console import quiet_environment

quiet_environment(verbose=any(arg in ("-v", "--verbose") for arg in sys.argv[1:]))
