"""The model server (af.serving, `actorflow serve`): TF Serving's REST shapes, batching, hot reload,
overload and bad requests, through HTTP on loopback."""
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys

import aiohttp
import numpy as np
import pytest
from aiohttp import web

import actorflow as af

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
W = np.arange(12, dtype=np.float32).reshape(4, 3) / 10.0


def export(path, scale=1.0, extra=False):
    """y = x @ (W * scale) (+ a classify and a regress signature, and a two-input signature)."""
    g = af.Graph()
    with g.as_default():
        x = af.placeholder(af.float32, [None, 4], name="x")
        k = af.placeholder(af.int32, [None], name="k")
        w = af.Variable(W * scale, name="w")
        y = af.matmul(x, w, name="y")
        probs = af.nn.softmax(y, name="probs")
        classes = af.argmax(y, axis=1, name="classes")
        total = af.reduce_sum(y, axis=1, keepdims=True, name="total")
        shifted = af.add(y, af.cast(af.expand_dims(k, 1), af.float32), name="shifted")
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            b = af.saved_model.builder.SavedModelBuilder(str(path))
            sigs = {"serving_default": af.saved_model.predict_signature_def({"x": x}, {"y": y})}
            if extra:
                sigs["two"] = af.saved_model.predict_signature_def({"x": x, "k": k}, {"y": y, "shifted": shifted})
                sigs["classify"] = af.saved_model.classification_signature_def(x, classes, probs)
                sigs["regress"] = af.saved_model.regression_signature_def(x, total)
            b.add_meta_graph_and_variables(s, ["serve"], signature_def_map=sigs)
            b.save()


@pytest.fixture
def base(tmp_path):
    export(tmp_path / "m" / "1", extra=True)
    return tmp_path / "m"


class Srv:
    def __init__(self, server, runner):
        self.server = server
        self.runner = runner
        port = runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"

    async def post(self, client, path, payload=None, data=None, headers=None):
        async with client.post(self.url + path, json=payload if data is None else None, data=data,
                               headers=headers) as r:
            return r.status, await r.json(content_type=None)


async def start(base_or_models, **kw):
    models = base_or_models if isinstance(base_or_models, dict) else {"m": str(base_or_models)}
    server = af.serving.ModelServer(models, **kw)
    runner = await server.serve("127.0.0.1", 0)
    return Srv(server, runner)


