"""`af.distributions`: TF 1.x's tf.distributions (tf.compat.v1.distributions).

Probability distributions built from actorflow's graph ops, so that samples, log densities, entropies
and KL divergences are tensors whose gradients flow to the parameters: Normal, Laplace, Uniform,
StudentT, Gamma, Exponential, Beta and Dirichlet are reparameterized (gamma draws through
RandomGamma's implicit gradient), Bernoulli, Categorical, Multinomial and DirichletMultinomial not.
KL divergences are registered per pair of types (RegisterKL) as in TF.

Where it differs from TF: random draws come from actorflow's generators (a seed gives the same
values on every run, not TF's values); Python numbers given with a tensor parameter take the
tensor's dtype instead of failing; Multinomial samples by drawing max(total_count) classes per row and
counting the first total_count, rather than mapping over rows; Dirichlet's mode is NaN per batch
member where any concentration <= 1, and a batch of DirichletMultinomial total_counts lines up with
the batch axes (TF broadcasts both against the event axis instead); a validate_args error's message
starts with the distribution's name scope ("Normal: scale must be positive").
"""
from actorflow.distributions.bernoulli import Bernoulli
from actorflow.distributions.beta import Beta
from actorflow.distributions.categorical import Categorical
from actorflow.distributions.dirichlet import Dirichlet
from actorflow.distributions.distribution import (
                                                  FULLY_REPARAMETERIZED,
                                                  NOT_REPARAMETERIZED,
                                                  Distribution,
                                                  ReparameterizationType,
)
from actorflow.distributions.exponential import Exponential
from actorflow.distributions.gamma import Gamma
from actorflow.distributions.kullback_leibler import RegisterKL, kl_divergence
from actorflow.distributions.laplace import Laplace
from actorflow.distributions.multinomial import DirichletMultinomial, Multinomial
from actorflow.distributions.normal import Normal
from actorflow.distributions.student_t import StudentT
from actorflow.distributions.uniform import Uniform

__all__ = ["Bernoulli", "Beta", "Categorical", "Dirichlet", "DirichletMultinomial", "Distribution", "Exponential",
           "FULLY_REPARAMETERIZED", "Gamma", "Laplace", "Multinomial", "NOT_REPARAMETERIZED", "Normal", "RegisterKL",
           "ReparameterizationType", "StudentT", "Uniform", "kl_divergence"]
