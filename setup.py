"""Kept for tools that still run setup.py; the metadata lives in pyproject.toml."""
from setuptools import setup

setup()
