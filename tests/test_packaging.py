"""The wheel: only dali_loaders in it, DALI per CUDA extra and platform, and it works
installed into a fresh venv (not the editable install)."""
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile

import pytest
from packaging.requirements import Requirement

import dali_loaders

pytestmark = pytest.mark.subprocess   # pip builds the wheel, venvs run it

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINUX_X86 = {"platform_system": "Linux", "platform_machine": "x86_64"}
OTHERS = [{"platform_system": "Darwin", "platform_machine": "arm64"},
          {"platform_system": "Windows", "platform_machine": "AMD64"}]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """Built from a copy of the tree, so no stale build/ of an older layout gets in."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".venv*", ".git", "build", "dist", "*.egg-info",
                                                                "__pycache__", ".pytest_cache", "bench-results"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           str(source), "-w", str(tmp / "dist")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (path,) = (tmp / "dist").glob("dali_loaders-*.whl")
    return path


def metadata(wheel_path):
    with zipfile.ZipFile(wheel_path) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        lines = archive.read(name).decode().splitlines()
    return [Requirement(line.split(":", 1)[1].strip()) for line in lines if line.startswith("Requires-Dist:")]


def installed(requirements, extra, environment):
    """The names pip would install for `dali_loaders[extra]` on that platform."""
    return {r.name for r in requirements
            if r.marker is None or r.marker.evaluate(dict(environment, extra=extra or ""))}


def test_the_wheel_holds_dali_loaders_only(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert {name.split("/")[0] for name in names} == {"dali_loaders", f"dali_loaders-{dali_loaders.__version__}.dist-info"}
    assert "dali_loaders/bench/run.py" in names and "dali_loaders/lightning.py" in names


def test_one_dali_per_cuda_extra_and_none_without_wheels(wheel):
    requirements = metadata(wheel)
    dali = {"nvidia-dali-cuda120", "nvidia-dali-cuda130"}
    assert installed(requirements, None, LINUX_X86) & dali == set(), "the base forces no CUDA version"
    assert installed(requirements, "cuda12", LINUX_X86) & dali == {"nvidia-dali-cuda120"}
    assert installed(requirements, "cuda13", LINUX_X86) & dali == {"nvidia-dali-cuda130"}
    assert installed(requirements, "cuda13", dict(LINUX_X86, platform_machine="aarch64")) & dali == \
        {"nvidia-dali-cuda130"}
    for platform in OTHERS:  # no DALI wheels there: the torchvision twins serve
        for extra in ("cuda12", "cuda13"):
            assert installed(requirements, extra, platform) & dali == set(), (platform, extra)
            assert {"torch", "torchvision"} <= installed(requirements, extra, platform)
    assert "pytorch-lightning" in installed(requirements, "lightning", LINUX_X86)
    assert "pytorch-lightning" not in installed(requirements, None, LINUX_X86)
    assert "datasets" in installed(requirements, "hf", LINUX_X86)
    assert "datasets" not in installed(requirements, None, LINUX_X86)


def test_cuda_extras_bring_dali_2_3_or_newer_and_the_cuda_headers(wheel):
    from packaging.version import Version

    requirements = metadata(wheel)
    headers = {"cuda12": {"nvidia-cuda-runtime-cu12", "nvidia-cuda-nvcc-cu12", "nvidia-cuda-cccl-cu12"},
               "cuda13": {"nvidia-cuda-runtime", "nvidia-cuda-crt", "nvidia-cuda-cccl"}}
    for extra, dali in (("cuda12", "nvidia-dali-cuda120"), ("cuda13", "nvidia-dali-cuda130")):
        assert headers[extra] <= installed(requirements, extra, LINUX_X86)
        (requirement,) = [r for r in requirements if r.name == dali]
        assert not requirement.specifier.contains(Version("2.2.0")) and requirement.specifier.contains(Version("2.3.0"))
    assert not (headers["cuda12"] | headers["cuda13"]) & installed(requirements, None, LINUX_X86)


def test_the_wheel_states_its_license(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        meta = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        license_text = archive.read(next(n for n in names if n.endswith("/LICENSE"))).decode()
    assert "License-Expression: MIT" in meta.splitlines()
    assert "Permission is hereby granted" in license_text and "BSD-3-Clause" in license_text


def test_setup_py_still_works():
    done = subprocess.run([sys.executable, "setup.py", "--name", "--version"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.stdout.split()[-2:] == ["dali_loaders", dali_loaders.__version__], done.stderr[-2000:]


@pytest.mark.slow
def test_the_wheel_installed_in_a_fresh_venv_runs_batches(wheel, tmp_path):
    from cifar_data import index_images, write_cifar

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    # torch, DALI, ... from this environment, by path: its .pth files (the editable
    # dali_loaders among them) are not run, so only the wheel can provide dali_loaders.
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(site, "borrowed.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                           "-q", str(wheel)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    root = write_cifar(str(tmp_path / "cifar"), n_train=96, n_test=32, images=index_images)
    script = f"""
import dali_loaders
from dali_loaders import get_cifar_iter_dali
loader = get_cifar_iter_dali("train", {root!r}, 32, num_threads=1, seed=0, fallback=False)
print(dali_loaders.__file__)
print(type(loader).__name__, sum(len(labels) for _, labels in loader))
"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # The plugins compile cold from the wheel's own sources (their path is in the cache key):
    # into a cache of this test's own, not the shared one, where each run would leave a copy.
    env["DALI_LOADERS_CACHE"] = str(tmp_path / "plugin-cache")
    done = subprocess.run([str(python), "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    where, batches = done.stdout.splitlines()[-2:]
    assert where.startswith(str(venv)), where
    assert batches == "DaliLoader 96"
    done = subprocess.run([str(python), "-m", "dali_loaders", "bench", "--help"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "--tiny" in done.stdout, done.stderr[-2000:]


# the extras' packages as imported (boto3 brings botocore); scipy, the test extra's too, stays
EXTRA_IMPORTS = {"pytorch-lightning": ["pytorch_lightning"], "accelerate": ["accelerate"], "timm": ["timm"],
                 "matplotlib": ["matplotlib"], "boto3": ["boto3", "botocore"], "datasets": ["datasets"],
                 "obstore": ["obstore"]}
BLOCKER = """
import sys


class Missing:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)


sys.meta_path.insert(0, Missing())
"""


def test_the_tests_collect_and_skip_where_no_optional_extra_is_installed(tmp_path):
    """A machine with none of the optional extras (a GPU machine with torch and DALI alone):
    every test file still imports, so `pytest -m gpu tests` runs there; the s3 tests skip."""
    tomllib = pytest.importorskip("tomllib")   # Python 3.11+

    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    test_needs = {Requirement(r).name for r in extras["test"]}
    optional = {Requirement(r).name for name, reqs in extras.items() if not name.startswith("cuda") and name != "test"
                for r in reqs} - test_needs
    assert optional == set(EXTRA_IMPORTS)
    (tmp_path / "sitecustomize.py").write_text(BLOCKER.format(blocked=sorted(sum(EXTRA_IMPORTS.values(), []))))
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    collected = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                                "tests"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert collected.returncode == 0 and "error" not in collected.stdout.lower(), collected.stdout[-3000:]
    skipped = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "--basetemp",
                              str(tmp_path / "run"), "tests/test_s3.py::test_a_missing_bucket_or_prefix_is_named",
                              "tests/test_s3_reads.py::test_a_server_that_checks_signatures_serves_every_key"],
                             cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert skipped.returncode == 0 and "pip install dali_loaders[s3]" in skipped.stdout, skipped.stdout[-3000:]
