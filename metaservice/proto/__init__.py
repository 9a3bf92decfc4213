"""The service protos and their generated bindings (regenerate.py builds them)."""
