"""kansym.io."""
