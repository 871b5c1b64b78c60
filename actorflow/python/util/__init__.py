"""`tensorflow.python.util`: nest and compat."""
