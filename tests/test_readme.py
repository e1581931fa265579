"""The README is a short guide: its commands are there, its example runs as written, and every
relative link in it and in docs/ leads to a file that exists."""
import glob
import os
import re

from image_data import write_image_folder

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")


def test_the_readme_starts_with_what_to_type():
    text = open(README).read()
    assert "make demo" in text and "make test" in text
    assert text.index("make demo") < text.index("```python")


def test_the_readme_example_runs(tmp_path):
    code = re.search(r"```python\n(.*?)```", open(README).read(), re.S).group(1)
    write_image_folder(str(tmp_path), {"a": 2, "b": 3})
    code = code.replace('"/data/flowers/train"', repr(str(tmp_path))).replace("range(10)", "range(2)")
    code = code.replace("        ...", "        seen.append((images.shape, labels))")
    scope = {"seen": []}
    exec(compile(code, "README.md", "exec"), scope)
    assert [tuple(shape) for shape, _ in scope["seen"]] == [(5, 3, 224, 224)] * 2
    assert all(sorted(labels.tolist()) == [0, 0, 1, 1, 1] for _, labels in scope["seen"])


def test_every_relative_link_leads_to_a_file():
    broken = []
    for page in [README] + glob.glob(os.path.join(ROOT, "docs", "*.md")):
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", open(page).read()):
            if "://" not in target and not os.path.exists(os.path.join(os.path.dirname(page), target)):
                broken.append(f"{os.path.relpath(page, ROOT)} -> {target}")
    assert not broken, "\n".join(broken)
