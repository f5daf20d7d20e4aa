"""kansym.cli."""
