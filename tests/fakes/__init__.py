"""Pytest fixtures around the fakes of `fakes/` (the scripted model server)."""
