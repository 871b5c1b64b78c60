"""`tensorflow.python.training.moving_averages`: ExponentialMovingAverage and assign_moving_average."""
from actorflow.python._alias import delegate

__getattr__, __dir__ = delegate("actorflow.python.training.moving_averages", ('actorflow.train.moving_averages', 'actorflow.train'))
