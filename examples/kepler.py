"""Kepler's third law from 30 real orbits, through `kansym.discover.discover`.

The table ships with kansym (kansym/data/kepler.csv): semi-major axis (km), mass of the
primary (kg) and period (days) of planets and moons. Values span ten decades, so the
KAN learns in log space; the formula comes back in CSV units.

    python examples/kepler.py
"""

from __future__ import annotations

from kansym.io.tabular import embedded_dataset, read_table
from kansym.discover import discover
from kansym.symbolic.export import to_latex


def main() -> None:
    table = read_table(embedded_dataset("kepler"), "period_days", ["semi_major_axis_km", "primary_mass_kg"])
    result = discover(table.x, table.y, table.input_names, table.target_names, progress=False)
    formula = result.formulas[0]
    print(f"model {list(result.trained.model.width)} -> pruned {list(result.prune_result.model.width)}")
    print(f"period_days = {to_latex(formula.expr)}")
    print(f"sympy: {formula.expr}")
    print(f"R² on the data: {formula.fidelity.r2_data:.6f}")


if __name__ == "__main__":
    main()
