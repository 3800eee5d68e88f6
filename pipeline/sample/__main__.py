"""``python -m pipeline.sample``: write the generated crawl WARC and its ground-truth manifest."""

import sys

from pipeline.sample.crawl import main

sys.exit(main())
