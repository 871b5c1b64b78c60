"""`tensorflow.python.layers`: tf.layers (af.layers)."""
