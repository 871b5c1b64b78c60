"""CPU kernels of fractional pooling (graph/ops/nn_frac_ops.py): FractionalMaxPool, FractionalAvgPool
and their gradients. The pooling sequences are drawn as TF's GeneratePoolingSequence draws them
(pseudo-random: one uniform offset u, cum[i] = ceil(alpha * (i + u)); random: a shuffle of k and
k + 1 steps), from numpy's generator rather than TF's Philox stream, so the same seed does not give
TF's sequences; given the sequences (the ops' second and third outputs, the gradient ops' inputs)
everything is as TF: window i covers rows [cum[i], cum[i + 1]) — through cum[i + 1] when
`overlapping` — clipped to the input, and a max window's gradient goes to its first maximum in
row-major order.
"""
from __future__ import annotations

import numpy as np

from actorflow.kernels.registry import register_kernel


def _sequence(rng, n_in, n_out, pseudo_random):
    k = n_in // n_out
    if pseudo_random:
        alpha = n_in / n_out
        max_u = min((k + 2) / alpha - 1, (n_in + 1 - k) / alpha - (n_out - 1))
        u = rng.random() * max_u
        cum = [1] + [int(np.ceil(alpha * (i + u))) for i in range(1, n_out)] + [n_in + 1]
        diff = np.diff(cum)
    else:
        diff = np.full(n_out, k, np.int64)
        diff[:n_in % n_out] += 1
        rng.shuffle(diff)
    return np.concatenate([[0], np.cumsum(diff)]).astype(np.int64)


def _windows(seq, n_in, overlapping):
    for i in range(len(seq) - 1):
        end = seq[i + 1] + 1 if overlapping else seq[i + 1]
        yield i, int(seq[i]), int(min(end, n_in))


class _Pool:
    def __init__(self, attrs, op):
        self.op = op
        self.ratio = [float(r) for r in attrs["pooling_ratio"]]
        if len(self.ratio) != 4 or self.ratio[0] != 1 or self.ratio[3] != 1 or min(self.ratio[1:3]) < 1:
            raise ValueError(f"{op}: pooling_ratio must be [1.0, >= 1, >= 1, 1.0], got {self.ratio}")
        self.pseudo_random = bool(attrs.get("pseudo_random", False))
        self.overlapping = bool(attrs.get("overlapping", False))
        seed, seed2 = int(attrs.get("seed", 0)), int(attrs.get("seed2", 0))
        self.deterministic = bool(attrs.get("deterministic", False))
        self.seed = (seed, seed2) if (seed or seed2) else None
        self.rng = np.random.default_rng(None if self.seed is None else list(self.seed))

    def sequences(self, x):
        x = np.asarray(x)
        if x.ndim != 4:
            raise ValueError(f"{self.op}: value must be 4-D NHWC, got shape {x.shape}")
        outs = [int(x.shape[1] / self.ratio[1]), int(x.shape[2] / self.ratio[2])]
        if min(outs) < 1:
            raise ValueError(f"{self.op}: the pooled size {outs} of input {x.shape} with pooling_ratio {self.ratio} "
                             f"must be positive")
        rng = np.random.default_rng(list(self.seed)) if self.deterministic and self.seed is not None else self.rng
        rows = _sequence(rng, x.shape[1], outs[0], self.pseudo_random)
        cols = _sequence(rng, x.shape[2], outs[1], self.pseudo_random)
        return x, rows, cols


def pool_with_sequences(x, rows, cols, overlapping, is_max):
    """The pooled NHWC output for given row and column pooling sequences."""
    x = np.asarray(x)
    out = np.empty((x.shape[0], len(rows) - 1, len(cols) - 1, x.shape[3]), x.dtype)
    for i, r0, r1 in _windows(rows, x.shape[1], overlapping):
        for j, c0, c1 in _windows(cols, x.shape[2], overlapping):
            win = x[:, r0:r1, c0:c1]
            out[:, i, j] = win.max(axis=(1, 2)) if is_max else win.mean(axis=(1, 2))
    return out


