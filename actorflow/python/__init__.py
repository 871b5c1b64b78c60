"""The module paths of TensorFlow's `tensorflow.python` that TF-1.x programs import directly.

Programs written for TF 1.x often reach past the public API, most often for
`from tensorflow.python.framework import ops` and `ops.reset_default_graph()`. With `tensorflow`
replaced by `actorflow` in those imports, these modules give the same names; nothing else of
TensorFlow's private tree is mirrored.
"""
