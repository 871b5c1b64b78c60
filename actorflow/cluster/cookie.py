"""The user's cluster cookie: the token of servers and clients that were given none.

TF-1.x programs start a cluster by forking processes that each build `tf.train.Server(cluster, ...)`
and connect to the others (MorvanZhou's 504_distributed_training.py); TF's gRPC servers do not
authenticate, so that just works. actorflow's servers do (issue 15, finding 1: a token derived from
the spec was guessable), and a random token per process would leave such a cluster unable to talk.
So, as Erlang's distribution does with ~/.erlang.cookie, a process given no token and no
$ACTORFLOW_TOKEN uses the user's cookie: 32 random bytes (urlsafe base64) in `$ACTORFLOW_COOKIE`, else
`~/.actorflow/cookie`, created on first use with mode 0600 in a directory of mode 0700. Every process
of the same user (on this machine, or on machines that share the home directory, as Slurm clusters
do) agrees on it; other local users cannot read it. A cookie file that others may read or that
another user owns is refused, naming the file, as ssh refuses a private key of loose mode.
"""
from __future__ import annotations

import os
import secrets
import stat

from actorflow import errors


def cookie_path() -> str:
    return os.environ.get("ACTORFLOW_COOKIE") or os.path.join(os.path.expanduser("~"), ".actorflow", "cookie")


def user_cookie(path: str | None = None) -> str:
    """The cookie at `path` (default `cookie_path()`), created if missing; concurrent first uses by
    several processes agree (the file appears by an atomic link, never half-written)."""
    path = path or cookie_path()
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    d = os.path.dirname(path) or "."
    os.makedirs(d, mode=0o700, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(32) + "\n")
        try:
            os.link(tmp, path)          # fails if another process won the race: then read theirs
        except FileExistsError:
            pass
    finally:
        os.unlink(tmp)
    return _read(path)


def _read(path: str) -> str:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd) as f:
        st = os.fstat(f.fileno())
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            raise errors.PermissionDeniedError(
                None, None, f"the cluster cookie {path} is owned by uid {st.st_uid}, not by this user "
                            f"(uid {os.getuid()}): remove it or set $ACTORFLOW_COOKIE / $ACTORFLOW_TOKEN")
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise errors.PermissionDeniedError(
                None, None, f"the cluster cookie {path} may be read by other users (mode "
                            f"{stat.S_IMODE(st.st_mode):o}): run `chmod 600 {path}`")
        token = f.read().strip()
    if not token:
        raise errors.PermissionDeniedError(None, None, f"the cluster cookie {path} is empty: remove it "
                                                       f"and a new one is made")
    return token
