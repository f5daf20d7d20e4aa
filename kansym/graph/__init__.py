"""kansym.graph."""
