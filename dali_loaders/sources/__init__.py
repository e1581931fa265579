"""What a dataset module reads its format into: images in memory (ArraySource), image files
(FileSource, ImageFiles), WebDataset shards; and the readers of the formats themselves."""
from .arrays import ArraySource
from .files import FileSource
from .image_files import ImageDecodeError, ImageFiles, verify_images

__all__ = ["ArraySource", "FileSource", "ImageDecodeError", "ImageFiles", "verify_images"]
