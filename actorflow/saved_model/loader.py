"""Loading SavedModel directories (tf.compat.v1.saved_model.loader)."""
from __future__ import annotations

import logging
import os

from actorflow import errors
from actorflow.saved_model import constants
from actorflow.train.meta_graph import SAVED_MODEL_FORMAT, MetaGraphDef, import_meta_graph_def, unpack_file

__all__ = ["load", "maybe_saved_model_directory", "read_saved_model"]

log = logging.getLogger(__name__)


def maybe_saved_model_directory(export_dir) -> bool:
    """Whether `export_dir` holds a SavedModel file (tf.compat.v1.saved_model.maybe_saved_model_directory)."""
    return os.path.isfile(os.path.join(os.fspath(export_dir), constants.SAVED_MODEL_FILENAME))


def read_saved_model(export_dir) -> list:
    """The MetaGraphDefs of a SavedModel directory, checked: NotFoundError / DataLossError naming the file."""
    export_dir = os.fspath(export_dir)
    path = os.path.join(export_dir, constants.SAVED_MODEL_FILENAME)
    if not os.path.isdir(export_dir):
        raise OSError(f"SavedModel file does not exist at: {export_dir}")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise OSError(f"SavedModel file does not exist at: {path}") from None
    body = unpack_file(path, data, SAVED_MODEL_FORMAT)
    try:
        return [MetaGraphDef.from_dict(d) for d in body["meta_graphs"]]
    except (KeyError, TypeError, ValueError) as e:
        raise errors.DataLossError(None, None, f"{path}: malformed meta graph ({type(e).__name__}: {e})") from None


def _pick(meta_graphs, tags, export_dir):
    want = set(tags)
    for mg in meta_graphs:
        if set(mg.meta_info_def.tags) == want:
            return mg
    have = [sorted(m.meta_info_def.tags) for m in meta_graphs]
    raise RuntimeError(f"MetaGraphDef associated with tags {sorted(want)} could not be found in SavedModel "
                       f"{export_dir}. Available tags: {have}")


def load(sess, tags, export_dir, import_scope=None, **saver_kwargs) -> MetaGraphDef:
    """Loads the meta graph tagged `tags` from `export_dir` into `sess.graph` and restores its variables
    in `sess`; returns the MetaGraphDef (`.signature_def` maps keys to SignatureDefs)
    (tf.compat.v1.saved_model.loader.load).

    Errors: OSError when the directory or its graph file is missing (as TF), DataLossError naming the
    file when a file is damaged (checksums of the graph file and of every variable), RuntimeError
    listing the available tags when none match. Runs the export's `main_op` after restoring.
    """
    if isinstance(tags, str):
        raise TypeError(f"tags must be a list of strings, got {tags!r}")
    export_dir = os.fspath(export_dir)
    mg = _pick(read_saved_model(export_dir), tags, export_dir)
    graph = sess.graph
    with graph.as_default():
        pairs = import_meta_graph_def(mg, graph, import_scope)
        if pairs:
            from actorflow.train.saver import Saver
            prefix = os.path.join(export_dir, constants.VARIABLES_DIRECTORY, constants.VARIABLES_FILENAME)
            index = os.path.join(export_dir, constants.VARIABLES_DIRECTORY)
            if not os.path.isdir(index) or not any(n.startswith(constants.VARIABLES_FILENAME) for n in os.listdir(index)):
                raise errors.NotFoundError(None, None, f"SavedModel {export_dir} has variables but no checkpoint "
                                           f"at {prefix}")
            saver_kwargs.setdefault("name", "saved_model_restore")
            saver = Saver({k: v for k, v in pairs}, sharded=False, **saver_kwargs)
            try:
                saver.restore(sess, prefix)
            except ValueError as e:
                raise errors.DataLossError(None, None, f"SavedModel {export_dir}: cannot read variables at "
                                           f"{prefix}: {e}") from None
    if mg.main_op:
        prefix = (import_scope.rstrip("/") + "/") if import_scope else ""
        sess.run(graph.get_operation_by_name(prefix + mg.main_op))
    log.info("Loaded SavedModel %s with tags %s", export_dir, sorted(tags))
    return mg
