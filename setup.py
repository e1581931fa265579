from setuptools import find_packages, setup

setup(
    name="dali_loaders",
    version="0.1.0",
    description="Fast, correct DataLoader replacements for CIFAR, ImageNet and image folders on NVIDIA DALI",
    long_description=open("README.md").read(),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["dali_loaders", "dali_loaders.*"]),  # not benchmarks/: repo-only
    # the resize plugin's C++ source, compiled on first use against the DALI installed then
    package_data={"dali_loaders": ["csrc/*.cc", "csrc/*.h"]},
    python_requires=">=3.9",
    install_requires=[
        "numpy>=1.21",
        "torch>=2.0",
        "torchvision>=0.15",
        "nvidia-dali-cuda120>=1.30",
        "pillow>=9",
        "tqdm>=4.60",
    ],
    extras_require={"bench": ["matplotlib>=3.5"], "test": ["pytest>=7", "scipy>=1.9"]},
    entry_points={"console_scripts": ["dali-loaders=dali_loaders.__main__:main"]},
)
