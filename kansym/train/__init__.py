"""kansym.train: sparsity regularisation (KAN paper eqs. 2.17-2.20) and the training loop."""

from kansym.train.fit import FitResult, History, TrainConfig, finetune, fit
from kansym.train.regularization import edge_l1, edge_weight_l1, regularization, weight_regularization

__all__ = [
    "FitResult",
    "History",
    "TrainConfig",
    "edge_l1",
    "edge_weight_l1",
    "finetune",
    "fit",
    "regularization",
    "weight_regularization",
]
