"""Bad input is one line on stderr and exit code 2, whatever a value in it held: a path with a
newline (or a carriage return) is shown escaped, not split over two lines."""

from __future__ import annotations

import pytest

from conftest import cli


@pytest.mark.parametrize("argv", [
    ("report", "a\nb"),
    ("render", "slurm", "--nodes", "2", "--fabric", "ethernet", "--primitive", "gloo",
     "--workload", "replay", "--trace", "a\r\nb"),
])
def test_bad_input_holding_a_newline_is_still_one_line(capsys, argv):
    # a value's newline reached stderr as it was, and the message took two lines
    code, _, err = cli(capsys, *argv)
    assert code == 2 and err.count("\n") == 1 and "a\\" in err, err
