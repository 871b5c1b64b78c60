"""af.dtypes: tf.dtypes' names (the DType class, as_dtype, every dtype, and the casts).

bfloat16 is not here: numpy has no such type. The quantized types hold plain integer arrays (see
graph/dtypes.py)."""
from actorflow.graph.dtypes import (  # noqa: F401
    QUANTIZED_DTYPES,
    DType,
    as_dtype,
    complex64,
    complex128,
    double,
    float16,
    float32,
    float64,
    half,
    int8,
    int16,
    int32,
    int64,
    qint8,
    qint16,
    qint32,
    quint8,
    quint16,
    resource,
    string,
    uint8,
    uint16,
    uint32,
    uint64,
    variant,
)
from actorflow.graph.dtypes import (
    bool_ as bool,  # noqa: A004
)
from actorflow.graph.ops.complex_ops import complex  # noqa: A004
from actorflow.graph.ops.math_more_ops import saturate_cast
from actorflow.graph.ops.math_ops import cast
from actorflow.graph.ops.string_ops import as_string

__all__ = ["QUANTIZED_DTYPES", "qint8", "qint16", "qint32", "quint8", "quint16", "DType", "as_dtype", "as_string", "bool", "cast", "complex", "complex64", "complex128", "double", "float16",
           "float32", "float64", "half", "int8", "int16", "int32", "int64", "resource", "saturate_cast", "string",
           "uint8", "uint16", "uint32", "uint64", "variant"]
