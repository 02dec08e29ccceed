"""What a person sees in the terminal: our one-line status messages, one progress bar per long step
(fine-tuning: ``QuietProgressCallback``; evaluation: the ``hf-classifier`` model's bar),
and no library chatter (load reports, pin-memory and deprecation warnings, per-call ``datasets.map``
bars) unless ``-v``/``--verbose`` asks for it.

Our messages go through the ``glue_sparse`` logger, so users can silence or redirect them with
``logging``. The quiet settings are environment variables as well as in-process switches, so worker
processes (a bench's fine-tunes, Ray tasks) inherit them.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from typing import Any

LOGGER_NAME = "glue_sparse"
VERBOSE_ENV = "GLUE_SPARSE_VERBOSE"

#: Read by the libraries at import time; children inherit them.
QUIET_ENV = {
    "TRANSFORMERS_VERBOSITY": "error",
    "DATASETS_VERBOSITY": "error",
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # transformers' "Loading weights" bar follows this switch
    "LMEVAL_LOG_LEVEL": "ERROR",
    "TOKENIZERS_PARALLELISM": "false",
    "PYTHONWARNINGS": "ignore",
    "RAY_DEDUP_LOGS": "0",
    # tqdm's default for every bar that does not say otherwise (library bars: lm-eval's context building,
    # weight loading and saving); our own views pass disable=False explicitly, so one bar per long step
    "TQDM_DISABLE": "1",
}
QUIET_LOGGERS = ("transformers", "datasets", "lm_eval", "lm-eval", "peft", "accelerate", "torch", "ray",
                 "huggingface_hub", "evaluate", "filelock", "urllib3")


QUIET_BARS_ENV = "GLUE_SPARSE_QUIET"


def progress(iterable: Any = None, total: int | None = None, desc: str | None = None, unit: str = "it") -> Any:
    """A tqdm bar for one of our long steps (the bars the Trainer draws): shown on a terminal, off when output
    is not one or under ``--quiet``."""
    from tqdm.auto import tqdm

    quiet = os.environ.get(QUIET_BARS_ENV) == "1" or not sys.stderr.isatty()
    return tqdm(iterable, total=total, desc=desc, unit=unit, disable=quiet, dynamic_ncols=True, leave=False)


def logger() -> logging.Logger:
    return logging.getLogger(LOGGER_NAME)


def is_verbose() -> bool:
    return os.environ.get(VERBOSE_ENV) == "1"


def quiet_environment(verbose: bool = False) -> None:
    """Set the libraries' quiet switches in the environment (kept if the user set them). They must be set
    before the libraries are imported, which is why the CLI package does this on import."""
    if not verbose:
        for key, value in QUIET_ENV.items():
            os.environ.setdefault(key, value)


def quiet_loggers() -> None:
    """Library loggers down to errors. Call again after importing a library that sets its own level on
    import (Ray sets ``ray`` to INFO, so its start-up warnings would reach the terminal)."""
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)


def configure_console(verbose: bool | None = None, quiet: bool | None = None) -> None:
    """Set up the terminal for one command (and the processes it starts).

    ``verbose=None`` keeps what the environment says (a worker started by a command that was given -v);
    ``quiet`` (``-q``/``--quiet``) switches our progress bars off as well.
    """
    if verbose is None:
        verbose = is_verbose()
    os.environ[VERBOSE_ENV] = "1" if verbose else "0"
    if quiet is not None:
        os.environ[QUIET_BARS_ENV] = "1" if quiet else "0"
    ours = logger()
    if not ours.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        ours.addHandler(handler)
        ours.propagate = False
    ours.setLevel(logging.DEBUG if verbose else logging.INFO)
    if verbose:
        return
    quiet_environment()
    warnings.filterwarnings("ignore")
    quiet_loggers()
    if "transformers" in sys.modules:  # already imported: its verbosity was read, set it directly
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    if "datasets" in sys.modules:
        import datasets

        datasets.disable_progress_bars()
        datasets.utils.logging.set_verbosity_error()
