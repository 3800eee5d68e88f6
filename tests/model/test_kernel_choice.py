"""kernels: auto | all | none -> the model's switches; the selection table's reader and writer; fused projections."""

import json

import pytest
import torch

from lmw_kernels import selection
from model.core.config import ModelConfig
from model.core.kernel_choice import resolve_kernels
from model.core.transformer import TransformerLM

SMALL = ModelConfig.from_preset("small", vocab_size=32768, context_length=1024)


def test_none_and_all_set_every_switch():
    none = resolve_kernels(SMALL.replace(kernels="none"))
    assert (none.attention, none.norm, none.ffn, none.loss, none.fused_projections) == \
        ("sdpa", "torch", "torch", "torch", False)
    every = resolve_kernels(SMALL.replace(kernels="all"))
    assert (every.attention, every.norm, every.ffn, every.loss, every.fused_projections) == \
        ("triton", "triton", "triton", "fused", True)
    assert none.kernels is None and every.kernels is None
    assert resolve_kernels(SMALL) is SMALL  # no kernels setting: the switches stay as written


def test_all_keeps_sdpa_where_our_attention_cannot_run():
    gqa = resolve_kernels(SMALL.replace(n_kv_heads=4, kernels="all"))
    assert gqa.attention == "sdpa" and gqa.norm == "triton"


def test_auto_on_cpu_is_the_pytorch_path():
    auto = resolve_kernels(SMALL.replace(kernels="auto"), "cpu")
    assert auto == resolve_kernels(SMALL.replace(kernels="none"))


def test_table_round_trip_and_missing_entries(tmp_path):
    path = tmp_path / "selection.json"
    keys = selection.shape_keys(768, 12, 2048, 32768, 1024)
    selection.update("GPU X", {"norm": {keys["norm"]: {"choice": "triton"}},
                               "attention": {keys["attention"]: {"choice": "sdpa"}}}, path)
    selection.update("GPU X", {"loss": {keys["loss"]: {"choice": "fused"}}}, path)  # merged, not replaced
    chosen, notes = selection.switches("GPU X", keys, path)
    assert chosen == {"attention": "sdpa", "norm": "triton", "ffn": "torch", "loss": "fused", "projections": False}
    assert len(notes) == 2 and all("no measurement" in n for n in notes)  # ffn and projections fall back
    other, notes = selection.switches("GPU Y", keys, path)
    assert other == selection.NONE and len(notes) == len(selection.OPS)
    assert json.loads(path.read_text())["GPU X"]["norm"][keys["norm"]]["choice"] == "triton"


def test_a_broken_table_is_a_clear_error(tmp_path):
    path = tmp_path / "selection.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not a kernel selection table"):
        selection.read(path)


def test_unknown_kernels_value_is_rejected():
    with pytest.raises(ValueError, match="kernels"):
        SMALL.replace(kernels="fast")


@pytest.mark.parametrize("n_kv_heads", [None, 2])
def test_fused_projections_compute_the_separate_products(n_kv_heads):
    """Same weights, same loss and gradients whether Q/K/V and W1/W3 run as one GEMM or as five (fp32)."""
    cfg = ModelConfig.from_preset("nano", vocab_size=97, context_length=16, n_kv_heads=n_kv_heads)
    torch.manual_seed(0)
    separate = TransformerLM(cfg)
    fused = TransformerLM(cfg.replace(fused_projections=True))
    fused.load_state_dict(separate.state_dict())
    tokens = torch.randint(97, (3, 17))
    losses = []
    for model in (separate, fused):
        loss = model(tokens[:, :-1], targets=tokens[:, 1:])
        loss.backward()
        losses.append(loss.detach())
    torch.testing.assert_close(losses[0], losses[1], rtol=1e-6, atol=1e-6)
    for (name, a), (_, b) in zip(separate.named_parameters(), fused.named_parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-6, msg=name)
