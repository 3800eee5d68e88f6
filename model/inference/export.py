"""Hugging Face Llama interchange: export a TransformerLM as ``LlamaForCausalLM`` and import one back.

The two layouts differ in naming and in one real respect: our RoPE rotates consecutive pairs
(x[2i], x[2i+1]) while HF Llama's ``rotate_half`` pairs x[i] with x[i + d_head/2], both at frequency
θ^(-2i/d_head). Reordering each head's q/k projection rows to [0, 2, …, d-2, 1, 3, …, d-1] turns one
into the other; attention scores are unchanged because q and k are permuted alike. Grouped-query
attention maps n_kv_heads to ``num_key_value_heads`` (HF groups query heads like we do: head h uses
K/V head h // (n_heads / n_kv_heads)); sliding-window attention and MoE have no Llama equivalent.

safetensors is imported lazily so ``model`` keeps working with only torch and numpy installed.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from model.core.config import ModelConfig
from model.training.checkpoint import check_tokenizer, load_model
from workbench.files import tokenizer_identity, write_bytes, write_json
from workbench.params import REQUIRED, parse_flags, setting

# our per-layer suffix -> HF per-layer suffix (under "layers.{i}." and "model.layers.{i}." respectively)
_LAYER_NAMES = {
    "ln1.weight": "input_layernorm.weight",
    "attn.q_proj.weight": "self_attn.q_proj.weight",
    "attn.k_proj.weight": "self_attn.k_proj.weight",
    "attn.v_proj.weight": "self_attn.v_proj.weight",
    "attn.output_proj.weight": "self_attn.o_proj.weight",
    "ln2.weight": "post_attention_layernorm.weight",
    "ffn.w1.weight": "mlp.gate_proj.weight",
    "ffn.w3.weight": "mlp.up_proj.weight",
    "ffn.w2.weight": "mlp.down_proj.weight",
}
_ROPE_PERMUTED = ("attn.q_proj.weight", "attn.k_proj.weight")


def _name_map(cfg: ModelConfig) -> dict[str, str]:
    """Our state-dict key -> HF key, lm_head included only for an untied head."""
    names = {"token_embeddings.weight": "model.embed_tokens.weight", "ln_final.weight": "model.norm.weight"}
    if not cfg.tie_embeddings:
        names["lm_head.weight"] = "lm_head.weight"
    for i in range(cfg.n_layers):
        names.update({f"layers.{i}.{ours}": f"model.layers.{i}.{hf}" for ours, hf in _LAYER_NAMES.items()})
    return names


def _rope_order(d_head: int) -> Tensor:
    """Row order taking a head from pair-interleaved to half-split RoPE layout."""
    return torch.cat((torch.arange(0, d_head, 2), torch.arange(1, d_head, 2)))


def _permute_heads(weight: Tensor, d_head: int, order: Tensor) -> Tensor:
    """Reorder the output rows of a (n_heads·d_head, d_in) projection within each head."""
    return weight.reshape(-1, d_head, weight.shape[-1])[:, order].reshape(weight.shape)


def _to_dtype(dtype: torch.dtype | str | None) -> torch.dtype | None:
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    resolved = getattr(torch, dtype.removeprefix("torch."), None)
    if not isinstance(resolved, torch.dtype):
        raise ValueError(f"unknown dtype {dtype!r}")
    return resolved


def llama_config(cfg: ModelConfig, dtype: torch.dtype) -> dict:
    """The ``config.json`` of a LlamaForCausalLM with our shapes (readable by transformers 4 and 5)."""
    dtype_name = str(dtype).removeprefix("torch.")
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.d_model,
        "intermediate_size": cfg.d_ff,
        "num_hidden_layers": cfg.n_layers,
        "num_attention_heads": cfg.n_heads,
        "num_key_value_heads": cfg.n_kv_heads,
        "head_dim": cfg.d_head,
        "max_position_embeddings": cfg.context_length,
        "rms_norm_eps": cfg.norm_eps,
        # transformers 5 reads rope_parameters; 4.x reads the top-level rope_theta (5 accepts it too)
        "rope_theta": cfg.rope_theta,
        "rope_parameters": {"rope_type": "default", "rope_theta": cfg.rope_theta},
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": cfg.tie_embeddings,
        "bos_token_id": None,
        "eos_token_id": None,
        "dtype": dtype_name,
        "torch_dtype": dtype_name,
    }


def export_llama(model_or_state_dict: nn.Module | Mapping[str, Tensor], cfg: ModelConfig, out_dir: str | Path,
                 dtype: torch.dtype | str | None = None, *, config_overrides: Mapping | None = None) -> Path:
    """Write ``out_dir`` as a HF LlamaForCausalLM folder (config.json + model.safetensors); return it.

    dtype: cast floating tensors to it (default: keep the embedding's dtype). config_overrides: extra
    or replacement config.json fields, e.g. ``{"eos_token_id": 256}``. An existing out_dir is replaced
    atomically: files go to a temporary folder beside it, which is then renamed into place."""
    if cfg.qk_norm:
        raise ValueError("cannot export qk_norm=True as Llama: LlamaForCausalLM has no QK-norm")
    if cfg.sliding_window is not None:
        raise ValueError(f"cannot export sliding_window={cfg.sliding_window} as Llama: LlamaForCausalLM "
                         f"attends to the whole context")
    if cfg.n_experts > 0:
        raise ValueError(f"cannot export n_experts={cfg.n_experts} (MoE) as Llama: LlamaForCausalLM is dense")
    from safetensors.torch import save_file

    state = model_or_state_dict.state_dict() if isinstance(model_or_state_dict, nn.Module) else model_or_state_dict
    names = _name_map(cfg)
    missing = sorted(set(names) - set(state))
    unexpected = sorted(set(state) - set(names) - {"lm_head.weight"})
    if missing or unexpected:
        raise ValueError(f"state dict does not match the config: missing {missing}, unexpected {unexpected}")
    head = state.get("lm_head.weight")
    if cfg.tie_embeddings and head is not None and not torch.equal(head, state["token_embeddings.weight"]):
        raise ValueError("cfg.tie_embeddings=True but lm_head.weight differs from token_embeddings.weight")

    dtype = _to_dtype(dtype) or state["token_embeddings.weight"].dtype
    config = {**llama_config(cfg, dtype), **(config_overrides or {})}
    order = _rope_order(cfg.d_head)
    tensors = {}
    for ours, hf in names.items():
        weight = state[ours].detach().to("cpu")
        if weight.is_floating_point():
            weight = weight.to(dtype)
        if ours.endswith(_ROPE_PERMUTED):
            weight = _permute_heads(weight, cfg.d_head, order)
        tensors[hf] = weight.contiguous()

    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise FileExistsError(f"{out_dir} exists and is not a directory")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_dir.with_name(f".{out_dir.name}.tmp-{uuid.uuid4().hex[:8]}")
    tmp.mkdir()
    try:
        save_file(tensors, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        _replace_dir(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def _replace_dir(src: Path, dst: Path) -> None:
    """Move src to dst; an existing dst is moved aside first and deleted only once src is in place."""
    if not dst.exists():
        os.replace(src, dst)
        return
    old = dst.with_name(f".{dst.name}.old-{uuid.uuid4().hex[:8]}")
    os.replace(dst, old)
    try:
        os.replace(src, dst)
    except BaseException:
        os.replace(old, dst)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _check_supported(hf: dict) -> None:
    """Raise ValueError naming the first config.json field our TransformerLM cannot represent."""
    heads = hf["num_attention_heads"]
    kv_heads = hf.get("num_key_value_heads") or heads
    rope_field = "rope_parameters" if hf.get("rope_parameters") else "rope_scaling"
    rope = hf.get(rope_field) or {}
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    checks = [  # (field, value, supported)
        ("model_type", hf.get("model_type"), hf.get("model_type", "llama") == "llama"),
        ("num_key_value_heads", hf.get("num_key_value_heads"), isinstance(kv_heads, int) and kv_heads > 0
         and heads % kv_heads == 0),
        ("head_dim", hf.get("head_dim"), hf.get("head_dim") in (None, hf["hidden_size"] // heads)),
        ("hidden_act", hf.get("hidden_act"), hf.get("hidden_act", "silu") == "silu"),
        ("attention_bias", hf.get("attention_bias"), not hf.get("attention_bias", False)),
        ("mlp_bias", hf.get("mlp_bias"), not hf.get("mlp_bias", False)),
        (f"{rope_field}.rope_type", rope_type, rope_type == "default"),
        ("partial_rotary_factor", rope.get("partial_rotary_factor", hf.get("partial_rotary_factor")),
         rope.get("partial_rotary_factor", hf.get("partial_rotary_factor", 1.0)) == 1.0),
    ]
    for field, value, supported in checks:
        if not supported:
            raise ValueError(f"unsupported Llama config: {field}={value!r} (TransformerLM cannot represent it)")


def _load_safetensors(hf_dir: Path) -> dict[str, Tensor]:
    from safetensors.torch import load_file

    index = hf_dir / "model.safetensors.index.json"
    if not index.exists():
        return load_file(str(hf_dir / "model.safetensors"))
    shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
    return {name: t for shard in shards for name, t in load_file(str(hf_dir / shard)).items()}


def import_llama(hf_dir: str | Path) -> tuple[ModelConfig, dict[str, Tensor]]:
    """Read a HF Llama folder into (ModelConfig, state dict) for ``TransformerLM.load_state_dict``."""
    hf_dir = Path(hf_dir)
    hf = json.loads((hf_dir / "config.json").read_text(encoding="utf-8"))
    _check_supported(hf)
    rope = hf.get("rope_parameters") or {}
    cfg = ModelConfig(
        vocab_size=hf["vocab_size"], context_length=hf["max_position_embeddings"], d_model=hf["hidden_size"],
        n_layers=hf["num_hidden_layers"], n_heads=hf["num_attention_heads"], d_ff=hf["intermediate_size"],
        rope_theta=float(rope.get("rope_theta", hf.get("rope_theta", 10000.0))),
        norm_eps=float(hf.get("rms_norm_eps", 1e-6)), tie_embeddings=bool(hf.get("tie_word_embeddings", False)),
        n_kv_heads=hf.get("num_key_value_heads") or hf["num_attention_heads"],
    )
    tensors = _load_safetensors(hf_dir)
    names = _name_map(cfg)
    missing = sorted(hf_name for hf_name in names.values() if hf_name not in tensors)
    if missing:
        raise ValueError(f"{hf_dir}: checkpoint lacks {len(missing)} tensor(s), e.g. {missing[:3]}")
    kv_shape = (cfg.n_kv_heads * cfg.d_head, cfg.d_model)
    for hf_name in (hf for ours, hf in names.items() if ours.endswith(("attn.k_proj.weight", "attn.v_proj.weight"))):
        if tuple(tensors[hf_name].shape) != kv_shape:
            raise ValueError(f"{hf_dir}: num_key_value_heads={cfg.n_kv_heads} expects {hf_name} of shape "
                             f"{kv_shape}, got {tuple(tensors[hf_name].shape)}")

    inverse = torch.argsort(_rope_order(cfg.d_head))
    state = {}
    for ours, hf_name in names.items():
        weight = tensors[hf_name]
        state[ours] = _permute_heads(weight, cfg.d_head, inverse).contiguous() if ours.endswith(_ROPE_PERMUTED) \
            else weight
    if cfg.tie_embeddings:
        state["lm_head.weight"] = state["token_embeddings.weight"]
    return cfg, state


def _add_tokenizer(tokenizer_dir: Path, out_dir: Path, eos_token: str) -> None:
    """Copy tokenizer.json and write a tokenizer_config.json so AutoTokenizer loads the folder."""
    source = tokenizer_dir / "tokenizer.json"
    if not source.is_file():
        raise FileNotFoundError(f"{source}: missing (run `python -m pipeline train-tokenizer`)")
    write_bytes(out_dir / "tokenizer.json", source.read_bytes())
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": eos_token, "bos_token": eos_token,
              "pad_token": eos_token, "model_max_length": json.loads((out_dir / "config.json").read_text())
              ["max_position_embeddings"], "clean_up_tokenization_spaces": False}
    write_json(out_dir / "tokenizer_config.json", config, sort_keys=False)


@dataclass(frozen=True)
class ExportSettings:
    checkpoint: str = setting(REQUIRED, "run folder (newest good checkpoint) or a ckpt-*.pt file", positional=True)
    out_dir: str = setting(REQUIRED, "output folder: config.json + model.safetensors (+ tokenizer)", positional=True)
    tokenizer: str | None = setting(None, "tokenizer folder (with tokenizer.json) to bundle")
    eos_token: str = setting("<|endoftext|>", "end-of-text special token")
    dtype: str | None = setting(None, "weight dtype: float32, bfloat16 or float16 (none: as saved)",
                                choices=("float32", "bfloat16", "float16"))


def main(argv: list[str] | None = None) -> int:
    args = parse_flags(ExportSettings, argv, prog="python -m model.inference.export",
                       description="Export a run's checkpoint as a Hugging Face LlamaForCausalLM folder.")
    checkpoint, out_dir = Path(args.checkpoint), Path(args.out_dir)
    tokenizer = Path(args.tokenizer) if args.tokenizer else None
    try:
        model = load_model(checkpoint)
        overrides = {}
        if tokenizer:
            check_tokenizer(model.tokenizer_identity, tokenizer_identity(tokenizer), checkpoint,
                            tokenizer)
            vocab = json.loads((tokenizer / "vocab.json").read_text(encoding="utf-8"))
            if args.eos_token not in vocab:
                raise ValueError(f"{tokenizer}/vocab.json has no {args.eos_token!r} token")
            eos_id = vocab[args.eos_token]
            overrides = {"eos_token_id": eos_id, "bos_token_id": eos_id, "pad_token_id": eos_id}
        export_llama(model, model.cfg, out_dir, args.dtype, config_overrides=overrides)
        if tokenizer:
            _add_tokenizer(tokenizer, out_dir, args.eos_token)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"exported {checkpoint} -> {out_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
