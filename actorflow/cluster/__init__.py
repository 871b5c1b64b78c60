"""Clusters: ClusterSpec, the worker server, the master, local multi-process clusters, and the resolvers
that map a cluster manager's processes onto a ClusterSpec."""
from actorflow.cluster import remote as _remote  # noqa: F401  (installs the sessions' cluster backend)
from actorflow.cluster.local import LocalCluster
from actorflow.cluster.ray_cluster import RayCluster
from actorflow.cluster.resolver import (
                                        ClusterResolver,
                                        KubernetesClusterResolver,
                                        SimpleClusterResolver,
                                        SlurmClusterResolver,
                                        TFConfigClusterResolver,
                                        UnionClusterResolver,
)
from actorflow.cluster.spec import ClusterSpec

__all__ = ["LocalCluster", "RayCluster", "ClusterSpec", "ClusterResolver", "KubernetesClusterResolver", "SimpleClusterResolver",
           "SlurmClusterResolver", "TFConfigClusterResolver", "UnionClusterResolver"]
