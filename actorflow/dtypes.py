"""af.dtypes: tf.dtypes' names (the DType class, as_dtype, every dtype, and the casts).

TF's quantized types (qint8 ...) and bfloat16 are not here: numpy has no such types."""
from actorflow.graph.dtypes import (  # noqa: F401
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

__all__ = ["DType", "as_dtype", "as_string", "bool", "cast", "complex", "complex64", "complex128", "double", "float16",
           "float32", "float64", "half", "int8", "int16", "int32", "int64", "resource", "saturate_cast", "string",
           "uint8", "uint16", "uint32", "uint64", "variant"]
