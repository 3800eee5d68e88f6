"""The settings every alignment trainer shares, declared once: SFT, DPO, GRPO and RFT subclass `LoopConfig`.

A field's help text lives in its metadata, so `--help` shows it with the value a run would use. A trainer whose
method has its own default for a shared setting (a learning rate, an output folder) restates only the default:
`lr: float = override(LoopConfig, "lr", 1e-3)`. The shared defaults are the project's: the `digits` task held out
by problem (alignment/tasks/digits.py), the `short` template, on the CPU with our own engine.
"""

from __future__ import annotations

from dataclasses import dataclass

from alignment.tasks.arithmetic import HELD_OUT
from alignment.tasks.data import TASKS
from alignment.tasks.prompts import check_template
from model.training.run_settings import RunSettings
from workbench.params import REQUIRED, Checked, override, setting

ENGINES = ("ours", "trl")


@dataclass(frozen=True)
class TaskConfig(Checked):
    """What every trainer and the report (alignment.report) share: the task, its prompts and the responses' length."""

    tokenizer: str | None = setting(None, "tokenizer folder (vocab.json + merges.txt); HF default: the model folder")
    task: str = setting("digits", "digits (alignment.tasks.digits: held out by problem), arithmetic (word problems) or "
                                  "gsm8k (../shared/data/alignment)", choices=TASKS)
    digits: int = setting(2, "operands of 1..digits digits (digits and arithmetic tasks)", at_least=1, at_most=9)
    held_out: str = setting("problems", "arithmetic test split: unseen problems, or unseen wording of the same facts",
                            choices=HELD_OUT)
    max_new_tokens: int = setting(72, "token limit of every generated response (the default digits task's longest "
                                      "solution is 64 tokens of the default 1,024-token BPE); prompt + this must fit "
                                      "the model's context", at_least=1)
    template: str = setting("short", "prompt: 'short', 'r1_zero' (the R1-Zero / CS336 A5 prompt) or a string with "
                                     "{question}")


@dataclass(frozen=True)
class LoopConfig(TaskConfig, RunSettings):
    """What a trainer starts from (model, task), how it evaluates and where it writes."""

    model: str = setting(REQUIRED, "our run folder / ckpt-*.pt, or a local Hugging Face model folder", kw_only=True)
    n_train: int = setting(2000, "training problems (SFT: demonstrations; DPO: pairs; RL: questions drawn)",
                           at_least=1)
    n_test: int = setting(200, "held-out problems scored at each evaluation (validation for digits)", at_least=0)
    lr: float = setting(1e-4, "peak learning rate", above=0)
    grad_clip: float = setting(1.0, "clip the global gradient norm to this (0: off)", at_least=0)
    eval_interval: int = setting(50, "held-out evaluation every N steps (rounds for RFT) and at the end; 0: only at "
                                     "the end", at_least=0)
    eval_batch_size: int = setting(32, "prompts per greedy evaluation batch", at_least=1)
    seed: int = setting(0, "seed of the data order, sampling and initialisation", at_least=0)
    out_dir: str = setting("runs/align", "folder for the checkpoint, config.json and metrics.csv")
    device: str = setting("cpu", "cpu | cuda | mps")
    report: str | None = setting(None, "also append the final eval row to this CSV")
    metrics: str | None = setting(None, "also write the final summary (JSON) here, for dvc metrics")
    engine: str = setting("ours", "ours | trl (TRL's trainer on a local HF model: accelerate / DeepSpeed / vLLM)",
                          choices=ENGINES)
    ckpt_interval: int = override(RunSettings, "ckpt_interval", 50, "steps (RFT: rounds) between checkpoints, and "
                                  "at the end; the same command run again in out_dir goes on from the newest")
    keep_last: int = override(RunSettings, "keep_last", 2)
    restart: bool = setting(False, "remove out_dir's checkpoints first and start the run over")

    def __post_init__(self) -> None:  # a template's text: a name, or a string with {question}
        super().__post_init__()
        check_template(self.template, f"{self.settings_prefix()}template")


@dataclass(frozen=True)
class RolloutConfig(LoopConfig):
    """Trainers that sample responses from the policy in groups per question (GRPO, RFT)."""

    rollout_batch_size: int = setting(256, "responses sampled per step (GRPO) or round (RFT)", at_least=1)
    group_size: int = setting(8, "responses per question", at_least=1)
    temperature: float = setting(1.0, "sampling temperature of the rollouts", above=0)


@dataclass(frozen=True)
class StepsConfig(LoopConfig):
    """Trainers that take a fixed number of optimizer steps with warmup (SFT, DPO, GRPO)."""

    steps: int = setting(200, "optimizer steps (GRPO: rollout batches)", at_least=1)
    warmup_steps: int = setting(10, "linear warmup steps, then the method's schedule", at_least=0)
    weight_decay: float = setting(0.0, "AdamW decoupled weight decay", at_least=0)
    grad_accum: int = setting(1, "microbatches per optimizer step", at_least=1)
