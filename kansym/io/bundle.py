"""A KAN checkpoint with everything the later stages need (no data file required).

A bundle holds the model (config + tensors), the CSV <-> model unit transform, the
column names and a calibration sample of CSV rows, so ``kansym prune ckpt.pt`` and
``kansym symbolify ckpt.pt`` work from the checkpoint alone (docs/algorithms.md, "Architecture").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from kansym.config import SEED
from kansym.errors import CheckpointError
from kansym.io.checkpoint import CHECKPOINT_FORMAT, CHECKPOINT_VERSION, load_checkpoint, save_checkpoint
from kansym.nn.kan import KAN
from kansym.io.transform import DataTransform

__all__ = ["ModelBundle", "CALIBRATION_ROWS"]

CALIBRATION_ROWS = 2000


@dataclass(frozen=True)
class ModelBundle:
    """A trained (or pruned) KAN with its data context.

    Attributes
    ----------
    model : KAN
    transform : DataTransform
    input_names, output_names : tuple of str
    x_cal : ndarray (n, d_in)
        Calibration rows of the inputs, CSV units.
    y_cal : ndarray (n, d_out)
        The matching targets, CSV units.
    meta : dict
        Plain extra information (training config, history, prune report...).
    """

    model: KAN
    transform: DataTransform
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    x_cal: np.ndarray
    y_cal: np.ndarray
    meta: dict = field(default_factory=dict)

    @classmethod
    def create(
        cls,
        model: KAN,
        transform: DataTransform,
        input_names: Sequence[str],
        output_names: Sequence[str],
        x: np.ndarray,
        y: np.ndarray,
        *,
        meta: dict | None = None,
        seed: int = SEED,
    ) -> "ModelBundle":
        """Bundle a model with at most :data:`CALIBRATION_ROWS` rows drawn (seeded) from ``x, y``."""
        n = x.shape[0]
        if n > CALIBRATION_ROWS:
            idx = np.sort(np.random.default_rng(seed).choice(n, CALIBRATION_ROWS, replace=False))
            x, y = x[idx], y[idx]
        return cls(model, transform, tuple(input_names), tuple(output_names), x.copy(), y.copy(), dict(meta or {}))

    def model_inputs(self, x: np.ndarray | None = None) -> torch.Tensor:
        """Model-unit inputs of ``x`` (default: the calibration rows) as a tensor of the model's dtype."""
        x = self.x_cal if x is None else x
        dtype = self.model.layers[0].coef.dtype
        return torch.as_tensor(self.transform.inputs(x), dtype=dtype)

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Model predictions in CSV units, ``(N, d_in) -> (N, d_out)``."""
        with torch.no_grad():
            o = self.model(self.model_inputs(x)).double().cpu().numpy()
        return self.transform.outputs(o)

    def replace_model(self, model: KAN, **meta) -> "ModelBundle":
        """The same bundle around another model (e.g. the pruned one), with extra meta."""
        return ModelBundle(
            model, self.transform, self.input_names, self.output_names, self.x_cal, self.y_cal, {**self.meta, **meta}
        )

    def to_dict(self) -> dict:
        return {
            "format": CHECKPOINT_FORMAT,
            "version": CHECKPOINT_VERSION,
            "kind": "kan",
            "model": self.model.state(),
            "transform": self.transform.to_dict(),
            "input_names": list(self.input_names),
            "output_names": list(self.output_names),
            "x_cal": torch.as_tensor(self.x_cal, dtype=torch.float64),
            "y_cal": torch.as_tensor(self.y_cal, dtype=torch.float64),
            "meta": self.meta,
        }

    def save(self, path: str | Path, *, protect: Sequence[str | Path] = ()) -> None:
        """Write atomically (see :func:`kansym.io.checkpoint.save_checkpoint`)."""
        save_checkpoint(self.to_dict(), path, overwrite_protect=protect)

    @classmethod
    def load(cls, path: str | Path) -> "ModelBundle":
        """Read a bundle written by :meth:`save` (``weights_only=True``).

        Raises
        ------
        CheckpointError
            Missing, corrupt, foreign or incomplete checkpoint.
        """
        return cls.from_dict(load_checkpoint(path, kind="kan"), f"'{path}'")

    @classmethod
    def from_dict(cls, data: dict, source: str = "the checkpoint") -> "ModelBundle":
        """Inverse of :meth:`to_dict` (a bundle kept inside another checkpoint's meta, too).

        Raises
        ------
        CheckpointError
            An incomplete or foreign dict; ``source`` names it in the message.
        """
        try:
            model = KAN.from_state(data["model"])
            return cls(
                model=model,
                transform=DataTransform.from_dict(data["transform"]),
                input_names=tuple(data["input_names"]),
                output_names=tuple(data["output_names"]),
                x_cal=data["x_cal"].numpy(),
                y_cal=data["y_cal"].numpy(),
                meta=dict(data.get("meta", {})),
            )
        except (KeyError, TypeError, ValueError, RuntimeError, AttributeError, IndexError) as exc:
            detail = " ".join(str(exc).split())  # torch's messages span many lines
            detail = detail if len(detail) <= 160 else detail[:157] + "..."
            raise CheckpointError(
                f"{source} is not a complete kansym KAN checkpoint ({type(exc).__name__}: {detail}); re-create it"
            ) from exc
