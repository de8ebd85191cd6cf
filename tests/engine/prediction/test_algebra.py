"""The block algebra reproduces dense Kronecker arithmetic (engine.prediction.algebra)."""

from __future__ import annotations

import numpy as np

from engine.prediction.algebra import (
    CellAlgebra,
    add,
    oblique_projection,
    pinv_psd,
    scale,
    to_dense,
)
from engine.schema.marginals import SCHEMA_ATTRIBUTES, attribute_factor, parse_marginal

SMALL = (
    ("HHGQ", ("household", "1", "2", "3", "4", "5", "6", "7")),
    ("VOTINGAGE", ("a", "b")),
    ("CENRACE", ("01", "02", "03")),
)
QUERIES = ("TOTAL", "HHINSTLEVELS", "HHGQ", "VOTINGAGE*CENRACE", "DETAILED", "CENRACE")


def _dense(query: str) -> np.ndarray:
    parse = parse_marginal(query, SMALL)
    a = np.ones((1, 1))
    for attr, levels in SMALL:
        a = np.kron(a, attribute_factor(parse, attr, len(levels)))
    return a


def test_gram_inverse_projection_and_variance_match_dense() -> None:
    algebra = CellAlgebra(SMALL, QUERIES)
    assert (
        max(algebra.dims) == 3
        and sum(d * m for d, m in zip(algebra.dims, algebra.mults, strict=True)) == 48
    )
    rng = np.random.default_rng(0)
    w = {q: rng.uniform(0.1, 2.0) for q in QUERIES}
    h = add(*[scale(algebra.gram(q), w[q]) for q in QUERIES])
    h_dense = sum(w[q] * _dense(q).T @ _dense(q) for q in QUERIES)
    np.testing.assert_allclose(to_dense(algebra, h), h_dense, atol=1e-12)
    s = pinv_psd(h)
    s_dense = np.linalg.inv(h_dense)
    np.testing.assert_allclose(to_dense(algebra, s), s_dense, atol=1e-12)
    b = np.vstack([_dense("TOTAL"), _dense("HHINSTLEVELS")])
    proj = oblique_projection(s, algebra.row_space(["TOTAL", "HHINSTLEVELS"]))
    expected = s_dense @ b.T @ np.linalg.pinv(b @ s_dense @ b.T) @ b
    np.testing.assert_allclose(to_dense(algebra, proj), expected, atol=1e-12)
    for q in QUERIES:
        a = _dense(q)
        assert np.isclose(algebra.mean_cell_variance(s, q), np.trace(a @ s_dense @ a.T) / len(a))


def test_production_schema_blocks_are_small() -> None:
    algebra = CellAlgebra(SCHEMA_ATTRIBUTES["redistricting2020"], ("TOTAL", "HHINSTLEVELS"))
    assert max(algebra.dims) <= 3
    assert sum(d * m for d, m in zip(algebra.dims, algebra.mults, strict=True)) == 2016
