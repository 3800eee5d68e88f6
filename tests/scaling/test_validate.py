"""Held-out predictions, honest fits and the choice of law (scaling/select.py, scaling/rolling.py,
scaling/intervals.py, scaling/laws/gadre.py, the fit CLI).

Every expected prediction is computed here from the fitted parameters in fit.json with the law written out in the
test; every synthetic sweep is generated from a law written out here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from scaling.fit import NO_VALID_LAW, main
from scaling.intervals import prediction_interval
from scaling.laws.gadre import GadreLaw, fit_gadre
from scaling.laws.parametric import ParametricLaw

# α ≠ β, so the Gadre law (one exponent) cannot represent it
ASYMMETRIC = ParametricLaw(E=1.69, A=406.4, B=410.7, alpha=0.45, beta=0.25)
GADRE = GadreLaw(E=1.9, a=250 * 6 ** 0.15, b=400 * 6 ** 0.15, eta=0.15)
BUDGETS = np.geomspace(1e18, 1e21, 5)


def sweep(loss_fn, n_opt_fn, budgets=BUDGETS, points: int = 7, offset: float = 0.0, noise: float = 0.0,
          seed: int = 0) -> pd.DataFrame:
    """Runs spaced evenly in ln N around each budget's optimum (shifted by ``offset`` + 0.4·sin(i) in ln N)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, flops in enumerate(budgets):
        centre = np.log(n_opt_fn(flops)) + offset + 0.4 * np.sin(i)
        for n in np.exp(centre + np.linspace(-1.5, 1.5, points)):
            d = flops / (6 * n)
            rows.append({"params": n, "tokens": d, "flops": flops,
                         "loss": float(loss_fn(n, d)) * float(np.exp(rng.normal(0, noise)))})
    return pd.DataFrame(rows)


def biased_short_runs(frame: pd.DataFrame, bias: float = 0.03) -> pd.DataFrame:
    """Runs of few tokens per parameter raised by up to ``bias`` (relative): 3 % at D/N -> 0, 1.1 % at D/N = 20."""
    return frame.assign(loss=frame["loss"] * (1 + bias * np.exp(-frame["tokens"] / frame["params"] / 20)))


def run_cli(tmp_path: Path, frame: pd.DataFrame, *extra: str) -> tuple[int, Path]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    results = tmp_path / "sweep.csv"
    frame.to_csv(results, index=False)
    out = tmp_path / "out"
    code = main([str(results), "--out-dir", str(out), "--no-plots", "--params", "none", *extra])
    return code, out


def fit_json(out: Path) -> dict:
    return json.loads((out / "fit.json").read_text())


def parameters(report: dict, law: str, *names: str) -> dict[str, float]:
    return {k: report["laws"][law]["parameters"][k]["value"] for k in names}


# ---------------------------------------------------------------- the Gadre law
def test_gadre_law_is_chinchilla_with_one_exponent_and_its_fit_recovers_it():
    rng = np.random.default_rng(0)
    n = np.exp(rng.uniform(np.log(1e7), np.log(1e10), 200))
    d = np.exp(rng.uniform(np.log(1e8), np.log(1e12), 200))
    # L(C, M) = E + (a·M^η + b·M^-η)·C^-η with M = D/N, C = 6ND, written out
    m, c = d / n, 6 * n * d
    by_hand = GADRE.E + (GADRE.a * m ** GADRE.eta + GADRE.b * m ** -GADRE.eta) * c ** -GADRE.eta
    np.testing.assert_allclose(GADRE.loss(n, d), by_hand, rtol=1e-12)
    chinchilla = ParametricLaw(GADRE.E, GADRE.a * 6 ** -GADRE.eta, GADRE.b * 6 ** -GADRE.eta, 2 * GADRE.eta,
                               2 * GADRE.eta)
    np.testing.assert_allclose(GADRE.loss(n, d), chinchilla.loss(n, d), rtol=1e-12)
    assert GADRE.n_opt(1e22) == pytest.approx(chinchilla.n_opt(1e22), rel=1e-9)
    law, _ = fit_gadre(n, d, by_hand * np.exp(rng.normal(0, 1e-3, 200)))
    assert law.eta == pytest.approx(GADRE.eta, rel=0.03)
    assert law.E == pytest.approx(GADRE.E, rel=0.03)


