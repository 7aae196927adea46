"""Pytest plugins with the fixtures around the real servers of `fakes/` (registered in tests/conftest.py)."""
