"""`tensorflow.python.framework`: the graph modules TF-1.x programs import by their private path."""
