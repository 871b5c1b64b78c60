"""TensorFlow's Example protocol buffers (tensorflow/core/example/{example,feature}.proto), declared
through protobuf's descriptors: Example, SequenceExample, Features, Feature, FeatureList,
FeatureLists, BytesList, FloatList, Int64List. Their wire format is TF's, so records written by one
library parse in the other (package "tensorflow", in a private descriptor pool: no clash with
TensorFlow's own classes in the same process). Exported as af.train.Example and friends."""
from __future__ import annotations

__all__ = ["Example", "SequenceExample", "Features", "Feature", "FeatureList", "FeatureLists", "BytesList",  # noqa: F822
           "FloatList", "Int64List"]

_classes: dict | None = None


def _build() -> dict:
    global _classes
    if _classes is not None:
        return _classes
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="tensorflow/core/example/example.proto", package="tensorflow",
                                             syntax="proto3")
    opt, rep = F.LABEL_OPTIONAL, F.LABEL_REPEATED

    def msg(name, fields, parent=None, map_entry=False):
        m = parent.nested_type.add() if parent is not None else fdp.message_type.add()
        m.name = name
        if map_entry:
            m.options.map_entry = True
        for num, fname, ftype, label, tname, packed, oneof in fields:
            f = m.field.add(name=fname, number=num, type=ftype, label=label)
            if tname:
                f.type_name = tname
            if packed:
                f.options.packed = True
            if oneof is not None:
                f.oneof_index = oneof
        return m
    msg("BytesList", [(1, "value", F.TYPE_BYTES, rep, None, False, None)])
    msg("FloatList", [(1, "value", F.TYPE_FLOAT, rep, None, True, None)])
    msg("Int64List", [(1, "value", F.TYPE_INT64, rep, None, True, None)])
    feature = msg("Feature", [(1, "bytes_list", F.TYPE_MESSAGE, opt, ".tensorflow.BytesList", False, 0),
                              (2, "float_list", F.TYPE_MESSAGE, opt, ".tensorflow.FloatList", False, 0),
                              (3, "int64_list", F.TYPE_MESSAGE, opt, ".tensorflow.Int64List", False, 0)])
    feature.oneof_decl.add(name="kind")
    features = msg("Features", [(1, "feature", F.TYPE_MESSAGE, rep, ".tensorflow.Features.FeatureEntry", False,
                                 None)])
    msg("FeatureEntry", [(1, "key", F.TYPE_STRING, opt, None, False, None),
                         (2, "value", F.TYPE_MESSAGE, opt, ".tensorflow.Feature", False, None)], features, True)
    msg("FeatureList", [(1, "feature", F.TYPE_MESSAGE, rep, ".tensorflow.Feature", False, None)])
    lists = msg("FeatureLists", [(1, "feature_list", F.TYPE_MESSAGE, rep, ".tensorflow.FeatureLists.FeatureListEntry",
                                  False, None)])
    msg("FeatureListEntry", [(1, "key", F.TYPE_STRING, opt, None, False, None),
                             (2, "value", F.TYPE_MESSAGE, opt, ".tensorflow.FeatureList", False, None)], lists, True)
    msg("Example", [(1, "features", F.TYPE_MESSAGE, opt, ".tensorflow.Features", False, None)])
    msg("SequenceExample", [(1, "context", F.TYPE_MESSAGE, opt, ".tensorflow.Features", False, None),
                            (2, "feature_lists", F.TYPE_MESSAGE, opt, ".tensorflow.FeatureLists", False, None)])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    _classes = {n: message_factory.GetMessageClass(pool.FindMessageTypeByName("tensorflow." + n)) for n in __all__}
    return _classes


def __getattr__(name):
    if name in __all__:
        return _build()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
