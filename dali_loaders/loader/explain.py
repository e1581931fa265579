"""What a loader says when DALI fails a batch: the file or sample behind it where one can be
named (ImageDecodeError), else DALI's own message, short."""
import re
from typing import Callable

from ..sources.files import FileSource
from ..sources.image_files import name_the_file
from ..sources.webdataset import WebDatasetSource, name_the_sample


def failure_explainer(source, batch_size: int) -> Callable:
    """explain(failure, remaining sample indices) -> the exception the loader raises."""
    if hasattr(source, "name_failure"):
        name = source.name_failure(batch_size)
    elif isinstance(source, WebDatasetSource):
        name = name_the_sample(source, batch_size)
    elif isinstance(source, FileSource):
        name = name_the_file(source, batch_size)
    else:
        name = None

    def explain(failure: Exception, remaining) -> Exception:
        named = name(failure, remaining) if name is not None else None
        if named:
            return named
        message = dali_message(failure)
        if any(words in message for words in UNEVEN):
            return RuntimeError("the images of a batch came out in different sizes, and a batch is one tensor: end "
                                "the recipe with a step that gives every image one size (Resize((h, w)), CenterCrop, "
                                "RandomResizedCrop), as DataLoader's default_collate needs too (it raises 'stack "
                                "expects each tensor to be equal size')")
        return RuntimeError(f"DALI pipeline failed: {message}")

    return explain


# DALI's words when the outputs of a batch differ in shape (they are handed over as one tensor)
UNEVEN = ("IsDenseTensor", "must have uniform shape")


def dali_message(failure: Exception) -> str:
    """The lines of a DALI error that say what went wrong, without its C++ stack, the Python
    traceback of where the operator was defined (DALI puts it before the error itself) or the
    frames of a python_function's error."""
    text = re.sub(r"which was used in the pipeline definition with the following traceback:.*?encountered:",
                  "encountered:", str(failure), flags=re.S)
    text = re.sub(r"\nAt:\n(?:  [^\n]*\n?)*", "\n", text)
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    lines = [line for k, line in enumerate(lines) if k == 0 or line != lines[k - 1]]   # "Critical error" twice
    kept = [line for line in lines if not line.lstrip().startswith(("[/", "Stacktrace", "frame #"))
            and "Current pipeline object is no longer valid" not in line]
    text = "\n".join(kept[:6]).strip()
    return text or f"{type(failure).__name__} with no message (the pipeline stopped; build the loader again)"
