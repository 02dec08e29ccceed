"""Writing a matplotlib figure the way every result is written: whole or not at all (to a temporary file beside
it, then renamed), and the figure closed."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def save_figure(fig: Any, path: str | Path, **kwargs: Any) -> Path:
    """``fig`` saved atomically to ``path`` (``kwargs`` go to ``savefig``), then closed; the path."""
    import matplotlib.pyplot as plt

    path = Path(path)
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, **kwargs)
    plt.close(fig)
    tmp.replace(path)
    return path
