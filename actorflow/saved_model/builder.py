"""Writing SavedModel directories (tf.compat.v1.saved_model.builder).

A SavedModel directory holds `saved_model.afm` (the meta graphs: graph, tags, signatures,
variable records; checksummed msgpack) and `variables/variables.*` (an actorflow checkpoint written
by af.train.Saver, checksummed per tensor). The graph file is written last and atomically, so a
directory without it is an export still being written (the model server skips those). Versions are
the caller's directory names, as TensorFlow Serving expects: `base/1`, `base/2`, ...
"""
from __future__ import annotations

import logging
import os

from actorflow.saved_model import constants
from actorflow.train.meta_graph import SAVED_MODEL_FORMAT, atomic_write, make_meta_graph, pack_file

__all__ = ["SavedModelBuilder"]

log = logging.getLogger(__name__)


class SavedModelBuilder:
    """Builds a SavedModel: one call to `add_meta_graph_and_variables`, then any number of
    `add_meta_graph`, then `save` (tf.compat.v1.saved_model.builder.SavedModelBuilder).

    Refuses an `export_dir` that exists and is not empty (AssertionError, as TF). Differs from TF:
    assets are not supported (`assets_collection` raises); `save(as_text=True)` raises.
    """

    def __init__(self, export_dir):
        self._export_dir = os.fspath(export_dir)
        if os.path.exists(self._export_dir):
            if os.listdir(self._export_dir):
                raise AssertionError(f"Export directory already exists, and isn't empty. Please choose a different "
                                     f"export directory, or delete all the contents of the specified directory: "
                                     f"{self._export_dir}")
        else:
            os.makedirs(self._export_dir)
        self._meta_graphs = []
        self._has_saved_variables = False
        self._saved = False

    def _check_tags(self, tags):
        if isinstance(tags, str) or tags is None:
            raise TypeError(f"tags must be a list of strings, got {tags!r}")
        tags = [str(t) for t in tags]
        for mg in self._meta_graphs:
            if set(mg.meta_info_def.tags) == set(tags):
                raise AssertionError(f"A meta graph with tags {sorted(tags)} was already added to {self._export_dir}")
        return tags

    def add_meta_graph_and_variables(self, sess, tags, signature_def_map=None, assets_collection=None,
                                     legacy_init_op=None, clear_devices=False, main_op=None,
                                     strip_default_attrs=False, saver=None):
        """Adds the session graph under `tags` and saves the current values of its variables
        (the global variables collection) under `variables/` (tf SavedModelBuilder.add_meta_graph_and_variables).

        `signature_def_map` maps keys to SignatureDefs; every tensor they name must be in the graph.
        `main_op` (or `legacy_init_op`) is an op the loader runs after restoring the variables."""
        if self._has_saved_variables:
            raise AssertionError("Graph state including variables and assets has already been saved. "
                                 "Please invoke `add_meta_graph()` instead.")
        if assets_collection:
            raise NotImplementedError("SavedModelBuilder: assets are not supported")
        tags = self._check_tags(tags)
        graph = sess.graph
        # The meta graph is taken before the Saver below adds its ops: the loader builds its own.
        mg = make_meta_graph(graph, tags, signature_def_map, main_op if main_op is not None else legacy_init_op,
                             clear_devices=clear_devices)
        if mg.variables:
            from actorflow.train.saver import Saver
            var_dir = os.path.join(self._export_dir, constants.VARIABLES_DIRECTORY)
            os.makedirs(var_dir, exist_ok=True)
            refs = {r["variable"].rsplit(":", 1)[0]: graph.get_tensor_by_name(r["variable"]) for r in mg.variables}
            with graph.as_default():
                s = saver or Saver(refs, sharded=False, max_to_keep=None)
            s.save(sess, os.path.join(var_dir, constants.VARIABLES_FILENAME), write_state=False)
        self._meta_graphs.append(mg)
        self._has_saved_variables = True

    def add_meta_graph(self, tags, signature_def_map=None, assets_collection=None, legacy_init_op=None,
                       clear_devices=False, main_op=None, strip_default_attrs=False, saver=None):
        """Adds the default graph under another set of `tags`, sharing the variables saved by
        `add_meta_graph_and_variables` (tf SavedModelBuilder.add_meta_graph)."""
        if not self._has_saved_variables:
            raise AssertionError("Graph state including variables and assets has not been saved yet. "
                                 "Please invoke `add_meta_graph_and_variables()` first.")
        if assets_collection:
            raise NotImplementedError("SavedModelBuilder: assets are not supported")
        from actorflow.graph.graph import get_default_graph
        tags = self._check_tags(tags)
        self._meta_graphs.append(make_meta_graph(get_default_graph(), tags, signature_def_map,
                                                 main_op if main_op is not None else legacy_init_op,
                                                 clear_devices=clear_devices))

    def save(self, as_text=False):
        """Writes the meta graphs to `export_dir/saved_model.afm`, atomically; returns its path
        (tf SavedModelBuilder.save)."""
        if as_text:
            raise NotImplementedError("SavedModelBuilder.save: as_text is not supported")
        if not self._meta_graphs:
            raise AssertionError("SavedModelBuilder.save: no meta graph was added")
        if self._saved:
            raise AssertionError(f"SavedModelBuilder.save: {self._export_dir} was already saved")
        path = os.path.join(self._export_dir, constants.SAVED_MODEL_FILENAME)
        atomic_write(path, pack_file(SAVED_MODEL_FORMAT, {"meta_graphs": [m.to_dict() for m in self._meta_graphs]}))
        self._saved = True
        log.info("SavedModel written to %s", path)
        return path


# TF 1.x also exposes the class under this name.
_SavedModelBuilder = SavedModelBuilder
