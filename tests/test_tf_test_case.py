"""af.test as TF-1.x test files use it: this file is written the way such a file is (a
`tf.test.TestCase` subclass, `tf.test.main()` at the bottom) and runs under pytest and under
`python tests/test_tf_test_case.py`.

The gradient checker's Jacobians are compared with TensorFlow 2.21's (tests/fixtures/tf_test.json,
written by tests/fixtures/make_tf_testcase.py)."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import unittest

import numpy as np

import actorflow as tf

FIXTURE = json.loads((pathlib.Path(__file__).parent / "fixtures" / "tf_test.json").read_text())


class SessionsTest(tf.test.TestCase):

    def test_each_test_starts_on_a_fresh_default_graph(self):
        self.assertEqual(len(tf.get_default_graph().get_operations()), 0)
        tf.constant(1.0, name="leftover")

    def test_session_is_default_and_runs_eval(self):
        with self.session() as sess:
            x = tf.constant([1.0, 2.0]) * 3.0
            self.assertIs(tf.get_default_session(), sess)
            self.assertIs(sess.graph, tf.get_default_graph())
            self.assertAllEqual(x.eval(), [3.0, 6.0])
        self.assertIsNone(tf.get_default_session())

    def test_cached_session_is_reused_within_a_test(self):
        with self.cached_session() as a:
            pass
        with self.test_session() as b:
            pass
        self.assertIs(a, b)
        with self.session() as c:
            self.assertIsNot(a, c)

    def test_session_on_another_graph(self):
        g = tf.Graph()
        with g.as_default():
            y = tf.constant(5) + 1
        with self.session(graph=g) as sess:
            self.assertIs(sess.graph, g)
            self.assertEqual(sess.run(y), 6)

    def test_evaluate_nested_structures(self):
        a, b = tf.constant([1, 2]), tf.constant(3.5)
        out = self.evaluate({"a": a, "pair": (b, a)})
        self.assertAllEqual(out["a"], [1, 2])
        self.assertEqual(out["pair"][0], 3.5)
        sp = self.evaluate(tf.SparseTensor([[0, 1]], [2.0], [2, 2]))
        self.assertIsInstance(sp, tf.SparseTensorValue)
        self.assertAllEqual(sp.indices, [[0, 1]])
        self.assertAllClose(tf.SparseTensor([[0, 1]], [2.0], [2, 2]).values, [2.0])

    def test_temp_dir_is_per_test_and_exists(self):
        d = self.get_temp_dir()
        self.assertEqual(d, self.get_temp_dir())
        self.assertTrue(os.path.isdir(d))
        self.assertTrue(os.path.isdir(tf.test.get_temp_dir()))

    def test_seeds_are_set_per_test(self):
        first = np.random.random_sample()
        np.random.seed(87654321)
        self.assertEqual(first, np.random.random_sample())


class AssertionsTest(tf.test.TestCase):

    def test_all_close_on_tensors_and_structures(self):
        self.assertAllClose(tf.constant([1.0, 2.0]), [1.0, 2.0 + 1e-7])
        self.assertAllClose({"a": [1.0], "b": (2.0, np.array([3.0]))}, {"a": [1.0], "b": (2.0, [3.0])})
        with self.assertRaises(AssertionError):
            self.assertAllClose([1.0, 2.0], [1.0, 2.1])
        with self.assertRaises(AssertionError):
            self.assertAllClose([1.0, 2.0], [1.0, 2.0, 3.0])
        with self.assertRaisesRegex(ValueError, "Can't compare dict to non-dict"):
            self.assertAllClose({"a": 1.0}, [1.0])
        self.assertAllClose([np.nan, 1.0], [np.nan, 1.0])
        self.assertNotAllClose([1.0], [2.0])

    def test_all_equal(self):
        self.assertAllEqual(tf.constant([[1, 2]]), [[1, 2]])
        self.assertAllEqual([b"a", b"b"], ["a", "b"])
        with self.assertRaisesRegex(AssertionError, "Shape mismatch"):
            self.assertAllEqual([1, 2], [[1, 2]])
        with self.assertRaises(AssertionError):
            self.assertAllEqual([1, 2], [1, 3])
        self.assertNotAllEqual([1, 2], [1, 3])

    def test_ordering_and_ranges(self):
        x = tf.constant([1.0, 2.0, 3.0])
        self.assertAllGreater(x, 0.5)
        self.assertAllLess(x, 3.5)
        self.assertAllGreaterEqual(x, 1.0)
        self.assertAllLessEqual(x, 3.0)
        with self.assertRaises(AssertionError):
            self.assertAllGreater(x, 1.0)
        self.assertAllInRange(x, 1.0, 3.0)
        with self.assertRaisesRegex(AssertionError, r"1 of the 3 element\(s\) are outside the range \(1.0, 3.0\]"):
            self.assertAllInRange(x, 1.0, 3.0, open_lower_bound=True)
        with self.assertRaisesRegex(AssertionError, "are NaN"):
            self.assertAllInRange([1.0, np.nan], 0.0, 2.0)
        with self.assertRaisesRegex(AssertionError, "ordered numeric type"):
            self.assertAllInRange(np.array(["a"]), 0, 1)
        self.assertAllInSet([1, 2, 2], {1, 2})

    def test_near_shape_dtype(self):
        self.assertNear(1.0, 1.05, 0.1)
        with self.assertRaisesRegex(AssertionError, "difference"):
            self.assertNear(1.0, 1.5, 0.1)
        self.assertArrayNear([1.0, 2.0], [1.01, 1.99], 0.02)
        with self.assertRaises(AssertionError):
            self.assertArrayNear([1.0], [1.0, 2.0], 0.1)
        self.assertShapeEqual(np.zeros((2, 3)), tf.placeholder(tf.float32, [2, 3]))
        with self.assertRaisesRegex(AssertionError, "not equal"):
            self.assertShapeEqual(np.zeros((2, 3)), np.zeros((3, 2)))
        with self.assertRaises(TypeError):
            self.assertShapeEqual([1, 2], np.zeros(2))
        self.assertDTypeEqual(tf.constant([1.0]), np.float32)
        self.assertDTypeEqual(np.array([1], np.int64), tf.int64)

    def test_raises_op_error(self):
        x = tf.placeholder(tf.float32, [2])
        checked = tf.check_numerics(x, "found a bad value")
        with self.cached_session():
            with self.assertRaisesOpError("found a bad value"):
                checked.eval({x: [1.0, np.nan]})
            with self.assertRaisesWithPredicateMatch(tf.errors.InvalidArgumentError,
                                                     lambda e: "bad value" in str(e)):
                checked.eval({x: [np.inf, 1.0]})
            with self.assertRaisesRegex(AssertionError, "OpError not raised"):
                with self.assertRaisesOpError("anything"):
                    checked.eval({x: [1.0, 2.0]})
            with self.assertRaisesRegex(AssertionError, "Exception of type"):
                with self.assertRaisesOpError("anything"):
                    raise ValueError("not an OpError")


class MoreHelpersTest(tf.test.TestCase):

    def test_decorators_threads_and_proto_device_assertions(self):
        calls = []

        class Inner(tf.test.TestCase):
            @tf.test.disable_with_predicate(lambda: True, "always off")
            def test_off(self):
                calls.append("off")

            @tf.test.disable_with_predicate(lambda: False, "never off")
            def test_on(self):
                calls.append("on")
        result = unittest.TestResult()
        unittest.defaultTestLoader.loadTestsFromTestCase(Inner).run(result)
        self.assertEqual(calls, ["on"])
        self.assertEqual([reason for _, reason in result.skipped if reason == "always off"], ["always off"])
        self.assertIs(tf.test.with_eager_op_as_function(Inner), Inner)

        seen = []
        t = self.checkedThread(target=lambda: seen.append(1))
        t.start()
        t.join()
        self.assertEqual(seen, [1])
        bad = self.checkedThread(target=lambda: 1 / 0)
        bad.start()
        with self.assertRaisesRegex(AssertionError, "division by zero"):
            bad.join()

        node = tf.NodeDef(name="a", op="Const")
        self.assertProtoEquals('name: "a" op: "Const"', node)
        with self.assertRaises(AssertionError):
            self.assertProtoEquals('name: "b"', node)
        self.assertDeviceEqual("/job:ps/task:0/cpu:0", "/job:ps/task:0/device:CPU:0")
        with self.assertRaisesRegex(AssertionError, "are not equal"):
            self.assertDeviceEqual("/job:ps/task:0", "/job:ps/task:1")
        self.assertStartsWith("actorflow", "actor")
        with self.assertRaises(AssertionError):
            self.assertStartsWith("actorflow", "flow")
        self.assertAllCloseAccordingToType(np.float16([1.0]), np.float16([1.0005]))
        with self.assertRaises(AssertionError):
            self.assertAllCloseAccordingToType(np.float64([1.0]), np.float64([1.0005]))
        self.assertTrue(tf.test.is_built_with_xla())
        self.assertIsInstance(tf.test.is_cpu_target_available("x86"), bool)
        self.assertIsInstance(tf.test.benchmark_config(), tf.ConfigProto)


class GradientCheckerTest(tf.test.TestCase):

    def _case(self, key):
        case = FIXTURE[key]
        x_init = np.array(case["x_init"], dtype=case["dtype"])
        return case, x_init

    def test_jacobians_equal_tensorflows(self):
        for key in FIXTURE:
            case, x_init = self._case(key)
            with self.session():
                x = tf.placeholder(tf.as_dtype(case["dtype"]), x_init.shape)
                y = eval(case["expr"], {"tf": tf, "x": x})  # noqa: S307 (the fixture's own expression)
                jt, jn = tf.test.compute_gradient(x, list(x_init.shape), y, case["y_shape"], x_init_value=x_init)
                err = tf.test.compute_gradient_error(x, list(x_init.shape), y, case["y_shape"], x_init_value=x_init)
            self.assertEqual(jt.dtype, np.dtype(case["dtype"]), key)
            self.assertAllClose(jt, case["theoretical"], rtol=1e-5, atol=1e-6, msg=key)
            tol = 1e-9 if case["dtype"] == "float64" else 2e-3
            self.assertAllClose(jn, case["numeric"], rtol=tol, atol=tol, msg=key)
            self.assertNear(err, case["error"], max(tol, 1e-6), msg=key)

    def test_list_of_inputs_and_a_wrong_gradient_is_caught(self):
        with self.session():
            a = tf.constant([1.0, 2.0], tf.float64)
            b = tf.constant([3.0, -1.0], tf.float64)
            y = a * b
            pairs = tf.test.compute_gradient([a, b], [[2], [2]], y, [2])
            self.assertEqual(len(pairs), 2)
            self.assertAllClose(pairs[0][0], np.diag([3.0, -1.0]))
            self.assertAllClose(pairs[1][0], pairs[1][1], atol=1e-8)

            @tf.custom_gradient
            def bad_square(v):
                return v * v, lambda dy: dy * v          # should be 2 * v * dy
            z = bad_square(a)
            self.assertGreater(tf.test.compute_gradient_error(a, [2], z, [2], x_init_value=np.array([1.0, 2.0])), 0.9)

    def test_checker_errors(self):
        with self.session():
            i = tf.constant([1, 2])
            with self.assertRaisesRegex(TypeError, "int32"):
                tf.test.compute_gradient(i, [2], tf.cast(i, tf.float32) * 2.0, [2])
            x = tf.constant([1.0, 2.0])
            with self.assertRaisesRegex(ValueError, "x_init_value has shape"):
                tf.test.compute_gradient(x, [2], x * 2.0, [2], x_init_value=np.zeros(3, np.float32))
        with self.assertRaisesRegex(ValueError, "default session"):
            tf.test.compute_gradient(x, [2], x * 2.0, [2])


class DevicesAndBenchmarkTest(tf.test.TestCase):

    def test_device_queries_agree(self):
        has_gpu = any(d.device_type == "GPU" for d in tf.list_devices())
        self.assertEqual(tf.test.is_gpu_available(), has_gpu)
        self.assertEqual(tf.test.gpu_device_name(), "/device:GPU:0" if has_gpu else "")
        self.assertIsInstance(tf.test.is_built_with_cuda(), bool)
        self.assertFalse(tf.test.is_built_with_rocm())
        if not tf.test.is_built_with_cuda():
            self.assertFalse(tf.test.is_gpu_available())

    def test_benchmark_times_and_reports(self):
        report_dir = self.get_temp_dir()

        class AddBenchmark(tf.test.Benchmark):
            def benchmark_add(self):
                with tf.Session() as sess:
                    return self.run_op_benchmark(sess, tf.constant(1.0) + 2.0, min_iters=3)

        old = os.environ.get("TEST_REPORT_FILE_PREFIX")
        os.environ["TEST_REPORT_FILE_PREFIX"] = os.path.join(report_dir, "bench_")
        try:
            out = AddBenchmark().benchmark_add()
        finally:
            if old is None:
                del os.environ["TEST_REPORT_FILE_PREFIX"]
            else:
                os.environ["TEST_REPORT_FILE_PREFIX"] = old
        self.assertEqual(out["iters"], 3)
        self.assertGreater(out["wall_time"], 0.0)
        self.assertEqual(out["name"], "AddBenchmark.benchmark_add")
        written = json.loads(pathlib.Path(report_dir, "bench_AddBenchmark.benchmark_add").read_text())
        self.assertEqual(written["iters"], 3)
        self.assertFalse(AddBenchmark.is_abstract())
        with self.assertRaisesRegex(ValueError, "min_iters"):
            with tf.Session() as sess:
                AddBenchmark().run_op_benchmark(sess, tf.constant(1.0), min_iters=0)

    def test_assert_equal_graph_def_ignores_order(self):
        g1, g2 = tf.Graph(), tf.Graph()
        with g1.as_default():
            tf.constant(1.0, name="a")
            tf.constant(2.0, name="b")
        with g2.as_default():
            tf.constant(2.0, name="b")
            tf.constant(1.0, name="a")
        tf.test.assert_equal_graph_def(g1.as_graph_def(), g2.as_graph_def())
        with g2.as_default():
            tf.constant(3.0, name="c")
        with self.assertRaisesRegex(AssertionError, r"only in actual \['c'\]"):
            tf.test.assert_equal_graph_def(g2.as_graph_def(), g1.as_graph_def())
        with self.assertRaises(TypeError):
            tf.test.assert_equal_graph_def("node {}", g1.as_graph_def())


class LocalClusterTest(tf.test.TestCase):

    def test_create_local_cluster_runs_a_distributed_step(self):
        workers, ps = tf.test.create_local_cluster(num_workers=1, num_ps=1)
        try:
            self.assertEqual((len(workers), len(ps)), (1, 1))
            self.assertEqual(workers[0].cluster.as_dict()["ps"], ps[0].cluster.as_dict()["ps"])
            with tf.device("/job:ps/task:0"):
                v = tf.Variable(2.0)
            with tf.device("/job:worker/task:0"):
                y = v * 3.0
            with tf.Session(workers[0].target) as sess:
                sess.run(tf.global_variables_initializer())
                self.assertEqual(sess.run(y), 6.0)
        finally:
            for server in workers + ps:
                server.stop()
        with self.assertRaisesRegex(ValueError, "num_workers >= 1"):
            tf.test.create_local_cluster(0, 1)


def test_the_file_runs_as_a_script_with_tf_test_main(tmp_path):
    script = tmp_path / "tf1_style_test.py"
    script.write_text(
        "import actorflow as tf\n"
        "class T(tf.test.TestCase):\n"
        "    def testAdd(self):\n"
        "        with self.cached_session():\n"
        "            self.assertAllEqual(tf.add(1, 2).eval(), 3)\n"
        "    def testFails(self):\n"
        "        self.assertAllClose([1.0], [float(__import__('os').environ.get('BAD', 1.0))])\n"
        "if __name__ == '__main__':\n"
        "    tf.test.main()\n")
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(__file__).parents[1]))
    ok = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert "\nOK" in ok.stderr  # (and test_session, skipped as TF skips it)
    bad = subprocess.run([sys.executable, str(script)], env=dict(env, BAD="2.0"), capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 1 and "FAILED (failures=1" in bad.stderr


if __name__ == "__main__":
    tf.test.main()


def test_main_runs_benchmarks_with_the_flag(tmp_path):
    script = tmp_path / "tf1_style_benchmark.py"
    script.write_text(
        "import actorflow as tf\n"
        "class AddBenchmark(tf.test.Benchmark):\n"
        "    def benchmarkAdd(self):\n"
        "        with tf.Session() as s:\n"
        "            self.run_op_benchmark(s, tf.constant(1.0) + 1.0, min_iters=2)\n"
        "    def benchmarkOther(self):\n"
        "        print('OTHER RAN')\n"
        "class T(tf.test.TestCase):\n"
        "    def testNothing(self):\n"
        "        print('TEST RAN')\n"
        "if __name__ == '__main__':\n"
        "    tf.test.main()\n")
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(__file__).parents[1]),
               TEST_REPORT_FILE_PREFIX=str(tmp_path / "report_"))
    run = subprocess.run([sys.executable, str(script), "--benchmarks=benchmarkAdd$"], env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert "OTHER RAN" not in run.stdout and "TEST RAN" not in run.stdout
    report = json.loads((tmp_path / "report_AddBenchmark.benchmarkAdd").read_text())
    assert report["iters"] == 2
    every = subprocess.run([sys.executable, str(script), "--benchmarks=all"], env=env, capture_output=True, text=True,
                           timeout=120)
    assert every.returncode == 0 and "OTHER RAN" in every.stdout
