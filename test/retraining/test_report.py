"""The report of a retraining job (retraining/report.py): its markdown keeps its format (the demo and
readers of the reports rely on it), the JSON holds the rest, and a later job may replace both."""

import json

import pytest

from lifelong_learning.retraining.job import REPORT_TITLE, check_outputs, is_report
from lifelong_learning.retraining.report import markdown, write_reports

REPORT = {
    "task": "inverse-dynamics",
    "bags": ["/logs/a", "/logs/b"],
    "n_train": 720,
    "n_test": 180,
    "centers": 100,
    "tuning_rows": 720,
    "model": "/models/m.llm",
    "exported_objective": "holdout-bags",
    "exported_samples": 1000,
    "skipped": {"effort beyond limit": 2, "residual outlier (training part)": 3},
    "baselines": {"RNEA (URDF)": 0.51234, "rigid body + friction (RLS)": 0.0421},
    "promotion": {
        "n_samples": 100,
        "data": "the most recent 10% of the bags",
        "metric": "nMSE",
        "candidate_error": 0.0312,
        "serving": "RNEA",
        "serving_error": 0.5,
        "promoted": True,
        "reason": "better by 94 %",
        "learned_after": 100,
    },
    "warnings": ["only 1000 samples"],
    "objectives": {
        "holdout-bags": {
            "metric": "m",
            "value": 0.03123,
            "forgetting": 0.9999,
            "residual_lam_scale": 10.0,
            "seconds": 2.345,
            "epochs": 40,
            "lam": 1.234e-5,
            "lengthscale": [1.5, 22.25],
        }
    },
}

EXPECTED = """\
# Nyström tuning report (inverse-dynamics)

- bags: /logs/a, /logs/b
- samples: 720 train, 180 test (the most recent part); centres: 100; tuned on 720 of the training samples
- exported: `/models/m.llm` (objective `holdout-bags`, refitted on all 1000 samples)
- samples skipped (not learned, not scored): 2 effort beyond limit, 3 residual outlier (training part)
- baseline RNEA (URDF): test nMSE 0.5123
- baseline rigid body + friction (RLS): test nMSE 0.0421
- promotion gate (100 samples of the most recent 10% of the bags): candidate nMSE 0.0312, RNEA 0.5: \
**promoted** (better by 94 %); then the model learned those 100 samples
- **warning**: only 1000 samples

| objective | test metric | value | forgetting | residual λ × | tuning time (s) | epochs | λ | length-scales |
|---|---|---|---|---|---|---|---|---|
| holdout-bags | m | 0.03123 | 0.9999 | 10.0 | 2.3 | 40 | 1.23e-05 | 1.5, 22.2 |
"""


def test_the_markdown_keeps_its_format():
    assert markdown(REPORT) == EXPECTED
    classification = {
        **REPORT,
        "task": "classification",
        "baselines": {},
        "warnings": [],
        "skipped": {},
        "promotion": {**REPORT["promotion"], "serving_error": None, "promoted": False, "learned_after": 0},
        "objectives": {"proposed": {**REPORT["objectives"]["holdout-bags"], "forgetting": ""}},
    }
    text = markdown(classification)
    assert "180 test (a random part)" in text and "skipped (not learned, not scored): none" in text
    assert "RNEA none: **not promoted** (better by 94 %)\n" in text and "**warning**" not in text


def test_the_reports_are_written_and_a_later_job_may_replace_them(tmp_path, make_job):
    job = make_job("bag", task="classification", out="m.llm")
    _, md, js = job.output_paths()
    report = dict(REPORT)
    write_reports(report, md, js)
    assert md.read_text(encoding="utf-8") == report["markdown"] == EXPECTED
    assert json.loads(js.read_text(encoding="utf-8")) == REPORT  # everything but the markdown
    check_outputs(job)  # earlier reports: replaceable
    md.write_text("notes", encoding="utf-8")
    with pytest.raises(ValueError, match="not a file this writer made"):
        check_outputs(job)


def test_a_report_is_known_by_its_title_or_its_keys(tmp_path):
    md, js, other = tmp_path / "r.md", tmp_path / "r.json", tmp_path / "o.md"
    md.write_text(f"{REPORT_TITLE} (classification)\n", encoding="utf-8")
    js.write_text(json.dumps({"task": "classification", "objectives": {}}), encoding="utf-8")
    other.write_text("# notes\n", encoding="utf-8")
    assert is_report(md) and is_report(js)
    assert not is_report(other) and not is_report(tmp_path / "none.json")
