"""Dedup speed and quality: our numpy MinHash vs datasketch, and the whole stage on N generated documents.

Documents are 20-60 sentences drawn from a pool of grammar sentences (``pipeline.sample.text.EnglishProse``), so two
unrelated documents share almost no 5-gram. About 10% are planted near-duplicates of an earlier original
(one word in a hundred swapped, one or two sentences added, sometimes one dropped, as ``sample.near_duplicate``
does) and 3% exact copies (case and punctuation changed). Truth: an original with its copies is one cluster.

Timings are interleaved repeats (ours, datasketch, ours, ...; the stage alone, repeated): median and min-max.

1. Signatures, one core, same texts: ours (``minhash_signatures``) vs ``datasketch.MinHash`` fed the same
   normalized 5-grams; both timings include normalization and shingling.
2. Near-duplicate clustering on a subset: ours (LSH + Jaccard verification) vs ``datasketch.MinHashLSH`` with
   the same 14 x 8 bands (unverified, as FineWeb): seconds and pairwise recall/precision.
3. The stage (``run_dedup``, fresh process) on all N documents in 4 gzip JSONL files: seconds, docs/s,
   recall/precision against the planted truth, and the stage process's peak RSS (VmHWM; workers not included).

    python -m bench.benchmarks.dedup --docs 20000
"""

from __future__ import annotations

import gzip
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bench.tools.results import BenchSettings, Result, finish, interleaved, parse_bench
from pipeline.dedup.minhash import UnionFind, jaccard, minhash_signatures, normalize_text, shingle_hash_set
from pipeline.dedup.stage import DedupConfig, near_duplicate_clusters
from pipeline.sample.text import TOPICS, EnglishProse
from workbench.params import setting


