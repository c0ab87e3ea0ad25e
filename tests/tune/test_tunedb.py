"""The tuning database alone: records, lookup by key and versions, export and
import (no compiles)."""

from __future__ import annotations

import json

import pytest

from halojit.errors import HalojitError
from halojit.schedules import make_spec, tunedb
from halojit.schedules.tunedb import CandidateRecord, Record


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HALOJIT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def record(gk="g1", target="x86-64-linux-avx2", updated=0.0, rows="8"):
    best = make_spec("RowReduce", {"rows_per_task": rows})
    default = make_spec("Adams2019")
    return Record(gk, "f32[8,64]", target, "max, exp, sum", "reduction", best, 1e-3, default,
                  2e-3, updated=updated,
                  candidates=[CandidateRecord(default, "ok", 2e-3, 0.1),
                              CandidateRecord(best, "ok", 1e-3, 0.2),
                              CandidateRecord(make_spec("Li2018"), "crash", None, 0.3, "died")])


def test_lookup_finds_the_recorded_recipe_only_for_its_key(cache):
    assert tunedb.lookup("g1", "x86-64-linux-avx2") is None  # no database yet
    tunedb.save(record())
    assert tunedb.lookup("g1", "x86-64-linux-avx2") == make_spec("RowReduce",
                                                                 {"rows_per_task": "8"})
    assert tunedb.lookup("g2", "x86-64-linux-avx2") is None
    assert tunedb.lookup("g1", "x86-64-linux-avx512") is None
    (rec,) = tunedb.load_all(candidates=True)
    assert rec.speedup == pytest.approx(2.0)
    assert [c.status for c in rec.candidates] == ["ok", "ok", "crash"]
    assert make_spec("RowReduce", {"rows_per_task": "8"}).key in tunedb.format_records([rec])


def test_records_of_other_versions_are_not_used(cache):
    old = record()
    old.versions = "halide=20.0.0;halojit=0.0.1;codegen=1"
    tunedb.save(old)
    assert tunedb.lookup("g1", "x86-64-linux-avx2") is None
    assert "not used" in tunedb.format_records(tunedb.load_all())


def test_a_corrupt_database_means_not_tuned(cache):
    cache.mkdir(parents=True)
    (cache / tunedb.DB_NAME).write_bytes(b"this is not sqlite" * 100)
    assert tunedb.lookup("g1", "x86-64-linux-avx2") is None


def test_export_import_round_trip_keeps_newer_local_records(cache, tmp_path):
    tunedb.save(record("g1", updated=100.0))
    tunedb.save(record("g2", updated=100.0, rows="4"))
    out = tmp_path / "export.json"
    assert tunedb.export_json(out) == 2
    data = json.loads(out.read_text())
    assert data["format"] == "halojit-tuning" and len(data["records"]) == 2

    other = tmp_path / "other.sqlite"
    tunedb.save(record("g1", updated=200.0, rows="1"), other)  # newer than the export's g1
    assert tunedb.import_json(out, other) == (1, 1)
    by_key = {r.group_key: r for r in tunedb.load_all(other, candidates=True)}
    assert by_key["g1"].recipe == make_spec("RowReduce", {"rows_per_task": "1"})
    assert by_key["g2"].recipe == make_spec("RowReduce", {"rows_per_task": "4"})
    assert len(by_key["g2"].candidates) == 3
    assert tunedb.import_json(out, other) == (0, 2)  # idempotent


def test_import_refuses_a_foreign_file(cache, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"records": []}))
    with pytest.raises(HalojitError, match="not a halojit tuning export"):
        tunedb.import_json(bad)
    bad.write_text("{")
    with pytest.raises(HalojitError, match="cannot read"):
        tunedb.import_json(bad)


def test_fast_math_records_are_kept_apart(cache, monkeypatch):
    tunedb.save(record())
    monkeypatch.setenv("HALOJIT_FAST_MATH", "1")  # another lowering: another key
    assert tunedb.lookup("g1", "x86-64-linux-avx2") is None
