#!/usr/bin/env python3
"""Draw per-step time against position from `lingen compare --json` output.

usage: plot_compare.py COMPARE.json OUT.png
       plot_compare.py --check        (exit 0 if matplotlib can be imported)

Rows 1 and 2 (linear RNN mode, softmax with a KV cache) are timed at every position; rows 3 and 4
(recomputing the prefix) at the sampled positions only, drawn with markers. Log-scale time axis:
the linear RNN's line is flat, the softmax lines rise with the position. A second panel draws the
resident memory of rows 1 and 2 after each position: flat for the RNN state, rising as the KV
cache fills. Draws the file that `lingen compare --json FILE` writes;
needs matplotlib (Debian: python3-matplotlib).
"""
import json
import os
import sys
import tempfile

STYLE = {  # row key -> (colour, marker)
    "linear_rnn": ("tab:blue", None),
    "softmax_kv_cache": ("tab:orange", None),
    "softmax_recompute": ("tab:red", "o"),
    "linear_recompute": ("tab:green", "s"),
}


def plot(cmp, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mem = [r for r in cmp["rows"] if "rss_bytes" in r["latency"]]
    fig, axes = plt.subplots(2 if mem else 1, 1, figsize=(8, 8 if mem else 5), sharex=True, squeeze=False,
                             gridspec_kw={"height_ratios": [3, 2]} if mem else None)
    ax = axes[0][0]
    for row in cmp["rows"]:
        lat = row["latency"]
        colour, marker = STYLE.get(row["key"], (None, "."))
        ax.plot(lat["positions"], lat["seconds"], color=colour, marker=marker, markersize=4,
                linewidth=1.0 if marker is None else 1.5,
                label=f'{row["row"]}. {row["name"]}' + (" (sampled positions)" if row["extrapolated"] else ""))
    ax.set_yscale("log")
    ax.set_ylabel(f'seconds per step, batch of {cmp["batch"]}')
    fig.suptitle(f'lingen compare: {cmp["dataset"]}, N = {cmp["seq_len"]}, {cmp["threads"]} threads')
    ax.grid(True, which="both", alpha=0.3)
    # Above the axes, not over them: rows 3-4 span the whole height, no corner is free.
    ax.legend(fontsize=8, loc="lower left", bbox_to_anchor=(0, 1.01), ncol=2, frameon=False)
    if mem:
        mx = axes[1][0]
        for row in mem:
            lat = row["latency"]
            mx.plot(lat["positions"], [b / 1e6 for b in lat["rss_bytes"]], color=STYLE.get(row["key"], (None,))[0],
                    label=f'{row["row"]}. {row["name"]}')
        mx.set_ylabel("resident memory, MB")
        mx.set_ylim(bottom=0)
        mx.grid(True, alpha=0.3)
        mx.legend(fontsize=8, loc="lower right")   # both lines are in the upper half (ylim from 0)
        ax = mx
    ax.set_xlabel("position (sub-pixel index)")
    fig.tight_layout()
    # Write beside the target, then rename: never a half-written PNG.
    fd, tmp = tempfile.mkstemp(suffix=".png", dir=os.path.dirname(os.path.abspath(out)))
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=120)
        umask = os.umask(0)      # mkstemp makes 0600: give the PNG the usual permissions
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, out)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv):
    check = argv[1:] == ["--check"]
    if len(argv) != 3 and not check:
        print("\n".join(__doc__.strip().splitlines()[2:4]), file=sys.stderr)
        return 2
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print(f"plot_compare.py: matplotlib is missing for {sys.executable} "
              "(Debian: apt install python3-matplotlib; or set $PYTHON)", file=sys.stderr)
        return 1
    if check:
        return 0
    try:
        with open(argv[1]) as f:
            cmp = json.load(f)
        plot(cmp, argv[2])
    except (OSError, ValueError, KeyError) as e:
        print(f"plot_compare.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
