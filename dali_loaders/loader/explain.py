"""What a loader says when DALI fails a batch: the file or sample behind it where one can be
named (ImageDecodeError), else DALI's own message, short."""
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
        return named or RuntimeError(f"DALI pipeline failed: {dali_message(failure)}")

    return explain


def dali_message(failure: Exception) -> str:
    """The lines of a DALI error that say what went wrong, without its C++ stack."""
    lines = [line.rstrip() for line in str(failure).splitlines() if line.strip()]
    kept = [line for line in lines if not line.lstrip().startswith(("[/", "Stacktrace", "frame #"))
            and "Current pipeline object is no longer valid" not in line]
    text = "\n".join(kept[:6]).strip()
    return text or f"{type(failure).__name__} with no message (the pipeline stopped; build the loader again)"
