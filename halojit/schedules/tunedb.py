"""The tuning database: one SQLite file in the cache dir holding, per
(group structural key, target, versions), the best schedule recipe found by a
tuning run and every candidate it measured; JSON export and import.

A recipe is a ScheduleSpec (scheduler or template name and its parameters,
the Adams2019 seed included), never generated schedule text: seeded
autoscheduler runs are reproducible for one Halide version (HALIDE_NOTES c),
and the versions are part of the key.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..config import get_config
from ..errors import HalojitError
from ..runtime.cache import TUNING_DB, tuning_db_path
from .autoschedule import ScheduleSpec, make_spec

DB_NAME = TUNING_DB
EXPORT_FORMAT = "halojit-tuning"
EXPORT_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS best (
    key TEXT PRIMARY KEY,       -- hash of group_key, target, versions
    group_key TEXT NOT NULL,
    avals TEXT NOT NULL,        -- the group's input avals, for people
    target TEXT NOT NULL,
    versions TEXT NOT NULL,
    ops TEXT NOT NULL,
    kind TEXT NOT NULL,         -- reduction, stencil, matmul or elementwise
    recipe TEXT NOT NULL,       -- {"name": ..., "params": {...}}
    best_s REAL NOT NULL,
    default_recipe TEXT NOT NULL,
    default_s REAL,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS candidates (
    key TEXT NOT NULL,
    recipe TEXT NOT NULL,
    status TEXT NOT NULL,       -- ok, wrong, crash, timeout, error
    seconds REAL,               -- median run time, when status is ok
    compile_s REAL,
    message TEXT NOT NULL DEFAULT '',
    updated REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS candidates_key ON candidates(key);
"""


db_path = tuning_db_path


def versions() -> str:
    """What a recorded recipe depends on besides the group and the target
    (HALOJIT_FAST_MATH changes the lowering, as kernel names know)."""
    from .. import __version__
    from ..generators.build import CODEGEN_VERSION
    from ..runtime.cache import halide_version
    fast = ";fast_math" if getattr(get_config(), "fast_math", False) else ""
    return f"halide={halide_version()};halojit={__version__};codegen={CODEGEN_VERSION}{fast}"


def record_key(group_key: str, target: str, vers: str | None = None) -> str:
    h = hashlib.blake2b(digest_size=12)
    for part in (group_key, str(target), vers or versions()):
        h.update(part.encode())
        h.update(b"|")
    return h.hexdigest()


def recipe_json(spec: ScheduleSpec) -> str:
    return json.dumps({"name": spec.name, "params": dict(spec.params)}, sort_keys=True)


def recipe_spec(text: str) -> ScheduleSpec:
    """The ScheduleSpec of a stored recipe, validated (raises HalojitError)."""
    try:
        data = json.loads(text)
        return make_spec(data["name"], data.get("params") or {})
    except (ValueError, KeyError, TypeError) as e:
        raise HalojitError(f"tuning database: unreadable recipe {text!r}: {e}") from None


@dataclass
class CandidateRecord:
    recipe: ScheduleSpec
    status: str
    seconds: float | None = None
    compile_s: float | None = None
    message: str = ""


@dataclass
class Record:
    """The tuned best for one group at one shape, target and versions."""

    group_key: str
    avals: str
    target: str
    ops: str
    kind: str
    recipe: ScheduleSpec
    best_s: float
    default_recipe: ScheduleSpec
    default_s: float | None
    versions: str = ""
    updated: float = 0.0
    candidates: list[CandidateRecord] = field(default_factory=list)

    @property
    def key(self) -> str:
        return record_key(self.group_key, self.target, self.versions)

    @property
    def speedup(self) -> float | None:
        return self.default_s / self.best_s if self.default_s and self.best_s else None


@contextlib.contextmanager
def connect(path: Path | None = None, create: bool = True):
    """A connection with the schema in place; commits on success."""
    path = Path(path) if path is not None else db_path()
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
    # 30 s busy timeout: a tuning run and compiles in other processes share the file.
    conn = sqlite3.connect(str(path), timeout=30.0)
    try:
        conn.executescript(_SCHEMA)
        with conn:
            yield conn
    finally:
        conn.close()


def lookup(group_key: str, target: str) -> ScheduleSpec | None:
    """The recorded best recipe for a group, or None. Never raises: a missing,
    locked or corrupt database means "not tuned" (logged with HALOJIT_LOG)."""
    path = db_path()
    if not path.exists():
        return None
    try:
        with connect(path, create=False) as conn:
            row = conn.execute("SELECT recipe FROM best WHERE key = ?",
                               (record_key(group_key, target),)).fetchone()
        return recipe_spec(row[0]) if row else None
    except (sqlite3.Error, HalojitError) as e:
        if get_config().log:
            print(f"[halojit] tuning database {path} ignored: {e}", file=sys.stderr, flush=True)
        return None


def save(record: Record, path: Path | None = None) -> None:
    """Insert or replace a group's record and its candidates."""
    record.versions = record.versions or versions()
    record.updated = record.updated or time.time()
    key = record.key
    with connect(path) as conn:
        conn.execute("DELETE FROM candidates WHERE key = ?", (key,))
        conn.execute(
            "INSERT OR REPLACE INTO best VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (key, record.group_key, record.avals, record.target, record.versions, record.ops,
             record.kind, recipe_json(record.recipe), record.best_s,
             recipe_json(record.default_recipe), record.default_s, record.updated))
        conn.executemany(
            "INSERT INTO candidates VALUES (?,?,?,?,?,?,?)",
            [(key, recipe_json(c.recipe), c.status, c.seconds, c.compile_s, c.message[:2000],
              record.updated) for c in record.candidates])