def generate(n_docs: int, seed: int = 0, near_share: float = 0.10, exact_share: float = 0.03,
             ) -> tuple[list[dict], list[int], list[str]]:
    """``n_docs`` documents; for each, the index of the original it copies (its own if none) and its kind
    (``original``, ``near`` or ``exact``)."""
    r = random.Random(seed)
    prose = EnglishProse(r, ["Ada Byron", "Alan Kay", "Grace Hopper", "Edsger Dijkstra"],
                         ["Lyon", "Porto", "Quito", "Oslo"], ["Acme", "Initech", "Globex"])
    pool = []
    for i in range(max(2000, n_docs)):  # one sentence per document on average: pairs share ~0 sentences
        if i % 100 == 0:
            prose.topic = r.choice(tuple(TOPICS))
        pool.append(prose.sentence())
    vocab = sorted({w for s in pool[:2000] for w in s.split()})
    docs, truth, kinds, sentences, originals = [], [], [], [], []
    for i in range(n_docs):
        roll = r.random()
        if originals and roll < near_share:
            j = r.choice(originals)
            doc = list(sentences[j])
            n_words = sum(len(s.split()) for s in doc)
            for _ in range(max(1, n_words // 100)):  # swap a word
                k = r.randrange(len(doc))
                words = doc[k].split()
                words[r.randrange(len(words))] = r.choice(vocab)
                doc[k] = " ".join(words)
            for _ in range(r.randint(1, 2)):  # add a sentence
                doc.insert(r.randint(0, len(doc)), r.choice(pool))
            if r.random() < 0.3:  # drop one
                del doc[r.randrange(len(doc))]
            text, kind = " ".join(doc), "near"
        elif originals and roll < near_share + exact_share:
            j = r.choice(originals)
            doc, text, kind = sentences[j], " ".join(sentences[j]).upper().replace(".", "!"), "exact"
        else:
            j, doc, kind = i, r.sample(pool, r.randint(20, 60)), "original"
            text = " ".join(doc)
            originals.append(i)
        truth.append(j)
        kinds.append(kind)
        sentences.append(doc)
        docs.append({"id": f"d{i:07d}", "url": f"https://example.com/{i}", "text": text})
    return docs, truth, kinds


def pair_scores(truth: list, pred: list) -> dict:
    """Pairwise recall and precision of a clustering, from cluster sizes (no quadratic loop)."""
    def pairs(counts):
        return sum(c * (c - 1) // 2 for c in counts.values())

    both, t, p = pairs(Counter(zip(truth, pred, strict=False))), pairs(Counter(truth)), pairs(Counter(pred))
    return {"truth_pairs": t, "recall": both / t if t else 1.0, "precision": both / p if p else 1.0}


def datasketch_signatures(texts: list[str], num_hashes: int = 112, ngrams: int = 5) -> list:
    """``datasketch.MinHash`` fed the same normalized word n-grams our signatures hash."""
    from datasketch import MinHash

    out = []
    for text in texts:
        words = normalize_text(text).split()
        m = MinHash(num_perm=num_hashes, seed=1)
        m.update_batch([" ".join(words[i:i + ngrams]).encode() for i in range(max(1, len(words) - ngrams + 1))])
        out.append(m)
    return out


def bench_signatures(texts: list[str], num_hashes: int = 112, ngrams: int = 5, repeats: int = 3) -> Result:
    """docs/s of our signatures and datasketch's, interleaved repeats."""
    ours, theirs = interleaved(lambda: minhash_signatures(texts, num_hashes, ngrams),
                               lambda: datasketch_signatures(texts, num_hashes, ngrams), repeats)
    return rate_result("signatures", "docs_per_s", len(texts), ours, theirs, "docs/s", "datasketch MinHash")


def rate_result(name, metric, n, ours, theirs, unit, baseline) -> Result:
    rates = [n / t for t in ours]
    base = statistics.median(n / t for t in theirs) if theirs else None
    return Result(name, metric, statistics.median(rates), unit, baseline if theirs else None, base,
                  repeats=len(rates), min=min(rates), median=statistics.median(rates), max=max(rates))


def datasketch_clusters(texts: list[str], cfg: DedupConfig) -> list[int]:
    """FineWeb-style clustering with datasketch: every LSH candidate joins (no verification)."""
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(num_perm=cfg.num_hashes, params=(cfg.num_bands, cfg.rows))
    sketches = []
    for i, text in enumerate(texts):
        words = normalize_text(text).split()
        m = MinHash(num_perm=cfg.num_hashes, seed=cfg.seed)
        m.update_batch([" ".join(words[k:k + cfg.ngrams]).encode()
                        for k in range(max(1, len(words) - cfg.ngrams + 1))])
        lsh.insert(i, m)
        sketches.append(m)
    uf = UnionFind(len(texts))
    for i, m in enumerate(sketches):
        for j in lsh.query(m):
            uf.union(i, j)
    return [uf.find(i) for i in range(len(texts))]


def bench_clustering(docs: list[dict], truths: dict[str, list[int]], cfg: DedupConfig,
                     repeats: int = 3) -> list[Result]:
    """Ours (14 x 8 bands + verification) vs datasketch's MinHashLSH, interleaved: docs/s, and each one's pairwise
    recall/precision; ours with 28 x 4 bands once more for its recall."""
    texts = [d["text"] for d in docs]
    wide = DedupConfig(num_hashes=cfg.num_hashes, num_bands=cfg.num_hashes // 4, ngrams=cfg.ngrams,
                       jaccard_threshold=cfg.jaccard_threshold, seed=cfg.seed)
    preds = {}
    ours, theirs = interleaved(lambda: preds.__setitem__("ours", near_duplicate_clusters(docs, cfg)),
                               lambda: preds.__setitem__("datasketch", datasketch_clusters(texts, cfg)), repeats)
    preds["ours_wide"] = near_duplicate_clusters(docs, wide)
    rows = [rate_result(f"clustering_{cfg.num_bands}x{cfg.rows}", "docs_per_s", len(docs), ours, theirs, "docs/s",
                        f"datasketch {cfg.num_bands}x{cfg.rows}")]
    names = {"ours": f"ours_{cfg.num_bands}x{cfg.rows}", "ours_wide": f"ours_{wide.num_bands}x{wide.rows}",
             "datasketch": f"datasketch_{cfg.num_bands}x{cfg.rows}"}
    for key, name in names.items():
        for truth, label in (("all", "all planted"), ("at_thr", f"Jaccard >= {cfg.jaccard_threshold}")):
            score = pair_scores(truths[truth], preds[key])
            rows.append(Result(name, f"recall_{truth}", score["recall"], f"pairs, {label}"))
        rows.append(Result(name, "precision", pair_scores(truths["all"], preds[key])["precision"], "pairs"))
    return rows


def planted_jaccards(docs: list[dict], truth: list[int], kinds: list[str], ngrams: int = 5) -> dict[int, float]:
    """True Jaccard of every planted near-duplicate with its original, by document index."""
    return {i: jaccard(shingle_hash_set(docs[i]["text"], ngrams), shingle_hash_set(docs[j]["text"], ngrams))
            for i, j in enumerate(truth) if kinds[i] == "near"}


def truth_at(truth: list[int], js: dict[int, float], threshold: float) -> list[int]:
    """The planted truth without the near-duplicates whose true Jaccard is below ``threshold`` (alone then)."""
    return [i if js.get(i, 1.0) < threshold else t for i, t in enumerate(truth)]


# Peak RSS from VmHWM, which starts afresh at exec; ru_maxrss would include the forked benchmark's memory.
_STAGE = """
import json, sys
from pathlib import Path
from pipeline.dedup.stage import DedupConfig, run_dedup
from workbench.memory import peak_rss_mb
d = Path(sys.argv[1])
m = run_dedup(d / "in", d / "out", d / "metrics.json", DedupConfig(workers=int(sys.argv[2])), rejected_dir=d / "rej")
m["peak_rss_mb"] = peak_rss_mb()
print(json.dumps(m))
"""


def bench_stage(docs: list[dict], truths: dict[str, list[int]], scratch: Path, workers: int = 1,
                files: int = 4) -> dict:
    """Write the documents as gzip JSONL, run the stage in a fresh process on empty outputs (the stage resumes
    otherwise), score its clusters."""
    for old in ("out", "rej"):
        shutil.rmtree(scratch / old, ignore_errors=True)
    (scratch / "metrics.json").unlink(missing_ok=True)
    per = -(-len(docs) // files)
    for f in range(files):
        with gzip.open(scratch / "in" / f"part-{f}.jsonl.gz", "wt", encoding="utf-8", compresslevel=1) as fh:
            for d in docs[f * per:(f + 1) * per]:
                fh.write(json.dumps(d) + "\n")
    proc = subprocess.run([sys.executable, "-c", _STAGE, str(scratch), str(workers)], capture_output=True,
                          text=True, check=True)
    metrics = json.loads(proc.stdout.strip().splitlines()[-1])
    index = {d["id"]: i for i, d in enumerate(docs)}
    pred = list(range(len(docs)))
    for sub, key in (("out", "minhash_cluster"), ("rej", None)):
        for path in sorted((scratch / sub).glob("*.jsonl.gz")):
            with gzip.open(path, "rt", encoding="utf-8") as fh:
                for line in fh:
                    d = json.loads(line)
                    rep = d.get("minhash_cluster") or (d.get("duplicate_of") if key is None else None) or d["id"]
                    pred[index[d["id"]]] = index[rep]
    return {**metrics, **{k: pair_scores(t, pred) for k, t in truths.items()}}


@dataclass(frozen=True)
class DedupBench(BenchSettings):
    docs: int = setting(20_000, "documents for the stage run", at_least=10)
    sig_docs: int = setting(2000, "documents for the signature comparison", at_least=1)
    cluster_docs: int = setting(10_000, "documents for ours vs MinHashLSH", at_least=10)
    workers: int = setting(1, "signature processes in the stage run", at_least=1)
    seed: int = setting(0, "generator seed")
    repeats: int = setting(3, "timed repeats (ours and datasketch interleaved)", at_least=1)


def main(argv: list[str] | None = None) -> int:
    args = parse_bench(DedupBench, argv)
    cfg = DedupConfig(workers=1)
    start = time.perf_counter()
    docs, truth, kinds = generate(args.docs, args.seed)
    n_words = sum(len(d["text"].split()) for d in docs) / len(docs)
    print(f"# bench.benchmarks.dedup: {args.docs} documents ({n_words:.0f} words on average, "
          f"{kinds.count('near')} near and {kinds.count('exact')} exact copies planted) "
          f"generated in {time.perf_counter() - start:.1f} s")
    js = planted_jaccards(docs, truth, kinds)
    thr = cfg.jaccard_threshold
    values = sorted(js.values())
    print(f"planted near-duplicates: {len(js)}; true 5-gram Jaccard with their original: min {values[0]:.2f}, "
          f"median {values[len(values) // 2]:.2f}, share >= {thr}: {sum(j >= thr for j in values) / len(js):.3f}")
    print(f"recall/precision are pairwise, against 'all' planted copies and against those with Jaccard >= {thr}\n")
    truths = {"all": truth, "at_thr": truth_at(truth, js, thr)}

    sig = bench_signatures([d["text"] for d in docs[:args.sig_docs]], cfg.num_hashes, cfg.ngrams, args.repeats)
    k = min(args.cluster_docs, args.docs)
    clusters = bench_clustering(docs[:k], {name: t[:k] for name, t in truths.items()}, cfg, args.repeats)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "in").mkdir()
        runs = [bench_stage(docs, truths, Path(tmp), args.workers) for _ in range(args.repeats)]
    m = runs[-1]
    stage = [rate_result("stage", "docs_per_s", args.docs, [r["seconds"] for r in runs], [], "docs/s", None),
             Result("stage", "peak_rss_mb", max(r["peak_rss_mb"] for r in runs), "MB"),
             Result("stage", "recall_all", m["all"]["recall"], "pairs, all planted"),
             Result("stage", "recall_at_thr", m["at_thr"]["recall"], f"pairs, Jaccard >= {thr}"),
             Result("stage", "precision", m["all"]["precision"], "pairs")]
    results = [sig, *clusters, *stage]
    print(f"signatures on {args.sig_docs} docs, clustering on {k}, the stage on {args.docs} in 4 gzip files "
          f"(workers={args.workers}); {args.repeats} interleaved repeats")
    return finish("dedup", results, args, f"python -m bench.benchmarks.dedup --docs {args.docs}")


if __name__ == "__main__":
    raise SystemExit(main())
