"""A bound on the wait for a batch whose images DALI reads over the network.

DALI's S3 reader gives each request 3 attempts of about 3 s, and a thread reads its share
of a batch one image after another, two requests each: against a server that accepts
connections and never answers, a batch of 64 on two threads would take ten minutes to
fail. So for a source that states `read_timeout` (seconds; FileSource does for URL roots)
the loader waits for each batch on a helper thread, at most that long, and then raises
BatchTimeout, a StorageError and TimeoutError naming the batch's first URL and the store.
The pipeline, whose threads still wait on the store, is then handed to
LivePipeline.abandon(): shut down once they give up, the next loop building a new one.
"""
import os
import threading
from typing import Optional

from ..sources.storage import BatchTimeout, endpoint

ENV = "DALI_LOADERS_READ_TIMEOUT"   # seconds: a user's own bound in place of the source's


def batch_deadline(source) -> Optional[float]:
    """Seconds a batch of `source` may take, or None: no bound (local files, memory)."""
    seconds = getattr(source, "read_timeout", None)
    if seconds is None:
        return None
    chosen = os.environ.get(ENV, "").strip()
    if not chosen:
        return float(seconds)
    try:
        value = float(chosen)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(f"{ENV}={chosen!r}: expected a number of seconds above 0")
    return value


def next_batch(iterator, seconds: Optional[float], source, indices):
    """next(iterator), waiting at most `seconds` (batch_deadline(source), read once an epoch)
    for it; `indices` are the samples of the batch awaited (the first is named if it does not come)."""
    if seconds is None:
        return next(iterator)
    result: dict = {}
    arrived = threading.Event()

    def wait() -> None:
        try:
            result["batch"] = next(iterator)
        except BaseException as failure:  # StopIteration and DALI's errors: raised in the loop's thread
            result["failure"] = failure
        finally:
            arrived.set()

    waiter = threading.Thread(target=wait, daemon=True, name="dali_loaders-batch-wait")
    waiter.start()
    if not arrived.wait(seconds):
        url = source.url_of(int(indices[0])) if len(indices) else "?"
        more = f" and {len(indices) - 1} more" if len(indices) > 1 else ""
        stalled = BatchTimeout(f"the object store at {endpoint()} sent nothing for {seconds:g} s while DALI read "
                               f"{url}{more}: it accepts connections but does not answer. Check the server; then "
                               f"build the loader again and load_state_dict() the last state_dict() taken "
                               f"({ENV} sets this limit)", url)
        stalled.waiter = waiter
        raise stalled
    if "failure" in result:
        raise result["failure"]
    return result["batch"]
