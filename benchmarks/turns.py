"""Timing built DALI pipelines side by side, as the micro-benchmarks here do: a warm-up run each,
then round after round every pipeline runs its batches in turn, so that the machine's moods fall
on all of them alike; the median of the rounds is kept."""
import statistics
import time


def median_ms_per_image(made: dict, batch: int, rounds: int, runs: int) -> dict:
    """{name: median milliseconds an image over the rounds} for {name: built pipeline}, each
    pipeline running `runs` batches of `batch` images a round."""
    for pipeline in made.values():
        pipeline.run()   # warm-up: first allocations
    times = {name: [] for name in made}
    for _ in range(rounds):
        for name, pipeline in made.items():
            start = time.perf_counter()
            for _ in range(runs):
                pipeline.run()
            times[name].append((time.perf_counter() - start) / (runs * batch) * 1e3)
    return {name: statistics.median(t) for name, t in times.items()}
