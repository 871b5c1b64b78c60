"""af.contrib.distributions: tf.contrib.distributions (TF 1.15): everything of af.distributions
(tf.distributions) and the multivariate normals (MultivariateNormalDiag, ...WithSoftplusScale,
MultivariateNormalTriL, MultivariateNormalFullCovariance) that VAEs and policy-gradient programs use."""
from __future__ import annotations

from actorflow.distributions import *  # noqa: F401,F403
from actorflow.distributions import __all__ as _core
from actorflow.distributions.mvn import (
    MultivariateNormalDiag,
    MultivariateNormalDiagWithSoftplusScale,
    MultivariateNormalFullCovariance,
    MultivariateNormalLinearOperator,
    MultivariateNormalTriL,
)

__all__ = list(_core) + ["MultivariateNormalDiag", "MultivariateNormalDiagWithSoftplusScale",
                         "MultivariateNormalFullCovariance", "MultivariateNormalLinearOperator",
                         "MultivariateNormalTriL"]
