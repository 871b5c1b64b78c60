"""af.train.SessionCreator: the base of the session factories MonitoredSession uses
(tf.compat.v1.train.SessionCreator); a custom one is called at start."""
from __future__ import annotations

import pytest

import actorflow as af


def test_custom_session_creator_is_used_by_monitored_session():
    class Creator(af.train.SessionCreator):
        calls = 0

        def create_session(self):
            Creator.calls += 1
            sess = af.Session()
            sess.run(af.global_variables_initializer())
            return sess

    assert issubclass(af.train.ChiefSessionCreator, af.train.SessionCreator)
    assert issubclass(af.train.WorkerSessionCreator, af.train.SessionCreator)
    with af.Graph().as_default():
        v = af.Variable(4.0)
        with af.train.MonitoredSession(session_creator=Creator()) as sess:
            assert sess.run(v * 2) == 8.0
    assert Creator.calls == 1
    with pytest.raises(NotImplementedError, match="create_session"):
        af.train.SessionCreator().create_session()
