#!/usr/bin/env python3
"""fpr_study.py - measured against expected false-positive rate, per table.

The worked example of doc/python.md, as a researcher would run it in a
notebook: for each filter setting (bits per key) fill a database (tables of
256 KiB), ask it for keys it does not hold, read table_stats() into lists, and plot each
table's measured false-positive rate against the rate its filter's size
predicts. Then explain() a present key, a missing key and a key that the
filters answered wrongly ("maybe" for a key the table lacks).

    python3 python/examples/fpr_study.py                  # writes doc/python-fpr.svg
    python3 python/examples/fpr_study.py --keys 50000 --out /tmp/fpr.svg

Needs kv (pip install ./python, or cmake -DKV_PYTHON=ON: build/python) and
matplotlib (Debian: python3-matplotlib).
"""

import argparse
import os
import pprint
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
try:
    import kv
except ImportError:
    sys.path.insert(0, os.path.join(HERE, "..", "..", "build", "python"))
    import kv


def study(path, bits, nkeys, probes):
    """Fills a database at `bits` bits per key, asks for `probes` missing
    keys, and returns its table_stats() as lists."""
    db = kv.DB(path, create_if_missing=True, bloom_bits_per_key=bits,
               write_buffer_size=1 << 20, target_file_size=256 << 10)
    for i in range(nkeys):
        db.put(b"user%08d" % (2 * i), b"v" * 20)  # even numbers: present
    db.compact_range()
    for i in range(probes):
        db.get(b"user%08d" % (2 * (i * 7919 % nkeys) + 1))  # odd numbers: missing
    rows = db.table_stats()
    db.close()
    return {
        "bits": [bits] * len(rows),
        "level": [t["level"] for t in rows],
        "keys": [t["filter_keys"] for t in rows],
        "asked": [t["filter_negatives"] + t["filter_false_positives"] for t in rows],
        "expected": [t["expected_fpr"] for t in rows],
        "measured": [t["measured_fpr"] for t in rows],
    }


def plot(data, out):
    import matplotlib
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "kv-fpr-study"  # the same SVG each run
    matplotlib.rcParams["svg.fonttype"] = "none"  # text as text: a smaller file
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    cmap = plt.get_cmap("viridis")
    settings = sorted(set(data["bits"]))
    for i, bits in enumerate(settings):
        idx = [j for j, b in enumerate(data["bits"]) if b == bits and data["measured"][j] > 0]
        ax.scatter([data["expected"][j] for j in idx], [data["measured"][j] for j in idx],
                   s=[8 + data["keys"][j] / 2000 for j in idx],
                   color=cmap(i / max(1, len(settings) - 1)), alpha=0.8,
                   label="%g bits/key" % bits)
    lo = min(e for e in data["expected"] if e > 0) / 2
    hi = max(data["expected"]) * 2
    ax.plot([lo, hi], [lo, hi], color="grey", linewidth=1, linestyle="--", label="measured = expected")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("expected false-positive rate (from the filter's m, k and keys)")
    ax.set_ylabel("measured false-positive rate")
    ax.set_title("kv: one point per table (size: its keys)")
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(True, which="major", linewidth=0.3)
    fig.tight_layout()
    fig.savefig(out, format="svg", metadata={"Date": None})
    plt.close(fig)


def compact(e):
    """An explain() dict without the fields that say nothing here (None,
    0, False), so that the steps fit on a page."""
    def keep(d):
        return {k: v for k, v in d.items() if v not in (None, 0, False) or k in ("found", "seq")}
    out = keep(e)
    out["steps"] = [keep(s) for s in e["steps"]]
    return out


def show_explains(path, nkeys):
    """explain() of a present key, a missing key, and a false positive."""
    db = kv.DB(path)
    present = db.explain(b"user%08d" % 2000)
    missing = None
    fp = None
    for i in range(nkeys):
        e = db.explain(b"user%08d" % (2 * i + 1))
        if missing is None and not any(s["false_positive"] for s in e["steps"]):
            missing = e
        if fp is None and any(s["false_positive"] for s in e["steps"]):
            fp = e
        if missing and fp:
            break
    db.close()
    for title, e in (("present key", present), ("missing key", missing),
                     ("false positive", fp)):
        print("\n# explain() of a %s" % title)
        pprint.pprint(compact(e), sort_dicts=False, width=100)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", type=int, default=200000, help="keys per database (default 200000)")
    ap.add_argument("--probes", type=int, default=200000, help="missing keys asked (default 200000)")
    ap.add_argument("--bits", default="2,4,6,8,10,12,16",
                    help="bits per key to sweep (default 2,4,6,8,10,12,16)")
    ap.add_argument("--out", default=os.path.join(HERE, "..", "..", "doc", "python-fpr.svg"),
                    help="the SVG to write (default doc/python-fpr.svg)")
    args = ap.parse_args()

    base = tempfile.mkdtemp(prefix="kv-fpr-")
    try:
        data = {}
        print("%5s %6s %9s %9s %10s %10s" % ("bits", "level", "keys", "asked", "expected",
                                            "measured"))
        for bits in (float(b) for b in args.bits.split(",")):
            rows = study(os.path.join(base, "b%g" % bits), bits, args.keys, args.probes)
            for j in range(len(rows["bits"])):
                print("%5g %6d %9d %9d %10.5f %10.5f" % tuple(rows[c][j] for c in
                      ("bits", "level", "keys", "asked", "expected", "measured")))
            for c, v in rows.items():
                data.setdefault(c, []).extend(v)
        plot(data, args.out)
        print("\nwrote %s (%d tables)" % (os.path.normpath(args.out), len(data["bits"])))
        show_explains(os.path.join(base, "b10"), args.keys)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
