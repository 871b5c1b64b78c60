"""af.audio: WAV decoding and encoding (tf.compat.v1.audio; ops DecodeWav, EncodeWav)."""
from __future__ import annotations

from actorflow.graph.ops.audio_ops import decode_wav, encode_wav

__all__ = ["decode_wav", "encode_wav"]
