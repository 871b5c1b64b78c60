"""`tensorflow.python.ops`: TF's op modules, each mapped to the actorflow names it holds."""
