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
import ipaddress
from dataclasses import dataclass, field
from typing import Any

LOG_FORMATS = ("text", "json")
#: the largest request body, in bytes, unless ``max_body_bytes`` says otherwise (8 MiB)
MAX_BODY_BYTES = 8 * 1024 * 1024
#: the names a loopback server answers to besides ``allowed_hosts`` (``Host`` without its port)
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


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
        host: the address the server listens on (``--host``). On a loopback address a request must name the
            server by a loopback name (``Host: localhost``, ``127.0.0.1`` or ``[::1]``) or one of ``allowed_hosts``:
            a page that rebinds its own domain to 127.0.0.1 is refused (:mod:`syncheck.serve.browser`).
        allowed_hosts: more names clients may reach the server by (``--allowed-host``; ``*.example.com`` takes
            every subdomain). Given on any address, they are the only names (beside the loopback ones) it answers to.
        cors_origins: the web origins whose pages may call the API (``--cors-origin https://app.example.com``; the
            CORS headers they need, and nothing for other origins). None by default: the live page is same-origin.
        openapi: serve ``/docs``, ``/redoc`` and ``/openapi.json`` (off by default).
        max_body_bytes: the largest request body; a larger one gets 413 before it is read.
        num_samples_cap, num_beams_cap, max_sentences_cap: the largest ``syncheck.num_samples``,
            ``syncheck.num_beams`` and ``syncheck.max_sentences`` a request may ask for (422 above them): FOD's cost
            grows with each.
        score_share: the most of the model's time ``/v1/syncheck/score`` batches take while streams run (above 0,
            below 1); a stream then keeps at least ``1 - score_share`` of its pace (:mod:`syncheck.serve.scheduler`).
            With no stream running a batch takes all of it.
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
    host: str = "127.0.0.1"
    allowed_hosts: tuple[str, ...] = ()
    cors_origins: tuple[str, ...] = ()
    openapi: bool = False
    max_body_bytes: int = MAX_BODY_BYTES
    num_samples_cap: int = 16
    num_beams_cap: int = 4
    max_sentences_cap: int = 32
    score_share: float = 0.25

    def __post_init__(self) -> None:
        keys = (self.api_keys,) if isinstance(self.api_keys, str) else tuple(self.api_keys)
        object.__setattr__(self, "api_keys", keys)
        for name in ("allowed_hosts", "cors_origins"):
            value = getattr(self, name)
            object.__setattr__(self, name, (value,) if isinstance(value, str) else tuple(value))
        for name, least in (("max_concurrent", 1), ("max_queue", 0), ("max_tokens", 1), ("replicas", 1),
                            ("max_body_bytes", 1), ("num_samples_cap", 1), ("num_beams_cap", 1),
                            ("max_sentences_cap", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ServerConfigError(f"{name} must be a whole number of at least {least}, got {value!r}")
        if isinstance(self.score_share, bool) or not isinstance(self.score_share, (int, float)) \
                or not 0 < self.score_share < 1:
            raise ServerConfigError(f"score_share must be a share of the model's time above 0 and below 1 (e.g. "
                                    f"0.25), got {self.score_share!r}")
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
        if not isinstance(self.host, str) or not self.host.strip():
            raise ServerConfigError(f"host must be the address to listen on (127.0.0.1, 0.0.0.0, ...), got "
                                    f"{self.host!r}")
        for host in self.allowed_hosts:
            check_host_pattern(host)
        for origin in self.cors_origins:
            check_origin(origin)

    # ------------------------------------------------------------------ derived
    @property
    def loopback(self) -> bool:
        """Whether ``host`` is a loopback address (or ``localhost``): only this machine can connect."""
        return is_loopback(self.host)

    @property
    def trusted_hosts(self) -> tuple[str, ...] | None:
        """The ``Host`` names the server answers to (patterns of Starlette's ``TrustedHostMiddleware``), or
        ``None`` for any: the loopback names and ``allowed_hosts`` on a loopback address or wherever
        ``allowed_hosts`` are given, else any."""
        if not self.loopback and not self.allowed_hosts:
            return None
        own = [self.host.lower()] if self.loopback else []
        return tuple(dict.fromkeys([*LOOPBACK_NAMES, *bracketed([*own, *(h.lower() for h in self.allowed_hosts)])]))

    @property
    def open_warning(self) -> str | None:
        """What to warn an operator of at start: a server any machine (or any web page) can drive, or ``None``."""
        if self.api_keys:
            return None
        if "*" in self.cors_origins:
            return ("--cors-origin '*' without --api-key: a page of any web site a visitor opens can drive this "
                    "server through their browser; give --api-key KEY, or name the origins that may call it")
        if not self.loopback:
            return (f"listening on {self.host} without --api-key: anyone who can reach this address can run the "
                    "model (POST /v1/...); give --api-key KEY (or SYNCHECK_API_KEY), or put an authenticating proxy "
                    "in front (docs/serving.md, \"Safe by default\")")
        return None

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


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name, IPv6 with or without brackets) is this machine only."""
    name = host.strip().strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def bracketed(hosts: list[str]) -> list[str]:
    """IPv6 addresses as a ``Host`` header names them (``[::1]``), the others as they are."""
    return [f"[{h}]" if ":" in h and not h.startswith("[") else h for h in hosts]


def check_host_pattern(host: Any) -> None:
    """An ``--allowed-host`` value: a name or address without scheme, port or path; ``*.domain`` for its
    subdomains."""
    ok = isinstance(host, str) and host.strip() == host and host and not any(c in host for c in "/ ,")
    if ok and "*" in host:
        ok = host.startswith("*.") and "*" not in host[1:]
    if ok and not host.startswith("["):
        ok = ":" not in host or _is_ipv6(host)
    if not ok:
        raise ServerConfigError(f"--allowed-host {host!r} is not a host name: give the name clients use, without "
                                "scheme or port (e.g. --allowed-host syncheck.example.com, or *.example.com for its "
                                "subdomains)")


def _is_ipv6(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).version == 6
    except ValueError:
        return False


def check_origin(origin: Any) -> None:
    """A ``--cors-origin`` value: ``*``, or ``scheme://host[:port]`` with nothing after it."""
    if origin == "*":
        return
    scheme, sep, rest = origin.partition("://") if isinstance(origin, str) else ("", "", "")
    if not (sep and scheme in ("http", "https") and rest and not any(c in rest for c in "/?# ")):
        raise ServerConfigError(f"--cors-origin {origin!r} is not a web origin: give it as the browser sends it, "
                                "scheme, host and port only (e.g. --cors-origin https://app.example.com or "
                                "http://localhost:3000), or '*' for every origin")


__all__ = ["LOG_FORMATS", "LOOPBACK_NAMES", "MAX_BODY_BYTES", "ServerConfig", "ServerConfigError", "check_host_pattern",
           "check_origin", "is_loopback"]
