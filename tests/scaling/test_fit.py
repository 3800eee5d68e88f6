"""Scaling-law fits against known laws: Chinchilla's published fit (Hoffmann et al. 2022, eq. 10:
E, A, B, α, β = 1.69, 406.4, 410.7, 0.34, 0.28) and the CS336 shared ``isoflops_curves.json``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from scaling.data import average_repeats, canonicalize, load_results
from scaling.fit import main
from scaling.intervals import bootstrap
from scaling.laws import LAWS, LawError
from scaling.laws.isoflop import IsoflopParabola
from scaling.laws.parametric import FittedParametric, ParametricLaw, fit_parametric, huber_objective
from scaling.predict import table_runs
from scaling.runs import Runs

CHINCHILLA = ParametricLaw(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28)
SHARED_ISOFLOPS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "scaling" / "isoflops_curves.json"


def isoflop_grid(law: ParametricLaw, budgets: np.ndarray, points: int = 9, noise: float = 0.0,
                 seed: int = 0) -> pd.DataFrame:
    """Runs spaced evenly in ln N around (but deliberately off) each budget's optimum, with lognormal loss noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, flops in enumerate(budgets):
        centre = np.log(law.n_opt(flops)) + 0.4 * np.sin(i)
        for n in np.exp(centre + np.linspace(-1.5, 1.5, points)):
            d = flops / (6 * n)
            rows.append({"params": n, "tokens": d, "flops": flops,
                         "loss": float(law.loss(n, d)) * float(np.exp(rng.normal(0, noise)))})
    return pd.DataFrame(rows)


def fit_isoflop(params: np.ndarray, flops: np.ndarray, loss: np.ndarray):
    """Approach 2 on runs laid out on the budgets ``flops`` (each run's budget given, as a budget column would):
    D = C / 6N, as the sweeps above lay the runs out."""
    params, flops = np.asarray(params, dtype=float), np.asarray(flops, dtype=float)
    return IsoflopParabola().fit(Runs(params, flops / (6 * params), flops, loss, budget=flops))


def test_huber_gradient_matches_finite_differences():
    rng = np.random.default_rng(0)
    log_n, log_d = rng.uniform(16, 23, 50), rng.uniform(18, 27, 50)
    log_loss = np.log(CHINCHILLA.loss(np.exp(log_n), np.exp(log_d))) + rng.normal(0, 2e-3, 50)
    theta, eps = np.array([6.0, 6.0, 0.5, 0.3, 0.3]), 1e-6
    _, grad = huber_objective(theta, log_n, log_d, log_loss)
    numeric = [(huber_objective(theta + eps * e, log_n, log_d, log_loss)[0]
                - huber_objective(theta - eps * e, log_n, log_d, log_loss)[0]) / (2 * eps) for e in np.eye(5)]
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-9)


def test_parametric_recovers_chinchilla_law_and_bootstrap_ci_covers_it():
    rng = np.random.default_rng(0)
    n = np.exp(rng.uniform(np.log(1e7), np.log(1e10), 300))
    d = np.exp(rng.uniform(np.log(1e8), np.log(1e12), 300))
    loss = CHINCHILLA.loss(n, d) * np.exp(rng.normal(0, 0.003, 300))
    law, theta, _ = fit_parametric(n, d, loss)
    assert law.alpha == pytest.approx(0.34, rel=0.05)
    assert law.beta == pytest.approx(0.28, rel=0.05)
    assert law.E == pytest.approx(1.69, rel=0.05)
    runs = Runs(n, d, 6 * n * d, loss)  # scattered runs: rows resampled
    fitted = LAWS["parametric"].fit(runs)
    assert fitted.fit == law  # the law's fit is fit_parametric's
    samples, skipped = bootstrap(LAWS["parametric"], runs, fitted, 100, np.random.default_rng(1),
                                 lambda f: {"loss_opt": f.loss_opt(np.array([1e23]))})
    assert skipped == 0 and len(samples["alpha"]) == 100
    for name, truth in (("alpha", 0.34), ("beta", 0.28), ("E", 1.69)):
        lo, hi = np.percentile(samples[name], [2.5, 97.5])
        assert lo <= truth <= hi, (name, lo, hi)


