"""Off-spine entity prediction (engine.prediction.entities)."""

from __future__ import annotations

import numpy as np

from engine.prediction.entities import family_factors
from engine.prediction.least_squares import path_coefficients


def test_an_entity_that_is_a_subtree_has_its_node_variance() -> None:
    # Root → 2 → (3, 2) → (1, 2, 2, 3, 1) leaves.
    fanouts = (np.array([1]), np.array([2]), np.array([3, 2]), np.array([1, 2, 2, 3, 1]))
    coefs = path_coefficients(fanouts)
    n_leaves = 9
    # Leaves under the second level-2 node (children 3..4 of level 2 hold leaves 5..8).
    member = np.zeros((n_leaves, 3))
    member[5:9, 0] = 1.0  # level-2 nodes 3 and 4 (leaves 5..8): level-1 node 1
    member[:, 1] = 1.0  # everything: the root
    member[1:3, 2] = 1.0  # level-2 node 1 (leaves 1 and 2)
    factors = family_factors(fanouts, member)
    # The root: Var = K_root only.
    np.testing.assert_allclose(factors[1], [1.0, 0.0, 0.0, 0.0], atol=1e-12)
    # Level-2 node 1 (second child of level-1 node 0): its coefficients.
    np.testing.assert_allclose(factors[2], np.r_[coefs[2][1], 0.0], atol=1e-12)
    # Level-2 nodes 3 and 4 are the children of level-1 node 1: together, that node.
    np.testing.assert_allclose(factors[0], np.r_[coefs[1][1], 0.0, 0.0], atol=1e-12)


def test_a_single_leaf_has_its_own_variance() -> None:
    fanouts = (np.array([1]), np.array([3]), np.array([2, 1, 4]))
    coefs = path_coefficients(fanouts)
    member = np.eye(7)
    np.testing.assert_allclose(family_factors(fanouts, member), coefs[2], atol=1e-12)
