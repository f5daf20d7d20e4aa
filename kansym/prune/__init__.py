"""kansym.prune: edge/node scores on data and node pruning (KAN paper §2.5.1)."""

from kansym.prune.prune import PruneReport, PruneResult, mask_nodes, prune, subset
from kansym.prune.scores import edge_scores, input_scores, node_scores

__all__ = ["PruneReport", "PruneResult", "edge_scores", "input_scores", "mask_nodes", "node_scores", "prune", "subset"]
