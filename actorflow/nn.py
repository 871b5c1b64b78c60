"""The `af.nn` namespace: neural-network functions under TF 1.x's `tf.nn` names.

Everything here is defined elsewhere (graph/ops/nn_ops.py, math_ops.py); this module only
gathers the public names, as `tf.compat.v1.nn` does.
"""
from actorflow.graph.ops.math_ops import sigmoid, tanh
from actorflow.graph.ops.nn_ops import (
    avg_pool,
    avg_pool2d,
    batch_normalization,
    bias_add,
    conv2d,
    conv2d_backprop_input,
    conv2d_transpose,
    dropout,
    elu,
    embedding_lookup,
    in_top_k,
    l2_loss,
    l2_normalize,
    leaky_relu,
    log_softmax,
    max_pool,
    max_pool2d,
    moments,
    relu,
    relu6,
    sigmoid_cross_entropy_with_logits,
    softmax,
    softmax_cross_entropy_with_logits,
    softmax_cross_entropy_with_logits_v2,
    softplus,
    sparse_softmax_cross_entropy_with_logits,
    xw_plus_b,
)
from actorflow.graph.ops.sparse_ops import embedding_lookup_sparse, safe_embedding_lookup_sparse  # noqa: F401

__all__ = [
    "relu", "relu6", "elu", "softplus", "leaky_relu", "sigmoid", "tanh",
    "softmax", "log_softmax", "softmax_cross_entropy_with_logits", "softmax_cross_entropy_with_logits_v2",
    "sparse_softmax_cross_entropy_with_logits", "sigmoid_cross_entropy_with_logits",
    "bias_add", "xw_plus_b", "conv2d", "conv2d_transpose", "conv2d_backprop_input", "max_pool2d", "max_pool", "avg_pool2d", "avg_pool",
    "dropout", "moments", "batch_normalization", "l2_loss", "l2_normalize", "embedding_lookup", "in_top_k",
]

# -- recurrent networks (rnn_cell.py, rnn.py) ---------------------------------------------------
from actorflow import rnn_cell  # noqa: E402
from actorflow.rnn import (  # noqa: E402
    bidirectional_dynamic_rnn,
    dynamic_rnn,
    raw_rnn,
    static_bidirectional_rnn,
    static_rnn,
    static_state_saving_rnn,
)

__all__ += ["rnn_cell", "dynamic_rnn", "static_rnn", "bidirectional_dynamic_rnn", "static_bidirectional_rnn", "raw_rnn",
            "static_state_saving_rnn"]

from actorflow.graph.ops.sort_ops import top_k  # noqa: E402  (graph/ops/sort_ops.py)

__all__ += ["top_k"]

# -- sampled losses and candidate samplers (graph/ops/sampled_loss_ops.py, candidate_sampling_ops.py) --
from actorflow.graph.ops.candidate_sampling_ops import (  # noqa: E402
    all_candidate_sampler,
    compute_accidental_hits,
    fixed_unigram_candidate_sampler,
    learned_unigram_candidate_sampler,
    log_uniform_candidate_sampler,
    uniform_candidate_sampler,
)
from actorflow.graph.ops.sampled_loss_ops import nce_loss, sampled_softmax_loss  # noqa: E402

__all__ += ["nce_loss", "sampled_softmax_loss", "log_uniform_candidate_sampler", "uniform_candidate_sampler",
            "fixed_unigram_candidate_sampler", "learned_unigram_candidate_sampler",
            "all_candidate_sampler", "compute_accidental_hits"]

# -- the rest of tf.nn: selu, softsign, swish, losses, moment helpers, fused_batch_norm (graph/ops/nn_misc_ops.py) --
from actorflow.graph.ops.nn_misc_ops import (  # noqa: E402
    batch_norm_with_global_normalization,
    crelu,
    fused_batch_norm,
    log_poisson_loss,
    normalize_moments,
    relu_layer,
    selu,
    silu,
    softsign,
    sufficient_statistics,
    swish,
    weighted_cross_entropy_with_logits,
    weighted_moments,
    zero_fraction,
)

