"""af.quantization: tf.quantization's fake-quantization ops (graph/ops/fake_quant_ops.py).

and quantize/dequantize (graph/ops/quantize_ops.py)."""
from actorflow.graph.ops.fake_quant_ops import (
    fake_quant_with_min_max_args,
    fake_quant_with_min_max_args_gradient,
    fake_quant_with_min_max_vars,
    fake_quant_with_min_max_vars_gradient,
    fake_quant_with_min_max_vars_per_channel,
    fake_quant_with_min_max_vars_per_channel_gradient,
)
from actorflow.graph.ops.quantize_ops import dequantize, quantize

__all__ = ["dequantize", "quantize", "fake_quant_with_min_max_args", "fake_quant_with_min_max_args_gradient", "fake_quant_with_min_max_vars",
           "fake_quant_with_min_max_vars_gradient", "fake_quant_with_min_max_vars_per_channel",
           "fake_quant_with_min_max_vars_per_channel_gradient"]
