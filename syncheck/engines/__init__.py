"""Engines: where ``syncheck score`` runs the scorer.

Both take the same input (records or record errors, in input order) and the
keyword arguments of :class:`syncheck.scorer.Scorer`, and yield the same JSON
rows (``ScoredResponse.to_json()``), one per input item, in input order:

- ``local`` (:mod:`syncheck.engines.local`): one scorer in this process.
- ``ray`` (:mod:`syncheck.engines.ray_engine`): Ray Data ``map_batches`` over a
  pool of actors, one model replica each (install with ``pip install 'syncheck[ray]'``).

Records are grouped into scoring batches of ``batch_size`` counted from the
first item by both engines, so their outputs are identical row for row.
"""

ENGINES = ("local", "ray")

__all__ = ["ENGINES"]
