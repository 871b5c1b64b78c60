"""_Send and _Recv: inserted by the partitioner on every edge that crosses devices (the paper's Send/Recv)."""
from __future__ import annotations

from actorflow.graph.op_def import define_op

Send = define_op("_Send", lambda i, a: [], stateful=True, actor="send", placement="host", internal=True)
Recv = define_op("_Recv", lambda i, a: [(a["tensor_type"], a["shape"])], stateful=True, actor="recv",
                 placement="host", internal=True)
