"""Derived numbers (speedups, roofline fractions, GFLOP/s), issue 4's targets as
met / not met, the terminal tables, the JSON file and the speedup plot."""

from __future__ import annotations

import json
from pathlib import Path

from . import workloads as W

PEERS = ("numexpr", "numba", "jax", "torch")  # "best peer" is the fastest of these
COLUMNS = ("numpy",) + PEERS + ("halojit", "halojit_out")


def columns(result: dict) -> list[str]:
    """numpy, the known peers, any other contender, then halojit (fresh and out=)."""
    have = result["peers"]
    extra = [n for n in have if n not in COLUMNS]
    cols = [c for c in ("numpy",) + PEERS if c in have] + extra
    if "halojit" in have:
        cols += ["halojit", "halojit_out"]
    return cols


def _median(row, name):
    return row["peers"].get(name, {}).get("median_s")


def _min(row, name):
    return row["peers"].get(name, {}).get("min_s")


def summarize(result: dict) -> dict:
    """Add speedups, roofline fractions and the targets to ``result`` (in place)."""
    roof = result.get("roofline", {})
    copy, read = roof.get("copy_gbs"), roof.get("read_gbs")
    targets = []
    for size, entry in result["sizes"].items():
        comp = entry.get("compile", {})
        for row in entry["rows"]:
            d = row["derived"] = {}
            np_t, hj_t = _median(row, "numpy"), _median(row, "halojit")
            d["speedup_vs_numpy"] = {n: np_t / _median(row, n) for n in row["peers"]
                                     if np_t and _median(row, n)}
            peer_ts = {n: _median(row, n) for n in PEERS if _median(row, n)}
            if peer_ts:
                d["best_peer"] = min(peer_ts, key=peer_ts.get)
                if hj_t:
                    d["vs_best_peer"] = peer_ts[d["best_peer"]] / hj_t
            if hj_t and _median(row, "numba"):
                d["vs_numba"] = _median(row, "numba") / hj_t
            for n in ("halojit", "halojit_out"):  # best against best: the roof is a best too
                t = _min(row, n)
                if not t:
                    continue
                if row["kind"] == W.MEMORY and copy:
                    d[f"{n}_copy_fraction"] = row["bytes"] / t / 1e9 / copy
                if row["kind"] == W.REDUCTION and read:
                    d[f"{n}_read_fraction"] = row["bytes"] / t / 1e9 / read
            if row["kind"] == W.MATMUL:
                d["gflops"] = {n: row["flops"] / _median(row, n) / 1e9 for n in row["peers"]
                               if _median(row, n)}
            targets += _targets(size, row, comp.get(row["workload"], {}))
    result["targets"] = targets
    return result


def _targets(size, row, comp) -> list[dict]:
    d, name, out = row["derived"], row["workload"], []

    def target(what, value, threshold, higher_is_better=True, unit="x"):
        met = None if value is None else (value >= threshold if higher_is_better
                                          else value <= threshold)
        out.append({"size": size, "workload": name, "target": what, "value": value,
                    "threshold": threshold, "unit": unit, "met": met})

    up = d.get("speedup_vs_numpy", {})
    if size == "large":
        if row["kind"] == W.MEMORY:
            target(">= 4x numpy", up.get("halojit"), 4.0)
            target(">= 2x best peer", d.get("vs_best_peer"), 2.0)
            target("out= >= 60% of copy roof", d.get("halojit_out_copy_fraction"), 0.6, unit="%")
        elif row["kind"] == W.REDUCTION:
            target(">= 1.5x numpy", up.get("halojit"), 1.5)
            target(">= 80% of read stream", d.get("halojit_read_fraction"), 0.8, unit="%")
        elif row["kind"] == W.MATMUL:
            target(">= 0.9x numpy GFLOP/s", up.get("halojit"), 0.9)
    elif size == "small":
        if row.get("kind") != W.REDUCTION:  # the multi-op workloads
            target(">= 1.5x numpy", up.get("halojit"), 1.5)
            target("no slower than numba", d.get("vs_numba"), 1.0)
        ovh = row["peers"].get("halojit", {}).get("overhead_s")
        target("call overhead <= 3 us", None if ovh is None else ovh * 1e6, 3.0,
               higher_is_better=False, unit="us")
    if comp.get("cold_s") is not None and comp.get("kernels", 0) <= 3:
        target("compile cold < 1 s", comp["cold_s"], 1.0, higher_is_better=False, unit="s")
    if comp.get("warm_s") is not None:
        target("new process, warm cache < 50 ms", comp["warm_s"] * 1e3, 50.0,
               higher_is_better=False, unit="ms")
    return out


# -- terminal -----------------------------------------------------------------------------
def _t(seconds, unit):
    if seconds is None:
        return "-"
    v = seconds * (1e3 if unit == "ms" else 1e6)
    return f"{v:.2f}" if v < 100 else f"{v:.1f}" if v < 1000 else f"{v:.0f}"


