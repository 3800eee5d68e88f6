"""The document filters, each a ``pipeline.runtime.steps.Step``: language ID (``langid``), the Gopher and C4 rules
(``quality_rules``, on ``words``: datatrove's English word tokenizer), PII masking (``pii``), and the filter stage
that chains them with the classifiers' steps (``stage``, ``python -m pipeline.filters.stage``).

CS336 assignment 4's functions are importable from here: ``identify_language``, ``mask_emails``,
``mask_phone_numbers``, ``mask_ips`` and ``gopher_quality_filter``.
"""

from pipeline.filters.langid import identify_language
from pipeline.filters.pii import mask_emails, mask_ips, mask_phone_numbers
from pipeline.filters.quality_rules import gopher_quality_filter

__all__ = ["gopher_quality_filter", "identify_language", "mask_emails", "mask_ips", "mask_phone_numbers"]
