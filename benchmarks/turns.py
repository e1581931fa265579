"""Timing built DALI pipelines side by side, as the micro-benchmarks here do: a warm-up run each,
then round after round every pipeline runs its batches in turn, so that the machine's moods fall
on all of them alike; the median of the rounds is kept."""
import statistics
import time


def median_ms(made: dict, rounds: int, runs: int, per_run: int = 1, warmup: int = 1) -> dict:
    """{name: median milliseconds per item over the rounds} for {name: built pipeline}, each
    pipeline running `runs` times a round, `per_run` items a run (1: milliseconds a run), after
    `warmup` runs each (first allocations)."""
    for pipeline in made.values():
        for _ in range(warmup):
            pipeline.run()
    times = {name: [] for name in made}
    for _ in range(rounds):
        for name, pipeline in made.items():
            start = time.perf_counter()
            for _ in range(runs):
                pipeline.run()
            times[name].append((time.perf_counter() - start) / (runs * per_run) * 1e3)
    return {name: statistics.median(t) for name, t in times.items()}


def median_ms_per_image(made: dict, batch: int, rounds: int, runs: int) -> dict:
    """median_ms of pipelines that run batches of `batch` images: milliseconds an image."""
    return median_ms(made, rounds, runs, per_run=batch)
