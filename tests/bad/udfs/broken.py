"""A module that fails on import, for the E0110 test."""
raise RuntimeError("this module is broken on purpose")
