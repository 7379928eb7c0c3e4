"""TensorFuture: get, wait with a timeout, readiness, the GIL released while blocked, await without polling,
gather, wait_for timeouts, cancellation, and failed futures through get, wait, await and callbacks.

Nothing here bounds a duration by a constant: work that must still be running is sized from a measurement made
in the same run (`pending`), and a check that needs the work unfinished is retried with a fresh future when the
work finished first (`while_pending`): a correct runtime passes on a loaded machine, a broken one fails every try.
"""

import asyncio
import math
import threading
import time

import dtorch
from dtorch import Replicate, Shard
from _testing import raises, run

MESH = dtorch.init_device_mesh("cpu", (4,))

# Elements of a tensor no device can hold: 2**60 float32 (4 EiB), or a quarter of it per device when sharded 4
# ways, is beyond any address space, so the allocation fails at run time on the workers whatever the machine
# (the client only infers the shape).
TOO_LARGE = 2 ** 60

# How long a check may wait for something that should happen at once (a callback, a completion): a deadline
# for a hang, never a measure of speed.
DEADLINE_S = 60


def slow(rounds=6, n=1024):
    """Work that keeps the workers busy for a while: a chain of matrix products, each large enough that issuing it
    costs the client far less than running it costs the workers (else, on a loaded machine, the workers keep up
    with the client and nothing is left pending once it has issued the chain)."""
    a = dtorch.randn(n, n, seed=1, device_mesh=MESH, placements=[Shard(0)])
    b = dtorch.randn(n, n, seed=2, device_mesh=MESH) / n
    for _ in range(rounds):
        a = a.matmul(b) + 1
    return a.sum()


_SECONDS_PER_ROUND = []


def seconds_per_round():
    """The time one round of `slow` takes on this machine now (measured once, on 3 rounds)."""
    if not _SECONDS_PER_ROUND:
        slow(rounds=1).to_torch()  # warm up the kernels
        start = time.monotonic()
        slow(rounds=3).to_torch()
        _SECONDS_PER_ROUND.append(max(time.monotonic() - start, 1e-3) / 3)
    return _SECONDS_PER_ROUND[0]


def pending(seconds=1.0):
    """The future of work expected to take `seconds`, still pending when this returns.

    If the work is already done when the client gets its future back, the client waited for it or the machine
    stalled the client: the work is doubled and tried again, and only if it is done every time does the test fail.
    """
    rounds = max(2, math.ceil(seconds / seconds_per_round()))
    for _ in range(4):
        f = slow(rounds=rounds).to_torch_async()
        if not f.is_ready():
            return f
        f.get()
        rounds *= 2
    raise AssertionError("the future of %d rounds of work was ready as soon as it was issued, every time: "
                         "the client must not wait for the workers" % rounds)


def while_pending(check, what, attempts=3, seconds=0.25):
    """Runs check(future) on fresh pending futures of work sized to run `seconds` until one run observed the
    future unfinished.

    check returns True when its observation was made while the work ran, False when the work finished first
    (a lost race, not a failure). A runtime that never shows the behaviour loses every attempt.
    """
    for _ in range(attempts):
        if check(pending(seconds)):
            return
    raise AssertionError("%s: not observed in %d attempts with work sized to run %g s" % (what, attempts, seconds))


def failing():
    """A future whose kernel fails on the workers: a tensor too large for any device."""
    return dtorch.zeros(TOO_LARGE, device_mesh=MESH, placements=[Replicate()]).to_torch_async()


def assert_names_the_failure(error):
    """The Java message naming the operator and the device that failed, and why."""
    message = str(error)
    assert isinstance(error, dtorch.DTorchError), "%s: %s" % (type(error).__name__, message)
    assert "operator zeros#" in message and " failed on cpu:" in message, message
    assert "can't allocate memory" in message, message


def test_get_wait_and_is_ready():
    f = dtorch.arange(5).to_torch_async()
    assert f.get().tolist() == [0, 1, 2, 3, 4]
    assert f.is_ready()
    assert f.wait(10_000).tolist() == [0, 1, 2, 3, 4]

    def wait_times_out(f):
        try:
            value = f.wait(1)
        except TimeoutError as e:
            assert "timed out" in str(e), str(e)
            assert f.wait(DEADLINE_S * 1000).numel() == 1
            return True
        assert value.numel() == 1
        return False

    while_pending(wait_times_out, "wait(1) raising TimeoutError on pending work")
    assert dtorch._GetTensorAsync(dtorch.ones(2)).get().tolist() == [1.0, 1.0]
    assert dtorch.get_tensor_async(dtorch.ones(1)).result().item() == 1.0


def test_get_releases_the_gil():
    def get_lets_others_run(f):
        # The counter starts once the work is issued: while it runs, issuing competes with it for the GIL.
        counter = [0]
        stop = threading.Event()

        def count():
            while not stop.is_set():
                counter[0] += 1

        thread = threading.Thread(target=count)
        thread.start()
        try:
            # The yardstick: the counting rate while this thread sleeps (which releases the GIL) and the workers
            # run. A get() that held the GIL would stop the counter for as long as it blocks.
            before, start = counter[0], time.monotonic()
            time.sleep(0.2)
            sleeping_rate = (counter[0] - before) / (time.monotonic() - start)
            before, start = counter[0], time.monotonic()
            f.get()
            blocked = time.monotonic() - start
            blocked_rate = (counter[0] - before) / blocked
        finally:
            stop.set()
            thread.join()
        if blocked < 0.25:
            return False  # the work was nearly done: too short a window to judge
        print("get() blocked %.2f s; another thread counted %.0f/s meanwhile, %.0f/s during a sleep"
              % (blocked, blocked_rate, sleeping_rate))
        assert blocked_rate > 0.05 * sleeping_rate, (
            "another Python thread must run while get() blocks: it counted %.0f/s then, %.0f/s while this one slept"
            % (blocked_rate, sleeping_rate))
        return True

    while_pending(get_lets_others_run, "get() blocking for 0.25 s", seconds=1.0)


