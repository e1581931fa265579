"""The manual runs as written: every ```python block of README.md and docs/*.md is executed
against small real-format fixtures, and every repository path the pages name exists.

How a block is run:
- Data paths of the examples ("/data/cifar", "/data/imagenet", "/data/flowers/train", ...)
  are replaced by small datasets made here in the real formats (DATA below).
- `for epoch in range(...)` runs one epoch, so a 90-epoch example takes seconds.
- A block whose first line is `# not run: <why>` is shown, not run (it needs a GPU, several
  processes or a model of the reader's own); use it sparingly.
- The blocks of one page run in order in one namespace, as a reader would paste them.
- torchvision's md5 checks are skipped: the fixtures have the real formats, not the real bytes.
"""
import glob
import importlib.util
import os
import re
import warnings

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
ALL_PAGES = PAGES + ["CHANGELOG.md"]   # the changelog holds no code to run, but its paths and links count
NOT_RUN = "# not run:"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
EPOCH_LOOP = re.compile(r"for epoch in range\([^)]*\)")
# the folders and files of this repository that pages may name
REPO_PATH = re.compile(r"(?<![\w/.~-])((?:dali_loaders|docs|examples|tests)/[\w./*-]*[\w*]|"
                       r"(?:README|CHANGELOG)\.md|Makefile|pyproject\.toml|requirements\.txt)")
# a module named inside the package, as `loader/pipeline.py` or `transforms/timm_fused.py`
PACKAGE_PATH = re.compile(r"(?<![\w/.~-])((?:loader|sources|transforms|ops|datasets|bench|testing|integrations)"
                          r"/[\w/*-]+\.(?:py|cc|h))")


def blocks(page):
    return BLOCK.findall(open(os.path.join(ROOT, page)).read())


