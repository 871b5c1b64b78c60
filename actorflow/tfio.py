"""af.io: TF's `tf.io` namespace as far as actorflow has it: `af.io.gfile` (see actorflow/gfile.py),
TFRecord files (actorflow/python_io.py), Example and SequenceExample parsing and TensorProto bytes
(graph/ops/parsing_ops.py), image codecs (graph/ops/image_codec_ops.py), queues
(graph/ops/data_flow_ops.py), decode_csv, read_file, write_file, matching_files and base64
(graph/ops/string_ops.py), and SparseTensor (de)serialization (graph/ops/sparse_manip_ops.py)."""
from __future__ import annotations

from actorflow import gfile
from actorflow.graph.ops.data_flow_ops import FIFOQueue, PaddingFIFOQueue, PriorityQueue, QueueBase, RandomShuffleQueue
from actorflow.graph.ops.image_codec_ops import (
    decode_and_crop_jpeg,
    decode_bmp,
    decode_gif,
    decode_image,
    decode_jpeg,
    decode_png,
    decode_webp,
    encode_jpeg,
    encode_png,
    extract_jpeg_shape,
    is_jpeg,
)
from actorflow.graph.ops.parsing_ops import (
    FixedLenFeature,
    FixedLenSequenceFeature,
    SparseFeature,
    VarLenFeature,
    decode_compressed,
    decode_json_example,
    decode_raw,
    parse_example,
    parse_sequence_example,
    parse_single_example,
    parse_single_sequence_example,
    parse_tensor,
    serialize_tensor,
)
from actorflow.graph.ops.sparse_manip_ops import (
    deserialize_many_sparse,
    deserialize_sparse,
    serialize_many_sparse,
    serialize_sparse,
)
from actorflow.graph.ops.string_ops import (
    decode_base64,
    decode_csv,
    encode_base64,
    matching_files,
    read_file,
    write_file,
)
from actorflow.python_io import TFRecordCompressionType, TFRecordOptions, TFRecordWriter, tf_record_iterator

__all__ = ["gfile", "TFRecordWriter", "tf_record_iterator", "TFRecordOptions", "TFRecordCompressionType",
           "FIFOQueue", "PaddingFIFOQueue", "PriorityQueue", "QueueBase", "RandomShuffleQueue",
           "FixedLenFeature", "VarLenFeature", "parse_single_example", "parse_example", "decode_raw",
           "decode_csv", "read_file", "write_file", "encode_base64", "decode_base64",
           "decode_png", "encode_png", "decode_jpeg", "encode_jpeg", "decode_and_crop_jpeg", "extract_jpeg_shape",
           "decode_bmp", "decode_gif", "decode_webp", "decode_image", "is_jpeg", "serialize_tensor", "parse_tensor",
           "decode_compressed",
           "matching_files", "FixedLenSequenceFeature", "parse_single_sequence_example", "parse_sequence_example",
           "decode_json_example", "SparseFeature",
           "serialize_sparse", "serialize_many_sparse", "deserialize_sparse", "deserialize_many_sparse"]

