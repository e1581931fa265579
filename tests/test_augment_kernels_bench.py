"""benchmarks/augment_kernels.py builds the augmentation kernels outside DALI to time them and to prove a
faster build bit-identical: the build it times must compute what the plugin computes, and its
digest must see a changed output."""
import json
import subprocess
import sys

import numpy as np
import pytest
from subprocess_env import subprocess_env

from benchmarks import augment_kernels as bench
from dali_loaders.ops import augment as op
from dali_loaders.ops import plugin

STEPS = [[("Rotate", (17.0, 2)), ("Color", (0.4, 1.0)), ("Posterize", (3,))],
         [("ShearX", (0.3, 0, 1.0)), ("Contrast", (0.6, 0.0)), ("Sharpness", (-0.5, 1.0)), ("Equalize", ())],
         [("TranslateY", (-9.5, 2)), ("Brightness", (1.3, 0.0)), ("FlipH", ()), ("Grayscale", ())]]


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    return bench.Kernels(bench.build(str(tmp_path_factory.mktemp("augk"))))


def run_plugin(image, steps, kernels):
    from nvidia.dali import fn, pipeline_def

    codes = np.array([op.CODES[name] for name, _ in steps], np.int32)
    params = np.zeros((len(steps), op.NUM_PARAMS), np.float32)
    for k, (_, p) in enumerate(steps):
        params[k, :len(p)] = p

    @pipeline_def(batch_size=1, num_threads=1, device_id=None, seed=1)
    def pipe():
        data = fn.external_source(source=lambda: [image], batch=True, layout="HWC")
        ops = fn.external_source(source=lambda: [codes], batch=True)
        rows = fn.external_source(source=lambda: [params], batch=True)
        return op.call(data, ops, rows, kernels, fill=[128.0, 64.0, 5.0])

    pipeline = pipe()
    pipeline.build()
    return np.array(pipeline.run()[0][0])


@pytest.mark.parametrize("flavour", ["pil", "tensor", "tensor_v1"])
def test_the_bench_build_computes_what_the_plugin_computes(kernels, flavour):
    if not plugin.augment_available():
        pytest.skip("the augmentation plugin cannot be built here")
    image = bench.photo_like(61, 47, 3, seed=7)
    for steps in STEPS:
        out, _ = kernels.run(image, steps, flavour, (128.0, 64.0, 5.0))
        assert not np.array_equal(out, image)
        np.testing.assert_array_equal(out, run_plugin(image, steps, flavour), err_msg=f"{steps} in {flavour}")


def test_the_digest_names_the_cases_whose_output_moved(kernels):
    found = bench.digest(kernels)
    assert len(set(found.values())) > len(found) // 4   # the outputs differ (the fill only moves warps')
    key = next(k for k in found if k.startswith("pil Brightness"))
    assert bench.changed(found, dict(found)) == []
    assert bench.changed(found, dict(found, **{key: "0" * 20})) == [key]
    assert bench.changed({k: v for k, v in found.items() if k != key}, found) == [key]


def test_a_bad_step_is_refused_by_name(kernels):
    with pytest.raises(ValueError, match="bicubic warps are PIL's only"):
        kernels.run(bench.photo_like(8, 8, 3), [("Rotate", (10.0, 3))], "tensor")


DIGEST_OF = ("import json, sys; from benchmarks import augment_kernels as bench; "
             "lib = bench.load(sys.argv[1]); "
             "print(json.dumps([lib.augk_bench_avx2(), bench.digest(bench.Kernels(lib))]))")


@pytest.mark.skipif(not plugin.cpu_has("avx2"), reason="no AVX2 here: the plain C++ paths are the only ones")
def test_the_plain_cpp_paths_compute_what_the_avx2_paths_compute(kernels):
    """A CPU without AVX2 (an ARM host of a GPU, an older x86) runs the kernels' plain C++ paths
    (hue, blur, erasing's noise): DALI_LOADERS_PORTABLE=1 makes this one run them, and every
    output of the digest's grid is the AVX2 paths' bit for bit."""
    library = kernels.lib._name

    def digest(**env):
        done = subprocess.run([sys.executable, "-c", DIGEST_OF, library], capture_output=True, text=True,
                              env=subprocess_env(**env), timeout=600)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    (avx2, simd), (avx2_after_all, portable) = digest(), digest(DALI_LOADERS_PORTABLE="1")
    assert (avx2, avx2_after_all) == (1, 0)   # the two runs took the two paths
    assert len(simd) > 1000 and bench.changed(portable, simd) == []
