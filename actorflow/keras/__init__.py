"""af.keras: tf.keras of TF 1.13-1.15 (Keras 2.x semantics) in graph mode, run through actorflow
Sessions, so that TF-1.x programs that mix `tf.keras` into graph code port by import swap.

Layers are called on graph tensors (placeholders included) and make ordinary af Variables;
models (Sequential, functional Model) compile to a graph and train through
`keras.backend.get_session()`. See keras/engine.py for the layer base, keras/models.py for
training.
"""
from __future__ import annotations

from actorflow.keras import activations, backend, constraints, initializers, layers, regularizers

__all__ = ["activations", "backend", "constraints", "initializers", "layers", "regularizers", "Input"]

Input = layers.Input

from actorflow.keras import callbacks, datasets, losses, metrics, models, optimizers, preprocessing, utils  # noqa: E402
from actorflow.keras.models import Model, Sequential  # noqa: E402

layers.deserialize = models.deserialize_layer

__all__ += ["preprocessing", "callbacks", "datasets", "losses", "metrics", "models", "optimizers", "utils", "Model", "Sequential"]
