"""af.train.SaverDef / ClusterDef / JobDef / ServerDef: the protobuf messages, wire-compatible with
TF's (the fields keep TF's numbers)."""
from __future__ import annotations

import pytest

import actorflow as af

pytest.importorskip("tensorboard")


def test_server_def_round_trip_with_cluster_and_config():
    cluster = af.train.ClusterDef(job=[af.train.JobDef(name="worker", tasks={0: "localhost:2222", 1: "h:2223"})])
    sd = af.train.ServerDef(cluster=cluster, job_name="worker", task_index=1, protocol="grpc", port=2223)
    sd.default_session_config.intra_op_parallelism_threads = 2
    back = af.train.ServerDef.FromString(sd.SerializeToString())
    assert back.cluster.job[0].tasks[1] == "h:2223" and back.task_index == 1 and back.port == 2223
    assert back.default_session_config.intra_op_parallelism_threads == 2


def test_saver_def_fields():
    sd = af.train.SaverDef(filename_tensor_name="save/Const:0", max_to_keep=3, sharded=True,
                           version=af.train.SaverDef.V2)
    assert af.train.SaverDef.FromString(sd.SerializeToString()).max_to_keep == 3
    with pytest.raises(AttributeError):
        af.train.NoSuchProto  # noqa: B018
