"""af.serving: a model server for SavedModel directories with TensorFlow Serving's REST API,
dynamic batching and hot reload (`actorflow serve`), embeddable in an aiohttp application.

    server = af.serving.ModelServer({"digits": "/models/digits"},
                                    batching=af.serving.BatchingParameters(max_batch_size=64))
    server.attach(app)          # or: runner = await server.serve("127.0.0.1", 8501)
"""
from __future__ import annotations

from actorflow.serving.batching import BatchingParameters, BatchQueue
from actorflow.serving.client import PredictClient
from actorflow.serving.model_server import FRAME_CONTENT_TYPE, ModelConfig, ModelServer
from actorflow.serving.servable import RequestError, Servable

__all__ = ["ModelServer", "ModelConfig", "BatchingParameters", "BatchQueue", "PredictClient", "RequestError",
           "Servable", "FRAME_CONTENT_TYPE"]