def _spec_or_raw(text: str) -> ScheduleSpec:
    """A stored recipe as a spec, unvalidated (listing must not fail on a
    recipe that this version no longer accepts)."""
    try:
        data = json.loads(text)
        return ScheduleSpec(data["name"], tuple(sorted((k, str(v)) for k, v in
                                                       (data.get("params") or {}).items())))
    except (ValueError, KeyError, TypeError, AttributeError):
        return ScheduleSpec(f"<unreadable {text[:40]!r}>")


def load_all(path: Path | None = None, candidates: bool = False) -> list[Record]:
    """Every record, newest first (with candidates when asked)."""
    path = Path(path) if path is not None else db_path()
    if not path.exists():
        return []
    out = []
    with connect(path, create=False) as conn:
        rows = conn.execute("SELECT group_key, avals, target, versions, ops, kind, recipe, best_s,"
                            " default_recipe, default_s, updated, key FROM best"
                            " ORDER BY updated DESC").fetchall()
        for r in rows:
            rec = Record(r[0], r[1], r[2], r[4], r[5], _spec_or_raw(r[6]), r[7],
                         _spec_or_raw(r[8]), r[9], r[3], r[10])
            if candidates:
                rec.candidates = [
                    CandidateRecord(_spec_or_raw(c[0]), c[1], c[2], c[3], c[4])
                    for c in conn.execute("SELECT recipe, status, seconds, compile_s, message"
                                          " FROM candidates WHERE key = ?", (r[11],))]
            out.append(rec)
    return out


def export_json(dest: Path | str, path: Path | None = None) -> int:
    """Write every record with its candidates to ``dest`` (JSON); returns the count."""
    records = load_all(path, candidates=True)

    def cand(c: CandidateRecord):
        return {"recipe": json.loads(recipe_json(c.recipe)), "status": c.status,
                "seconds": c.seconds, "compile_s": c.compile_s, "message": c.message}
    data = {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "records": [
        {"group_key": r.group_key, "avals": r.avals, "target": r.target, "versions": r.versions,
         "ops": r.ops, "kind": r.kind, "recipe": json.loads(recipe_json(r.recipe)),
         "best_s": r.best_s, "default_recipe": json.loads(recipe_json(r.default_recipe)),
         "default_s": r.default_s, "updated": r.updated,
         "candidates": [cand(c) for c in r.candidates]} for r in records]}
    from ..runtime.cache import atomic_write
    atomic_write(dest, json.dumps(data, indent=1))
    return len(records)


def import_json(src: Path | str, path: Path | None = None) -> tuple[int, int]:
    """Merge an export into the database: a record replaces a local one with
    the same key only when it is newer. Returns (imported, kept local)."""
    try:
        data = json.loads(Path(src).read_text())
    except (OSError, ValueError) as e:
        raise HalojitError(f"cannot read tuning export {src}: {e}") from None
    if not isinstance(data, dict) or data.get("format") != EXPORT_FORMAT:
        raise HalojitError(f"{src} is not a halojit tuning export (expected \"format\": "
                           f"{EXPORT_FORMAT!r}); write one with `halojit tune --export FILE`.")
    if data.get("version", 0) > EXPORT_VERSION:
        raise HalojitError(f"{src} is tuning export version {data.get('version')}; this halojit "
                           f"reads up to version {EXPORT_VERSION}. Upgrade halojit.")
    local = {r.key: r.updated for r in load_all(path)}
    imported = kept = 0
    for d in data.get("records", []):
        try:
            spec = lambda r: ScheduleSpec(r["name"], tuple(sorted(  # noqa: E731
                (k, str(v)) for k, v in r.get("params", {}).items())))
            rec = Record(d["group_key"], d["avals"], d["target"], d["ops"], d["kind"],
                         spec(d["recipe"]), float(d["best_s"]), spec(d["default_recipe"]),
                         d.get("default_s"), d["versions"], float(d["updated"]),
                         [CandidateRecord(spec(c["recipe"]), c["status"], c.get("seconds"),
                                          c.get("compile_s"), c.get("message", ""))
                          for c in d.get("candidates", [])])
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise HalojitError(f"{src}: malformed record {str(d)[:120]}: {e}") from None
        if local.get(rec.key, -1.0) >= rec.updated:
            kept += 1
            continue
        save(rec, path)
        imported += 1
    return imported, kept


def format_records(records: list[Record]) -> str:
    """The database as a table (``halojit tune --list``)."""
    if not records:
        return f"no tuned groups in {db_path()}"
    lines = [f"{'group':26s} {'kind':11s} {'inputs':30s} {'default ms':>10s} {'tuned ms':>9s} "
             f"{'speedup':>7s}  recipe"]
    for r in records:
        ops = r.ops if len(r.ops) <= 26 else r.ops[:23] + "..."
        avals = r.avals if len(r.avals) <= 30 else r.avals[:27] + "..."
        d = f"{r.default_s * 1e3:10.3f}" if r.default_s else f"{'-':>10s}"
        s = f"{r.speedup:6.2f}x" if r.speedup else f"{'-':>7s}"
        lines.append(f"{ops:26s} {r.kind:11s} {avals:30s} {d} {r.best_s * 1e3:9.3f} {s}  "
                     f"{r.recipe}")
    current = versions()
    stale = sum(r.versions != current for r in records)
    if stale:
        lines.append(f"({stale} record(s) from other halojit/Halide versions are not used)")
    return "\n".join(lines)
