"""af.strings: the string ops of tf.compat.v1.strings."""
from __future__ import annotations

from actorflow.graph.ops.hash_ops import string_to_hash_bucket as to_hash_bucket
from actorflow.graph.ops.hash_ops import string_to_hash_bucket_strong as to_hash_bucket_strong
from actorflow.graph.ops.string_more_ops import ngrams, regex_full_match, unsorted_segment_join
from actorflow.graph.ops.string_ops import as_string, reduce_join, regex_replace, substr
from actorflow.graph.ops.string_ops import string_format as format  # noqa: A004 (TF's name)
from actorflow.graph.ops.string_ops import string_join as join
from actorflow.graph.ops.string_ops import string_length as length
from actorflow.graph.ops.string_ops import string_lower as lower
from actorflow.graph.ops.string_ops import string_strip as strip
from actorflow.graph.ops.string_ops import string_to_hash_bucket_fast as to_hash_bucket_fast
from actorflow.graph.ops.string_ops import string_to_number as to_number
from actorflow.graph.ops.string_ops import string_upper as upper
from actorflow.graph.ops.string_ops import strings_split_v1 as split

__all__ = ["as_string", "format", "join", "length", "to_number", "split", "substr", "regex_replace", "strip",
           "lower", "upper", "to_hash_bucket_fast", "reduce_join", "to_hash_bucket", "to_hash_bucket_strong",
           "regex_full_match", "unsorted_segment_join", "ngrams"]