def _check_seq(op, seq, n_in, n_out, what):
    seq = np.asarray(seq).astype(np.int64).reshape(-1)
    if len(seq) != n_out + 1 or seq[0] != 0 or seq[-1] > n_in or np.any(np.diff(seq) < 1):
        raise ValueError(f"{op}: {what} {seq.tolist()} is not a pooling sequence of {n_out} windows over {n_in}")
    return seq


def _register_forward(op, is_max):
    @register_kernel(op, "CPU")
    def kernel(attrs):
        pool = _Pool(attrs, op)

        def fn(value):
            x, rows, cols = pool.sequences(value)
            if not is_max and x.dtype.kind != "f":
                raise TypeError(f"{op}: value must be floating point, got {x.dtype}")
            return pool_with_sequences(x, rows, cols, pool.overlapping, is_max), rows, cols
        return fn
    return kernel


_register_forward("FractionalMaxPool", True)
_register_forward("FractionalAvgPool", False)


@register_kernel("FractionalMaxPoolGrad", "CPU")
def fractional_max_pool_grad(attrs):
    """tf.raw_ops.FractionalMaxPoolGrad: each window's gradient to its first maximum."""
    overlapping = bool(attrs.get("overlapping", False))

    def fn(orig_input, orig_output, out_backprop, row_pooling_sequence, col_pooling_sequence):
        x, g = np.asarray(orig_input), np.asarray(out_backprop)
        rows = _check_seq("FractionalMaxPoolGrad", row_pooling_sequence, x.shape[1], g.shape[1],
                          "row_pooling_sequence")
        cols = _check_seq("FractionalMaxPoolGrad", col_pooling_sequence, x.shape[2], g.shape[2],
                          "col_pooling_sequence")
        dx = np.zeros(x.shape, g.dtype)
        n, c = np.meshgrid(np.arange(x.shape[0]), np.arange(x.shape[3]), indexing="ij")
        for i, r0, r1 in _windows(rows, x.shape[1], overlapping):
            for j, c0, c1 in _windows(cols, x.shape[2], overlapping):
                win = x[:, r0:r1, c0:c1].reshape(x.shape[0], -1, x.shape[3])
                arg = win.argmax(axis=1)                       # the first maximum, row-major
                w = c1 - c0
                np.add.at(dx, (n, r0 + arg // w, c0 + arg % w, c), g[:, i, j])
        return dx
    return fn


@register_kernel("FractionalAvgPoolGrad", "CPU")
def fractional_avg_pool_grad(attrs):
    """tf.raw_ops.FractionalAvgPoolGrad: each window's gradient spread evenly over it."""
    overlapping = bool(attrs.get("overlapping", False))

    def fn(orig_input_tensor_shape, out_backprop, row_pooling_sequence, col_pooling_sequence):
        shape = tuple(int(v) for v in np.asarray(orig_input_tensor_shape).reshape(-1))
        g = np.asarray(out_backprop)
        if len(shape) != 4:
            raise ValueError(f"FractionalAvgPoolGrad: orig_input_tensor_shape must have 4 sizes, got {list(shape)}")
        rows = _check_seq("FractionalAvgPoolGrad", row_pooling_sequence, shape[1], g.shape[1], "row_pooling_sequence")
        cols = _check_seq("FractionalAvgPoolGrad", col_pooling_sequence, shape[2], g.shape[2], "col_pooling_sequence")
        dx = np.zeros(shape, g.dtype)
        for i, r0, r1 in _windows(rows, shape[1], overlapping):
            for j, c0, c1 in _windows(cols, shape[2], overlapping):
                dx[:, r0:r1, c0:c1] += (g[:, i, j] / ((r1 - r0) * (c1 - c0)))[:, None, None, :]
        return dx
    return fn
