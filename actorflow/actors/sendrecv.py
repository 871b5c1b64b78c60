"""Send and Recv actors: the ends of a cut edge between tasks.

A Send actor hands its value to the transport, addressed to the receiving task under the key
(step id, edge key); a Recv actor asks the rendezvous for it and emits it when it arrives. Either
side may be first.
"""
from __future__ import annotations

import numpy as np

from actorflow import errors
from actorflow.actors.node import DEAD, NodeActor

__all__ = ["SendActor", "RecvActor"]


def frame_key(tag) -> str:
    """The tag's frames and iterations, outermost first ("loop:3/inner:0"), or "" outside any loop."""
    if tag.frame is None:
        return ""
    parts = []
    t = tag
    while t.frame is not None:
        parts.append(f"{t.frame.name}:{t.iter}")
        t = t.frame.parent
    return "/".join(reversed(parts))


def _edge_source(key) -> str:
    """The sending task named in a Recv's edge key ("tensor;src->dst")."""
    edge = str(key)
    return edge.split(";", 1)[1].split("->", 1)[0] if ";" in edge else edge


class SendActor(NodeActor):
    __slots__ = ("transport", "key", "dst")

    def fire(self, tag, args):
        step = tag.step
        if step.error is not None:
            return
        value = args[0] if args else None
        if type(value) is not np.ndarray and hasattr(value, "__cuda_array_interface__"):
            # The partitioner puts a copy node before a Send; a GPU value can still arrive from a
            # variable that another graph of this task placed on the GPU. Tensors travel from host memory.
            value = value.get()
        try:
            self.transport.send(self.dst, step.step_id, (self.key, frame_key(tag)), value)
        except errors.OpError as e:
            step.fail(self.error(e, args))
            return
        except Exception as e:  # noqa: BLE001
            step.fail(self.error(e, args))
            return
        for consumer, slot in self.ctrl:
            consumer.deliver(tag, slot, None if value is not DEAD else DEAD)


class RecvActor(NodeActor):
    __slots__ = ("transport", "key")

    def fire(self, tag, args):
        step = tag.step
        if step.error is not None:
            return
        rt = self.rt
        rt.begin_async(tag)

        def arrived(value, error):
            tr = step.trace
            if tr is not None:
                tr.received(self, tag, value, _edge_source(self.key))
            if error is not None:
                step.fail(error if isinstance(error, errors.OpError) else self.error(error, ()))
            elif step.error is None:
                if value is DEAD:
                    self.emit_dead(tag)
                else:
                    self.emit(tag, value)
            rt.end_async(tag)

        self.transport.recv(step.step_id, (self.key, frame_key(tag)), arrived)
