"""Warnings that point at the user's line: the first frame outside syncheck, fod and features.

A fixed ``stacklevel`` points at the user's call from one call path only; the same warning reached through
``Scorer(...)``, ``Monitor(...)`` or a CLI command sits at a different depth. :func:`warn_user` walks the stack
instead, so the warning names the line that asked for the work.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

#: The packages whose frames a warning skips.
_OURS = tuple(str(Path(__file__).resolve().parents[1] / name) for name in ("syncheck", "fod", "features"))


def _ours(filename: str) -> bool:
    try:
        return str(Path(filename).resolve()).startswith(_OURS)
    except (OSError, ValueError):  # "<string>", "<frozen ...>": not ours
        return False


def user_stacklevel(skip: int = 1) -> int:
    """The ``stacklevel`` for a ``warnings.warn`` in the caller (``skip`` frames above this one) that names the
    first frame outside syncheck's packages (the outermost frame when all are ours)."""
    frame = sys._getframe(skip + 1)
    level = 2
    while frame.f_back is not None and _ours(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    return level


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn(message, category)`` attributed to the first line outside syncheck's packages."""
    warnings.warn(message, category, stacklevel=user_stacklevel())


__all__ = ["user_stacklevel", "warn_user"]
