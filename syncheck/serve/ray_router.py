"""Document-affinity routing for the Ray Serve deployment (:mod:`syncheck.serve.ray_app`).

A Ray Serve request router (``ray.serve.request_router.RequestRouter``) for the model replicas. The ingress
passes the key of the documents a request carries as the ``affinity`` keyword of its call; this router sends every
request with that key to the same replica, so that replica's prompt-prefix cache keeps hitting:

- the replica is chosen by rendezvous hashing (the highest ``sha256(key, replica)``), so a key keeps its replica
  while the replica lives, and only the keys of a replica that goes away move;
- when that replica is at its limit (``max_ongoing_requests``: what one plain server admits, as the router's
  queue-length cache knows it), the request goes to the least-loaded of the others; when every replica is full it
  waits at the router, with backoff. A replica not known to be full keeps its requests even when it is slow to
  answer the router's queue-length probe (a CPU replica computing a forward): Ray Serve would otherwise try the next
  rank after 0.1 s, and the request would leave its documents' replica with room to spare;
- a request without documents (``POST /v1/syncheck/score``) goes to the least-loaded replica;
- a request with a ``to_replica`` keyword (the ingress asking each replica for its health or its metrics) goes to
  that replica when the router sees it, else to any (the answer names the replica, so the ingress can tell).

The router tells the replica which one it preferred (the ``preferred`` keyword, set here), so a replica that serves
a request of another one's documents knows it was a spill and counts it.

This module is small on purpose: Ray Serve pickles the router's module by value into every process that holds a
handle to the replicas.
"""

from __future__ import annotations

import hashlib
from typing import List, Optional

from ray.serve.request_router import PendingRequest, RequestRouter, RunningReplica


def replica_weight(key: str, replica: str) -> int:
    """Rendezvous-hash weight of ``replica`` for ``key``: the replica with the highest weight serves the key."""
    return int.from_bytes(hashlib.sha256(f"{key}\0{replica}".encode()).digest()[:8], "big")


def keyword(pending_request: Optional[PendingRequest], name: str) -> Optional[str]:
    """A non-empty string keyword of the request's call, else ``None``."""
    if pending_request is None:
        return None
    value = pending_request.kwargs.get(name)
    return value if isinstance(value, str) and value else None


def affinity_key(pending_request: Optional[PendingRequest]) -> Optional[str]:
    return keyword(pending_request, "affinity")


class DocumentAffinityRouter(RequestRouter):
    """Ranks the replicas for a request: its documents' replica first, then the others (least loaded wins)."""

    async def choose_replicas(self, candidate_replicas: List[RunningReplica],
                              pending_request: Optional[PendingRequest] = None) -> List[List[RunningReplica]]:
        if not candidate_replicas:
            return []
        if pending_request is not None:  # back off between rounds when every replica is full
            pending_request.routing_context.should_backoff = True
        target = keyword(pending_request, "to_replica")
        if target is not None:
            chosen = [r for r in candidate_replicas if r.replica_id.unique_id == target]
            return [chosen or candidate_replicas]
        key = affinity_key(pending_request)
        if key is None:
            return [candidate_replicas]
        ranked = sorted(candidate_replicas, key=lambda r: replica_weight(key, r.replica_id.unique_id), reverse=True)
        pending_request.kwargs["preferred"] = ranked[0].replica_id.unique_id  # the replica counts a spill
        if len(ranked) == 1 or self.select_available_replicas(ranked[:1]):
            # not known to be full: wait for it. Its answer to the router's queue-length probe may come late (0.1 s
            # at first) while it computes, and a late answer would send the request to the next rank at once
            return [ranked[:1]]
        return [ranked[:1], ranked[1:]]


__all__ = ["DocumentAffinityRouter", "affinity_key", "keyword", "replica_weight"]
