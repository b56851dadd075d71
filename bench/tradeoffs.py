"""Why the defaults are where they are: LoCoMo, knowledge updates and the demo per setting.

For the defaults and a few alternatives (each one change from the defaults) it measures:

- LoCoMo R@10 on the whole dev file and on the conversations not used for tuning (``--split``),
  and the worst category's distance to the text index alone;
- knowledge updates: the worst current-above-stale and current-in-top-5 over depths 1, 2, 3
  and the default, with and without reinforcement between queries, and current-above-stale when
  the replacement is not recorded (what decay and activation do alone);
- whether the seed demo still ranks outcome-pricing #1 and seat-pricing #3 with the ten
  analysis notes frozen.

    python bench/tradeoffs.py --data /path/to/locomo-dev.json [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import knowledge_update
import locomo
from ebb_core import Brain, Config, FixedClock, demo, seed
from ebb_core.kuzu_store import KuzuStore

SETTINGS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "text_contrast 1 (BM25 ratios)": {"text_contrast": 1.0},
    "text_contrast 2": {"text_contrast": 2.0},
    "activation 0.08/0.92": {"text_weight": 0.92, "activation_weight": 0.08},
    "no spreading": {"spread_share": 0.0},
    "spread_share 0.75": {"spread_share": 0.75},
    "activation 0.2/0.8": {"text_weight": 0.8, "activation_weight": 0.2},
    "no tier prior": {"warm_prior": 1.0, "cold_prior": 1.0},
    "prior 0.9/0.8": {"warm_prior": 0.9, "cold_prior": 0.8},
    "half-life 90 d": {"half_life_days": 90.0},
    "decay alone freezes": {"decay_alone_freezes": True},
}


def demo_holds(cfg: Config) -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        clock = FixedClock(seed.NOW)
        with Brain(KuzuStore(Path(tmp) / "d.kuzu"), namespace="d", clock=clock, config=cfg) as b:
            seed.build(b)
            b.maintain()
            rows = {r["id"]: r for r in demo.ranking(b)}
    analysis = {r["tier"] for i, r in rows.items() if i.startswith("note:analysis-")}
    return (
        rows["decision:outcome-pricing"]["rank"] == 1
        and rows["decision:seat-pricing"]["rank"] == 3
        and analysis == {4}
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", required=True, help="the LoCoMo JSON file")
    ap.add_argument("--split", type=int, default=2, help="conversations held for tuning")
    ap.add_argument("--only", nargs="*", help="only these settings (names as in the table)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    convs = sorted(json.loads(Path(args.data).read_text()), key=lambda c: str(c["sample_id"]))
    held_out = {c["sample_id"] for c in convs[args.split :]}
    ku_args = argparse.Namespace(cases=60, fillers=400, seed=11, no_supersede=False)
    bare_args = argparse.Namespace(cases=60, fillers=400, seed=11, no_supersede=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        text_only = replace(Config(), **locomo.TEXT_ONLY, spread_share=0.0)
        base_rows = locomo.run(convs, text_only, "kuzu", work)["rows"]
        base = locomo.summarise(base_rows)
        for name, change in SETTINGS.items():
            if args.only and name not in args.only:
                continue
            cfg = replace(Config(), **change)
            result = locomo.run(convs, cfg, "kuzu", work)["rows"]
            whole = locomo.summarise(result)
            held = locomo.summarise([r for r in result if r["conv"] in held_out])
            gap = min(whole[g]["r10"] - base[g]["r10"] for g in whole if g != "overall")
            ku = knowledge_update.run(cfg, "kuzu", work, ku_args)
            ku_bare = knowledge_update.run(cfg, "kuzu", work, bare_args)
            row = {
                "setting": name,
                "locomo_r10": whole["overall"]["r10"],
                "locomo_r10_held_out": held["overall"]["r10"],
                "worst_category_vs_text": round(gap, 4),
                "ku_above_min": min(r["current_above_stale"] for r in ku),
                "ku_top5_min": min(r["current_in_top5"] for r in ku),
                "ku_above_min_without_links": min(r["current_above_stale"] for r in ku_bare),
                "demo_holds": demo_holds(cfg),
            }
            locomo.log(str(row))
            rows.append(row)
    out = {"text_index_alone_r10": base["overall"]["r10"], "rows": rows}
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"text index alone: LoCoMo R@10 {base['overall']['r10']:.3f}")
    head = (
        "setting",
        "LoCoMo",
        "held-out",
        "worst cat.",
        "KU >stale",
        "KU @5",
        "KU >stale, no links",
        "demo",
    )
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print(
            f"| {r['setting']} | {r['locomo_r10']:.3f} | {r['locomo_r10_held_out']:.3f} | "
            f"{r['worst_category_vs_text']:+.3f} | {r['ku_above_min']:.0%} | "
            f"{r['ku_top5_min']:.0%} | {r['ku_above_min_without_links']:.0%} | "
            f"{'holds' if r['demo_holds'] else 'breaks'} |"
        )


if __name__ == "__main__":
    main()
