"""af.app, af.flags, af.logging and af.gfile / af.io.gfile against TF 1.x's documented semantics."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap

import pytest

import actorflow as af

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _script(tmp_path, body, *args, timeout=120):
    path = tmp_path / "prog.py"
    path.write_text(textwrap.dedent(body))
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=str(tmp_path))


# -- app and flags ------------------------------------------------------------------------------------------

def test_app_run_parses_flags_and_passes_the_rest_to_main(tmp_path):
    r = _script(tmp_path, """
        import actorflow as tf
        flags = tf.app.flags
        flags.DEFINE_string("data_dir", "/tmp/data", "Directory for storing input data")
        flags.DEFINE_integer("max_steps", 1000, "Number of steps")
        flags.DEFINE_float("learning_rate", 0.01, "Initial learning rate")
        flags.DEFINE_boolean("fake_data", False, "Use fake data")
        flags.DEFINE_bool("verbose", True, "alias of DEFINE_boolean")
        flags.DEFINE_list("layers", ["8", "4"], "sizes")
        flags.DEFINE_enum("opt", "sgd", ["sgd", "adam"], "optimizer")
        flags.DEFINE_multi_string("tag", [], "tags")
        FLAGS = flags.FLAGS

        def main(argv):
            print(repr(argv[1:]))
            print(FLAGS.data_dir, FLAGS.max_steps, FLAGS.learning_rate, FLAGS.fake_data, FLAGS.verbose,
                  FLAGS.layers, FLAGS.opt, FLAGS.tag)
            return 3

        if __name__ == "__main__":
            tf.app.run()
        """, "--max_steps=20", "--learning_rate", "0.5", "--fake_data", "--noverbose", "--layers=3,2,1",
        "--opt=adam", "--tag=a", "--tag=b", "--unknown_flag=7", "positional")
    assert r.returncode == 3, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "['--unknown_flag=7', 'positional']"
    assert lines[1] == "/tmp/data 20 0.5 True False ['3', '2', '1'] adam ['a', 'b']"


def test_flags_parse_on_first_access_and_logging_needs_no_configuration(tmp_path):
    r = _script(tmp_path, """
        import actorflow as af
        af.flags.DEFINE_integer("batch_size", 32, "batch")
        print(af.flags.FLAGS.batch_size)
        af.logging.set_verbosity(af.logging.INFO)
        af.logging.info("hello %s", "world")
        af.logging.debug("not shown")
        """, "--batch_size=64", "--not_defined=1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "64"
    assert "INFO:actorflow:hello world" in r.stderr and "not shown" not in r.stderr


def test_tf_1_4_parse_flags_and_flag_listing(tmp_path):
    # TF 1.0-1.4 programs call FLAGS._parse_flags() and list FLAGS.__flags (cnn-text-classification-tf).
    r = _script(tmp_path, """
        import actorflow as tf
        tf.flags.DEFINE_integer("batch_size", 64, "Batch Size")
        tf.flags.DEFINE_string("checkpoint_dir", "", "where")
        FLAGS = tf.flags.FLAGS
        rest = FLAGS._parse_flags()
        print(rest[1:])
        for attr in sorted(FLAGS.__flags):
            if attr in ("batch_size", "checkpoint_dir"):
                print("{}={}".format(attr.upper(), FLAGS[attr].value))
        """, "--batch_size=8", "--checkpoint_dir=runs/1", "--eval_train")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["['--eval_train']", "BATCH_SIZE=8", "CHECKPOINT_DIR=runs/1"]


def test_tf_1_4_flags_take_numpy_defaults_and_a_log_dir_of_their_own(tmp_path):
    # astorfi/TensorFlow-World's tutorials, written for TF 1.4's argparse flags: absl (TF 1.5+) raises
    # IllegalFlagValueError on the numpy default and DuplicateFlagError on log_dir (absl.logging's).
    r = _script(tmp_path, """
        import numpy as np
        import actorflow as tf
        from absl import logging as absl_logging
        tf.app.flags.DEFINE_string('log_dir', '/tmp/prog_logs', 'event logs')
        tf.app.flags.DEFINE_integer('batch_size', np.power(2, 9), 'batch')
        tf.app.flags.DEFINE_float('rate', default=np.float32(0.5), help='rate')
        tf.app.flags.DEFINE_string('verbosity', 'high', 'not of absl.logging type: absl keeps its own')
        """, "--batch_size=8")
    assert r.returncode != 0 and "DuplicateFlagError" in r.stderr and "verbosity" in r.stderr
    r = _script(tmp_path, """
        import numpy as np
        import actorflow as tf
        from absl import logging as absl_logging
        tf.app.flags.DEFINE_string('log_dir', '/tmp/prog_logs', 'event logs')
        tf.app.flags.DEFINE_integer('batch_size', np.power(2, 9), 'batch')
        tf.app.flags.DEFINE_float('rate', default=np.float32(0.5), help='rate')
        FLAGS = tf.app.flags.FLAGS
        print(FLAGS.log_dir, FLAGS.batch_size, type(FLAGS.batch_size).__name__, FLAGS.rate)
        print(FLAGS['log_dir'].default, FLAGS.find_module_defining_flag('log_dir'))
        absl_logging.info("absl.logging still works")
        """, "--batch_size=8")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "/tmp/prog_logs 8 int 0.5"
    assert lines[1].startswith("/tmp/prog_logs ") and "absl.logging" not in lines[1]


def test_required_flag_and_bad_values_exit_with_usage(tmp_path):
    body = """
        import actorflow as af
        af.flags.DEFINE_string("model_dir", None, "where")
        af.flags.DEFINE_integer("n", 1, "count")
        af.flags.DEFINE_enum("mode", "a", ["a", "b"], "mode")
        af.flags.mark_flag_as_required("model_dir")

        def main(argv):
            print("ran", af.flags.FLAGS.model_dir)

        af.app.run(main)
        """
    r = _script(tmp_path, body)
    assert r.returncode == 1 and "model_dir" in r.stderr and "ran" not in r.stdout
    r = _script(tmp_path, body, "--model_dir=/m", "--mode=c")
    assert r.returncode == 1 and "--mode" in r.stderr and "ran" not in r.stdout


def test_flags_in_process_with_explicit_argv():
    f = af.flags
    f.DEFINE_string(flag_name="afx_old_names", default_value="x", docstring="TF's old keyword names")
    f.DEFINE_integer("afx_count", 2, "n", lower_bound=0)
    assert af.app.flags is af.flags
    rest = f.FLAGS(["prog", "--afx_count=5", "--afx_old_names=y", "extra"], known_only=True)
    assert rest == ["prog", "extra"]
    assert f.FLAGS.afx_count == 5 and f.FLAGS.afx_old_names == "y"
    f.FLAGS.afx_count = 9
    assert f.FLAGS["afx_count"].value == 9 and "afx_count" in f.FLAGS
    with pytest.raises(f.IllegalFlagValueError):
        f.FLAGS(["prog", "--afx_count=-1"])
    with pytest.raises(f.DuplicateFlagError):
        f.DEFINE_integer("afx_count", 1, "again")


def test_app_run_in_process_raises_system_exit_with_mains_result():
    seen = []
    handlers, level = list(logging.root.handlers), logging.root.level
    try:
        with pytest.raises(SystemExit) as e:
            af.app.run(lambda argv: seen.append(argv) or 0, argv=["prog", "--afx_unknown=1", "arg"])
    finally:
        # absl's run installs its handler on the root logger; leave logging as the other tests expect it.
        logging.root.handlers[:] = handlers
        logging.root.setLevel(level)
    assert e.value.code == 0
    assert seen == [["prog", "--afx_unknown=1", "arg"]]


# -- logging -----------------------------------------------------------------------------------------------

@pytest.fixture
def verbosity():
    old = af.logging.get_verbosity()
    yield
    af.logging.set_verbosity(old)


def test_logging_levels_and_verbosity(caplog, verbosity):
    assert (af.logging.DEBUG, af.logging.INFO, af.logging.WARN, af.logging.WARNING, af.logging.ERROR,
            af.logging.FATAL) == (10, 20, 30, 30, 40, 50)
    af.logging.set_verbosity(af.logging.INFO)
    assert af.logging.get_verbosity() == af.logging.INFO
    with caplog.at_level(logging.DEBUG, logger="actorflow"):
        af.logging.set_verbosity(af.logging.INFO)
        af.logging.debug("hidden %d", 1)
        af.logging.info("step %d loss %.2f", 3, 0.25)
        af.logging.warn("old name")
        af.logging.warning("new name")
        af.logging.error("bad")
        af.logging.fatal("worse")
        af.logging.log(af.logging.ERROR, "via log")
        af.logging.vlog(25, "vlog 25")
    msgs = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "actorflow"]
    assert msgs == [(20, "step 3 loss 0.25"), (30, "old name"), (30, "new name"), (40, "bad"), (50, "worse"),
                    (40, "via log"), (25, "vlog 25")]
    assert all(r.filename == "test_app_flags_logging_gfile.py" for r in caplog.records if r.name == "actorflow")


def test_log_every_n_and_first_n_count_per_call_site(caplog, verbosity):
    af.logging.set_verbosity(af.logging.INFO)
    with caplog.at_level(logging.INFO, logger="actorflow"):
        af.logging.set_verbosity(af.logging.INFO)
        for i in range(10):
            af.logging.log_every_n(af.logging.INFO, "every %d", 3, i)
        for i in range(5):
            af.logging.log_first_n(af.logging.INFO, "first %d", 2, i)
        for i in range(2):
            af.logging.log_first_n(af.logging.INFO, "other site %d", 1, i)
        af.logging.log_if(af.logging.INFO, "if %s", False, "no")
        af.logging.log_if(af.logging.INFO, "if %s", True, "yes")
    msgs = [r.getMessage() for r in caplog.records if r.name == "actorflow"]
    assert msgs == ["every 0", "every 3", "every 6", "every 9", "first 0", "first 1", "other site 0", "if yes"]


def test_set_verbosity_governs_library_loggers(caplog, verbosity):
    lib = logging.getLogger("actorflow.train.saver")
    af.logging.set_verbosity(af.logging.ERROR)
    assert not lib.isEnabledFor(logging.WARNING)
    af.logging.set_verbosity(af.logging.DEBUG)
    assert lib.isEnabledFor(logging.DEBUG)


# -- gfile ---------------------------------------------------------------------------------------------------

def test_gfile_files(tmp_path):
    p = str(tmp_path / "a.txt")
    with af.gfile.GFile(p, "w") as f:
        f.write("line one\n")
        f.write(b"line two\n")
    assert af.gfile.Exists(p) and not af.gfile.IsDirectory(p)
    with af.gfile.Open(p) as f:
        assert f.readline() == "line one\n"
        assert f.tell() == 9
        assert f.read() == "line two\n"
        assert f.readline() == ""
        f.seek(0)
        assert list(f) == ["line one\n", "line two\n"]
        assert f.size() == 18
    with af.gfile.FastGFile(p, "rb") as f:
        assert f.read(4) == b"line"
    with af.io.gfile.GFile(p, "a") as f:
        f.write("three\n")
    assert af.io.gfile.GFile(p, "rb").readlines() == [b"line one\n", b"line two\n", b"three\n"]
    st = af.gfile.Stat(p)
    assert st.length == 24 and not st.is_directory and st.mtime_nsec > 0
    with pytest.raises(af.errors.PermissionDeniedError, match="isn't open for reading"):
        af.gfile.GFile(p, "w").read()
    with pytest.raises(af.errors.PermissionDeniedError, match="isn't open for writing"):
        af.gfile.GFile(p, "r").write("x")
    with pytest.raises(af.errors.InvalidArgumentError, match="mode"):
        af.gfile.GFile(p, "x")


def test_gfile_missing_file_errors_name_the_path(tmp_path):
    missing = str(tmp_path / "nope.txt")
    f = af.gfile.GFile(missing)                 # opened lazily, as in TF
    with pytest.raises(af.errors.NotFoundError, match="nope.txt"):
        f.read()
    with af.io.gfile.GFile(str(tmp_path / "never.txt"), "w"):
        pass
    assert not af.io.gfile.exists(str(tmp_path / "never.txt"))   # never written, never created (TF)
    for fn in (af.gfile.Stat, af.gfile.Remove, af.gfile.DeleteRecursively, af.gfile.ListDirectory,
               af.io.gfile.stat, af.io.gfile.remove, af.io.gfile.rmtree, af.io.gfile.listdir):
        with pytest.raises(af.errors.NotFoundError, match="nope.txt"):
            fn(missing)
    with pytest.raises(af.errors.NotFoundError, match="nope.txt"):
        af.gfile.Copy(missing, str(tmp_path / "b"))
    with pytest.raises(af.errors.NotFoundError, match="nope.txt"):
        af.io.gfile.rename(missing, str(tmp_path / "b"))
    with pytest.raises(af.errors.UnimplementedError, match="gs"):
        af.gfile.Exists("gs://bucket/x")
    assert af.gfile.Exists("file://" + str(tmp_path))


def test_gfile_directories(tmp_path):
    root = str(tmp_path / "r")
    af.gfile.MakeDirs(os.path.join(root, "a", "b"))
    af.gfile.MakeDirs(os.path.join(root, "a", "b"))          # existing: fine
    af.io.gfile.mkdir(os.path.join(root, "c"))
    with pytest.raises(af.errors.AlreadyExistsError):
        af.gfile.MkDir(os.path.join(root, "c"))
    with pytest.raises(af.errors.NotFoundError):
        af.io.gfile.mkdir(os.path.join(root, "x", "y"))
    for name in ("f1.txt", "a/f2.txt", "a/b/f3.log", ".hidden.txt"):
        with af.gfile.GFile(os.path.join(root, name), "w") as f:
            f.write(name)
    with pytest.raises(af.errors.FailedPreconditionError):
        af.gfile.MakeDirs(os.path.join(root, "f1.txt"))
    assert sorted(af.gfile.ListDirectory(root)) == [".hidden.txt", "a", "c", "f1.txt"]
    assert sorted(af.io.gfile.listdir(root)) == sorted(af.gfile.ListDirectory(root))
    assert sorted(os.path.basename(p) for p in af.gfile.Glob(os.path.join(root, "*.txt"))) == [".hidden.txt",
                                                                                                "f1.txt"]
    assert len(af.io.gfile.glob([os.path.join(root, "*.txt"), os.path.join(root, "a", "*", "*.log")])) == 3
    assert af.gfile.IsDirectory(os.path.join(root, "a")) and af.io.gfile.isdir(root)
    assert af.gfile.Stat(root).is_directory
    walked = [(os.path.relpath(d, root), sorted(s), sorted(f)) for d, s, f in af.gfile.Walk(root)]
    assert sorted(walked) == [(".", ["a", "c"], [".hidden.txt", "f1.txt"]), ("a", ["b"], ["f2.txt"]),
                              ("a/b", [], ["f3.log"]), ("c", [], [])]
    order = [w[0] for w in walked]
    assert order[0] == "." and order.index("a") < order.index("a/b")          # parents first (in_order)
    bottom_up = [os.path.relpath(d, root) for d, _, _ in af.io.gfile.walk(root, topdown=False)]
    assert bottom_up[-1] == "." and bottom_up.index("a/b") < bottom_up.index("a")
    assert list(af.io.gfile.walk(os.path.join(root, "f1.txt"))) == []
    errs = []
    assert list(af.io.gfile.walk(os.path.join(root, "none"), onerror=errs.append)) == []
    assert isinstance(errs[0], af.errors.NotFoundError)
    with pytest.raises(af.errors.FailedPreconditionError):
        af.gfile.Remove(os.path.join(root, "a"))
    # copy and rename refuse to overwrite unless asked
    src, dst = os.path.join(root, "f1.txt"), os.path.join(root, "c", "g.txt")
    af.gfile.Copy(src, dst)
    with pytest.raises(af.errors.AlreadyExistsError):
        af.io.gfile.copy(src, dst)
    af.io.gfile.copy(os.path.join(root, "a", "f2.txt"), dst, overwrite=True)
    assert af.gfile.GFile(dst).read() == "a/f2.txt"
    with pytest.raises(af.errors.AlreadyExistsError):
        af.gfile.Rename(src, dst)
    af.io.gfile.rename(src, dst, overwrite=True)
    assert not af.gfile.Exists(src) and af.gfile.GFile(dst).read() == "f1.txt"
    af.gfile.Remove(dst)
    af.gfile.DeleteRecursively(os.path.join(root, "a"))
    assert not af.gfile.Exists(os.path.join(root, "a"))
    af.io.gfile.rmtree(root)
    assert not af.io.gfile.exists(root)
