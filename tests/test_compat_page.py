"""docs/compat.md lists TensorFlow 1.x's names with actorflow's support; it must match the code."""
import importlib.util
from pathlib import Path

GEN = Path(__file__).resolve().parent.parent / "docs" / "compat" / "gen_compat.py"


def _gen():
    spec = importlib.util.spec_from_file_location("gen_compat", GEN)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_compat_page_is_current():
    gen = _gen()
    assert gen.PAGE.read_text() == gen.render(), "docs/compat.md is stale: run python docs/compat/gen_compat.py"


def test_page_marks_known_names():
    text = _gen().render()
    assert "`placeholder`" in text.split("Not yet:")[0]          # top level, supported
    assert "## `tf.nn` → `af.nn`" in text