def runnable(page):
    return [code for code in blocks(page) if not code.startswith(NOT_RUN)]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Example path -> a small dataset in that format."""
    from cifar_data import write_cifar
    from hf_data import imagenet_parquet
    from image_data import write_image_folder

    root = tmp_path_factory.mktemp("docs_data")

    def folder(name, counts):
        path = str(root / name)
        write_image_folder(path, counts)
        return path

    imagenet = str(root / "imagenet")
    write_image_folder(os.path.join(imagenet, "train"), {"n01": 3, "n02": 3})
    write_image_folder(os.path.join(imagenet, "val"), {"n01": 2, "n02": 2})
    cifar = str(root / "cifar")
    write_cifar(cifar, "cifar10", n_train=40, n_test=20)
    hub_imagenet = str(root / "hf" / "imagenet")   # the hub's parquet layout (tests/hf_data.py)
    imagenet_parquet(hub_imagenet)
    return {"/data/imagenet": imagenet, "/data/cifar": cifar, "/data/hf/imagenet": hub_imagenet,
            "/data/flowers/train": folder("flowers", {"a": 2, "b": 3}),
            "/data/train": folder("train", {"a": 3, "b": 3})}


def localized(code, data):
    for example, path in sorted(data.items(), key=lambda item: -len(item[0])):
        code = code.replace(f'"{example}', f'"{path}').replace(f"'{example}", f"'{path}")
    return EPOCH_LOOP.sub("for epoch in range(1)", code)


@pytest.mark.parametrize("page", [p for p in PAGES if runnable(p)])
def test_every_python_block_runs(page, data, tmp_path, monkeypatch):
    import torchvision.datasets as tvd

    monkeypatch.chdir(tmp_path)
    # the fixtures are in the real formats but are not the real files: skip torchvision's md5 checks
    monkeypatch.setattr(tvd.CIFAR10, "_check_integrity", lambda self: True)
    monkeypatch.setattr(tvd.cifar, "check_integrity", lambda *args, **kwargs: True)
    if importlib.util.find_spec("datasets") is not None:   # load_dataset's cache: this test's folder
        import datasets

        monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    scope = {"__name__": "__docs__"}
    for number, code in enumerate(runnable(page), 1):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                exec(compile(localized(code, data), f"{page} block {number}", "exec"), scope)
            except Exception as error:
                raise AssertionError(f"{page}, python block {number} raised {error!r}:\n{code}") from error


def test_the_readme_starts_with_what_to_type():
    text = open(os.path.join(ROOT, "README.md")).read()
    assert "make demo" in text and "make test" in text
    assert text.index("make demo") < text.index("```python")


def test_blocks_not_run_say_why_and_are_few():
    shown = {page: [code.splitlines()[0] for code in blocks(page) if code.startswith(NOT_RUN)] for page in PAGES}
    for page, reasons in shown.items():
        for reason in reasons:
            assert len(reason) > len(NOT_RUN) + 3, f"{page}: '{reason}' gives no reason"
    total = sum(len(blocks(page)) for page in PAGES)
    assert sum(map(len, shown.values())) <= total // 3, shown


def test_every_repository_path_named_exists():
    missing = []
    for page in ALL_PAGES:
        text = open(os.path.join(ROOT, page)).read()
        names = [(name, name) for name in REPO_PATH.findall(text)]
        names += [(name, os.path.join("dali_loaders", name)) for name in PACKAGE_PATH.findall(text)]
        for name, path in set(names):
            if not glob.glob(os.path.join(ROOT, path.rstrip("/."))):
                missing.append(f"{page}: {name}")
    assert not missing, "\n".join(sorted(missing))


def anchors(path):
    """The #fragments a page's headings get (GitHub's rule: lower case, punctuation dropped,
    spaces to hyphens)."""
    headings = re.findall(r"^#+ (.+)$", open(path).read(), re.M)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def test_every_relative_link_leads_to_a_file_and_heading():
    broken = []
    for page in ALL_PAGES:
        for target, fragment in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", open(os.path.join(ROOT, page)).read()):
            if "://" in target:
                continue
            path = os.path.join(ROOT, os.path.dirname(page), target) if target else os.path.join(ROOT, page)
            if not os.path.exists(path):
                broken.append(f"{page} -> {target}")
            elif fragment and path.endswith(".md") and fragment not in anchors(path):
                broken.append(f"{page} -> {target}#{fragment} (no such heading)")
    assert not broken, "\n".join(broken)


def test_user_docs_name_no_issue_numbers_and_no_commits():
    for page in ALL_PAGES:
        text = open(os.path.join(ROOT, page)).read()
        assert not re.search(r"\bissues? \d+", text, re.I), f"{page} names an issue number"
        hashes = [h for h in re.findall(r"\b[0-9a-f]{7,40}\b", text) if re.search(r"[a-f]", h) and re.search(r"\d", h)]
        assert not hashes, f"{page} names commits: {hashes}"


def headline_table():
    """docs/speed.md's "At a glance" rows: {(workload, recipe): {column: figure}}."""
    text = open(os.path.join(ROOT, "docs", "speed.md")).read()
    section = text.split("## At a glance", 1)[1].split("\n## ", 1)[0]
    lines = [line.strip().strip("|").split("|") for line in section.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0]]
    rows = {}
    for cells in lines[2:]:
        cells = [cell.strip().strip("*") for cell in cells]
        rows[(cells[0], cells[1].split(" (")[0])] = dict(zip(header[2:], cells[2:]))
    return rows


def test_one_set_of_headline_figures_in_readme_speed_report_and_demo():
    from dali_loaders import demo

    rows = headline_table()
    assert len(rows) >= 5 and all(figure.endswith("x") for row in rows.values() for figure in row.values())
    readme = open(os.path.join(ROOT, "README.md")).read()
    glance = readme.split("## At a glance", 1)[1].split("\n## ", 1)[0]
    for (workload, recipe), row in rows.items():
        for column in ("train vs tensors", "train vs PIL"):
            assert row[column] in glance, f"README lacks {workload} {recipe} {column} {row[column]}"
    cifar = rows[("CIFAR-10", "default")]
    # the demo measures DALI against the PIL twin and quotes the report's figures for it
    assert "PIL" in demo.BASELINE and "DataLoader" in demo.BASELINE
    for column in ("train vs PIL", "val vs PIL", "train vs tensors", "val vs tensors"):
        assert cifar[column] in demo.DOCS_FIGURES, (column, cifar[column], demo.DOCS_FIGURES)
    # every figure says what it is measured against
    assert "against" in glance and "tensor backend" in glance and "PIL" in glance