async def test_rest_row_and_columnar_shapes(base):
    srv = await start(base)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    want = x @ W
    try:
        async with aiohttp.ClientSession() as c:
            st, body = await srv.post(c, "/v1/models/m:predict", {"instances": x.tolist()})
            assert st == 200 and list(body) == ["predictions"]
            np.testing.assert_allclose(body["predictions"], want, rtol=1e-6)
            # Row format with named inputs, and a versioned URL.
            st, body = await srv.post(c, "/v1/models/m/versions/1:predict", {"instances": [{"x": r} for r in x.tolist()]})
            np.testing.assert_allclose(body["predictions"], want, rtol=1e-6)
            # Columnar: a bare value for a one-input signature, or an object.
            st, body = await srv.post(c, "/v1/models/m:predict", {"inputs": x.tolist()})
            assert st == 200 and list(body) == ["outputs"]
            np.testing.assert_allclose(body["outputs"], want, rtol=1e-6)
            st, body = await srv.post(c, "/v1/models/m:predict", {"inputs": {"x": x.tolist()}})
            np.testing.assert_allclose(body["outputs"], want, rtol=1e-6)
            # Several inputs and outputs: rows are objects each way; columns an object of outputs.
            inst = [{"x": x[i].tolist(), "k": i + 1} for i in range(2)]
            st, body = await srv.post(c, "/v1/models/m:predict", {"signature_name": "two", "instances": inst})
            assert st == 200 and [sorted(p) for p in body["predictions"]] == [["shifted", "y"]] * 2
            np.testing.assert_allclose([p["shifted"] for p in body["predictions"]], want + [[1], [2]], rtol=1e-6)
            st, body = await srv.post(c, "/v1/models/m:predict",
                                      {"signature_name": "two", "inputs": {"x": x.tolist(), "k": [5, 6]}})
            assert sorted(body["outputs"]) == ["shifted", "y"]
            np.testing.assert_allclose(body["outputs"]["shifted"], want + [[5], [6]], rtol=1e-6)
            # classify and regress.
            st, body = await srv.post(c, "/v1/models/m:classify", {"signature_name": "classify",
                                                                 "examples": [{"x": r} for r in x.tolist()]})
            assert st == 200 and len(body["result"]) == 2
            assert [len(r) for r in body["result"]] == [1, 1] and body["result"][0][0][0] == "2"
            st, body = await srv.post(c, "/v1/models/m:regress", {"signature_name": "regress",
                                                                "examples": [{"x": r} for r in x.tolist()]})
            np.testing.assert_allclose(body["result"], want.sum(1), rtol=1e-5)
            st, body = await srv.post(c, "/v1/models/m:regress", {"examples": [{"x": x[0].tolist()}]})
            assert st == 400 and "regress" in body["error"]
            # Status and metadata, shaped like TF Serving's.
            async with c.get(srv.url + "/v1/models/m") as r:
                assert (await r.json()) == {"model_version_status": [
                    {"version": "1", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}]}
            async with c.get(srv.url + "/v1/models/m/metadata") as r:
                meta = await r.json()
            sd = meta["metadata"]["signature_def"]["signature_def"]
            assert meta["model_spec"] == {"name": "m", "signature_name": "", "version": "1"}
            assert sd["serving_default"]["inputs"]["x"] == {
                "dtype": "DT_FLOAT", "name": "x:0", "tensor_shape": {"dim": [{"size": "-1", "name": ""},
                                                                           {"size": "4", "name": ""}],
                                                                   "unknown_rank": False}}
            assert sd["classify"]["method_name"] == "tensorflow/serving/classify"
            # The binary endpoint.
            async with af.serving.PredictClient(srv.url, "m") as pc:
                out = await pc.predict({"x": x})
                np.testing.assert_allclose(out["y"], want, rtol=1e-6)
                with pytest.raises(af.errors.InvalidArgumentError, match="dimension 1 is 3"):
                    await pc.predict({"x": np.ones((2, 3), np.float32)})
    finally:
        await srv.runner.cleanup()


async def test_bad_requests_get_clear_4xx_while_others_are_served(base):
    srv = await start(base, client_max_size=4096,
                      batching=af.serving.BatchingParameters(max_batch_size=8, batch_timeout_micros=500))
    good = {"instances": [[1, 2, 3, 4]]}
    bad = [
        (dict(data=b"{not json"), 400, "JSON"),
        (dict(payload=[1, 2]), 400, "object"),
        (dict(payload={"instances": [[1, 2, 3]]}), 400, "dimension 1 is 3"),
        (dict(payload={"instances": [[[1, 2, 3, 4]]]}), 400, "rank 2"),
        (dict(payload={"instances": [["a", "b", "c", "d"]]}), 400, "float32"),
        (dict(payload={"instances": [[1, 2], [3, 4, 5, 6]]}), 400, "x"),
        (dict(payload={"signature_name": "two", "instances": [{"x": [1, 2, 3, 4], "k": 1.5}]}), 400, "non-integral"),
        (dict(payload={"signature_name": "two", "instances": [{"x": [1, 2, 3, 4]}]}), 400, "missing input 'k'"),
        (dict(payload={"instances": [{"z": [1, 2, 3, 4]}]}), 400, "no input named 'z'"),
        (dict(payload={"signature_name": "nope", "instances": [[1, 2, 3, 4]]}), 400, "nope"),
        (dict(payload={"instances": [[1, 2, 3, 4]], "inputs": [[1, 2, 3, 4]]}), 400, "Not both"),
        (dict(payload={}), 400, "Missing 'inputs' or 'instances'"),
        (dict(payload={"instances": [[0.5] * 4] * 400}), 413, "limit of 4096"),
    ]
    try:
        async with aiohttp.ClientSession() as c:
            async def bad_one(kw, status, text):
                st, body = await srv.post(c, "/v1/models/m:predict", kw.get("payload"), data=kw.get("data"))
                assert st == status, (kw, body)
                assert list(body) == ["error"] and text in body["error"], body

            async def good_one():
                st, body = await srv.post(c, "/v1/models/m:predict", good)
                assert st == 200
                np.testing.assert_allclose(body["predictions"], [[1, 2, 3, 4]] @ W, rtol=1e-6)
            await asyncio.gather(*[bad_one(*b) for b in bad], *[good_one() for _ in range(30)])
            for path, status in [("/v1/models/other:predict", 404), ("/v1/models/m/versions/7:predict", 404),
                                 ("/v1/models/m:explain", 404)]:
                st, body = await srv.post(c, path, good)
                assert st == status and "error" in body
            async with c.post(srv.url + "/v1/models/m:predict", data=b"\x00\x00\x00\x05junk",
                              headers={"Content-Type": af.serving.FRAME_CONTENT_TYPE}) as r:
                assert r.status == 400 and "bad binary frame" in (await r.json())["error"]
            await good_one()
    finally:
        await srv.runner.cleanup()


