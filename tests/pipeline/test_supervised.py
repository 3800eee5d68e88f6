"""SupervisedPool: results in order; a worker that dies or hangs costs its record, never the run."""

import os
import signal
import time

import pytest

from pipeline.runtime.supervised import Lost, SupervisedPool


def _square_or_misbehave(x: int) -> int:
    if x in (3, 4, 9):  # 9 is the last record: a death with nothing after it
        os.kill(os.getpid(), signal.SIGKILL)
    if x == 6:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGINT})  # as C code: no handler runs
        time.sleep(60)
    return x * x


@pytest.mark.timeout(120, method="thread")  # a regression hangs: fail instead
@pytest.mark.parametrize("workers", [1, 3])
def test_dead_and_hung_workers_lose_only_their_record(workers):
    start = time.perf_counter()
    with SupervisedPool(_square_or_misbehave, workers, kill_after_s=1.0) as pool:
        out = list(pool.imap(range(10)))
        assert pool.restarts == 4
        assert list(pool.imap([2, 5])) == [4, 25]  # the replaced workers serve the next call
    expected = [x * x for x in range(10)]
    expected[3], expected[4], expected[6], expected[9] = (Lost("crash", 3), Lost("crash", 4), Lost("timeout", 6),
                                                          Lost("crash", 9))
    assert out == expected
    assert time.perf_counter() - start < 20  # the hung record was killed, not waited for (60 s)


def _fails(x: int) -> int:
    raise KeyError(x)


def test_an_exception_in_the_function_is_raised_in_the_parent():
    with SupervisedPool(_fails, 1, kill_after_s=5) as pool, pytest.raises(Exception, match="KeyError"):
        list(pool.imap([1]))


def test_settings_are_checked():
    with pytest.raises(ValueError, match="workers"):
        SupervisedPool(_fails, 0, kill_after_s=1)
    with pytest.raises(ValueError, match="kill_after_s"):
        SupervisedPool(_fails, 1, kill_after_s=0)


def _slow_square(x: int) -> int:
    time.sleep(0.05)
    return x * x


def test_a_call_left_early_leaves_nothing_behind_for_the_next():
    with SupervisedPool(_slow_square, 2, kill_after_s=10) as pool:
        results = pool.imap(range(100, 200))
        assert next(results) == 100 * 100
        results.close()  # the caller stops early: the records still in the workers must not leak into the next call
        assert list(pool.imap(range(5))) == [0, 1, 4, 9, 16]
