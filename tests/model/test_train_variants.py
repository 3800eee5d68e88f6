"""model.train with the issue-10 switches: activation checkpointing, --profile, MoE metrics, GQA/window flags."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from model.core.config import ModelConfig
from model.core.loss import cross_entropy
from model.core.transformer import TransformerLM
from model.train import main

CFG = ModelConfig(vocab_size=64, context_length=32, d_model=32, n_layers=4, n_heads=4)


def _loss_and_grads(cfg: ModelConfig):
    torch.manual_seed(0)
    model = TransformerLM(cfg).train()
    x = torch.randint(cfg.vocab_size, (4, 33), generator=torch.Generator().manual_seed(1))
    saved = []

    def pack(t):
        saved.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = cross_entropy(model(x[:, :-1]), x[:, 1:])
    loss.backward()
    return loss.item(), {n: p.grad.clone() for n, p in model.named_parameters()}, sum(saved)


@pytest.mark.parametrize("every", [1, 2])
def test_checkpointing_keeps_loss_and_gradients_and_saves_less(every):
    loss0, grads0, saved0 = _loss_and_grads(CFG)
    loss1, grads1, saved1 = _loss_and_grads(CFG.replace(checkpoint_every=every))
    assert loss1 == pytest.approx(loss0, abs=1e-6)
    for name, grad in grads0.items():
        torch.testing.assert_close(grads1[name], grad, rtol=1e-5, atol=1e-6, msg=name)
    # bytes saved for backward during the forward pass: a checkpointed block keeps only its input
    assert saved1 < saved0 * (0.4 if every == 1 else 0.7), (saved0, saved1)


def test_checkpointing_is_off_in_eval_and_with_a_cache():
    torch.manual_seed(0)
    plain = TransformerLM(CFG).eval()
    ckpt = TransformerLM(CFG.replace(checkpoint_every=1)).eval()
    ckpt.load_state_dict(plain.state_dict())
    x = torch.randint(CFG.vocab_size, (2, 8))
    with torch.no_grad():
        torch.testing.assert_close(ckpt(x), plain(x))
        cache = ckpt.new_cache(2, 16)
        torch.testing.assert_close(ckpt(x, cache=cache), plain(x))


@pytest.fixture
def shards(tmp_path):
    rng = np.random.default_rng(0)
    for split, n in (("train", 5000), ("val", 1000)):
        rng.integers(0, 64, size=n).astype(np.uint16).tofile(tmp_path / f"{split}.bin")
    (tmp_path / "meta.json").write_text(json.dumps({"dtype": "uint16", "vocab_size": 64, "eot_id": 0}))
    return tmp_path


def test_profile_writes_a_chrome_trace_and_a_top_operators_table(shards, tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["--params", "none", "--data", str(shards), "--out-dir", str(out),
                 "--preset", "nano", "--model.context-length", "16", "--batch-size", "2", "--max-steps", "6",
                 "--warmup-steps", "1", "--device", "cpu", "--profile", "--profile-steps", "2"])
    assert code == 0
    trace = json.loads((out / "profile" / "trace.json").read_text())
    names = {event.get("name") for event in trace["traceEvents"]}
    assert {"forward", "backward", "optimizer"} <= names
    assert "ProfilerStep#2" in names and "ProfilerStep#4" not in names  # wait 1, warmup 1, record 2
    table = (out / "profile" / "top_kernels.txt").read_text()
    assert "aten::mm" in table and "Self CPU" in table
    assert "top operators by self_cpu_time_total" in capsys.readouterr().out


def test_moe_run_logs_router_metrics_and_uses_active_flops(shards, tmp_path):
    import csv

    out = tmp_path / "moe"
    code = main(["--params", "none", "--data", str(shards), "--out-dir", str(out),
                 "--preset", "nano", "--model.context-length", "16", "--batch-size", "4", "--max-steps", "4",
                 "--warmup-steps", "1", "--log-interval", "2", "--device", "cpu", "--model.n-experts", "4",
                 "--model.moe-top-k", "2", "--model.moe-capacity-factor", "0", "--model.n-kv-heads", "1",
                 "--model.sliding-window", "8"])
    assert code == 0
    rows = list(csv.DictReader(open(out / "metrics.csv", encoding="utf-8")))
    assert rows and all(r["aux_loss"] and r["moe_load"] for r in rows)
    loads = [float(v) for v in rows[-1]["moe_load"].split("/")]
    assert len(loads) == 4 and sum(loads) == pytest.approx(1.0, abs=0.01)  # no capacity limit: nothing dropped
    assert float(rows[-1]["moe_dropped"]) == 0.0
    config = json.loads((out / "config.json").read_text())["model"]
    assert config["n_experts"] == 4 and config["moe_capacity_factor"] is None
    assert config["n_kv_heads"] == 1 and config["sliding_window"] == 8
    cfg = ModelConfig.from_dict(config)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["flops"] == summary["tokens"] * cfg.flops_per_token(16)
    assert cfg.param_count(active=True) < cfg.param_count()