@pytest.mark.parametrize("timeout_us", [2000, 0])
async def test_batching_gives_each_caller_its_rows_in_order(base, timeout_us):
    srv = await start(base, batching=af.serving.BatchingParameters(max_batch_size=32, batch_timeout_micros=timeout_us,
                                                                   num_batch_threads=2))
    rng = np.random.default_rng(1)
    reqs = [rng.standard_normal((1 + i % 3, 4)).astype(np.float32) for i in range(200)]
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as c:
            async def one(i):
                fmt = i % 3
                if fmt == 2:
                    async with af.serving.PredictClient(srv.url, "m", session=c) as pc:
                        return (await pc.predict({"x": reqs[i]}))["y"]
                payload = {"instances": reqs[i].tolist()} if fmt == 0 else {"inputs": {"x": reqs[i].tolist()}}
                st, body = await srv.post(c, "/v1/models/m:predict", payload)
                assert st == 200, body
                return np.array(body["predictions"] if fmt == 0 else body["outputs"], np.float32)
            outs = await asyncio.gather(*[one(i) for i in range(200)])
        for x, y in zip(reqs, outs):
            assert y.shape == (x.shape[0], 3)
            np.testing.assert_allclose(y, x @ W, rtol=1e-5, atol=1e-6)
        st = srv.server.stats
        assert st["batched_requests"] == 200
        assert st["batched_rows"] == sum(len(x) for x in reqs)
        # 200 concurrent requests went through far fewer steps than requests (with no batch timeout
        # too: requests arriving while the steps run wait for a slot together).
        assert st["batch_steps"] < 100, st
    finally:
        await srv.runner.cleanup()


async def test_closed_loop_clients_share_steps_without_a_batch_timeout(base):
    # 32 clients, each sending its next request when its answer arrives (as a load generator does):
    # with batch_timeout_micros 0, requests that arrive while the steps run must share the next step,
    # not each take one of their own.
    srv = await start(base, batching=af.serving.BatchingParameters(max_batch_size=64, batch_timeout_micros=0,
                                                                   num_batch_threads=2))
    x = [[1.0, 2.0, 3.0, 4.0]]
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as c:
            async def client():
                for _ in range(10):
                    st, body = await srv.post(c, "/v1/models/m:predict", {"instances": x})
                    assert st == 200, body
            await asyncio.gather(*[client() for _ in range(32)])
        st = srv.server.stats
        assert st["batched_requests"] == 320
        assert st["batch_steps"] < 160, st
    finally:
        await srv.runner.cleanup()


