"""af.strings: the string ops of tf.strings (join, length, format, as_string)."""
from __future__ import annotations

from actorflow.graph.ops.string_ops import as_string, string_format as format, string_join as join  # noqa: A004
from actorflow.graph.ops.string_ops import string_length as length

__all__ = ["as_string", "format", "join", "length"]
