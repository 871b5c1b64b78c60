"""The module paths of TensorFlow's `tensorflow.python` that TF-1.x programs import directly.

Programs written for TF 1.x often reach past the public API: `from tensorflow.python.framework
import ops` (`ops.reset_default_graph()`), `from tensorflow.python.client import device_lib`
(`list_local_devices()`), `from tensorflow.python.client import timeline`, `from
tensorflow.python.ops import array_ops, math_ops, rnn_cell_impl`, `from tensorflow.python.platform
import gfile`, `from tensorflow.python.training import moving_averages`... With `tensorflow`
replaced by `actorflow` in those imports, these modules give the public names TF's modules hold
(each looks them up, on first use, in the actorflow module that has them); TF's internals in those
modules have no counterpart here, and asking for one raises an AttributeError naming it.
"""