async def test_batched_step_error_reaches_its_caller_only(tmp_path):
    # An index out of range fails the step it runs in: the error must reach its caller (and no one
    # else) as a 400, and the queue keeps serving.
    g = af.Graph()
    with g.as_default():
        idx = af.placeholder(af.int32, [None], name="idx")
        table = af.Variable(np.arange(10, dtype=np.float32).reshape(5, 2), name="table")
        rows = af.gather(table, idx, name="rows")
        with af.Session() as s:
            s.run(af.global_variables_initializer())
            af.saved_model.simple_save(s, str(tmp_path / "g" / "1"), {"idx": idx}, {"rows": rows})
    srv = await start({"g": str(tmp_path / "g")},
                      batching=af.serving.BatchingParameters(max_batch_size=8, batch_timeout_micros=0))
    try:
        async with aiohttp.ClientSession() as c:
            for i in [1, 7, 4, 7, 0]:
                st, body = await srv.post(c, "/v1/models/g:predict", {"instances": [i]})
                if i < 5:
                    assert st == 200 and body == {"predictions": [[2.0 * i, 2.0 * i + 1]]}, body
                else:
                    assert st == 400 and "error" in body and "7" in body["error"], body
            assert srv.server.stats["batch_steps"] == 5
    finally:
        await srv.runner.cleanup()


async def test_padding_batches_variable_length_inputs_and_several_models(base, tmp_path):
    g = af.Graph()
    with g.as_default():
        seq = af.placeholder(af.float32, [None, None], name="seq")
        total = af.reduce_sum(seq, axis=1, name="total")       # zero padding leaves the sums unchanged
        with af.Session() as s:
            af.saved_model.simple_save(s, str(tmp_path / "sums" / "1"), {"seq": seq}, {"total": total})
    srv = await start({"sums": str(tmp_path / "sums"), "m": str(base)},
                      batching=af.serving.BatchingParameters(max_batch_size=64, batch_timeout_micros=200_000,
                                                             pad_variable_length_inputs=True))
    rng = np.random.default_rng(3)
    reqs = [rng.standard_normal((1 + i % 2, 1 + i % 5)).astype(np.float32) for i in range(40)]
    try:
        async with aiohttp.ClientSession() as c:
            res = await asyncio.gather(*[srv.post(c, "/v1/models/sums:predict", {"instances": r.tolist()})
                                         for r in reqs],
                                       srv.post(c, "/v1/models/m:predict", {"instances": [[1, 2, 3, 4]]}))
        for r, (st, body) in zip(reqs, res):
            assert st == 200, body
            np.testing.assert_allclose(body["predictions"], r.sum(axis=1), rtol=1e-5, atol=1e-6)
        assert res[-1][0] == 200
        np.testing.assert_allclose(res[-1][1]["predictions"], [[1, 2, 3, 4]] @ W, rtol=1e-6)
        # Five different lengths, yet fewer steps than lengths: requests were padded into shared steps
        # (without padding each length needs a step of its own).
        assert srv.server.stats["batch_steps"] < 5, srv.server.stats
    finally:
        await srv.runner.cleanup()


