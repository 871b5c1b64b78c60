"""Train the digits convnet, export it as a SavedModel, serve it, and query it.

    python examples/serve_digits.py --export_base /tmp/digits [--epochs 5]

1. trains examples/digits_convnet.py's network for a few epochs;
2. exports it with af.saved_model.SavedModelBuilder to /tmp/digits/<N> (the next free version
   number), with a predict signature (images -> probabilities and classes) as the default, and a
   classify signature;
3. starts af.serving.ModelServer in this process on 127.0.0.1:8501 with dynamic batching, exactly as
   `actorflow serve --model_name digits --model_base_path /tmp/digits --port 8501 --enable_batching`
   would, and queries it with TF Serving's REST API (JSON rows) and with the binary client
   (af.serving.PredictClient), then prints the equivalent curl command and stops.

Run the server alone with the command above, then, from another shell:

    curl -s -X POST http://127.0.0.1:8501/v1/models/digits:predict \\
         -d '{"instances": [[[[0.0], ...64 pixel values in [0, 1] as an 8x8x1 image...]]]}'
    curl -s http://127.0.0.1:8501/v1/models/digits/metadata
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys

import aiohttp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from digits_convnet import build_model, load_data  # noqa: E402

import actorflow as af  # noqa: E402


def train_and_export(export_base: str, epochs: int, seed: int = 0) -> str:
    """Trains the convnet and exports it as the next version under `export_base`; returns its path."""
    x_train, x_test, y_train, y_test = load_data(seed)
    rng = np.random.default_rng(seed)
    os.makedirs(export_base, exist_ok=True)
    versions = [int(n) for n in os.listdir(export_base) if n.isdigit()]
    export_dir = os.path.join(export_base, str(max(versions, default=0) + 1))
    with af.Graph().as_default():
        af.set_random_seed(seed)
        x, y, training, loss, train_op, accuracy = build_model()
        logits = af.get_default_graph().get_tensor_by_name("logits/BiasAdd:0")
        probs = af.nn.softmax(logits, name="probabilities")
        classes = af.argmax(logits, axis=1, name="classes")
        with af.Session() as sess:
            sess.run(af.global_variables_initializer())
            for _ in range(epochs):
                order = rng.permutation(len(x_train))
                for start in range(0, len(order), 32):
                    idx = order[start:start + 32]
                    sess.run(train_op, {x: x_train[idx], y: y_train[idx], training: True})
            print(f"test accuracy after {epochs} epochs: {sess.run(accuracy, {x: x_test, y: y_test}):.4f}")
            builder = af.saved_model.builder.SavedModelBuilder(export_dir)
            sigs = {
                af.saved_model.signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY:
                    af.saved_model.signature_def_utils.predict_signature_def(
                        inputs={"images": x}, outputs={"probabilities": probs, "classes": classes}),
                "classify": af.saved_model.signature_def_utils.classification_signature_def(x, None, probs),
            }
            builder.add_meta_graph_and_variables(sess, [af.saved_model.tag_constants.SERVING], signature_def_map=sigs)
            builder.save()
    print(f"exported to {export_dir}")
    return export_dir


async def serve_and_query(export_base: str, port: int) -> None:
    """Serves `export_base` and queries it with JSON and with the binary client."""
    server = af.serving.ModelServer({"digits": export_base},
                                    batching=af.serving.BatchingParameters(max_batch_size=32, batch_timeout_micros=500))
    runner = await server.serve("127.0.0.1", port)
    url = f"http://127.0.0.1:{port}/v1/models/digits"
    _, x_test, _, y_test = load_data(0)
    try:
        async with aiohttp.ClientSession() as http:
            body = {"instances": x_test[:3].tolist()}
            async with http.post(url + ":predict", json=body, timeout=aiohttp.ClientTimeout(30)) as r:
                preds = (await r.json())["predictions"]
            print("JSON :predict classes:", [p["classes"] for p in preds], "labels:", y_test[:3].tolist())
            async with http.get(url + "/metadata", timeout=aiohttp.ClientTimeout(30)) as r:
                meta = await r.json()
            print("signatures:", sorted(meta["metadata"]["signature_def"]["signature_def"]))
        async with af.serving.PredictClient(f"http://127.0.0.1:{port}", "digits") as client:
            # Many concurrent calls: the server batches them into a few steps.
            outs = await asyncio.gather(*[client.predict({"images": x_test[i:i + 1]}) for i in range(200)])
        acc = np.mean([o["classes"][0] == y for o, y in zip(outs, y_test[:200])])
        print(f"binary client: 200 concurrent requests, accuracy {acc:.3f}, "
              f"{server.stats.get('batch_steps', 0)} session steps in all")
        print("try it with curl (while `actorflow serve --model_name digits --model_base_path "
              f"{export_base} --port {port}` runs):")
        print(f"  curl -s -X POST {url}:predict -d '{json.dumps({'instances': x_test[:1].tolist()})}'")
    finally:
        await runner.cleanup()


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--export_base", default="/tmp/digits")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--port", type=int, default=8501)
    args = p.parse_args(argv)
    train_and_export(args.export_base, args.epochs)
    asyncio.run(serve_and_query(args.export_base, args.port))


if __name__ == "__main__":
    main()
