"""bench.benchmarks.scaling turns the fit stage's outputs into results rows: vertex inside/outside the sampled N, the
held-out run's errors (selected method first), the seed check against the first seed's CI."""

from __future__ import annotations

from bench.benchmarks.scaling import holdout_rows, seed_rows, vertex_rows


def rows_by(rows, name, metric):
    return [r for r in rows if r.name == name and r.metric == metric]


def test_vertex_interior_only_when_strictly_inside_the_sampled_range():
    results = [{"run_id": f"C1e12_d{d}", "flops": "1e12", "params": str(n), "loss": str(loss)}
               for d, n, loss in ((16, 5e4, 3.5), (32, 1e5, 3.2), (64, 3e5, 3.4))]
    results += [{"run_id": f"C2e12_d{d}", "flops": "2.01e12", "params": str(n), "loss": str(loss)}
                for d, n, loss in ((16, 5e4, 3.0), (32, 1e5, 3.1), (64, 3e5, 3.3))]
    fit = {"laws": {"isoflop": {"budgets": [{"flops": 1e12, "n_opt": 1.2e5}, {"flops": 2e12, "n_opt": 4e4}]}}}
    rows = vertex_rows(fit, results)
    assert rows_by(rows, "C=1e+12", "interior")[0].value == 1.0
    assert rows_by(rows, "C=2e+12", "interior")[0].value == 0.0  # 4e4 is left of the smallest model (5e4)
    assert rows_by(rows, "C=2e+12", "best_loss")[0].value == 3.0
    assert rows_by(rows, "C=1e+12", "vertex_n")[0].extra["sampled_n"] == [5e4, 3e5]


def test_holdout_rows_put_the_selected_method_first_and_mark_invalid_fits():
    fit = {"holdout": {"run_id": "train", "n": 1e6, "d": 1.6e6, "flops": 1e13, "actual_loss": 2.5,
                       "selected_method": "parametric",
                       "predicted_loss": {"gadre": 2.6, "parametric": 2.45, "isoflop": 2.2},
                       "rel_error": {"gadre": 0.04, "parametric": -0.02, "isoflop": -0.12}},
           "validity": {"isoflop": {"valid": False}, "parametric": {"valid": True}, "gadre": {"valid": True}}}
    rows = holdout_rows(fit)
    predicted = [r for r in rows if r.metric == "predicted_loss"]
    assert [r.name for r in predicted] == ["parametric (selected)", "gadre", "isoflop (invalid)"]
    assert predicted[0].baseline_value == 2.5 and abs(predicted[0].ratio - 0.98) < 1e-12


def _fit(selected: str, **exponents: tuple[float, float, float]) -> dict:
    """A fit.json with each IsoFLOP law's N_opt exponent (value, CI low, CI high)."""
    return {"selection": {"method": selected},
            "laws": {law: {"parameters": {"n_opt.exponent": {"value": v, "ci95": [lo, hi]}}}
                     for law, (v, lo, hi) in exponents.items()}}


def test_seed_check_compares_the_second_exponent_with_the_first_ci():
    inside = seed_rows(_fit("isoflop", isoflop=(0.5, 0.4, 0.6)), _fit("isoflop", isoflop=(0.55, 0.3, 0.7)))
    assert rows_by(inside, "isoflop (selected) seed 1", "inside_seed0_ci")[0].value == 1.0
    outside = seed_rows(_fit("isoflop", isoflop=(0.5, 0.4, 0.6)), _fit("isoflop", isoflop=(0.65, 0.6, 0.7)))
    assert rows_by(outside, "isoflop (selected) seed 1", "inside_seed0_ci")[0].value == 0.0


def test_seed_check_compares_the_same_method_even_when_the_seeds_select_different_ones():
    first = _fit("isoflop", isoflop=(0.5, 0.4, 0.6), isoflop_grid=(0.5, 0.5, 0.5))
    second = _fit("isoflop_grid", isoflop=(0.45, 0.3, 0.6), isoflop_grid=(0.9, 0.9, 0.9))
    rows = seed_rows(first, second)
    assert rows_by(rows, "isoflop (selected) seed 1", "n_opt_exponent")[0].extra["seed0_ci95"] == [0.4, 0.6]
    assert rows_by(rows, "isoflop (selected) seed 1", "inside_seed0_ci")[0].value == 1.0
    assert rows_by(rows, "isoflop_grid seed 1", "inside_seed0_ci")[0].value == 0.0
