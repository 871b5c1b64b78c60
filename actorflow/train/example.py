"""tf.train.Example and the other messages of TF's example.proto and feature.proto
(actorflow/example_proto.py), under af.train."""
from __future__ import annotations

from actorflow.example_proto import (  # noqa: F401
                                     BytesList,
                                     Example,
                                     Feature,
                                     FeatureList,
                                     FeatureLists,
                                     Features,
                                     FloatList,
                                     Int64List,
                                     SequenceExample,
)

__all__ = ["Example", "SequenceExample", "Features", "Feature", "FeatureList", "FeatureLists", "BytesList",
           "FloatList", "Int64List"]
