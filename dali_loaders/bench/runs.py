"""Running a hand-built DALI pipeline of the bench (the baseline CIFAR loader, the decode
limit, NVIDIA's example) exactly as many times as a pass has batches."""


class PipelineRuns:
    """A built DALI pipeline run exactly as many times as each pass takes outputs, the
    pipeline kept from pass to pass. Between passes no run is in flight (unless
    `across_passes`): `run()` and DALI's iterators keep prefetch_queue_depth runs going, which
    would go on decoding in the background into the next contender's timed pass (and start
    this one's next pass with batches already made). With `across_passes` the queue stays full
    over a pass's end, as a user's epochs run back to back (for a contender timed alone). Each
    output is valid until the next is asked for."""

    def __init__(self, pipeline, across_passes: bool = False):
        depth = pipeline.prefetch_queue_depth
        self.pipeline, self.across_passes = pipeline, across_passes
        self.depth = max(depth.values()) if isinstance(depth, dict) else depth
        self.ahead, self.started = 0, False   # runs scheduled and not yet taken
        self.held = False                     # an output taken and not yet released

    def _schedule(self) -> None:
        self.pipeline.schedule_run()   # the first call queues `depth` runs, the later ones one
        self.ahead += 1 if self.started else self.depth
        self.started = True

    def _release(self) -> None:
        if self.held:
            self.pipeline.release_outputs()
            self.held = False

    def take(self, runs: int):
        """The next `runs` outputs (a pass left early leaves its runs in flight to the next)."""
        for k in range(runs):
            self._release()
            while self.ahead < (self.depth if self.across_passes else min(self.depth, runs - k)):
                self._schedule()
            outputs = self.pipeline.share_outputs()
            self.ahead, self.held = self.ahead - 1, True
            yield outputs
        self._release()
        while self.across_passes and self.ahead < self.depth:
            self._schedule()


def exact_runs(pipeline, runs: int):
    """The outputs of `runs` runs of a built, unused DALI pipeline, and no more (but at
    least prefetch_queue_depth run): see PipelineRuns."""
    return PipelineRuns(pipeline).take(runs)