def _cell(row, name, unit):
    e = row["peers"].get(name)
    if e is None:
        return "-"
    if "error" in e:
        return "WRONG" if e["error"].startswith("wrong") else "ERROR"
    if "skipped" in e:
        return "-"
    return _t(e.get("median_s"), unit)


def _pct(v):
    return "-" if v is None else f"{v * 100:.0f}%"


def _x(v):
    return "-" if v is None else f"{v:.2f}x" if v < 10 else f"{v:.1f}x"


def table(result: dict, size: str) -> str:
    """One size's table: median times, speedups, roofline, compile, targets met."""
    entry = result["sizes"][size]
    unit = "ms" if size == "large" else "us"
    labels = {"torch": "torch.comp", "jax": "jax.jit", "halojit_out": "hj out="}
    cols = columns(result)
    head = ["workload"] + [labels.get(c, c) for c in cols] + ["x numpy", "x peer"]
    if size == "large":
        head += ["roof", "roof out="]
    else:
        head += ["x numba", "kern us", "ovh us"]
    head += ["cold s", "warm ms", "targets"]
    lines = [head]
    comp = entry.get("compile", {})
    met = {}
    for t in result.get("targets", []):
        if t["size"] == size:
            m = met.setdefault(t["workload"], [0, 0])
            m[0] += bool(t["met"])
            m[1] += 1
    for row in entry["rows"]:
        d = row["derived"]
        cells = [row["workload"]] + [_cell(row, c, unit) for c in cols]
        cells += [_x(d.get("speedup_vs_numpy", {}).get("halojit")), _x(d.get("vs_best_peer"))]
        if size == "large":
            if row["kind"] == W.MEMORY:
                cells += [_pct(d.get("halojit_copy_fraction")) + " copy",
                          _pct(d.get("halojit_out_copy_fraction")) + " copy"]
            elif row["kind"] == W.REDUCTION:
                cells += [_pct(d.get("halojit_read_fraction")) + " read", "-"]
            else:
                g = d.get("gflops", {})
                cells += [f"{g.get('halojit', 0):.0f} GF/s", f"np {g.get('numpy', 0):.0f} GF/s"]
        else:
            hj = row["peers"].get("halojit", {})
            cells += [_x(d.get("vs_numba")), _t(hj.get("kernel_s"), "us"),
                      _t(hj.get("overhead_s"), "us")]
        c = comp.get(row["workload"], {})
        cells += [f"{c['cold_s']:.2f}" if "cold_s" in c else "-",
                  f"{c['warm_s'] * 1e3:.1f}" if "warm_s" in c else "-"]
        m = met.get(row["workload"])
        cells.append(f"{m[0]}/{m[1]} met" if m else "-")
        lines.append(cells)
    widths = [max(len(str(l[i])) for l in lines) for i in range(len(head))]
    text = [f"== {size}: median {unit} per call of {result['repeat']} warm runs "
            f"(float32, fresh outputs; 'hj out=' writes into a preallocated array)"]
    for l in lines:
        text.append("  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                              for i, (c, w) in enumerate(zip(l, widths))))
    return "\n".join(text)


def first_calls(result: dict, size: str) -> str:
    """In-process first call of every contender (compiles included), seconds."""
    cols = [c for c in columns(result) if c != "halojit_out"]
    lines = [["workload"] + cols]
    for row in result["sizes"][size]["rows"]:
        lines.append([row["workload"]] + [
            f"{row['peers'][c]['first_call_s']:.2f}" if "first_call_s" in row["peers"].get(c, {})
            else "-" for c in cols])
    widths = [max(len(l[i]) for l in lines) for i in range(len(cols) + 1)]
    text = [f"== {size}: first call in this run's process, s (JIT compiles; halojit's kernels "
            "may come from the disk cache here: see cold/warm above)"]
    text += ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(l, widths))) for l in lines]
    return "\n".join(text)


def targets_table(result: dict) -> str:
    lines = ["== issue 4 targets"]
    for t in result.get("targets", []):
        v = t["value"]
        if v is None:
            val = "n/a"
        elif t["unit"] == "%":
            val = f"{v * 100:.0f}%"
        elif t["unit"] == "x":
            val = f"{v:.2f}x"
        else:
            val = f"{v:.3g} {t['unit']}"
        state = "n/a" if t["met"] is None else "met" if t["met"] else "NOT MET"
        lines.append(f"{t['size']:6s} {t['workload']:10s} {t['target']:34s} {val:>10s}  {state}")
    n = [t for t in result.get("targets", []) if t["met"] is not None]
    lines.append(f"{sum(t['met'] for t in n)} of {len(n)} targets met")
    return "\n".join(lines)


