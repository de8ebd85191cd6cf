"""Households, their members and group-quarters persons of the synthetic generator (steps 1–5).

The people of :mod:`engine.data.synthetic` (method in its docstring and ``docs/synthetic.md``),
drawn with NumPy from the ACS 2019 calibration (:mod:`engine.data.synthetic_calibration`):

* :func:`draw_households` — households drawn i.i.d. from the ACS (NPF, NOC) family cells, persons
  living alone and multi-person non-family households, until they hold the housing-unit persons
  exactly; with sex of the householder, same-sex couples and tenure;
* :func:`expand_household_persons` — every member's role, RELSHIP, age, race and Hispanic origin;
* :func:`draw_group_quarters` — GQ facilities of log-normal size and their persons;
* :func:`household_types` — HHT, HHT2 and CPLT derived from the members.

The module constants are the generator's assumptions where the ACS excerpt is silent (each with
its source or the word "assumption"); none of them affects the calibrated person shares.
:mod:`engine.data.population` draws its people with the same functions.
"""

from __future__ import annotations

import numpy as np

from engine.data.synthetic_calibration import AcsCalibration

#: Share of persons in non-family households who live alone (2010 Census: 31.2 M one-person
#: households of 39.2 M non-family households; ≈ 8 M multi-person non-family households of ≈ 2.3
#: persons → 31.2 / (31.2 + 18.4) ≈ 0.63). Assumption: the ACS excerpt has no household size.
NONFAMILY_ALONE_PERSON_SHARE = 0.63
#: Sizes and probabilities of multi-person non-family households (assumption, mean ≈ 2.3).
NONFAMILY_MULTI_SIZES = np.array([2, 3, 4])
NONFAMILY_MULTI_PROBS = np.array([0.76, 0.17, 0.07])
#: Probability that a multi-person non-family household is a cohabiting couple (assumption).
NONFAMILY_PARTNER_PROB = 0.5
#: Probability that an unmarried family householder has an unmarried partner (assumption), by
#: whether own children under 18 are present.
FAMILY_PARTNER_PROB_WITH_CHILDREN = 0.30
FAMILY_PARTNER_PROB_NO_CHILDREN = 0.10
#: Probability that a family household also holds one non-relative (roommate, foster child, …).
FAMILY_NONRELATIVE_PROB = 0.05
#: Female share of family householders without a spouse (2010 Census: 15.3 M female vs 5.8 M male
#: "other family" householders ≈ 0.72).
OTHER_FAMILY_FEMALE_SHARE = 0.72
#: Same-sex shares of married and of unmarried-partner couples (≈ 2019 ACS national estimates).
SAME_SEX_MARRIED_SHARE = 0.011
SAME_SEX_PARTNER_SHARE = 0.07
#: Tenure splits (assumptions close to 2010 Census / 2019 ACS national tables).
OWNER_MORTGAGE_SHARE = 0.70
RENTER_NO_CASH_RENT_SHARE = 0.04
#: Relationship codes of own children under 18: biological, adopted, stepchild and their shares.
OWN_CHILD_RELSHIPS = np.array([25, 26, 27])
OWN_CHILD_RELSHIP_PROBS = np.array([0.92, 0.03, 0.05])
#: Other relatives: adult child, grandchild, parent, sibling, child-in-law, parent-in-law, other.
RELATIVE_RELSHIPS = np.array([25, 30, 29, 28, 32, 31, 33])
RELATIVE_RELSHIP_PROBS = np.array([0.42, 0.20, 0.10, 0.12, 0.05, 0.03, 0.08])
#: Non-relatives in a family household: roommate, foster child, other non-relative.
NONRELATIVE_RELSHIPS = np.array([34, 35, 36])
NONRELATIVE_RELSHIP_PROBS = np.array([0.45, 0.10, 0.45])
#: Probability that a member copies the householder's race and Hispanic origin, by role.
RACE_COPY_PROB = {"spouse": 0.85, "partner": 0.75, "child": 0.92, "relative": 0.92, "nonrel": 0.4}
#: Family householders are drawn from the ACS age distribution of adults in family households
#: truncated at this age: the ACS group also holds adult children living with their parents, who
#: the generator adds separately as relatives (assumption; keeps the 18-24 share close to the ACS).
FAMILY_HOUSEHOLDER_MIN_AGE = 23
#: GQ facility size: log-normal with this median and log-sd, at least 1 person.
GQ_MEDIAN_SIZE = 25.0
GQ_LOG_SD = 1.0

