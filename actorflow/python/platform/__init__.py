"""`tensorflow.python.platform`: gfile, tf_logging, flags, app."""
