"""kansym.nn."""
