"""The server's settings: one frozen object from ``syncheck serve`` to the app and to each Ray Serve replica.

>>> from syncheck.serve.config import ServerConfig
>>> config = ServerConfig(model="smollm2-135m", max_concurrent=8, api_keys=("sk-local",))
>>> config.served_id, config.slots
('smollm2-135m', 24)

Every setting is checked once, when the object is made (:class:`ServerConfigError` says how to fix it); the app
(:func:`syncheck.serve.app.create_app`), the Ray application (:func:`syncheck.serve.ray_app.build_app`) and each
replica read it and never re-list its fields. The API keys stay out of its ``repr``, so they never reach a log.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

LOG_FORMATS = ("text", "json")


class ServerConfigError(ValueError):
    """A server setting out of range; the message names the setting and the fix."""


@dataclass(frozen=True)
class ServerConfig:
    """What ``syncheck serve`` serves, and how.

    Args:
        model: what ``--model`` takes (a preset, a Hub id or a directory); the Ray replicas load it. An app built
            around a scorer of its own (:func:`~syncheck.serve.app.create_app`) may leave it ``None``.
        model_id: the id clients send as ``model`` (default: ``model``, else the scorer's name).
        aggregator, device, dtype: how a replica loads the scorer (``syncheck serve --aggregator`` ...).
        max_concurrent: requests generating at once; ``max_queue``: more that may wait (then 429).
        max_tokens: a request's token budget when it sets none.
        packing: each round's forward: ``auto``, ``on`` or ``off`` (:mod:`syncheck.live.pool`).
        api_keys: the keys a ``/v1`` request must send as ``Authorization: Bearer KEY`` (none: the API is open).
        log_format: ``text`` (uvicorn's) or ``json`` (one JSON line per request, :mod:`syncheck.serve.logs`).
        drain_timeout: seconds running streams may take to finish after SIGTERM (:mod:`syncheck.serve.drain`).
        ui: serve the live page at ``/``.
        replicas: model replicas on Ray Serve (the fewest, with ``max_replicas``); ``ray``: serve on Ray Serve
            even with one replica.
        max_replicas, target_ongoing_requests: autoscaling on Ray Serve (default target: ``max_concurrent``).
        replica_cpus, replica_gpus: what Ray reserves for each replica; ``replica_threads``: torch's CPU threads
            in each (default: one per reserved CPU).
    """

    model: str | None = None
    model_id: str | None = None
    aggregator: str = "default"
    device: str | None = None
    dtype: str | None = None
    max_concurrent: int = 4
    max_queue: int = 16
    max_tokens: int = 256
    packing: str = "auto"
    api_keys: tuple[str, ...] = field(default=(), repr=False)
    log_format: str = "text"
    drain_timeout: float = 30.0
    ui: bool = True
    replicas: int = 1
    ray: bool = False
    max_replicas: int | None = None
    target_ongoing_requests: float | None = None
    replica_cpus: float = 1.0
    replica_gpus: float = 0.0
    replica_threads: int | None = None

    def __post_init__(self) -> None:
        keys = (self.api_keys,) if isinstance(self.api_keys, str) else tuple(self.api_keys)
        object.__setattr__(self, "api_keys", keys)
        for name, least in (("max_concurrent", 1), ("max_queue", 0), ("max_tokens", 1), ("replicas", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ServerConfigError(f"{name} must be a whole number of at least {least}, got {value!r}")
        if self.packing not in ("auto", "on", "off"):
            raise ServerConfigError(f"packing must be auto, on or off, got {self.packing!r}")
        if self.log_format not in LOG_FORMATS:
            raise ServerConfigError(f"log_format must be {' or '.join(LOG_FORMATS)}, got {self.log_format!r}")
        if not self.drain_timeout >= 0:
            raise ServerConfigError(f"drain_timeout must be 0 seconds or more, got {self.drain_timeout!r}")
        for i, key in enumerate(keys):
            if not isinstance(key, str) or not key.strip() or key != key.strip():
                raise ServerConfigError(f"API key {i + 1} is empty or has spaces around it: give each key as "
                                        "one word (--api-key KEY, or SYNCHECK_API_KEY=\"KEY1 KEY2\")")
        if self.max_replicas is not None and self.max_replicas < self.replicas:
            raise ServerConfigError(f"--max-replicas {self.max_replicas} is below --replicas {self.replicas}: "
                                    "raise it, or leave it out for a fixed number of replicas")
        if self.target_ongoing_requests is not None and not self.target_ongoing_requests > 0:
            raise ServerConfigError(f"target_ongoing_requests must be above 0, got {self.target_ongoing_requests!r}")
        if self.replica_cpus < 0 or self.replica_gpus < 0:
            raise ServerConfigError("replica_cpus and replica_gpus must be 0 or more")
        if self.replica_threads is not None and self.replica_threads < 1:
            raise ServerConfigError(f"replica_threads must be at least 1, got {self.replica_threads!r}")

    # ------------------------------------------------------------------ derived
    @property
    def served_id(self) -> str | None:
        """The id clients send as ``model``."""
        return self.model_id or self.model

    @property
    def slots(self) -> int:
        """Requests one server (or replica) admits: ``max_concurrent`` generating, ``max_queue`` waiting."""
        return self.max_concurrent + self.max_queue

    @property
    def on_ray(self) -> bool:
        """Whether ``syncheck serve`` runs it on Ray Serve."""
        return self.ray or self.replicas > 1 or self.max_replicas is not None

    @property
    def autoscaling(self) -> dict[str, Any] | None:
        """Ray Serve's ``autoscaling_config``, or ``None`` for a fixed number of replicas."""
        if self.max_replicas is None:
            return None
        return {"min_replicas": self.replicas, "max_replicas": self.max_replicas,
                "target_ongoing_requests": self.target_ongoing_requests or float(self.max_concurrent)}

    def replace(self, **changes: Any) -> "ServerConfig":
        """A copy with ``changes`` (checked again)."""
        return dataclasses.replace(self, **changes) if changes else self


__all__ = ["LOG_FORMATS", "ServerConfig", "ServerConfigError"]