MAX_AGE = 115

# Household roles of persons.
_HOUSEHOLDER, _SPOUSE, _PARTNER, _CHILD, _RELATIVE, _NONREL = range(6)
# Household kinds.
_FAMILY, _ALONE, _NONFAMILY_MULTI = range(3)


# --------------------------------------------------------------------------------------------------
# Households


def _cell_table(cal: AcsCalibration) -> dict[str, np.ndarray]:
    """Household cells with their household-draw probabilities (see the module docstring, step
    2)."""
    cells = cal.family_cells
    family = cells[cells["npf"] >= 2]
    nonfamily_share = float(cells.loc[cells["npf"] == 0, "person_share"].sum())
    k = family["npf"].to_numpy(dtype=np.int64)
    c = family["noc"].to_numpy(dtype=np.int64)
    married = family["married_share"].to_numpy(dtype=float)
    partner_prob = np.where(
        c > 0, FAMILY_PARTNER_PROB_WITH_CHILDREN, FAMILY_PARTNER_PROB_NO_CHILDREN
    )
    expected_size = k + (1.0 - married) * partner_prob + FAMILY_NONRELATIVE_PROB
    multi_mean = float(np.dot(NONFAMILY_MULTI_SIZES, NONFAMILY_MULTI_PROBS))
    nonfamily_owner = float(cells.loc[cells["npf"] == 0, "owner_share"].iloc[0])

    person_share = np.concatenate(
        [
            family["person_share"].to_numpy(dtype=float),
            [nonfamily_share * NONFAMILY_ALONE_PERSON_SHARE],
            [nonfamily_share * (1.0 - NONFAMILY_ALONE_PERSON_SHARE)],
        ]
    )
    size = np.concatenate([expected_size, [1.0, multi_mean]])
    household_prob = person_share / size
    household_prob /= household_prob.sum()
    return {
        "kind": np.concatenate([np.full(k.size, _FAMILY), [_ALONE, _NONFAMILY_MULTI]]),
        "npf": np.concatenate([k, [0, 0]]),
        "noc": np.concatenate([c, [0, 0]]),
        "married": np.concatenate([married, [0.0, 0.0]]),
        "partner": np.concatenate([partner_prob, [0.0, NONFAMILY_PARTNER_PROB]]),
        "owner": np.concatenate(
            [family["owner_share"].to_numpy(dtype=float), [nonfamily_owner] * 2]
        ),
        "prob": household_prob,
        "mean_size": np.array(float(np.dot(household_prob, size))),
    }


def _draw_household_batch(n: int, cells: dict[str, np.ndarray], rng: np.random.Generator) -> dict:
    cell = rng.choice(cells["prob"].size, size=n, p=cells["prob"])
    kind = cells["kind"][cell]
    family = kind == _FAMILY
    npf = cells["npf"][cell]
    noc = cells["noc"][cell]
    married = family & (rng.random(n) < cells["married"][cell])
    partner = ~married & (kind != _ALONE) & (rng.random(n) < cells["partner"][cell])
    multi_size = rng.choice(NONFAMILY_MULTI_SIZES, size=n, p=NONFAMILY_MULTI_PROBS)
    nonrel = np.where(
        family,
        (rng.random(n) < FAMILY_NONRELATIVE_PROB).astype(np.int64),
        np.where(kind == _NONFAMILY_MULTI, multi_size - 1 - partner, 0),
    )
    relatives = np.where(family, npf - 1 - married - noc, 0)
    size = np.where(family, npf, 1) + partner + nonrel
    owner = rng.random(n) < cells["owner"][cell]
    return {
        "kind": kind,
        "npf": np.where(family, npf, 0),
        "noc": np.where(family, noc, 0),
        "married": married,
        "partner": partner,
        "relatives": relatives,
        "nonrel": nonrel,
        "size": size,
        "owner": owner,
    }


