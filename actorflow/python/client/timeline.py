"""`tensorflow.python.client.timeline`: Chrome-trace timelines of a step (actorflow.client.timeline)."""
from actorflow.client.timeline import *  # noqa: F401,F403
from actorflow.client.timeline import Timeline

__all__ = ["Timeline"]
