"""``--engine trl``: SFT, DPO and GRPO run through TRL's trainers on a tiny local LlamaForCausalLM (byte-level GPT-2
tokenizer built here, no hub access). References: SFT's first logged loss equals the mean completion NLL computed
by a plain log_softmax over the untouched model; DPO's first loss is log 2 (policy == reference); GRPO's logged
reward mean equals the mean of the rewards our reward function returned, and every group of ``group_size`` calls
scores one training item. The TRL config objects are checked field by field against the mapping in the module
docstring; our checkpoints are rejected with a ValueError naming the path."""

from __future__ import annotations

import json
import math
from dataclasses import fields

import pandas as pd
import pytest
import torch

pytest.importorskip("trl")
transformers = pytest.importorskip("transformers")

from alignment import trl_engine  # noqa: E402
from alignment.dpo import DPOConfig, train_dpo  # noqa: E402
from alignment.grpo import GRPOConfig, train_grpo  # noqa: E402
from alignment.sft import SFTConfig, train_sft  # noqa: E402
from alignment.tasks.arithmetic import sft_example  # noqa: E402
from alignment.tasks.data import load_pairs, load_task  # noqa: E402
from model.core.config import ModelConfig  # noqa: E402
from model.core.transformer import TransformerLM  # noqa: E402
from model.training.checkpoint import save_checkpoint  # noqa: E402
from tests.alignment.helpers import byte_tokenizer  # noqa: E402

