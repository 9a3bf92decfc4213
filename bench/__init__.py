"""Benchmarks: ``python -m bench.run_all`` (``./dev bench``) runs them all; each is also a module of its own."""
