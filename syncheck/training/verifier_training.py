"""Fit a verifier with transformers' ``Trainer`` and write it as a shippable verifier directory.

The model is the base encoder (default: the packaged all-MiniLM-L6-v2) with one output logit and binary
cross-entropy (``problem_type="multi_label_classification"`` with one label is ``BCEWithLogitsLoss``). The word
embeddings stay frozen, so the directory stores only the other tensors, in float16
(:mod:`features.alignment.verifier`). Checkpoints go to ``<out>/checkpoints``; a run cut short resumes from the last
one. The loop is ``Trainer``'s own.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from features.alignment.verifier import (
    DIRECTORY_KINDS,
    PACKAGED_BASE,
    WEIGHTS,
    load_verifier,
    resolve_base,
    tensors_sha256,
)
from features.model_manifest import (
    build_manifest,
    inherited_sources,
    read_manifest,
    weights_sha256,
    write_manifest,
)
from syncheck.training.pairs import VerifierPair

#: Tensors that stay frozen (and load from the base instead of the verifier directory).
FROZEN = ("embeddings.word_embeddings.weight",)
#: The orders :attr:`TrainSettings.sampling` takes (``None``: random).
SAMPLING = (None, "length")


@dataclass(frozen=True)
class TrainSettings:
    """How a verifier is fitted.

    Attributes:
        base: the encoder to start from (:data:`~features.alignment.verifier.PACKAGED_BASE`, a hub id or a directory).
        init: a verifier to go on training instead of a fresh head on ``base``: ``"verifier"`` (the shipped one) or
            a verifier directory. Its manifest must name ``base``. Fits a verifier to a domain with few labelled
            rows, starting from what the shipped one learnt. A span reader (``"reader"``, the shipped one, or a
            reader directory) lends only its encoder: the head and the pooler start fresh, as on ``base``.
        max_length: tokens per (premise window, claim) pair, in training and at scoring.
        epochs, batch_size, learning_rate, warmup_ratio, weight_decay: the optimiser's settings.
        attention_dropout: dropout on the attention probabilities (the base's is 0.1). Off by default: on a CPU its
            masks cost about as much as the rest of the forward.
        identity_pooler: start the BERT pooler as the identity, so the head reads ``tanh`` of the [CLS] vector. The
            packaged all-MiniLM-L6-v2 was trained with mean pooling and its pooler weights are near zero (std 0.009):
            through them the head's gradient barely reaches the encoder, and training stalls at chance loss.
        mismatched_share: share of supported pairs also given with another document's premise as negatives
            (:func:`with_mismatched`).
        sampling: the order of training pairs: ``None`` (random) or ``"length"``: batches of pairs of similar length,
            in random order (transformers' length-grouped sampler), so short pairs are not padded to a long one's
            length. On a CPU a step costs about its padded length, so a pool of mostly short pairs trains faster.
        save_steps: steps between checkpoints.
        seed: the data order and initialisation.
        max_steps: stop after this many steps (``-1``: the epochs decide); for tests.
    """

    base: str = PACKAGED_BASE
    init: str | None = None
    max_length: int = 256
    epochs: float = 1.0
    batch_size: int = 16
    learning_rate: float = 5e-5
    warmup_ratio: float = 0.06
    weight_decay: float = 0.01
    attention_dropout: float = 0.0
    identity_pooler: bool = True
    mismatched_share: float = 0.3
    sampling: str | None = None
    save_steps: int = 250
    seed: int = 0
    max_steps: int = -1

    def __post_init__(self) -> None:
        if self.max_length < 32:
            raise ValueError(f"max_length must be at least 32 tokens, got {self.max_length}")
        if self.batch_size < 1 or self.epochs <= 0:
            raise ValueError("batch_size must be >= 1 and epochs > 0")
        if self.sampling not in SAMPLING:
            raise ValueError(f"sampling must be one of {SAMPLING}, got {self.sampling!r}")


def with_mismatched(pairs: Sequence[VerifierPair], share: float, seed: int = 0) -> list[VerifierPair]:
    """``pairs`` and, for a ``share`` of its supported pairs, the same claim against the premise of another source
    document of the same kind (label 0, kind ``"mismatched"``).

    The easiest negatives there are, and free of claim-only artefacts by construction: each such claim is also in
    the data as supported. They teach the model to read the premise against the claim early; without them training
    from all-MiniLM-L6-v2 stayed at chance loss for the first 300 steps.
    """
    rng = random.Random(f"{seed}-mismatched")
    by_kind: dict[str, list[VerifierPair]] = {}
    for p in pairs:
        by_kind.setdefault(p.kind, []).append(p)
    out = list(pairs)
    for p in pairs:
        if p.label != 1 or rng.random() >= share:
            continue
        pool = by_kind[p.kind]
        other = pool[rng.randrange(len(pool))]
        if other.group != p.group and other.premise != p.premise:
            out.append(VerifierPair(other.premise, p.claim, 0, p.group, "mismatched"))
    return out


class PairDataset(torch.utils.data.Dataset):
    """Tokenised ``(premise, claim)`` pairs with float labels; the longer of the two is truncated first. Every pair
    is tokenised once, up front (the length-grouped sampler reads each pair's length before training)."""

    def __init__(self, pairs: Sequence[VerifierPair], tokenizer: Any, max_length: int, chunk: int = 4096) -> None:
        self.pairs, self.labels = list(pairs), [float(p.label) for p in pairs]
        self.encodings: list[dict[str, list[int]]] = []
        for start in range(0, len(self.pairs), chunk):
            part = self.pairs[start:start + chunk]
            enc = tokenizer([p.premise for p in part], [p.claim for p in part], truncation="longest_first",
                            max_length=max_length)
            self.encodings += [{k: enc[k][i] for k in enc} for i in range(len(part))]

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {**self.encodings[i], "labels": [self.labels[i]]}


def frozen_names(model: Any) -> list[str]:
    return [name for name, _ in model.named_parameters() if name.endswith(FROZEN)]


def init_dir(init: str) -> Path:
    """The verifier directory ``init`` names (``"verifier"``, ``"reader"``: the shipped ones)."""
    from syncheck.shipped_models import SPAN_READER, VERIFIER, shipped_model_dir

    shipped = {"verifier": VERIFIER, "reader": SPAN_READER}
    return shipped_model_dir(shipped[init]) if init in shipped else Path(init)


def init_base(init: str) -> str:
    """The base encoder the verifier ``init`` was trained on (its manifest's ``base``).

    Raises:
        OSError, ValueError: ``init`` is not a verifier directory (the message says how to get one).
    """
    return read_manifest(init_dir(init), DIRECTORY_KINDS)["base"]


def base_model(settings: TrainSettings) -> tuple[Any, Any]:
    """The base encoder with a fresh one-logit head (or the verifier ``settings.init``), and its tokenizer.

    Raises:
        ValueError: ``settings.init`` was trained on another base than ``settings.base``.
    """
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from features.alignment.hf_utils import hub_kwargs

    encoder = None
    if settings.init is not None:
        model, tokenizer, manifest = load_verifier(init_dir(settings.init), dtype=torch.float32)
        if manifest.get("base", settings.base) != settings.base:
            raise ValueError(f"the verifier {settings.init!r} was trained on the base {manifest['base']!r}, not "
                             f"{settings.base!r}; pass --base {manifest['base']} (or leave --base out)")
        if manifest.get("head", "logit") == "logit":
            return model, tokenizer  # with its own dropout settings
        encoder = model.base_model.state_dict()  # a span reader: its encoder, under a fresh head
    torch.manual_seed(settings.seed)  # the fresh head starts as it would on the base alone
    path = resolve_base(settings.base)
    model = AutoModelForSequenceClassification.from_pretrained(
        path, num_labels=1, problem_type="multi_label_classification", id2label={0: "supported"},
        label2id={"supported": 0}, attention_probs_dropout_prob=settings.attention_dropout, **hub_kwargs())
    pooler = getattr(getattr(model, "bert", None), "pooler", None)
    if settings.identity_pooler and pooler is not None:
        with torch.no_grad():  # all-MiniLM-L6-v2's pooler is near zero (std 0.009): its gradient would not flow
            pooler.dense.weight.copy_(torch.eye(pooler.dense.weight.shape[0]))
            pooler.dense.bias.zero_()
    if encoder is not None:
        missing, unexpected = model.base_model.load_state_dict(encoder, strict=False)
        if unexpected or any(not name.startswith("pooler.") for name in missing):
            raise ValueError(f"the encoder of {settings.init!r} does not fit {settings.base!r} (missing "
                             f"{missing[:3]}, unexpected {unexpected[:3]}); start from a reader trained on that base")
    return model, AutoTokenizer.from_pretrained(path, **hub_kwargs())


def last_checkpoint(directory: Path) -> str | None:
    from transformers.trainer_utils import get_last_checkpoint

    return get_last_checkpoint(str(directory)) if directory.is_dir() else None


def training_arguments(out: Path, settings: Any, progress: bool) -> Any:
    """``Trainer``'s arguments from a settings object (batch size, epochs, max steps, learning rate, warmup ratio,
    weight decay, save steps, seed): checkpoints in ``<out>/checkpoints``, a linear schedule, one process."""
    from transformers import TrainingArguments

    return TrainingArguments(
        output_dir=str(out / "checkpoints"), per_device_train_batch_size=settings.batch_size,
        num_train_epochs=settings.epochs, max_steps=settings.max_steps, learning_rate=settings.learning_rate,
        warmup_steps=settings.warmup_ratio, weight_decay=settings.weight_decay, lr_scheduler_type="linear",
        save_strategy="steps", save_steps=settings.save_steps, save_total_limit=2, logging_steps=50,
        report_to=[], seed=settings.seed, data_seed=settings.seed, dataloader_num_workers=0,
        train_sampling_strategy="group_by_length" if getattr(settings, "sampling", None) == "length" else "random",
        disable_tqdm=not progress, remove_unused_columns=False, dataloader_pin_memory=torch.cuda.is_available(),
    )


def fit(pairs: Sequence[VerifierPair], out: str | Path, settings: TrainSettings, progress: bool = True) -> Any:
    """Train on ``pairs`` (resuming from ``<out>/checkpoints`` when a checkpoint is there); returns the model."""
    from transformers import DataCollatorWithPadding, Trainer

    out = Path(out)
    model, tokenizer = base_model(settings)
    for name, param in model.named_parameters():
        param.requires_grad_(not name.endswith(FROZEN))
    args = training_arguments(out, settings, progress)
    pairs = with_mismatched(pairs, settings.mismatched_share, settings.seed)
    trainer = Trainer(model=model, args=args, train_dataset=PairDataset(pairs, tokenizer, settings.max_length),
                      data_collator=DataCollatorWithPadding(tokenizer))
    trainer.train(resume_from_checkpoint=last_checkpoint(out / "checkpoints"))
    return trainer.model.eval(), tokenizer


def export(model: Any, out: str | Path, settings: TrainSettings, data: dict[str, Any], command: str) -> dict:
    """Write ``model`` as a verifier directory, or a span reader's (``settings.head == "span"``): float16 trained
    tensors, config, manifest (:mod:`features.model_manifest`); returns the manifest.

    The manifest names the commit of the checkout that built it (``None`` from an installed wheel) and the libraries
    and machine it trained on (:func:`syncheck.build_info.build_record`), and its paths are reduced to their names
    (:func:`syncheck.build_info.without_machine_paths`), so it can be shipped.
    """
    from safetensors.torch import save_file

    from features.alignment.span_reader import READER_HEAD
    from features.alignment.span_reader import WEIGHTS as READER_WEIGHTS
    from syncheck.build_info import build_record, without_machine_paths
    from syncheck.shipped_models import base_licences

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    head = getattr(settings, "head", "logit")
    kind, weights = ("span-reader", READER_WEIGHTS) if head == READER_HEAD else ("verifier", WEIGHTS)
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    frozen = [k for k in state if k.endswith(FROZEN)]
    trained = {k: v.to(torch.float16).contiguous() for k, v in state.items() if k not in frozen}
    save_file(trained, str(out / weights))
    (out / weights).chmod(0o644)
    model.config.save_pretrained(str(out))
    started = read_manifest(init_dir(settings.init), DIRECTORY_KINDS) if settings.init else None
    data = without_machine_paths({"rows": data.get("train_pairs", data.get("answers")), **data})
    training = {**build_record(command, next(model.parameters()).device),
                "settings": without_machine_paths(asdict(settings))}  # an --init directory by its name, as the command
    if started:  # what the model it went on training learned is in it too: its sources, and its whole manifest
        training["init"] = without_machine_paths(started)  # (its own init in turn), so each step can be rebuilt
        inherited = inherited_sources(started)
        data = {**data, "sources": [*data.get("sources", []), *inherited],
                "rows": (data["rows"] or 0) + sum(int(s["rows"]) for s in inherited)}
    manifest = build_manifest(
        out, name=out.resolve().name, kind=kind, weights=weights, files=[weights, "config.json"], base=settings.base,
        head=head, frozen=sorted(frozen), frozen_sha256=tensors_sha256(state, frozen), max_length=settings.max_length,
        **({"init_weights_sha256": weights_sha256(started)} if started else {}),
        training=training, data=data, licences=base_licences(settings.base))
    write_manifest(out, manifest)
    return manifest


__all__ = ["FROZEN", "PairDataset", "TrainSettings", "export", "fit", "init_base", "init_dir", "last_checkpoint",
           "training_arguments", "SAMPLING"]
