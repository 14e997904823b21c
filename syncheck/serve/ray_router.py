"""Document-affinity routing for the Ray Serve deployment (:mod:`syncheck.serve.ray_app`).

A Ray Serve request router (``ray.serve.request_router.RequestRouter``) for the model replicas. The ingress
passes the key of the documents a request carries as the ``affinity`` keyword of its call; this router sends every
request with that key to the same replica, so that replica's prompt-prefix cache keeps hitting:

- the replica is chosen by rendezvous hashing (the highest ``sha256(key, replica)``), so a key keeps its replica
  while the replica lives, and only the keys of a replica that goes away move;
- when that replica is at its limit (``max_ongoing_requests``: what one plain server admits), the request goes to
  the least-loaded of the others; when every replica is full it waits at the router, with backoff;
- a request without documents (``GET /health``, ``/v1/models``) goes to the least-loaded replica.

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


def affinity_key(pending_request: Optional[PendingRequest]) -> Optional[str]:
    if pending_request is None:
        return None
    key = pending_request.kwargs.get("affinity")
    return key if isinstance(key, str) and key else None


class DocumentAffinityRouter(RequestRouter):
    """Ranks the replicas for a request: its documents' replica first, then the others (least loaded wins)."""

    async def choose_replicas(self, candidate_replicas: List[RunningReplica],
                              pending_request: Optional[PendingRequest] = None) -> List[List[RunningReplica]]:
        if not candidate_replicas:
            return []
        if pending_request is not None:  # back off between rounds when every replica is full
            pending_request.routing_context.should_backoff = True
        key = affinity_key(pending_request)
        if key is None or len(candidate_replicas) == 1:
            return [candidate_replicas]
        ranked = sorted(candidate_replicas, key=lambda r: replica_weight(key, r.replica_id.unique_id), reverse=True)
        return [ranked[:1], ranked[1:]]


__all__ = ["DocumentAffinityRouter", "affinity_key", "replica_weight"]