async def test_hot_reload_under_load_drops_nothing(base, tmp_path):
    srv = await start(base, poll_interval_s=0.05,
                      batching=af.serving.BatchingParameters(max_batch_size=16, batch_timeout_micros=300))
    x = [[1.0, 1.0, 1.0, 1.0]]
    v1, v2 = (np.array(x) @ W)[0], (np.array(x) @ (W * 2))[0]
    seen = {"v1": 0, "v2": 0}
    failures = []
    stop = asyncio.Event()
    try:
        async with aiohttp.ClientSession() as c:
            async def client():
                while not stop.is_set():
                    st, body = await srv.post(c, "/v1/models/m:predict", {"instances": x})
                    if st != 200:
                        failures.append(body)
                        continue
                    p = np.array(body["predictions"][0])
                    if np.allclose(p, v1):
                        seen["v1"] += 1
                    elif np.allclose(p, v2):
                        seen["v2"] += 1
                    else:
                        failures.append(p)
            tasks = [asyncio.create_task(client()) for _ in range(16)]
            await asyncio.sleep(0.3)
            # Written elsewhere and moved in, as an exporter should; then a directory still being written.
            await asyncio.to_thread(export, tmp_path / "staging", 2.0)
            os.rename(tmp_path / "staging", base / "2")
            (base / "3").mkdir()
            # Loading and warming version 2 while 16 clients keep both cores busy: up to 60 s (a count
            # of 200 short sleeps bounded it at ~10 s, which a loaded machine can need).
            deadline = asyncio.get_running_loop().time() + 60
            while seen["v2"] <= 20 and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.05)
            stop.set()
            await asyncio.gather(*tasks)
            async with c.get(srv.url + "/v1/models/m") as r:
                status = await r.json()
        assert not failures, failures[:3]
        assert seen["v1"] > 0 and seen["v2"] > 20, seen
        states = {s["version"]: s["state"] for s in status["model_version_status"]}
        assert states["2"] == "AVAILABLE" and states["1"] in ("UNLOADING", "END")
        assert "3" not in states
    finally:
        await srv.runner.cleanup()


async def test_broken_new_version_keeps_old_one_serving(base):
    srv = await start(base, poll_interval_s=0.05)
    try:
        (base / "5").mkdir()
        (base / "5" / "saved_model.afm").write_bytes(b"garbage")
        async with aiohttp.ClientSession() as c:
            for _ in range(100):
                async with c.get(srv.url + "/v1/models/m") as r:
                    states = {s["version"]: s for s in (await r.json())["model_version_status"]}
                if states.get("5", {}).get("state") == "END":      # LOADING first, for a moment
                    break
                await asyncio.sleep(0.05)
            assert states["5"]["status"]["error_code"] == "DATA_LOSS"
            assert "saved_model.afm" in states["5"]["status"]["error_message"]
            st, body = await srv.post(c, "/v1/models/m:predict", {"instances": [[1, 2, 3, 4]]})
            assert st == 200
    finally:
        await srv.runner.cleanup()


async def test_removed_version_falls_back_to_the_previous_one(base, tmp_path):
    srv = await start(base, poll_interval_s=0.05)

    async def states(c):
        async with c.get(srv.url + "/v1/models/m") as r:
            return {s["version"]: s["state"] for s in (await r.json())["model_version_status"]}

    async def wait_for(c, want):
        for _ in range(200):
            got = await states(c)
            if all(got.get(k) == v for k, v in want.items()):
                return got
            await asyncio.sleep(0.05)
        raise AssertionError(f"states {got}, wanted {want}")
    try:
        async with aiohttp.ClientSession() as c:
            await asyncio.to_thread(export, tmp_path / "staging", 3.0)
            os.rename(tmp_path / "staging", base / "2")
            await wait_for(c, {"2": "AVAILABLE", "1": "END"})
            shutil.rmtree(base / "2")
            await wait_for(c, {"1": "AVAILABLE", "2": "END"})
            st, body = await srv.post(c, "/v1/models/m:predict", {"instances": [[1, 0, 0, 0]]})
            assert st == 200
            np.testing.assert_allclose(body["predictions"], [[1, 0, 0, 0]] @ W, rtol=1e-6)
            st, body = await srv.post(c, "/v1/models/m/versions/2:predict", {"instances": [[1, 0, 0, 0]]})
            assert st == 404 and "Specific(m, 2)" in body["error"]
    finally:
        await srv.runner.cleanup()


async def test_overload_is_refused_with_429_and_recovers(base):
    srv = await start(base, max_concurrent_requests=20,
                      batching=af.serving.BatchingParameters(max_batch_size=4, batch_timeout_micros=20000,
                                                             num_batch_threads=1, max_enqueued_batches=2))
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as c:
            res = await asyncio.gather(*[srv.post(c, "/v1/models/m:predict", {"instances": [[i, 0, 0, 0]]})
                                         for i in range(120)])
            codes = [st for st, _ in res]
            assert set(codes) <= {200, 429}, set(codes)
            assert codes.count(429) > 0 and codes.count(200) > 0
            for i, (st, body) in enumerate(res):
                if st == 200:
                    np.testing.assert_allclose(body["predictions"], [[i, 0, 0, 0]] @ W, rtol=1e-6)
                else:
                    assert "retry later" in body["error"]
            st, body = await srv.post(c, "/v1/models/m:predict", {"instances": [[1, 0, 0, 0]]})
            assert st == 200
    finally:
        await srv.runner.cleanup()


