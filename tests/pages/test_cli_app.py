"""`phexplore app`: serves app.py (through serve.py's Host check) on the loopback interface by
default."""

from __future__ import annotations

import pytest

from engine.core.errors import ValidationError
from phexplore.cli import main
from phexplore.cli.app import SERVE_SCRIPT, streamlit_command


def test_app_command_defaults_to_loopback(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["app", "--print-command"]) == 0
    out = capsys.readouterr().out
    assert "streamlit run" in out
    assert str(SERVE_SCRIPT) in out
    assert "PHEXPLORE_ALLOWED_HOSTS='127.0.0.1,localhost,[::1]'" in out
    assert "--server.allowedHosts localhost" in out
    assert "--server.address 127.0.0.1" in out
    assert "--server.port 8501" in out
    assert "--browser.gatherUsageStats false" in out


def test_app_command_rejects_bad_port() -> None:
    with pytest.raises(ValidationError, match="--port"):
        streamlit_command("127.0.0.1", 70000)
    assert main(["app", "--port", "0", "--print-command"]) == 1
