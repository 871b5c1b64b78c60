"""actorflow: the TensorFlow-paper system as an actor-model dataflow runtime on asyncio.

`import actorflow as af` gives the TF-1.x (`tf.compat.v1`) graph API.
"""
from __future__ import annotations

from actorflow import errors
from actorflow.graph.dtypes import (DType, as_dtype, bool_ as bool, double, float16, float32, float64, half,  # noqa: A004
                                    int8, int16, int32, int64, uint8, uint16, complex64, complex128)
from actorflow.graph.graph import (Graph, GraphKeys, Operation, Tensor, add_to_collection, colocate_with,
                                   control_dependencies, convert_to_tensor, device, get_collection,
                                   get_collection_ref, get_default_graph, name_scope, reset_default_graph)
from actorflow.graph.indexed_slices import IndexedSlices, convert_to_tensor_or_indexed_slices  # noqa: F401
from actorflow.graph.tensor_shape import Dimension, TensorShape, dimension_at_index, dimension_value
from actorflow.graph.ops.constant import (constant, group, identity, no_op, placeholder, placeholder_with_default,
                                          stop_gradient)
from actorflow.graph.ops.math_ops import *  # noqa: F401,F403
from actorflow.graph.ops.array_ops import *  # noqa: F401,F403
from actorflow.graph.ops.random_ops import *  # noqa: F401,F403
from actorflow.graph.ops.clip_ops import *  # noqa: F401,F403
from actorflow.graph.ops import overloads as _overloads  # noqa: F401  (Tensor operators)
from actorflow.graph.ops import compiler_ops, control_flow_ops, sendrecv_ops  # noqa: F401
from actorflow.graph.ops.data_flow_ops import FIFOQueue, PaddingFIFOQueue, PriorityQueue, QueueBase, RandomShuffleQueue
from actorflow.graph.ops.conditional_accumulator_ops import ConditionalAccumulator, SparseConditionalAccumulator
from actorflow.graph.ops.reader_ops import (FixedLengthRecordReader, IdentityReader, ReaderBase, TextLineReader,
                                            TFRecordReader, WholeFileReader)
from actorflow.graph.variables import *  # noqa: F401,F403
from actorflow.graph.variable_scope import *  # noqa: F401,F403
from actorflow.graph.initializers import *  # noqa: F401,F403
from actorflow.graph.gradients import gradients
from actorflow.graph.control_flow import case, cond, switch_case, while_loop
from actorflow.graph.nest import flatten as _flatten  # noqa: F401
from actorflow.actors.session import (ConfigProto, GPUOptions, GraphOptions, InteractiveSession, OptimizerOptions,
                                      RewriterConfig, RunMetadata, RunOptions, Session, get_default_session)
from actorflow import nn, layers, train, cluster  # noqa: E402
from actorflow import distribute  # noqa: E402,F401  (af.distribute.cluster_resolver)
from actorflow import xla  # noqa: E402,F401  (af.xla.experimental.jit_scope)
# Runtime checks (tf.debugging, tf.check_numerics, tf.assert_*) and the tf.math namespace.
from actorflow import debugging, linalg, math  # noqa: E402,A004
from actorflow import distributions  # noqa: E402
from actorflow.graph.ops.check_ops import (Assert, assert_equal, assert_greater, assert_greater_equal,  # noqa: E402
                                           assert_integer, assert_less, assert_less_equal, assert_near,
                                           assert_negative, assert_non_negative, assert_non_positive,
                                           assert_none_equal, assert_positive, assert_proper_iterable, assert_rank,
                                           assert_rank_at_least, assert_rank_in, assert_same_float_dtype,
                                           assert_scalar, assert_type, is_non_decreasing, is_numeric_tensor,
                                           is_strictly_increasing)
from actorflow.graph.ops.numerics import add_check_numerics_ops, check_numerics, verify_tensor_all_finite  # noqa: E402
from actorflow.graph import nest  # noqa: F401
# -- N-d gather/scatter (graph/ops/scatter_nd_ops.py; dynamic_rnn writes its outputs with them) --
from actorflow.graph.ops.scatter_nd_ops import (gather_nd, scatter_nd, tensor_scatter_add,  # noqa: E402,F401
                                                tensor_scatter_nd_add, tensor_scatter_nd_update, tensor_scatter_update)
from actorflow.graph.ops.scatter_nd_ops import (tensor_scatter_nd_max, tensor_scatter_nd_min,  # noqa: E402,F401
                                                tensor_scatter_nd_sub, tensor_scatter_sub)
