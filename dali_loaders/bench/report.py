"""The results as a table, a list of targets met or missed, and a chart."""
from typing import List

LIMIT_MEANING = {"cifar10": "gather + float NCHW", "imagenet": "DALI decode only", "resnet50": "DALI decode only"}

# (what, workload, field, at least / at most, bound, format): the targets for this machine.
TARGETS = [
    ("CIFAR-10 train vs torchvision", "cifar10/train", "vs_torchvision", ">=", 12.0, "{:.2f}x"),
    ("ImageNet-style train vs torchvision", "imagenet/train", "vs_torchvision", ">=", 2.5, "{:.2f}x"),
    ("ImageNet-style train vs DALI decode only", "imagenet/train", "of_limit", ">=", 0.80, "{:.0%}"),
    ("ImageNet-style val vs torchvision", "imagenet/val", "vs_torchvision", ">=", 2.0, "{:.2f}x"),
    ("CIFAR-10 train DALI peak RSS", "cifar10/train", "dali_peak_rss_mb", "<=", 1024.0, "{:,.0f} MB"),
]


def _value(result: dict, field: str) -> float:
    if field == "dali_peak_rss_mb":
        return result["loaders"]["dali"]["peak_rss_mb"]
    return result[field]


def check_targets(results: List[dict]) -> List[dict]:
    by_name = {r["workload"]: r for r in results}
    checked = []
    for what, workload, field, sense, bound, shown in TARGETS:
        if workload in by_name:
            value = _value(by_name[workload], field)
            met = value >= bound if sense == ">=" else value <= bound
            checked.append({"target": what, "workload": workload, "value": value, "shown": shown.format(value),
                            "bound": f"{sense} {shown.format(bound)}", "met": bool(met)})
    return checked


def _loader_label(result: dict, kind: str) -> str:
    if kind == "torchvision":
        workers = result["loaders"][kind]["num_workers"]
        return f"torchvision ({workers} worker{'' if workers == 1 else 's'})"
    if kind == "limit":
        return f"limit: {LIMIT_MEANING[result['dataset']]}"
    threads = result["loaders"]["dali"]["num_threads"]
    return f"DALI ({threads} thread{'' if threads == 1 else 's'})"


def _rss(loader: dict) -> str:
    text = f"{loader['peak_rss_mb']:,.0f}"
    if loader.get("num_workers"):
        text += f" (+{loader['children_peak_rss_mb']:,.0f}/worker)"
    return text


def _row(result: dict, kind: str) -> List[str]:
    loader = result["loaders"][kind]
    ratio = {"dali": f"{result['vs_torchvision']:.2f}x", "torchvision": "1.00x"}.get(kind, "")
    of_limit = {"dali": f"{100 * result['of_limit']:.0f}%", "limit": "100%"}.get(kind, "")
    return [f"{result['workload']} ({result['batch_size']})", _loader_label(result, kind),
            f"{loader['images_per_s']:,.0f}", ratio, of_limit, f"{loader['first_batch_s']:.2f}", _rss(loader)]


HEADER = ["workload (batch)", "loader", "images/s", "vs torchvision", "of limit",
          "first batch (s)", "peak RSS (MB)"]


def markdown_table(results: List[dict]) -> str:
    rows = [HEADER, ["---"] * len(HEADER)]
    for result in results:
        rows += [_row(result, kind) for kind in ("dali", "torchvision", "limit")]
    return "\n".join("| " + " | ".join(row) + " |" for row in rows)


def targets_text(checked: List[dict]) -> str:
    lines = []
    for t in checked:
        lines.append(f"{'met' if t['met'] else 'MISSED':>6}  {t['target']}: {t['shown']} (target {t['bound']})")
    return "\n".join(lines)


def plot(results: List[dict], path: str, title: str) -> None:
    """One panel per workload: images/s of each loader, DALI's ratios written on its bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    figure, axes = plt.subplots(1, len(results), figsize=(3.6 * len(results), 4.4), squeeze=False)
    colors = {"dali": "#76b900", "torchvision": "#ee4c2c", "limit": "#9e9e9e"}
    for ax, result in zip(axes[0], results):
        kinds = ["dali", "torchvision", "limit"]
        speeds = [result["loaders"][k]["images_per_s"] for k in kinds]
        threads = result["loaders"]["dali"]["num_threads"]
        names = [f"DALI\n({threads} thread{'' if threads == 1 else 's'})", f"torchvision\n({result['loaders']['torchvision']['num_workers']} workers)",
                 "limit\n(" + LIMIT_MEANING[result["dataset"]].replace(" + ", " +\n").replace("DALI ", "") + ")"]
        bars = ax.bar(names, speeds, color=[colors[k] for k in kinds])
        ax.bar_label(bars, labels=[f"{s:,.0f}" for s in speeds], fontsize=8)
        ax.set_title(f"{result['workload']} (batch {result['batch_size']})", fontsize=10)
        ax.set_ylabel("images/s")
        ax.yaxis.set_major_formatter(matplotlib.ticker.StrMethodFormatter("{x:,.0f}"))
        ax.set_ylim(0, max(speeds) * 1.25)
        ax.text(0.5, -0.33, f"DALI: {result['vs_torchvision']:.1f}x torchvision, "
                            f"{100 * result['of_limit']:.0f}% of limit", transform=ax.transAxes,
                ha="center", fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
