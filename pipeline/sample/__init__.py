"""The generated embedded default: a synthetic Common Crawl (``crawl``) of pages (``pages``) built from
multilingual prose (``text``), and the labelled texts the classifiers train on (``labels``).

It demonstrates the machinery; it never measures the quality of a filter or a model on the real world.
"""
