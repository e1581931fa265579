"""The C++ operators' build: the line a first-use compile prints, `python -m dali_loaders
build-plugins` (all three, in parallel, into the cache), a compile with pip's CUDA headers
alone (no toolkit), and a clear exit without a compiler. Each in a fresh cache folder and
a fresh process (a library once loaded stays loaded)."""
import os
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("nvidia.dali")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBRARIES = ("libdali_loaders_resize.so", "libdali_loaders_augment.so", "libdali_loaders_normalize.so",
             "libdali_loaders_chain.so")

# In a fresh process: the resize operator built on first use, then run on a random image
# beside PIL's own Image.resize.
FIRST_USE = """
import numpy as np
from PIL import Image
from nvidia.dali import fn, pipeline_def
from dali_loaders.ops import plugin, resample

assert plugin.available(plugin.RESIZE), plugin._states[plugin.RESIZE.file]
image = np.random.default_rng(0).integers(0, 256, (37, 51, 3), dtype=np.uint8)

@pipeline_def(batch_size=1, num_threads=1, device_id=None)
def pipe():
    data = fn.external_source(lambda: [image], batch=True, layout="HWC")
    return fn.dali_loaders_resize(data, size=[20.0, 29.0], filter="bicubic", pillow_major=resample.pillow_major())

p = pipe()
p.build()
(out,) = p.run()
expected = np.asarray(Image.fromarray(image).resize((29, 20), Image.BICUBIC))
assert np.array_equal(np.asarray(out[0]), expected)
print("RESIZED", plugin.loaded_path(plugin.RESIZE))
"""

LOAD_ALL = """
from dali_loaders.ops import plugin
for library in plugin.LIBRARIES:
    assert plugin.available(library), (library.file, plugin._states[library.file])
    print("LOADED", plugin.loaded_path(library))
"""


def without_toolkit(cache: str, tmp_path) -> dict:
    """The environment of a machine without a CUDA toolkit: DALI_LOADERS_CUDA_HOME names a
    folder with none (so CUDA_HOME, nvcc's and /usr/local/cuda are not looked at), no
    include path from the environment, a fresh cache."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("CUDA_HOME", "CUDA_PATH", "CPATH", "CPLUS_INCLUDE_PATH", "C_INCLUDE_PATH",
                        "DALI_LOADERS_NO_PLUGIN", "DALI_LOADERS_NO_AUGMENT_PLUGIN", "DALI_LOADERS_NO_NORMALIZE_PLUGIN",
                        "DALI_LOADERS_NO_CHAIN_PLUGIN", "DALI_LOADERS_CUDA_ARCH")}
    env.update(DALI_LOADERS_CACHE=cache, DALI_LOADERS_CUDA_HOME=str(tmp_path / "no-cuda-toolkit"),
               PYTHONPATH=REPO + os.pathsep + env.get("PYTHONPATH", ""))
    return env


def run(arguments, env, cwd):
    return subprocess.run([sys.executable, *arguments], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=1800)


def include_folders(commands_file: str):
    words = open(commands_file).read().split()
    return [words[i + 1] for i, word in enumerate(words) if word == "-isystem"]


@pytest.mark.skipif(not shutil.which(os.environ.get("CXX") or "g++"), reason="needs a C++ compiler")
def test_first_use_and_build_plugins_compile_with_pip_cuda_headers_alone(tmp_path):
    import nvidia
    import nvidia.dali

    pip_roots = list(nvidia.__path__)   # where pip's nvidia-* packages are
    cache = str(tmp_path / "cache")
    env = without_toolkit(cache, tmp_path)

    first = run(["-c", FIRST_USE], env, tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    announced = [line for line in first.stderr.splitlines() if line.startswith("dali_loaders: compiling")]
    assert len(announced) == 1, first.stderr[-3000:]
    line = announced[0]
    assert "libdali_loaders_resize.so" in line and f"DALI {nvidia.dali.__version__}" in line
    assert os.path.join(cache, "plugins") in line and "minute" in line

    built = run(["-m", "dali_loaders", "build-plugins"], env, tmp_path)
    assert built.returncode == 0, built.stdout + built.stderr[-3000:]
    report = {line.split(":")[0]: line for line in built.stdout.splitlines() if line.startswith("libdali_loaders")}
    memory = report.pop("libdali_loaders_batch_memory.so", "")   # built against torch: no CUDA headers
    assert "compiled in" in memory and memory.rsplit(": ", 1)[1].startswith(os.path.join(cache, "plugins")), memory
    assert set(report) == set(LIBRARIES), built.stdout
    assert "already built" in report["libdali_loaders_resize.so"]   # the first use's, reused
    for name in LIBRARIES[1:]:
        assert "compiled in" in report[name]
    paths = {name: report[name].rsplit(": ", 1)[1] for name in LIBRARIES}
    for name, path in paths.items():
        assert path.startswith(os.path.join(cache, "plugins")) and path.endswith(name) and os.path.isfile(path)
        # compiled against pip's CUDA headers alone: no toolkit folder among the includes
        folders = include_folders(os.path.join(os.path.dirname(path), "build-commands.txt"))
        assert folders and all(any(f.startswith(root + os.sep) for root in pip_roots) for f in folders), folders
        assert not any("/usr/local/cuda" in f for f in folders)

    loaded = run(["-c", LOAD_ALL], env, tmp_path)   # a new process: loads, compiles nothing
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    assert "dali_loaders: compiling" not in loaded.stderr
    assert sorted(line.split()[1] for line in loaded.stdout.splitlines() if line.startswith("LOADED")) == \
        sorted(paths.values())


# In a fresh process: the chain library built with nvcc for a named GPU architecture (no GPU
# needed to compile), its GPU operator registered beside the CPU one
GPU_BUILD = """
from nvidia.dali import backend
from dali_loaders.ops import plugin

