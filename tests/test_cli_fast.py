"""``glue-sparse --help`` lists every subcommand without importing the ML stack (issue #39, item 5):
only the subcommand being run, or asked for its help, loads its module."""

from __future__ import annotations

import subprocess
import sys

from glue_sparse.cli.commands import SUBCOMMANDS

PROBE = """
import sys
from glue_sparse.cli.main import main
try:
    main(["--help"])
except SystemExit as exc:
    assert exc.code == 0, exc.code
print("HEAVY", [m for m in ("torch", "transformers", "lm_eval", "datasets") if m in sys.modules])
"""


def test_top_level_help_lists_every_subcommand_and_imports_no_ml_library():
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "HEAVY []" in done.stdout
    for name in [*SUBCOMMANDS, "eval"]:
        assert name in done.stdout


def test_a_subcommand_still_gets_its_dataclass_flags():
    done = subprocess.run([sys.executable, "-m", "glue_sparse.cli.main", "pretrain", "--help"], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and "--target_removal" in done.stdout and "--data_lanes" in done.stdout
