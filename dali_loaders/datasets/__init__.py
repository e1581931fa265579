"""One module per dataset: its file format, stated once, and its pair of factories."""
