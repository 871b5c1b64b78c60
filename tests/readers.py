"""Concurrent readers of a variable while a training op runs: for tests that updates stay atomic."""
import threading


def run_beside_readers(sess, variable, step, steps, readers=2):
    """Runs `step` `steps` times while `readers` threads fetch `variable` in a loop. Every element of
    the variable must move in lockstep, so a read whose min and max differ saw an update half done.
    Returns (torn reads as (min, max) pairs, number of reads, the final value)."""
    stop, torn, reads = threading.Event(), [], [0]

    def reader():
        while not stop.is_set():
            val = sess.run(variable)
            reads[0] += 1
            if val.min() != val.max():
                torn.append((val.min(), val.max()))
    threads = [threading.Thread(target=reader) for _ in range(readers)]
    for t in threads:
        t.start()
    try:
        for _ in range(steps):
            sess.run(step)
    finally:
        stop.set()
        for t in threads:
            t.join()
    return torn, reads[0], sess.run(variable)