EOS = 256
pytestmark = pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")  # TRL's


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table (openai/gpt-2 encoder.py)."""
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def _make_hf(folder, seed: int):
    """A local HF folder: a 1-layer LlamaForCausalLM and a byte-level GPT-2 tokenizer (ids = UTF-8 bytes, EOS 256)."""
    vocab = {ch: b for b, ch in _bytes_to_unicode().items()}
    vocab["<|endoftext|>"] = EOS
    tok = transformers.GPT2TokenizerFast(vocab=vocab, merges=[])
    assert tok("a 1").input_ids == [97, 32, 49]
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(vocab_size=257, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256,
                                      bos_token_id=EOS, eos_token_id=EOS, pad_token_id=EOS)
    transformers.LlamaForCausalLM(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    return _make_hf(tmp_path_factory.mktemp("hf_model"), seed=0)


def _load(folder):
    return transformers.AutoModelForCausalLM.from_pretrained(folder, local_files_only=True).eval()


def _check_outputs(out, summary):
    model = _load(out / "hf")
    assert isinstance(model, transformers.LlamaForCausalLM)
    assert summary["checkpoint"] == str(out / "hf") and 0.0 <= summary["accuracy"] <= 1.0 and summary["n"] == 2
    df = pd.read_csv(out / "metrics.csv")
    assert len(df) >= 1 and df["step"].tolist() == list(range(1, len(df) + 1)) and df["loss"].notna().all()
    return df


def naive_logps(model, prompt: str, completion: str) -> list[float]:
    """log p(t | prefix) of each completion byte + EOS given the prompt, one sequence, float64 log_softmax."""
    p, c = list(prompt.encode()), list(completion.encode()) + [EOS]
    ids = torch.tensor([p + c])
    with torch.no_grad():
        logp = torch.log_softmax(model(ids[:, :-1]).logits[0].double(), dim=-1)  # (T-1, V)
    return [float(logp[len(p) - 1 + j, token]) for j, token in enumerate(c)]


def naive_completion_nll(model, pairs: list[tuple[str, str]]) -> float:
    """Mean NLL over all completion bytes + EOS of the pairs."""
    logps = [x for prompt, completion in pairs for x in naive_logps(model, prompt, completion)]
    return -sum(logps) / len(logps)


def test_sft_trl_first_loss_matches_naive_nll_and_loss_drops(hf_dir, tmp_path):
    out = tmp_path / "sft"
    cfg = SFTConfig(model=str(hf_dir), n_train=4, n_test=2, steps=6, batch_size=4, lr=1e-2, warmup_steps=0,
                    max_new_tokens=6, out_dir=str(out), engine="trl", report=str(tmp_path / "report.csv"),
                    metrics=str(tmp_path / "m" / "sft.json"))
    train, _ = load_task(cfg)
    reference = naive_completion_nll(_load(hf_dir), [sft_example(item, cfg.template) for item in train])
    summary = train_sft(cfg)
    df = _check_outputs(out, summary)
    assert len(df) == 6
    assert df["loss"].iloc[0] == pytest.approx(reference, abs=2e-3)  # batch 4 = the whole (repeated) data set
    assert df["loss"].iloc[-1] < df["loss"].iloc[0] - 0.3
    assert df["learning_rate"].iloc[0] == pytest.approx(1e-2)  # cosine to lr/10: lr at step s is for index s-1
    assert df["learning_rate"].iloc[-1] == pytest.approx(1e-3 + 0.5 * 9e-3 * (1 + math.cos(math.pi * 5 / 6)))
    assert json.loads((tmp_path / "m" / "sft.json").read_text())["accuracy"] == summary["accuracy"]
    assert pd.read_csv(tmp_path / "report.csv")["stage"].tolist() == ["sft"]
    assert json.loads((out / "config.json").read_text())["sft"]["engine"] == "trl"


def test_dpo_trl_first_loss_is_log2_and_saves(hf_dir, tmp_path):
    out = tmp_path / "dpo"
    cfg = DPOConfig(model=str(hf_dir), n_train=8, n_test=2, steps=3, batch_size=4, lr=1e-2, warmup_steps=0,
                    max_new_tokens=6, out_dir=str(out), beta=0.5)
    if any(f.name == "engine" for f in fields(DPOConfig)):  # the loop dispatches to TRL itself
        summary = train_dpo(DPOConfig(**{**{f.name: getattr(cfg, f.name) for f in fields(cfg)}, "engine": "trl"}))
    else:
        summary = trl_engine.train_dpo_trl(cfg)
    df = _check_outputs(out, summary)
    assert len(df) == 3
    assert df["loss"].iloc[0] == pytest.approx(math.log(2), abs=1e-5)  # policy == frozen reference at step 1
    assert df["rewards/margins"].iloc[0] == pytest.approx(0.0, abs=1e-5)
    assert df["loss"].iloc[-1] < math.log(2)
    assert summary["pref_n"] == len(load_pairs(cfg)[1]) and 0.0 <= summary["pref_accuracy"] <= 1.0


def test_dpo_trl_uses_the_given_reference_model(hf_dir, tmp_path):
    other = _make_hf(tmp_path / "other", seed=1)
    cfg = DPOConfig(model=str(hf_dir), reference=str(other), n_train=4, n_test=1, steps=1, batch_size=4, lr=1e-3,
                    warmup_steps=0, max_new_tokens=2, out_dir=str(tmp_path / "dpo_ref"), beta=0.5)
    policy, reference = _load(hf_dir), _load(other)
    losses = []
    for pair in load_pairs(cfg)[0]:  # batch 4 = all the pairs: -log σ(β((π-ref)(chosen) - (π-ref)(rejected)))
        diff = [sum(naive_logps(policy, pair["prompt"], pair[k])) - sum(naive_logps(reference, pair["prompt"], pair[k]))
                for k in ("chosen", "rejected")]
        losses.append(-math.log(1 / (1 + math.exp(-cfg.beta * (diff[0] - diff[1])))))
    trl_engine.train_dpo_trl(cfg)
    df = pd.read_csv(tmp_path / "dpo_ref" / "metrics.csv")
    assert df["loss"].iloc[0] == pytest.approx(sum(losses) / len(losses), abs=1e-4)
    assert abs(df["rewards/margins"].iloc[0]) > 1e-3  # not the policy's own copy


def test_grpo_trl_rewards_come_from_our_reward_fn_per_group(hf_dir, tmp_path):
    out = tmp_path / "grpo"
    cfg = GRPOConfig(model=str(hf_dir), n_train=8, n_test=2, steps=2, rollout_batch_size=4, group_size=2,
                     train_batch_size=4, grad_accum=2, lr=1e-3, max_new_tokens=6, template="short",
                     out_dir=str(out), engine="trl", kl_coef=0.01)
    calls: list[tuple[str, dict, float]] = []

    def reward_fn(response: str, item: dict) -> dict:
        reward = float(len(response.encode()) % 3)  # varies between samples, so advantages are not all zero
        calls.append((response, item, reward))
        return {"reward": reward, "format_reward": float(reward > 0), "answer_reward": 0.0}

    summary = train_grpo(cfg, reward_fn=reward_fn)
    df = _check_outputs(out, summary)
    assert len(df) == 2 and len(calls) == cfg.steps * cfg.rollout_batch_size
    train, _ = load_task(cfg)
    for k in range(0, len(calls), cfg.group_size):  # each group: group_size samples of one training item
        group = calls[k: k + cfg.group_size]
        assert all(item == group[0][1] for _, item, _ in group) and group[0][1] in train
    per_step = [sum(r for _, _, r in calls[i: i + 4]) / 4 for i in range(0, len(calls), 4)]
    assert df["rewards/task_reward/mean"].tolist() == pytest.approx(per_step)
    assert df["reward"].tolist() == pytest.approx(per_step)
    formats = [sum(r > 0 for _, _, r in calls[i: i + 4]) / 4 for i in range(0, len(calls), 4)]
    assert df["rewards/format_mean"].tolist() == pytest.approx(formats) and (df["rewards/answer_mean"] == 0).all()


def test_grpo_trl_config_maps_every_knob():
    cfg = GRPOConfig(model="m", steps=3, lr=2e-5, rollout_batch_size=16, group_size=4, train_batch_size=8,
                     grad_accum=2, epochs_per_rollout_batch=2, loss_type="grpo_clip", normalize_by_std=False,
                     cliprange=0.2, cliprange_low=0.1, cliprange_high=0.28, length_normalization="constant",
                     kl_coef=0.04, temperature=0.7, top_p=0.9, max_new_tokens=33, grad_clip=0.5, weight_decay=0.01,
                     warmup_steps=2, seed=7, out_dir="runs/x")
    args = trl_engine.grpo_trl_config(cfg)
    assert (args.num_generations, args.generation_batch_size) == (4, 16)
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps, args.steps_per_generation) == (4, 2, 4)
    assert args.max_steps == 3 * (16 // 8) * 2 and args.num_iterations == 2
    assert (args.epsilon, args.epsilon_high, args.beta) == (0.1, 0.28, 0.04)
    assert (args.scale_rewards, args.loss_type, args.max_completion_length) == ("none", "dr_grpo", 33)
    assert (args.temperature, args.top_p, args.learning_rate, args.max_grad_norm) == (0.7, 0.9, 2e-5, 0.5)
    assert (args.adam_beta1, args.adam_beta2, args.weight_decay, args.warmup_steps) == (0.9, 0.95, 0.01, 2 * 4)
    assert args.seed == args.data_seed == 7
    assert args.lr_scheduler_type == "constant_with_warmup" and args.report_to == [] and not args.bf16
    assert args.output_dir.replace("\\", "/").endswith("runs/x/trl") and args.save_strategy == "steps"
    assert args.save_steps == cfg.ckpt_interval * (16 // 8) * 2 and args.save_total_limit == cfg.keep_last
    default = trl_engine.grpo_trl_config(GRPOConfig(model="m", rollout_batch_size=8, group_size=4, train_batch_size=8,
                                                    grad_accum=1))
    assert (default.scale_rewards, default.loss_type, default.epsilon, default.epsilon_high) == ("group", "grpo", 0.2,
                                                                                                 0.2)
    low_only = trl_engine.grpo_trl_config(GRPOConfig(model="m", rollout_batch_size=8, group_size=4, train_batch_size=8,
                                                     grad_accum=1, cliprange=0.3, cliprange_low=0.1))
    assert (low_only.epsilon, low_only.epsilon_high) == (0.1, 0.3)  # alignment.core.losses: the unset side is cliprange
    assert default.max_steps == 200 and default.use_cpu
    with pytest.raises(ValueError, match="no_baseline"):
        trl_engine.grpo_trl_config(GRPOConfig(model="m", loss_type="no_baseline"))


def test_sft_and_dpo_trl_configs_map_the_knobs():
    sft = trl_engine.sft_trl_config(SFTConfig(model="m", lr=3e-4, steps=11, batch_size=5, grad_accum=3,
                                              warmup_steps=4, weight_decay=0.1, grad_clip=2.0, seed=3))
    assert (sft.learning_rate, sft.max_steps, sft.per_device_train_batch_size, sft.gradient_accumulation_steps) == \
        (3e-4, 11, 5, 3)
    assert (sft.warmup_steps, sft.weight_decay, sft.max_grad_norm, sft.seed) == (4, 0.1, 2.0, 3)
    assert sft.lr_scheduler_type == "cosine_with_min_lr" and sft.lr_scheduler_kwargs == {"min_lr_rate": 0.1}
    assert sft.completion_only_loss is True and sft.logging_steps == 1 and not sft.fp16 and not sft.bf16
    dpo = trl_engine.dpo_trl_config(DPOConfig(model="m", beta=0.3, lr=5e-5, steps=9, batch_size=2, grad_accum=4))
    assert (dpo.beta, dpo.learning_rate, dpo.max_steps, dpo.per_device_train_batch_size) == (0.3, 5e-5, 9, 2)
    assert dpo.gradient_accumulation_steps == 4 and dpo.loss_type == ["sigmoid"] and dpo.save_strategy == "steps"


@pytest.fixture()
def our_run(tmp_path):
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig.from_preset("nano", vocab_size=257, context_length=64))
    save_checkpoint(tmp_path / "ours", 0, {"model": model.state_dict(), "model_config": model.cfg.to_dict()})
    return tmp_path / "ours", model


def test_our_checkpoint_with_engine_trl_is_rejected_naming_the_path(our_run, tmp_path):
    run, model = our_run
    with pytest.raises(ValueError, match=r"model\.inference\.export") as err:
        train_sft(SFTConfig(model=str(run), engine="trl", out_dir=str(tmp_path / "o")))
    assert str(run) in str(err.value)
    with pytest.raises(ValueError, match=str(run)):
        train_grpo(GRPOConfig(model=str(run), engine="trl", rollout_batch_size=8, group_size=4, train_batch_size=8,
                              grad_accum=1, out_dir=str(tmp_path / "o")))
    with pytest.raises(ValueError, match=str(run)):  # the model object itself (as the CLI passes it)
        trl_engine.train_sft_trl(SFTConfig(model=str(run), engine="trl", out_dir=str(tmp_path / "o")), model, None)
    with pytest.raises(ValueError, match="no_such"):
        trl_engine.train_dpo_trl(DPOConfig(model=str(tmp_path / "no_such"), out_dir=str(tmp_path / "o")))
    assert not (tmp_path / "o" / "metrics.csv").exists()


def test_hf_model_with_a_non_hf_tokenizer_is_rejected(hf_dir, tmp_path):
    with pytest.raises(ValueError, match="Hugging Face tokenizer"):
        trl_engine.train_sft_trl(SFTConfig(model=str(hf_dir), engine="trl", out_dir=str(tmp_path / "o")),
                                 _load(hf_dir), byte_tokenizer())


def test_trl_reward_reads_items_and_survives_odd_completions():
    reward = trl_engine.make_trl_reward("arithmetic")
    item = json.dumps({"question": "q", "answer": "7", "expression": "3 + 4"})
    out = reward(["p"] * 4, [" 3 + 4 = 7 </think> <answer> 7 </answer>", "", "\udcff\x00" * 3, "x" * 100_000],
                 item=[item] * 4)
    assert out == [1.0, 0.0, 0.0, 0.0]
