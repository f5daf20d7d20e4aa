"""kansym.train."""
