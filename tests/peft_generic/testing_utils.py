"""The two helpers of peft's ``tests/testing_utils.py`` that ``testing_common.py`` imports, for local models.

PEFT's originals import ``datasets`` and reach the Hub; here every model is built from a config, so
``hub_online_once`` has nothing to guard and ``get_state_dict`` is restated as the four lines it is.
"""

from __future__ import annotations

from contextlib import contextmanager


def get_state_dict(model, unwrap_compiled: bool = True) -> dict:
    """The model's state dict, through a ``torch.compile`` wrapper if there is one."""
    if unwrap_compiled:
        model = getattr(model, "_orig_mod", model)
    return model.state_dict()


@contextmanager
def hub_online_once(model_id: str):
    """No-op: the models are local (PEFT's version limits Hub access to once per model id)."""
    yield
