"""Formulas: from a KAN's edges, or from rows directly, to a verified sympy formula.

Modules, from an edge to a verified formula (docs/algorithms.md, "Architecture"):
:mod:`~kansym.symbolic.library` (the primitives), :mod:`~kansym.symbolic.fit` (one edge fitted
to each primitive; numeric edges), :mod:`~kansym.symbolic.compose` (the symbolic network and its
formula), :mod:`~kansym.symbolic.occam` (the Occam step), :mod:`~kansym.symbolic.direct` and
:mod:`~kansym.symbolic.vocabulary` (the direct search), :mod:`~kansym.symbolic.monomial`
(products of powers), :mod:`~kansym.symbolic.refit`, :mod:`~kansym.symbolic.constants`,
:mod:`~kansym.symbolic.snap` and :mod:`~kansym.symbolic.refine` (the refinement),
:mod:`~kansym.symbolic.verify` (R², the residual test, exact recovery),
:mod:`~kansym.symbolic.pareto` (complexity, the Pareto front), :mod:`~kansym.symbolic.parse`
(column names, the safe parser) and :mod:`~kansym.symbolic.export` (LaTeX, Python, torch).
"""
