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
