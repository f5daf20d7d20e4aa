"""``formula.json``: the record of a discovered formula, and its only writer and reader.

``kansym fit``, ``kansym symbolify --json`` and :meth:`kansym.KANRegressor.to_record`
write it; ``kansym graph --fits``, ``kansym plot --fits``, ``kansym predict`` and
:meth:`kansym.KANRegressor.from_record` read it back, all through this module.

The record (``"format": "kansym-formula"``, ``"version": 1``) is one JSON object:

==================  ==========================================================================
``target``          the predicted column
``inputs``          the input columns, in order (the formula's variables)
``symbols``         ``{identifier: column}`` for every input, in order: the name each column has
                    in the ``sympy`` strings and the Python export
                    (:func:`kansym.symbolic.parse.identifiers`: ``mass kg`` -> ``mass_kg``,
                    ``lambda`` -> ``lambda_``, ``I`` -> ``I_``; ``x1`` stays ``x1``)
``sympy``           ``str`` of the formula on those identifiers:
                    ``sympy.sympify(sympy, locals={i: Symbol(i) for i in symbols})`` parses it
                    (it also parses without ``locals``: no identifier is a name sympy binds);
                    :func:`read_record` parses it back on one ``Symbol`` per input, named by its
                    column (a record without ``symbols``, written before they existed, names
                    each input by its column)
``latex``           the formula in LaTeX (:func:`kansym.symbolic.export.to_latex`)
``python``          numpy source of a function ``f(X)``, ``X[:, i]`` the i-th input (named by its
                    identifier; :func:`kansym.symbolic.export.to_python`), or a comment saying
                    why there is none (numeric edges)
``raw_sympy``       the composition before refinement (identifiers, as every ``sympy`` string)
``r2_data``,        R² on the fitting rows against the data and the model, the largest absolute
``r2_model``,       error and the RMS error there (:class:`kansym.symbolic.verify.Fidelity`)
``max_abs_err``,
``rmse``
``r2_test``,        R² of the formula and of the model on the held-out rows (the fitting rows
``r2_model_test``,  when ``n_test`` is 0)
``n_test``
``r2_reference_test`` R² on the held-out rows of a KAN trained without sparsification, or null
``r2_residual``,    the residual test (:class:`kansym.symbolic.verify.ResidualTest`): R² of the
``p_residual``,     rows' residuals predicted from their nearest other rows', the probability
``residual_``       that noise is predicted as well (below 0.01: the error is a function of the
``statistics``      inputs) and the number of statistics it is adjusted over; null: no verdict
``warning``         why the formula is not a verified answer, or null
``status``          ``verified`` (no warning), ``unverified`` (a closed form with a warning) or
                    ``partial`` (numeric edges: ``sympy`` holds opaque functions, no closed form
                    was verified)
``numeric_edges``   names of edges that fit no primitive (opaque functions in ``sympy``)
``closed_form``     for a partial formula, the best closed form found beside it, or null:
                    ``sympy``, ``latex``, ``r2_test`` (on the rows of ``r2_test``), ``complexity``,
                    ``origin`` (it did not pass the verification: a verified one is the formula)
``origin``,         what produced the formula (``kan``, ``direct search``, ``structure``, ``units``,
``reason``          ``pysr``) and why it was chosen
``structure``       for ``structure``: the decomposition into sub-laws (``kind`` sum, product,
                    symmetry or leaf, ``variables``, ``offset``, ``relation``, ``children``), else null
``pareto``          the Pareto front: ``sympy``, ``complexity``, ``r2``, ``error``, ``chosen``,
                    ``dominated``
``space``           ``linear`` or ``log`` (the units the KAN learned in), or null
``candidates``      every formula the Occam step tried
``edges``           the per-edge fits: ``id`` ``[layer, i_in, j_out]`` and the
                    :class:`~kansym.symbolic.fit.EdgeFit` fields
==================  ==========================================================================

and, from a discovery (:func:`discovery_record`: ``kansym fit``, :meth:`kansym.KANRegressor.to_record`):
``width_trained``, ``width_pruned`` (no timings: the record of one command is the same bytes on every
run; ``model.pt``'s meta holds the seconds); with units: ``units`` and ``reduction``
(:func:`kansym.discover.units.reduction_meta`: the groups as exponents of the columns); from
``kansym fit``: ``data``; from ``symbolify``: ``checkpoint``; when the time limit bound (only
then): ``time_limit`` (``seconds``, ``cut_short``: what it cut, ``note``;
:func:`kansym.discover.progress.time_limit_entry`); when the input screening ran
(:mod:`kansym.discover.screen`): ``removed_inputs`` (``name``, ``z_smooth``, ``z_kan``,
``z_threshold``, ``reason``; ``inputs`` are those the model and formula use); from ``kansym fit
--drop`` (only then): ``dropped_inputs``, the columns left out as asked; when an input equals the
target up to scale (only then; :func:`kansym.io.tabular.proportional_inputs`): ``leaks`` (``column``,
``target``, ``scale``, ``deviation``, ``remark``).
"""

from kansym.discover.record.read import FormulaRecord, read_record, sibling_record
from kansym.discover.record.write import (
    FORMAT, VERSION, discovery_record, dumps, formula_record, tex_text, write_formula_files,
)

__all__ = ["FORMAT", "VERSION", "FormulaRecord", "formula_record", "discovery_record", "write_formula_files",
           "tex_text", "dumps", "read_record", "sibling_record"]
