"""tensorflow/nmt's own tests (corpus driver): model_test (every model's variables, training loss and
weights after a step, eval and inference values against the numbers TF 1.x computed under the tests'
seeds, greedy and beam-search outputs), nmt_test (training and inference end to end on its test data),
inference_test and the utils' tests, run with unittest under the library; prints how many pass.

The harness copies the repository's test data into the run's directory; the tests read it from
nmt/testdata/, so it is moved there first. TensorFlow 2.21 has no tf.contrib.seq2seq: only actorflow
runs them.
"""
import glob
import os
import shutil
import sys
import unittest

import tensorflow as tf

assert tf  # the library under test; the nmt package imports it as the tests do

os.makedirs("nmt/testdata", exist_ok=True)
for name in glob.glob("iwslt15.*") + glob.glob("test_*") + ["deen_output", "deen_ref_bpe", "deen_ref_spm",
                                                           "label_ref", "pred_output"]:
    if os.path.isfile(name):
        shutil.move(name, os.path.join("nmt/testdata", name))

names = ["nmt.model_test", "nmt.nmt_test", "nmt.inference_test", "nmt.utils.evaluation_utils_test",
         "nmt.utils.iterator_utils_test", "nmt.utils.misc_utils_test", "nmt.utils.vocab_utils_test"]
suite = unittest.defaultTestLoader.loadTestsFromNames(names)
result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(suite)
ran = result.testsRun - len(result.skipped)
passed = ran - len(result.failures) - len(result.errors)
print(f"tests passed {passed} of {ran}")
