"""The TensorBoard embedding projector's configuration (tf.contrib.tensorboard.plugins.projector):
`ProjectorConfig` (with its `EmbeddingInfo` and `SpriteMetadata`) is TensorBoard's own protobuf
message, and `visualize_embeddings(summary_writer, config)` writes it as `projector_config.pbtxt`
into the writer's log directory, where TensorBoard's projector plugin reads it beside the
checkpoints that hold the embedding variables. Needs the `summary` extra (tensorboard), as every
summary feature does.
"""
from __future__ import annotations

import os

from actorflow import gfile, protos

__all__ = ["visualize_embeddings"]    # and, loaded on first access, ProjectorConfig, EmbeddingInfo, SpriteMetadata

_MODULE = "tensorboard.plugins.projector.projector_config_pb2"


def __getattr__(name):
    if name in ("ProjectorConfig", "EmbeddingInfo", "SpriteMetadata"):
        return getattr(protos.require(_MODULE), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def visualize_embeddings(summary_writer, config):
    """Writes `config` (a ProjectorConfig) to ``projector_config.pbtxt`` in `summary_writer`'s
    log directory (a FileWriter, or anything with ``get_logdir()``)."""
    from google.protobuf import text_format
    get_logdir = getattr(summary_writer, "get_logdir", None)
    if get_logdir is None:
        raise TypeError(f"visualize_embeddings: summary_writer must be a FileWriter (with get_logdir()), got "
                        f"{type(summary_writer).__name__}")
    config_class = protos.require(_MODULE).ProjectorConfig
    if not isinstance(config, config_class):
        raise TypeError(f"visualize_embeddings: config must be a ProjectorConfig, got {type(config).__name__}")
    logdir = get_logdir()
    if logdir is None:
        raise ValueError("visualize_embeddings: the summary writer has no log directory")
    gfile.MakeDirs(logdir)
    with gfile.GFile(os.path.join(logdir, "projector_config.pbtxt"), "w") as f:
        f.write(text_format.MessageToString(config))
