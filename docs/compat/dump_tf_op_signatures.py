"""Writes actorflow/summary/tf_op_signatures.json: for every op type actorflow defines that TensorFlow
2.21 also has, the type, number and type-list attributes TF's OpDef derives from the op's inputs and
outputs. actorflow's GraphDef writer (summary/graph_def.py) fills those attributes (`T`, `N`,
`Tidx`, `SrcT`/`DstT`...), which TF's importer requires and which actorflow's own attributes do not
spell out, so that TensorFlow imports the GraphDefs actorflow writes.

    python docs/compat/dump_tf_op_signatures.py --tf-python /work/tfvenv/bin/python

Rerun it after adding ops. TF-side code only reads OpDefs (`op_def_registry`); nothing runs.
"""
from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "actorflow" / "summary" / "tf_op_signatures.json"

TF_SIDE = r'''
import json, sys
import tensorflow as tf
from tensorflow.python.framework import op_def_registry
names = json.load(sys.stdin)
out = {}
for name in names:
    d = op_def_registry.get(name)
    if d is None:
        continue
    def args(lst):
        return [[a.name, a.type_attr, a.number_attr, a.type_list_attr, int(a.type)] for a in lst]
    needed = {a.name: a.type for a in d.attr if not a.HasField("default_value")}
    out[name] = {"in": args(d.input_arg), "out": args(d.output_arg), "required": needed}
json.dump(out, sys.stdout, sort_keys=True, separators=(",", ":"))
'''


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tf-python", required=True, help="a python with tensorflow-cpu==2.21.0")
    a = ap.parse_args()
    import actorflow  # noqa: F401  (defines every op)
    from actorflow.graph.op_def import registered_op_defs
    names = sorted(registered_op_defs())
    r = subprocess.run([a.tf_python, "-c", TF_SIDE], input=json.dumps(names), capture_output=True, text=True,
                       check=True, env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"})
    table = json.loads(r.stdout)
    OUT.write_text(json.dumps(table, sort_keys=True, indent=0, separators=(",", ":")) + "\n")
    print(f"{len(table)} of {len(names)} actorflow op types have a TensorFlow OpDef; wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
