"""The DaliLoadersResize operator (csrc/): compiled on first use against the DALI installed
now, cached per DALI build, loaded once per process.

Why on first use and not at `pip install`: a DALI plugin is bound to the exact DALI build it
was compiled against (C++ ABI, no stable plugin interface). At install time DALI may be
missing (pip builds in an isolated environment), a wheel built on one machine is installed
next to whatever DALI the target venv resolves, and DALI can be swapped later (cuda12 <->
cuda13 builds of the same version). Compiling the shipped source when the loaders first
need it, into a cache keyed by the DALI build, the sources and the toolchain, is right in
all of these; a second process waits on a lock file and reuses the result.

Whatever goes wrong (no compiler, no CUDA headers, which DALI's headers include, a build or
load error) the loaders use DALI's own fn.resize, after one warning. DALI_LOADERS_NO_PLUGIN=1
turns the plugin off; CXX picks the compiler; DALI_LOADERS_CACHE the cache directory.
"""
import glob
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
import warnings
from typing import List, Optional

DISABLE_ENV = "DALI_LOADERS_NO_PLUGIN"
CACHE_ENV = "DALI_LOADERS_CACHE"
LIBRARY = "libdali_loaders_resize.so"
SOURCE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csrc")
SOURCES = ("resize_op.cc", "pil_resample.cc", "pil_resample.h", "pil_resample_api.h")
BUILD_TIMEOUT = 900  # seconds: the DALI headers are heavy; a loaded 2-core machine needs ~30 s

_lock = threading.Lock()
_state: dict = {}    # "ok": bool once tried in this process; "why": the failure


class Unavailable(RuntimeError):
    """Why the plugin cannot be used here."""


def disabled() -> bool:
    return os.environ.get(DISABLE_ENV, "").strip() not in ("", "0", "false", "False")


def available() -> bool:
    """True when DaliLoadersResize is loaded into DALI, building it first if needed. False
    when turned off, or when it cannot be built or loaded: then warns, once per process."""
    if disabled():
        return False
    with _lock:
        if "ok" not in _state:
            try:
                load(build())
                _state["ok"] = True
            except Unavailable as e:
                _state.update(ok=False, why=str(e))
                warnings.warn(f"dali_loaders: the PIL-exact resize plugin is not available ({e}); "
                              f"resizing with DALI's fn.resize instead", RuntimeWarning, stacklevel=3)
    return _state["ok"]


def forget() -> None:
    """Tests: the next available() decides afresh (a library once loaded stays loaded)."""
    with _lock:
        _state.clear()


def load(path: str) -> None:
    from nvidia.dali import fn, plugin_manager

    if hasattr(fn, "dali_loaders_resize"):
        return
    try:
        plugin_manager.load_library(path)
    except Exception as e:   # a library built for another DALI, a missing symbol
        raise Unavailable(f"loading {path} failed: {e}") from e
    if not hasattr(fn, "dali_loaders_resize"):
        raise Unavailable(f"{path} did not register DaliLoadersResize")


def build() -> str:
    """The compiled library for the DALI installed now: from the cache, or compiled into it."""
    compiler = _compiler()
    folder = os.path.join(_cache_root(), _key(_commands(compiler, "FOLDER")))
    os.makedirs(folder, exist_ok=True)
    library, failed = os.path.join(folder, LIBRARY), os.path.join(folder, "failed.log")
    with open(os.path.join(folder, ".lock"), "w") as lock:
        import fcntl

        fcntl.flock(lock, fcntl.LOCK_EX)   # one process compiles, the others wait and reuse it
        if os.path.exists(library):
            return library
        if os.path.exists(failed):   # same sources, DALI and toolchain: it would fail again
            raise Unavailable(f"compiling it failed before, see {failed}")
        work = tempfile.mkdtemp(prefix=".build-", dir=folder)
        try:
            for command in _commands(compiler, work):
                _compile(command, failed)
            os.replace(os.path.join(work, LIBRARY), library)   # atomic: never half a library
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return library