def header(result: dict) -> str:
    m = result["machine"]
    roof = result.get("roofline", {})
    lines = [f"# halojit {result['halojit']} bench on {m.get('cpu')} ({m.get('cores')} cores), "
             f"numpy {result['numpy']}, python {m.get('python')}"
             + (f", commit {m['halojit_commit']}" if m.get("halojit_commit") else ""),
             f"# load average before {_load(m.get('loadavg'))}, after {_load(m.get('loadavg_after'))}"]
    for name, p in result["peers"].items():
        lines.append(f"# {p['label']:14s} " + (p["version"] if p["available"] else
                                                "skipped: " + p["note"]))
    if roof:
        lines.append(f"# roofline: copy {roof['copy_gbs']:.1f} GB/s ({roof['copy_by']}), "
                     f"read {roof['read_gbs']:.1f} GB/s ({roof['read_by']}); "
                     f"arrays of {roof['bytes'] / 2 ** 20:.0f} MiB, best of "
                     f"{len(roof.get('runs', [])) or 1} runs")
        for kind in ("copy", "read"):
            lines.append(f"#   {kind} candidates, GB/s: " + ", ".join(
                f"{n} {v:.1f}" for n, v in roof[kind].items()))
    sg = result["sizes"].get("large", {}).get("sgemm_gflops")
    if sg:
        lines.append(f"# numpy sgemm at the MLP's first matmul: {sg:.0f} GFLOP/s")
    for size, e in result["sizes"].items():
        if "runtime_build_s" in e.get("compile", {}):
            lines.append(f"# compile times of {size}: first call in a new process less a later "
                         "call; cold = empty kernel cache (the Halide runtime, built once per "
                         f"cache dir in {e['compile']['runtime_build_s']:.1f} s with a first "
                         "kernel, already there), warm = the kernels on disk")
    return "\n".join(lines)


def _load(v):
    return "-" if not v else " ".join(f"{x:.2f}" for x in v)


def errors(result: dict) -> str:
    lines = []
    over = [f"{t['workload']}" for t in result.get("targets", [])
            if t["unit"] == "%" and t["value"] and t["value"] > 1.0]
    over += [r["workload"] for e in result["sizes"].values() for r in e["rows"]
             if max((v for k, v in r.get("derived", {}).items() if k.endswith("_fraction")),
                    default=0) > 1.0]
    if over:
        lines.append(f"! above 100% of the roof: {', '.join(sorted(set(over)))}: the roofline "
                     "runs were slowed (a busy neighbour?) or the data stays in cache; "
                     "read those fractions as upper bounds")
    for size, e in result["sizes"].items():
        for row in e["rows"]:
            for name, p in row["peers"].items():
                if "error" in p:
                    lines.append(f"! {size} {row['workload']} {name}: {p['error']}")
    return "\n".join(lines)


def render(result: dict) -> str:
    parts = [header(result)] + [table(result, s) for s in result["sizes"]]
    parts += [first_calls(result, next(iter(result["sizes"])))] if result["sizes"] else []
    parts += [targets_table(result)]
    err = errors(result)
    if err:
        parts.append(err)
    return "\n\n".join(parts)


def markdown(result: dict) -> str:
    """The tables as GitHub markdown (what the README shows)."""
    parts = []
    for size in result["sizes"]:
        lines = table(result, size).splitlines()
        title = lines[0]
        rows = [_cells(l) for l in lines[1:]]  # cells like "62% copy" stay whole
        parts.append(f"**{title.strip('= ')}**\n")
        parts.append("| " + " | ".join(rows[0]) + " |")
        parts.append("|" + "---|" * len(rows[0]))
        parts += ["| " + " | ".join(r) + " |" for r in rows[1:]]
        parts.append("")
    not_met = [t for t in result.get("targets", []) if t["met"] is False]
    n = [t for t in result.get("targets", []) if t["met"] is not None]
    parts.append(f"{len(n) - len(not_met)} of {len(n)} targets met.")
    return "\n".join(parts)


def _cells(line: str) -> list[str]:
    import re
    return [c for c in re.split(r"\s{2,}", line.strip()) if c]


# -- files ----------------------------------------------------------------------------------
def write_json(result: dict, path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        json.dump(result, fh, indent=1, default=float)


def plot(result: dict, path) -> str | None:
    """Speedup over numpy per workload per contender (log scale); None if no matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return None
    sizes = list(result["sizes"])
    names = [c for c in columns(result) if c != "numpy"]
    if not sizes or not names:
        return None
    fig, axes = plt.subplots(1, len(sizes), figsize=(7 * len(sizes), 4.5), squeeze=False)
    for ax, size in zip(axes[0], sizes):
        rows = result["sizes"][size]["rows"]
        width = 0.8 / len(names)
        for i, n in enumerate(names):
            ys = [r["derived"].get("speedup_vs_numpy", {}).get(n, 0) for r in rows]
            ax.bar([j + (i - len(names) / 2 + 0.5) * width for j in range(len(rows))], ys,
                   width, label="halojit out=" if n == "halojit_out" else
                   result["peers"].get(n, {}).get("label", n))
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}x"))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xticks(range(len(rows)), [r["workload"] for r in rows], rotation=30, ha="right")
        ax.set_ylabel("speedup over numpy (median)")
        ax.set_title(f"{size} ({result['machine'].get('cores')} cores)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(names), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)
