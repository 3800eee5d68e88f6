"""Alignment benchmarks: our rollout engine and GRPO loop against Hugging Face ``generate`` and TRL's GRPOTrainer.

One TransformerLM (a preset with random init, or ``--model RUN``) is saved as our checkpoint and exported
with ``model.inference.export.export_llama`` as a ``LlamaForCausalLM`` folder (plus a ``tokenizer.json`` from our BPE),
so both sides run the same weights.

(rollout) New tokens/s of ``model.inference.generate.generate`` (KV cache, batched) vs HF ``generate(use_cache=True)``
          on the same batch of random prompts, sampling at temperature 1 with the length forced (no EOS
          stop: ``eos_id=None`` / ``min_new_tokens``); median of ``--repeats`` runs, the engines alternated, after
          one warmup each. First a sanity check: greedy outputs of both engines on a few prompts must be identical
          (up to the first EOS).
(grpo)    Seconds per GRPO step (one rollout batch, one optimizer step) on the arithmetic task of
          ``alignment.grpo.train_grpo`` (on our checkpoint and on the HF export) vs ``trl.GRPOTrainer``
          (same rollout batch, group size, microbatch, max new tokens, lr, reward = ``alignment.evaluate.score``),
          each engine in its own subprocess for a separate peak memory (CPU: VmHWM; CUDA: max allocated).
          A step is timed end to end (wall clock between step ends); the first step is warmup. Also reported: the
          tokens trained per response, since the engines need not train the same work: our loop re-tokenizes the
          decoded text, TRL trains on the sampled ids, and a random preset's vocab (``--vocab``) beyond the
          tokenizer's samples ids that decode to U+FFFD (three bytes each with our tokenizer) or to nothing (HF's).

Layout follows ``bench/benchmarks/model_train.py`` (Liger-Kernel's benchmark scripts: same setup for each provider,
median).
The numbers go as rows to benchmarks/results/alignment_engines.jsonl (``gpu_alignment_engines`` on CUDA; rows built
by ``bench.tools.alignment_engines_rows``) unless ``--no-record``; ``python -m bench.tools.report`` tabulates them.

    python -m bench.benchmarks.alignment_engines --quick     # CPU smoke sizes
    python -m bench.benchmarks.alignment_engines             # CPU: micro, 64 x 32 tokens; GRPO 16 x 4, 32 tokens
    python -m bench.benchmarks.alignment_engines --device cuda --out b.json
                                                             # GPU: tiny preset, 256 x 128; GRPO 64 x 8, 128
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from alignment.core.rollout import DEFAULT_STOP, cut_at_stop
from alignment.evaluate import build_prompt, score
from alignment.grpo import GRPOConfig, train_grpo
from alignment.tasks.data import load_task
from bench.tools.alignment_engines_rows import results_rows
from bench.tools.results import BenchSettings, finish, parse_bench
from bench.tools.timing import format_table, timed  # median-of-N timing and the shared table layout
from model.core.config import ModelConfig
from model.core.transformer import TransformerLM
from model.inference.export import export_llama
from model.inference.generate import generate
from model.training.checkpoint import load_model, save_checkpoint
from tokenizer.encoder import Tokenizer
from workbench.memory import peak_rss_mb
from workbench.params import setting, usage_error

EOT = "<|endoftext|>"
REPO = Path(__file__).resolve().parents[2]
ENGINES = ("ours", "ours-hf", "trl")
# (preset, context, rollout prompts, prompt len, new tokens, repeats, GRPO: steps, rollout batch, group,
#  grad_accum, max_new_tokens, template)
SIZES = {
    "quick": dict(preset="nano", context=128, prompts=4, prompt_len=8, new_tokens=8, repeats=1,
                  steps=2, rollout_batch=4, group=2, grad_accum=1, grpo_tokens=8, template="short"),
    "cpu": dict(preset="micro", context=256, prompts=64, prompt_len=32, new_tokens=32, repeats=5,
                steps=6, rollout_batch=16, group=4, grad_accum=2, grpo_tokens=32, template="short"),
    "cuda": dict(preset="tiny", context=512, prompts=256, prompt_len=32, new_tokens=128, repeats=5,
                 steps=6, rollout_batch=64, group=8, grad_accum=2, grpo_tokens=128, template="r1_zero"),
}


# ---- shared setup ---------------------------------------------------------------------------------

def load_our_tokenizer(path: str | None):
    """Our BPE from ``path`` (vocab.json + merges.txt) if given and present, else a byte tokenizer."""
    if path and (Path(path) / "vocab.json").is_file() and (Path(path) / "merges.txt").is_file():
        return Tokenizer.from_files(Path(path) / "vocab.json", Path(path) / "merges.txt", [EOT])
    return Tokenizer({i: bytes([i]) for i in range(256)}, [], [EOT])


def prepare(args, workdir: Path) -> dict:
    """Write ``workdir/{tok, ours, hf}``: our tokenizer, our checkpoint and its HF Llama export; return facts."""
    tok = load_our_tokenizer(args.tokenizer)
    (workdir / "tok").mkdir(parents=True, exist_ok=True)
    tok.save(workdir / "tok" / "vocab.json", workdir / "tok" / "merges.txt")
    if args.model:
        model = load_model(args.model)
        cfg = model.cfg
        if cfg.vocab_size < tok.vocab_size:
            raise ValueError(f"--model {args.model}: vocab {cfg.vocab_size} < tokenizer vocab {tok.vocab_size}")
    else:
        cfg = ModelConfig.from_preset(args.preset, vocab_size=max(tok.vocab_size, args.vocab),
                                      context_length=args.context)
        torch.manual_seed(args.seed)
        model = TransformerLM(cfg)
    cfg = cfg.replace(attention="sdpa")
    save_checkpoint(workdir / "ours", 0, {"model": model.state_dict(), "model_config": cfg.to_dict()})
    eos = tok.special_token_ids[EOT]
    hf_dir = export_llama(model, cfg, workdir / "hf", torch.float32,
                          config_overrides={"eos_token_id": eos, "bos_token_id": eos, "pad_token_id": eos})
    tok.to_hf_json(hf_dir / "tokenizer.json")
    (hf_dir / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": EOT, "bos_token": EOT, "pad_token": EOT,
         "model_max_length": cfg.context_length, "padding_side": "left", "clean_up_tokenization_spaces": False}))
    return {"model": args.model or f"preset {args.preset} (random init, seed {args.seed})",
            "params_m": round(cfg.param_count() / 1e6, 2), "d_model": cfg.d_model, "n_layers": cfg.n_layers,
            "vocab": cfg.vocab_size, "context": cfg.context_length, "tokenizer_vocab": tok.vocab_size, "eos_id": eos}


def load_hf(workdir: Path, device: torch.device, dtype: torch.dtype = torch.float32):
    from transformers import LlamaForCausalLM

    return LlamaForCausalLM.from_pretrained(workdir / "hf", dtype=dtype, attn_implementation="sdpa").to(device).eval()


# ---- (rollout) ------------------------------------------------------------------------------------

def upto_eos(ids: list[int], eos: int | None) -> list[int]:
    """``ids`` through the first ``eos`` (all of them if none)."""
    return ids[:ids.index(eos) + 1] if eos in ids else ids


def bench_rollout(args, workdir: Path, device: torch.device) -> dict:
    ours = load_model(workdir / "ours", device=device)
    bf16 = device.type == "cuda"  # CUDA: ours under bf16 autocast, HF with bf16 weights
    hf = load_hf(workdir, device, torch.bfloat16 if bf16 else torch.float32)
    gen = torch.Generator().manual_seed(args.seed)
    prompts = torch.randint(ours.cfg.vocab_size, (args.prompts, args.prompt_len), generator=gen)
    ids = prompts.to(device)
    attention = torch.ones_like(ids)

    def hf_generate(n: int, rows: slice = slice(None), sample: bool = True) -> list[list[int]]:
        kw = dict(do_sample=True, temperature=1.0, top_k=0, top_p=1.0) if sample else \
            dict(do_sample=False, temperature=None, top_k=None, top_p=None)
        with torch.inference_mode():
            out = hf.generate(input_ids=ids[rows], attention_mask=attention[rows], max_new_tokens=n,
                              min_new_tokens=n if sample else None, use_cache=True, pad_token_id=0, **kw)
        return out[:, args.prompt_len:].tolist()

    def ours_generate(n: int, rows: slice = slice(None), sample: bool = True) -> list[list[int]]:
        return generate(ours, prompts[rows].tolist(), n, temperature=1.0 if sample else 0.0, eos_id=None,
                        seed=args.seed if sample else None, bf16=bf16)

    k = min(4, args.prompts)
    # min_new_tokens would make HF mask EOS, which ours (eos_id=None) may pick: compare up to the first EOS instead
    greedy_ours, greedy_hf = ours_generate(16, slice(0, k), False), hf_generate(16, slice(0, k), False)
    match = sum(upto_eos(a, hf.config.eos_token_id) == upto_eos(b, hf.config.eos_token_id)
                for a, b in zip(greedy_ours, greedy_hf, strict=True))
    print(f"\nsanity: greedy outputs of ours and HF identical on {match}/{k} prompts (16 new tokens)"
          f"{'' if match == k else '  <-- MISMATCH'}")
    lengths = {len(r) for r in ours_generate(args.new_tokens) + hf_generate(args.new_tokens)}
    if lengths != {args.new_tokens}:
        raise RuntimeError(f"forced length failed: got completion lengths {sorted(lengths)}")
    new = args.prompts * args.new_tokens
    rows, result = [], {"greedy_match": f"{match}/{k}", "prompts": args.prompts, "prompt_len": args.prompt_len,
                        "new_tokens": args.new_tokens, "repeats": args.repeats,
                        "dtype": "bf16" if bf16 else "fp32"}
    engines = (("ours (model.inference.generate, KV cache)", ours_generate),
               ("HF generate (use_cache=True)", hf_generate))
    times = {name: [] for name, _ in engines}
    for _ in range(args.repeats):  # alternate the engines so a change in machine load hits both alike
        for name, fn in engines:
            times[name].append(timed(lambda fn=fn: fn(args.new_tokens), 0, 1, device))
    for name, _ in engines:
        key = name.split()[0].lower()
        result[key + "_seconds"] = times[name]  # per repeat, in turns with the other engine
        seconds = statistics.median(times[name])
        result[key + "_tokens_per_s"] = new / seconds
        rows.append([name, f"{seconds:.3f}", f"{new / seconds:,.0f}"])
    result["ratio_ours_over_hf"] = result["ours_tokens_per_s"] / result["hf_tokens_per_s"]
    rows[0].append(f"{result['ratio_ours_over_hf']:.2f}x")
    rows[1].append("1.00x")
    print(f"\n(rollout) {args.prompts} prompts x {args.prompt_len} tokens + {args.new_tokens} new tokens, sampling "
          f"T=1, {result['dtype']}, median of {args.repeats} alternated runs after 1 warmup")
    print(format_table(["engine", "s/batch", "new tok/s", "vs HF"], rows))
    return result


# ---- (grpo) ---------------------------------------------------------------------------------------

def _grpo_config(spec: dict, model_path: Path, tokenizer: str | None, out_dir: Path):
    return GRPOConfig(model=str(model_path), tokenizer=tokenizer, task="arithmetic", n_train=spec["n_train"], n_test=0,
                      steps=spec["steps"], lr=spec["lr"], rollout_batch_size=spec["rollout_batch"],
                      group_size=spec["group"], train_batch_size=spec["rollout_batch"], grad_accum=spec["grad_accum"],
                      max_new_tokens=spec["grpo_tokens"], eval_interval=0, template=spec["template"],
                      out_dir=str(out_dir), device=spec["device"], seed=spec["seed"], temperature=1.0)


def _peak_memory_mb(device: str) -> dict:
    out = {"peak_rss_mb": peak_rss_mb()}
    if device.startswith("cuda"):
        out["peak_cuda_mb"] = torch.cuda.max_memory_allocated() / 2**20
    return out


def _ours_worker(engine: str, spec: dict, workdir: Path) -> dict:
    model_path = workdir / ("ours" if engine == "ours" else "hf")
    out_dir = workdir / f"run-{engine}"
    started = time.perf_counter()
    train_grpo(_grpo_config(spec, model_path, str(workdir / "tok") if engine == "ours" else None, out_dir))
    total = time.perf_counter() - started
    with open(out_dir / "metrics.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if int(r["step"]) >= 1]
    ends = [float(r["seconds"]) for r in rows]
    steps = [b - a for a, b in zip(ends, ends[1:], strict=False)] or ends[:1]  # step 1 (from the start) is warmup
    timed_rows = rows[1:] or rows
    rollout = [float(r["rollout_seconds"]) for r in timed_rows]
    train = [float(r["train_seconds"]) for r in timed_rows]
    return {"step_seconds": steps, "rollout_step_seconds": rollout, "train_step_seconds": train,
            "response_tokens": [float(r["response_tokens"]) for r in timed_rows],
            "rollout_seconds": statistics.median(rollout), "train_seconds": statistics.median(train),
            "total_seconds": total}


def _trl_worker(spec: dict, workdir: Path) -> dict:
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig as TRLConfig
    from trl import GRPOTrainer

    cfg = _grpo_config(spec, workdir / "hf", None, workdir / "run-trl")
    train, _ = load_task(cfg)
    data = Dataset.from_dict({"prompt": [build_prompt("arithmetic", it, cfg.template) for it in train],
                              "answer": [it["answer"] for it in train]})

    def arithmetic_reward(completions, answer, **kwargs) -> list[float]:
        return [score("arithmetic", cut_at_stop(c, DEFAULT_STOP), {"answer": a})["reward"]
                for c, a in zip(completions, answer, strict=False)]

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.ends = []

        def on_train_begin(self, *a, **k):
            self.ends.append(time.perf_counter())

        def on_step_end(self, *a, **k):
            if spec["device"].startswith("cuda"):
                torch.cuda.synchronize()
            self.ends.append(time.perf_counter())

    args = TRLConfig(output_dir=str(workdir / "run-trl"), per_device_train_batch_size=cfg.train_batch_size //
                     cfg.grad_accum, gradient_accumulation_steps=cfg.grad_accum, num_generations=cfg.group_size,
                     max_completion_length=cfg.max_new_tokens, max_steps=cfg.steps, learning_rate=cfg.lr,
                     lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, adam_beta1=0.9, adam_beta2=0.95,
                     max_grad_norm=cfg.grad_clip, temperature=cfg.temperature, top_p=1.0, top_k=0, beta=0.0,
                     num_iterations=1, bf16=False, use_cpu=not spec["device"].startswith("cuda"), report_to=[],
                     save_strategy="no", logging_steps=1, seed=cfg.seed, dataloader_num_workers=0,
                     disable_tqdm=True)
    tok = AutoTokenizer.from_pretrained(workdir / "hf")
    model = load_hf(workdir, torch.device(spec["device"]))
    timer = StepTimer()
    trainer = GRPOTrainer(model=model, reward_funcs=arithmetic_reward, args=args, train_dataset=data,
                          processing_class=tok, callbacks=[timer])
    started = time.perf_counter()
    trainer.train()
    total = time.perf_counter() - started
    steps = [b - a for a, b in zip(timer.ends, timer.ends[1:], strict=False)]
    lengths = [h["completions/mean_length"] for h in trainer.state.log_history if "completions/mean_length" in h]
    return {"step_seconds": steps[1:] or steps, "response_tokens": lengths[1:] or lengths, "total_seconds": total}


def worker_main(engine: str, spec_path: str, out_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    if spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    workdir = Path(spec["workdir"])
    result = _trl_worker(spec, workdir) if engine == "trl" else _ours_worker(engine, spec, workdir)
    result.update(_peak_memory_mb(spec["device"]))
    Path(out_path).write_text(json.dumps(result))
    return 0


def bench_grpo(args, workdir: Path, device: torch.device) -> dict:
    spec = {"workdir": str(workdir), "device": str(device), "seed": args.seed, "steps": args.steps, "lr": 1e-5,
            "rollout_batch": args.rollout_batch, "group": args.group, "grad_accum": args.grad_accum,
            "grpo_tokens": args.grpo_tokens, "template": args.template, "n_train": max(64, args.rollout_batch),
            "threads": args.threads}
    (workdir / "spec.json").write_text(json.dumps(spec))
    results, rows = {}, []
    for engine in listed(args.engines):
        out = workdir / f"result-{engine}.json"
        cmd = [sys.executable, "-m", "bench.benchmarks.alignment_engines", "--worker", engine,
               str(workdir / "spec.json"), str(out)]
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=args.timeout)
        if proc.returncode != 0 or not out.exists():
            print(f"\n{engine}: worker failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}", file=sys.stderr)
            results[engine] = {"error": proc.stderr[-500:]}
            continue
        res = json.loads(out.read_text())
        res["seconds_per_step"] = statistics.median(res["step_seconds"])
        results[engine] = res
    trl = results.get("trl", {}).get("seconds_per_step")
    names = {"ours": "ours: train_grpo on TransformerLM", "ours-hf": "ours: train_grpo on HF Llama",
             "trl": "TRL GRPOTrainer on HF Llama"}
    for engine, res in results.items():
        if "error" in res:
            rows.append([names[engine], "failed", "-", "-", "-", "-", "-"])
            continue
        if trl and engine != "trl":
            res["ratio_trl_over_ours"] = trl / res["seconds_per_step"]
        split = f"{res['rollout_seconds']:.2f} / {res['train_seconds']:.2f}" if "rollout_seconds" in res else "-"
        mem = res.get("peak_cuda_mb", res.get("peak_rss_mb", 0))
        tokens = f"{statistics.median(res['response_tokens']):.1f}" if res.get("response_tokens") else "-"
        rows.append([names[engine], f"{res['seconds_per_step']:.3f}", split,
                     f"{res['ratio_trl_over_ours']:.2f}x" if "ratio_trl_over_ours" in res else "-",
                     f"{mem:,.0f}", tokens, str(len(res["step_seconds"]))])
    mem_kind = "peak CUDA MiB" if device.type == "cuda" else "peak RSS MiB"
    print(f"\n(grpo) arithmetic task, template {args.template}: {args.rollout_batch} rollouts/step "
          f"({args.rollout_batch // args.group} questions x group {args.group}), {args.grad_accum} microbatches, "
          f"1 optimizer step/rollout batch, {args.grpo_tokens} max new tokens, lr 1e-5, fp32; "
          f"median s/step over steps 2..{args.steps}")
    print(format_table(["engine", "s/step", "rollout / train s", "TRL / this", mem_kind, "tokens/response",
                        "timed steps"], rows))
    return {"settings": {k: v for k, v in spec.items() if k not in ("workdir",)}, **results}


# ---- CLI ------------------------------------------------------------------------------------------

def listed(text: str) -> list[str]:
    """The names of a comma-separated setting (``--parts``, ``--engines``)."""
    return [name.strip() for name in text.split(",") if name.strip()]


def recorded_command(argv: list[str]) -> str:
    """The command as a reader would retype it, with ``OMP_NUM_THREADS`` when set (it changes CPU timings)."""
    threads = os.environ.get("OMP_NUM_THREADS")
    return (f"OMP_NUM_THREADS={threads} " if threads else "") + " ".join(
        ["python -m bench.benchmarks.alignment_engines", *argv])


def settle_args(args: AlignmentEnginesBench, device: torch.device) -> AlignmentEnginesBench:
    """The settings with the sizes left unset taken from ``SIZES``; a bad ``--parts``/``--engines`` or batch is a usage
    error."""
    parts, engines = listed(args.parts), listed(args.engines)
    bad = [p for p in parts if p not in ("rollout", "grpo")] + [e for e in engines if e not in ENGINES]
    if bad or not parts:
        usage_error(f"unknown part/engine {bad} (parts: rollout, grpo; engines: {', '.join(ENGINES)})")
    sizes = SIZES["quick" if args.quick else device.type]
    args = dataclasses.replace(args, **{key: value for key, value in sizes.items() if getattr(args, key) is None})
    if args.rollout_batch % args.group or args.rollout_batch % args.grad_accum:
        usage_error(f"--rollout-batch {args.rollout_batch} must be a multiple of --group {args.group} and "
                    f"--grad-accum {args.grad_accum}")
    return args


@dataclass(frozen=True)
class AlignmentEnginesBench(BenchSettings):
    parts: str = setting("rollout,grpo", "comma-separated parts: rollout, grpo")
    device: str = setting("auto", "cpu, cuda or auto (cuda when available)")
    quick: bool = setting(False, "smoke-test sizes (seconds on CPU)")
    out: Path | None = setting(None, "also write all numbers as JSON to this file")
    model: str | None = setting(None, "our run folder / ckpt-*.pt to use instead of a random preset")
    preset: str | None = setting(None, "model preset (default: micro CPU, tiny CUDA, nano --quick)")
    context: int | None = setting(None, "context length (default 256 CPU, 512 CUDA)", at_least=1)
    vocab: int = setting(0, "min vocab size of a preset model (default 0: the tokenizer's, so that every sampled id "
                            "is a token and the engines train the same work; larger: see the module doc)", at_least=0)
    tokenizer: str = setting(str(REPO / "data" / "tokenizer"),
                             "folder with vocab.json + merges.txt (default data/tokenizer; bytes if absent)")
    prompts: int | None = setting(None, "rollout: prompts per batch (default 64 CPU, 256 CUDA)", at_least=1)
    prompt_len: int | None = setting(None, "rollout: tokens per random prompt (default 32)", at_least=1)
    new_tokens: int | None = setting(None, "rollout: new tokens per prompt (default 32 / 128)", at_least=1)
    repeats: int | None = setting(None, "rollout: timed repeats, median taken (default 5)", at_least=1)
    engines: str = setting(",".join(ENGINES), "grpo: engines to run")
    steps: int | None = setting(None, "grpo: steps per engine, first is warmup (default 6)", at_least=1)
    rollout_batch: int | None = setting(None, "grpo: rollouts per step (default 16 / 64)", at_least=1)
    group: int | None = setting(None, "grpo: rollouts per question (default 4 / 8)", at_least=1)
    grad_accum: int | None = setting(None, "grpo: microbatches per optimizer step (default 2)", at_least=1)
    grpo_tokens: int | None = setting(None, "grpo: max new tokens (default 32 CPU, 128 CUDA)", at_least=1)
    template: str | None = setting(None, "grpo: prompt template short | r1_zero (default short / r1_zero)")
    seed: int = setting(0, "random seed")
    threads: int | None = setting(None, "CPU threads for torch (default: torch's choice)", at_least=1)
    timeout: int = setting(3600, "grpo: seconds allowed per engine subprocess", at_least=1)
    area: str | None = setting(None, "results area, i.e. file name (default alignment_engines, gpu_alignment_engines "
                                     "on CUDA): another for a run whose rows must not replace the default's")
    worker: tuple[str, ...] = setting((), "internal: run one engine of the grpo part in this process (what the "
                                          "benchmark's subprocesses are given)", metavar="ENGINE SPEC OUT")


def main(argv: list[str] | None = None) -> int:
    args = parse_bench(AlignmentEnginesBench, argv)
    if args.worker:
        if len(args.worker) != 3:
            usage_error("--worker needs ENGINE SPEC OUT")
        return worker_main(*args.worker)
    wanted = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    try:
        device = torch.device(wanted)
    except RuntimeError as exc:
        usage_error(f"--device {args.device!r}: {exc}")
    if device.type == "cuda" and not torch.cuda.is_available():
        usage_error("--device cuda but CUDA is not available")
    args = settle_args(args, device)
    parts = listed(args.parts)
    if args.threads:
        torch.set_num_threads(args.threads)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    import transformers
    import trl

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({torch.get_num_threads()} threads)"
    report = {"device": name, "torch": torch.__version__, "transformers": transformers.__version__,
              "trl": trl.__version__, "argv": sys.argv[1:] if argv is None else argv}
    print(f"device: {name}; torch {torch.__version__}; transformers {transformers.__version__}; trl {trl.__version__}")
    with tempfile.TemporaryDirectory(prefix="alignment-bench-") as tmp:
        workdir = Path(tmp)
        try:
            report["model"] = prepare(args, workdir)
        except (ValueError, FileNotFoundError) as exc:
            usage_error(str(exc))
        m = report["model"]
        print(f"model: {m['model']}: d_model={m['d_model']}, n_layers={m['n_layers']}, vocab {m['vocab']}, "
              f"context {m['context']}, {m['params_m']}M params; tokenizer vocab {m['tokenizer_vocab']}")
        if "rollout" in parts:
            report["rollout"] = bench_rollout(args, workdir, device)
        if "grpo" in parts:
            report["grpo"] = bench_grpo(args, workdir, device)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2, default=str) + "\n")
        print(f"\nwrote {args.out}")
    area = args.area or ("gpu_alignment_engines" if device.type == "cuda" else "alignment_engines")
    finish(area, results_rows(report), args, recorded_command(report["argv"]))
    failed = [e for e, r in report.get("grpo", {}).items() if isinstance(r, dict) and "error" in r]
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
