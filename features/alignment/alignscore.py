"""AlignScore (Zha et al., 2023) from its official checkpoints: the ``align_score`` SynCheck uses.

SynCheck (Wu et al., 2024, Appendix A.1) computes each sentence's AlignScore against
the context with AlignScore-base. The official checkpoints
(``AlignScore-base.ckpt`` / ``AlignScore-large.ckpt`` in the hub repository
``yzha/AlignScore``) are PyTorch-Lightning files whose ``state_dict`` holds:

- ``base_model.*``: a RoBERTa encoder *with* its pooler (roberta-base: hidden
  768; roberta-large: 1024), the backbone named by
  ``hyper_parameters["model"]``;
- ``tri_layer.weight`` ``(3, H)`` / ``tri_layer.bias`` ``(3,)``: the 3-way
  head over the pooled output, class 0 = "aligned";
- ``bin_layer`` ``(2, H)``, ``reg_layer`` ``(1, H)`` and ``mlm_head.*``: the
  binary, regression and masked-LM heads, unused here.

Score of one (premise, claim) pair, as AlignScore's default ``nli_sp`` mode:
softmax of ``tri_layer(pooler(encoder(premise, claim)))``, probability of class
0. Long inputs, as AlignScore's own chunking: the premise's sentences are
grouped into ``n = words // 350 + 1`` chunks of ``max(len(sentences) // n, 1)``
consecutive sentences (about 350 *words* each), the claim is split into
sentences, and the score is the max over premise chunks of each claim
sentence, averaged over claim sentences.

Two deliberate differences from the official code: sentences are split with
``nupunkt`` (a Punkt implementation that works offline; the official code uses
NLTK's ``punkt``, whose data must be downloaded), and a chunk that still does
not fit next to a claim sentence in 512 tokens is split into overlapping
windows (max over windows) instead of being truncated, so text at the end of a
chunk is never dropped. Sign convention ``+``: higher = better supported.
"""

from __future__ import annotations

import os
import pickle
from collections import OrderedDict
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from features.alignment.hf_utils import hub_kwargs, hub_offline, load_error, model_max_tokens, resolve_dtype
from features.alignment.windows import max_over_windows, premise_budget, split_windows
from features.sentences import split_sentences

DEFAULT_REPO = "yzha/AlignScore"
DEFAULT_FILE = "AlignScore-base.ckpt"
#: Backbone by hidden size, for checkpoints whose hyper-parameters do not name it.
BACKBONES = {768: "roberta-base", 1024: "roberta-large"}
CHUNK_WORDS = 350
ALIGNED_CLASS = 0


def load_checkpoint(path: str | Path) -> tuple[dict[str, torch.Tensor], dict]:
    """``(state_dict, hyper_parameters)`` of a Lightning (or plain) checkpoint, loaded weights-only.

    Lightning also pickles objects of its own classes (e.g. the
    hyper-parameters as ``pytorch_lightning.utilities.parsing.AttributeDict``).
    Loading stays ``weights_only=True`` (no code from the file runs, and
    Lightning need not be installed): every class the allow-list does not know
    is read as a plain ``OrderedDict`` of its items and attributes.
    """
    path = str(path)
    unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    try:
        with torch.serialization.safe_globals([(OrderedDict, name) for name in unsafe]):
            payload = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise ValueError(f"cannot read {path} as a checkpoint ({exc}); pass an AlignScore .ckpt file") from exc
    if not isinstance(payload, dict):
        raise ValueError(f"{path} holds a {type(payload).__name__}, not a checkpoint dict; pass an AlignScore .ckpt")
    state = payload.get("state_dict", payload)
    hparams = payload.get("hyper_parameters") or {}
    state = {k: v for k, v in state.items() if isinstance(v, torch.Tensor)}
    return state, dict(hparams)


def resolve_checkpoint(spec: str | os.PathLike) -> Path:
    """A checkpoint file from a path, a directory holding one, or a hub id (``owner/repo[/file.ckpt]``)."""
    path = Path(spec).expanduser()
    if path.is_file():
        return path
    if path.is_dir():
        found = sorted(path.glob("*.ckpt"))
        preferred = [p for p in found if p.name == DEFAULT_FILE]
        if not found:
            raise FileNotFoundError(f"{path} holds no .ckpt file; pass the AlignScore checkpoint file itself")
        return (preferred or found)[0]
    parts = str(spec).strip("/").split("/")
    if len(parts) not in (2, 3) or str(spec).startswith((".", "~")):
        raise FileNotFoundError(
            f"AlignScore checkpoint {spec!r} is neither a file, a directory, nor a hub id like "
            f"'{DEFAULT_REPO}' or '{DEFAULT_REPO}/AlignScore-large.ckpt'"
        )
    repo, filename = "/".join(parts[:2]), (parts[2] if len(parts) == 3 else DEFAULT_FILE)
    from huggingface_hub import hf_hub_download

    try:
        return Path(hf_hub_download(repo, filename, local_files_only=hub_offline()))
    except Exception as exc:  # hub errors come in many classes
        raise OSError(load_error("AlignScore checkpoint", f"{repo}/{filename}", exc)) from exc


