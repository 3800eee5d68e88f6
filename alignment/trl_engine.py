"""``--engine trl``: the SFT, DPO and GRPO stages run by Hugging Face TRL's trainers (TRL 1.16) on a local HF model.

The same frozen config as our loop (``alignment.sft.SFTConfig``, ``alignment.dpo.DPOConfig``,
``alignment.grpo.GRPOConfig``) is mapped onto TRL's config dataclass, the trainer runs, and the result is written like
our loops write it: held-out greedy accuracy (``alignment.evaluate.evaluate`` on the task's test items),
``out_dir/hf`` via ``save_pretrained``, then ``alignment.loop.publish`` (the report row, the metrics JSON) and
``out_dir/metrics.csv`` from ``trainer.state.log_history`` (TRL's metric names, one row per logged step).
TRL brings accelerate / DeepSpeed / FSDP / vLLM; our loops stay the readable reference.

Stage -> trainer (TRL docs: https://huggingface.co/docs/trl/sft_trainer, /dpo_trainer, /grpo_trainer):

- SFT  -> ``trl.SFTTrainer`` on a prompt/completion dataset (``alignment.tasks.arithmetic.sft_example`` with
  ``cfg.template``), ``completion_only_loss=True`` (loss on the response only, like our response mask; TRL appends EOS).
- DPO  -> ``trl.DPOTrainer`` on prompt/chosen/rejected (``alignment.tasks.data.load_pairs``: generated arithmetic pairs
  or ``cfg.pairs``), ``loss_type=["sigmoid"]`` (Rafailov et al. 2023), an explicit frozen ``ref_model``
  (``cfg.reference`` loaded, else a deep copy of the starting policy).
- GRPO -> ``trl.GRPOTrainer`` with a ``prompt`` column (``alignment.evaluate.build_prompt``) and the item (JSON) the
  verifier needs; the reward function wraps ``alignment.evaluate.score`` (or the given ``reward_fn``).

Field mapping (ours -> TRL), all stages: ``lr -> learning_rate``, ``weight_decay``, ``grad_clip -> max_grad_norm``,
``seed -> seed, data_seed``, ``warmup_steps``, AdamW betas (0.9, 0.95) -> ``adam_beta2=0.95``; fixed:
``output_dir=out_dir/trl``, ``save_strategy="no"``, ``logging_steps=1``, ``report_to=[]``, ``bf16=fp16=False``
(fp32 like our loops), ``use_cpu`` when ``device == "cpu"``, ``activation_checkpointing=False`` (TRL defaults
``gradient_checkpointing`` to True; transformers 5 renamed it ``activation_checkpointing``).

=========================  ==========================================  ==========================================
ours                       TRL                                         note
=========================  ==========================================  ==========================================
SFT steps                  max_steps                                   optimizer steps in both
SFT batch_size/grad_accum  per_device_train_batch_size / grad. accum.
SFT cosine to lr/10        lr_scheduler_type="cosine_with_min_lr",     same curve as ``optim.cosine_schedule``
                           lr_scheduler_kwargs={"min_lr_rate": 0.1}
SFT normalize_constant     --                                          TRL: mean NLL per completion token
SFT/DPO model context      max_length = max_position_embeddings        TRL truncates (keep_start), ours cuts
DPO beta / steps           beta / max_steps
DPO batch_size             per_device_train_batch_size                 pairs per microbatch in both
GRPO group_size            num_generations
GRPO rollout_batch_size    generation_batch_size                       completions per rollout in both
GRPO train_batch_size      per_device_train_batch_size =               TRL's batch counts completions
                           train_batch_size // grad_accum
GRPO grad_accum            gradient_accumulation_steps
GRPO steps                 max_steps = steps * rollout_batch_size //   TRL counts optimizer steps, ours rollouts
                           train_batch_size * epochs_per_rollout_batch
GRPO epochs_per_rollout..  num_iterations (μ)
ckpt_interval / keep_last  save_steps / save_total_limit               a rerun resumes (resume_from_checkpoint)
GRPO cliprange(_low)       epsilon                                     cliprange_low wins when set
GRPO cliprange(_high)      epsilon_high                                DAPO; cliprange_high wins when set
GRPO kl_coef               beta                                        both k3 to a frozen reference
GRPO normalize_by_std      scale_rewards "group" / "none"
GRPO length_normalization  loss_type "grpo" (masked_mean) /            Dr. GRPO: / max_completion_length
                           "dr_grpo" (constant)
GRPO max_new_tokens        max_completion_length
GRPO temperature, top_p    temperature, top_p
GRPO warmup_steps          warmup_steps * updates per rollout,         our lr is constant after warmup
                           lr_scheduler_type="constant_with_warmup"
=========================  ==========================================  ==========================================

Knobs without a TRL equivalent, and what is done:

- ``eval_interval`` / ``eval_batch_size``: TRL has no greedy task-accuracy eval; the held-out accuracy is computed
  once, after training (``eval_batch_size`` is used for it).
- SFT ``normalize_constant``: TRL averages the NLL over completion tokens; ignored (the gradient differs by a scale).
- GRPO ``loss_type``: TRL always optimises the clipped surrogate, which on-policy (ratio 1) has the gradient of
  ``reinforce_with_baseline``; ``reinforce_with_baseline`` and ``grpo_clip`` map to it, ``no_baseline`` (raw rewards,
  no group mean) has no equivalent and raises ValueError.
- GRPO ``advantage_eps``: TRL divides by ``std + 1e-4`` (fixed); ignored.
- GRPO rollouts stop at EOS or ``max_completion_length`` (our rollouts also stop at ``</answer>``).
- DPO held-out: preference accuracy / margin come from ``alignment.core.preference.preference_eval`` (as in our loop),
  computed once after training against the same frozen reference.
- Our checkpoints (``model.training.checkpoint``) are not HF models: export them with
  ``python -m model.inference.export RUN OUT_DIR`` first; a ValueError says so, naming the path.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

from alignment.core.policy import frozen, is_ours
from alignment.core.preference import preference_eval
from alignment.evaluate import build_prompt, is_hf_model_dir, load_model_and_tokenizer, score
from alignment.loop import held_out_accuracy, load_model_and_prepare, publish
from alignment.tasks.data import demonstrations, load_pairs, load_task

OUR_CHECKPOINT_MESSAGE = ("{what}={path}: engine='trl' needs a local Hugging Face model folder (config.json with "
                          "model_type); this is not one. Export our checkpoints with "
                          "`python -m model.inference.export {path} "
                          "OUT_DIR --tokenizer TOK_DIR` first and pass OUT_DIR")


# --------------------------------------------------------------------------- shared
def _check_hf_path(path: str | None, what: str) -> None:
    if path is not None and not is_hf_model_dir(Path(path)):
        raise ValueError(OUR_CHECKPOINT_MESSAGE.format(what=what, path=path))


def _load(cfg, stage: str, model, tokenizer):
    """(model, tokenizer, out_dir) for a TRL run: an HF model and tokenizer (pad token set), config.json written."""
    if model is None:
        _check_hf_path(cfg.model, f"{type(cfg).__name__}.model")
    elif is_ours(model):
        raise ValueError(OUR_CHECKPOINT_MESSAGE.format(what=f"{type(cfg).__name__}.model", path=cfg.model))
    model, tokenizer, _, _, out_dir = load_model_and_prepare(cfg, stage, model, tokenizer)
    if tokenizer is None or not hasattr(tokenizer, "save_pretrained"):
        raise ValueError(f"{type(cfg).__name__}.tokenizer: engine='trl' needs a Hugging Face tokenizer (the model "
                         f"folder's, or --tokenizer pointing at one), got {type(tokenizer).__name__}")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer, out_dir


def _common_args(cfg, out_dir: Path) -> dict:
    """TrainingArguments shared by the three stages (see the module docstring)."""
    return dict(output_dir=str(out_dir / "trl"), learning_rate=cfg.lr, max_steps=cfg.steps,
                weight_decay=cfg.weight_decay, max_grad_norm=cfg.grad_clip, warmup_steps=cfg.warmup_steps,
                adam_beta1=0.9, adam_beta2=0.95, seed=cfg.seed, data_seed=cfg.seed, save_strategy="steps",
                save_steps=cfg.ckpt_interval, save_total_limit=cfg.keep_last,
                logging_steps=1, report_to=[], bf16=False, fp16=False, use_cpu=cfg.device == "cpu",
                activation_checkpointing=False, disable_tqdm=False, dataloader_num_workers=0)


def _max_length(model) -> int | None:
    return getattr(getattr(model, "config", None), "max_position_embeddings", None)


def _write_log_history(out_dir: Path, log_history: list[dict], summary: dict) -> None:
    """``out_dir/metrics.csv``: one row per logged step (TRL's keys; the final train-summary row is dropped), the
    held-out accuracy on the last row."""
    import pandas as pd

    rows = ([dict(r) for r in log_history if "train_runtime" not in r] or [dict(r) for r in log_history]
            or [{"step": 0}])
    rows[-1].update(val_accuracy=summary.get("accuracy"), val_format_rate=summary.get("format_rate"))
    df = pd.DataFrame(rows)
    if "step" in df.columns:
        df = df[["step"] + [c for c in df.columns if c != "step"]]
    df.to_csv(out_dir / "metrics.csv", index=False)


def _finish(cfg, stage: str, trainer, tokenizer, out_dir: Path, test_items: list[dict], started: float,
            extra: dict | None = None) -> dict:
    model = trainer.model
    tokenizer.padding_side = "left"  # batched greedy generation pads on the left
    model.eval()
    # greedy accuracy on the held-out items, as our loop measures it
    summary = {**held_out_accuracy(cfg, model, tokenizer, test_items), **(extra or {})}
    _write_log_history(out_dir, trainer.state.log_history, summary)
    path = out_dir / "hf"
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    summary = {**summary, "checkpoint": str(path), "steps": int(trainer.state.global_step),
               "seconds": round(time.perf_counter() - started, 3)}
    publish(cfg, stage, summary, path)
    return summary


def _train(trainer, out_dir: Path) -> None:
    """TRL's own loop, continued from its newest checkpoint under ``out_dir/trl`` when a killed run left one
    (TRL saves every ``ckpt_interval`` steps: ``resume_from_checkpoint``)."""
    trainer.train(resume_from_checkpoint=any((out_dir / "trl").glob("checkpoint-*")) or None)


# --------------------------------------------------------------------------- SFT
def sft_trl_config(cfg, out_dir: str | Path | None = None, max_length: int | None = 1024):
    """``trl.SFTConfig`` for our ``alignment.sft.SFTConfig``."""
    from trl import SFTConfig

    return SFTConfig(**_common_args(cfg, Path(out_dir or cfg.out_dir)),
                     per_device_train_batch_size=cfg.batch_size, gradient_accumulation_steps=cfg.grad_accum,
                     lr_scheduler_type="cosine_with_min_lr", lr_scheduler_kwargs={"min_lr_rate": 0.1},
                     completion_only_loss=True, max_length=max_length, dataset_num_proc=None)


def train_sft_trl(cfg, model=None, tokenizer=None) -> dict:
    """SFT with ``trl.SFTTrainer``; returns the held-out summary plus ``checkpoint`` and ``seconds``."""
    from datasets import Dataset
    from trl import SFTTrainer

    model, tokenizer, out_dir = _load(cfg, "sft", model, tokenizer)
    train, test = load_task(cfg)
    if not train:
        raise ValueError("SFT needs training items (n_train >= 1)")
    examples = demonstrations(cfg, train)
    dataset = Dataset.from_dict({"prompt": [p for p, _ in examples], "completion": [c for _, c in examples]})
    started = time.perf_counter()
    trainer = SFTTrainer(model=model, args=sft_trl_config(cfg, out_dir, _max_length(model)), train_dataset=dataset,
                         processing_class=tokenizer)
    _train(trainer, out_dir)
    return _finish(cfg, "sft", trainer, tokenizer, out_dir, test, started)


# --------------------------------------------------------------------------- DPO
def dpo_trl_config(cfg, out_dir: str | Path | None = None, max_length: int | None = 1024):
    """``trl.DPOConfig`` for our ``alignment.dpo.DPOConfig`` (sigmoid loss, cosine to lr/10 like our loop)."""
    from trl import DPOConfig

    return DPOConfig(**_common_args(cfg, Path(out_dir or cfg.out_dir)),
                     per_device_train_batch_size=cfg.batch_size, gradient_accumulation_steps=cfg.grad_accum,
                     lr_scheduler_type="cosine_with_min_lr", lr_scheduler_kwargs={"min_lr_rate": 0.1},
                     beta=cfg.beta, loss_type=["sigmoid"], max_length=max_length)


def train_dpo_trl(cfg, model=None, tokenizer=None) -> dict:
    """DPO with ``trl.DPOTrainer`` and an explicit frozen reference; returns the held-out task summary (accuracy
    None without a task) plus ``pref_accuracy``, ``margin``, ``pref_n`` (``alignment.core.preference.preference_eval``),
    ``checkpoint`` and ``seconds``."""
    from datasets import Dataset
    from trl import DPOTrainer

    model, tokenizer, out_dir = _load(cfg, "dpo", model, tokenizer)
    if cfg.reference:
        _check_hf_path(cfg.reference, "DPOConfig.reference")
        reference = load_model_and_tokenizer(cfg.reference, cfg.tokenizer, cfg.device)[0]
    else:
        reference = copy.deepcopy(model)
    reference = frozen(reference)
    train, test_pairs, test_items = load_pairs(cfg)
    dataset = Dataset.from_dict({k: [p[k] for p in train] for k in ("prompt", "chosen", "rejected")})
    started = time.perf_counter()
    trainer = DPOTrainer(model=model, ref_model=reference, args=dpo_trl_config(cfg, out_dir, _max_length(model)),
                         train_dataset=dataset, processing_class=tokenizer)
    _train(trainer, out_dir)
    pref = preference_eval(trainer.model, reference, tokenizer, test_pairs, cfg.beta, cfg.eval_batch_size)
    return _finish(cfg, "dpo", trainer, tokenizer, out_dir, test_items if cfg.task != "none" else [], started, pref)


# --------------------------------------------------------------------------- GRPO
def grpo_trl_config(cfg, out_dir: str | Path | None = None):
    """``trl.GRPOConfig`` for our ``alignment.grpo.GRPOConfig`` (mapping table in the module docstring)."""
    from trl import GRPOConfig

    if cfg.loss_type == "no_baseline":
        raise ValueError("GRPOConfig.loss_type='no_baseline' has no TRL equivalent (TRL always subtracts the group "
                         "mean); use engine='ours' or loss_type 'reinforce_with_baseline' / 'grpo_clip'")
    epsilon = cfg.cliprange_low if cfg.cliprange_low is not None else cfg.cliprange  # as alignment.core.losses does
    epsilon_high = cfg.cliprange_high if cfg.cliprange_high is not None else cfg.cliprange
    updates_per_rollout = cfg.rollout_batch_size // cfg.train_batch_size * cfg.epochs_per_rollout_batch
    common = {**_common_args(cfg, Path(out_dir or cfg.out_dir)), "max_steps": cfg.steps * updates_per_rollout,
              "warmup_steps": cfg.warmup_steps * updates_per_rollout,  # TRL counts optimizer steps, ours rollouts
              "save_steps": cfg.ckpt_interval * updates_per_rollout}
    return GRPOConfig(**common,
                      per_device_train_batch_size=cfg.train_batch_size // cfg.grad_accum,
                      gradient_accumulation_steps=cfg.grad_accum, generation_batch_size=cfg.rollout_batch_size,
                      num_generations=cfg.group_size, max_completion_length=cfg.max_new_tokens,
                      temperature=cfg.temperature, top_p=cfg.top_p, num_iterations=cfg.epochs_per_rollout_batch,
                      epsilon=epsilon, epsilon_high=epsilon_high, beta=cfg.kl_coef,
                      scale_rewards="group" if cfg.normalize_by_std else "none",
                      loss_type="dr_grpo" if cfg.length_normalization == "constant" else "grpo",
                      lr_scheduler_type="constant_with_warmup", remove_unused_columns=False)


def make_trl_reward(task: str, reward_fn=None):
    """A TRL reward function ``(prompts, completions, item, **kwargs) -> list[float]``: the ``"reward"`` of
    ``reward_fn(completion, item)`` (default ``alignment.evaluate.score(task, ...)``), items read from the
    dataset's JSON ``item`` column. The mean ``format_reward`` / ``answer_reward`` go to TRL's ``log_metric``
    (``rewards/format_mean``, ``rewards/answer_mean`` in metrics.csv) when TRL passes it."""
    def task_reward(prompts, completions, item, log_metric=None, **kwargs) -> list[float]:
        out, parts = [], {"format_reward": [], "answer_reward": []}
        for completion, raw in zip(completions, item, strict=False):
            record = json.loads(raw)
            result = reward_fn(completion, record) if reward_fn is not None else score(task, completion, record)
            out.append(float(result["reward"]))
            for key, values in parts.items():
                if result.get(key) is not None:
                    values.append(float(result[key]))
        if log_metric is not None:  # our loop's format / answer reward curves, averaged per logging step
            for key, values in parts.items():
                if values:
                    log_metric(f"rewards/{key.split('_')[0]}_mean", sum(values) / len(values))
        return out

    return task_reward


def train_grpo_trl(cfg, model=None, tokenizer=None, reward_fn=None) -> dict:
    """GRPO with ``trl.GRPOTrainer``; ``reward_fn(response, item) -> {"reward", ...}`` replaces the task's verifier
    for training (held-out accuracy always uses the task's). Returns the held-out summary plus ``checkpoint`` and
    ``seconds``."""
    from datasets import Dataset
    from trl import GRPOTrainer

    args = grpo_trl_config(cfg, cfg.out_dir)  # fails fast on knobs TRL lacks, before loading anything
    model, tokenizer, out_dir = _load(cfg, "grpo", model, tokenizer)
    train, test = load_task(cfg)
    if not train:
        raise ValueError("GRPO needs training questions (n_train >= 1)")
    dataset = Dataset.from_dict({"prompt": [build_prompt(cfg.task, item, cfg.template) for item in train],
                                 "answer": [str(item.get("answer", "")) for item in train],
                                 "item": [json.dumps(item, ensure_ascii=False) for item in train]})
    tokenizer.padding_side = "left"
    started = time.perf_counter()
    trainer = GRPOTrainer(model=model, reward_funcs=make_trl_reward(cfg.task, reward_fn), args=args,
                          train_dataset=dataset, processing_class=tokenizer)
    _train(trainer, out_dir)
    return _finish(cfg, "grpo", trainer, tokenizer, out_dir, test, started)


__all__ = ["sft_trl_config", "dpo_trl_config", "grpo_trl_config", "make_trl_reward", "train_sft_trl",
           "train_dpo_trl", "train_grpo_trl"]
