"""`af.distribute.cluster_resolver` (tf.distribute.cluster_resolver): see actorflow/cluster/resolver.py."""
from actorflow.cluster.resolver import (
                                        ClusterResolver,
                                        KubernetesClusterResolver,
                                        SimpleClusterResolver,
                                        SlurmClusterResolver,
                                        TFConfigClusterResolver,
                                        TPUClusterResolver,
                                        UnionClusterResolver,
)

__all__ = ["ClusterResolver", "KubernetesClusterResolver", "SimpleClusterResolver", "SlurmClusterResolver",
           "TFConfigClusterResolver", "TPUClusterResolver", "UnionClusterResolver"]