# ---------------------------------------------------------------- held-out predictions
HOLDOUT = "run_id,N,D,loss\nbig,2.0e+10,4.0e+11,2.25\nbigger,6.0e+10,2.0e+12,2.1\n"


def test_holdout_predictions_match_the_laws_written_out(tmp_path):
    holdout = tmp_path / "runs.csv"
    holdout.write_text(HOLDOUT)
    code, out = run_cli(tmp_path, sweep(ASYMMETRIC.loss, ASYMMETRIC.n_opt, noise=1e-3), "--method", "auto",
                        "--bootstrap", "0", "--holdout", str(holdout), "--metrics", str(tmp_path / "m" / "fit.json"))
    assert code == 0
    report, table = fit_json(out), pd.read_csv(out / "holdout.csv")
    assert list(table.columns) == ["run_id", "N", "D", "C", "loss", "method", "predicted_loss", "pi_lo", "pi_hi",
                                   "rel_error", "covered", "valid", "selected"]
    n, d, loss = np.array([2e10, 6e10]), np.array([4e11, 2e12]), np.array([2.25, 2.1])
    c = 6 * n * d
    par = parameters(report, "parametric", "E", "A", "B", "alpha", "beta")
    gad = parameters(report, "gadre", "E", "a", "b", "eta")
    m = d / n  # Gadre's token multiplier
    expected = {
        "parametric": par["E"] + par["A"] / n ** par["alpha"] + par["B"] / d ** par["beta"],
        "gadre": gad["E"] + (gad["a"] * m ** gad["eta"] + gad["b"] * m ** -gad["eta"]) * c ** -gad["eta"],
    }
    for method in ("isoflop", "isoflop_grid"):  # L_opt = E + A·C^-gamma at the run's C
        law = parameters(report, method, "E", "A", "gamma")
        expected[method] = law["E"] + law["A"] * c ** -law["gamma"]
    assert sorted(set(table["method"])) == sorted(expected)
    for method, values in expected.items():
        rows = table[table["method"] == method]
        assert list(rows["run_id"]) == ["big", "bigger"]
        np.testing.assert_allclose(rows["C"], c, rtol=1e-12)
        np.testing.assert_allclose(rows["predicted_loss"], values, rtol=1e-9)
        np.testing.assert_allclose(rows["rel_error"], values / loss - 1, rtol=1e-9)
        # a 95 % prediction interval around each prediction, and "covered" is the measured loss inside it
        assert (rows["pi_lo"] < rows["predicted_loss"]).all() and (rows["predicted_loss"] < rows["pi_hi"]).all()
        assert list(rows["covered"]) == list((rows["pi_lo"] <= loss) & (loss <= rows["pi_hi"]))
        assert list(rows["valid"]) == [report["validity"][method]["valid"]] * 2
        assert list(rows["selected"]) == [method == report["selection"]["method"]] * 2
    top = report["holdout"]  # the largest held-out run, as the issue spells it
    assert top["run_id"] == "bigger" and top["actual_loss"] == 2.1 and top["flops"] == pytest.approx(c[1])
    assert top["predicted_loss"]["gadre"] == pytest.approx(expected["gadre"][1], rel=1e-9)
    assert top["rel_error"]["parametric"] == pytest.approx(expected["parametric"][1] / 2.1 - 1, rel=1e-9)
    selected = report["selection"]["method"]
    assert top["selected_method"] == selected and len(top["runs"]) == 2
    headline = json.loads((tmp_path / "m" / "fit.json").read_text())
    assert headline["holdout_loss"] == 2.1
    assert headline["holdout_rel_error"] == pytest.approx(top["rel_error"][selected])
    assert json.loads((tmp_path / "m" / "details" / "fit.json").read_text())["holdout"]["run_id"] == "bigger"