def alignscore_chunks(premise: str, chunk_words: int = CHUNK_WORDS) -> list[str]:
    """AlignScore's premise chunks: consecutive sentences, about ``chunk_words`` words each."""
    sentences = [s.text for s in split_sentences(premise)] or [""]
    n_chunks = len(premise.split()) // chunk_words + 1
    per_chunk = max(len(sentences) // n_chunks, 1)
    return [" ".join(sentences[i : i + per_chunk]) for i in range(0, len(sentences), per_chunk)]


class AlignScoreScorer:
    """``align_score`` backend: an official AlignScore checkpoint (``nli_sp`` mode).

    Args:
        checkpoint: ``.ckpt`` path, a directory holding one, or a hub id
            (default ``yzha/AlignScore`` -> ``AlignScore-base.ckpt``).
        backbone: hub id or directory of the RoBERTa config and tokenizer
            (default: the checkpoint's ``hyper_parameters["model"]``, else by
            hidden size: roberta-base / roberta-large).
        device, dtype: where and in which precision to run.
        max_length: input tokens per pair (AlignScore: 512).
        chunk_words: words per premise chunk (AlignScore: 350).
        split_claims: score claim sentences separately and average (AlignScore
            does; a SynCheck sentence is usually one sentence anyway).
    """

    name = "alignscore"

    def __init__(
        self,
        checkpoint: str | os.PathLike = DEFAULT_REPO,
        *,
        backbone: str | None = None,
        device: str | torch.device | None = None,
        dtype: torch.dtype | str | None = None,
        max_length: int = 512,
        chunk_words: int = CHUNK_WORDS,
        split_claims: bool = True,
        overlap: int | None = None,
        progress: bool | None = None,
    ) -> None:
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        path = resolve_checkpoint(checkpoint)
        state, hparams = load_checkpoint(path)
        tri_w, tri_b = state.get("tri_layer.weight"), state.get("tri_layer.bias")
        if tri_w is None or tri_b is None or tri_w.ndim != 2 or tri_w.shape[0] != 3:
            raise ValueError(f"{path} has no 3-way 'tri_layer' head (3, hidden); it is not an AlignScore checkpoint")
        hidden = int(tri_w.shape[1])
        backbone = backbone or hparams.get("model") or BACKBONES.get(hidden)
        if not backbone:
            raise ValueError(
                f"cannot tell the backbone of {path} (hidden size {hidden}); pass backbone=<hub id or dir>"
            )
        try:
            config = AutoConfig.from_pretrained(backbone, **hub_kwargs())
            self.tokenizer = AutoTokenizer.from_pretrained(backbone, **hub_kwargs())
        except (OSError, ValueError) as exc:
            raise OSError(load_error("AlignScore backbone", str(backbone), exc)) from exc
        encoder = AutoModel.from_config(config, add_pooling_layer=True)
        encoder_state = {k[len("base_model.") :]: v for k, v in state.items() if k.startswith("base_model.")}
        missing, _ = encoder.load_state_dict(encoder_state, strict=False)
        missing = [k for k in missing if not k.endswith(("position_ids", "token_type_ids"))]
        if missing:
            raise ValueError(
                f"{path} does not match backbone {backbone!r}: missing {missing[:5]}...; pass the right backbone=<id>"
            )
        dtype = resolve_dtype(dtype, device)
        self.encoder = encoder.to(dtype=dtype).eval()
        self.tri_layer = torch.nn.Linear(hidden, 3).to(dtype=dtype).eval()
        self.tri_layer.load_state_dict({"weight": tri_w, "bias": tri_b})
        if device is not None:
            self.encoder.to(device)
            self.tri_layer.to(device)
        self.max_length = model_max_tokens(self.encoder, self.tokenizer, max_length)
        self.chunk_words = chunk_words
        self.split_claims = split_claims
        self.overlap = overlap
        self.progress = progress
        self.checkpoint = path

    @property
    def device(self) -> torch.device:
        return next(self.encoder.parameters()).device

    def score(self, premises: Sequence[str], claims: Sequence[str], batch_size: int = 16) -> np.ndarray:
        """``n`` pairs -> ``(n,)`` mean over claim sentences of the max over premise chunks of P(aligned)."""
        if len(premises) != len(claims):
            raise ValueError(f"got {len(premises)} premises but {len(claims)} claims; pass one premise per claim")
        chunks = {p: alignscore_chunks(p, self.chunk_words) for p in set(premises)}
        flat_p, flat_c, owner = [], [], []
        for i, (p, c) in enumerate(zip(premises, claims)):
            sents = [s.text for s in split_sentences(c)] if self.split_claims else [c]
            for s in sents or [c]:
                flat_p.append(p)
                flat_c.append(s)
                owner.append(i)

        def windows_of(premise: str, claim: str) -> list[str]:
            budget = premise_budget(self.tokenizer, claim, self.max_length)
            return [w.text for ch in chunks[premise] for w in split_windows(ch, budget, self.overlap, self.tokenizer)]

        per_sentence = max_over_windows(
            flat_p, flat_c, windows_of, self._score_pairs, batch_size, self.progress, "alignscore"
        )
        sums = np.zeros(len(premises))
        counts = np.zeros(len(premises))
        np.add.at(sums, np.asarray(owner, dtype=np.int64), per_sentence)
        np.add.at(counts, np.asarray(owner, dtype=np.int64), 1.0)
        return sums / np.maximum(counts, 1.0)

    @torch.no_grad()
    def _score_pairs(self, premises: list[str], claims: list[str]) -> np.ndarray:
        enc = self.tokenizer(
            premises, claims, truncation="only_first", max_length=self.max_length, padding=True, return_tensors="pt"
        ).to(self.device)
        enc.pop("token_type_ids", None)
        pooled = self.encoder(**enc).pooler_output
        probs = torch.softmax(self.tri_layer(pooled).float(), dim=-1)
        return probs[:, ALIGNED_CLASS].cpu().numpy()