def draw_households(n_hu_persons: int, cal: AcsCalibration, rng: np.random.Generator) -> dict:
    """Draw households until they hold ``n_hu_persons`` persons exactly (leftovers live alone)."""
    cells = _cell_table(cal)
    batches = []
    held = 0
    while True:
        estimate = int((n_hu_persons - held) / float(cells["mean_size"]) * 1.05) + 64
        batch = _draw_household_batch(estimate, cells, rng)
        batches.append(batch)
        held += int(batch["size"].sum())
        if held >= n_hu_persons:
            break
    drawn = {key: np.concatenate([b[key] for b in batches]) for key in batches[0]}
    cumulative = np.cumsum(drawn["size"])
    keep = int(np.searchsorted(cumulative, n_hu_persons, side="right"))
    kept = {key: value[:keep] for key, value in drawn.items()}
    leftover = n_hu_persons - (int(cumulative[keep - 1]) if keep else 0)
    if leftover:
        nonfamily_owner = float(cells["owner"][cells["kind"] == _ALONE][0])
        extra = {
            "kind": np.full(leftover, _ALONE),
            "npf": np.zeros(leftover, dtype=np.int64),
            "noc": np.zeros(leftover, dtype=np.int64),
            "married": np.zeros(leftover, dtype=bool),
            "partner": np.zeros(leftover, dtype=bool),
            "relatives": np.zeros(leftover, dtype=np.int64),
            "nonrel": np.zeros(leftover, dtype=np.int64),
            "size": np.ones(leftover, dtype=np.int64),
            "owner": rng.random(leftover) < nonfamily_owner,
        }
        kept = {key: np.concatenate([kept[key], extra[key]]) for key in kept}
    n = kept["size"].size
    family = kept["kind"] == _FAMILY
    female_share = np.where(
        family,
        OTHER_FAMILY_FEMALE_SHARE,
        float(cal.scalars.set_index("name").loc["nonfamily_female_share", "value"]),
    )
    kept["female"] = rng.random(n) < female_share
    kept["same_sex"] = rng.random(n) < np.where(
        kept["married"], SAME_SEX_MARRIED_SHARE, SAME_SEX_PARTNER_SHARE
    )
    tenure_split = rng.random(n)
    kept["ten"] = np.where(
        kept["owner"],
        np.where(tenure_split < OWNER_MORTGAGE_SHARE, 1, 2),
        np.where(tenure_split < RENTER_NO_CASH_RENT_SHARE, 4, 3),
    )
    return kept


def _sample_age(
    group: str, n: int, cal: AcsCalibration, rng: np.random.Generator, min_age: int = 0
) -> np.ndarray:
    """Ages from the ACS distribution of ``group``, truncated below at ``min_age``."""
    probs = cal.ages[group].to_numpy(dtype=float).copy()
    probs[:min_age] = 0.0
    return rng.choice(probs.size, size=n, p=probs / probs.sum())


