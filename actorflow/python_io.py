"""af.python_io (tf.compat.v1.python_io): writing and reading TFRecord files from Python."""
from __future__ import annotations

from actorflow.tfrecord import RecordReader, TFRecordCompressionType, TFRecordOptions, encode_record, open_for_write

__all__ = ["TFRecordWriter", "tf_record_iterator", "TFRecordOptions", "TFRecordCompressionType"]


class TFRecordWriter:
    """Writes records to a TFRecord file (tf.io.TFRecordWriter); a context manager."""

    def __init__(self, path, options=None):
        self._path = str(path)
        self._f = open_for_write(self._path, options)

    def write(self, record) -> None:
        if self._f is None:
            raise ValueError(f"TFRecordWriter for {self._path} is closed")
        if isinstance(record, str):
            record = record.encode("utf-8")
        self._f.write(encode_record(bytes(record)))

    def flush(self) -> None:
        if self._f is not None:
            self._f.flush()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def tf_record_iterator(path, options=None):
    """The records of a TFRecord file, as bytes (tf.compat.v1.io.tf_record_iterator); a damaged
    record raises DataLossError naming the file and offset."""
    return iter(RecordReader(str(path), options))
