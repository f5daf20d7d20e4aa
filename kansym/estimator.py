"""A scikit-learn style estimator over the discovery pipeline (:func:`kansym.discover.run.discover`).

``KANRegressor().fit(X, y)`` trains, prunes and symbolifies a KAN exactly as ``kansym fit``
does; ``predict`` evaluates the discovered formula, ``score`` is its R², ``sympy()`` and
``latex()`` give the formula, ``summary()`` the answer in ``kansym fit``'s words (a partial
formula, one with numeric edges, said to be partial, the best closed form beside it:
:func:`kansym.discover.wording.report_lines`), and ``equations_`` the complexity/error
Pareto front as a table, in the manner of PySR's ``PySRRegressor`` (Cranmer 2023, arXiv:2305.01582) and of
scikit-learn's estimator conventions (constructor stores parameters only; learned
attributes end in ``_``; ``get_params``/``set_params``). scikit-learn itself is not
needed.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any, Sequence

import numpy as np

from kansym.discover.config import SETTINGS, settings_config, settings_doc
from kansym.errors import ConfigError, DataError

__all__ = ["KANRegressor"]

_D = {s.name: s.default() for s in SETTINGS}  # the defaults of DiscoverConfig (and of ``kansym fit``)

_UNITS_DOC = """units : mapping of str to str, or str, optional
    Unit of every feature and of the target (``{"v": "m/s", "E": "kg*m^2/s^2"}``, a
    CSV/JSON file, or inline ``"v=m/s,E=kg*m^2/s^2"``): the law is first reduced to
    dimensionless groups (:func:`kansym.discover.dimensional.discover_with_units`, AI
    Feynman's dimensional analysis). None: no units."""

_NOTES = {  # what the estimator adds to a setting's meaning
    "screen": ":meth:`predict` still takes every feature.",
    "time_limit": "Then :meth:`fit` warns (``UserWarning``); ``discovery_.cut_short`` and :meth:`to_record` name the stages.",
}


class KANRegressor:
    """Symbolic regression with a sparsified, pruned KAN.

    Parameters
    ----------
    {settings}

    Attributes
    ----------
    formula_ : kansym.discover.result.Formula
        The discovered formula (after :meth:`fit`).
    discovery_ : kansym.discover.result.Discovery
        Everything the pipeline produced (models, graph, timings); with ``units`` a
        :class:`kansym.discover.dimensional.UnitsDiscovery` (its models are on the groups).
    equations_ : pandas.DataFrame
        The Pareto front: ``complexity``, ``r2``, ``error``, ``sympy``, ``chosen``,
        ``dominated``, ``partial`` (the entry keeps numeric edges).
    status_ : str
        ``"verified"``, ``"unverified"`` or ``"partial"`` (:attr:`kansym.discover.result.Formula.status`).
    closed_form_ : kansym.discover.result.ClosedForm or None
        For a partial formula, the best closed form found beside it (not verified).
    leaks_ : tuple of kansym.io.tabular.Leak
        Features equal to the target up to scale (:func:`kansym.io.tabular.proportional_inputs`),
        each named in a ``UserWarning``; fit without them to find the law behind the others.
    feature_names_in_ : ndarray of str
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from kansym import KANRegressor
    >>> X = np.random.default_rng(0).uniform(1, 5, (500, 2))
    >>> est = KANRegressor(seed=0).fit(X, X[:, 0] * X[:, 1], feature_names=["a", "b"])  # doctest: +SKIP
    >>> est.sympy()  # doctest: +SKIP
    a*b
    """

    def __init__(self, hidden: Sequence[int] = _D["hidden"], grid_size: int = _D["grid_size"],
                 steps: int = _D["steps"], lamb: float = _D["lamb"], theta: float = _D["theta"],
                 space: str = _D["space"], library: Sequence[str] | None = _D["library"],
                 r2_threshold: float = _D["r2_threshold"], min_edge_r2: float = _D["min_edge_r2"],
                 holdout: float = _D["holdout"], max_train_rows: int | None = _D["max_train_rows"],
                 seed: int = _D["seed"], device: str = _D["device"], units: Any = None,
                 complexity_weight: float = _D["complexity_weight"], screen: bool = _D["screen"],
                 keep_inputs: Sequence[str] = _D["keep_inputs"], time_limit: float | None = _D["time_limit"]) -> None:
        self.hidden = hidden
        self.grid_size = grid_size
        self.steps = steps
        self.lamb = lamb
        self.theta = theta
        self.space = space
        self.library = library
        self.r2_threshold = r2_threshold
        self.min_edge_r2 = min_edge_r2
        self.holdout = holdout
        self.max_train_rows = max_train_rows
        self.seed = seed
        self.device = device
        self.units = units
        self.complexity_weight = complexity_weight
        self.screen = screen
        self.keep_inputs = keep_inputs
        self.time_limit = time_limit

    @classmethod
    def _param_names(cls) -> list[str]:
        return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor parameters (scikit-learn convention)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> "KANRegressor":
        """Set constructor parameters; raises ConfigError for an unknown name."""
        valid = self._param_names()
        for name, value in params.items():
            if name not in valid:
                raise ConfigError(f"KANRegressor has no parameter {name!r}; valid: {', '.join(valid)}")
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        defaults = {p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values()}
        changed = [f"{k}={v!r}" for k, v in self.get_params().items() if v != defaults.get(k)]
        return f"KANRegressor({', '.join(changed)})"

    def _config(self):
        """The :class:`~kansym.discover.config.DiscoverConfig` of the parameters (all but ``units``)."""
        return settings_config({name: getattr(self, name) for name in self._param_names() if name != "units"})

    def fit(self, X: Any, y: Any, *, feature_names: Sequence[str] | None = None,
            target_name: str | None = None) -> "KANRegressor":
        """Discover a formula for ``y`` from ``X``.

        Parameters
        ----------
        X : array_like (N, d) or pandas.DataFrame
            Inputs; a DataFrame's column names become the formula's symbols.
        y : array_like (N,) or pandas.Series
        feature_names : sequence of str, optional
            Symbol names (default: the DataFrame's columns, else ``x0, x1, ...``).
        target_name : str, optional

        Returns
        -------
        self

        Raises
        ------
        DataError, ConfigError, FitError

        Warns
        -----
        UserWarning
            When the formula's held-out R² is more than
            :data:`~kansym.discover.result.R2_GAP` (0.01) below the model's, or an
            edge fitted no primitive (:attr:`kansym.discover.result.Formula.warning`); for
            such a partial formula the message goes on with the lines ``kansym fit`` prints
            instead of ``target = ...`` (no closed form was verified, the best one found,
            the partial formula labelled). :meth:`sympy` and :meth:`predict` stay those of
            the partial formula (it evaluates like the model); :attr:`closed_form_` is the
            closed form; when ``time_limit`` cut the run short; and for each feature that
            equals ``y`` up to scale (:attr:`leaks_`).
        """
        import pandas as pd

        from kansym.discover.run import discover

        if target_name is None:
            target_name = str(y.name) if isinstance(y, pd.Series) and y.name is not None else "y"
        X, y, names = self._check_Xy(X, y, feature_names)
        from kansym.io.tabular import proportional_inputs

        leaks = proportional_inputs(X, y[:, None], names, [target_name])
        for leak in leaks:
            warnings.warn(f"kansym: {leak.text}; fit without that feature to find the law without it", UserWarning,
                          stacklevel=2)
        if self.units is not None:
            from kansym.discover.dimensional import discover_with_units
            from kansym.discover.units import read_units, read_units_table

            read_units(self.units, [*names, target_name])  # DataError naming a missing or unreadable unit
            table = read_units_table(self.units)
            result = discover_with_units(X, y, names, target_name, {c: table[c] for c in [*names, target_name]},
                                         self._config(), progress=False)
        else:
            result = discover(X, y[:, None], names, [target_name], self._config(), progress=False)
        self.discovery_, self.leaks_ = result, leaks
        self.formula_ = result.formulas[0]
        self.feature_names_in_ = np.asarray(names, dtype=object)
        self.n_features_in_ = X.shape[1]
        self.equations_ = _equations([e.to_dict() for e in self.formula_.front], self.formula_)
        if self.formula_.warning:
            warnings.warn(f"kansym: {self._warning_text()}", UserWarning, stacklevel=2)
        from kansym.discover.progress import cut_short_line

        if cut_short_line(result):
            warnings.warn(f"kansym: {cut_short_line(result)}", UserWarning, stacklevel=2)
        return self

    def _check_Xy(self, X: Any, y: Any, feature_names: Sequence[str] | None) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """``X (N, d)``, ``y (N,)`` as float arrays and the feature names (given, a DataFrame's
        columns, else ``x0, x1, ...``).

        Raises
        ------
        DataError
            ``y`` of another length or not finite, names not ``d`` distinct ones.
        """
        import pandas as pd

        names = feature_names
        if names is None and isinstance(X, pd.DataFrame):
            names = [str(c) for c in X.columns]
        X = self._check_X(X, None)
        y = np.asarray(y, dtype=np.float64)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.shape != (X.shape[0],):
            raise DataError(f"y must have shape ({X.shape[0]},) to match X, got {y.shape}")
        if not np.all(np.isfinite(y)):
            raise DataError("y contains NaN or inf; drop those rows first")
        names = list(names) if names is not None else [f"x{i}" for i in range(X.shape[1])]
        if len(names) != X.shape[1] or len(set(names)) != len(names):
            raise DataError(f"give {X.shape[1]} distinct feature names, got {names}")
        return X, y, names

    def _warning_text(self) -> str:
        """The warning of :meth:`fit`: :attr:`warning_`, and for a partial formula the
        lines ``kansym fit`` prints in place of ``target = ...``."""
        from kansym.discover.wording import answer_lines

        f = self._fitted()
        return f.warning if not f.partial else f"{f.warning}\n" + "\n".join(answer_lines(f))

    def _check_X(self, X: Any, n_features: int | None) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim == 1:
            X = X[:, None]
        if X.ndim != 2 or X.shape[0] == 0:
            raise DataError(f"X must be a non-empty 2-D array (N, d), got shape {X.shape}")
        if n_features is not None and X.shape[1] != n_features:
            raise DataError(f"X has {X.shape[1]} columns but the model was fitted on {n_features}")
        if not np.all(np.isfinite(X)):
            raise DataError("X contains NaN or inf; drop those rows first")
        return X

    def _fitted(self):
        if not hasattr(self, "formula_"):
            raise ConfigError("this KANRegressor is not fitted yet; call fit(X, y) first")
        return self.formula_

    def predict(self, X: Any) -> np.ndarray:
        """Evaluate the discovered formula on ``X (N, d)`` -> ``(N,)``."""
        formula = self._fitted()
        X = self._check_X(X, self.n_features_in_)
        names = list(self.feature_names_in_)
        used = [names.index(s.name) for s in formula.symbols]  # a screened fit uses some of the features
        return formula(X[:, used])

    def score(self, X: Any, y: Any) -> float:
        """R² of the formula's predictions on ``X, y``."""
        from kansym.symbolic.verify import r2_score

        return r2_score(np.asarray(y, dtype=np.float64).ravel(), self.predict(X))

    def sympy(self):
        """The formula as a sympy expression (CSV names as symbols)."""
        return self._fitted().expr

    def latex(self, precision: int = 4) -> str:
        """The formula in LaTeX (floats to ``precision`` significant digits).

        A partial formula (:attr:`status_` ``"partial"``) gives the text of its
        ``formula.tex`` instead: LaTeX comments only (no closed form was verified, the best
        one found, the partial formula), so nothing of it typesets as the law.
        """
        from kansym.discover.record import tex_text
        from kansym.symbolic.export import to_latex

        f = self._fitted()
        if not f.partial:
            return to_latex(f.expr, precision=precision)
        c = f.closed_form
        return tex_text({"target": f.target, "status": f.status, "warning": f.warning,
                         "latex": to_latex(f.expr, precision=precision),
                         "closed_form": None if c is None else {"latex": to_latex(c.expr, precision=precision),
                                                                "r2_test": c.r2_test}})

    def summary(self) -> str:
        """The answer as ``kansym fit`` prints it (without the Pareto front): the formula, or
        for a partial one that no closed form was verified, the best closed form and the
        partial formula labelled; the R² line; a ``WARNING`` line when it is no verified answer
        (:func:`kansym.discover.wording.report_lines`)."""
        from kansym.discover.wording import report_lines

        return "\n".join(report_lines(self._fitted()))

    @property
    def status_(self) -> str:
        """``"verified"``, ``"unverified"`` or ``"partial"`` (:attr:`kansym.discover.result.Formula.status`)."""
        return self._fitted().status

    @property
    def closed_form_(self):
        """The best closed form found beside a partial formula (not verified), or None."""
        return self._fitted().closed_form

    def to_record(self) -> dict:
        """The fitted formula as a ``formula.json`` record (:mod:`kansym.discover.record`)."""
        from kansym.discover.record import discovery_record

        self._fitted()
        d = getattr(self, "discovery_", None)
        if d is None:  # read with from_record: the record it came from
            return dict(self.record_.data)
        from kansym.discover.progress import time_limit_entry
        from kansym.io.tabular import leak_record

        return discovery_record(d, {**time_limit_entry(d), **leak_record(getattr(self, "leaks_", ()))})

    def write_record(self, path: Any) -> Any:
        """Write :meth:`to_record` to ``path`` (atomically); returns the path."""
        from pathlib import Path

        from kansym.discover.record import dumps
        from kansym.io.atomic import atomic_write_text

        atomic_write_text(Path(path), dumps(self.to_record()))
        return Path(path)

    @classmethod
    def from_record(cls, path: Any) -> "KANRegressor":
        """An estimator that predicts with the formula of a ``formula.json`` (``kansym fit``, :meth:`write_record`).

        Its :meth:`predict`, :meth:`score`, :meth:`sympy`, :meth:`latex` and
        ``equations_`` work as after :meth:`fit`; ``discovery_`` (the models) is absent.

        Raises
        ------
        DataError
            Unreadable or foreign file, or a formula that does not parse.
        """
        from kansym.discover.record import read_record

        record = read_record(path)
        est = cls()
        est.record_ = record
        est.formula_ = record.formula()
        est.feature_names_in_ = np.asarray(record.inputs, dtype=object)
        est.n_features_in_ = len(record.inputs)
        est.equations_ = _equations(record.pareto, est.formula_)
        return est

    @property
    def warning_(self) -> str | None:
        """Why the formula is not a verified answer, or None (see :meth:`fit`)."""
        return self._fitted().warning


# the Parameters of the docstring: each setting's meaning and default from kansym.discover.config.SETTINGS
if KANRegressor.__doc__:  # None under python -OO
    KANRegressor.__doc__ = KANRegressor.__doc__.replace("    {settings}", settings_doc(
        KANRegressor._param_names(), extra={"units": _UNITS_DOC}, notes=_NOTES))


def _equations(rows: Sequence[dict], formula: Any):
    """``equations_``: the front's rows (``formula.front``'s, as dicts) with a ``partial``
    column (the entry keeps numeric edges)."""
    import pandas as pd

    from kansym.discover.choice import closed

    table = pd.DataFrame(list(rows), columns=["complexity", "r2", "error", "sympy", "chosen", "dominated"])
    table["partial"] = [not closed(e.expr) for e in formula.front]
    return table
