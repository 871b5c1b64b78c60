"""`tensorflow.python.training`: optimizers, savers, moving averages, hooks (af.train)."""
