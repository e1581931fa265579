"""dali_compat.lean_api_checks: DALI's API-type checks kept as they are (mixing the run
APIs still refused, the scope restored), without DALI's per-call class."""
import gc
import weakref

import numpy as np
import pytest

pytest.importorskip("nvidia.dali")


def _pipeline():
    from nvidia.dali import fn, pipeline_def

    from dali_loaders.dali_compat import lean_api_checks

    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        return fn.external_source(source=lambda: [np.zeros(3, np.uint8)] * 2)

    p = pipe()
    lean_api_checks(p)
    p.build()
    return p


def test_mixing_run_apis_is_still_refused():
    p = _pipeline()
    p.schedule_run()
    p.share_outputs()
    p.release_outputs()
    with pytest.raises(RuntimeError, match="Mixing pipeline API type"):
        p.run()
    p._shutdown()


def test_the_scope_skips_checks_inside_and_restores_them():
    from nvidia.dali import types

    p = _pipeline()
    assert "_check_api_type_scope" in vars(p)   # the lean one is in place
    assert p._skip_api_check is False
    with p._check_api_type_scope(types.PipelineAPIType.ITERATOR):
        assert p._skip_api_check is True
        with p._check_api_type_scope(types.PipelineAPIType.SCHEDULED):   # checks skipped inside
            assert p._skip_api_check is True
        assert p._skip_api_check is True
    assert p._skip_api_check is False
    with pytest.raises(RuntimeError, match="Mixing pipeline API type"):
        with p._check_api_type_scope(types.PipelineAPIType.BASIC):
            pass
    p._shutdown()


def test_the_pipeline_is_not_kept_alive_by_it():
    p = _pipeline()
    p._shutdown()
    gone = weakref.ref(p)
    gc.disable()   # freed by reference counting alone: no cycle through the check
    try:
        del p
        assert gone() is None
    finally:
        gc.enable()
