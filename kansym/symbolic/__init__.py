"""kansym.symbolic."""
