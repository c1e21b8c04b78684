"""Counters of what the backend did: compiles, cache hits, executions, host
syncs and transfers, CPU fallbacks."""
from torchtpu import _C


def metrics() -> dict:
    """A snapshot of the counters since start (or the last reset_metrics())."""
    m = _C._metrics()
    m["graph_nodes_per_flush"] = m["graph_nodes"] / m["flushes"] if m["flushes"] else 0.0
    return m


def recompiles(min_compiles: int = 3) -> list:
    """Python lines that keep needing new programs, with the reasons: an
    input shape or dtype changed, a constant or attribute changed (said apart
    for a number at a value its op special-cases, as pow's exponent 2), the
    tensors it reads changed (one passed twice, or left unread as by addmm's
    beta 0), or the graph was cut at a different point (fused mode); see
    docs/metrics.md. Each site gives `compiles`
    (programs compiled) and `from_disk` (loaded from the disk cache instead,
    which a warm cache turns compiles into: the line still changes its
    program).

    In a training loop (optimizer steps seen) a line counts when it needed a
    new program in `min_compiles` or more different steps: several programs
    in the first step (one per parameter shape, say) are warm-up, not a
    problem. Without optimizer steps, reading results (`.item()`, `.cpu()`,
    `synchronize()`) marks the iterations: a line counts when it needed a new
    program between `min_compiles` or more different reads, or after
    `min_compiles` new programs unless it settled: since its last, results
    were read and programs run again from the memory cache."""
    training = _C._steps_taken() > 0

    def counts(s):
        if training:
            return s["steps"] >= min_compiles
        return s["reads"] >= min_compiles or (
            not s["settled"] and s["compiles"] + s["from_disk"] >= min_compiles)

    sites = [s for s in _C._compile_sites() if counts(s)]
    return sorted(sites, key=lambda s: -(s["compiles"] + s["from_disk"]))


def reset_metrics() -> None:
    """Zeroes the counters of metrics() and forgets the compile sites and
    optimizer steps that recompiles() looks at."""
    _C._reset_metrics()


def report(file=None) -> str:
    """Prints (and returns) a readable summary of metrics()."""
    m = metrics()
    lines = [
        "torchtpu report",
        f"  ops recorded     {m['ops']}",
        f"  executions       {m['executions']}  (flushes {m['flushes']}, graph nodes {m['graph_nodes']}, "
        f"{m['graph_nodes_per_flush']:.1f} per flush)",
        f"  compiles         {m['compiles']}  ({m['compile_seconds']:.2f} s)",
        f"  cache            {m['cache_hits']} hits, {m['cache_misses']} misses, {m['disk_hits']} from disk",
        f"  host syncs       {m['host_syncs']}",
        f"  host to device   {m['h2d_copies']} copies, {m['h2d_bytes']} bytes",
        f"  device to host   {m['d2h_copies']} copies, {m['d2h_bytes']} bytes",
    ]
    fb = m["fallbacks"]
    if fb:
        lines.append(f"  CPU fallbacks    {sum(fb.values())} calls of {len(fb)} operators:")
        for name, count in sorted(fb.items(), key=lambda kv: -kv[1]):
            lines.append(f"    {count:8d}  {name}")
    else:
        lines.append("  CPU fallbacks    none")
    sites = recompiles()
    if sites:
        lines.append("  call sites that keep needing new programs (compiled, or loaded from disk):")
        for site in sites[:10]:
            why = ", ".join(f"{n}x {r}" for r, n in site["reasons"].items())
            made = f"{site['compiles']} compiled" + (
                f", {site['from_disk']} from disk" if site["from_disk"] else "")
            lines.append(f"    {made}  {site['frame']}  [{site['op']}]  {why}")
    text = "\n".join(lines)
    print(text, file=file)
    return text
