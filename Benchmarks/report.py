#!/usr/bin/env python3
"""Writes the Markdown table (latest.md) and the chart (latest.svg) from Benchmarks/run.py's JSON results.

    python3 Benchmarks/report.py Benchmarks/results/DATE-sqlite.json Benchmarks/results/DATE-postgres.json
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

ORDER = ["healthz", "register", "login", "native-signin", "refresh", "profile", "native-signup"]
LABELS = {
    "healthz": "/healthz (the HTTP floor)",
    "register": "registration (auto-confirm)",
    "login": "email/password login",
    "native-signin": "native sign-in, password",
    "refresh": "refresh",
    "profile": "profile read (access token)",
    "native-signup": "native sign-up with a code",
}
COLORS = {"gatehouse": "#1f6feb", "peer": "#d29922"}


def _f(v, digits=1):
    if v is None:
        return "–"
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return "–"
    return f"{v:,.{digits}f}"


def _get(result, server, scenario, mode, key):
    try:
        return result["servers"][server]["scenarios"][scenario][mode][key]
    except (KeyError, TypeError):
        return None


def floor(result: dict, scenario: str | None = None) -> float | None:
    """Gatehouse's /healthz per server CPU-second: the one measured right before `scenario` (run.py's `floor_before`,
    for the scenarios compared to the floor) when there is one, else the one at the start of the run (None in results
    from before it was measured). A shared machine's speed moves between minutes, and the run's first /healthz is
    minutes away from the refresh; the floor right before a scenario ran on the machine as the scenario found it."""
    cpu = (_get(result, "gatehouse", scenario, "floor_before", "cpu_s_per_1000_flows") if scenario else None) \
        or _get(result, "gatehouse", "healthz", "saturation", "cpu_s_per_1000_flows")
    return 1000 / cpu if cpu else None


def of_floor(result: dict, server: str, scenario: str) -> float | None:
    """A scenario's flows per server CPU-second as a fraction of Gatehouse's floor in the same run (``floor``): the
    figure to compare across machines (the floor carries the processor's speed and what a wake-up costs on it)."""
    cpu, f = _get(result, server, scenario, "saturation", "cpu_s_per_1000_flows"), floor(result, scenario)
    return (1000 / cpu) / f if cpu and f else None


def steal_summary(result: dict) -> str | None:
    """The CPU steal of a database's runs (results from before it was measured have none): the median and the
    largest, with the run it was in."""
    runs = [(run["cpu_steal_pct"], f"{server} {scenario} {mode}")
            for server, s in result["servers"].items() for scenario, modes in s["scenarios"].items()
            for mode, run in modes.items() if isinstance(run, dict) and run.get("cpu_steal_pct") is not None]
    if not runs:
        return None
    values = sorted(v for v, _ in runs)
    top = max(runs)
    return (f"CPU steal (the host running other machines while this one had work) during the {result['database']} "
            f"runs: median {values[len(values) // 2]:.1f}%, at most {top[0]:.1f}% ({top[1]}).")


def markdown(results: list[dict]) -> str:
    first = results[0]
    m = first["machine"]
    lines = [
        f"# Gatehouse vs django-allauth (headless, JWT) — {first['date']}",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB, Linux {m['kernel']}; load average at "
        f"start {', '.join(f'{x:.2f}' for x in m['load_average_at_start'])}. Commit {first.get('commit', '?')}.",
        "",
        "A flow is one scenario's whole exchange (native sign-in: 3 requests to Gatehouse, 1 to the peer; native "
        "sign-up: 5 to Gatehouse, 3 to the peer, counting the mailbox reads). Per CPU-second: flows per second of "
        "the server's own CPU time (all its processes), which does not depend on how many cores it got. "
        "Ratio: Gatehouse / peer. Of the floor: flows per CPU-second as a fraction of Gatehouse's /healthz "
        "requests per CPU-second in the same run (the HTTP floor; for refresh and profile, the /healthz run right "
        "before them), the figure that compares across machines.",
        "",
    ]
    for r in results:
        lines += [f"## {r['database']}", "",
                  "| scenario | server | flows/s (saturation) | p50 / p90 / p99 ms | flows/s (fixed rate) | "
                  "p50 / p90 / p99 ms (fixed) | CPU s / 1000 flows | flows per CPU-second | of the floor | "
                  "peak RSS MB |",
                  "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|"]
        for scenario in ORDER:
            rows = []
            for server in ("gatehouse", "peer"):
                sat = lambda k: _get(r, server, scenario, "saturation", k)
                fix = lambda k: _get(r, server, scenario, "fixed", k)
                if sat("flows_per_s") is None:
                    continue
                cpu = sat("cpu_s_per_1000_flows")
                held = "" if fix("rate_held") in (None, True) else " (rate not held)"
                rows.append(
                    f"| {LABELS[scenario]} | {server} | {_f(sat('flows_per_s'))} | "
                    f"{_f(sat('flow_p50_ms'), 2)} / {_f(sat('flow_p90_ms'), 2)} / {_f(sat('flow_p99_ms'), 2)} | "
                    f"{_f(fix('flows_per_s'))}{held} | "
                    f"{_f(fix('flow_p50_ms'), 2)} / {_f(fix('flow_p90_ms'), 2)} / {_f(fix('flow_p99_ms'), 2)} | "
                    f"{_f(cpu, 3)} | {_f(1000 / cpu if cpu else None)} | {_f(of_floor(r, server, scenario), 3)} | "
                    f"{_f(sat('peak_rss_mb'))} |")
            a, b = _get(r, "gatehouse", scenario, "saturation", "flows_per_s"), _get(r, "peer", scenario, "saturation", "flows_per_s")
            ca, cb = (_get(r, "gatehouse", scenario, "saturation", "cpu_s_per_1000_flows"),
                      _get(r, "peer", scenario, "saturation", "cpu_s_per_1000_flows"))
            if a and b:
                rows.append(f"| {LABELS[scenario]} | **ratio** | **{a / b:.2f}×** | | | | | "
                            f"**{(cb / ca) if ca and cb else float('nan'):.2f}×** | | |")
            lines += rows
        lines += ["", "| | " + " | ".join(r["servers"]) + " |", "|---|" + "--:|" * len(r["servers"])]
        for key, label, scale in (("startup_s", "ready after start (restart), ms", 1000),
                                  ("first_start_s", "ready after first start (migrating), ms", 1000),
                                  ("idle_rss_mb", "idle RSS, MB (all processes)", 1),
                                  ("idle_pss_mb", "idle PSS, MB (all processes)", 1),
                                  ("idle_anon_mb", "idle anonymous memory, MB (all processes)", 1),
                                  ("processes", "processes", 1)):
            vals = [r["servers"][s].get(key) for s in r["servers"]]
            lines.append(f"| {label} | " + " | ".join(_f(v * scale if v is not None else None, 0 if key == 'processes' else 1)
                                                      for v in vals) + " |")
        lines.append("")
        if steal := steal_summary(r):
            lines += [steal, ""]
        def floor_fixed(key):  # /healthz at the refresh's fixed rate (run.py's `floor_fixed`)
            return _get(r, "gatehouse", "refresh", "floor_fixed", key)
        if floor_fixed("flow_p99_ms") is not None:
            lines += [f"The floor's latency at refresh's fixed rate (/healthz, {_f(floor_fixed('flows_per_s'))} requests/s over "
                      f"the same {floor_fixed('connections')} connections): p50 / p90 / p99 "
                      f"{_f(floor_fixed('flow_p50_ms'), 2)} / {_f(floor_fixed('flow_p90_ms'), 2)} / "
                      f"{_f(floor_fixed('flow_p99_ms'), 2)} ms: what this machine's HTTP path, load generator and "
                      "scheduler give a request that does no work.", ""]
        if r.get("targets"):
            lines += ["Targets:", "", "| target | goal | measured | measured / goal | met |",
                      "|---|---|--:|--:|---|"]
            for t in r["targets"]:
                met = {True: "yes", False: "**no**", None: "–"}[t["met"]]
                lines.append(f"| {t['target']} | {t['goal']} | {_f(t['measured'], 3)} | {_f(t['ratio_to_goal'], 3)} | {met} |")
            lines.append("")
    hb = first.get("hash_bound", {})
    if "gatehouse_ms_cpu" in hb:
        lines += ["## Hash bound", "",
                  f"Argon2id m=19456 KiB, t=2, p=1, one thread (argon2-bench): Gatehouse's Swift Argon2 "
                  f"{hb['gatehouse_ms_cpu']:.1f} ms CPU per hash = {hb['gatehouse_hashes_per_cpu_s']:.1f} hashes per "
                  f"CPU-second" + (f"; argon2-cffi (the peer's) {hb['peer_ms_cpu']:.1f} ms = "
                                   f"{hb['peer_hashes_per_cpu_s']:.1f} per CPU-second." if "peer_ms_cpu" in hb else ".")
                  + (f" Gatehouse's with {hb['threads']} hashing at once, as its pool runs them under load: "
                     f"{hb['gatehouse_concurrent_hashes_per_cpu_s']:.1f} per CPU-second (the bound of the targets, "
                     f"measured again right before each scenario that hashes)." if hb.get("threads", 1) > 1 else ""),
                  ""]
        for r in results:
            for server, key in (("gatehouse", "gatehouse_hashes_per_cpu_s"), ("peer", "peer_hashes_per_cpu_s")):
                for scenario in ("login", "native-signin", "register"):
                    cpu = _get(r, server, scenario, "saturation", "cpu_s_per_1000_flows")
                    if cpu and hb.get(key):
                        lines.append(f"- {r['database']}, {server}, {LABELS[scenario]}: {1000 / cpu:.1f} flows per "
                                     f"CPU-second = {(1000 / cpu) / hb[key]:.0%} of its one-thread hash rate")
                    own = _get(r, server, scenario, "saturation", "server_hashes_per_hash_cpu_s")
                    if cpu and own:
                        lines.append(f"- {r['database']}, {server}, {LABELS[scenario]}: the server's own hashes "
                                     f"{own:.1f} per CPU-second; flows {(1000 / cpu) / own:.0%} of that")
        lines.append("")
    if first.get("profiling_notes"):
        # The notes' own headings move one level down, under this section.
        notes = "\n".join("#" + line if line.startswith("#") else line
                          for line in first["profiling_notes"].strip().splitlines()[1:])
        lines += ["## Profiling (Benchmarks/PROFILING.md)", notes.strip(), ""]
    return "\n".join(lines) + "\n"


def svg(results: list[dict]) -> str:
    """Per database: throughput (flows/s at saturation) and p99 (ms, saturation), Gatehouse beside the peer, on
    log scales (the two servers differ by orders of magnitude)."""
    panel_w, panel_h, left, top, gap = 520, 260, 110, 64, 70
    rows = len(results)
    width = left + 2 * panel_w + gap + 20
    height = top + rows * (panel_h + 120) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="20" font-size="14" font-weight="bold">Gatehouse (blue) vs django-allauth '
           f'headless JWT (amber) — {results[0]["date"]}</text>',
           f'<rect x="{left}" y="30" width="10" height="10" fill="{COLORS["gatehouse"]}"/>'
           f'<text x="{left + 14}" y="39">Gatehouse</text>',
           f'<rect x="{left + 90}" y="30" width="10" height="10" fill="{COLORS["peer"]}"/>'
           f'<text x="{left + 104}" y="39">django-allauth {results[0].get("peer_version", "")} + gunicorn</text>']
    for row, r in enumerate(results):
        y0 = top + 14 + row * (panel_h + 120)
        for col, (key, title) in enumerate((("flows_per_s", "flows/s at saturation (log)"),
                                            ("flow_p99_ms", "p99 latency at saturation, ms (log)"))):
            x0 = left + col * (panel_w + gap)
            vals = [v for s in ORDER for srv in ("gatehouse", "peer")
                    if (v := _get(r, srv, s, "saturation", key))]
            if not vals:
                continue
            lo = 10 ** math.floor(math.log10(min(vals)))
            hi = 10 ** math.ceil(math.log10(max(vals)))
            if hi <= lo:
                hi = lo * 10

            def ypos(v):
                return y0 + panel_h - (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * panel_h

            out.append(f'<text x="{x0}" y="{y0 - 8}" font-weight="bold">{r["database"]}: {title}</text>')
            out.append(f'<rect x="{x0}" y="{y0}" width="{panel_w}" height="{panel_h}" fill="none" stroke="#999"/>')
            decade = lo
            while decade <= hi * 1.0001:
                yy = ypos(decade)
                out.append(f'<line x1="{x0}" y1="{yy:.1f}" x2="{x0 + panel_w}" y2="{yy:.1f}" stroke="#eee"/>')
                out.append(f'<text x="{x0 - 4}" y="{yy + 4:.1f}" text-anchor="end">{decade:g}</text>')
                decade *= 10
            group = panel_w / len(ORDER)
            bar = group * 0.35
            for i, s in enumerate(ORDER):
                gx = x0 + i * group + group * 0.15
                for j, srv in enumerate(("gatehouse", "peer")):
                    v = _get(r, srv, s, "saturation", key)
                    if not v:
                        continue
                    yy = ypos(v)
                    bx = gx + j * bar
                    out.append(f'<rect x="{bx:.1f}" y="{yy:.1f}" width="{bar - 2:.1f}" '
                               f'height="{y0 + panel_h - yy:.1f}" fill="{COLORS[srv]}"><title>{srv} {s}: '
                               f'{v:g}</title></rect>')
                    out.append(f'<text x="{bx + bar / 2 - 1:.1f}" y="{yy - 3:.1f}" text-anchor="middle" '
                               f'font-size="9">{v:.3g}</text>')
                lx = x0 + i * group + group / 2
                out.append(f'<text x="{lx:.1f}" y="{y0 + panel_h + 14}" text-anchor="end" '
                           f'transform="rotate(-30 {lx:.1f} {y0 + panel_h + 14})">{LABELS[s]}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def readme_block(results: list[dict], out: Path) -> str:
    """The compact table for docs/performance.md."""
    first = results[0]
    m = first["machine"]
    lines = [f"Latest run: {first['date']}, commit {first.get('commit', '?')}, on {m['cpu']} ({m['cores']} cores, "
             f"{m['memory_gib']} GiB, shared with other work: load average "
             f"{m['load_average_at_start'][0]:.1f} at the start). Peer: django-allauth "
             f"{first.get('peer_version', '?')} under gunicorn. Full table: `Benchmarks/results/latest.md`; chart: "
             f"`Benchmarks/results/latest.svg`; every figure: `Benchmarks/results/{first['date']}-*.json`.", ""]
    for r in results:
        lines += [f"**{r['database']}** (flows/s at saturation; p99 ms at half of it; flows per CPU-second of the "
                  "server; and those as a fraction of Gatehouse's /healthz per CPU-second in the same run, the floor: for "
                  "refresh and profile, the /healthz run right before them)",
                  "",
                  "| scenario | Gatehouse flows/s | peer flows/s | ratio | Gatehouse p99 | peer p99 | "
                  "Gatehouse per CPU-s | peer per CPU-s | ratio per CPU-s | Gatehouse of the floor |",
                  "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
        for scenario in ORDER:
            a = _get(r, "gatehouse", scenario, "saturation", "flows_per_s")
            b = _get(r, "peer", scenario, "saturation", "flows_per_s")
            if a is None and b is None:
                continue
            ca = _get(r, "gatehouse", scenario, "saturation", "cpu_s_per_1000_flows")
            cb = _get(r, "peer", scenario, "saturation", "cpu_s_per_1000_flows")
            pa = 1000 / ca if ca else None
            pb = 1000 / cb if cb else None
            lines.append(
                f"| {LABELS[scenario]} | {_f(a)} | {_f(b)} | {_f(a / b if a and b else None, 2)}× | "
                f"{_f(_get(r, 'gatehouse', scenario, 'fixed', 'flow_p99_ms'), 1)} | "
                f"{_f(_get(r, 'peer', scenario, 'fixed', 'flow_p99_ms'), 1)} | {_f(pa)} | {_f(pb)} | "
                f"{_f(pa / pb if pa and pb else None, 2)}× | {_f(of_floor(r, 'gatehouse', scenario), 3)} |")
        gh, peer = r["servers"].get("gatehouse", {}), r["servers"].get("peer", {})
        lines += ["", f"Ready after start: Gatehouse {_f((gh.get('startup_s') or 0) * 1000, 0)} ms, peer "
                  f"{_f((peer.get('startup_s') or 0) * 1000, 0)} ms. Idle PSS: Gatehouse {_f(gh.get('idle_pss_mb'))} MB, "
                  f"peer {_f(peer.get('idle_pss_mb'))} MB; idle RSS: Gatehouse {_f(gh.get('idle_rss_mb'))} MB, "
                  f"peer {_f(peer.get('idle_rss_mb'))} MB ({peer.get('processes', '?')} processes)."
                  + (f" {steal}" if (steal := steal_summary(r)) else ""), ""]
        if r.get("targets"):
            met = [t for t in r["targets"] if t["met"]]
            lines.append(f"Targets met on {r['database']}: {len(met)} of {len(r['targets'])}: " + "; ".join(
                f"{t['target']} {t['goal']}: {_f(t['measured'], 2)} ({'met' if t['met'] else 'missed' if t['met'] is False else 'not measured'})"
                for t in r["targets"]) + ".")
            lines.append("")
    if first.get("profiling_notes"):
        lines += ["Where a target is missed, what the profile showed, what was fixed and what is left: "
                  "`Benchmarks/PROFILING.md` (also in `latest.md` and every results file).", ""]
    return "\n".join(lines)


BEGIN, END = "<!-- performance:begin -->", "<!-- performance:end -->"


def update_readme(results: list[dict], out: Path, readme: Path) -> bool:
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        return False
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(head + BEGIN + "\n" + readme_block(results, out) + "\n" + END + tail)
    return True


def write(results: list[dict], out: Path):
    (out / "latest.md").write_text(markdown(results))
    (out / "latest.svg").write_text(svg(results))


if __name__ == "__main__":
    paths = [Path(p) for p in sys.argv[1:]]
    if not paths:
        sys.exit("usage: report.py RESULT.json…")
    write([json.loads(p.read_text()) for p in paths], paths[0].parent)
