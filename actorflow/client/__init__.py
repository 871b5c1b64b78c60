"""af.client (tf.compat.v1.client): the `timeline` module that turns step stats into a Chrome trace."""
from actorflow.client import timeline

__all__ = ["timeline"]
