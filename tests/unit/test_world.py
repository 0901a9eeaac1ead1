"""The world a rank got against the one its launcher announced (launch/world.py)."""

from __future__ import annotations

import pytest

from fabbench.launch.discover import discover
from fabbench.launch.world import WorldMismatch, check_world


class FakeComm:
    """A communicator's rank and size, and what gather_objects would return on every rank."""

    def __init__(self, rank: int, size: int, gathered: list | None = None) -> None:
        self.rank, self.size, self._gathered = rank, size, gathered

    def gather_objects(self, obj):
        return self._gathered if self._gathered is not None else [obj]


def test_the_right_world_passes():
    me = discover({"PMI_RANK": "1", "PMI_SIZE": "2"})
    check_world(me, "mpi", FakeComm(1, 2, [(0, "h", 10), (1, "h", 11)]))


def test_singleton_under_a_launcher_of_two():
    me = discover({"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_STEP_ID": "0"})
    with pytest.raises(WorldMismatch) as err:
        check_world(me, "mpi", FakeComm(0, 1))
    text = str(err.value)
    assert "announced 2 ranks (SLURM_PROCID=1, SLURM_NTASKS=2 (srun))" in text
    assert "world of 1" in text and "singleton" in text and "--mpi=pmix" in text
    assert "\n" not in text


def test_other_size():
    me = discover({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4"})
    with pytest.raises(WorldMismatch, match="announced 4 ranks.*world of 2"):
        check_world(me, "gloo", FakeComm(0, 2))


def test_two_processes_claim_one_rank():
    me = discover({"PMI_RANK": "0", "PMI_SIZE": "2"})
    with pytest.raises(WorldMismatch) as err:
        check_world(me, "mpi", FakeComm(0, 2, [(0, "a", 10), (0, "b", 11)]))
    text = str(err.value)
    assert "2 processes claim rank 0 of 2 (PMI_RANK=0: a pid 10, b pid 11)" in text
    assert "none claims rank 1" in text


def test_ranks_numbered_differently():
    me = discover({"PMI_RANK": "1", "PMI_SIZE": "2"})
    with pytest.raises(WorldMismatch, match="rank 0 of the process that hydra/PMI calls rank 1"):
        check_world(me, "mpi", FakeComm(1, 2, [(1, "a", 10), (0, "a", 11)]))