def test_the_fit_never_looks_at_the_held_out_loss(tmp_path):
    frame = sweep(ASYMMETRIC.loss, ASYMMETRIC.n_opt, noise=1e-3)
    outputs = []
    for i, text in enumerate((HOLDOUT, HOLDOUT.replace("2.25", "9.5").replace("2.1\n", "0.5\n"))):
        holdout = tmp_path / f"runs{i}.csv"
        holdout.write_text(text)
        code, out = run_cli(tmp_path / str(i), frame, "--method", "auto", "--bootstrap", "5",
                            "--holdout", str(holdout))
        assert code == 0
        outputs.append(fit_json(out))
    first, second = outputs
    assert first["holdout"]["predicted_loss"] == second["holdout"]["predicted_loss"]
    assert first["holdout"]["interval"] == second["holdout"]["interval"]
    for key in ("predictions", "validity", "selection", "rolling_origin", "laws"):
        assert first[key] == second[key], key


def test_holdout_summary_is_counted_as_the_sweep_counts(tmp_path):
    frame = sweep(ASYMMETRIC.loss, ASYMMETRIC.n_opt, budgets=BUDGETS[:4])
    frame["params_non_embedding"] = frame["params"] * 0.5
    summary = tmp_path / "runs" / "default" / "summary.json"
    summary.parent.mkdir(parents=True)
    summary.write_text(json.dumps({"params": 3.0e10, "params_non_embedding": 1.5e10, "tokens": 6.0e11,
                                   "flops": 1.5e23, "val_loss": 2.2, "train_loss": 2.1}))
    for per_token, expected_c in ((6.0, 6 * 3e10 * 6e11), (6.5, 1.5e23)):  # 6N: C = 6·N·D; exact: the summary's
        frame["flops_actual"] = per_token * frame["params"] * frame["tokens"]
        code, out = run_cli(tmp_path / str(per_token), frame, "--bootstrap", "0", "--holdout-summary", str(summary))
        assert code == 0
        holdout = fit_json(out)["holdout"]
        assert (holdout["run_id"], holdout["n"], holdout["d"], holdout["actual_loss"]) == ("default", 3e10, 6e11, 2.2)
        assert holdout["flops"] == pytest.approx(expected_c)
        assert holdout["counting"] == {"params": "params", "flops": "6N" if per_token == 6.0 else "exact"}


@pytest.mark.parametrize("text, expected", [("run_id,N,D\nx,1e9,1e10\n", "missing column 'loss'"),
                                            ("N,D,loss\n1e9,1e10,-2\n", "column 'loss' row 1")])
def test_bad_holdout_exits_2_naming_the_file(tmp_path, capsys, text, expected):
    holdout = tmp_path / "bad.csv"
    holdout.write_text(text)
    code, _ = run_cli(tmp_path, sweep(ASYMMETRIC.loss, ASYMMETRIC.n_opt), "--bootstrap", "0",
                      "--holdout", str(holdout))
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and str(holdout) in err and expected in err
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"params": 1e9, "tokens": 1e10}))
    code, _ = run_cli(tmp_path, sweep(ASYMMETRIC.loss, ASYMMETRIC.n_opt), "--holdout-summary", str(summary))
    err = capsys.readouterr().err
    assert code == 2 and str(summary) in err and "val_loss" in err


