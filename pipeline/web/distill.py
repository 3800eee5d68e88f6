"""``python -m pipeline.web.distill WARC...``: fit the ``distilled`` extractor's trees to trafilatura's own output.

Every HTML page of the inputs is cut into blocks (``pipeline.web.blocks``); trafilatura, with the extract stage's
settings, extracts the page, and a block is labelled *kept* when its text is in trafilatura's output (most of its
word trigrams, or the whole of a short block). No human label is read: any crawl, in any language, is training data.
Pages of ``--holdout`` (an evaluation file such as trafilatura's evaldata.json) that fall in its test half
(``eval_half``) are skipped, so the model is never fitted on a page it is scored on.

Then, by a fixed hash of each page's URL, a fifth of the pages is set aside to tune: the first forest is fitted on
the rest, the second on the rest with the first's probabilities from two folds (out of fold, so it learns how far to
trust them), and the fallback rule's cut is the unsure share above which the ``--fallback-share`` least sure tuned
pages go to trafilatura. That share is counted on crawled pages: a generated crawl (``python -m pipeline.sample``)
teaches the trees its page types, but its templated pages are surer than a crawl's and would move the cut. A block
is kept when P(trafilatura keeps it) > ``--threshold`` (0.5: the decision that agrees with the teacher most often
when the probabilities are calibrated; ``none`` picks it on the tuned pages). The agreement with trafilatura on the
tuned pages (characters of kept and dropped blocks) and the labels' log loss go into the model's provenance. Writes
``--weights`` (pipeline/web/distilled_model.json): the same inputs and settings give the same bytes. Labelled pages
are cached per input file (by its SHA-256) in ``--work-dir``: a killed run goes on from the files it finished.

The shipped weights are the default settings on ../shared/data/web's WARCs and a generated crawl of another seed
than the pipeline's sample (its pages, not its page types, are new):

    python -m pipeline.sample --params none --pages 1000 --seed 1 --out data/distill/sample-seed1.warc.gz \
        --manifest data/distill/sample-seed1.jsonl
    python -m pipeline.web.distill ../shared/data/web data/distill/sample-seed1.warc.gz \
        --holdout ../shared/data/web/trafilatura-evaldata.json
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from pipeline.web import blocks
from pipeline.web.blocks import FEATURE_NAMES, features, page_blocks
from pipeline.web.distilled import (
    CONTEXT_NAMES,
    MODEL_PATH,
    Model,
    context_features,
    keep_probabilities,
    unsure_share,
)
from pipeline.web.trees import fit
from pipeline.web.warc import is_generated_crawl, iter_payloads
from workbench.files import atomic_path, file_sha256, write_json
from workbench.params import parse_config, setting

HALVES = ("validation", "test")


def eval_half(url: str) -> str:
    """The fixed half of an evaluation set a page belongs to: by the first byte of its URL's SHA-256."""
    return HALVES[hashlib.sha256(url.encode("utf-8")).digest()[0] % 2]


def url_hash(url: str) -> str:
    """What a model's provenance records of each page it learnt from: the first 16 hex digits of its URL's SHA-256."""
    return hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]


def label_blocks(texts: list[str], teacher: str) -> np.ndarray:
    """1 for each block whose text trafilatura kept: most of its word trigrams are in the teacher's text, or, for a
    block of fewer than three words, the block is in it whole."""
    flat = " ".join(teacher.split())
    words = flat.split()
    trigrams = set(zip(words, words[1:], words[2:], strict=False))
    labels = np.zeros(len(texts), dtype=np.float64)
    for i, text in enumerate(texts):
        tokens = text.split()
        if len(tokens) < 3:
            labels[i] = float(bool(text) and text in flat)
            continue
        grams = list(zip(tokens, tokens[1:], tokens[2:], strict=False))
        labels[i] = float(sum(g in trigrams for g in grams) >= 0.5 * len(grams))
    return labels


@dataclass(frozen=True)
class DistillConfig:
    inputs: tuple[str, ...] = setting((), "WARC files (or folders of *.warc.gz) to learn from", positional=True)
    weights: str = setting(str(MODEL_PATH.relative_to(MODEL_PATH.parents[2])), "where the fitted model goes (JSON)")
    work_dir: str = setting("data/distill", "cache of labelled pages, one file per input")
    holdout: str | None = setting(None, "an evaluation file (JSON keyed by URL) whose test-half pages are skipped")
    trees: int = setting(100, "trees per forest")
    depth: int = setting(5, "levels per tree")
    lr: float = setting(0.2, "shrinkage of each tree")
    threshold: float | None = setting(0.5, "P(keep) above which a block is kept (none: the one that agrees best "
                                           "with trafilatura on the tuned pages, kept and dropped characters "
                                           "weighed alike)")
    fallback_share: float = setting(0.10, "share of pages, the least sure, that go to trafilatura")


