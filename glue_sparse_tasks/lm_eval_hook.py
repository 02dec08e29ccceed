"""Make ``lm_eval --tasks glue_sparse --model hf-classifier`` work right after ``pip install``.

lm-eval 0.4.13 has no plugin discovery. A ``.pth`` file in site-packages imports this module at
interpreter start-up; it only puts a tiny finder on ``sys.meta_path`` (no lm_eval, no torch). When,
and only when, lm_eval itself is imported, the finder:

- after ``lm_eval.models`` runs, registers our models as lazy placeholders (``lm_eval.models``
  must come first, or lm-eval's own models would never be registered);
- after ``lm_eval.tasks.manager`` runs, makes every ``TaskManager`` also index our task folder.

Nothing in lm-eval's files is written. Set ``GLUE_SPARSE_NO_HOOK=1`` to switch the hook off.
"""

from __future__ import annotations

import os
import sys

ENTRY_POINT_GROUP = "lm_eval.models"


def our_models() -> dict[str, str]:
    """lm-eval model names we provide, as lazy ``module:attr`` targets, read from this distribution's
    ``lm_eval.models`` entry points (pyproject.toml: the one place the registration is written)."""
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)
            if ep.dist is not None and ep.dist.name == "glue-sparse"}


def register_models(_module=None) -> None:
    """Register our models in lm-eval's registry (after its built-ins)."""
    import importlib.util

    import lm_eval.models  # noqa: F401  (built-ins first, see module docstring)
    from lm_eval.api.registry import model_registry

    for name, target in our_models().items():
        module_name = target.partition(":")[0]
        if name not in model_registry and importlib.util.find_spec(module_name) is not None:
            model_registry.register(name, target=target)


def add_task_path(module=None) -> None:
    """Make every ``TaskManager`` index our task folder after lm-eval's own (idempotent)."""
    import functools
    import inspect
    from pathlib import Path

    from glue_sparse_tasks import TASKS_DIR

    if module is None:
        import lm_eval.tasks.manager as module
    manager = module.TaskManager
    if getattr(manager.__init__, "_glue_sparse", False):
        return
    original = manager.__init__
    signature = inspect.signature(original)

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        paths = bound.arguments.get("include_path") or []
        paths = list(paths) if isinstance(paths, (list, tuple)) else [paths]
        if not any(Path(p).resolve() == Path(TASKS_DIR) for p in paths):
            paths.append(TASKS_DIR)
        bound.arguments["include_path"] = paths
        original(*bound.args, **bound.kwargs)

    __init__._glue_sparse = True  # type: ignore[attr-defined]
    manager.__init__ = __init__


_AFTER_IMPORT = {"lm_eval.models": register_models, "lm_eval.tasks.manager": add_task_path}


class _Loader:
    """Delegates to the real loader and runs a callback once the module has executed."""

    def __init__(self, loader, callback):
        self._loader = loader
        self._callback = callback

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        module.__loader__ = self._loader
        try:
            self._callback(module)
        except Exception as exc:  # never break lm_eval because of us
            print(f"glue-sparse: lm-eval start-up hook failed: {exc!r}", file=sys.stderr)


class _Finder:
    """A ``sys.meta_path`` finder (duck-typed: importing importlib.abc would cost start-up time)."""

    def find_spec(self, fullname, path=None, target=None):
        callback = _AFTER_IMPORT.get(fullname)
        if callback is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _Loader(spec.loader, callback)
                return spec
        return None


def install() -> None:
    """Put the finder on ``sys.meta_path``; if lm_eval is already imported, patch it now."""
    if os.environ.get("GLUE_SPARSE_NO_HOOK"):
        return
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
    for name, callback in _AFTER_IMPORT.items():
        if name in sys.modules:
            callback(sys.modules[name])


def activate() -> None:
    """Register models and the task folder now (used by ``glue-sparse eval`` and tests)."""
    register_models()
    add_task_path()