# ---------------------------------------------------------------- honest fits
def test_validity_flags_trip_when_every_vertex_sits_at_the_edge(tmp_path, capsys):
    # every budget's runs start just above its optimum: the data never bracket it
    frame = sweep(ASYMMETRIC.loss, ASYMMETRIC.n_opt, offset=1.9)
    code, out = run_cli(tmp_path, frame, "--method", "auto", "--bootstrap", "0")
    assert code == NO_VALID_LAW == 3  # no law is valid: an error exit, nothing selected
    report = fit_json(out)
    validity = report["validity"]
    for method in ("parametric", "gadre"):  # laws in N and D: their own N_opt(C) lies beyond every budget's runs
        assert not validity[method]["valid"], method
        assert any("the law's N_opt(C)" in r and "lies outside the sampled N" in r
                   for r in validity[method]["reasons"]), validity[method]
    for method in ("isoflop", "isoflop_grid"):  # approach 2: no budget brackets its optimum
        assert not validity[method]["valid"], method
        assert any("fit failed" in r or "bracket their optimum" in r for r in validity[method]["reasons"])
    assert report["selection"]["method"] is None and report["selection"]["valid"] is False
    predictions = pd.read_csv(out / "predictions.csv")
    assert not predictions["valid"].any() and not predictions["selected"].any()
    captured = capsys.readouterr()
    assert "error: no valid law" in captured.err and "invalid: parametric: " in captured.out
    assert "(no valid law: no predictions)" in captured.out
    # --allow-no-valid: the same outputs, a warning, exit 0 (the dvc fit stage)
    code, out = run_cli(tmp_path / "allow", frame, "--method", "auto", "--bootstrap", "0", "--allow-no-valid")
    assert code == 0 and fit_json(out)["selection"]["method"] is None
    assert "warning: no valid law" in capsys.readouterr().err
    # the same law, sampled around its optimum: nothing trips
    code, out = run_cli(tmp_path / "ok", sweep(ASYMMETRIC.loss, ASYMMETRIC.n_opt), "--method", "auto",
                        "--bootstrap", "0")
    check = fit_json(out)["validity"]["parametric"]
    assert code == 0 and {k: check[k] for k in ("valid", "reasons", "notes", "at_bound")} == {
        "valid": True, "reasons": [], "notes": [], "at_bound": []}


def test_one_unbracketed_budget_leaves_isoflop_valid_and_named(tmp_path, capsys):
    # the smallest budget's runs all sit above its optimum (seed 2 of the default sweep had one such budget, and it
    # voided both IsoFLOP methods): approach 2 leaves it out, names it, and the four others keep it valid
    frame = sweep(ASYMMETRIC.loss, ASYMMETRIC.n_opt)
    shifted = sweep(ASYMMETRIC.loss, ASYMMETRIC.n_opt, offset=1.9)
    frame = pd.concat([shifted[shifted["flops"] == BUDGETS[0]], frame[frame["flops"] != BUDGETS[0]]])
    code, out = run_cli(tmp_path, frame, "--method", "auto", "--bootstrap", "0")
    assert code == 0
    report = fit_json(out)
    for method in ("isoflop", "isoflop_grid"):
        assert [b["flops"] for b in report["laws"][method]["unbracketed_budgets"]] == [BUDGETS[0]]
        assert len(report["laws"][method]["budgets"]) == 4
    assert report["validity"]["isoflop"]["valid"] and report["validity"]["isoflop_grid"]["valid"]
    assert "budget(s) whose runs do not bracket the optimum left out of approach 2: C=1e+18" in capsys.readouterr().out


def test_a_parameter_at_its_bound_is_flagged_in_the_table_not_voided(tmp_path, capsys):
    no_floor = ParametricLaw(E=0.0, A=406.4, B=410.7, alpha=0.45, beta=0.25)  # loss -> 0: E at its lower bound
    for boot in ("0", "10"):
        code, out = run_cli(tmp_path / boot, sweep(no_floor.loss, ASYMMETRIC.n_opt), "--method", "parametric",
                            "--bootstrap", boot)
        assert code == 0
        check = fit_json(out)["validity"]["parametric"]
        # E has no arbitrary floor (Epoch: E = e^e): it runs down to the box's 1e-06, and the table says so
        assert any(r.startswith("E") and "the optimizer's bound 1e-06" in r for r in check["notes"]), check
        assert check["valid"] and check["at_bound"] == ["E"]
        rows = pd.read_csv(out / "predictions.csv")
        assert (rows[rows["method"] == "parametric"]["at_bound"] == "E").all()
        table = [line for line in capsys.readouterr().out.splitlines()
                 if re.match(r"parametric( \*)? +1e\+2", line)]  # " *": the selected law
        assert table and all(line.endswith(" E") for line in table)


