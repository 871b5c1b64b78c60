"""af.strings: the string ops of tf.strings (join, length, format, as_string, to_number)."""
from __future__ import annotations

from actorflow.graph.ops.string_ops import as_string
from actorflow.graph.ops.string_ops import string_format as format  # noqa: A004 (TF's name)
from actorflow.graph.ops.string_ops import string_join as join
from actorflow.graph.ops.string_ops import string_length as length
from actorflow.graph.ops.string_ops import string_to_number as to_number

__all__ = ["as_string", "format", "join", "length", "to_number"]
