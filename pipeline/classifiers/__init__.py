"""The fastText classifiers: the models, their filter step and provenance sidecars (``models``), held-out and
cross-domain metrics (``evaluate``), the fastText file format and the real labelled sets (``labelled``). The
train-classifier stage that joins them with the generated labels is ``pipeline.classify``.

CS336 assignment 4's ``classify_quality``, ``classify_toxic_speech`` and ``classify_nsfw`` are importable from here
(docs/architecture.md, "CS336's import paths").
"""

from pipeline.classifiers.models import classify_nsfw, classify_quality, classify_toxic_speech

__all__ = ["classify_nsfw", "classify_quality", "classify_toxic_speech"]
