"""`actorflow serve`: the model server from the command line (TF Serving's tensorflow_model_server flags)."""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import threading


def add_parser(sub) -> None:
    """Adds the `serve` subcommand to the `actorflow` parser."""
    from actorflow.console import subparser
    s = subparser(sub, "serve", "serve SavedModel directories over TensorFlow Serving's REST API")
    s.add_argument("--model_name", default="default", help="name of the model in request URLs")
    s.add_argument("--model_base_path", help="directory holding numbered SavedModel versions (1, 2, ...)")
    s.add_argument("--model_config_file", help='JSON list of {"name", "base_path", "num_versions"} (several models)')
    s.add_argument("--port", "--rest_api_port", dest="port", type=int, default=8501, help="REST API port")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (loopback unless told otherwise)")
    s.add_argument("--enable_batching", action="store_true", help="batch concurrent requests into one step")
    s.add_argument("--batching_parameters_file", help="JSON with max_batch_size, batch_timeout_micros, "
                                                      "num_batch_threads, max_enqueued_batches, pad_variable_length_inputs")
    s.add_argument("--max_batch_size", type=int, default=None,
                   help="largest batch (overrides the parameters file; default: BatchingParameters')")
    s.add_argument("--batch_timeout_micros", type=int, default=None,
                   help="longest wait for a batch to fill (overrides the parameters file)")
    s.add_argument("--num_batch_threads", type=int, default=None,
                   help="batches processed at once (overrides the parameters file)")
    s.add_argument("--file_system_poll_wait_seconds", type=float, default=1.0,
                   help="how often to look for new versions (0: never)")
    s.add_argument("--max_inflight_steps", type=int, default=8, help="unbatched steps in flight at once")
    s.add_argument("--max_concurrent_requests", type=int, default=4096, help="more get HTTP 429")
    s.add_argument("--client_max_size", type=int, default=64 << 20, help="largest request body in bytes (413)")
    s.add_argument("--tensorflow_inter_op_parallelism", type=int, default=0,
                   help="TF Serving's flag; < 0: every kernel runs where its step runs (the server's loop), "
                        "never on the kernel pool: for models whose batched steps cost less than the pool's "
                        "hand-offs (small MLPs); 0: the runtime's pool for the kernels worth it")
    s.add_argument("--tune_gc", action=argparse.BooleanOptionalAction, default=True,
                   help="tune the cyclic GC for serving (ModelServer's tune_gc): freeze what is alive after "
                        "loading (no full-collection pauses of the whole process under load) and collect the "
                        "young generation every 10,000 allocations instead of 700")
    s.add_argument("--api_key_env", default="ACTORFLOW_SERVING_API_KEY",
                   help="environment variable holding the API key (or cluster token) requests must carry")
    s.set_defaults(fn=serve_main)


def _batching(args):
    from actorflow.serving.batching import BatchingParameters
    if not (args.enable_batching or args.batching_parameters_file):
        return None
    kw = {}
    if args.batching_parameters_file:
        with open(args.batching_parameters_file) as f:
            kw = json.load(f)
    for k in ("max_batch_size", "batch_timeout_micros", "num_batch_threads"):
        if getattr(args, k) is not None:
            kw[k] = getattr(args, k)
    return BatchingParameters(**kw)


def serve_main(args) -> int:
    """Runs the server on the actorflow runtime's event loop (steps start without a thread hop) until
    SIGINT/SIGTERM, then shuts down gracefully."""
    from actorflow.actors.dispatcher import default_runtime
    from actorflow.serving.model_server import ModelConfig, ModelServer
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if args.model_config_file:
        with open(args.model_config_file) as f:
            models = [ModelConfig(**m) for m in json.load(f)]
    elif args.model_base_path:
        models = [ModelConfig(args.model_name, args.model_base_path)]
    else:
        print("actorflow serve: give --model_base_path or --model_config_file", file=sys.stderr)
        return 2
    config = None
    if args.tensorflow_inter_op_parallelism:
        from actorflow.actors.session import ConfigProto
        config = ConfigProto(inter_op_parallelism_threads=args.tensorflow_inter_op_parallelism)
    try:
        server = ModelServer(models, batching=_batching(args), poll_interval_s=args.file_system_poll_wait_seconds,
                             session_config=config, max_inflight_steps=args.max_inflight_steps,
                             max_concurrent_requests=args.max_concurrent_requests,
                             client_max_size=args.client_max_size, api_key=os.environ.get(args.api_key_env) or None,
                             tune_gc=args.tune_gc)
    except (ValueError, TypeError, OSError) as e:
        print(f"actorflow serve: {e}", file=sys.stderr)
        return 2
    rt = default_runtime()
    try:
        runner = asyncio.run_coroutine_threadsafe(server.serve(args.host, args.port), rt.loop).result()
    except Exception as e:  # noqa: BLE001 - the CLI reports why it could not start
        print(f"actorflow serve: cannot start: {e}", file=sys.stderr)
        return 1
    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    names = ", ".join(m.name for m in models)
    port = runner.addresses[0][1] if runner.addresses else args.port
    print(f"actorflow serve: models {names} on http://{args.host}:{port} (pid {os.getpid()})", flush=True)
    while not stop.wait(0.5):
        pass
    print("actorflow serve: shutting down (finishing requests in flight)", flush=True)
    asyncio.run_coroutine_threadsafe(runner.cleanup(), rt.loop).result(timeout=60)
    return 0