def test_isoflop_recovers_chinchilla_n_opt_exponent():
    frame = isoflop_grid(CHINCHILLA, np.geomspace(1e18, 1e22, 5), noise=1e-4)
    iso = fit_isoflop(frame["params"].to_numpy(), frame["flops"].to_numpy(), frame["loss"].to_numpy())
    assert iso.n_law.exponent == pytest.approx(0.28 / 0.62, rel=0.02)  # β/(α+β)
    assert iso.d_law.exponent == pytest.approx(0.34 / 0.62, rel=0.02)  # α/(α+β)
    assert iso.loss_law.E == pytest.approx(1.69, rel=0.05)


@pytest.mark.skipif(not SHARED_ISOFLOPS.is_file(), reason=f"{SHARED_ISOFLOPS} not present")
def test_parametric_reproduces_shared_isoflops_curves_exactly():
    frame = load_results(SHARED_ISOFLOPS)
    n, d, loss = (frame[k].to_numpy() for k in ("params", "tokens", "loss"))
    law, _, _ = fit_parametric(n, d, loss)
    assert np.max(np.abs(law.loss(n, d) / loss - 1)) < 1e-6
    runs, layout = table_runs(frame)  # its compute_budget column is each run's budget
    assert runs.budget is not None and "budget column" in layout
    iso = IsoflopParabola().fit(runs)  # approach 2 agrees with the exact law to ~1%
    assert iso.n_law.exponent == pytest.approx(law.n_exponent, rel=0.02)


@pytest.mark.parametrize("csv, expected", [
    ("params,tokens\n1e6,1e8\n", "missing column 'loss'"),
    ("N,D,loss\n1e6,1e8,3.0\n-2e6,1e8,3.1\n", "column 'params' (from 'N') row 2: value -2000000.0 must be > 0"),
    ("params,tokens,loss\n1e6,1e8,3.0\n2e6,1e8,nan\n", "column 'loss' row 2: missing or NaN value"),
    ("params,tokens,final_loss\n1e6,1e8,inf\n", "column 'loss' (from 'final_loss') row 1: value inf is not finite"),
    ("params,C,loss\n1e6,lots,3.0\n", "column 'flops' (from 'C') row 1: non-numeric value 'lots'"),
    ("params,loss\n1e6,3.0\n", "missing column 'tokens' or 'flops'"),
])
def test_validation_names_file_column_and_row(tmp_path, csv, expected):
    path = tmp_path / "results.csv"
    path.write_text(csv)
    with pytest.raises(ValueError) as info:
        load_results(path)
    assert str(info.value).startswith(str(path)) and expected in str(info.value)
    assert "\n" not in str(info.value)


def test_isoflop_leaves_out_budgets_with_fewer_than_three_sizes():
    """A budget with < 3 sizes has no parabola: it is left out and named, and does not void approach 2."""
    frame = isoflop_grid(CHINCHILLA, np.array([1e18, 1e19, 1e20]))
    short = frame[(frame["flops"] != 1e20) | (frame.index % 9 < 2)]  # the 1e20 budget keeps 2 runs
    fit = fit_isoflop(short["params"].to_numpy(), short["flops"].to_numpy(), short["loss"].to_numpy())
    assert [b.flops for b in fit.budgets] == [1e18, 1e19] and fit.skipped == ((1e20, 2),)
    one_left = short[short["flops"] != 1e18]
    with pytest.raises(LawError, match=r">= 2 compute budgets with >= 3 model sizes that bracket their optimum, "
                                         r"found 1 \(1 budget"):
        fit_isoflop(one_left["params"].to_numpy(), one_left["flops"].to_numpy(), one_left["loss"].to_numpy())