# -- ordering and segment ops (graph/ops/sort_ops.py, segment_ops.py; top_k is af.nn's and af.math's) --
from actorflow.graph.ops.sort_ops import repeat, searchsorted  # noqa: E402,F401
from actorflow.graph.ops.sort_ops import (argsort, cumprod, cumsum, reverse, reverse_v2, sort, unique,  # noqa: E402
                                          unique_with_counts)
from actorflow.graph.ops.segment_ops import *  # noqa: E402,F401,F403
from actorflow import random  # noqa: E402,F401  (af.random: tf.random's names, candidate samplers)
from actorflow.graph.ops.nn_conv_ops import depth_to_space, space_to_depth  # noqa: E402,F401  (tf 1.x top level)
from actorflow.graph.ops.nn_conv_extra_ops import conv2d_backprop_filter_v2, conv2d_backprop_input_v2  # noqa: E402,F401,I001  (tf 1.x top level)
from actorflow import image  # noqa: E402,F401  (af.image: tf.image's resize, crop, flip, colour)
from actorflow.graph.dtypes import variant  # noqa: E402,F401
# af.data (input pipelines) and af.compat.v1 (this module, under TF 2's compat name).
from actorflow import data  # noqa: E402
from actorflow.data import iterator as _data_iterator  # noqa: E402
_data_iterator._session_factory = lambda graph: Session(graph=graph)    # NumpyIterator's sessions
from actorflow import compat  # noqa: E402
from actorflow.graph import graph_util  # noqa: E402,F401
from actorflow.graph.graph_util import import_graph_def  # noqa: E402
from actorflow.graph.behavior import *  # noqa: E402,F401,F403  (disable_v2_behavior and the other switches)
from actorflow.graph.ops.script_ops import numpy_function, py_func, py_function  # noqa: E402
from actorflow.graph.ops.functional_ops import foldl, foldr, map_fn, scan, vectorized_map  # noqa: E402
from actorflow.graph.ops.tensor_array_ops import TensorArray  # noqa: E402
from actorflow.graph.gradients import NoGradient, NotDifferentiable, RegisterGradient, no_gradient  # noqa: E402
from actorflow.graph.custom_gradient import custom_gradient, grad_pass_through, identity_n, recompute_grad  # noqa: E402,F401
from actorflow.graph.gradients import AggregationMethod, UnconnectedGradients, hessians  # noqa: E402,F401
from actorflow.graph.ops.parsing_ops import (FixedLenFeature, VarLenFeature, decode_raw, parse_example,  # noqa: E402
                                             parse_single_example)
from actorflow.graph.sparse_tensor import SparseTensor, SparseTensorValue  # noqa: E402
from actorflow.graph.ops.sparse_ops import (convert_to_tensor_or_sparse_tensor, sparse_placeholder,  # noqa: E402
                                            sparse_tensor_dense_matmul, sparse_tensor_to_dense, sparse_to_dense)
from actorflow.graph.ops.sparse_math_ops import (sparse_add, sparse_matmul, sparse_maximum,  # noqa: E402
                                                 sparse_minimum, sparse_reduce_max, sparse_reduce_max_sparse,
                                                 sparse_reduce_sum, sparse_reduce_sum_sparse, sparse_segment_mean,
                                                 sparse_segment_sqrt_n, sparse_segment_sum, sparse_softmax)
from actorflow.graph.ops.sparse_manip_ops import (deserialize_many_sparse, serialize_many_sparse,  # noqa: E402
                                                  serialize_sparse, sparse_concat, sparse_fill_empty_rows,
                                                  sparse_mask, sparse_merge, sparse_reorder, sparse_reset_shape,
                                                  sparse_reshape, sparse_retain, sparse_slice, sparse_split,
                                                  sparse_to_indicator, sparse_transpose)
from actorflow import sparse  # noqa: E402
from actorflow.graph.ops.complex_ops import angle, complex, conj, imag, real  # noqa: E402,A004
from actorflow.graph.ops.fft_ops import fft, fft2d, fft3d, ifft, ifft2d, ifft3d  # noqa: E402
from actorflow import signal, spectral  # noqa: E402
from actorflow.graph.ops.math_more_ops import bincount, confusion_matrix, norm, saturate_cast  # noqa: E402
from actorflow.graph.ops.random_more_ops import multinomial, random_gamma, random_poisson, random_shuffle  # noqa: E402
from actorflow.graph.ops.misc_ops import (assert_variables_initialized, count_up_to, ensure_shape,  # noqa: E402
                                          get_static_value,
                                          is_tensor, make_template, moving_average_variables, no_regularizer,
                                          report_uninitialized_variables, reverse_sequence, setdiff1d, tuple,
                                          unravel_index)
