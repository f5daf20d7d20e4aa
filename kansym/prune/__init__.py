"""kansym.prune."""
