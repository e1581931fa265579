"""The results as a table, a list of targets met or missed, and a chart."""
import math
import textwrap
from typing import List

from .contenders import ARRAY_DATASETS

LIMIT_MEANING = {"cifar10": "memory bandwidth, uint8 read + float32 written", "imagenet": "DALI decode only",
                 "mnist": "memory bandwidth, uint8 read + float32 written", "flowers102": "DALI decode only",
                 "hf": "DALI decode only"}

# (what, workload, field, at least / at most, bound, format): the targets for this machine,
# set against the strongest CPU peer, torchvision's tensor backend. Checked on the full and
# quick runs only: --tiny's few batches mean nothing.
TARGETS = [
    ("CIFAR-10 train vs torchvision", "cifar10/train", "vs_torchvision", ">=", 12.0, "{:.2f}x"),
    # the default train recipe against the baseline DALI loader (the regression check) and
    # against torch on whole uint8 batches, side by side in the same run
    ("CIFAR-10 train vs the baseline DALI loader", "cifar10/train", "vs_baseline", ">=", 2.0, "{:.2f}x"),
    ("CIFAR-10 train vs torch on whole batches", "cifar10/train", "vs_tensor", ">=", 1.5, "{:.2f}x"),
    ("ImageNet-style train vs torchvision tensors", "imagenet/train", "vs_tensor", ">=", 1.3, "{:.2f}x"),
    ("ImageNet-style val vs torchvision tensors", "imagenet/val", "vs_tensor", ">=", 1.3, "{:.2f}x"),
    ("ImageNet-style train vs DALI decode only", "imagenet/train", "of_limit", ">=", 0.70, "{:.0%}"),
    ("CIFAR-10 train DALI peak RSS", "cifar10/train", "dali_peak_rss_mb", "<=", 1024.0, "{:,.0f} MB"),
    # the default train batch mixed by torchvision's MixUp/CutMix in a collate_fn (as its reference
    # writes it) against the same mixing as batch_transform=: what the collate_fn spelling costs
    ("ImageNet-style train, MixUp/CutMix: batch_transform over collate_fn", "imagenet/train [mixing]",
     "vs_collate", "<=", 1.10, "{:.2f}x"),
    # a Hugging Face dataset of the image folder's JPEGs: against DataLoader(ds.with_transform(...)) at its
    # best num_workers, and against the same files through ImageFolder on the DALI path
    ("HF dataset train vs DataLoader(ds.with_transform)", "hf/train", "vs_torchvision", ">=", 2.0, "{:.2f}x"),
    ("HF dataset train vs its files through ImageFolder on DALI", "hf/train", "vs_folder", ">=", 0.90, "{:.0%}"),
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


def _loader_label(result: dict, kind: str, sep: str = " ") -> str:
    loader = result["loaders"][kind]
    if kind == "tensor" and result["dataset"] in ARRAY_DATASETS:   # its sweep was over torch threads
        threads = max(loader["num_workers"], 1)
        return f"torch v2 on whole batches{sep}({threads} thread{'' if threads == 1 else 's'})"
    if kind == "baseline":
        return f"baseline DALI loader{sep}(CIFAR, original, {_threads(loader.get('num_threads', 1))})"
    if kind == "nvidia":
        return f"NVIDIA's DALI example{sep}({_threads(loader.get('num_threads', 1))})"
    if kind == "folder":
        return f"DALI loader, ImageFolder{sep}(same files, {_threads(loader.get('num_threads', 1))})"
    if kind == "torchvision" and result["dataset"] == "hf":
        workers = loader["num_workers"]
        return f"DataLoader(ds.with_transform){sep}({workers} worker{'' if workers == 1 else 's'})"
    if kind in ("torchvision", "tensor"):
        workers = loader["num_workers"]
        name = "torchvision" if kind == "torchvision" else "torchvision tensors"
        return f"{name}{sep}({workers} worker{'' if workers == 1 else 's'})"
    if kind == "limit":
        return f"limit:{sep}{LIMIT_MEANING[result['dataset']]}"
    if kind == "collate":
        return f"DALI loader, mixing in collate_fn{sep}({_threads(loader['num_threads'])})"
    return f"DALI loader{sep}({_threads(loader['num_threads'])})"


def _threads(count: int) -> str:
    return f"{count} thread{'' if count == 1 else 's'}"


def _rss(loader: dict) -> str:
    text = f"{loader['peak_rss_mb']:,.0f}"
    if loader.get("num_workers") and loader.get("children_peak_rss_mb"):
        text += f" (+{loader['children_peak_rss_mb']:,.0f}/worker)"
    return text


def _ratio(result: dict, field: str, kind: str, own: str) -> str:
    if field not in result:
        return ""
    return {"dali": f"{result[field]:.2f}x", own: "1.00x"}.get(kind, "")


def _row(result: dict, kind: str) -> List[str]:
    loader = result["loaders"][kind]
    of_limit = {"dali": f"{100 * result['of_limit']:.0f}%", "limit": "100%"}.get(kind, "")
    return [f"{result['workload']} ({result['batch_size']})", _loader_label(result, kind),
            f"{loader['images_per_s']:,.0f}", _ratio(result, "vs_torchvision", kind, "torchvision"),
            _ratio(result, "vs_tensor", kind, "tensor"), _ratio(result, "vs_nvidia", kind, "nvidia"),
            _ratio(result, "vs_baseline", kind, "baseline"), _ratio(result, "vs_collate", kind, "collate"),
            _ratio(result, "vs_folder", kind, "folder"), of_limit,
            f"{loader['first_batch_s']:.2f}", _epoch_start(loader), _rss(loader)]


def _epoch_start(loader: dict) -> str:
    """A later epoch's first batch beside the steady batch time (a bench JSON from before has neither)."""
    first, steady = loader.get("next_epoch_first_batch_s"), loader.get("steady_batch_s")
    if first is None:
        return ""
    return f"{first:.3f} / {steady:.3f}" if steady is not None else f"{first:.3f}"


HEADER = ["workload (batch)", "loader", "images/s", "vs torchvision (PIL)", "vs torchvision tensors",
          "vs NVIDIA's example", "vs baseline DALI", "vs collate_fn", "vs ImageFolder on DALI", "of limit",
          "first batch (s)", "next epoch: first / steady batch (s)", "peak RSS (MB)"]
ORDER = ("dali", "collate", "torchvision", "tensor", "nvidia", "baseline", "folder", "limit")
COLORS = {"dali": "#76b900", "collate": "#a6d854", "torchvision": "#ee4c2c", "tensor": "#f4a582", "nvidia": "#2a7f62",
          "baseline": "#4c72b0", "folder": "#8172b3", "limit": "#9e9e9e"}


def markdown_table(results: List[dict]) -> str:
    rows = [HEADER, ["---"] * len(HEADER)]
    for result in results:
        rows += [_row(result, kind) for kind in ORDER if kind in result["loaders"]]
    return "\n".join("| " + " | ".join(row) + " |" for row in rows)


def targets_text(checked: List[dict]) -> str:
    lines = []
    for t in checked:
        lines.append(f"{'met' if t['met'] else 'MISSED':>6}  {t['target']}: {t['shown']} (target {t['bound']})")
    return "\n".join(lines)


def _ratio_note(result: dict) -> str:
    """DALI's ratios, written under a panel."""
    twin = "DataLoader(ds.with_transform)" if result["dataset"] == "hf" else "PIL twin"
    ratios = [f"{result['vs_torchvision']:.1f}x {twin}"]
    for field, name in (("vs_tensor", "tensors"), ("vs_nvidia", "NVIDIA's example"), ("vs_baseline", "baseline"),
                        ("vs_collate", "mixing in collate_fn"), ("vs_folder", "ImageFolder on DALI")):
        if field in result:
            ratios.append(f"{result[field]:.2f}x {name}")
    ratios.append(f"{100 * result['of_limit']:.0f}% of limit")
    return "DALI loader: " + ", ".join(ratios)


def plot(results: List[dict], path: str, title: str) -> None:
    """One panel per workload, two panels a row: a horizontal bar per loader (names on the
    left, never overlapping however many there are), images/s on a log scale (the limits
    of the datasets in memory are ~100x the loaders), the value at the end of each bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    columns = min(2, len(results))
    rows = -(-len(results) // columns)
    heights = [0.45 * max(len(r["loaders"]) for r in results[k:k + columns]) + 1.6
               for k in range(0, len(results), columns)]
    figure, axes = plt.subplots(rows, columns, figsize=(7.5 * columns, sum(heights) + 0.6), squeeze=False,
                                gridspec_kw={"height_ratios": heights})
    for ax in axes.flat[len(results):]:
        ax.axis("off")
    for ax, result in zip(axes.flat, results):
        kinds = [k for k in ORDER if k in result["loaders"]][::-1]   # DALI's loader on top
        speeds = [result["loaders"][k]["images_per_s"] for k in kinds]
        bars = ax.barh([_loader_label(result, k) for k in kinds], speeds, color=[COLORS[k] for k in kinds])
        ax.bar_label(bars, labels=[f" {s:,.0f}" for s in speeds], fontsize=8)
        ax.set_xscale("log")
        # whole decades, room for the values at the bars' ends; ticks at the decades only
        ax.set_xlim(10 ** math.floor(math.log10(min(speeds) / 2)), 10 ** math.ceil(math.log10(max(speeds) * 6)))
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:,.0f}"))
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_title(f"{result['workload']} (batch {result['batch_size']})", fontsize=10)
        ax.set_xlabel("images/s (log scale)\n" + textwrap.fill(_ratio_note(result), 90), fontsize=8)
        ax.tick_params(axis="both", labelsize=8)
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
