"""bench.benchmarks.tokenizer on tiny inputs: the rows it writes through the results layer are complete and
consistent."""

from pathlib import Path

import pytest

from bench.benchmarks.tokenizer import DEFAULT_GPT2, EOT, bench_bpe_training, bench_encode


def test_encode_rows_compare_with_tiktoken():
    if not DEFAULT_GPT2[0].is_file():
        pytest.skip("GPT-2 files absent")
    pytest.importorskip("tiktoken")
    text = EOT.join(f"Story {i}: we'll see the cat 中文 🙂 {i * 7}\n\n" for i in range(200))
    rows = bench_encode(text, "tiny", repeats=2, workers=2)
    assert [r.metric for r in rows] == ["encode_mb_per_s"] * 3
    for r in rows:
        assert r.repeats == 2 and r.min <= r.value <= r.max
        assert r.ratio == pytest.approx(r.value / r.baseline_value)


def test_training_rows_have_hf_as_baseline(tmp_path: Path):
    pytest.importorskip("tokenizers")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(EOT.join("the cat sat on the mat, we'll see " * 20 for _ in range(30)), encoding="utf-8")
    rows = bench_bpe_training(corpus, 300, [EOT], repeats=1, label="tiny")
    by = {(r.name, r.metric): r for r in rows}
    assert by[("hf, tiny", "train_s")].baseline is None
    ours = by[("ours, tiny", "train_s")]
    assert ours.baseline == "HF tokenizers" and ours.ratio == pytest.approx(ours.baseline_value / ours.value)
    assert by[("ours, tiny", "peak_rss_mb")].value > 0


def test_corpus_rows_count_utf8_megabytes_and_documents(tmp_path: Path):
    from bench.benchmarks.tokenizer import corpus_rows

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("x" * 1_000_000 + EOT + "é" * 500_000 + EOT + "\n", encoding="utf-8")  # é: two bytes
    rows = {r.metric: r.value for r in corpus_rows({"tiny": corpus})}
    assert rows == {"corpus_mb": 2.0, "documents": 2}  # 2,000,027 bytes; the blank tail is no document
