"""Ops the compiler (actorflow/scheduler) makes and the Python API never does: device copies and
the fused kernels of the fusion pass. Declared here so that every kernel has an OpDef and every
pass reads these ops' facts from the same place as any other op's."""
from __future__ import annotations

from actorflow.graph.op_def import InferenceError, define_op


def _like(inputs, attrs):
    return [(inputs[0].dtype, inputs[0].shape)]


def _made_by_the_compiler(inputs, attrs):
    raise InferenceError("this op is made by the compiler's fusion pass, not built in a graph")


# A copy between the host and a GPU of one task (across tasks, _Send/_Recv move the value). A copy to
# the host waits for the GPU: it always runs on the pool.
HostToDevice = define_op("_HostToDevice", _like, actor="copy", internal=True)
DeviceToHost = define_op("_DeviceToHost", _like, actor="copy", host_outputs=True, offload=True, internal=True)

# Fusion (actorflow/scheduler/fusion.py): MatMul/Conv2D + BiasAdd [+ Relu], and MatMul +
# ApplyGradientDescent (a variable update: its input 0 is the variable).
FusedMatMul = define_op("_FusedMatMul", _made_by_the_compiler, internal=True)
FusedConv2D = define_op("_FusedConv2D", _made_by_the_compiler, internal=True)
MatMulApplyGradientDescent = define_op("_MatMulApplyGradientDescent", _made_by_the_compiler, ref_inputs=(0,),
                                       internal=True)
# MaxPoolGrad -> ReluGrad [-> BiasAddGrad] (fusion.py): outputs the input gradient [and the bias gradient].
FusedMaxPoolGrad = define_op("_FusedMaxPoolGrad", _made_by_the_compiler, internal=True)
# ReluGrad -> BiasAddGrad (fusion.py): outputs the masked gradient and the bias gradient.
FusedReluGrad = define_op("_FusedReluGrad", _made_by_the_compiler, internal=True)
