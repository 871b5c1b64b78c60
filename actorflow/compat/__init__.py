"""af.compat: `af.compat.v1` is actorflow itself, whose API is TF 1.x's, so that programs written
against `tf.compat.v1` port by their import too: `import actorflow.compat.v1 as tf` (as
`import tensorflow.compat.v1 as tf`) and `from actorflow.compat import v1`."""
from __future__ import annotations

import sys

from actorflow.graph.tensor_shape import dimension_at_index, dimension_value

v1 = sys.modules["actorflow"]
sys.modules[__name__ + ".v1"] = v1          # `import actorflow.compat.v1 as tf`

__all__ = ["v1", "dimension_value", "dimension_at_index", "as_bytes", "as_text", "as_str", "as_str_any",
           "path_to_str", "bytes_or_text_types", "integral_types", "real_types", "complex_types"]

bytes_or_text_types = (bytes, str)
integral_types = (int,)
real_types = (int, float)
complex_types = (int, float, complex)


def as_bytes(bytes_or_text, encoding="utf-8") -> bytes:
    """`bytes_or_text` as bytes (str encoded with `encoding`) (tf.compat.as_bytes)."""
    if isinstance(bytes_or_text, bytearray):
        return bytes(bytes_or_text)
    if isinstance(bytes_or_text, str):
        return bytes_or_text.encode(encoding)
    if isinstance(bytes_or_text, bytes):
        return bytes_or_text
    raise TypeError(f"Expected binary or unicode string, got {bytes_or_text!r}")


def as_text(bytes_or_text, encoding="utf-8") -> str:
    """`bytes_or_text` as str (bytes decoded with `encoding`) (tf.compat.as_text)."""
    if isinstance(bytes_or_text, str):
        return bytes_or_text
    if isinstance(bytes_or_text, bytes):
        return bytes_or_text.decode(encoding)
    raise TypeError(f"Expected binary or unicode string, got {bytes_or_text!r}")


as_str = as_text


def as_str_any(value) -> str:
    """str of `value`, decoding bytes as as_str does (tf.compat.as_str_any)."""
    return as_str(value) if isinstance(value, bytes) else str(value)


def path_to_str(path):
    """An os.PathLike as its str, anything else unchanged (tf.compat.path_to_str)."""
    import os
    return os.fspath(path) if isinstance(path, os.PathLike) else path
