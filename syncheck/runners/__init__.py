"""The offline runners: where ``syncheck score`` runs the scorer (the values of its ``--engine``, :data:`ENGINES`).

Both take the same input (records or record errors, in input order) and the
keyword arguments of :class:`syncheck.scorer.Scorer`, and yield the same JSON
rows (``ScoredResponse.to_json()``), one per input item, in input order:

- ``local`` (:mod:`syncheck.runners.local`): one scorer in this process.
- ``ray`` (:mod:`syncheck.runners.ray_runner`): Ray Data ``map_batches`` over a
  pool of actors, one model replica each (install with ``pip install 'syncheck[ray]'``).

Records are grouped into scoring batches of ``batch_size`` counted from the
first item by both runners, so their outputs are identical row for row.
"""

ENGINES = ("local", "ray")

__all__ = ["ENGINES"]
