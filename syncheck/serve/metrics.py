"""Prometheus metrics at ``GET /metrics`` (``prometheus_client``; every metric is listed in docs/serving.md).

Two sets, each in the app's own registry:

- :class:`HttpMetrics`, what the HTTP entry sees: requests by route and status, their latency, errors by kind, and on
  Ray Serve the requests that left their documents' replica (spills);
- :class:`ModelMetrics`, what a served model does: tokens, sentences scored and flagged, FOD's backtracks and
  abstentions, time to the first token and to the first scored sentence, sentence scores, the requests running and
  waiting and the free slots (read from the scheduler when scraped), and the process's own (memory, CPU).

The plain server exposes both. On Ray Serve the ingress exposes its :class:`HttpMetrics` and every replica's
:class:`ModelMetrics` with a ``replica`` label (the replica id Ray Serve names it by, as its own metrics do):
:func:`labelled` re-labels a replica's exposition, parsed with ``prometheus_client``'s own parser.
"""

from __future__ import annotations

from typing import Any, Iterable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.process_collector import ProcessCollector

from syncheck.serve.observe import RequestRecord, RequestStats

#: seconds: from a first token in tens of milliseconds to a long answer on a busy CPU
SECONDS_BUCKETS = (0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 60.0, 120.0, 300.0)
#: sentence scores in [0, 1]
SCORE_BUCKETS = tuple(round(0.1 * i, 1) for i in range(1, 11))

__all__ = ["CONTENT_TYPE_LATEST", "HttpMetrics", "ModelMetrics", "exposition", "labelled"]


class HttpMetrics:
    """What the HTTP entry sees (the plain app, or the Ray ingress). An observer of
    :class:`~syncheck.serve.observe.ObservedRequests`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter("syncheck_requests", "HTTP requests by route and status.", ["route", "status"],
                                registry=registry)
        self.latency = Histogram("syncheck_request_latency_seconds",
                                 "Request latency, from the request's arrival to the response's last byte, by route.",
                                 ["route"], buckets=SECONDS_BUCKETS, registry=registry)
        self.errors = Counter("syncheck_errors", "Requests that ended in an error, by kind: the error's code or type "
                              "(server_busy, invalid_api_key, context_length_exceeded, server_draining, ...), "
                              "client_disconnected, or http_STATUS.", ["kind"], registry=registry)
        self.spills = Counter("syncheck_router_spills", "Chat requests served by a replica other than their "
                              "documents' replica (it was full, or not yet visible to the router).", registry=registry)

    def observe(self, record: RequestRecord) -> None:
        self.requests.labels(record.route, str(record.status)).inc()
        self.latency.labels(record.route).observe(record.latency_s)
        if record.error is not None:
            self.errors.labels(record.error).inc()


class ModelMetrics:
    """What one served model does; ``scheduler`` (a :class:`~syncheck.serve.scheduler.Scheduler`) is read when
    scraped."""

    def __init__(self, registry: CollectorRegistry, scheduler: Any) -> None:
        self.tokens = Counter("syncheck_generated_tokens", "Tokens generated (completion tokens).", registry=registry)
        self.sentences = Counter("syncheck_sentences_scored", "Sentences scored and sent.", registry=registry)
        self.flagged = Counter("syncheck_sentences_flagged", "Sentences scored below tau1 (flagged).",
                               registry=registry)
        self.backtracks = Counter("syncheck_fod_backtracks", "Flagged sentences FOD took back: replaced, or "
                                  "the answer ended before them (not those it kept as decoded).",
                                  registry=registry)
        self.abstentions = Counter("syncheck_abstentions", "Answers that abstained (fod, abstain).", registry=registry)
        self.first_token = Histogram("syncheck_time_to_first_token_seconds",
                                     "From admission to the first text of a chat request.", buckets=SECONDS_BUCKETS,
                                     registry=registry)
        self.first_sentence = Histogram("syncheck_time_to_first_scored_sentence_seconds",
                                        "From admission to the first scored sentence of a chat request.",
                                        buckets=SECONDS_BUCKETS, registry=registry)
        self.scores = Histogram("syncheck_sentence_score", "Scores of the sentences sent (1: supported).",
                                buckets=SCORE_BUCKETS, registry=registry)
        Gauge("syncheck_requests_running", "Requests generating now.", registry=registry).set_function(
            lambda: scheduler.running)
        Gauge("syncheck_requests_waiting", "Admitted requests waiting for a place.", registry=registry).set_function(
            lambda: scheduler.queued)
        Gauge("syncheck_free_slots", "Requests that could still be admitted before 429 "
              "(max_concurrent + max_queue - running - waiting).", registry=registry).set_function(
            lambda: max(scheduler.max_concurrent + scheduler.max_queue - scheduler.running - scheduler.queued, 0))
        ProcessCollector(registry=registry)

    def finish(self, stats: RequestStats) -> None:
        """Count a chat request whose reply has ended."""
        self.tokens.inc(stats.tokens)
        self.sentences.inc(stats.sentences)
        self.flagged.inc(stats.flagged)
        self.backtracks.inc(stats.backtracks)
        self.abstentions.inc(stats.abstained)
        for score in stats.scores:
            self.scores.observe(score)
        if stats.first_token_s is not None:
            self.first_token.observe(stats.first_token_s)
        if stats.first_sentence_s is not None:
            self.first_sentence.observe(stats.first_sentence_s)


def exposition(registry: CollectorRegistry) -> bytes:
    """The registry in Prometheus' text format."""
    return generate_latest(registry)


class _Families:
    """A collector of already built metric families (a replica's, re-labelled)."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self.families = list(families)

    def collect(self) -> Iterable[Metric]:
        return self.families


def labelled(own: CollectorRegistry, replicas: dict[str, str]) -> bytes:
    """The ingress's exposition: its own registry's metrics, then every replica's (``replicas``: its exposition
    text by replica id) with a ``replica`` label, each family once."""
    merged: dict[str, Metric] = {}
    for replica, text in sorted(replicas.items()):
        for family in text_string_to_metric_families(text):
            into = merged.setdefault(family.name, Metric(family.name, family.documentation, family.type,
                                                         family.unit))
            for s in family.samples:
                into.add_sample(s.name, {**s.labels, "replica": replica}, s.value, s.timestamp, s.exemplar)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families([*own.collect(), *merged.values()]))
    return generate_latest(registry)
