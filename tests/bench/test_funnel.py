"""bench.tools.funnel: make repro's stage metrics -> one results row per step and measure."""

import json

from bench.tools import funnel
from bench.tools.results import read_rows


def test_funnel_rows_from_stage_metrics(tmp_path):
    details = tmp_path / "metrics" / "details"
    details.mkdir(parents=True)
    (details / "extract.json").write_text(json.dumps({"records_read": 10, "docs_out": 8, "drops": {}}))
    (details / "filter.json").write_text(json.dumps({
        "docs_in": 8, "docs_out": 5, "step_order": ["langid"], "chars_out": 500,
        "steps": {"langid": {"docs_in": 8, "docs_out": 5, "chars_out": 500, "drops": {"langid_de": 3}}}}))
    (details / "dedup.json").write_text(json.dumps({"docs_in": 5, "docs_out": 4, "chars_out": 400,
                                                    "drops": {"exact_duplicate": 1}}))
    out = tmp_path / "results"
    out.mkdir()
    assert funnel.main(["--metrics-dir", str(tmp_path / "metrics"), "--results-dir", str(out)]) == 0
    rows = {(r["name"], r["metric"]): r["value"] for r in read_rows(out)}
    assert rows[("extract/records", "docs")] == 10 and rows[("filter/langid", "docs")] == 5
    assert rows[("filter/langid", "kept_share")] == 0.5
    assert funnel.main(["--metrics-dir", str(tmp_path / "absent"), "--results-dir", str(out)]) == 2
