"""af.app: the program entry point of TF-1.x scripts (tf.compat.v1.app), built on absl-py."""
from __future__ import annotations

import sys as _sys

from absl import app as _absl_app

from actorflow import flags

__all__ = ["run", "flags", "UsageError"]

UsageError = _absl_app.UsageError


def _parse_flags_tolerate_undef(argv):
    """Parses the flags it knows from `argv` and returns the rest (argv[0] first), as TF's does:
    absl alone stops at an unknown flag."""
    return flags.FLAGS(_sys.argv if argv is None else argv, known_only=True)


def run(main=None, argv=None):
    """Parses the command line (`argv`, default sys.argv) into `af.flags.FLAGS`, then calls
    `main(remaining_argv)` and exits with its return value (tf.compat.v1.app.run).

    `main` defaults to the `main` function of the `__main__` module. As in TF, flags the program
    did not define are left in the argv handed to `main`, not rejected; `--help` prints the flags
    and exits; a flag marked required and missing, or a bad value, exits with a usage message.
    This calls sys.exit, as TF's does: catch SystemExit to use it inside a larger program.
    """
    main = main or _sys.modules["__main__"].main
    _absl_app.run(main=main, argv=argv, flags_parser=_parse_flags_tolerate_undef)
