"""`af.distribute`: TF's cluster resolvers (`af.distribute.cluster_resolver`), the way a task started by a
cluster manager (Kubernetes, Slurm, Ray, TF_CONFIG) finds its cluster and its role."""
from actorflow.distribute import cluster_resolver

__all__ = ["cluster_resolver"]