def test_prediction_interval_by_hand():
    """The 95 % prediction interval of scaling/intervals.py, written out: in ln L, the bootstrap predictions'
    2.5-97.5 percentile half-width, 1.96 residual sds and the split-conformal quantile of the rolling-origin |errors|
    at >= the prediction's distance (the ceil((n+1)·0.95)-th smallest); the half-width is the extrapolation part, or
    the other two in quadrature when larger."""
    from scipy.stats import norm
    rng = np.random.default_rng(0)
    value, sd = 2.0, 0.004
    boot = value * np.exp(rng.normal(0, 0.01, 200))
    distances, errors = np.linspace(2, 16, 40), rng.normal(0, 0.02, 40)
    lo, hi = np.percentile(np.log(boot), [2.5, 97.5])
    parameters, scatter = (hi - lo) / 2, norm.ppf(0.975) * sd
    far = np.abs(errors[distances >= 4.0])
    assert len(far) >= 19
    extrapolation = np.sort(far)[int(np.ceil((len(far) + 1) * 0.95)) - 1]
    half = max(extrapolation, np.hypot(parameters, scatter))
    pi = prediction_interval(value, boot, sd, 4.0, (distances, errors))
    assert pi["pi95"] == pytest.approx([value * np.exp(-half), value * np.exp(half)], rel=1e-12)
    assert pi["parts"] == pytest.approx({"parameters": parameters, "scatter": scatter,
                                         "extrapolation": extrapolation}, rel=1e-12)
    assert pi["dominant"] == "extrapolation"
    quiet = prediction_interval(value, boot * np.exp(rng.normal(0, 0.1, 200)), sd, 4.0, (distances, errors))
    assert quiet["halfwidth_log"] == pytest.approx(np.hypot(quiet["parts"]["parameters"], scatter), rel=1e-12)
    assert quiet["dominant"] == "parameters"
    assert pi["dominant"] == max(pi["parts"], key=pi["parts"].get) and "conformal" in pi["calibration"]
    # beyond every error's distance: the 19 farthest, scaled to it by ln distance, their conformal quantile (the 19th)
    farthest = np.argsort(-distances)[:19]
    scaled = np.abs(errors[farthest] * np.log(40.0) / np.log(distances[farthest]))
    pi = prediction_interval(value, boot, sd, 40.0, (distances, errors))
    assert pi["parts"]["extrapolation"] == pytest.approx(np.max(scaled), rel=1e-12)
    # inside the sweep: no extrapolation part
    pi = prediction_interval(value, boot, sd, 0.5, (distances, errors))
    assert pi["pi95"] == pytest.approx([value * np.exp(-np.hypot(parameters, scatter)),
                                        value * np.exp(np.hypot(parameters, scatter))], rel=1e-12)
    # no rolling-origin error at all: the extrapolation is unmeasured and the two other parts doubled
    pi = prediction_interval(value, boot, sd, 4.0, None)
    assert pi["pi95"] == pytest.approx([value * np.exp(-2 * np.hypot(parameters, scatter)),
                                        value * np.exp(2 * np.hypot(parameters, scatter))], rel=1e-12)
    assert "unmeasured" in pi["calibration"]


def test_one_rolling_origin_error_is_a_measured_extrapolation_error():
    """An IsoFLOP law on 4 budgets has one rolling origin and one error (its next budget's best run). The interval
    must carry it (intervals.py: only "without any rolling-origin error" is the extrapolation part unmeasured):
    Student t(0.975, 1) x |error|, scaled by ln distance from 10x to 100x."""
    from scipy.stats import t
    pi = prediction_interval(2.0, None, 5e-4, 100.0, (np.array([10.0]), np.array([-0.05])))
    assert "no rolling-origin error" not in pi["calibration"]
    assert pi["parts"]["extrapolation"] == pytest.approx(t.ppf(0.975, 1) * 0.05 * np.log(100) / np.log(10))


def test_single_budget_prints_no_silent_parametric_predictions(tmp_path, capsys):
    code, out = run_cli(tmp_path, sweep(ASYMMETRIC.loss, ASYMMETRIC.n_opt, budgets=[1e20]), "--bootstrap", "0",
                        "--metrics", str(tmp_path / "fit_metrics.json"))
    assert code == NO_VALID_LAW
    captured = capsys.readouterr()
    assert "error: no valid law" in captured.err and "parametric: runs on 1 compute level(s)" in captured.err
    assert not [line for line in captured.out.splitlines() if line.startswith("parametric ") and "e+" in line[:25]]
    assert not pd.read_csv(out / "predictions.csv")["valid"].any()
    assert json.loads((tmp_path / "fit_metrics.json").read_text()) == {"selected": "none"}  # no headline prediction