async def test_api_key_and_embedding_in_an_existing_app(base):
    server = af.serving.ModelServer({"m": str(base)}, api_key="s3cret")
    app = web.Application()

    async def hello(request):
        return web.Response(text="hi")
    app.router.add_get("/hello", hello)
    server.attach(app)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        async with aiohttp.ClientSession() as c:
            async with c.get(url + "/hello") as r:
                assert await r.text() == "hi"
            async with c.post(url + "/v1/models/m:predict", json={"instances": [[1, 2, 3, 4]]}) as r:
                assert r.status == 401 and "API key" in (await r.json())["error"]
            async with c.post(url + "/v1/models/m:predict", json={"instances": [[1, 2, 3, 4]]},
                              headers={"Authorization": "Bearer wrong"}) as r:
                assert r.status == 401
            async with c.post(url + "/v1/models/m:predict", json={"instances": [[1, 2, 3, 4]]},
                              headers={"X-API-Key": "s3cret"}) as r:
                assert r.status == 200
            async with c.get(url + "/v1/models/m", headers={"Authorization": "Bearer s3cret"}) as r:
                assert r.status == 200
    finally:
        await runner.cleanup()


async def test_served_routes_match_the_embedded_app(base):
    # `serve` matches the routes by hand on aiohttp's low-level server; `attach` uses an Application's
    # router. Both must answer the same requests alike, and `serve` answers unknown routes in JSON.
    srv = await start(base)
    app_server = af.serving.ModelServer({"m": str(base)}, poll_interval_s=0)
    runner = web.AppRunner(app_server.make_app())
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    app_url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    row = {"instances": [[1, 2, 3, 4]]}
    same = [("GET", "/v1/models/m", None), ("GET", "/v1/models/m/versions/1", None),
            ("GET", "/v1/models/m/metadata", None), ("GET", "/v1/models/m/versions/1/metadata", None),
            ("POST", "/v1/models/m:predict", row), ("POST", "/v1/models/m/versions/1:predict", row),
            ("POST", "/v1/models/m/versions/1:classify", {"signature_name": "classify", "examples": [[1, 2, 3, 4]]}),
            ("GET", "/v1/models/other", None), ("GET", "/v1/models/m/versions/9", None),
            ("POST", "/v1/models/m:explain", row)]
    routing = [("GET", "/v1/models/m:predict", 405), ("POST", "/v1/models/m", 405), ("GET", "/nope", 404),
               ("GET", "/v1/models/m/versions/x", 404), ("POST", "/v1/models/m/extra:predict", 404)]
    try:
        async with aiohttp.ClientSession() as c:
            async def ask(url, method, path, payload):
                async with c.request(method, url + path, json=payload) as r:
                    return r.status, r.content_type, await r.read()
            for method, path, payload in same:
                a = await ask(srv.url, method, path, payload)
                b = await ask(app_url, method, path, payload)
                assert a[0] == b[0] and a[1] == b[1] == "application/json", (path, a, b)
                assert json.loads(a[2]) == json.loads(b[2]), path
            for method, path, status in routing:
                a = await ask(srv.url, method, path, None)
                b = await ask(app_url, method, path, None)
                assert a[0] == b[0] == status, (method, path, a, b)
                assert "error" in json.loads(a[2]), (method, path, a)
            async with c.get(srv.url + "/monitoring/prometheus/metrics") as r:
                assert r.status == 200 and "actorflow_serving_requests_total" in await r.text()
    finally:
        await runner.cleanup()
        await srv.runner.cleanup()