def test_await_gather_and_other_coroutines_run_meanwhile():
    def others_run_while_awaiting(big):
        ticks_while_pending = [0]

        async def ticker():
            # Ticks until the value is there. An await that blocked the event loop would let this start only
            # after the value arrived: no tick while pending.
            while not big.is_ready():
                ticks_while_pending[0] += 1
                await asyncio.sleep(0.001)

        async def main():
            small = dtorch.ones(3).sum().to_torch_async()
            return await asyncio.gather(big, small, ticker())

        value, small, _ = asyncio.run(main())
        assert small.item() == 3.0 and value.numel() == 1
        return ticks_while_pending[0] > 0

    while_pending(others_run_while_awaiting, "another coroutine running while a future is awaited")


def test_wait_for_times_out_and_the_runtime_stays_healthy():
    def wait_for_times_out(f):
        async def main():
            try:
                await asyncio.wait_for(f, timeout=0.001)
            except (asyncio.TimeoutError, TimeoutError):
                return True
            return False

        return asyncio.run(main())

    while_pending(wait_for_times_out, "asyncio.wait_for(future, 0.001) timing out")
    assert dtorch.ones(2).sum().to_torch().item() == 2.0


async def _await(f):
    return await f


def test_cancelling_an_awaiting_task_leaves_the_runtime_healthy():
    def cancel_while_awaiting(f):
        async def main():
            task = asyncio.ensure_future(_await(f))
            await asyncio.sleep(0)  # the task starts awaiting
            if f.is_ready():
                task.cancel()
                return False
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
            return task.cancelled()

        return asyncio.run(main())

    while_pending(cancel_while_awaiting, "cancelling a task awaiting a pending future")
    dtorch.sync()
    assert (dtorch.arange(4) * 2).to_torch().tolist() == [0, 2, 4, 6]


def test_await_of_a_ready_future_and_a_callback_with_its_value():
    async def main():
        f = dtorch.full((2,), 3.0).to_torch_async()
        f.get()
        return await f

    assert asyncio.run(main()).tolist() == [3.0, 3.0]
    calls = []
    done = threading.Event()
    f = dtorch.ones(2).to_torch_async()

    def on_done(value, error):
        calls.append((value.tolist() if value is not None else None, error))
        done.set()

    f.add_done_callback(on_done)
    f.get()
    assert done.wait(DEADLINE_S), "the callback was not called within %d s" % DEADLINE_S
    dtorch.sync()
    assert calls == [([1.0, 1.0], None)], calls


def test_a_failed_future_raises_from_get_and_wait_and_the_runtime_stays_usable():
    f = failing()
    assert_names_the_failure(raises(dtorch.DTorchError, f.get))
    assert f.is_ready()
    assert_names_the_failure(raises(dtorch.DTorchError, f.get))  # every get, not only the first
    assert_names_the_failure(raises(dtorch.DTorchError, f.wait, 1))  # an error, not a timeout, once failed
    g = failing()
    assert_names_the_failure(raises(dtorch.DTorchError, g.wait, DEADLINE_S * 1000))
    # Work that depends on a failed tensor, through a collective here, fails with the original error; other work goes on.
    broken = dtorch.zeros(TOO_LARGE, device_mesh=MESH, placements=[Shard(0)])
    assert_names_the_failure(raises(dtorch.DTorchError, (broken * 2).to_torch_async().get))
    assert (dtorch.arange(4) * 3).to_torch().tolist() == [0, 3, 6, 9]
    dtorch.sync()


def test_await_of_a_failed_future_raises_in_the_coroutine():
    async def main():
        try:
            await failing()
        except dtorch.DTorchError as e:
            caught = e
        else:
            raise AssertionError("await of a failed future returned a value")
        # In gather, the failure is one result among others; the good future still delivers.
        bad, good = await asyncio.gather(failing(), dtorch.ones(2).sum().to_torch_async(), return_exceptions=True)
        return caught, bad, good

    caught, bad, good = asyncio.run(main())
    assert_names_the_failure(caught)
    assert_names_the_failure(bad)
    assert good.item() == 2.0


def test_a_failed_future_calls_its_callback_once_with_none_and_the_error():
    def callback_outcome(f):
        calls = []
        done = threading.Event()

        def on_done(value, error):
            calls.append((value, error))
            done.set()

        f.add_done_callback(on_done)
        assert done.wait(DEADLINE_S), "the callback was not called within %d s" % DEADLINE_S
        dtorch.sync()
        assert len(calls) == 1, "the callback must be called once, not %d times: %r" % (len(calls), calls)
        value, error = calls[0]
        assert value is None, value
        assert_names_the_failure(error)

    pending(0.5)  # workers busy: the next future is most likely still pending at registration
    callback_outcome(failing())
    already_failed = failing()
    raises(dtorch.DTorchError, already_failed.get)
    callback_outcome(already_failed)


run(globals())
