"""``TrainConfig``: every knob of ``python -m model.train``, with help text, defaults and validation.

The model is one field, ``model``: a ModelConfig whose shape fields left None come from ``preset`` and whose
``vocab_size`` left None is the shards' (``model.train.model_config``); params.yaml nests it as ``train.model``, the
flags are ``--model.FIELD`` (``--model.d-model 64``).

Defaults come from the dataclass, then the ``train`` section of params.yaml, then CLI flags
(``workbench.params``; ``model.train.build_parser`` turns every field into a flag).
"""

from __future__ import annotations

from dataclasses import dataclass

from model.core.config import ModelConfig
from model.training.run_settings import RunSettings
from workbench.params import setting

SCHEDULES = ("cosine", "wsd", "constant")
DECAY_SHAPES = ("linear", "1-sqrt")  # WSD's decay (model/training/optim.py wsd_schedule)
DTYPES = ("bf16", "fp16", "fp32")
TRACKERS = ("none", "tensorboard", "wandb")
PARALLEL_MODES = ("none", "ddp", "zero1", "zero2", "fsdp")




@dataclass(frozen=True)
class TrainConfig(RunSettings):
    data: str = setting("shards", "folder with train.bin, val.bin and meta.json (`python -m pipeline tokenize` "
                                  "writes them)")
    out_dir: str = setting("runs/train", "run folder: config.json (model, settings, tokenizer identity), checkpoints, "
                                         "latest, metrics.csv; --resume continues the run found here")
    metrics: str | None = setting(None, "also write the run summary JSON here (e.g. metrics/train.json)")
    # the model: preset, then the `model` mapping's fields over it (model.train.model_config)
    preset: str = setting("micro", "model preset from model.core.config.PRESETS (nano, micro, tiny, small, ...): the "
                                   "model's d_model, n_layers, n_heads and d_ff where --model.* gives none")
    model: ModelConfig = setting(None, "the model (model.core.config.ModelConfig): --model.FIELD", factory=ModelConfig)
    # optimisation
    batch_size: int = setting(32, "sequences per micro-batch", at_least=1)
    grad_accum: int = setting(1, "micro-batches per optimizer step", at_least=1)
    max_steps: int = setting(1000, "optimizer steps (the schedule's length)", at_least=1)
    max_tokens: int | None = setting(None, "if set, max_steps = ceil(max_tokens / tokens per step)", at_least=1)
    time_budget_s: float | None = setting(None, "stop early (with a final eval and checkpoint) after this many seconds")
    lr: float = setting(1e-3, "peak learning rate")
    min_lr: float = setting(1e-4, "final learning rate (cosine floor / WSD end)", at_least=0)
    warmup_steps: int = setting(100, "linear warmup steps", at_least=0)
    schedule: str = setting("cosine", "learning-rate schedule: cosine | wsd | constant", choices=SCHEDULES)
    decay_fraction: float = setting(0.2, "WSD: share of steps spent decaying", above=0, at_most=1)
    decay_shape: str = setting("linear", "WSD: the decay's shape: linear | 1-sqrt (Hägele et al. 2024's cooldown)",
                               choices=DECAY_SHAPES)
    weight_decay: float = setting(0.1, "AdamW decoupled weight decay (not applied to norm weights)")
    beta1: float = setting(0.9, "AdamW β1")
    beta2: float = setting(0.95, "AdamW β2")
    eps: float = setting(1e-8, "AdamW ε")
    grad_clip: float = setting(1.0, "clip the global gradient norm to this (0 = off)")
    max_bad_steps: int = setting(3, "non-finite loss/gradient steps skipped before the run stops", at_least=0)
    # bookkeeping
    eval_interval: int = setting(100, "steps between validation passes (and always at the end)", at_least=1)
    eval_batches: int = setting(10, "validation batches per pass (windows of val.bin drawn from the seed, the same at "
                                    "every pass); 0 = every non-overlapping window of val.bin, the same for every seed",
                                at_least=0)
    log_interval: int = setting(10, "steps between metrics.csv rows / log lines", at_least=1)
    seed: int = setting(0, "seed of the initial weights and of the batch order")
    # hardware
    device: str = setting("auto", "auto | cpu | cuda | cuda:N | mps")
    dtype: str = setting("bf16", "autocast dtype on CUDA: bf16 | fp16 | fp32 (CPU always runs fp32)", choices=DTYPES)
    compile: bool = setting(False, "torch.compile the model")
    peak_flops: float | None = setting(None, "peak FLOP/s for MFU (default: looked up from the GPU name)")
    tracker: str = setting("none", "also log to: none | tensorboard | wandb (if installed)", choices=TRACKERS)
    profile: bool = setting(False, "torch.profiler trace of a few steps (Chrome trace + top-kernels table)")
    profile_steps: int = setting(5, "steps recorded by --profile (after 1 wait and 1 warmup step)")
    # distributed (under torchrun)
    parallel: str = setting("none", "data parallelism: none | ddp | zero1 | zero2 | fsdp (launch with torchrun)",
                            choices=PARALLEL_MODES)
    bucket_size_mb: float = setting(25.0, "DDP gradient bucket size in MiB (0 = one all-reduce per parameter)",
                                    at_least=0)
    dist_timeout_s: float = setting(300.0, "seconds a collective may wait before the job fails", above=0)

    def __post_init__(self) -> None:
        if isinstance(self.model, dict):  # params.yaml's nested `model:` mapping
            object.__setattr__(self, "model", ModelConfig.from_dict(self.model))
        if not isinstance(self.model, ModelConfig):
            raise ValueError(f"TrainConfig.model must be a ModelConfig or a mapping of its fields, got {self.model!r}")
        super().__post_init__()
        if self.min_lr > self.lr:  # a rule across two settings
            raise ValueError(f"TrainConfig: need min_lr <= lr, got min_lr={self.min_lr}, lr={self.lr}")

    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.grad_accum * self.model.context_length

    @property
    def total_steps(self) -> int:
        if self.max_tokens is None:
            return self.max_steps
        return -(-self.max_tokens // self.tokens_per_step)

