"""dali_compat: a DALI older than 2.3 is refused naming both versions, versions(), the
fallbacks on a DALI newer than those checked (the same batches), and no AutoGraph file left
in the temp folder after a graph with conditionals is built and run."""
import os
import re
import tempfile
import warnings

import numpy as np
import pytest
import torch
from cifar_data import index_images, write_cifar

import dali_loaders
from dali_loaders import dali_compat, get_cifar_iter_dali

nvidia_dali = pytest.importorskip("nvidia.dali")


@pytest.mark.parametrize("old", ["2.1.1", "1.53.0", "2.2.0"])
def test_a_dali_too_old_is_refused_naming_both_versions(old, monkeypatch, tmp_path):
    monkeypatch.setattr(nvidia_dali, "__version__", old)
    with pytest.raises(dali_compat.DaliTooOld, match=rf"DALI >= 2\.3.*DALI {old} is installed"):
        dali_compat.require_dali()
    with pytest.raises(dali_compat.DaliTooOld, match=old):   # not the torchvision twin, silently
        get_cifar_iter_dali("train", str(tmp_path), 8, 1, fallback=True)


@pytest.mark.parametrize("version", ["2.3.0", "2.4.0", "2.10.0", "3.0.0.dev20260101"])
def test_dali_2_3_and_newer_are_accepted(version, monkeypatch):
    monkeypatch.setattr(nvidia_dali, "__version__", version)
    assert dali_compat.require_dali() is nvidia_dali


def test_versions_names_dali_and_ours():
    assert dali_compat.versions() == {"dali": nvidia_dali.__version__, "dali_loaders": dali_loaders.__version__}


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    return write_cifar(str(tmp_path_factory.mktemp("idx")), "cifar10", 67, 10, images=index_images)


def two_epochs(root):
    loader = get_cifar_iter_dali("train", root, 16, 1, seed=3)
    return [torch.cat([x for x, _ in loader]) for _ in range(2)], loader


def test_a_dali_newer_than_those_checked_falls_back_to_the_same_batches(indexed, monkeypatch):
    assert dali_compat.seen_to_work()
    expected, loader = two_epochs(indexed)
    assert dali_compat.can_restore(loader.pipeline)    # the reused pipeline, on a DALI checked
    monkeypatch.setattr(nvidia_dali, "__version__", "2.99.0")
    monkeypatch.setattr(dali_compat, "_warned_untested", False)
    monkeypatch.setattr(dali_compat, "_EpochIterator", None)
    assert not dali_compat.seen_to_work()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got, loader = two_epochs(indexed)
    assert not dali_compat.can_restore(loader.pipeline)   # a pipeline per epoch instead
    assert all(torch.equal(a, b) for a, b in zip(expected, got))
    untested = [w for w in caught if "not DALI 2.99.0" in str(w.message)]
    assert len(untested) == 1 and "2.3, 2.4" in str(untested[0].message)


def test_lean_api_checks_are_only_for_the_dali_releases_checked(monkeypatch):
    from nvidia.dali import fn, pipeline_def

    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        return fn.external_source(source=lambda: [np.zeros(3, np.uint8)] * 2)

    monkeypatch.setattr(nvidia_dali, "__version__", "2.99.0")
    monkeypatch.setattr(dali_compat, "_warned_untested", True)
    p = pipe()
    dali_compat.lean_api_checks(p)
    assert "_check_api_type_scope" not in vars(p)   # DALI's own scope stays
    p.build()
    assert len(p.run()[0]) == 2
    dali_compat.shutdown(p)


def test_no_autograph_file_is_left_after_a_graph_with_conditionals(tmp_path):
    """AutoGraph writes each function it converts to the temp folder; build_dali_pipeline
    deletes them once the pipeline is built, and the pipeline (and a second one, traced
    again) still runs."""
    from nvidia.dali import fn, types

    from dali_loaders.loader._dali import build_dali_pipeline

    def graph():
        values = fn.external_source(lambda info: [np.full(4, info.iteration * 2 + i, np.int32) for i in range(2)],
                                    batch=True, batch_info=True)
        if fn.random.coin_flip(probability=0.5, dtype=types.BOOL):   # a per-sample branch: AutoGraph
            out = values + 100
        else:
            out = values - 100
        return out

    before = dali_compat.autograph_files()
    runs = []
    for _ in range(2):
        pipe = build_dali_pipeline(graph, batch_size=2, num_threads=1, device_id=None, seed=7, checkpoint=None,
                                   conditionals=True)
        runs.append([np.stack([np.asarray(t) for t in pipe.run()[0]]) for _ in range(3)])
        dali_compat.shutdown(pipe)
    made = {name: path for name, path in dali_compat.autograph_files().items() if name not in before}
    assert made, "the graph was not converted by AutoGraph: this test tests nothing"
    assert all(os.path.dirname(path) == tempfile.gettempdir() for path in made.values())
    assert not [path for path in made.values() if os.path.exists(path)]
    left = {n for n in os.listdir(tempfile.gettempdir()) if n.startswith(dali_compat.AUTOGRAPH_PREFIX)}
    assert not left & {os.path.basename(path) for path in made.values()}
    for batches in runs:   # both branches taken, each sample kept, the same draws in both
        values = np.concatenate(batches)[:, 0]
        took_if = values > 50
        assert set(took_if) == {True, False}
        assert np.array_equal(np.where(took_if, values - 100, values + 100), np.arange(6))
    assert all(np.array_equal(a, b) for a, b in zip(runs[0], runs[1]))


def test_an_epochs_start_state_rekeys_every_random_generator_and_nothing_else():
    from nvidia.dali import fn, pipeline_def

    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=5, enable_checkpointing=True,
                  prefetch_queue_depth=1)   # no run in flight after run(): restore() wants an idle pipeline
    def pipe():
        data = fn.external_source(source=lambda info: [np.zeros(3, np.uint8)] * 2, batch_info=True)
        return data, fn.random.uniform(range=[0, 1]), fn.random.coin_flip()

    p = pipe()
    p.build()
    start = dali_compat.checkpoint_with(p, "")
    first, again, other = (dali_compat.reseeded(start, s) for s in (11, 11, 12))
    assert first == again and first != other                 # a pure function of the seed
    drawn = []
    for state in (first, other):
        dali_compat.restore(p, state)
        drawn.append([np.array(p.run()[1].as_tensor()) for _ in range(2)])
    dali_compat.restore(p, first)
    assert np.array_equal(np.array(p.run()[1].as_tensor()), drawn[0][0])   # restoring replays the stream
    assert not np.array_equal(drawn[0][0], drawn[1][0])
    states = re.findall(rb"Philox_([0-9A-F]{16})_([0-9A-F]{16}):([0-9A-F]{16})_([0-9]+)", first)
    assert len({key for key, *_ in states}) == 2                                  # a stream per operator
    assert {state[1:] for state in states} == {(b"0" * 16, b"0" * 16, b"0")}      # each at its start
    p.run()
    moved = dali_compat.checkpoint_with(p, "")
    assert dali_compat.reseeded(moved, 11) != moved and dali_compat.reseeded(moved, 11)   # counters reset
    unknown = start.replace(b"Philox_", b"Mersen_")           # a state of another kind: not rewritten
    assert dali_compat.reseeded(unknown, 11) is None