assert plugin.chain_available(), plugin._states[plugin.CHAIN.file]
assert plugin.gpu_operator_loaded("DaliLoadersChainTail") and "DaliLoadersChainTail" in backend.RegisteredCPUOps()
print("COMMANDS", open(plugin.loaded_path(plugin.CHAIN)[:-len(plugin.CHAIN.file)] + plugin.COMMANDS_FILE).read())
"""


@pytest.mark.skipif(not shutil.which("nvcc") or not shutil.which(os.environ.get("CXX") or "g++"),
                    reason="needs nvcc and a C++ compiler")
def test_the_chain_operator_compiles_for_the_gpu_with_nvcc(tmp_path):
    """The GPU operator (chain_tail_op.cu) compiles, links with CUDA's static runtime and
    registers, as it will on a machine with a GPU; here for sm_90 by name."""
    import nvidia.dali.sysconfig as dali_config  # noqa: F401  (DALI present)

    from dali_loaders.ops import plugin

    if not any(os.path.exists(os.path.join(folder, "libcudart_static.a"))
               for folder in plugin._runtime_folders(shutil.which("nvcc"))):
        pytest.skip("nvcc's toolkit has no static CUDA runtime")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DALI_LOADERS_")}
    env.update(DALI_LOADERS_CACHE=str(tmp_path / "cache"), DALI_LOADERS_CUDA_ARCH="sm_90",
               PYTHONPATH=REPO + os.pathsep + env.get("PYTHONPATH", ""))
    done = run(["-c", GPU_BUILD], env, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "--fmad=false" in done.stdout and "-arch=sm_90" in done.stdout, done.stdout[-2000:]


# In a fresh process: the chain library where nvcc cannot build its GPU operator
CPU_ALONE = """
import warnings
from dali_loaders.ops import plugin

with warnings.catch_warnings(record=True) as warned:
    warnings.simplefilter("always")
    assert plugin.chain_available(), plugin._states[plugin.CHAIN.file]
assert not plugin.gpu_operator_loaded("DaliLoadersChainTail")
print("WARNED", [str(w.message) for w in warned])
"""


@pytest.mark.skipif(not shutil.which("nvcc") or not shutil.which(os.environ.get("CXX") or "g++"),
                    reason="needs nvcc and a C++ compiler")
def test_a_gpu_operator_nvcc_cannot_build_leaves_the_cpu_operator(tmp_path):
    """nvcc refusing the GPU operator (here an architecture that does not exist, as an nvcc too
    old for -arch=native would) costs the GPU operator alone, said once: the library is built
    for the CPU."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DALI_LOADERS_")}
    env.update(DALI_LOADERS_CACHE=str(tmp_path / "cache"), DALI_LOADERS_CUDA_ARCH="sm_1",
               PYTHONPATH=REPO + os.pathsep + env.get("PYTHONPATH", ""))
    done = run(["-c", CPU_ALONE], env, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    warned = [line for line in done.stdout.splitlines() if line.startswith("WARNED")]
    assert warned and "GPU operator did not compile" in warned[0] and "CPU operator alone" in warned[0], done.stdout


def test_build_plugins_without_a_compiler_exits_1_saying_so(tmp_path):
    env = without_toolkit(str(tmp_path / "cache"), tmp_path)
    env["CXX"] = str(tmp_path / "no-such-compiler")
    done = run(["-m", "dali_loaders", "build-plugins"], env, tmp_path)
    assert done.returncode == 1
    assert "no C++ compiler" in done.stderr and "CXX" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not os.path.exists(os.path.join(tmp_path, "cache", "plugins"))


def test_pip_headers_are_those_of_dalis_cuda_alone(monkeypatch):
    """A venv may hold two CUDAs' header packages (DALI's CUDA 12 ones, torch's CUDA 13
    runtime): only those of DALI's CUDA major version are used."""
    import nvidia
    import nvidia.dali

    from dali_loaders.ops import plugin

    roots = list(nvidia.__path__)
    for cuda, expected in ((12090, {"cuda_runtime", "cuda_nvcc", "cuda_crt", "cuda_cccl"}), (13000, {"cu13"})):
        monkeypatch.setattr(nvidia.dali, "__cuda_version__", cuda, raising=False)
        folders = plugin._pip_cuda_includes()
        assert all(os.path.basename(f) == "include" and os.path.dirname(os.path.dirname(f)) in roots for f in folders)
        assert {os.path.basename(os.path.dirname(f)) for f in folders} <= expected
        present = {name for root in roots for name in expected if os.path.isdir(os.path.join(root, name, "include"))}
        assert {os.path.basename(os.path.dirname(f)) for f in folders} == present


def test_dali_loaders_cuda_home_is_the_only_toolkit_looked_at(monkeypatch, tmp_path):
    from dali_loaders.ops import plugin

    monkeypatch.setenv("CUDA_HOME", "/usr/local/cuda")
    monkeypatch.setenv(plugin.CUDA_HOME_ENV, str(tmp_path / "toolkit"))
    assert plugin._toolkit_includes() == [str(tmp_path / "toolkit" / "include")]
    monkeypatch.delenv(plugin.CUDA_HOME_ENV)
    assert plugin._toolkit_includes()[0] == "/usr/local/cuda/include"
