"""What a dataset module reads its format into: images in memory (ArraySource), image files
(FileSource, ImageFiles), WebDataset shards, Hugging Face datasets (HuggingFaceSource); and the
readers of the formats themselves."""
from .arrays import ArraySource
from .files import FileSource
from .hf import HuggingFaceSource
from .image_files import ImageDecodeError, ImageFiles, verify_images

__all__ = ["ArraySource", "FileSource", "HuggingFaceSource", "ImageDecodeError", "ImageFiles", "verify_images"]
