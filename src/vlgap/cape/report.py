"""Markdown report of a CAPE-T2V experiment (docs/results/cape-experiment.md is pasted from it)."""
from __future__ import annotations

from typing import Any

from vlgap.cape.analysis import verdict
from vlgap.formatting import interval


def _ci(c: list[float] | None, reason: str | None = None) -> str:
    """The one interval rule of vlgap.formatting: "n/a (n too small: ...)" rather than a point."""
    return interval(c, 3, reason)


def mmd_note(m: dict[str, Any], alpha: float = 0.05) -> str | None:
    """One line where an MMD^2 row's bootstrap interval and permutation p-value disagree."""
    from vlgap.stats.mmd import MMD_DISAGREEMENT_WHY
    from vlgap.stats.resampling import disagreement_note

    return disagreement_note(m.get("ci"), m.get("p_value"), alpha, MMD_DISAGREEMENT_WHY)


def report_markdown(r: dict[str, Any]) -> str:
    cfg = r["config"]
    n = r["n_items"]
    lines = [f"### CAPE-T2V 2x2 (config {r['config_key']}; {n} held-out user prompts, generator seeds "
             f"{cfg['generator_seeds']})", "",
             "Score: mean per-attribute accuracy of the generated scene (shape, colour, size, background, camera, "
             "style, event order) against the prompt's ground-truth spec; per prompt averaged over seeds; 95% "
             "bootstrap intervals over prompts.", "",
             "| training captions \\ inference rewrites | cell mean | 95% CI | seeds (per-seed means) |",
             "|---|---|---|---|"]
    for c in r["cells"]:
        seeds = ", ".join(f"{m:.3f}" for m in c["seed_means"])
        lines.append(f"| {c['train']} / {c['infer']} | {c['mean']:.3f} | {_ci(c['ci'], c.get('ci_reason'))} | {c['n_seeds']} ({seeds}) |")
    lines.append(f"| template / template (reference) | {r['template_reference']:.3f} | - | |")
    lines += ["", "| effect (paired over prompts) | estimate [95% CI], p |", "|---|---|"]
    effects_note = ("Effect intervals invert the same sign-flip test as their p-values, so an interval excludes 0 "
                    "exactly when p < 0.05; cell intervals are bootstrap intervals.")
    me = r["main_effects"]
    lines.append(f"| main effect: training captions pe - rewriter | {verdict(me['training_captions'])} |")
    lines.append(f"| main effect: inference rewrites pe - rewriter | {verdict(me['inference_rewrites'])} |")
    lines.append(f"| interaction (matched - crossed) | {verdict(r['interaction'])} |")
    for k, c in (r.get("third_operator") or {}).items():
        lines.append(f"| third operator: {k} | {verdict(c)} |")
    lines += ["", effects_note]
    lines += ["", "MMD^2 (MiniLM, RBF, length-matched; unbiased estimate, 95% bootstrap CI, permutation p):", "",
              "| pair | MMD^2 | 95% CI | p | n |", "|---|---|---|---|---|"]
    notes = []
    for k, m in r["mmd"].items():
        p = f"{m['p_value']:.3g}" if m.get("p_value") is not None else "n/a (no permutations)"
        lines.append(f"| {k} | {m['mmd2_unbiased']:.4f} | {_ci(m['ci'], m.get('ci_reason'))} | {p} | "
                     f"{m['n_a']}/{m['n_b']} |")
        note = mmd_note(m)
        if note:
            notes.append(f"{k}: {note}")
    if notes:
        lines += [""] + [f"Note, {n}." for n in notes]
    if r.get("controls"):
        from vlgap.cape.controls import controls_markdown

        lines += ["", controls_markdown(r["controls"], "Controls (Table 3 surface overlap, randomization check)")]
    lines += ["", validity_markdown(r["validity"], cfg["max_retries"])]
    lines += ["", "Per-attribute accuracy (mean over seeds):", "",
              "| cell | " + " | ".join(next(iter(r["per_attribute"].values()))) + " |",
              "|---|" + "---|" * len(next(iter(r["per_attribute"].values())))]
    for k, acc in r["per_attribute"].items():
        lines.append(f"| {k} | " + " | ".join(f"{v:.3f}" for v in acc.values()) + " |")
    lines += ["", sft_markdown(r["sft"]),
              f"Timings (s, this run): {r['timings_s']}; total {r['seconds_this_run']} s."
              + (f" CPU seconds of the run's process per stage ({r.get('threads')} thread(s)): {r['cpu_s']}."
                 if r.get("cpu_s") else "")
              + (f" The LM lanes (SFT and rewrites of pe, third, rewriter) ran in {r['lane_workers']} processes side "
                 "by side, each stage's CPU seconds those of its lane's process; lm_lanes is their wall time."
                 if (r.get("lane_workers") or 1) > 1 else ""), ""]
    return "\n".join(lines)


def validity_markdown(validity: dict[str, Any], max_retries: int) -> str:
    """Schema validity per operator and input kind, with the reasons of the failed first tries."""
    lines = [f"Schema validity by input kind (label-forced decoding; greedy first try, then up to {max_retries} "
             "sampled retries; reasons of the failed first tries: budget = a part reached its token budget, "
             "loop = a part repeated itself, schema = the parse failed):", "",
             "| operator | input kind | n | valid first try | valid after retries | first-try failures |",
             "|---|---|---|---|---|---|"]
    for k, v in validity.items():
        op = v.get("operator", k.split("/")[0])
        kind = v.get("input_kind", k.split("/")[-1])
        n = v["n"]
        first = v.get("n_first_try_valid", round(v["first_try_valid"] * n))
        after = v.get("n_valid_after_retries", round(v["valid_after_retries"] * n))
        why = ", ".join(f"{r} {c}" for r, c in (v.get("first_try_failure_reasons") or {}).items()) or "-"
        lines.append(f"| {op} | {kind} | {n} | {first}/{n} ({v['first_try_valid']:.0%}) | "
                     f"{after}/{n} ({v['valid_after_retries']:.0%}) | {why} |")
    return "\n".join(lines)


def sft_markdown(sft: dict[str, Any]) -> str:
    """SFT settings, loss at every logged step and speed, per operator."""
    lines = []
    for k, v in sft.items():
        curve = v.get("loss_curve") or []
        head = (f"SFT {k} (LoRA r={v['lora_r']}" + (f", seed {v['seed']}" if v.get("seed") is not None else "")
                + f", {v['steps']} steps x batch {v['batch_size']}"
                + (f", lr {v['lr']:g}" if v.get("lr") is not None else "")
                + (f", {v.get('n_pairs', '?')} pairs of inputs {'/'.join(v['input_kinds'])}" if v.get("input_kinds") else "")
                + f"): loss {v['first_loss']:.3f} -> {v['last_loss']:.3f}, {v['seconds']} s "
                  f"({v['samples_per_second']} samples/s)")
        lines.append(head + (". Loss per step: " + " ".join(f"{s}:{l:.3f}" for s, l in curve) if curve else ""))
    return "\n\n".join(lines)
