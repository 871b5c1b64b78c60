"""af.io: TF's `tf.io` namespace as far as actorflow has it: `af.io.gfile` (see actorflow/gfile.py),
TFRecord files (actorflow/python_io.py), Example parsing (graph/ops/parsing_ops.py), and
decode_csv, read_file, write_file and base64 (graph/ops/string_ops.py), and SparseTensor
(de)serialization (graph/ops/sparse_manip_ops.py)."""
from __future__ import annotations

from actorflow import gfile
from actorflow.graph.ops.data_flow_ops import FIFOQueue, PaddingFIFOQueue, QueueBase, RandomShuffleQueue
from actorflow.graph.ops.parsing_ops import (
    FixedLenFeature,
    VarLenFeature,
    decode_raw,
    parse_example,
    parse_single_example,
)
from actorflow.graph.ops.sparse_manip_ops import (
    deserialize_many_sparse,
    deserialize_sparse,
    serialize_many_sparse,
    serialize_sparse,
)
from actorflow.graph.ops.string_ops import decode_base64, decode_csv, encode_base64, read_file, write_file
from actorflow.python_io import TFRecordCompressionType, TFRecordOptions, TFRecordWriter, tf_record_iterator

__all__ = ["gfile", "TFRecordWriter", "tf_record_iterator", "TFRecordOptions", "TFRecordCompressionType",
           "FIFOQueue", "PaddingFIFOQueue", "QueueBase", "RandomShuffleQueue",
           "FixedLenFeature", "VarLenFeature", "parse_single_example", "parse_example", "decode_raw",
           "decode_csv", "read_file", "write_file", "encode_base64", "decode_base64",
           "serialize_sparse", "serialize_many_sparse", "deserialize_sparse", "deserialize_many_sparse"]

