"""Layer 5, the ``glue-sparse`` command: one module per subcommand, each turning flags into one call
of the experiment layer (``main`` holds the CLI boundary: error lines, exit codes, ``-v``).

Importing this package sets the quiet environment (unless ``-v``/``--verbose`` is on the command line)
before any library loads: tqdm, transformers and datasets read those switches once, at import time.
"""

import sys

from glue_sparse_tasks.console import quiet_environment

quiet_environment(verbose=any(arg in ("-v", "--verbose") for arg in sys.argv[1:]))
