"""scaling.compare against recipes generated from known laws: a recipe better everywhere, a recipe whose unique
tokens run out (its ranking flips between the ladder and the target), the paired resamples, and bad input."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize_scalar

from scaling.compare import compare_recipes, main, read_recipes
from scaling.next_runs import variance_left
from scaling.pairs import flip_flops, paired_resamples, single_scale_verdict
from scaling.runs import Runs

CHINCHILLA = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28, "R_star": 3.0}
NEVER_REPEATS = 1e15


def true_loss(n, d, u, E, A, B, alpha, beta, R_star):
    """Muennighoff et al. 2023 written out: U_D = min(D, U), R = D / U_D − 1, D' = U_D + U_D R* (1 − e^(−R/R*))."""
    seen = np.minimum(d, u)
    effective = seen + seen * R_star * (1 - np.exp(-(d / seen - 1) / R_star))
    return E + A / n ** alpha + B / effective ** beta


def true_optimum(c: float, law: dict, u: float) -> float:
    """The compute-optimal loss at C by brute force over N."""
    res = minimize_scalar(lambda x: true_loss(np.exp(x), c / (6 * np.exp(x)), u, **law),
                          bounds=(np.log(1e5), np.log(1e13)), method="bounded", options={"xatol": 1e-10})
    return float(res.fun)


