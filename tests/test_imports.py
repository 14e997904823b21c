"""Every module imports on its own in a fresh interpreter: an import cycle or a model loaded at import time shows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("features", "syncheck", "fod")


def modules() -> list[str]:
    out = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out.append(".".join(parts))
    return out


CHECK = """
import gc, importlib, sys
import torch

def big_modules():
    return sum(1 for o in gc.get_objects()
               if isinstance(o, torch.nn.Module) and sum(p.numel() for p in o.parameters()) > 1_000_000)

failures = []
for name in sys.argv[1:]:
    # forget every module of ours, so this one is imported first, as in a fresh interpreter (third-party
    # packages stay loaded: they cannot be part of a cycle of ours, and reloading torch would take minutes)
    for loaded in [m for m in sys.modules if m.split(".")[0] in ("features", "syncheck", "fod")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:
        failures.append(f"{name}: {exc.__class__.__name__}: {exc}")
        continue
    if big_modules():
        failures.append(f"{name}: loads a model at import time")
print("\\n".join(failures))
sys.exit(1 if failures else 0)
"""


def test_every_module_imports_alone_without_loading_a_model():
    proc = subprocess.run([sys.executable, "-c", CHECK, *modules()], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]


def test_features_never_imports_syncheck_or_fod():
    for path in (ROOT / "features").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for bad in ("from syncheck", "import syncheck", "from fod", "import fod"):
            assert bad not in text, f"{path.relative_to(ROOT)} imports {bad.split()[-1]}: features/ is the bottom layer"
