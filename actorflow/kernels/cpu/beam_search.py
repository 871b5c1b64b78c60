"""CPU kernel for GatherTree (graph/ops/beam_search_ops.py): the parent pointers followed back for
all batch entries and beams at once, one vectorised gather per step."""
from __future__ import annotations

import numpy as np

from actorflow.errors import InvalidArgumentError
from actorflow.kernels.registry import register_kernel


@register_kernel("GatherTree", "CPU", releases_gil=False)
def gather_tree(attrs):
    """tf.raw_ops.GatherTree."""
    def fn(step_ids, parent_ids, max_sequence_lengths, end_token):
        if step_ids.shape != parent_ids.shape or step_ids.ndim != 3:
            raise InvalidArgumentError(f"GatherTree: step_ids {list(step_ids.shape)} and parent_ids "
                                       f"{list(parent_ids.shape)} must be one [max_time, batch, beam] shape")
        time, batch, beam = step_ids.shape
        lengths = np.asarray(max_sequence_lengths).reshape(-1)
        if lengths.size != batch:
            raise InvalidArgumentError(f"GatherTree: max_sequence_lengths has {lengths.size} entries, but the batch "
                                       f"is {batch}")
        end = step_ids.dtype.type(end_token)
        lengths = np.minimum(lengths, time)
        out = np.full(step_ids.shape, end, dtype=step_ids.dtype)
        rows = np.arange(batch)[:, None]
        parent = np.broadcast_to(np.arange(beam, dtype=np.int64), (batch, beam)).copy()
        for t in range(time - 1, -1, -1):
            live = (t < lengths)[:, None]                   # batch entries whose sequence reaches step t
            out[t] = np.where(live, step_ids[t][rows, parent], end)
            nxt = parent_ids[t][rows, parent].astype(np.int64)
            if t > 0 and np.any(live & ((nxt < 0) | (nxt >= beam))):
                b, k = np.argwhere(live & ((nxt < 0) | (nxt >= beam)))[0]
                raise InvalidArgumentError(f"GatherTree: parent id {int(nxt[b, k])} at step {t}, batch {b} is outside "
                                           f"[0, {beam})")
            parent = np.where(live, nxt, parent)
        # Everything after a beam's first end_token is end_token.
        is_end = out == end
        seen = np.cumsum(is_end, axis=0) - is_end
        out[seen > 0] = end
        return out
    return fn
