"""Running a hand-built DALI pipeline of the bench (the baseline CIFAR loader, the decode
limit) exactly as many times as a pass has batches."""


def exact_runs(pipeline, runs: int):
    """The outputs of `runs` runs of a built, unused DALI pipeline, and no more (but at
    least prefetch_queue_depth run): `run()` keeps that many runs in flight, which would
    go on decoding in the background into the next contender's timed pass (and start the
    next pass of this one with batches already made). Each output is valid until the
    next is asked for."""
    depth = pipeline.prefetch_queue_depth
    queued = max(depth.values()) if isinstance(depth, dict) else depth
    pipeline.schedule_run()  # the first call queues `depth` runs
    for _ in range(runs):
        yield pipeline.share_outputs()
        pipeline.release_outputs()
        if queued < runs:
            pipeline.schedule_run()
            queued += 1
