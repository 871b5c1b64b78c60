"""BERT's own unit tests, modeling_test.py, optimization_test.py and tokenization_test.py (corpus
driver: google-research/bert), run with unittest under the library; prints how many pass.

modeling_test also checks the graph's structure: every op BertModel builds must be reachable from its
outputs (a variable's `read` snapshot included). TensorFlow 2.21 gets tf.contrib.layers.layer_norm
from shims/compat_contrib.py.
"""
import sys
import unittest

import tensorflow as tf
from compat_contrib import add_layer_norm

add_layer_norm(tf)

import modeling_test  # noqa: E402
import optimization_test  # noqa: E402
import tokenization_test  # noqa: E402

suite = unittest.TestSuite(unittest.defaultTestLoader.loadTestsFromModule(m)
                           for m in (modeling_test, optimization_test, tokenization_test))
result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(suite)
ran = result.testsRun - len(result.skipped)
passed = ran - len(result.failures) - len(result.errors)
print(f"tests passed {passed} of {ran}")
