"""Speed's part of ``bench/REPORT.md``: its targets (warm and cold
``vault_semantic_query`` at scale, a tool call's overhead over its raw request: "Targets:
speed"), the latency-against-vault-size chart, and the sections "Speed and scale" and
"Tool-call overhead over the raw REST request".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.shared.harness import markdown_table
from bench.shared.targets import Target, num, targets_section

SCALE_CHART = "latency-vs-size.png"


# --- targets ------------------------------------------------------------------------------


def _semantic_rows(scale: Sequence[dict[str, Any]]) -> dict[tuple[int, str], dict[str, Any]]:
    return {
        (run["notes"], run["source"]): tool
        for run in scale
        for tool in run["tools"]
        if tool["tool"] == "vault_semantic_query"
    }


# A call this quick has no long work to report progress on: since the first query stopped
# waiting for the build (issue 38), the cold one at 10,000 notes answers in under a second.
_NOTHING_TO_REPORT_MS = 1000


def _scale_targets(scale: Sequence[dict[str, Any]]) -> list[Target]:
    rows = _semantic_rows(scale)
    raw_smart = {run["notes"]: run["raw_smart_ms"] for run in scale if run["raw_smart_ms"]}
    targets: list[Target] = []
    for source in ("folder", "stand-in"):
        at_10k = rows.get((10_000, source))
        raw = raw_smart.get(10_000) if source == "stand-in" else None
        targets.append(
            Target(
                "3.4",
                f"10,000 notes, {source}: warm vault_semantic_query median",
                "<= 200 ms",
                (num(at_10k["warm_median_ms"], " ms") if at_10k else "not run")
                + (f" (raw /search/smart alone: {num(raw, ' ms')})" if raw else ""),
                at_10k["warm_median_ms"] <= 200 if at_10k else None,
            )
        )
    biggest = max((notes for notes, _ in rows), default=None)
    cold = [row for (notes, _), row in rows.items() if notes == biggest]
    targets.append(
        Target(
            "3.4",
            "cold first query with progress notifications"
            + (f" ({biggest:,} notes)" if biggest else ""),
            f"> 0 progress events, unless it answers within {num(_NOTHING_TO_REPORT_MS)} ms",
            ", ".join(
                f"{row['progress_events']} events in {num(row['first_ms'])} ms" for row in cold
            )
            or "not run",
            all(
                row["progress_events"] > 0 or row["first_ms"] <= _NOTHING_TO_REPORT_MS
                for row in cold
            )
            if cold
            else None,
        )
    )
    growth = []
    for source in ("folder", "stand-in"):
        small, big = rows.get((1000, source)), rows.get((10_000, source))
        if small and big:
            growth.append(
                f"{source} x{big['warm_median_ms'] / small['warm_median_ms']:.1f} warm, "
                f"x{big['first_ms'] / small['first_ms']:.1f} cold"
            )
    targets.append(
        Target(
            "3.4",
            "growth from 1,000 to 10,000 notes",
            "reported",
            "; ".join(growth) or "not run",
            bool(growth) or None,
        )
    )
    return targets


def speed_targets(results: dict[str, Any]) -> list[Target]:
    """Warm and cold queries at scale, and a tool call's overhead over its raw request."""
    overhead = results["overhead"]
    return [
        *_scale_targets(results["scale"]),
        Target(
            "2.7",
            "vault_read_note via MCP / raw GET of the same note (stand-in, medians)",
            "<= 2",
            f"{overhead['ratio']:.2f}",
            overhead["ratio"] <= 2,
        ),
    ]


# --- charts -------------------------------------------------------------------------------


