"""Real-format mini datasets, written for tests, the demo and the bench."""