from actorflow.graph.ops.linalg_ops import (cholesky, cholesky_solve, matrix_determinant,  # noqa: E402
                                            matrix_inverse, matrix_solve, matrix_solve_ls, matrix_triangular_solve,
                                            self_adjoint_eig, self_adjoint_eigvals, svd)
from actorflow.graph.ops.misc_ops import qr  # noqa: E402
from actorflow.graph.ops.linalg_more_ops import sqrtm as matrix_square_root  # noqa: E402
from actorflow import saved_model  # noqa: E402,F401
from actorflow import serving  # noqa: E402,F401

newaxis = None

# -- losses, metrics, strings and TF-1.x aliases (issue 16, items 3, 7, 8) --------------------------
from actorflow.graph.dtypes import string  # noqa: E402
from actorflow.graph.ops.string_ops import (Print, as_string, print_v2 as print, string_join,  # noqa: E402,A004
                                             string_to_number)
# TF 1.x's text ops and lookup tables (graph/ops/string_ops.py, graph/ops/lookup_ops.py)
from actorflow.graph.ops.string_ops import (decode_base64, decode_csv, encode_base64, read_file,  # noqa: E402
                                             reduce_join, regex_replace, string_split, string_strip,
                                             string_to_hash_bucket_fast, substr, write_file)
from actorflow.graph.ops.string_ops import matching_files  # noqa: E402
from actorflow.graph.ops.parsing_ops import (FixedLenSequenceFeature, SparseFeature, decode_compressed,  # noqa: E402
                                             decode_json_example, parse_single_sequence_example, parse_tensor,
                                             serialize_tensor)
from actorflow.graph.ops.lookup_ops import initialize_all_tables, tables_initializer  # noqa: E402
from actorflow import lookup  # noqa: E402
from actorflow.graph.ops.deprecated import *  # noqa: E402,F401,F403
from actorflow import initializers, losses, metrics, strings  # noqa: E402


def list_devices():
    """The devices of this process: CPU:0, and GPU:i when CuPy sees CUDA devices."""
    from actorflow.scheduler.devices import local_devices
    return local_devices()
from actorflow.version import VERSION  # noqa: E402
__version__ = VERSION

# -- summaries, app, flags, logging, gfile (issue 16, items 1 and 2) ----------------------------------
from actorflow import app, flags, gfile, summary  # noqa: E402
from actorflow import client  # noqa: E402
from actorflow import profiler  # noqa: E402,F401  (tf.compat.v1.profiler: parameter and FLOP counts)
from actorflow import config  # noqa: E402,F401  (tf.config: devices, threads, JIT for config-less sessions)
from actorflow import audio, sysconfig  # noqa: E402,F401  (tf.audio's WAV ops; tf.sysconfig)
from actorflow import tf_logging as logging  # noqa: E402
from actorflow import tfio as io  # noqa: E402
from actorflow import python_io  # noqa: E402

# tf.debugging's device-placement switch lives with the sessions (debugging sits below the runtime).
from actorflow.actors.session import get_log_device_placement as _get_ldp  # noqa: E402
from actorflow.actors.session import set_log_device_placement as _set_ldp  # noqa: E402
debugging.set_log_device_placement, debugging.get_log_device_placement = _set_ldp, _get_ldp
io.write_graph = train.write_graph                      # tf.io's names for af.train's (tfio sits below train)
io.match_filenames_once = train.match_filenames_once
io.__all__ = list(io.__all__) + ["write_graph", "match_filenames_once"]


_GRAPH_PROTOS = {"GraphDef": ("graph_pb2", "GraphDef"), "NodeDef": ("node_def_pb2", "NodeDef"),
                 "AttrValue": ("attr_value_pb2", "AttrValue"), "NameAttrList": ("attr_value_pb2", "NameAttrList"),
                 "MetaGraphDef": ("meta_graph_pb2", "MetaGraphDef"), "TensorInfo": ("meta_graph_pb2", "TensorInfo")}


