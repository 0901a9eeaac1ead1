import pytest

from fabbench.errors import UsageError
from fabbench.units import format_size, parse_size, parse_sizes


@pytest.mark.parametrize("text,value", [("8", 8), ("1K", 1024), ("64M", 64 << 20), ("1G", 1 << 30),
                                        ("16MiB", 16 << 20), ("2kb", 2048), (" 3 M ", 3 << 20)])
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["12Q", "", "K", "-1", "0", "1.5M", "2T", "1K1"])
def test_parse_size_rejects(text):
    with pytest.raises(UsageError, match="bad size"):
        parse_size(text)


def test_geometric_sweep_like_nccl_tests():
    assert parse_sizes("8:64") == (8, 16, 32, 64)
    assert parse_sizes("1K:16K:4") == (1024, 4096, 16384)
    assert parse_sizes("8:64M")[-1] == 64 << 20
    assert len(parse_sizes("8:64M")) == 24


def test_list_sweep_sorted_unique():
    assert parse_sizes("1M,8,1K,8") == (8, 1024, 1 << 20)


@pytest.mark.parametrize("spec", ["64:8", "8:64:1", "8:64:x", "1:2:3:4", ",", "8:12Q"])
def test_bad_sweeps(spec):
    with pytest.raises(UsageError):
        parse_sizes(spec)


def test_format_size():
    assert [format_size(v) for v in (8, 1024, 3 << 20, 1 << 30, 1000)] == \
        ["8", "1K", "3M", "1G", "1000"]
