"""The Ray runner (``--engine ray``): the same scorer on Ray Data, one model replica per actor.

The driver groups the input into scoring batches (``batch_size`` records,
counted from the first item, exactly as the local runner does), numbers the
groups, and hands them to ``ray.data`` ``map_batches`` over a fixed pool of
``num_replicas`` actors of :class:`ScoreGroups`. Each actor loads the model
once, in its constructor. Rows come back tagged with their group number and
are yielded in input order, so the output is identical to the local runner's,
row for row.

The input is held in Ray's object store (spilled to disk when it is large);
the driver needs no model. The LID reference set is built or loaded once, in
a Ray task that runs while the replicas start, and shared with all of them.

Bit-for-bit equality with the local runner also needs the same number of
torch threads per model: Ray gives each replica ``num_cpus_per_replica``
threads (OMP_NUM_THREADS), while a local run uses every core unless
OMP_NUM_THREADS is set. With other thread counts, float reductions can differ
in the last bits (measured on SmolLM2: 1 of 48 rows, relative 7e-8 on
entropy/KL values).

Ray is an optional dependency: ``pip install 'syncheck[ray]'``.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
from typing import Any, Iterable, Iterator, Mapping

import numpy as np

from syncheck.io import output_id
from syncheck.records import Record, RecordError

INSTALL_HINT = "pip install 'syncheck[ray]'  (or: pip install 'ray[data]>=2.9')"


class RayNotInstalledError(ImportError):
    """Ray Data is missing; the message says how to install it."""


def import_ray():
    """``ray`` with ``ray.data``, or :class:`RayNotInstalledError` saying how to install it."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as exc:
        raise RayNotInstalledError(
            f"--engine ray needs Ray Data, which is not installed ({exc}); {INSTALL_HINT}"
        ) from None
    return ray


def _failed_rows(items: list[Record | RecordError], exc: BaseException) -> list[dict[str, Any]]:
    """Error rows for a group whose scoring raised (the other groups go on)."""
    msg = (
        f"scoring failed on a Ray worker ({exc.__class__.__name__}: {exc}); "
        "rerun this row with --engine local to see the full traceback"
    )
    return [{"id": output_id(it), "sentences": [], "warnings": [], "error": msg} for it in items]


class ScoreGroups:
    """Ray Data callable class: one :class:`~syncheck.scorer.Scorer` per actor.

    Input batch: ``{"seq": (n,) int64, "payload": (n,) pickled lists of
    records}``; output: ``{"seq": (n,) int64, "rows": (n,) JSON arrays of
    rows}``, one entry per group, in the same order.
    """

    def __init__(self, scorer_kwargs: Mapping[str, Any]) -> None:
        import ray

        from syncheck.scorer import Scorer

        kwargs = dict(scorer_kwargs)
        if isinstance(kwargs.get("lid"), ray.ObjectRef):  # the shared LID reference set, being built by a task
            kwargs["lid"] = ray.get(kwargs["lid"])
        self.scorer = Scorer(**kwargs)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        rows_out = []
        for blob in batch["payload"]:
            items = pickle.loads(blob)
            try:
                rows = [
                    r.to_json(vectors=self.scorer.featurizer.keep_vectors) for r in self.scorer.score_records(items)
                ]
            except Exception as exc:  # one bad group must not kill the job
                rows = _failed_rows(items, exc)
            rows_out.append(json.dumps(rows))
        return {"seq": np.asarray(batch["seq"], dtype=np.int64), "rows": np.asarray(rows_out, dtype=object)}


def _load_lid_reference(scorer_kwargs: Mapping[str, Any]):
    """Build or load the LID reference set once (run as a Ray task)."""
    from syncheck.lid_reference import load_or_build
    from syncheck.model.models import load_model

    lm = load_model(scorer_kwargs.get("model", "smollm2-135m"), device=scorer_kwargs.get("device"),
                    dtype=scorer_kwargs.get("dtype", "float32"))
    return load_or_build(lm, scorer_kwargs.get("lid_layers"))


def _groups(items: Iterable[Record | RecordError], size: int) -> Iterator[list[Record | RecordError]]:
    group: list[Record | RecordError] = []
    for item in items:
        group.append(item)
        if len(group) == size:
            yield group
            group = []
    if group:
        yield group


def score_ray(
    items: Iterable[Record | RecordError],
    scorer_kwargs: Mapping[str, Any],
    *,
    address: str | None = None,
    num_replicas: int = 1,
    ray_batch_size: int = 4,
    num_cpus_per_replica: float = 1,
    num_gpus_per_replica: float = 0,
) -> Iterator[dict[str, Any]]:
    """Score ``items`` on Ray Data; yields one JSON row per item, in input order.

    Args:
        items: records and record errors, in input order.
        scorer_kwargs: keyword arguments of :class:`~syncheck.scorer.Scorer`
            (must pickle); ``batch_size`` (default 4) is the records per forward pass.
        address: Ray cluster address (``ray://host:10001``, ``auto``); ``None``
            uses ``RAY_ADDRESS`` or starts a local Ray. Ignored when Ray is
            already initialised in this process.
        num_replicas: actors, each holding one copy of the model.
        ray_batch_size: scoring batches handed to an actor per call.
        num_cpus_per_replica, num_gpus_per_replica: resources of each actor.
    """
    if num_replicas < 1 or ray_batch_size < 1:
        raise ValueError("num_replicas and ray_batch_size must be >= 1")
    ray = import_ray()
    kwargs = dict(scorer_kwargs)
    group_size = int(kwargs.get("batch_size", 4))
    blobs = [{"seq": k, "payload": pickle.dumps(g)} for k, g in enumerate(_groups(items, group_size))]
    if not blobs:
        return
    started = not ray.is_initialized()
    if started:
        init_kwargs: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False}
        if address is None and not os.environ.get("RAY_ADDRESS"):
            init_kwargs["include_dashboard"] = False  # a local Ray for this run only
        ray.init(address=address, **init_kwargs)
    ctx = ray.data.DataContext.get_current()
    saved = (ctx.execution_options.preserve_order, ctx.enable_progress_bars)
    ctx.execution_options.preserve_order = True
    ctx.enable_progress_bars = False
    try:
        if kwargs.get("lid") == "auto":
            # One task builds or loads the LID reference set for all replicas (no two replicas race to write the
            # cache, and every replica uses the same set). It reserves no CPU so the replicas start meanwhile;
            # they wait for it in their constructor.
            task = ray.remote(_load_lid_reference).options(num_cpus=0, num_gpus=num_gpus_per_replica)
            kwargs["lid"] = task.remote(kwargs)
        ds = ray.data.from_items(blobs)
        del blobs
        scored = ds.map_batches(
            ScoreGroups,
            fn_constructor_kwargs={"scorer_kwargs": kwargs},
            batch_size=ray_batch_size,
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=num_replicas),
            num_cpus=num_cpus_per_replica,
            num_gpus=num_gpus_per_replica,
        )
        pending: dict[int, list[dict[str, Any]]] = {}
        next_seq = 0
        for batch in scored.iter_batches(batch_size=None, batch_format="numpy"):
            for seq, rows in zip(batch["seq"], batch["rows"]):
                pending[int(seq)] = json.loads(rows)
            while next_seq in pending:  # preserve_order makes this immediate; the buffer is a guarantee
                yield from pending.pop(next_seq)
                next_seq += 1
        if pending:
            raise RuntimeError(f"Ray returned scoring groups out of sequence: missing group {next_seq}")
    finally:
        ctx.execution_options.preserve_order, ctx.enable_progress_bars = saved
        if started:
            ray.shutdown()
