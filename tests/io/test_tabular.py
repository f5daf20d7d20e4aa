"""Tests of kansym.io.tabular (CSV reading, embedded data) and kansym.io.table (table rules, scalers)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from kansym.errors import DataError
from kansym.io.scaler import Scaler
from kansym.io.table import fit_scalers, read_table_from_frame
from kansym.io.tabular import embedded_dataset, list_embedded, read_table


def write(tmp_path, text, name="d.csv", encoding="utf-8"):
    p = tmp_path / name
    p.write_bytes(text.encode(encoding) if isinstance(text, str) else text)
    return p


# ----------------------------------------------------------------------------- happy paths


@pytest.mark.parametrize("sep", [",", ";", "\t"])
def test_delimiters_are_detected(tmp_path, sep):
    rows = ["a,b,y", "1,10,0.5", "2,20,1.5", "3,30,2.5"]
    p = write(tmp_path, "\n".join(r.replace(",", sep) for r in rows) + "\n")
    t = read_table(p, "y")
    assert t.input_names == ("a", "b")
    assert t.target_names == ("y",)
    np.testing.assert_array_equal(t.x, [[1, 10], [2, 20], [3, 30]])
    np.testing.assert_array_equal(t.y, [[0.5], [1.5], [2.5]])
    assert t.x.dtype == np.float64 and t.y.dtype == np.float64
    assert t.notices == ()


def test_semicolon_with_decimal_looking_values(tmp_path):
    p = write(tmp_path, "x;y\n1.5;2\n2.5;3\n4.0;9\n")
    t = read_table(p, "y")
    np.testing.assert_allclose(t.x[:, 0], [1.5, 2.5, 4.0])


def test_utf8_bom_and_unicode_names(tmp_path):
    p = write(tmp_path, "\ufeffλ,température\n1,2\n2,5\n3,7\n")
    t = read_table(p, "température")
    assert t.input_names == ("λ",)


def test_default_inputs_skip_text_with_notice(tmp_path):
    p = write(tmp_path, "body,a,y\nMercury,1,2\nVenus,2,4\nEarth,3,7\n")
    t = read_table(p, "y")
    assert t.input_names == ("a",)
    assert t.notices == ("ignored non-numeric column 'body'",)


def test_a_typo_in_a_numeric_column_is_an_error_not_a_dropped_column(tmp_path):
    # regression: one 'abc' in x2 made the whole column "non-numeric"; it was dropped
    # with a notice and y was fitted from x1 alone (exit 0, wrong formula)
    p = write(tmp_path, "x1,x2,y\n1,2,3\n2,abc,5\n3,4,7\n4,5,9\n")
    with pytest.raises(DataError, match=r"column 'x2' of .*d.csv is not numeric \(value 'abc' in data row 2\)"):
        read_table(p, "y")


def test_explicit_inputs_keep_order_and_subset(tmp_path):
    p = write(tmp_path, "a,b,c,y\n1,2,3,1\n2,3,5,2\n3,1,4,0\n")
    t = read_table(p, "y", inputs=["c", "a"])
    assert t.input_names == ("c", "a")
    np.testing.assert_array_equal(t.x[:, 0], [3, 5, 4])


def test_multiple_targets(tmp_path):
    p = write(tmp_path, "a,y1,y2\n1,2,3\n2,3,5\n3,1,4\n")
    t = read_table(p, ["y1", "y2"])
    assert t.y.shape == (3, 2) and t.target_names == ("y1", "y2")
    assert t.input_names == ("a",)


def test_embedded_kepler():
    assert "kepler" in list_embedded()
    p = embedded_dataset("kepler")
    assert p.is_file()
    t = read_table(p, "period_days")
    assert t.input_names == ("semi_major_axis_km", "primary_mass_kg")
    assert t.n_rows >= 8 and t.d_in == 2 and t.d_out == 1
    assert "ignored non-numeric column 'body'" in t.notices


def test_embedded_unknown_lists_names():
    with pytest.raises(DataError, match="kepler"):
        embedded_dataset("nope")


def test_from_frame_does_not_modify_frame():
    df = pd.DataFrame({"a": [1.0, 2.0, np.nan], "y": [1.0, 2.0, 3.0]})
    before = df.copy()
    t = read_table_from_frame(df, "y", dropna=True)
    pd.testing.assert_frame_equal(df, before)
    assert t.n_rows == 2


# ----------------------------------------------------------------------------- errors


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        read_table(tmp_path / "none.csv", "y")


@pytest.mark.parametrize(
    "text, match",
    [("", "empty"), ("  \n\n", "empty"), ("a,y\n", "no data rows"), ("a,y\n1,2\n", "at least 2")],
)
def test_too_little_data(tmp_path, text, match):
    with pytest.raises(DataError, match=match):
        read_table(write(tmp_path, text), "y")


def test_unknown_target_lists_columns(tmp_path):
    p = write(tmp_path, "a,b,y\n1,2,3\n2,3,4\n")
    with pytest.raises(DataError, match=r"target column 'z'.*available columns: a, b, y"):
        read_table(p, "z")


def test_unknown_input_lists_columns(tmp_path):
    p = write(tmp_path, "a,b,y\n1,2,3\n2,3,4\n")
    with pytest.raises(DataError, match=r"input column 'q'.*available columns: a, b, y"):
        read_table(p, "y", inputs=["a", "q"])


def test_named_text_column_names_bad_value(tmp_path):
    p = write(tmp_path, "body,a,y\nMercury,1,2\nVenus,2,4\n")
    with pytest.raises(DataError, match=r"column 'body'.*not numeric.*'Mercury'"):
        read_table(p, "y", inputs=["body", "a"])


def test_text_target(tmp_path):
    p = write(tmp_path, "a,y\n1,2\n2,oops\n3,4\n")
    with pytest.raises(DataError, match=r"column 'y'.*'oops'.*row 2"):
        read_table(p, "y")


def test_nan_rows_suggest_dropna_then_dropped(tmp_path):
    p = write(tmp_path, "a,b,y\n1,2,3\n,3,4\n3,4,inf\n4,5,6\n5,1,2\n")
    with pytest.raises(DataError, match=r"2 of 5 rows.*--dropna"):
        read_table(p, "y")
    t = read_table(p, "y", dropna=True)
    assert t.n_rows == 3
    np.testing.assert_array_equal(t.x[:, 0], [1, 4, 5])
    assert any("dropped 2 row" in n for n in t.notices)


def test_nan_in_unused_column_is_ignored(tmp_path):
    p = write(tmp_path, "a,unused,y\n1,,3\n2,,4\n3,1,5\n")
    t = read_table(p, "y", inputs=["a"])
    assert t.n_rows == 3


def test_dropna_leaving_too_few_rows(tmp_path):
    p = write(tmp_path, "a,y\n1,\n2,\n3,4\n")
    with pytest.raises(DataError, match="1 usable row"):
        read_table(p, "y", dropna=True)


def test_constant_input_dropped_with_notice(tmp_path):
    p = write(tmp_path, "a,c,y\n1,7,3\n2,7,4\n3,7,5\n")
    t = read_table(p, "y")
    assert t.input_names == ("a",)
    assert any("constant input column 'c'" in n for n in t.notices)


def test_all_inputs_constant(tmp_path):
    p = write(tmp_path, "a,c,y\n1,7,3\n1,7,4\n")
    with pytest.raises(DataError, match="every input column"):
        read_table(p, "y")


def test_constant_target(tmp_path):
    p = write(tmp_path, "a,y\n1,3\n2,3\n3,3\n")
    with pytest.raises(DataError, match="target column 'y' is constant"):
        read_table(p, "y")


def test_duplicate_columns(tmp_path):
    p = write(tmp_path, "a,a,y\n1,2,3\n2,3,4\n")
    with pytest.raises(DataError, match="duplicate column name.*'a'"):
        read_table(p, "y")


def test_non_utf8(tmp_path):
    p = write(tmp_path, "temp\xe9rature,y\n1,2\n2,3\n", encoding="latin-1")
    with pytest.raises(DataError, match="not UTF-8"):
        read_table(p, "y")


def test_no_inputs_left(tmp_path):
    p = write(tmp_path, "name,y\nx,1\nz,2\n")
    with pytest.raises(DataError, match="no numeric input"):
        read_table(p, "y")


def test_target_also_input(tmp_path):
    p = write(tmp_path, "a,y\n1,2\n2,3\n")
    with pytest.raises(DataError, match="both a target and an input"):
        read_table(p, "y", inputs=["a", "y"])


def test_errors_are_one_sentence(tmp_path):
    p = write(tmp_path, "a,b,y\n1,2,3\n2,3,4\n")
    with pytest.raises(DataError) as info:
        read_table(p, "z")
    assert "\n" not in str(info.value)


# ----------------------------------------------------------------------------- Scaler


def test_minmax_maps_to_unit_interval():
    a = np.array([[0.0, -5.0], [10.0, 5.0], [5.0, 0.0]])
    s = Scaler.minmax(a)
    z = s.transform(a)
    np.testing.assert_allclose(z.min(axis=0), [-1, -1])
    np.testing.assert_allclose(z.max(axis=0), [1, 1])
    np.testing.assert_allclose(s.shift, [5.0, 0.0])
    np.testing.assert_allclose(s.scale, [5.0, 5.0])


def test_standard_scaler_moments():
    rng = np.random.default_rng(0)
    a = rng.normal(3.0, 7.0, size=(200, 2))
    z = Scaler.standard(a).transform(a)
    np.testing.assert_allclose(z.mean(axis=0), 0, atol=1e-12)
    np.testing.assert_allclose(z.std(axis=0), 1, atol=1e-12)


def test_constant_column_does_not_divide_by_zero():
    a = np.array([[2.0, 1.0], [2.0, 3.0]])
    for s in (Scaler.minmax(a), Scaler.standard(a)):
        z = s.transform(a)
        assert np.all(np.isfinite(z))
        np.testing.assert_allclose(z[:, 0], 0.0)


def test_scaler_rejects_zero_scale_and_bad_shapes():
    with pytest.raises(DataError):
        Scaler(shift=np.zeros(2), scale=np.array([1.0, 0.0]))
    with pytest.raises(DataError):
        Scaler(shift=np.zeros(2), scale=np.ones(3))
    with pytest.raises(DataError, match="2 columns"):
        Scaler.identity(2).transform(np.zeros((4, 3)))


def test_scaler_dict_round_trip_is_plain():
    s = Scaler.minmax(np.array([[1.0, 2.0], [3.0, 8.0]]))
    d = s.to_dict()
    assert type(d["shift"]) is list and all(type(v) is float for v in d["shift"])
    s2 = Scaler.from_dict(d)
    np.testing.assert_array_equal(s2.shift, s.shift)
    np.testing.assert_array_equal(s2.scale, s.scale)
    s3 = Scaler.from_dict({k: torch.tensor(v) for k, v in d.items()})
    np.testing.assert_array_equal(s3.scale, s.scale)


def test_scaler_on_tensors_keeps_dtype():
    s = Scaler.minmax(np.array([[0.0], [4.0]]))
    z = s.transform(torch.tensor([[0.0], [4.0]], dtype=torch.float32))
    assert z.dtype == torch.float32
    torch.testing.assert_close(z, torch.tensor([[-1.0], [1.0]]))
    torch.testing.assert_close(s.inverse(z), torch.tensor([[0.0], [4.0]]))


def test_fit_scalers(tmp_path):
    t = read_table(embedded_dataset("kepler"), "period_days")
    sx, sy = fit_scalers(t)
    assert sx.dim == 2 and sy.dim == 1
    assert np.abs(sx.transform(t.x)).max() == pytest.approx(1.0)


@settings(max_examples=50, deadline=None)
@given(
    arrays(
        np.float64,
        st.tuples(st.integers(2, 20), st.integers(1, 4)),
        elements=st.floats(-1e6, 1e6, allow_nan=False),
    )
)
def test_scaler_inverse_round_trip(a):
    for s in (Scaler.minmax(a), Scaler.standard(a)):
        np.testing.assert_allclose(s.inverse(s.transform(a)), a, rtol=1e-9, atol=1e-6)


def test_constant_input_kept_when_asked(tmp_path):
    p = write(tmp_path, "a,c,y\n1,7,3\n2,7,4\n3,7,5\n")
    t = read_table(p, "y", inputs=["a", "c"], drop_constant=False)
    assert t.input_names == ("a", "c")
    assert t.notices == ()


def test_row_with_extra_fields(tmp_path):
    p = write(tmp_path, "a,y\n1,2\n4,5,6\n7,8\n")
    with pytest.raises(DataError, match="line 3 .* 3 fields but the header has 2"):
        read_table(p, "y")


def test_short_row_is_a_missing_value(tmp_path):
    p = write(tmp_path, "a,b,y\n1,2,3\n4,5\n7,8,1\n2,1,0\n")
    with pytest.raises(DataError, match="1 of 4 rows"):
        read_table(p, "y")


def test_tabular_is_still_the_one_import_path():
    import kansym.io.scaler
    import kansym.io.table
    import kansym.io.tabular

    for name in ("Table", "read_table_from_frame", "fit_scalers"):
        assert getattr(kansym.io.tabular, name) is getattr(kansym.io.table, name)
    assert kansym.io.tabular.Scaler is kansym.io.scaler.Scaler
    assert set(kansym.io.tabular.__all__) >= {"Scaler", "Table", "read_table", "read_table_from_frame",
                                              "fit_scalers", "embedded_dataset", "list_embedded"}


def test_a_frame_with_number_labels_is_read_by_their_names():
    # pandas labels the columns of a bare array 0, 1, 2: the target named 2 (or "2") is that column,
    # where the reader used to fail with a raw KeyError ('0') or TypeError ('int' is not iterable)
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.uniform(1, 2, size=(30, 3)))
    for target in (2, "2", [2]):
        table = read_table_from_frame(frame, target)
        assert table.input_names == ("0", "1") and table.target_names == ("2",)
        np.testing.assert_array_equal(table.y[:, 0], frame[2].to_numpy())
    with pytest.raises(DataError, match="'5' is not in the table"):
        read_table_from_frame(frame, 5)
