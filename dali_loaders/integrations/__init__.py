"""The loaders inside training frameworks: Lightning DataModules (Accelerate needs nothing: see the README)."""