def input_files(inputs: tuple[str, ...]) -> list[Path]:
    files = []
    for name in inputs:
        path = Path(name)
        files += sorted(path.glob("*.warc.gz")) if path.is_dir() else [path]
    missing = [str(p) for p in files if not p.is_file()]
    if missing or not files:
        raise ValueError(f"no such WARC file: {missing[0]}" if missing else "no input WARC files")
    return files


def labelled(path: Path, sha256: str, skip: set[str], work_dir: Path) -> dict:
    """The labelled pages of one WARC file: features ``x``, labels ``y``, the page of each block ``page``, its
    characters ``chars`` and each page's ``url``; cached by the file's SHA-256 and the features."""
    from pipeline.web.extract import decode_html, main_text

    code = file_sha256(blocks.__file__) + file_sha256(__file__)  # the features and fields as computed now
    key = hashlib.sha256(f"{sha256} {code} {sorted(skip)}".encode()).hexdigest()[:16]
    cache = work_dir / f"{path.name}.{key}.npz"
    if cache.is_file():
        with np.load(cache, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    xs, ys, pages, chars, urls, groups = [], [], [], [], [], []
    for payload in iter_payloads(path, Counter()):
        html = decode_html(payload.body, payload.charset)
        if html is None or payload.url in skip:
            continue
        page = page_blocks(html)
        if not page.texts:
            continue
        teacher = main_text(html, "trafilatura") or ""
        x, page_groups = features(page)
        xs.append(x)
        groups.append(page_groups)
        ys.append(label_blocks(page.texts, teacher))
        pages.append(np.full(len(page.texts), len(urls)))
        chars.append(np.array([len(t) for t in page.texts]))
        urls.append(payload.url)
    data = {"x": np.concatenate(xs) if xs else np.zeros((0, len(FEATURE_NAMES)), np.float32),
            "y": np.concatenate(ys) if ys else np.zeros(0), "page": np.concatenate(pages) if pages else np.zeros(0),
            "chars": np.concatenate(chars) if chars else np.zeros(0), "url": np.array(urls, dtype=str),
            "groups": np.concatenate(groups) if groups else np.zeros((0, 2), np.int64)}
    with atomic_path(cache) as tmp, open(tmp, "wb") as fh:  # a file handle: np.savez would add .npz to a path
        np.savez(fh, **data)
    return data


def gather(cfg: DistillConfig) -> tuple[dict, list[dict]]:
    """Every input's labelled pages joined (page ids made unique), and what each input was."""
    skip = set()
    if cfg.holdout:
        skip = {url for url in json.loads(Path(cfg.holdout).read_text(encoding="utf-8")) if eval_half(url) == "test"}
    parts, sources = [], []
    for path in tqdm(input_files(cfg.inputs), desc="distill: label", unit="file", file=sys.stderr):
        sha256 = file_sha256(path)
        part = labelled(path, sha256, skip, Path(cfg.work_dir))
        generated = is_generated_crawl(path)
        part["generated"] = np.full(len(part["url"]), generated)
        sources.append({"file": path.name, "sha256": sha256, "pages": int(len(part["url"])),
                        "blocks": int(len(part["y"])), **({"generated": True} if generated else {})})
        parts.append(part)
    offset, joined = 0, {k: [] for k in ("x", "y", "page", "chars", "url", "groups", "generated")}
    for part in parts:
        for k in joined:
            joined[k].append(part[k] + offset if k == "page" else part[k])
        offset += len(part["url"])
    return {k: np.concatenate(v) for k, v in joined.items()}, sources


def agreement(p: np.ndarray, y: np.ndarray, chars: np.ndarray, threshold: float) -> dict:
    keep = p > threshold
    return {"kept_chars": round(float(chars[(y == 1) & keep].sum() / max(chars[y == 1].sum(), 1)), 4),
            "dropped_chars": round(float(chars[(y == 0) & ~keep].sum() / max(chars[y == 0].sum(), 1)), 4)}


def log_loss(p: np.ndarray, y: np.ndarray, chars: np.ndarray) -> float:
    """The teacher labels' log loss under ``p``, weighted by characters (on the tuned pages, in the provenance: how
    well settings such as ``--trees`` and ``--depth`` fit the teacher; lower is better)."""
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return round(float(-(chars * (y * np.log(p) + (1 - y) * np.log(1 - p))).sum() / max(chars.sum(), 1)), 4)


def page_spans(page: np.ndarray) -> list[tuple[int, int]]:
    """(first, end) row of each page's blocks: labelled blocks come page by page, page ids counting up from 0."""
    bounds = np.flatnonzero(np.diff(page)) + 1
    starts, ends = np.concatenate([[0], bounds]), np.concatenate([bounds, [len(page)]])
    return list(zip(starts.tolist(), ends.tolist(), strict=True))


def best_threshold(p: np.ndarray, y: np.ndarray, chars: np.ndarray) -> float:
    """The P(keep) cut, on a grid of 0.30-0.70, whose mean of kept and dropped character agreement with the teacher
    is highest (the first of equals)."""
    grid = np.round(np.arange(0.30, 0.7001, 0.02), 2)
    scores = [sum(agreement(p, y, chars, float(t)).values()) for t in grid]
    return float(grid[int(np.argmax(scores))])


def distill(cfg: DistillConfig) -> dict:
    """Fit both forests and the fallback cut (the module docstring); returns the model as JSON data."""
    data, sources = gather(cfg)
    if not len(data["y"]):
        raise ValueError("no HTML page with text in the inputs")
    x, y, page, chars = data["x"], data["y"], data["page"].astype(np.int64), data["chars"].astype(np.float64)
    tune_page = np.array([hashlib.sha256(u.encode()).digest()[1] % 5 == 0 for u in data["url"]])
    tune, train = tune_page[page], ~tune_page[page]
    knobs = {"trees": cfg.trees, "depth": cfg.depth, "lr": cfg.lr}
    fold = (page % 2 == 0)
    out_of_fold = np.zeros(len(y))
    for side in (True, False):
        part = fit(x[train & (fold == side)], y[train & (fold == side)], **knobs)
        out_of_fold[fold != side] = part.predict(x[fold != side])
    blocks = fit(x[train], y[train], **knobs)
    spans = page_spans(page)
    groups = data["groups"].astype(np.int64)
    context_x = np.vstack([context_features(x[a:b], out_of_fold[a:b], groups[a:b]) for a, b in spans])
    context = fit(context_x[train], y[train], **knobs)
    tuned = [int(i) for i in np.flatnonzero(tune_page)]
    forests = Model(blocks, context, threshold=0.5, fallback_above=1.0, provenance={})  # the cuts come next
    p_tune = {i: keep_probabilities(forests, x[a:b], groups[a:b]) for i, (a, b) in ((i, spans[i]) for i in tuned)}
    crawled = [i for i in tuned if not data["generated"][i]] or tuned
    shares = sorted(unsure_share(p_tune[i], chars[slice(*spans[i])]) for i in crawled)
    fallback_above = float(np.quantile(shares, 1 - cfg.fallback_share)) if shares else 1.0
    p_all = np.concatenate([p_tune[i] for i in tuned]) if tuned else np.zeros(0)
    threshold = cfg.threshold if cfg.threshold is not None else best_threshold(p_all, y[tune], chars[tune])
    provenance = {"inputs": sources, "pages": int(page.max() + 1), "blocks": int(len(y)),
                  "page_url_hashes": sorted({url_hash(u) for u in data["url"]}),
                  "tuned_pages": len(tuned), "settings": {k: v for k, v in asdict(cfg).items()
                                                          if k not in ("weights", "work_dir", "inputs")},
                  "holdout_skipped": "test half of " + Path(cfg.holdout).name if cfg.holdout else None,
                  "agreement_on_tuned_pages": agreement(p_all, y[tune], chars[tune], threshold),
                  "log_loss_on_tuned_pages": log_loss(p_all, y[tune], chars[tune])}
    return {"features": list(FEATURE_NAMES), "context_features": list(CONTEXT_NAMES),
            "threshold": round(threshold, 4), "fallback_above": round(fallback_above, 6),
            "blocks": blocks.to_json(), "context": context.to_json(), "provenance": provenance}


def main(argv: list[str] | None = None) -> int:
    try:
        cfg, _ = parse_config(DistillConfig, "distill", argv, prog="python -m pipeline.web.distill",
                              description=__doc__.split("\n\n")[0])
        model = distill(cfg)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    write_json(cfg.weights, model, sort_keys=False)
    agree = model["provenance"]["agreement_on_tuned_pages"]
    print(f"distill: {model['provenance']['pages']} pages, {model['provenance']['blocks']} blocks; on the tuned pages "
          f"kept {agree['kept_chars']:.3f} / dropped {agree['dropped_chars']:.3f} of trafilatura's characters -> "
          f"{cfg.weights}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