# ---------------------------------------------------------------- choosing the law
@pytest.mark.parametrize("truth, frame", [
    ("parametric", sweep(ASYMMETRIC.loss, ASYMMETRIC.n_opt)),
    ("gadre", sweep(GADRE.loss, GADRE.n_opt)),
    # the true law fitted on small budgets whose short runs sit above it (an unfinished warm-up transient, say):
    # extrapolated 4x out, the true law still wins
    ("parametric", biased_short_runs(sweep(ASYMMETRIC.loss, ASYMMETRIC.n_opt, budgets=np.geomspace(1e18, 1e21, 7)))),
], ids=["parametric", "gadre", "parametric-biased-short-runs"])
def test_auto_picks_the_law_that_generated_the_data(tmp_path, capsys, truth, frame):
    code, out = run_cli(tmp_path, frame, "--method", "auto", "--bootstrap", "0")
    assert code == 0
    report = fit_json(out)
    selection = report["selection"]
    assert selection["method"] == truth and report["method"] == "auto"
    assert "rolling-origin" in selection["why"]
    scores = report["rolling_origin"]["score"]
    assert set(scores) == {"isoflop", "isoflop_grid", "parametric", "gadre"}
    assert scores[truth] <= min(scores.values()) + 1e-4
    assert len(report["rolling_origin"]["origins"]) >= 2
    assert selection["scores"] == scores
    assert f"selected: {truth}" in capsys.readouterr().out
    predictions = pd.read_csv(out / "predictions.csv")
    assert set(predictions[predictions["selected"]]["method"]) == {truth}


def test_single_and_listed_methods_run(tmp_path, capsys):
    frame = sweep(ASYMMETRIC.loss, ASYMMETRIC.n_opt)
    for method, expected in (("gadre", {"gadre"}), ("isoflop", {"isoflop"}),
                             ("isoflop,isoflop_grid,parametric", {"isoflop", "isoflop_grid", "parametric"})):
        code, out = run_cli(tmp_path / method, frame, "--method", method, "--bootstrap", "0")
        assert code == 0 and set(pd.read_csv(out / "predictions.csv")["method"]) == expected
        assert set(fit_json(out)["laws"]) == expected
    code, _ = run_cli(tmp_path / "both", frame, "--method", "both")  # gone: auto or law names
    assert code == 2 and "got 'both'" in capsys.readouterr().err


# ---------------------------------------------------------------- CLI hygiene
def test_bootstrap_0_prints_point_estimates_without_nan(tmp_path, capsys):
    holdout = tmp_path / "runs.csv"
    holdout.write_text(HOLDOUT)
    code, _ = run_cli(tmp_path, sweep(ASYMMETRIC.loss, ASYMMETRIC.n_opt), "--method", "auto", "--bootstrap", "0",
                      "--holdout", str(holdout))
    out = capsys.readouterr().out
    assert code == 0 and "nan" not in out.lower()
    assert "held-out run bigger" in out and "predicted" in out


def test_default_out_dir_is_in_the_working_directory_not_beside_the_input(tmp_path, monkeypatch):
    data, work = tmp_path / "readonly", tmp_path / "work"
    data.mkdir()
    work.mkdir()
    sweep(ASYMMETRIC.loss, ASYMMETRIC.n_opt).to_csv(data / "results.csv", index=False)
    data.chmod(0o555)
    monkeypatch.chdir(work)
    try:
        assert main([str(data / "results.csv"), "--no-plots", "--bootstrap", "0", "--params", "none"]) == 0
    finally:
        data.chmod(0o755)
    assert (work / "results_fit" / "fit.json").is_file()
    assert sorted(p.name for p in data.iterdir()) == ["results.csv"]


def test_help_shows_the_values_a_run_uses(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text("scaling_fit:\n  target_flops: [1.0e+13, 1.0e+14]\n  method: auto\n"
                                          "  bootstrap: 50\n")
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: [10000000000000.0, 100000000000000.0])" in text
    assert "(default: auto)" in text and "(default: 50)" in text
    assert "./<results stem>_fit" in text