async def test_body_arriving_in_pieces_or_chunked(base):
    # A small body normally arrives with its headers and is taken at once; one that comes later, in
    # pieces, or chunked (no Content-Length) is read as it arrives.
    srv = await start(base)
    body = b'{"instances": [[1, 2, 3, 4], [0, 0, 1, 0]]}'
    want = np.array([[1, 2, 3, 4], [0, 0, 1, 0]], np.float32) @ W
    host, port = "127.0.0.1", srv.runner.addresses[0][1]
    try:
        reader, writer = await asyncio.open_connection(host, port)
        head = (f"POST /v1/models/m:predict HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        writer.write(head + body[:10])
        await writer.drain()
        await asyncio.sleep(0.1)
        writer.write(body[10:])
        await writer.drain()
        async with asyncio.timeout(30):
            status = await reader.readline()
            headers = {}
            while (line := await reader.readline()) != b"\r\n":
                k, _, v = line.decode().partition(":")
                headers[k.strip().lower()] = v.strip()
            answer = await reader.readexactly(int(headers["content-length"]))
        writer.close()
        assert status.split()[1] == b"200", (status, answer)
        np.testing.assert_allclose(json.loads(answer)["predictions"], want, rtol=1e-6)

        async def pieces():
            for i in range(0, len(body), 7):
                yield body[i:i + 7]
                await asyncio.sleep(0.01)
        async with aiohttp.ClientSession() as c:
            async with c.post(srv.url + "/v1/models/m:predict", data=pieces(),
                              headers={"Content-Type": "application/json"}) as r:
                assert r.status == 200, await r.text()
                np.testing.assert_allclose((await r.json())["predictions"], want, rtol=1e-6)
    finally:
        await srv.runner.cleanup()


async def test_graceful_stop_finishes_requests_in_flight(base):
    # A long batch timeout holds the requests in the queue while the server is asked to stop.
    srv = await start(base, batching=af.serving.BatchingParameters(max_batch_size=64, batch_timeout_micros=2_000_000))
    try:
        async with aiohttp.ClientSession() as c:
            tasks = [asyncio.create_task(srv.post(c, "/v1/models/m:predict", {"instances": [[i, 1, 1, 1]]}))
                     for i in range(10)]
            for _ in range(200):
                async with c.get(srv.url + "/monitoring/prometheus/metrics") as r:
                    if "actorflow_serving_inflight_requests 10\n" in await r.text():
                        break
                await asyncio.sleep(0.01)
            stopping = asyncio.create_task(srv.server.stop())
            await asyncio.sleep(0.01)
            st, body = await srv.post(c, "/v1/models/m:predict", {"instances": [[1, 1, 1, 1]]})
            assert st == 503 and "shutting down" in body["error"]
            res = await asyncio.gather(*tasks)
            await stopping
        assert [st for st, _ in res] == [200] * 10
        for i, (_, body) in enumerate(res):
            np.testing.assert_allclose(body["predictions"], [[i, 1, 1, 1]] @ W, rtol=1e-6)
        assert srv.server.stats["batch_steps"] == 1
    finally:
        await srv.runner.cleanup()


async def test_slow_step_times_out_with_504_and_server_stays_up(tmp_path):
    g = af.Graph()
    with g.as_default():
        n = af.placeholder(af.int32, [None], name="n")
        out = af.while_loop(lambda i: i < af.reduce_max(n), lambda i: i + 1, [af.constant(0)])
        out = af.add(af.zeros_like(n), out, name="out")
        with af.Session() as s:
            af.saved_model.simple_save(s, str(tmp_path / "slow" / "1"), {"n": n}, {"out": out})
    # 2 s: the short loops finish in milliseconds, but a loaded machine can stall a step past 0.3 s;
    # a billion iterations take minutes whatever the load.
    srv = await start({"slow": str(tmp_path / "slow")}, step_timeout_s=2.0)
    try:
        async with aiohttp.ClientSession() as c:
            st, body = await srv.post(c, "/v1/models/slow:predict", {"instances": [3]})
            assert st == 200 and body["predictions"] == [3]
            st, body = await srv.post(c, "/v1/models/slow:predict", {"instances": [10 ** 9]})
            assert st == 504 and "Timed out" in body["error"]
            st, body = await srv.post(c, "/v1/models/slow:predict", {"instances": [5, 2]})
            assert st == 200 and body["predictions"] == [5, 5]
    finally:
        await srv.runner.cleanup()


async def test_start_refuses_a_base_path_without_versions(tmp_path):
    (tmp_path / "empty").mkdir()
    server = af.serving.ModelServer({"m": str(tmp_path / "empty")})
    with pytest.raises(af.errors.NotFoundError, match="no servable version"):
        await server.start()


def test_cli_serve_answers_and_stops_on_sigterm(base, tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    shutil.copytree(base, tmp_path / "copy")
    p = subprocess.Popen([sys.executable, "-m", "actorflow.cli", "serve", "--model_name", "digits",
                          "--model_base_path", str(tmp_path / "copy"), "--port", "0", "--enable_batching"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = p.stdout.readline()
        assert "actorflow serve: models digits on http://127.0.0.1:" in line, p.stderr.read() if p.poll() else line
        port = int(line.split("127.0.0.1:")[1].split()[0])
        assert port > 0

        async def query():
            async with aiohttp.ClientSession() as c:
                async with c.post(f"http://127.0.0.1:{port}/v1/models/digits:predict",
                                  json={"instances": [[1, 2, 3, 4]]}, timeout=aiohttp.ClientTimeout(30)) as r:
                    return r.status, await r.json()
        st, body = asyncio.run(query())
        assert st == 200
        np.testing.assert_allclose(body["predictions"], [[1, 2, 3, 4]] @ W, rtol=1e-6)
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=60) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_batching_parameters_are_checked():
    with pytest.raises(ValueError, match="max_batch_size"):
        af.serving.BatchingParameters(max_batch_size=0)
    with pytest.raises(ValueError, match="repeat"):
        af.serving.ModelServer([af.serving.ModelConfig("a", "/x"), af.serving.ModelConfig("a", "/y")])


async def test_tune_gc_keeps_serving_and_frees_a_retired_version(base, tmp_path):
    # tune_gc: after start the process's objects are frozen out of the cyclic collector's reach and
    # young collections are rarer; a hot swap still frees the old version's graph (thawed and
    # collected when it closes), and stopping the server thaws the rest and restores the thresholds.
    import gc
    import weakref
    thresholds = gc.get_threshold()
    srv = await start(base, poll_interval_s=0.05, tune_gc=True,
                      batching=af.serving.BatchingParameters(max_batch_size=8, batch_timeout_micros=0))
    try:
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold()[0] >= af.serving.model_server.GC_THRESHOLD0
        old = weakref.ref(srv.server._models["m"].versions[1].graph)
        async with aiohttp.ClientSession() as c:
            st, body = await srv.post(c, "/v1/models/m:predict", {"instances": [[1, 2, 3, 4]]})
            assert st == 200, body
            await asyncio.to_thread(export, tmp_path / "staging", 2.0)
            os.rename(tmp_path / "staging", base / "2")
            for _ in range(400):
                async with c.get(srv.url + "/v1/models/m/versions/1") as r:
                    if (await r.json())["model_version_status"][0]["state"] == "END":
                        break
                await asyncio.sleep(0.05)
            st, body = await srv.post(c, "/v1/models/m:predict", {"instances": [[1, 2, 3, 4]]})
            assert st == 200, body
            np.testing.assert_allclose(body["predictions"], [[1, 2, 3, 4]] @ (W * 2), rtol=1e-6)
        assert old() is None, "the retired version's graph is still alive"
    finally:
        await srv.runner.cleanup()
        gc.unfreeze()
        restored = gc.get_threshold()
        gc.set_threshold(*thresholds)
    assert gc.get_freeze_count() == 0
    assert restored == thresholds
