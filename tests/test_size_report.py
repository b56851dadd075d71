"""tools/size_report.py reports exactly the units over issue 14's targets."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_it_reports_the_units_over_their_limits_and_nothing_else(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(80))  # def line + 80: 81 lines
    short = "\n".join(f"    y{i} = {i}" for i in range(79))  # def line + 79: 80, the limit
    members = "\n".join(f"    a{i} = {i}" for i in range(399))  # class line + 399: 400
    method = "\n".join("    " + line for line in body.splitlines())
    padding = "\n" * 200  # the module passes 600 lines
    (tmp_path / "big.py").write_text(
        f"@decorated\ndef long_one():\n{body}\n\n\ndef at_limit():\n{short}\n\n\n"
        f"class Fits:\n{members}\n\n\nclass Big:\n{members}\n    def method(self):\n{method}\n"
        f"{padding}"
    )
    (tmp_path / "small.py").write_text("x = 1\n")
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "size_report.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = done.stdout.splitlines()
    big = tmp_path / "big.py"
    assert lines[0] == "modules over 600 lines: 1"
    assert lines[1].split() == [str(len(big.read_text().splitlines())), str(big)]
    assert lines[2] == "classes over 400 lines: 1"
    first = big.read_text().splitlines().index("class Big:") + 1
    assert lines[3].split() == [str(400 + 81), f"{big}:{first}", "Big"]
    assert lines[4] == "functions over 80 lines: 2"
    assert sorted(line.split()[2] for line in lines[5:]) == ["Big.method", "long_one"]
    assert f"{big}:1 long_one" in done.stdout  # counted from its decorator


def test_the_source_stays_within_the_limits() -> None:
    """The gate: issue 14's limits hold for src (crossed five times in one session before this)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "size_report.py"), str(ROOT / "src")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.splitlines() == [
        "modules over 600 lines: 0",
        "classes over 400 lines: 0",
        "functions over 80 lines: 0",
    ], f"split what tools/size_report.py names:\n{done.stdout}"
