"""Writes tf_compat_v1_symbols.json: the public names of TensorFlow 2.21's tf.compat.v1 namespaces
that docs/compat.md covers. Run once with TensorFlow installed (the bench extra):

    TF_USE_LEGACY_KERAS=1 python docs/compat/dump_tf_symbols.py
"""
import json
import os
from pathlib import Path

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

NAMESPACES = ["", "nn", "nn.rnn_cell", "layers", "losses", "metrics", "summary", "train", "data", "math", "linalg",
              "image", "random", "sparse", "strings", "errors", "app", "flags", "logging", "gfile", "debugging",
              "initializers", "saved_model", "io", "distributions"]


def kind(obj):
    if isinstance(obj, type):
        return "class"
    if callable(obj):
        return "function"
    if type(obj).__name__ == "module":
        return "module"
    return "constant"


def main():
    v1 = tf.compat.v1
    out = {"tensorflow": tf.__version__, "namespaces": {}}
    for ns in NAMESPACES:
        mod = v1
        for part in filter(None, ns.split(".")):
            mod = getattr(mod, part)
        names = {}
        for name in sorted(dir(mod)):
            if name.startswith("_"):
                continue
            try:
                obj = getattr(mod, name)
            except Exception:  # a lazily loaded name that fails to load is still part of the surface
                names[name] = "unknown"
                continue
            k = kind(obj)
            if k == "module":
                continue
            names[name] = k
        out["namespaces"][ns] = names
    path = Path(__file__).with_name("tf_compat_v1_symbols.json")
    path.write_text(json.dumps(out, indent=0, sort_keys=True) + "\n")
    print(f"wrote {path}: {sum(len(v) for v in out['namespaces'].values())} names")


if __name__ == "__main__":
    main()
