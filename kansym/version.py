"""The version of kansym (one place: pyproject.toml reads it, the CLI prints it)."""

__version__ = "0.1.0"
