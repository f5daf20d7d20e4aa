"""One node of a decomposition found by the structure search (:mod:`kansym.discover.separate`)."""

from __future__ import annotations

from dataclasses import dataclass

from kansym.discover.noise import TRANSFORMS

__all__ = ["Split"]


@dataclass(frozen=True)
class Split:
    """One node of a decomposition.

    Attributes
    ----------
    kind : {"sum", "product", "symmetry", "transform", "leaf"}
    variables : tuple of str
        The inputs of this node.
    offset : float
        ``c`` of a product node, ``f = c + prod_k g_k`` (0 for the others).
    children : tuple of Split
    relation : str
        Of a symmetry node: the new variable of its one child, ``"w = a - b"``
        (:mod:`kansym.discover.symmetry`); of a transform node: the transform whose value of
        the law its one child solves (``"square"``, ``"inverse"``,
        :data:`kansym.discover.noise.TRANSFORMS`).
    """

    kind: str
    variables: tuple[str, ...]
    offset: float = 0.0
    children: tuple[Split, ...] = ()
    relation: str = ""

    def describe(self) -> str:
        """``"a + (b * c)"``-style text of the decomposition (leaves as ``f(a, b)``)."""
        if self.kind == "leaf":
            return f"f({', '.join(self.variables)})"
        if self.kind == "symmetry":
            return f"{self.children[0].describe()} with {self.relation}"
        if self.kind == "transform":
            return TRANSFORMS[self.relation].text.format(self.children[0].describe())
        parts = [c.describe() if c.kind == "leaf" else f"({c.describe()})" for c in self.children]
        text = (" + " if self.kind == "sum" else " * ").join(parts)
        return f"{self.offset:.6g} + {text}" if self.kind == "product" and self.offset else text

    def to_dict(self) -> dict:
        out: dict = {"kind": self.kind, "variables": list(self.variables)}
        if self.kind == "product" and self.offset:
            out["offset"] = self.offset
        if self.relation:
            out["relation"] = self.relation
        if self.children:
            out["children"] = [c.to_dict() for c in self.children]
        return out
