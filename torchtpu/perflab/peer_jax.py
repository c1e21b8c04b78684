"""The optional JAX peer: the same computations as the `ops` suite and the
MLP of the `models` suite, in JAX on its CPU backend (XLA, as the tpu
device here). Run as a separate process, never imported by perflab: two
copies of XLA in one process would share (and fight over) global state.

    python peer_jax.py '<config json>' OUT.json

It writes raw timings (seconds per call) and leaves statistics to perflab.
It imports neither torch nor torchtpu.
"""
import json
import sys
import time


def timings(fn, reps, warmup):
    """fn() returns a JAX value; each sample waits for it."""
    first = None
    for i in range(warmup):
        t0 = time.perf_counter()
        fn().block_until_ready()
        if i == 0:
            first = time.perf_counter() - t0
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn().block_until_ready()
        out.append(time.perf_counter() - t0)
    return out, first


def run_ops(cfg, jax, jnp):
    out = {}
    key = jax.random.PRNGKey(0)
    k1, k2 = jax.random.split(key)
    reps, warmup = cfg["reps"], cfg["warmup"]
    n = cfg["elements"]
    a = jax.random.normal(k1, (n,), jnp.float32)
    b = jax.random.normal(k2, (n,), jnp.float32)
    add = jax.jit(lambda x, y: x + y)
    out["elementwise_add"] = timings(lambda: add(a, b), reps, warmup)
    red = jax.jit(lambda x: jnp.sum(x))
    out["reduction_sum"] = timings(lambda: red(a), reps, warmup)
    m = cfg["matmul"]
    x = jax.random.normal(k1, (m, m), jnp.float32)
    y = jax.random.normal(k2, (m, m), jnp.float32)
    mm = jax.jit(lambda p, q: p @ q)
    out["matmul"] = timings(lambda: mm(x, y), reps, warmup)
    c = cfg["conv"]
    img = jax.random.normal(k1, (c["n"], c["cin"], c["h"], c["w"]), jnp.float32)
    ker = jax.random.normal(k2, (c["cout"], c["cin"], c["k"], c["k"]), jnp.float32)
    pad = c["k"] // 2
    conv = jax.jit(lambda i, k: jax.lax.conv_general_dilated(
        i, k, (1, 1), [(pad, pad), (pad, pad)], dimension_numbers=("NCHW", "OIHW", "NCHW")))
    out["conv2d"] = timings(lambda: conv(img, ker), reps, warmup)
    if "linalg" in cfg:
        k = cfg["linalg"]
        sq = jax.random.normal(k1, (k, k), jnp.float32)
        rhs = jax.random.normal(k2, (k, 1), jnp.float32)
        solve = jax.jit(jnp.linalg.solve)
        out["solve"] = timings(lambda: solve(sq, rhs), reps, warmup)
        qr = jax.jit(lambda x: tuple(jnp.linalg.qr(x)))
        out["qr"] = timings(lambda: qr(sq)[1], reps, warmup)
    return {k: {"samples": v[0], "first_s": v[1]} for k, v in out.items()}


def run_mlp(cfg, jax, jnp):
    """models.MLP (64-128-128-10, ReLU), cross entropy, and AdamW with
    PyTorch's defaults, written with jax.grad; the whole step is one jit."""
    reps, warmup = cfg["reps"], cfg["warmup"]
    sizes = [cfg["dim_in"], cfg["hidden"], cfg["hidden"], cfg["classes"]]
    key = jax.random.PRNGKey(0)
    params = []
    for i in range(3):
        key, kw, kb = jax.random.split(key, 3)
        bound = 1.0 / sizes[i] ** 0.5
        params.append((jax.random.uniform(kw, (sizes[i + 1], sizes[i]), jnp.float32, -bound, bound),
                       jax.random.uniform(kb, (sizes[i + 1],), jnp.float32, -bound, bound)))
    key, kx, ky = jax.random.split(key, 3)
    x = jax.random.normal(kx, (cfg["batch"], cfg["dim_in"]), jnp.float32)
    y = jax.random.randint(ky, (cfg["batch"],), 0, cfg["classes"])

    def forward(p, v):
        for i, (w, b) in enumerate(p):
            v = v @ w.T + b
            if i < 2:
                v = jax.nn.relu(v)
        return v

    def loss_fn(p, v, t):
        logp = jax.nn.log_softmax(forward(p, v))
        return -jnp.mean(jnp.take_along_axis(logp, t[:, None], axis=1))

    lr, b1, b2, eps, wd = 1e-3, 0.9, 0.999, 1e-8, 1e-2

    @jax.jit
    def train_step(p, m, s, step, v, t):
        loss, g = jax.value_and_grad(loss_fn)(p, v, t)
        step = step + 1
        p = jax.tree_util.tree_map(lambda w: w * (1 - lr * wd), p)
        m = jax.tree_util.tree_map(lambda a, gg: b1 * a + (1 - b1) * gg, m, g)
        s = jax.tree_util.tree_map(lambda a, gg: b2 * a + (1 - b2) * gg * gg, s, g)
        c1, c2 = 1 - b1 ** step, 1 - b2 ** step
        p = jax.tree_util.tree_map(lambda w, a, q: w - lr * (a / c1) / (jnp.sqrt(q / c2) + eps),
                                   p, m, s)
        return p, m, s, step, loss

    fwd = jax.jit(forward)
    out = {"forward": timings(lambda: fwd(params, x), reps, warmup)}
    state = {"p": params, "m": jax.tree_util.tree_map(jnp.zeros_like, params),
             "s": jax.tree_util.tree_map(jnp.zeros_like, params), "step": jnp.float32(0)}

    def one():
        state["p"], state["m"], state["s"], state["step"], loss = train_step(
            state["p"], state["m"], state["s"], state["step"], x, y)
        return loss

    out["train"] = timings(one, reps, warmup)
    return {k: {"samples": v[0], "first_s": v[1]} for k, v in out.items()}


def main():
    cfg = json.loads(sys.argv[1])
    path = sys.argv[2]
    import jax
    import jax.numpy as jnp

    doc = {"jax": jax.__version__, "backend": jax.default_backend(),
           "devices": [str(d) for d in jax.devices()]}
    if "ops" in cfg:
        doc["ops"] = run_ops(cfg["ops"], jax, jnp)
    if "mlp" in cfg:
        doc["mlp"] = run_mlp(cfg["mlp"], jax, jnp)
    with open(path, "w") as f:
        json.dump(doc, f)


if __name__ == "__main__":
    main()