def ladder_runs(name: str, law: dict, unique: float, noise: float, seed: int) -> pd.DataFrame:
    """Seven budgets 1e17-1e19, five sizes each (1/4x to 4x Chinchilla's N at D/N = 20): the same (N, D) for every
    recipe, as a shared ladder is."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in np.geomspace(1e17, 1e19, 7):
        for k in (0.25, 0.5, 1, 2, 4):
            n = np.sqrt(c / 120) * k
            rows.append((n, c / (6 * n), c))
    n, d, c = np.array(rows).T
    loss = true_loss(n, d, unique, **law) * np.exp(rng.normal(0, noise, len(n)))
    return pd.DataFrame({"recipe": name, "params": n, "tokens": d, "flops": c, "loss": loss, "unique_tokens": unique})


def write(tmp_path, *frames) -> str:
    path = tmp_path / "runs.csv"
    pd.concat(frames, ignore_index=True).to_csv(path, index=False)
    return str(path)


@pytest.mark.parametrize("share", ["exponents", "none"])
def test_a_recipe_better_everywhere_wins_with_confidence(tmp_path, share):
    worse = dict(CHINCHILLA, E=CHINCHILLA["E"] + 0.05)
    path = write(tmp_path, ladder_runs("good", CHINCHILLA, NEVER_REPEATS, 0.003, 1),
                 ladder_runs("worse", worse, NEVER_REPEATS, 0.003, 2))
    result = compare_recipes(read_recipes([path], "recipe"), bootstrap=100, share=share)
    assert result.report["share"] == share
    assert result.report["target_flops"] == pytest.approx([1e20, 1e21])  # 10x and 100x the ladder
    for pair in result.report["pairs"]:
        assert (pair["a"], pair["b"]) == ("good", "worse")
        assert pair["verdict"] == ("a" if pair["target_flops"] == 1e20 else pair["verdict"]) != "b"
        assert pair["baseline_verdict"] == "a" and pair["p_a_better"] > 0.8
        assert pair["lo"] <= -0.05 <= pair["hi"]  # the true difference: E differs by 0.05 and nothing else
        assert not np.isfinite(pair["flip_flops"])
    for row in result.report["rows"]:
        law = CHINCHILLA if row["recipe"] == "good" else worse
        truth = true_optimum(row["target_flops"], law, NEVER_REPEATS)
        assert row["lo"] <= truth <= row["hi"]


def flip_recipes() -> dict[str, pd.DataFrame]:
    """'strict': 20 % less loss per data term but 2e9 unique tokens (up to 11 epochs on the ladder); 'lenient':
    never repeats. The true compute-optimal losses cross between 1e20 and 3.2e20 FLOPs."""
    strict = dict(CHINCHILLA, B=CHINCHILLA["B"] * 0.8)
    return {"lenient": ladder_runs("lenient", CHINCHILLA, NEVER_REPEATS, 0.005, 2),
            "strict": ladder_runs("strict", strict, 2e9, 0.005, 1)}, strict


def test_a_recipe_that_runs_out_of_unique_tokens_flips_and_the_baseline_misses_it(tmp_path):
    frames, strict = flip_recipes()
    truth = {c: true_optimum(c, CHINCHILLA, NEVER_REPEATS) - true_optimum(c, strict, 2e9) for c in (1e19, 1e20, 1e21)}
    assert truth[1e19] > 0 > truth[1e21]  # strict wins on the ladder, lenient at 100x: the constructed flip
    grid = np.geomspace(1e19, 1e22, 200)
    true_diff = np.array([true_optimum(c, CHINCHILLA, NEVER_REPEATS) - true_optimum(c, strict, 2e9) for c in grid])
    true_flip = grid[np.argmax(true_diff < 0)]
    path = write(tmp_path, *frames.values())
    result = compare_recipes(read_recipes([path], "recipe"), method="data_constrained", bootstrap=100)
    far = [p for p in result.report["pairs"] if p["target_flops"] == 1e21][0]
    assert (far["a"], far["b"]) == ("lenient", "strict")
    assert far["baseline_verdict"] == "b"  # the single-scale baseline picks strict: wrong at 1e21
    assert far["verdict"] in ("a", "undecided")  # never a confident wrong call
    assert far["diff"] < 0 and far["p_a_better"] > 0.5
    assert far["lo"] <= truth[1e21] <= far["hi"]
    assert true_flip / 3 <= far["flip_flops"] <= true_flip * 3
    rows = {(r["recipe"], r["target_flops"]): r for r in result.report["rows"]}
    assert rows[("strict", 1e21)]["epochs"] > 4 and rows[("lenient", 1e21)]["epochs"] < 1e-3


def test_the_cli_writes_the_tables_pandas_users_read(tmp_path, capsys):
    frames, _ = flip_recipes()
    path = write(tmp_path, *frames.values())
    out = tmp_path / "out"
    assert main([path, "--out-dir", str(out), "--bootstrap", "30", "--no-plots", "--metrics",
                 str(tmp_path / "m.json")]) == 0
    compare = pd.read_csv(out / "compare.csv")
    assert list(compare.columns[:10]) == ["recipe", "target_flops", "distance", "loss", "lo", "hi", "n_opt", "d_opt",
                                          "unique_tokens", "epochs"]
    assert len(compare) == 4 and (compare["lo"] <= compare["loss"]).all() and (compare["loss"] <= compare["hi"]).all()
    pairs = pd.read_csv(out / "pairs.csv")
    assert list(pairs.columns) == ["a", "b", "target_flops", "diff", "lo", "hi", "p_a_better", "verdict",
                                   "flip_flops", "baseline_verdict"]
    assert set(pairs["verdict"]) <= {"a", "b", "undecided"}
    headline = json.loads((tmp_path / "m.json").read_text())
    assert set(headline) >= {"law", "loss_lenient", "loss_strict", "verdict_lenient_vs_strict"}
    assert "single-scale" in capsys.readouterr().out


def test_paired_resamples_draw_the_same_ladder_points_for_every_recipe():
    rng = np.random.default_rng(0)
    n = np.array([1.0, 2, 3, 1, 2, 3, 4])
    d = np.array([10.0, 5, 3, 20, 10, 7, 5])
    runs = {"a": Runs(n, d, 6 * n * d, np.ones(7), budget=6 * n * d), "b": Runs(n[::-1], d[::-1], 6 * n[::-1] *
                                                                               d[::-1], np.ones(7),
                                                                               budget=(6 * n * d)[::-1])}
    for picks in paired_resamples(runs, 20, rng):
        drawn = {r: sorted(zip(runs[r].n[i], runs[r].d[i], strict=True)) for r, i in picks.items()}
        assert drawn["a"] == drawn["b"] and len(drawn["a"]) == 7


def test_flip_flops_and_the_single_scale_baseline_against_hand_computed_cases():
    grid = np.array([1.0, 10.0, 100.0, 1000.0])
    log_a, log_b = np.log([1.0, 1.0, 1.0, 1.0]), np.log([1.2, 1.1, 0.9, 0.8])
    # r = ln a − ln b: −0.182, −0.095, +0.105, +0.223; the sign changes between 10 and 100, at t = 0.095/0.2
    t = np.log(1.1) / (np.log(1.1) - np.log(0.9))
    assert flip_flops(grid, log_a, log_b, 1.0) == pytest.approx(10 ** (1 + t))
    assert np.isnan(flip_flops(grid, log_a, log_a + 0.1, 1.0))
    a = Runs(np.array([1.0, 2, 1, 2]), np.ones(4), np.array([1.0, 1, 4, 4]), np.array([3.0, 2.9, 2.5, 2.6]),
             budget=np.array([1.0, 1, 4, 4]))
    b = Runs(a.n, a.d, a.c, np.array([2.0, 2.1, 2.7, 2.55]), budget=a.budget)
    assert single_scale_verdict(a, b) == ("a", 4.0)  # 2.5 < 2.55 at the largest budget, whatever budget 1 says


def test_variance_left_is_the_gaussian_conditional_variance():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(20000, 2))
    q = z[:, 0]
    x = np.stack([0.8 * z[:, 0] + 0.6 * z[:, 1], z[:, 1]], axis=1)  # corr(q, x0) = 0.8, corr(q, x1) = 0
    left = variance_left(q, [x], [0.0])
    assert left[0] == pytest.approx(1 - 0.64, abs=0.02) and left[1] == pytest.approx(1.0, abs=0.02)


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    frames, _ = flip_recipes()
    path = write(tmp_path, *frames.values())
    assert main([path, "--by", "dataset", "--no-plots", "--out-dir", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no column 'dataset'" in err and "runs.csv" in err
    single = write(tmp_path, frames["strict"])
    assert main([single, "--no-plots", "--out-dir", str(tmp_path / "o")]) == 2
    assert "need two or more" in capsys.readouterr().err
    assert main([path, "--method", "parametric,isoflop", "--no-plots"]) == 2
    assert "one law for every recipe" in capsys.readouterr().err
