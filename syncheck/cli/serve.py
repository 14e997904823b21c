"""``syncheck serve``: the OpenAI-compatible server (the ``serve`` extra: FastAPI and uvicorn)."""

from __future__ import annotations

import click

from syncheck.cli.common import device_option, dtype_option, model_option, preset_option
from syncheck.serve.config import ServerConfig


@click.command()
@preset_option
@model_option
@click.option("--model-id", default=None, help="The id clients send as \"model\" (default: --model).")
@click.option("--host", default=ServerConfig.host, show_default=True,
              help="Interface to listen on (0.0.0.0: every one; give --api-key then). On a loopback address only "
                   "requests that name it by a loopback name (or an --allowed-host) are answered.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option("--max-concurrent", default=4, show_default=True, type=click.IntRange(min=1),
              help="Requests generating at once (monitor streams decode their next tokens in one batched forward).")
@click.option("--max-queue", default=16, show_default=True, type=click.IntRange(min=0),
              help="Requests that may wait beyond --max-concurrent; more get 429 with Retry-After.")
@click.option("--max-tokens", default=256, show_default=True, type=click.IntRange(min=1),
              help="Token budget of a request that sets no max_tokens.")
@click.option("--aggregator", default="default", show_default=True,
              help="Aggregator directory or 'default' (calibrated for --model, else shipped, else portable).")
@click.option("--replicas", default=1, show_default=True, type=click.IntRange(min=1),
              help="Model replicas on Ray Serve (the serve-ray extra), requests routed by their documents; "
                   "1: the plain server, without Ray. With --max-replicas: the fewest replicas.")
@click.option("--max-replicas", default=None, type=click.IntRange(min=1),
              help="Autoscale on Ray Serve between --replicas and this many replicas.")
@click.option("--target-ongoing-requests", default=None, type=click.FloatRange(min=0, min_open=True),
              help="Autoscaling target of requests per replica (default: --max-concurrent).")
@click.option("--replica-cpus", default=1.0, show_default=True, type=click.FloatRange(min=0),
              help="CPUs Ray reserves for each replica.")
@click.option("--replica-gpus", default=0.0, show_default=True, type=click.FloatRange(min=0),
              help="GPUs Ray reserves for each replica.")
@click.option("--replica-threads", default=None, type=click.IntRange(min=1),
              help="Torch CPU threads in each replica (default: one per CPU it reserves). More than --replica-cpus "
                   "lets a lone stream use the cores idle replicas leave.")
@click.option("--packing", type=click.Choice(["auto", "on", "off"]), default="auto", show_default=True,
              help="Each round's forward: packed (every stream's token, the finished sentences' without-context "
                   "flushes and new prompts side by side, each row on its own cache) or padded. auto: packed on CPU, "
                   "padded on an accelerator, where packing is not yet measured.")
@click.option("--api-key", "api_keys", multiple=True, envvar="SYNCHECK_API_KEY", show_envvar=True,
              help="A key every /v1 request must send as 'Authorization: Bearer KEY' (401 without it); repeat it, or "
                   "give several keys separated by spaces in the variable. /health and /metrics stay open.")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="text: uvicorn's warnings only; json: one JSON line per request on stderr (request id from "
                   "X-Request-Id or made up, route, status, tokens, sentences, flagged, latency).")
@click.option("--drain-timeout", default=30.0, show_default=True, type=click.FloatRange(min=0),
              help="Seconds running streams may take to finish after SIGTERM; new requests get 503 meanwhile, and "
                   "what is left then ends with an error event.")
@click.option("--no-ui", is_flag=True, help="Leave out the live page at / (the API alone).")
@click.option("--allowed-host", "allowed_hosts", multiple=True, metavar="NAME",
              help="A name clients reach the server by (the Host header, without port; *.example.com for its "
                   "subdomains), beside the loopback names; repeatable. Other names get 403, on any address once one "
                   "is given.")
@click.option("--cors-origin", "cors_origins", multiple=True, metavar="ORIGIN",
              help="A web origin whose pages may call the API (e.g. https://app.example.com; '*' for any: give "
                   "--api-key then); repeatable. Without it no CORS headers are sent and requests from pages of "
                   "other origins get 403; the live page is same-origin and needs none.")
@click.option("--openapi", is_flag=True, help="Serve /docs, /redoc and /openapi.json (off by default).")
@click.option("--num-samples-cap", default=ServerConfig.num_samples_cap, show_default=True,
              type=click.IntRange(min=1), help="The most syncheck.num_samples (FOD's candidates) a request may ask "
                                               "for; more get 422.")
@click.option("--num-beams-cap", default=ServerConfig.num_beams_cap, show_default=True, type=click.IntRange(min=1),
              help="The most syncheck.num_beams (FOD's beams) a request may ask for; more get 422.")
