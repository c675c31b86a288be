"""The version of scopeflow (a leaf: any layer may import it; pyproject.toml reads it from here)."""
__version__ = "0.1.0"
