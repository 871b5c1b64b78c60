"""af.contrib.predictor: tf.contrib.predictor's callables over a SavedModel:
`from_saved_model(export_dir)` loads the export into its own graph and session, and the returned
Predictor maps a dict of input arrays (keyed as the signature's inputs) to a dict of output arrays.
"""
from __future__ import annotations

from actorflow.graph.graph import Graph
from actorflow.saved_model import loader, signature_constants, tag_constants

__all__ = ["Predictor", "from_saved_model"]


class Predictor:
    """A signature of a loaded graph as a function: ``predictor({"x": ...}) -> {"y": ...}``."""

    def __init__(self, session, feed_tensors: dict, fetch_tensors: dict):
        self._session = session
        self._feed_tensors = dict(feed_tensors)
        self._fetch_tensors = dict(fetch_tensors)

    session = property(lambda self: self._session)
    graph = property(lambda self: self._session.graph)
    feed_tensors = property(lambda self: dict(self._feed_tensors))
    fetch_tensors = property(lambda self: dict(self._fetch_tensors))

    def __call__(self, input_dict):
        unknown = sorted(set(input_dict) - set(self._feed_tensors))
        if unknown:
            raise ValueError(f"Predictor: unknown input keys {unknown}; the signature's inputs are "
                             f"{sorted(self._feed_tensors)}")
        feed = {self._feed_tensors[k]: v for k, v in input_dict.items()}
        return self._session.run(self._fetch_tensors, feed)


def from_saved_model(export_dir, signature_def_key=None, signature_def=None, input_names=None, output_names=None,
                     tags=None, graph=None, config=None):
    """A Predictor over the SavedModel in `export_dir` (tag 'serve' by default), for the signature
    `signature_def_key` (default 'serving_default'), or for `input_names`/`output_names` (dicts of
    key -> tensor name) given instead (tf.contrib.predictor.from_saved_model)."""
    from actorflow.actors.session import Session
    graph = graph or Graph()
    sess = Session(graph=graph, config=config)
    with graph.as_default():
        mg = loader.load(sess, tags or [tag_constants.SERVING], export_dir)
    if input_names is not None or output_names is not None:
        if input_names is None or output_names is None:
            raise ValueError("from_saved_model: give both input_names and output_names, or neither")
        ins, outs = input_names, output_names
    else:
        sig = signature_def
        if sig is None:
            key = signature_def_key or signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY
            if key not in mg.signature_def:
                raise ValueError(f"from_saved_model: no signature '{key}' in {export_dir}; it has "
                                 f"{sorted(mg.signature_def)}")
            sig = mg.signature_def[key]
        ins = {k: v.name for k, v in sig.inputs.items()}
        outs = {k: v.name for k, v in sig.outputs.items()}
    return Predictor(sess, {k: graph.get_tensor_by_name(n) for k, n in ins.items()},
                     {k: graph.get_tensor_by_name(n) for k, n in outs.items()})
