"""Ops whose output count depends on an attribute (Split, SplitV, Unpack, DynamicPartition, IdentityN)
with one output: the runtime takes a single-output kernel's value bare, so a 1-tuple would come back
with an extra leading dimension (the tensorflow_cookbook's LSTM sampler splits a [1, 1, 128] input
into one piece and squeezes it)."""
import numpy as np

import actorflow as af


def test_one_way_splits_and_unstacks_keep_their_shapes():
    x = af.placeholder(af.float32, [1, 1, 4])
    outs = [af.split(x, 1, axis=1)[0], af.squeeze(af.split(x, 1, axis=1)[0], [1]), af.split(x, [1], axis=1)[0],
            af.unstack(x, axis=1)[0], af.dynamic_partition(x, [0], 1)[0], af.identity_n([x])[0]]
    value = np.arange(4, dtype=np.float32).reshape(1, 1, 4)
    with af.Session() as s:
        got = s.run(outs, {x: value})
    want = [value, value[:, 0], value, value[:, 0], value, value]
    for g, w, t in zip(got, want, outs):
        assert isinstance(g, np.ndarray), t.op.type
        np.testing.assert_array_equal(g, w, err_msg=t.op.type)