def test_a_budget_that_does_not_bracket_its_optimum_is_left_out_not_fatal():
    """A parabola without minimum, or a vertex outside the budget's sampled N, is an extrapolated optimum: that budget
    is left out of the power laws and named; the others still fit, and give the same law as without it."""
    budgets = np.array([1e18, 1e19, 1e20, 1e21])
    frame = isoflop_grid(CHINCHILLA, budgets)
    concave = frame["flops"] == 1e19
    frame.loc[concave, "loss"] = 5.0 - 0.1 * (np.log(frame.loc[concave, "params"]) - 20.0) ** 2
    edge = frame["flops"] == 1e20  # its runs all sit above the optimum: the vertex lies below the smallest N
    n_opt = CHINCHILLA.n_opt(1e20)
    frame.loc[edge, "params"] = n_opt * np.exp(np.linspace(0.5, 3.5, int(edge.sum())))
    frame.loc[edge, "tokens"] = 1e20 / (6 * frame.loc[edge, "params"])
    frame.loc[edge, "loss"] = CHINCHILLA.loss(frame.loc[edge, "params"], frame.loc[edge, "tokens"])
    fit = fit_isoflop(frame["params"].to_numpy(), frame["flops"].to_numpy(), frame["loss"].to_numpy())
    assert [b.flops for b in fit.budgets] == [1e18, 1e21]
    assert [c for c, _ in fit.unbracketed] == [1e19, 1e20]
    assert "no minimum" in fit.unbracketed[0][1] and "outside the sampled N" in fit.unbracketed[1][1]
    kept = frame[frame["flops"].isin([1e18, 1e21])]
    alone = fit_isoflop(kept["params"].to_numpy(), kept["flops"].to_numpy(), kept["loss"].to_numpy())
    assert fit.n_law == alone.n_law and fit.d_law == alone.d_law and fit.loss_law == alone.loss_law
    with pytest.raises(LawError, match=r"found 1 \(0 budget\(s\) with fewer sizes and 2 unbracketed left out\)"):
        rest = frame[frame["flops"] != 1e18]
        fit_isoflop(rest["params"].to_numpy(), rest["flops"].to_numpy(), rest["loss"].to_numpy())


def test_aliases_and_json_input(tmp_path):
    records = [{"parameters": 1e8, "compute_budget": 6e18, "final_loss": 3.5, "d_model": 512}]
    (tmp_path / "runs.json").write_text(json.dumps(records))
    frame = load_results(tmp_path / "runs.json")
    # compute_budget is C and, being a budget column's name too, each run's IsoFLOP budget (scaling/data.py)
    assert list(frame.columns) == ["params", "tokens", "flops", "loss", "budget", "d_model"]
    assert frame.loc[0, "flops"] == frame.loc[0, "budget"] == 6e18
    assert frame.loc[0, "tokens"] == pytest.approx(6e18 / (6 * 1e8))  # D = C / 6N
    frame = canonicalize(pd.DataFrame({"N": [2e8], "D": [5e9], "val_loss": [3.1], "loss": [2.9]}))
    assert frame.loc[0, "flops"] == pytest.approx(6 * 2e8 * 5e9) and frame.loc[0, "loss"] == 2.9  # canonical wins
    assert "val_loss" in frame.columns


