"""JAX (XLA) through the driver API. Run with XLA_PYTHON_CLIENT_ALLOCATOR=platform (one
cuMemAlloc per buffer) or with XLA's default preallocation (a BFC arena of 75% of what
cuMemGetInfo reports: under GPUPOOL_CONF=limit:..., 75% of the limit). Prints the lines of
reach_common.py, plus `live <reserved> <limit>` read from the page while the arrays are alive."""
import reach_common


def work():
    import jax
    import jax.numpy as jnp

    key = jax.random.PRNGKey(1234)
    acc = 0.0
    keep = []
    for i in range(60):
        key, k1, k2 = jax.random.split(key, 3)
        n = 512 + (i % 5) * 256
        a = jax.random.normal(k1, (n, n), dtype=jnp.float32)
        b = jax.random.normal(k2, (n, n), dtype=jnp.float32)
        c = jnp.tanh(a @ b)
        acc += float(c.astype(jnp.float32).sum())
        if i % 10 == 0:
            keep.append(c)
    print("live " + reach_common.pool_line())
    return round(acc, 3)


if __name__ == "__main__":
    reach_common.run(work)
