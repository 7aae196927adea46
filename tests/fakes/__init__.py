"""Test doubles that are real servers: a scripted model server on loopback (`tests.fakes.llm`)."""