def _compile(command: List[str], failed: str) -> None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Unavailable(f"running {command[0]} failed: {e}") from e
    if done.returncode != 0:
        with open(failed, "w") as log:
            log.write(" ".join(command) + "\n\n" + done.stderr)
        raise Unavailable(f"compiling it failed, see {failed}")


def _compiler() -> str:
    name = os.environ.get("CXX") or next((c for c in ("g++", "c++", "clang++") if shutil.which(c)), "g++")
    path = shutil.which(name)
    if not path:
        raise Unavailable(f"no C++ compiler ({name!r} not found; set CXX)")
    return path


def _commands(compiler: str, work: str) -> List[List[str]]:
    """Two steps: the resampler at -O3 alone (seconds), then the operator, whose DALI headers
    take most of the time, at -O1 (it only loops over samples), linked with it."""
    import nvidia.dali.sysconfig as dali_config

    arch = ["-march=x86-64-v2"] if platform.machine() in ("x86_64", "AMD64") else []   # AVX2 is picked at run time
    cuda = [flag for folder in _cuda_includes() for flag in ("-isystem", folder)]
    common = [compiler, "-std=c++17", "-fPIC", "-w", *arch, *dali_config.get_compile_flags(), "-I", SOURCE_DIR]
    kernel, library = os.path.join(work, "pil_resample.o"), os.path.join(work, LIBRARY)
    return [[*common, "-O3", "-c", os.path.join(SOURCE_DIR, "pil_resample.cc"), "-o", kernel],
            [*common, "-O1", "-shared", *cuda, os.path.join(SOURCE_DIR, SOURCES[0]),
             kernel, "-o", library, *dali_config.get_link_flags(), f"-Wl,-rpath,{dali_config.get_lib_dir()}"]]


def _key(commands: List[List[str]]) -> str:
    """Names the build: the sources, the command (compiler, DALI and CUDA paths) and the
    DALI library itself (version, and size and time, which differ between cuda12 and cuda13
    builds of one version)."""
    import nvidia.dali
    import nvidia.dali.sysconfig as dali_config

    digest = hashlib.sha256()
    for name in SOURCES:
        with open(os.path.join(SOURCE_DIR, name), "rb") as f:
            digest.update(f.read())
    libdali = os.path.join(dali_config.get_lib_dir(), "libdali.so")
    stat = os.stat(libdali)
    digest.update(repr((commands, nvidia.dali.__version__, libdali, stat.st_size, stat.st_mtime_ns,
                        platform.machine())).encode())
    return f"dali-{nvidia.dali.__version__}-{digest.hexdigest()[:16]}"


def _cache_root() -> str:
    root = os.environ.get(CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "dali_loaders")
    return os.path.join(root, "plugins")


_CUDA_HEADERS = ("cuda_runtime.h", os.path.join("crt", "host_config.h"), os.path.join("nv", "target"))


def _cuda_includes() -> List[str]:
    """Include folders with the CUDA headers DALI's headers need (the CUDA runtime's, its
    crt/ and nv/target): a CUDA toolkit, else pip's nvidia-* packages together."""
    toolkits = [os.path.join(os.environ[v], "include") for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    nvcc = shutil.which("nvcc")
    if nvcc:
        toolkits.append(os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))), "include"))
    toolkits += ["/usr/local/cuda/include"] + sorted(glob.glob("/usr/local/cuda-*/include"), reverse=True)
    for folder in toolkits:
        if all(os.path.exists(os.path.join(folder, h)) for h in _CUDA_HEADERS):
            return [folder]
    pip = _pip_cuda_includes()
    if all(any(os.path.exists(os.path.join(f, h)) for f in pip) for h in _CUDA_HEADERS):
        return pip
    raise Unavailable("no CUDA headers, which DALI's headers include: install a CUDA toolkit or set CUDA_HOME")


def _pip_cuda_includes() -> List[str]:
    import nvidia.dali

    nvidia_dir: Optional[str] = os.path.dirname(os.path.dirname(os.path.abspath(nvidia.dali.__file__)))
    return sorted(f for f in glob.glob(os.path.join(nvidia_dir, "*", "include")) if not f.endswith("dali/include"))
