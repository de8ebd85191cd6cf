"""Shareable links: a scenario named with its budget's fingerprint, a working budget as a code that
says when it was cut short or altered."""

from __future__ import annotations

import base64
import json
import zlib

import pytest

from engine.core.errors import ValidationError
from engine.dp.budget.fingerprint import budget_fingerprint
from engine.dp.presets import load_phsafe_preset, load_topdown_preset
from phexplore.app import links
from phexplore.planning.scenarios import scenario_from_preset


def test_scenario_label_round_trip_and_tampering() -> None:
    scenario = scenario_from_preset("topdown-2020-production", scenario_name="Plan · A")
    saved = {scenario.name: scenario}
    label = links.scenario_label(scenario)
    assert links.split_label(label) == ("Plan · A", scenario.fingerprint()[:12])
    assert links.find_scenario(label, saved) is scenario
    assert links.find_scenario("Plan · A", {}.get("x") or saved) is scenario  # no fingerprint
    with pytest.raises(ValidationError, match="does not hold"):
        links.find_scenario("Plan B · 0123456789ab", saved)
    tampered = label[:-1] + ("0" if label[-1] != "0" else "1")
    with pytest.raises(ValidationError, match="changed after the link was made"):
        links.find_scenario(tampered, saved)


def test_budget_code_round_trip_keeps_the_fingerprint() -> None:
    phsafe = load_phsafe_preset("phsafe-2020")
    phsafe = phsafe.with_rho("PH3", "state_A-G", 1.0)
    topdown = load_topdown_preset("topdown-2020-production")
    code = links.encode_budget(phsafe, topdown, "topdown-2020-production")
    assert code.startswith(links.CODE_PREFIX)
    back = links.decode_budget(code)
    assert back.phsafe is not None and back.topdown is not None
    assert budget_fingerprint(back.phsafe) == budget_fingerprint(phsafe)
    assert budget_fingerprint(back.topdown) == budget_fingerprint(topdown)
    assert back.topdown_preset == "topdown-2020-production"
    assert links.encode_budget() == ""


def _recode(code: str, edit) -> str:
    body = code[len(links.CODE_PREFIX) :]
    payload = json.loads(zlib.decompress(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))))
    edit(payload)
    raw = json.dumps(payload).encode()
    return links.CODE_PREFIX + base64.urlsafe_b64encode(zlib.compress(raw)).decode().rstrip("=")


def test_damaged_or_altered_codes_are_refused() -> None:
    code = links.encode_budget(load_phsafe_preset("phsafe-2020"))
    with pytest.raises(ValidationError, match="damaged"):
        links.decode_budget(code[: len(code) // 2])
    with pytest.raises(ValidationError, match="damaged"):
        links.decode_budget("not a code")

    def more_rho(payload: dict) -> None:
        table = payload["phsafe"]["budget"]["privacy_budget"]["PH2"]
        table["usa_*"] = table["usa_*"] * 2 + 1

    altered = _recode(code, more_rho)
    with pytest.raises(ValidationError, match="altered|not a valid budget"):
        links.decode_budget(altered)
