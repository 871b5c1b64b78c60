"""`tensorflow.python.client.session`: Session and InteractiveSession."""
from actorflow import InteractiveSession, Session

__all__ = ["Session", "InteractiveSession"]
