"""CPU kernels: numpy where it already calls optimized code, numba where a fused loop wins.

Importing this package loads nothing; the registry imports MODULES the first time a CPU kernel is
looked up, so `import actorflow` never pays for numba.
"""
MODULES = ("array", "math", "matmul", "softmax", "bias", "conv", "pooling", "random", "state", "training", "io",
           "accumulator", "debugging", "summary", "string", "scatter_nd", "candidate_sampling", "dataset", "script", "matrix", "tensor_list", "parsing", "sparse", "misc")
MODULES += ("sort", "segment")     # ordering and segment ops (graph/ops/sort_ops.py, segment_ops.py)
MODULES += ("nn_misc",)          # selu, softsign (graph/ops/nn_misc_ops.py)
MODULES += ("depthwise", "lrn", "space_depth", "pool_argmax")   # graph/ops/nn_conv_ops.py
MODULES += ("image", "image_codec", "image_colour", "image_boxes")     # resize ops, AdjustContrastv2 (graph/ops/image_ops.py), codecs
MODULES += ("linalg", "linalg_more")    # dense linear algebra (graph/ops/linalg_ops.py, linalg_more_ops.py)
MODULES += ("space_batch", "patches")   # graph/ops/array_ops/space_batch.py, patches.py
MODULES += ("special_math",)   # graph/ops/special_math_ops.py
MODULES += ("histogram",)   # graph/ops/histogram_ops.py
MODULES += ("complex", "fft")   # graph/ops/complex_ops.py, fft_ops.py
MODULES += ("edit_distance",)   # graph/ops/edit_distance_ops.py
MODULES += ("conv3d", "morphology", "fractional_pool")   # nn_conv3d_ops.py, nn_morph_ops.py, nn_frac_ops.py
MODULES += ("ctc",)   # graph/ops/ctc_ops.py
MODULES += ("beam_search",)   # graph/ops/beam_search_ops.py
MODULES += ("bitwise", "hashing", "sets", "fake_quant", "quantize")   # bitwise_ops, hash_ops, set_ops, fake_quant_ops, quantize_ops
MODULES += ("clustering",)   # graph/ops/clustering_ops.py
MODULES += ("audio", "string_more")   # graph/ops/audio_ops.py (DecodeWav, EncodeWav), string_more_ops.py
MODULES += ("image_transform",)   # graph/ops/image_transform_ops.py
