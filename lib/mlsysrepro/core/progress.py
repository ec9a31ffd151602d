"""Progress bars with the collection's defaults (``tqdm.auto``: a widget in JupyterLab, text elsewhere).

At most one refresh a second, so an executed notebook stores few updates. Set
``MLSYSREPRO_NO_PROGRESS=1`` to silence every bar (the tests' logs stay short).
"""

from __future__ import annotations

import os
from typing import Iterable, TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")


def progress(iterable: Iterable[T], desc: str, total: int | None = None, leave: bool = False) -> Iterable[T]:
    """Wrap a long loop in a progress bar: ``for step in progress(range(n), "training"): ...``."""
    disable = os.environ.get("MLSYSREPRO_NO_PROGRESS", "") not in ("", "0")
    return tqdm(iterable, desc=desc, total=total, leave=leave, mininterval=1.0, disable=disable)
