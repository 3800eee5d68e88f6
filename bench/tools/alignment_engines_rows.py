"""bench.benchmarks.alignment_engines' report (the dict ``--out`` writes) as results rows (bench.tools.results).

Rows, per part and engine (names without spaces, for a results marker's ``names=``):

- ``rollout/ours``, ``rollout/hf_generate``: ``new_tokens_per_s``, median and min-max over the repeats (the two
  engines in turns); ours carries HF ``generate`` of the same run as baseline, ratio ours / HF (> 1: ours faster).
  ``rollout/ours`` also has ``pair_speedup`` (HF seconds / ours seconds of each interleaved pair: the spread of the
  ratio within the run) and ``greedy_match`` (prompts whose greedy outputs equal HF's).
- ``grpo/ours``, ``grpo/ours-hf`` (our loop on the HF Llama export), ``grpo/trl``: ``s_per_step`` over the timed
  steps, ours against TRL's GRPOTrainer of the same run, ratio TRL / ours (> 1: ours faster); our loops' split of a
  step into ``rollout_s_per_step`` and ``train_s_per_step``; peak memory of each engine's process as its own metric
  (``peak_rss_mib``, plus ``peak_cuda_mib`` on CUDA), ratio ours / TRL (< 1: ours needs less); the work behind a
  step, ``response_tokens`` (mean tokens trained per response, over the timed steps), ratio ours / TRL.
- ``model/<preset>``: ``params_m``, the model both sides ran.

The settings go into each row's unit (what a reader needs to compare) and ``extra`` (all of them).
"""

from __future__ import annotations

import statistics

from bench.tools.results import Result, timing_result

TRL = "TRL GRPOTrainer"
HF_GENERATE = "HF generate"


def _spread(name: str, metric: str, values: list[float], unit: str, baseline: str | None = None,
            baseline_value: float | None = None, ratio: float | None = None, extra: dict | None = None) -> Result:
    med = statistics.median(values)
    return Result(name, metric, med, unit, baseline, baseline_value, ratio, len(values), min(values), med,
                  max(values), extra or {})


def rollout_rows(rollout: dict, extra: dict) -> list[Result]:
    new = rollout["prompts"] * rollout["new_tokens"]
    ours = [new / s for s in rollout["ours_seconds"]]
    hf = [new / s for s in rollout["hf_seconds"]]
    unit = (f"new tok/s, {rollout['prompts']} prompts x ({rollout['prompt_len']}+{rollout['new_tokens']}) tok, "
            f"{rollout['dtype']}")
    extra = {**extra, "rollout": {k: rollout[k] for k in ("prompts", "prompt_len", "new_tokens", "dtype")}}
    pairs = [h / o for o, h in zip(rollout["ours_seconds"], rollout["hf_seconds"], strict=True)]
    matched, tried = (int(x) for x in rollout["greedy_match"].split("/"))
    return [_spread("rollout/ours", "new_tokens_per_s", ours, unit, HF_GENERATE, statistics.median(hf),
                    extra=extra),
            _spread("rollout/hf_generate", "new_tokens_per_s", hf, unit, extra=extra),
            _spread("rollout/ours", "pair_speedup", pairs, "x, HF s / ours s per interleaved pair", extra=extra),
            Result("rollout/ours", "greedy_match", matched, f"of {tried} prompts equal to HF, greedy", extra=extra)]


def grpo_rows(grpo: dict, extra: dict) -> list[Result]:
    settings = grpo["settings"]
    unit = (f"s/step, {settings['rollout_batch']} rollouts ({settings['rollout_batch'] // settings['group']} x "
            f"group {settings['group']}), {settings['grpo_tokens']} tok")
    extra = {**extra, "grpo": settings}
    engines = {e: r for e, r in grpo.items() if e != "settings" and "error" not in r}
    trl = engines.get("trl")
    rows = []
    for engine, res in engines.items():
        name = f"grpo/{engine}"
        vs = trl is not None and engine != "trl"
        row = timing_result(name, "s_per_step", res["step_seconds"], TRL if vs else None,
                            trl["step_seconds"] if vs else None, unit=unit)
        row.extra = extra
        rows.append(row)
        for part in ("rollout", "train"):
            if f"{part}_step_seconds" in res:
                row = timing_result(name, f"{part}_s_per_step", res[f"{part}_step_seconds"], unit="s/step")
                row.extra = extra
                rows.append(row)
        if res.get("response_tokens"):
            base = trl.get("response_tokens") if vs else None
            rows.append(_spread(name, "response_tokens", res["response_tokens"], "tokens trained per response",
                                TRL if base else None, statistics.median(base) if base else None, extra=extra))
        for metric, key in (("peak_rss_mib", "peak_rss_mb"), ("peak_cuda_mib", "peak_cuda_mb")):
            if key in res:
                base = trl.get(key) if vs else None
                rows.append(Result(name, metric, res[key], "MiB, process peak", TRL if base else None, base,
                                   extra=extra))
    return rows


def results_rows(report: dict) -> list[Result]:
    """Rows for every part in ``report`` (bench.benchmarks.alignment_engines.main's dict); a failed GRPO engine gives
    none, and without TRL our rows have no baseline."""
    extra = {k: report[k] for k in ("device", "torch", "transformers", "trl") if k in report}
    model = report["model"]
    preset = model["model"].split()[1] if model["model"].startswith("preset ") else "checkpoint"
    rows = [Result(f"model/{preset}", "params_m", model["params_m"],
                   f"M params, d_model {model['d_model']}, {model['n_layers']} layers, vocab {model['vocab']}",
                   extra={**extra, "model": model})]
    if "rollout" in report:
        rows += rollout_rows(report["rollout"], extra)
    if "grpo" in report:
        rows += grpo_rows(report["grpo"], extra)
    return rows
