"""``stats.power(method="simulation")`` and ``tumorboard plan --simulate``.

The simulated power (clustered paired 0/1 data, the clustered paired bootstrap of the engine)
agrees with the analytic z-test power within Monte Carlo error where the normal approximation
is good (hundreds of independent units), which is statsmodels' ``NormalIndPower`` (one sample,
``ratio=0``) at the effective sample size n / deff.
"""

from __future__ import annotations

import math

import pytest
from tumorboard import stats
from tumorboard.errors import InvalidArgumentError

NormalIndPower = pytest.importorskip("statsmodels.stats.power").NormalIndPower
OPTS = stats.BootstrapOptions(n_resamples=500, seed=1)


@pytest.mark.parametrize(
    ("n", "icc", "m"),
    [(400, 0.0, 1), (1000, 0.2, 5)],  # 400 independent items; 200 patients of 5, deff 1.8
)
def test_simulation_agrees_with_the_analytic_power(n, icc, m):
    delta, sd, sims = 0.05, 0.5, 1500
    analytic = stats.power(delta, n, sd=sd, icc=icc, items_per_cluster=m)
    deff = 1 + (m - 1) * icc
    ref = NormalIndPower().power(delta / sd, n / deff, 0.05, ratio=0)
    assert analytic == pytest.approx(ref, rel=1e-9)
    got = stats.power(delta, n, sd=sd, icc=icc, items_per_cluster=m, method="simulation",
                      n_simulations=sims, seed=7, options=OPTS)  # fmt: skip
    mc_se = math.sqrt(analytic * (1 - analytic) / sims)
    assert abs(got - analytic) < 4 * mc_se, (got, analytic, mc_se)


def test_simulation_size_and_determinism():
    # under H0 the bootstrap test rejects about alpha of the time
    size = stats.power(0.0, 300, sd=0.4, method="simulation", n_simulations=1000, seed=3,
                       options=OPTS)  # fmt: skip
    assert abs(size - 0.05) < 4 * math.sqrt(0.05 * 0.95 / 1000)
    kw = dict(sd=0.4, icc=0.3, items_per_cluster=4, method="simulation", n_simulations=200,
              seed=11)  # fmt: skip
    one = stats.power(0.06, 200, options=stats.BootstrapOptions(n_resamples=300, threads=1), **kw)
    two = stats.power(0.06, 200, options=stats.BootstrapOptions(n_resamples=300, threads=2), **kw)
    assert one == two == stats.power(0.06, 200, options=stats.BootstrapOptions(n_resamples=300),
                                     **kw)  # fmt: skip


def test_simulation_errors():
    with pytest.raises(InvalidArgumentError, match="design: method='simulation'"):
        stats.power(0.1, 100, design="independent", method="simulation")
    with pytest.raises(InvalidArgumentError, match=r"sd: paired 0/1 outcomes"):
        stats.power(0.1, 100, sd=1.0, method="simulation")
    with pytest.raises(InvalidArgumentError, match="method: expected 'analytic' or 'simulation'"):
        stats.power(0.1, 100, method="exact")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="n_simulations: expected an integer >= 1"):
        stats.power(0.1, 100, method="simulation", n_simulations=0)


def test_cli_plan_simulate():
    import json

    from test_logs_to_scores import cli

    out = cli("plan", "--delta", "0.1", "--sd", "0.45", "--simulate", "200", "--n-resamples",
              "300", "--json")  # fmt: skip
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["n_simulations"] == 200 and 0.0 <= got["simulated_power"] <= 1.0
    assert abs(got["simulated_power"] - got["power"]) < 5 * got["simulation_se"] + 0.02
    out = cli("plan", "--items", "300", "--simulate", "100", "--n-resamples", "200")
    assert out.returncode == 0, out.stderr
    assert "simulated power" in out.stdout and "clustered paired bootstrap" in out.stdout
