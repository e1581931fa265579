"""Our own DALI operators (csrc/), compiled on first use (plugin.py), and their Python faces."""
