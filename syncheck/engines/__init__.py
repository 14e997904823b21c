"""The offline runners' old path (0.1 and 0.2): :mod:`syncheck.runners`, with a ``DeprecationWarning``.

``syncheck.engines``, ``syncheck.engines.local`` and ``syncheck.engines.ray_engine`` are the modules
:mod:`syncheck.runners`, :mod:`syncheck.runners.local` and :mod:`syncheck.runners.ray_runner` themselves, the same
objects under both names.
"""

from __future__ import annotations

import sys
import warnings

from syncheck import runners
from syncheck.runners import ENGINES, local, ray_runner

warnings.warn("syncheck.engines moved to syncheck.runners (ray_engine: ray_runner); import it from there",
              DeprecationWarning, stacklevel=2)

sys.modules[__name__ + ".local"] = local
sys.modules[__name__ + ".ray_engine"] = ray_runner
sys.modules[__name__] = runners

__all__ = ["ENGINES"]