__all__ += ["selu", "softsign", "swish", "silu", "crelu", "relu_layer", "weighted_cross_entropy_with_logits",
            "log_poisson_loss", "zero_fraction", "sufficient_statistics", "normalize_moments", "weighted_moments",
            "fused_batch_norm", "batch_norm_with_global_normalization"]
__all__ += ["embedding_lookup_sparse", "safe_embedding_lookup_sparse"]

# -- the rest of the convolution family (graph/ops/nn_conv_ops.py) ------------------------------
from actorflow.graph.ops.nn_conv_ops import (  # noqa: E402
    atrous_conv2d,
    avg_pool1d,
    conv1d,
    convolution,
    depth_to_space,
    depthwise_conv2d,
    depthwise_conv2d_native,
    depthwise_conv2d_native_backprop_filter,
    depthwise_conv2d_native_backprop_input,
    local_response_normalization,
    lrn,
    max_pool1d,
    max_pool_with_argmax,
    separable_conv2d,
    space_to_depth,
)

__all__ += ["conv1d", "convolution", "atrous_conv2d", "depthwise_conv2d", "depthwise_conv2d_native",
            "depthwise_conv2d_native_backprop_input", "depthwise_conv2d_native_backprop_filter", "separable_conv2d",
            "lrn", "local_response_normalization", "space_to_depth", "depth_to_space", "max_pool1d", "avg_pool1d",
            "max_pool_with_argmax"]

from actorflow.graph.ops.array_ops.space_batch import space_to_batch  # noqa: E402  (tf.compat.v1.nn.space_to_batch)

__all__ += ["space_to_batch"]

# -- 3-D convolution and pooling (graph/ops/nn_conv3d_ops.py) ----------------------------------
from actorflow.graph.ops.nn_conv3d_ops import (  # noqa: E402
    avg_pool3d,
    conv3d,
    conv3d_backprop_filter,
    conv3d_backprop_filter_v2,
    conv3d_transpose,
    max_pool3d,
)

__all__ += ["conv3d", "conv3d_transpose", "conv3d_backprop_filter", "conv3d_backprop_filter_v2", "max_pool3d",
            "avg_pool3d"]

# -- conv transposes, backprop names, N-D pooling (graph/ops/nn_conv_extra_ops.py) ---------------
from actorflow.graph.ops.nn_conv_extra_ops import (  # noqa: E402
    atrous_conv2d_transpose,
    avg_pool_v2,
    conv1d_transpose,
    conv2d_backprop_filter,
    conv_transpose,
    depthwise_conv2d_backprop_filter,
    depthwise_conv2d_backprop_input,
    max_pool_v2,
    pool,
    with_space_to_batch,
)

__all__ += ["atrous_conv2d_transpose", "avg_pool_v2", "conv1d_transpose", "conv2d_backprop_filter", "conv_transpose",
            "depthwise_conv2d_backprop_filter", "depthwise_conv2d_backprop_input", "max_pool_v2", "pool",
            "with_space_to_batch"]

from actorflow.graph.ops.nn_morph_ops import dilation2d, erosion2d  # noqa: E402  (graph/ops/nn_morph_ops.py)

__all__ += ["dilation2d", "erosion2d"]

from actorflow.graph.ops.nn_frac_ops import fractional_avg_pool, fractional_max_pool  # noqa: E402  (nn_frac_ops.py)

__all__ += ["fractional_max_pool", "fractional_avg_pool"]
# -- connectionist temporal classification (graph/ops/ctc_ops.py) -------------------------------
from actorflow.graph.ops.ctc_ops import (  # noqa: E402
    collapse_repeated,
    ctc_beam_search_decoder,
    ctc_beam_search_decoder_v2,
    ctc_greedy_decoder,
    ctc_loss,
    ctc_loss_v2,
    ctc_unique_labels,
)
from actorflow.graph.ops.loss_scaling_ops import compute_average_loss, scale_regularization_loss  # noqa: E402

__all__ += ["ctc_loss", "ctc_loss_v2", "ctc_greedy_decoder", "ctc_beam_search_decoder", "ctc_beam_search_decoder_v2",
            "collapse_repeated", "ctc_unique_labels", "compute_average_loss", "scale_regularization_loss"]
