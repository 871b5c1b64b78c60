"""The protocol-buffer classes tf.compat.v1.train exports: SaverDef, ClusterDef, JobDef (TensorBoard's
generated classes, the same messages field for field) and ServerDef (declared here over them, as in
tensorflow/core/protobuf/tensorflow_server.proto, less `cluster_device_filters`). Loaded on first
use through `af.train.<name>`, since the `tensorboard` package is an optional extra. actorflow's
Saver and Server do not read these messages; they are for programs that build or parse them."""
from __future__ import annotations

from actorflow import protos

_NAMES = ("SaverDef", "ClusterDef", "JobDef", "ServerDef")
_server_def = None


def _declare_server_def():
    global _server_def
    if _server_def is not None:
        return _server_def
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    cluster = protos.require("tensorboard.compat.proto.cluster_pb2")
    config = protos.require("tensorboard.compat.proto.config_pb2")
    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="actorflow_tensorflow_server.proto", package="actorflow_tf",
                                             syntax="proto3",
                                             dependency=[cluster.DESCRIPTOR.name, config.DESCRIPTOR.name])
    m = fdp.message_type.add(name="ServerDef")
    opt = F.LABEL_OPTIONAL
    for num, name, ftype, tname in ((1, "cluster", F.TYPE_MESSAGE, ".tensorboard.ClusterDef"),
                                    (2, "job_name", F.TYPE_STRING, None), (8, "replica", F.TYPE_INT32, None),
                                    (3, "task_index", F.TYPE_INT32, None),
                                    (4, "default_session_config", F.TYPE_MESSAGE, ".tensorboard.ConfigProto"),
                                    (5, "protocol", F.TYPE_STRING, None), (6, "port", F.TYPE_INT32, None)):
        f = m.field.add(name=name, number=num, type=ftype, label=opt)
        if tname:
            f.type_name = tname
    pool = descriptor_pool.Default()
    try:
        desc = pool.FindMessageTypeByName("actorflow_tf.ServerDef")
    except KeyError:
        pool.Add(fdp)
        desc = pool.FindMessageTypeByName("actorflow_tf.ServerDef")
    _server_def = message_factory.GetMessageClass(desc)
    return _server_def


def lookup(name: str):
    """The message class `name` (one of SaverDef, ClusterDef, JobDef, ServerDef)."""
    if name == "SaverDef":
        return protos.require("tensorboard.compat.proto.saver_pb2").SaverDef
    if name in ("ClusterDef", "JobDef"):
        return getattr(protos.require("tensorboard.compat.proto.cluster_pb2"), name)
    if name == "ServerDef":
        return _declare_server_def()
    raise AttributeError(name)
