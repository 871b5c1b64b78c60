"""af.train.ClusterSpec, af.train.Server and af.train.TransportLimits (tf.train.ClusterSpec, tf.train.Server;
TransportLimits has no TF counterpart: the per-peer memory limits of a server, see transport/budget.py)."""
from actorflow.cluster.server import Server
from actorflow.cluster.spec import ClusterSpec
from actorflow.transport.budget import TransportLimits

__all__ = ["ClusterSpec", "Server", "TransportLimits"]