def _sample_race(
    n: int,
    cal: AcsCalibration,
    two_codes: np.ndarray,
    two_probs: np.ndarray,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Draw (CENRACE as int 1–63, CENHISP 1/2) from the ACS joint distribution."""
    table = cal.race_ethnicity
    probs = table["person_share"].to_numpy(dtype=float)
    pick = rng.choice(probs.size, size=n, p=probs / probs.sum())
    races = table["race"].to_numpy(dtype=str)
    race = np.array([0 if r == "two" else int(r) for r in races])[pick]
    multiracial = race == 0
    race[multiracial] = rng.choice(two_codes, size=int(multiracial.sum()), p=two_probs)
    return race, table["cenhisp"].to_numpy(dtype=np.int64)[pick]


def expand_household_persons(
    hh: dict,
    cal: AcsCalibration,
    two_codes: np.ndarray,
    two_probs: np.ndarray,
    rng: np.random.Generator,
) -> dict:
    """Person records of the households: role, RELSHIP, age, race, Hispanic origin."""
    size = hh["size"]
    n = int(size.sum())
    hh_id = np.repeat(np.arange(size.size), size)
    starts = np.cumsum(size) - size
    pos = np.arange(n) - starts[hh_id]
    b_couple = 1 + hh["married"] + hh["partner"]
    b_child = b_couple + hh["noc"]
    b_rel = b_child + hh["relatives"]
    p_couple, p_child, p_rel = b_couple[hh_id], b_child[hh_id], b_rel[hh_id]
    married_p = hh["married"][hh_id]
    role = np.select(
        [pos == 0, (pos < p_couple) & married_p, pos < p_couple, pos < p_child, pos < p_rel],
        [_HOUSEHOLDER, _SPOUSE, _PARTNER, _CHILD, _RELATIVE],
        default=_NONREL,
    )

    # Householder ages by household kind.
    kind = hh["kind"]
    hh_age = np.empty(size.size, dtype=np.int64)
    groups = {
        "parent_adult": (kind == _FAMILY) & (hh["noc"] > 0),
        "family_adult": (kind == _FAMILY) & (hh["noc"] == 0),
        "nonfamily_adult": kind != _FAMILY,
    }
    for group, mask in groups.items():
        min_age = FAMILY_HOUSEHOLDER_MIN_AGE if group != "nonfamily_adult" else 15
        hh_age[mask] = _sample_age(group, int(mask.sum()), cal, rng, min_age)
    head_age = hh_age[hh_id]

    age = np.zeros(n, dtype=np.int64)
    relship = np.zeros(n, dtype=np.int64)
    same_sex = hh["same_sex"][hh_id]

    is_head = role == _HOUSEHOLDER
    age[is_head] = head_age[is_head]
    relship[is_head] = 20

    for r, low, code_opposite, code_same in (
        (_SPOUSE, 18, 21, 23),
        (_PARTNER, 16, 22, 24),
    ):
        mask = role == r
        m = int(mask.sum())
        gap = np.rint(rng.normal(0.0, 4.0, size=m)).astype(np.int64)
        age[mask] = np.clip(head_age[mask] + gap, low, 99)
        relship[mask] = np.where(same_sex[mask], code_same, code_opposite)

    child = role == _CHILD
    m = int(child.sum())
    child_age = _sample_age("own_child", m, cal, rng)
    limit = head_age[child] - 15
    too_old = child_age > limit
    uniform = np.floor(rng.random(m) * (np.minimum(limit, 17) + 1)).astype(np.int64)
    age[child] = np.where(too_old, uniform, child_age)
    relship[child] = rng.choice(OWN_CHILD_RELSHIPS, size=m, p=OWN_CHILD_RELSHIP_PROBS)

    rel = role == _RELATIVE
    age[rel], relship[rel] = _relative_ages(head_age[rel], married_p[rel], rng)

    nonrel = role == _NONREL
    m = int(nonrel.sum())
    in_family = (kind[hh_id] == _FAMILY)[nonrel]
    nonrel_code = np.where(
        in_family, rng.choice(NONRELATIVE_RELSHIPS, size=m, p=NONRELATIVE_RELSHIP_PROBS), 34
    )
    adult_age = _sample_age("nonfamily_adult", m, cal, rng)
    foster_age = np.floor(rng.random(m) * 18).astype(np.int64)
    age[nonrel] = np.where(nonrel_code == 35, foster_age, adult_age)
    relship[nonrel] = nonrel_code

    # Race and Hispanic origin: householders draw, members copy with a role probability.
    head_race, head_hisp = _sample_race(size.size, cal, two_codes, two_probs, rng)
    own_race, own_hisp = _sample_race(n, cal, two_codes, two_probs, rng)
    copy_prob = np.select(
        [role == _SPOUSE, role == _PARTNER, role == _CHILD, role == _RELATIVE, role == _NONREL],
        [RACE_COPY_PROB[k] for k in ("spouse", "partner", "child", "relative", "nonrel")],
        default=1.0,
    )
    copy = rng.random(n) < copy_prob
    race = np.where(copy, head_race[hh_id], own_race)
    hisp = np.where(copy, head_hisp[hh_id], own_hisp)
    return {
        "hh_id": hh_id,
        "age": np.clip(age, 0, MAX_AGE),
        "relship": relship,
        "race": race,
        "hisp": hisp,
        "head_race": head_race,
        "head_hisp": head_hisp,
    }


def _relative_ages(
    head_age: np.ndarray, married: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """RELSHIP and age of "other relatives", kept plausible relative to the householder's age."""
    m = head_age.size
    code = rng.choice(RELATIVE_RELSHIPS, size=m, p=RELATIVE_RELSHIP_PROBS)
    u = rng.random(m)
    # Fall back to a sibling when the drawn relationship does not fit the householder's age.
    impossible = (
        ((code == 25) & (head_age < 33))
        | ((code == 30) & (head_age < 36))
        | ((code == 32) & (head_age < 38))
        | (np.isin(code, [29, 31]) & (head_age > 80))
        | ((code == 31) & ~married)
    )
    code = np.where(impossible, 28, code)
    adult_child = 18 + np.floor(u * (np.minimum(head_age - 15, 60) - 17)).astype(np.int64)
    grandchild = np.floor(u * (np.minimum(head_age - 30, 25) + 1)).astype(np.int64)
    elder = head_age + 18 + np.floor(u * 18).astype(np.int64)
    sibling = head_age + np.floor(u * 21).astype(np.int64) - 10
    child_in_law = 18 + np.floor(u * (np.minimum(head_age - 20, 60) - 17)).astype(np.int64)
    other = np.floor(u * 90).astype(np.int64)
    age = np.select(
        [code == 25, code == 30, np.isin(code, [29, 31]), code == 28, code == 32],
        [adult_child, grandchild, elder, sibling, child_in_law],
        default=other,
    )
    return np.clip(age, 0, 100), code


# --------------------------------------------------------------------------------------------------
# Group quarters


def _facility_sizes(n_persons: int, rng: np.random.Generator) -> np.ndarray:
    """Log-normal facility sizes summing exactly to ``n_persons`` (the last one trimmed)."""
    if n_persons == 0:
        return np.zeros(0, dtype=np.int64)
    sizes: list[np.ndarray] = []
    total = 0
    while total < n_persons:
        draw = np.maximum(
            1, np.rint(rng.lognormal(np.log(GQ_MEDIAN_SIZE), GQ_LOG_SD, size=64)).astype(np.int64)
        )
        sizes.append(draw)
        total += int(draw.sum())
    all_sizes = np.concatenate(sizes)
    cumulative = np.cumsum(all_sizes)
    last = int(np.searchsorted(cumulative, n_persons, side="left"))
    result = all_sizes[: last + 1].copy()
    result[-1] -= int(cumulative[last]) - n_persons
    return result


def draw_group_quarters(
    n_inst: int,
    n_noninst: int,
    cal: AcsCalibration,
    two_codes: np.ndarray,
    two_probs: np.ndarray,
    rng: np.random.Generator,
) -> dict:
    """GQ facilities (sizes) and their persons (facility index, age, race, RELSHIP 37/38)."""
    parts = []
    for n_gq, group, relship in (
        (n_inst, "gq_institutional", 37),
        (n_noninst, "gq_noninstitutional", 38),
    ):
        sizes = _facility_sizes(n_gq, rng)
        parts.append((sizes, _sample_age(group, n_gq, cal, rng), np.full(n_gq, relship)))
    sizes = np.concatenate([p[0] for p in parts])
    n = int(sizes.sum())
    race, hisp = _sample_race(n, cal, two_codes, two_probs, rng)
    return {
        "size": sizes,
        "facility": np.repeat(np.arange(sizes.size), sizes),
        "age": np.concatenate([p[1] for p in parts]).astype(np.int64),
        "relship": np.concatenate([p[2] for p in parts]).astype(np.int64),
        "race": race,
        "hisp": hisp,
    }


# --------------------------------------------------------------------------------------------------
# Unit attributes


def household_types(hh: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """HHT, HHT2 and CPLT of each household, derived from its members."""
    family = hh["kind"] == _FAMILY
    alone = hh["size"] == 1
    female = hh["female"]
    married, partner = hh["married"], hh["partner"]
    children = hh["noc"] > 0
    hht = np.select(
        [married, family & ~female, family & female, alone & ~female, ~alone & ~female, alone],
        [1, 2, 3, 4, 5, 6],
        default=7,
    )
    single = np.select([alone, children, family], [5, 6, 7], default=8) + np.where(female, 0, 4)
    hht2 = np.select(
        [married & children, married, partner & children, partner],
        [1, 2, 3, 4],
        default=single,
    )
    same = hh["same_sex"]
    cplt = np.select(
        [married & ~same, married & same, partner & ~same, partner & same], [1, 2, 3, 4], default=5
    )
    return hht, hht2, cplt
