"""How TF 1.15-era programs enter the library: `import actorflow.compat.v1 as tf` (as
`import tensorflow.compat.v1 as tf`), and `tf.test.main()` parsing the command line's absl flags
before unittest sees it (ALBERT's run_pretraining_test runs as `python -m test --nouse_tpu ...`)."""
from __future__ import annotations

import subprocess
import sys
import textwrap


def test_the_compat_v1_import_path_is_actorflow():
    import actorflow.compat.v1 as tf
    from actorflow.compat.v1 import estimator, placeholder

    import actorflow
    assert tf is actorflow and placeholder is actorflow.placeholder and estimator is actorflow.estimator


def test_tf_test_main_parses_the_programs_flags(tmp_path):
    prog = tmp_path / "flag_test.py"
    prog.write_text(textwrap.dedent('''
        import actorflow.compat.v1 as tf
        flags = tf.flags
        flags.DEFINE_integer("steps", 1, "how many")
        flags.DEFINE_bool("use_tpu", True, "tpu")
        FLAGS = flags.FLAGS

        class T(tf.test.TestCase):
            def test_flags(self):
                self.assertEqual(FLAGS.steps, 7)
                self.assertFalse(FLAGS.use_tpu)

        if __name__ == "__main__":
            tf.test.main()
    '''))
    ok = subprocess.run([sys.executable, str(prog), "--steps=7", "--nouse_tpu"], capture_output=True, text=True,
                        timeout=120)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert "OK" in ok.stderr
    bad = subprocess.run([sys.executable, str(prog), "--steps=x"], capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "steps" in bad.stderr


def test_keras_backend_is_sparse_and_to_dense():
    """XLNet's record parser asks tf.keras.backend.is_sparse of each parsed feature."""
    import numpy as np

    import actorflow as af
    with af.Graph().as_default():
        sp = af.SparseTensor([[0, 1]], [2.0], [2, 2])
        assert af.keras.backend.is_sparse(sp) and not af.keras.backend.is_sparse(af.constant(1.0))
        dense = af.constant([[1.0]])
        assert af.keras.backend.to_dense(dense) is dense
        with af.Session() as sess:
            np.testing.assert_array_equal(sess.run(af.keras.backend.to_dense(sp)), [[0.0, 2.0], [0.0, 0.0]])
