"""Google's ALBERT (corpus driver: google-research/albert): its own tests, run with unittest under the
library: modeling_test, optimization_test (LAMB and AdamW), tokenization_test, and run_pretraining_test
(a tiny model trained and evaluated through TPUEstimator with use_tpu=False, checkpoints copied as
"best"); prints how many pass.

The repository is the package `albert` (its modules import each other as `from albert import ...`).
tokenization.py imports tensorflow_hub, which itself imports TensorFlow and serves downloads only: the
driver gives it a stand-in module whose every attribute is an ImportError. ALBERT imports
`tensorflow.compat.v1` and tf.contrib; TensorFlow 2.21 has no tf.contrib or tf.estimator, so only
actorflow runs it.
"""
import sys
import types
import unittest

import tensorflow as tf

assert tf  # the library under test; the albert package imports it as tensorflow.compat.v1


def _no_hub(name):
    raise ImportError(f"tensorflow_hub.{name}: TF-Hub modules are downloads, not available here")


hub = types.ModuleType("tensorflow_hub")
hub.__getattr__ = _no_hub
sys.modules["tensorflow_hub"] = hub

from absl import flags  # noqa: E402

flags.FLAGS(["albert_tests", "--nouse_tpu"], known_only=True)
names = ["albert.modeling_test", "albert.optimization_test", "albert.tokenization_test",
         "albert.run_pretraining_test"]
suite = unittest.defaultTestLoader.loadTestsFromNames(names)
result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(suite)
ran = result.testsRun - len(result.skipped)
passed = ran - len(result.failures) - len(result.errors)
print(f"tests passed {passed} of {ran}")
