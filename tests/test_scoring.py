"""Unit and property tests of the pure scoring model."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ebb_core import Config, InvalidInput, Tier
from ebb_core import scoring as sc

DAY = sc.US_PER_DAY
CFG = Config()
H = CFG.half_life_us

times = st.integers(min_value=0, max_value=2_000 * DAY)
weights = st.floats(min_value=0.01, max_value=100, allow_nan=False)
edge_lists = st.lists(st.tuples(weights, times), max_size=8)


def test_decay_halves_every_half_life() -> None:
    assert sc.decay(0, H) == 1.0
    assert sc.decay(30 * DAY, H) == pytest.approx(0.5)
    assert sc.decay(90 * DAY, H) == pytest.approx(0.125)
    assert sc.decay(-5 * DAY, H) == 1.0  # clock skew never inflates


def test_decay_vectorised_matches_scalar() -> None:
    import numpy as np

    ages = np.array([0, 15 * DAY, 30 * DAY, 300 * DAY])
    assert list(sc.decay(ages, H)) == pytest.approx([sc.decay(int(a), H) for a in ages])


def test_config_defaults_and_validation() -> None:
    assert CFG.half_life_days == 30
    for bad in (
        {"half_life_days": 0},
        {"half_life_days": -1},
        {"half_life_days": math.inf},
        {"read_bonus": -1},
        {"spread": 1.0},
        {"hot_ratio": 0.1, "warm_ratio": 0.2},
        {"candidate_pool": 0},
    ):
        with pytest.raises(InvalidInput) as info:
            Config(**bad)
        assert info.value.field in {next(iter(bad)), "hot_ratio"}


def test_key_form_equals_direct_activation() -> None:
    """A(n, T) = scale(T) · K(n): the stored key reproduces the first-principles activation."""
    epoch = 100 * DAY
    now = 190 * DAY
    own = [(1.0, 150 * DAY), (2.0, 189 * DAY)]
    nbr_a = ([(1.0, 150 * DAY), (0.5, 120 * DAY)], 170 * DAY, 2)
    nbr_b = ([(2.0, 189 * DAY)], None, 1)
    direct = sc.activation_direct(own, 180 * DAY, [nbr_a, nbr_b], now, CFG)
    b_own = sc.base_key(own, 180 * DAY, epoch, CFG)
    b_a = sc.base_key(nbr_a[0], nbr_a[1], epoch, CFG)
    b_b = sc.base_key(nbr_b[0], nbr_b[1], epoch, CFG)
    key = sc.activation_key(b_own, [(b_a, 2), (b_b, 1)], CFG)
    assert key * sc.scale(now, epoch, H) == pytest.approx(direct)


def test_spreading_is_shared_over_the_neighbours_degree() -> None:
    hub_base = 10.0
    one = sc.activation_key(0.0, [(hub_base, 1)], CFG)
    many = sc.activation_key(0.0, [(hub_base, 10)], CFG)
    assert one == pytest.approx(CFG.spread * hub_base)
    assert many == pytest.approx(one / 10)


@given(w=weights, t1=times, t2=times)
def test_older_reinforcement_never_counts_more(w: float, t1: int, t2: int) -> None:
    older, newer = sorted((t1, t2))
    assert sc.term_key(w, older, 0, H) <= sc.term_key(w, newer, 0, H)
    now = 2_000 * DAY
    assert w * sc.decay(now - older, H) <= w * sc.decay(now - newer, H)


@given(edges=edge_lists, read=st.one_of(st.none(), times), idx=st.integers(0, 7), later=times)
def test_reinforcing_never_lowers_activation(
    edges: list[tuple[float, int]], read: int | None, idx: int, later: int
) -> None:
    now = 2_000 * DAY
    before = sc.activation_direct(edges, read, [], now, CFG)
    if edges:
        i = idx % len(edges)
        w, t = edges[i]
        edges = [*edges[:i], (w, max(t, later)), *edges[i + 1 :]]
    new_read = later if read is None else max(read, later)
    after = sc.activation_direct(edges, new_read, [], now, CFG)
    assert after >= before - 1e-9


@given(ratio=st.floats(0, 1))
def test_pinned_nodes_never_archive(ratio: float) -> None:
    assert sc.tier_for(ratio, True, CFG) is Tier.HOT


@given(a=st.floats(0, 1), b=st.floats(0, 1))
def test_tiers_are_monotone_in_activation(a: float, b: float) -> None:
    lo, hi = sorted((a, b))
    assert sc.tier_for(hi, False, CFG) <= sc.tier_for(lo, False, CFG)


def test_tier_cut_offs() -> None:
    assert sc.tier_for(1.0, False, CFG) is Tier.HOT
    assert sc.tier_for(CFG.hot_ratio, False, CFG) is Tier.HOT
    assert sc.tier_for(CFG.warm_ratio, False, CFG) is Tier.WARM
    assert sc.tier_for(CFG.cold_ratio, False, CFG) is Tier.COLD
    assert sc.tier_for(CFG.cold_ratio / 2, False, CFG) is Tier.FROZEN


def test_ratio_handles_empty_graph_and_clamps() -> None:
    assert sc.ratio(5.0, 0.0) == 1.0
    assert sc.ratio(5.0, 2.0) == 1.0
    assert sc.ratio(1.0, 4.0) == 0.25


@given(t=st.floats(0, 1), a=st.floats(0, 1))
def test_blend_stays_in_unit_interval(t: float, a: float) -> None:
    assert 0.0 <= sc.blend(t, a, CFG) <= 1.0


@given(shift=st.integers(1, 400 * DAY), t=times)
def test_rebasing_preserves_activation(shift: int, t: int) -> None:
    old_epoch, new_epoch = 0, shift
    k_old = sc.term_key(1.0, t, old_epoch, H)
    k_new = k_old * sc.rebase_factor(old_epoch, new_epoch, CFG)
    now = 2_000 * DAY
    assert k_new * sc.scale(now, new_epoch, H) == pytest.approx(
        k_old * sc.scale(now, old_epoch, H), rel=1e-9
    )


def test_activation_parts_add_up() -> None:
    epoch, now = 0, 40 * DAY
    base = sc.base_key([(2.0, 10 * DAY)], 20 * DAY, epoch, CFG)
    key = sc.activation_key(base, [(4.0, 2)], CFG)
    parts = sc.activation_parts(base, key, 20 * DAY, now, epoch, CFG)
    assert parts.total == pytest.approx(key * sc.scale(now, epoch, H))
    assert parts.read == pytest.approx(sc.decay(20 * DAY, H))
    assert parts.edges == pytest.approx(2.0 * sc.decay(30 * DAY, H))


@given(
    rows=st.lists(st.tuples(st.floats(0, 2, allow_nan=False), st.booleans()), min_size=1),
    cuts=st.lists(st.floats(0, 1), min_size=3, max_size=3),
)
def test_vectorised_tiers_match_tier_for(rows: list[tuple[float, bool]], cuts: list[float]) -> None:
    import numpy as np

    cold, warm, hot = sorted(cuts)
    cfg = Config(hot_ratio=hot, warm_ratio=warm, cold_ratio=cold)
    ratios = np.array([r for r, _ in rows])
    pinned = np.array([p for _, p in rows])
    got = sc.tiers_for(ratios, pinned, hot, warm, cold)
    assert got.tolist() == [int(sc.tier_for(r, p, cfg)) for r, p in rows]


def test_tier_prior_orders_hot_warm_cold_and_excludes_frozen() -> None:
    priors = [sc.tier_prior(t, CFG) for t in (Tier.HOT, Tier.WARM, Tier.COLD, Tier.FROZEN)]
    assert priors == [1.0, CFG.warm_prior, CFG.cold_prior, 0.0]
    assert priors[0] >= priors[1] >= priors[2] > priors[3]


def test_reinforce_share_is_full_at_the_top_and_falls_with_rank() -> None:
    shares = [sc.reinforce_share(r, CFG) for r in range(10)]
    assert shares[0] == 1.0
    assert all(a > b for a, b in itertools.pairwise(shares))
    flat = Config(reinforce_tail=0.0)
    assert {sc.reinforce_share(r, flat) for r in range(10)} == {1.0}


@given(
    share=st.floats(min_value=0.0, max_value=1.0),
    age=st.one_of(st.none(), st.integers(min_value=0, max_value=400 * DAY)),
)
def test_partial_read_moves_the_read_term_the_given_share_of_the_way(
    share: float, age: int | None
) -> None:
    now = 10_000 * DAY
    last = None if age is None else now - age
    at = sc.partial_read_us(share, last, now, CFG)
    assert at <= now and (last is None or at >= last)  # never back, never ahead
    old = 0.0 if last is None else CFG.read_bonus * sc.decay(now - last, H)
    expected = old + share * (CFG.read_bonus - old)
    if last is not None and share == 0.0:
        assert at == last
    elif expected > 0:
        assert CFG.read_bonus * sc.decay(now - at, H) == pytest.approx(expected, rel=1e-6)


def test_new_config_fields_are_validated() -> None:
    for bad in (
        {"warm_prior": 1.5},
        {"cold_prior": -0.1},
        {"superseded_weight": 2.0},
        {"spread_share": -1.0},
        {"spread_sources": -1},
        {"reinforce_tail": -0.5},
    ):
        with pytest.raises(InvalidInput) as err:
            Config(**bad)
        assert err.value.field == next(iter(bad))