def test_cli_writes_fit_predictions_and_plots(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default --out-dir is ./<stem>_fit
    results = tmp_path / "sweep.csv"
    isoflop_grid(CHINCHILLA, np.geomspace(1e18, 1e21, 4), points=7, noise=1e-3).to_csv(results, index=False)
    argv = [str(results), "--target-flops", "1e23", "1e24", "--bootstrap", "20", "--params", "none"]
    assert main(argv) == 0
    out_dir = tmp_path / "sweep_fit"
    report = json.loads((out_dir / "fit.json").read_text())
    assert set(report["laws"]) == {"isoflop", "isoflop_grid", "parametric", "gadre"} and "predictions" in report
    predictions = pd.read_csv(out_dir / "predictions.csv")
    assert set(predictions["method"]) == {"isoflop", "isoflop_grid", "parametric", "gadre"}  # auto: every law
    assert {"target_flops", "n_opt", "n_opt_lo", "n_opt_hi", "d_opt", "loss", "loss_hi"} <= set(predictions.columns)
    assert sorted(p.name for p in out_dir.glob("*.png")) == [
        "isoflop_curves.png", "optimal_allocation.png", "parametric_contours.png"]
    assert "parametric" in capsys.readouterr().out
    assert main(argv + ["--out-dir", str(tmp_path / "again"), "--no-plots"]) == 0  # same seed, same bytes
    assert (tmp_path / "again" / "fit.json").read_bytes() == (out_dir / "fit.json").read_bytes()


def test_cli_bad_input_exits_2_with_one_error_line(tmp_path, capsys):
    results = tmp_path / "bad.csv"
    results.write_text("params,tokens,loss\n1e6,1e8,3.0\n2e6,1e8,-1\n")
    assert main([str(results), "--no-plots"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "column 'loss' row 2" in err and "\n" not in err


def test_cli_metrics_are_a_flat_headline_with_every_prediction_in_details(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default --out-dir is ./<stem>_fit
    results = tmp_path / "sweep.csv"
    isoflop_grid(CHINCHILLA, np.geomspace(1e18, 1e21, 4), points=7, noise=1e-3).to_csv(results, index=False)
    metrics = tmp_path / "metrics" / "fit.json"
    assert main([str(results), "--target-flops", "1e23", "1e24", "--bootstrap", "0", "--no-plots",
                 "--metrics", str(metrics), "--params", "none"]) == 0
    details = json.loads((tmp_path / "metrics" / "details" / "fit.json").read_text())
    assert set(details) == {f"{m}@1e+{e}" for m in ("isoflop", "isoflop_grid", "parametric", "gadre")
                            for e in (23, 24)}
    selected = json.loads((tmp_path / "sweep_fit" / "fit.json").read_text())["selection"]["method"]
    assert selected == "parametric"  # the law the runs were drawn from
    assert [m for m, row in details.items() if row["selected"]] == [f"{selected}@1e+23", f"{selected}@1e+24"]
    best = details[f"{selected}@1e+24"]  # the selected law at the largest target
    assert best["valid"] and best["loss_lo"] < best["loss"] < best["loss_hi"]
    assert json.loads(metrics.read_text()) == {"selected": selected, "flops": 1e24, "params": best["n_opt"],
                                               "tokens": best["d_opt"], "loss": best["loss"],
                                               "loss_lo": best["loss_lo"], "loss_hi": best["loss_hi"]}


def test_cli_params_section_is_strict_and_sets_the_defaults(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default --out-dir is ./<stem>_fit
    results = tmp_path / "sweep.csv"
    isoflop_grid(CHINCHILLA, np.geomspace(1e18, 1e21, 4), points=7).to_csv(results, index=False)
    params = tmp_path / "params.yaml"
    params.write_text("scaling_fit:\n  method: parametric\n  bootstrapp: 3\n")
    assert main([str(results), "--no-plots", "--params", str(params)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "bootstrapp" in err and "scaling_fit" in err and str(params) in err
    params.write_text("scaling_fit:\n  method: parametric\n  bootstrap: 0\n  target_flops: [1.0e+22]\n")
    assert main([str(results), "--no-plots", "--params", str(params)]) == 0
    report = json.loads((tmp_path / "sweep_fit" / "fit.json").read_text())
    assert set(report["laws"]) == {"parametric"} and report["bootstrap"] == 0 and report["target_flops"] == [1e22]


DEGENERATE = ParametricLaw(E=1.0, A=1e-300, B=1e300, alpha=0.05, beta=0.05)  # G underflows to 0.0


def degenerate_fit() -> FittedParametric:
    law = DEGENERATE
    theta = np.array([np.log(law.A), np.log(law.B), np.log(law.E), law.alpha, law.beta])
    return FittedParametric(LAWS["parametric"], law, theta, 0.0)


def test_parametric_stats_of_a_law_whose_allocation_underflows_is_infinite_not_an_error():
    """A bootstrap resample can drive G = (alpha A / (beta B))^(1/(alpha+beta)) to 0.0 in floating point: the
    stats must come back non-finite (the resample is then skipped), not raise ZeroDivisionError."""
    assert DEGENERATE.G == 0.0
    fitted = degenerate_fit()
    with np.errstate(all="ignore"):
        assert fitted.parameters()["G"] == 0.0
        assert not np.all(np.isfinite(fitted.d_opt(np.array([1e20]))))
        assert not np.all(np.isfinite(fitted.loss_opt(np.array([1e20]))))

    class Degenerate(type(LAWS["parametric"])):  # every refit lands on the degenerate law (not registered)
        def fit(self, runs, warm=None):
            return degenerate_fit()

    runs = Runs([1e6, 2e6, 4e6], [1e8, 1e8, 1e8], [6e14, 1.2e15, 2.4e15], [3.0, 2.9, 2.8])
    samples, skipped = bootstrap(Degenerate(), runs, fitted, 4, np.random.default_rng(0),
                                 lambda f: {"loss_opt": f.loss_opt(np.array([1e20]))})
    assert samples == {} and skipped == 4  # each resample skipped, none raised


def degenerate_plots(tmp_path) -> list[Path]:
    from scaling.plots import plot_all
    from scaling.predict import FitResult, LawFit
    frame = pd.DataFrame({"params": [1e5, 2e5], "tokens": [1e6, 2e6], "flops": [6e11, 2.4e12], "loss": [3.0, 2.8]})
    runs = Runs(*(frame[k].to_numpy() for k in ("params", "tokens", "flops", "loss")))
    result = FitResult({}, {"parametric": LawFit(LAWS["parametric"], degenerate_fit())}, runs)
    with np.errstate(all="ignore"):
        return plot_all(frame, result, np.array([1e13]), tmp_path)


def test_plots_skip_a_degenerate_parametric_law(tmp_path):
    """A law whose N_opt is 0 everywhere (G underflowed) cannot be drawn on log axes: the other plots still are."""
    paths = degenerate_plots(tmp_path)
    assert "parametric_contours.png" not in [p.name for p in paths]
    assert not (tmp_path / "parametric_contours.png").exists()


def test_a_degenerate_law_alone_draws_no_empty_allocation_plot(tmp_path):
    """Nothing to draw (no IsoFLOP budgets, the only law degenerate): no PNG at all."""
    assert degenerate_plots(tmp_path) == []


def test_several_seeds_are_fitted_as_the_mean_of_each_point(tmp_path, capsys):
    """Two files of the same runs, losses shifted up and down by one factor, fit exactly like the noise-free runs:
    each (N, D, C) point is their mean (computed here by hand), weighed once, not two points."""
    clean = isoflop_grid(CHINCHILLA, np.geomspace(1e18, 1e21, 4), points=7)
    shift = 0.03
    high, low = clean.assign(loss=clean["loss"] + shift), clean.assign(loss=clean["loss"] - shift)
    paths = []
    for name, frame in (("clean", clean), ("high", high), ("low", low)):
        paths.append(tmp_path / f"{name}.csv")
        frame.to_csv(paths[-1], index=False)
    common = ["--target-flops", "1e23", "--bootstrap", "10", "--params", "none", "--no-plots"]
    assert main([str(paths[0]), "--out-dir", str(tmp_path / "one"), *common]) == 0
    assert main([str(paths[1]), str(paths[2]), "--out-dir", str(tmp_path / "two"), *common]) == 0
    assert "averaged 56 runs into 28 points" in capsys.readouterr().out
    one, two = (json.loads((tmp_path / d / "fit.json").read_text()) for d in ("one", "two"))
    assert two["n_runs"] == one["n_runs"] == 28
    assert two["input"] == [str(paths[1]), str(paths[2])]
    for a, b in zip(one["predictions"], two["predictions"], strict=True):
        assert a["method"] == b["method"]
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-6)
        assert b["n_opt"] == pytest.approx(a["n_opt"], rel=1e-4)


def test_average_repeats_keeps_single_runs_and_reports_the_spread():
    frame = pd.DataFrame({"params": [1e6, 1e6, 1e6, 2e6], "tokens": [1e8, 1e8, 1e8, 5e7],
                          "flops": [6e14, 6e14, 6e14, 6e14], "loss": [3.0, 3.2, 3.4, 2.9], "run_id": list("abcd")})
    out = average_repeats(frame)
    assert list(out["run_id"]) == ["a", "d"]
    assert list(out["loss"]) == pytest.approx([3.2, 2.9])
    assert list(out["repeats"]) == [3, 1]
    assert list(out["loss_sd"]) == pytest.approx([0.2, 0.0])
    assert average_repeats(frame.iloc[2:]).equals(frame.iloc[2:])  # nothing repeated: the frame as it was
