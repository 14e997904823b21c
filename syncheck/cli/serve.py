"""``syncheck serve``: the OpenAI-compatible server (the ``serve`` extra: FastAPI and uvicorn)."""

from __future__ import annotations

import click

from syncheck.cli.common import device_option, dtype_option, model_option, preset_option


@click.command()
@preset_option
@model_option
@click.option("--model-id", default=None, help="The id clients send as \"model\" (default: --model).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on (0.0.0.0: every one).")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option("--max-concurrent", default=4, show_default=True, type=click.IntRange(min=1),
              help="Requests generating at once (monitor streams decode their next tokens in one batched forward).")
@click.option("--max-queue", default=16, show_default=True, type=click.IntRange(min=0),
              help="Requests that may wait beyond --max-concurrent; more get 429 with Retry-After.")
@click.option("--max-tokens", default=256, show_default=True, type=click.IntRange(min=1),
              help="Token budget of a request that sets no max_tokens.")
@click.option("--aggregator", default="default", show_default=True,
              help="Aggregator directory or 'default' (calibrated for --model, else shipped, else portable).")
@device_option
@dtype_option
def serve(model, model_id, host, port, max_concurrent, max_queue, max_tokens, aggregator, device, dtype):
    """Serve MODEL behind POST /v1/chat/completions with live per-sentence faithfulness (and FOD)."""
    try:
        import uvicorn

        from syncheck.serve.app import create_app
    except ImportError as exc:
        raise click.ClickException(f"syncheck serve needs the serve extra ({exc.name} is missing): "
                                   "pip install 'syncheck[serve]'") from None
    from syncheck.scorer import Scorer

    click.echo(f"loading {model} ...", err=True)
    scorer = Scorer(model, device=device, dtype=dtype, aggregator=aggregator)
    app = create_app(scorer, model_id=model_id or model, max_concurrent=max_concurrent, max_queue=max_queue,
                     max_tokens=max_tokens, model_thread=False)
    click.echo(f"serving {model_id or model} (aggregator: {scorer.aggregator_source}) at http://{host}:{port}/v1",
               err=True)
    run_server(app, host, port)


def run_server(app, host: str, port: int) -> None:
    """HTTP on a background thread; the model's turns on this thread, the one that loaded the model (see
    :mod:`syncheck.serve.scheduler`: PyTorch's CPU thread pool is fast only there). Returns when the HTTP server
    stops (SIGINT or SIGTERM)."""
    import signal
    import threading

    import uvicorn

    scheduler = app.state.scheduler
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))

    def http() -> None:
        try:
            server.run()
        finally:
            scheduler.stop()

    def stop(*_: object) -> None:
        server.should_exit = True
        scheduler.stop()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)
    thread = threading.Thread(target=http, name="syncheck-http", daemon=True)
    thread.start()
    scheduler.run()
    server.should_exit = True
    thread.join(timeout=10)