def __getattr__(name):
    # af.contrib (tf.contrib's layers, rnn, seq2seq, framework) is imported on first use.
    if name == "contrib":
        import importlib
        return importlib.import_module("actorflow.contrib")
    # af.estimator, af.feature_column, af.keras and af.test (tf.estimator, tf.feature_column, tf.keras,
    # tf.test), likewise.
    if name in ("estimator", "feature_column", "keras", "test"):
        import importlib
        return importlib.import_module(f"actorflow.{name}")
    # af.Summary, af.Event, af.SessionLog are TensorBoard's protobuf classes, loaded on first use so
    # that `import actorflow` works without the `summary` extra.
    if name in ("Summary", "Event", "SessionLog", "SummaryMetadata", "HistogramProto"):
        return getattr(summary, name)
    if name == "LogMessage":            # tf.LogMessage, the Event's log record
        from actorflow import protos
        return protos.event_pb2.LogMessage
    # GraphDef and its parts are TF's own messages (TensorBoard's generated classes), as as_graph_def,
    # sess.graph_def and graph_util give them and import_graph_def takes them.
    if name in _GRAPH_PROTOS:
        from actorflow import protos
        mod, attr = _GRAPH_PROTOS[name]
        return getattr(getattr(protos, mod), attr)
    raise AttributeError(f"module 'actorflow' has no attribute {name!r}")

# -- special functions, truncating division, cross product (graph/ops/special_math_ops.py) --
from actorflow.graph.ops.special_math_ops import (betainc, cross, igamma, igammac, lbeta,  # noqa: E402,F401
                                                  truncatediv, truncatemod, zeta)
from actorflow.graph.ops.histogram_ops import histogram_fixed_width, histogram_fixed_width_bins  # noqa: E402,F401
from actorflow.graph.device_spec import DeviceSpecV1 as DeviceSpec  # noqa: E402
from actorflow.graph.tensor_util import make_ndarray, make_tensor_proto  # noqa: E402,F401
from actorflow.graph.tensor_spec import TensorSpec  # noqa: E402,F401
from actorflow.graph.ops.edit_distance_ops import edit_distance  # noqa: E402,F401

# -- the smaller TF 1.x names: version constants, dtypes, bit, set, hash and fake-quant ops -----------
from actorflow import bitwise, dtypes, manip, quantization, queue, resource_loader, sets, version  # noqa: E402,F401
from actorflow.version import (COMPILER_VERSION, CXX11_ABI_FLAG, CXX_VERSION, GIT_VERSION,  # noqa: E402,F401
                               GRAPH_DEF_VERSION, GRAPH_DEF_VERSION_MIN_CONSUMER, GRAPH_DEF_VERSION_MIN_PRODUCER,
                               MONOLITHIC_BUILD)
from actorflow.graph.dtypes import resource, uint32, uint64  # noqa: E402,F401
from actorflow.graph.dtypes import QUANTIZED_DTYPES, qint8, qint16, qint32, quint8, quint16  # noqa: E402,F401
from actorflow.graph.ops.quantize_ops import dequantize, quantize, quantize_v2  # noqa: E402,F401
from actorflow.graph.ops.conditional_accumulator_ops import ConditionalAccumulatorBase  # noqa: E402,F401
from actorflow.errors import OpError  # noqa: E402,F401
from actorflow.tf_logging import get_logger  # noqa: E402,F401
from actorflow.graph.ops.bitwise_ops import bitcast  # noqa: E402,F401
from actorflow.graph.graph import container, register_tensor_conversion_function  # noqa: E402,F401
from actorflow.graph.ops.misc_ops import (batch_scatter_update, guarantee_const, is_symbolic_tensor,  # noqa: E402,F401
                                          timestamp)
from actorflow.graph.ops.deprecated import op_scope, variable_op_scope  # noqa: E402,F401
from actorflow.graph.variable_scope import create_partitioned_variables, min_max_variable_partitioner  # noqa: E402,F401
from actorflow.graph.variables import variable_creator_scope  # noqa: E402,F401
from actorflow.graph.ops.session_ops import (delete_session_tensor, get_session_handle,  # noqa: E402,F401
                                             get_session_tensor)
from actorflow.graph.ops.hash_ops import (fingerprint, string_to_hash_bucket,  # noqa: E402,F401
                                          string_to_hash_bucket_strong)
from actorflow.graph.ops.fake_quant_ops import (fake_quant_with_min_max_args,  # noqa: E402,F401
                                                fake_quant_with_min_max_args_gradient, fake_quant_with_min_max_vars,
                                                fake_quant_with_min_max_vars_gradient,
                                                fake_quant_with_min_max_vars_per_channel,
                                                fake_quant_with_min_max_vars_per_channel_gradient)