def scale_chart(scale: Sequence[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sources = ("folder", "stand-in")
    tools = sorted({tool["tool"] for run in scale for tool in run["tools"]})
    colours = plt.get_cmap("tab20")
    sizes = sorted({run["notes"] for run in scale})
    fig, axes = plt.subplots(1, 2, figsize=(11, 5), dpi=110, sharey=True)
    for ax, source in zip(axes, sources, strict=True):
        for index, tool in enumerate(tools):
            points = sorted(
                (run["notes"], max(timing["warm_median_ms"], 0.01))
                for run in scale
                if run["source"] == source
                for timing in run["tools"]
                if timing["tool"] == tool and not math.isnan(timing["warm_median_ms"])
            )
            semantic = tool == "vault_semantic_query"
            ax.plot(
                [p[0] for p in points],
                [p[1] for p in points],
                marker="o",
                color="black" if semantic else colours(index % 20),
                linewidth=3 if semantic else 1,
                label=tool.removeprefix("vault_"),
            )
        ax.axhline(200, linestyle="--", color="grey", linewidth=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(sizes, [f"{n:,}" for n in sizes])
        ax.minorticks_off()
        ax.set_title(f"through the {source}")
        ax.set_xlabel("notes in the vault")
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel("warm median latency per call (ms, log)")
    axes[1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1))
    fig.suptitle("Warm latency against vault size (bold: vault_semantic_query; dashed: 200 ms)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# --- sections -----------------------------------------------------------------------------


def _scale_section(results: dict[str, Any]) -> str:
    scale = results["scale"]
    sizes = sorted({run["notes"] for run in scale})
    parts = [
        "## Speed and scale",
        "",
        "Generated vaults (`bench/shared/generate_vault.py`, deterministic, planted passages, "
        "Smart Connections' files beside them). Per source and size, a fresh server process "
        "with no index; each tool's first call in it, then up to "
        f"{results['config']['warm_calls']} warm calls (fewer once a tool's warm calls pass "
        f"{results['config']['budget_seconds']:.0f} s), in a fixed order from the server's "
        "start, so they run beside its first build (reading the notes, then embedding "
        "them), which no call waits for. Milliseconds per call through the MCP client, "
        "first / warm median / warm p95.",
    ]
    for source in ("folder", "stand-in"):
        runs = {run["notes"]: run for run in scale if run["source"] == source}
        tools = list(dict.fromkeys(t["tool"] for run in runs.values() for t in run["tools"]))
        rows: list[list[object]] = []
        for tool in tools:
            row: list[object] = [tool]
            for notes in sizes:
                timing = next((t for t in runs[notes]["tools"] if t["tool"] == tool), None)
                row.append(
                    "—"
                    if timing is None
                    else f"{num(timing['first_ms'])} / {num(timing['warm_median_ms'])} / "
                    f"{num(timing['warm_p95_ms'])}"
                    + (f" ({timing['errors']} errors)" if timing["errors"] else "")
                )
            rows.append(row)
        rows.append(["(server start and initialise)", *[num(runs[n]["connect_ms"]) for n in sizes]])
        if source == "stand-in":
            rows.append(
                [
                    "(raw POST /search/smart, no MCP: warm median)",
                    *[num(runs[n]["raw_smart_ms"]) for n in sizes],
                ]
            )
            if all(runs[n].get("primed_ms") for n in sizes):
                rows.append(
                    [
                        "(the stand-in's own first listing and smart search, before the "
                        "server started)",
                        *[num(runs[n]["primed_ms"]) for n in sizes],
                    ]
                )
        parts += [
            "",
            f"### Through the {source}",
            "",
            markdown_table(["tool", *[f"{n:,} notes" for n in sizes]], rows),
        ]
    semantic = _semantic_rows(scale)
    if semantic:
        parts += [
            "",
            "Planted-question hit rate of `vault_semantic_query` (warm calls): "
            + ", ".join(
                f"{notes:,} {source} {num(row['hit_rate'], '%')}"
                for (notes, source), row in sorted(semantic.items())
            )
            + ". The generated vectors are hashed bags of words, not a language model's: "
            "they load and rank like real ones, but say little about semantic quality.",
        ]
    parts += ["", f"![warm latency against vault size]({SCALE_CHART})"]
    return "\n".join(parts)


def _overhead_section(overhead: dict[str, Any]) -> str:
    return "\n".join(
        [
            "## Tool-call overhead over the raw REST request",
            "",
            f"`bench/speed/read_overhead.py`: {overhead['rounds']} rounds alternating a raw "
            f"authenticated GET of `{overhead['note']}` on the stand-in and "
            "`vault_read_note` of the same note through an in-process MCP client, so both "
            "see the same machine noise.",
            "",
            markdown_table(
                ["raw GET median ms", "vault_read_note median ms", "ratio"],
                [
                    [
                        f"{overhead['raw_median_ms']:.2f}",
                        f"{overhead['tool_median_ms']:.2f}",
                        f"{overhead['ratio']:.2f}",
                    ]
                ],
            ),
        ]
    )


def sections(results: dict[str, Any], out: Path) -> dict[str, str]:
    """Speed's sections by name, its chart written into ``out``."""
    scale_chart(results["scale"], out / SCALE_CHART)
    return {
        "targets-speed": targets_section("speed", speed_targets(results)),
        "scale": _scale_section(results),
        "overhead": _overhead_section(results["overhead"]),
    }