@click.option("--max-sentences-cap", default=ServerConfig.max_sentences_cap, show_default=True,
              type=click.IntRange(min=1), help="The most syncheck.max_sentences (FOD's and abstention's answer "
                                               "length) a request may ask for; more get 422.")
@click.option("--score-share", default=ServerConfig.score_share, show_default=True,
              type=click.FloatRange(0, 1, min_open=True, max_open=True),
              help="The most of the model's time /v1/syncheck/score batches take while streams run; a stream keeps "
                   "the rest of its pace.")
@click.option("--ray", "on_ray", is_flag=True,
              help="Serve on Ray Serve even with one replica (implied by --replicas above 1 or --max-replicas).")
@device_option
@dtype_option
def serve(port, on_ray, no_ui, **settings):
    """Serve MODEL behind POST /v1/chat/completions with live per-sentence faithfulness (and FOD)."""
    from syncheck.serve.config import ServerConfigError

    try:
        config = ServerConfig(ray=on_ray, ui=not no_ui, **settings)
    except ServerConfigError as exc:
        raise click.UsageError(str(exc)) from None
    host = config.host
    if config.open_warning:
        click.echo(f"warning: {config.open_warning}", err=True)
    if config.on_ray:
        run_ray_server(host, port, config)
        return
    try:
        import uvicorn  # noqa: F401 (only checks that the serve extra is installed)

        from syncheck.serve.app import create_app
    except ImportError as exc:
        raise click.ClickException(f"syncheck serve needs the serve extra ({exc.name} is missing): "
                                   "pip install 'syncheck[serve]'") from None
    from syncheck.scorer import Scorer

    click.echo(f"loading {config.model} ...", err=True)
    scorer = Scorer(config.model, device=config.device, dtype=config.dtype, aggregator=config.aggregator)
    app = create_app(scorer, config, model_thread=False)
    click.echo(f"serving {config.served_id} (aggregator: {scorer.aggregator_source}) at http://{host}:{port}/v1",
               err=True)
    if config.ui:
        click.echo(f"live page: http://{host}:{port}/", err=True)
    run_server(app, host, port)


def run_server(app, host: str, port: int) -> None:
    """HTTP on a background thread; the model's turns on this thread, the one that loaded the model (see
    :mod:`syncheck.serve.scheduler`: PyTorch's CPU thread pool is fast only there). Returns when the HTTP server
    stops: at once on SIGINT (or a second SIGTERM); on SIGTERM after a graceful drain (:mod:`syncheck.serve.drain`:
    new requests get 503 while the running ones finish within ``--drain-timeout``, then what is left ends with an
    error event)."""
    import signal
    import threading

    import uvicorn

    from syncheck.serve.logs import json_logging

    scheduler, drain = app.state.scheduler, app.state.drain
    logs = {"log_config": json_logging()} if app.state.config.log_format == "json" else {}
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                           timeout_graceful_shutdown=5, **logs))

    def http() -> None:
        try:
            server.run()
        finally:
            scheduler.stop()

    def stop(*_: object) -> None:
        server.should_exit = True
        scheduler.stop()

    def drained(finished: bool) -> None:
        if not finished:
            click.echo(f"drain timeout ({drain.timeout:g} s): ending {drain.in_flight} request(s) with an error",
                       err=True)
        stop()

    def on_term(*_: object) -> None:
        if drain.draining:  # a second SIGTERM: stop now
            stop()
            return
        click.echo(f"draining: no new requests; {drain.in_flight} running, up to {drain.timeout:g} s", err=True)
        drain.start(drained)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, on_term)
    thread = threading.Thread(target=http, name="syncheck-http", daemon=True)
    thread.start()
    scheduler.run()
    server.should_exit = True
    thread.join(timeout=10)


def run_ray_server(host: str, port: int, config) -> None:
    """The Ray Serve application of ``config`` (:func:`syncheck.serve.ray_app.build_app`) on a Ray cluster
    (``RAY_ADDRESS``, else a local one) at ``http://host:port``, until SIGINT or SIGTERM; then its applications are
    shut down."""
    import signal
    import threading

    try:
        import ray
        from ray import serve as ray_serve

        from syncheck.serve.ray_app import build_app
    except ImportError as exc:
        raise click.ClickException(f"syncheck serve --replicas needs the serve-ray extra ({exc.name} is missing): "
                                   "pip install 'syncheck[serve-ray]'") from None

    click.echo(f"starting Ray Serve with {config.model} ...", err=True)
    ray.init(include_dashboard=False)
    stopping = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.set())
    try:
        ray_serve.start(http_options={"host": host, "port": port})
        ray_serve.run(build_app(config), name="syncheck", route_prefix="/")
        click.echo(f"serving {config.served_id} on Ray Serve at http://{host}:{port}/v1", err=True)
        if config.ui:
            click.echo(f"live page: http://{host}:{port}/", err=True)
        stopping.wait()
    finally:
        ray_serve.shutdown()
        ray.shutdown()
