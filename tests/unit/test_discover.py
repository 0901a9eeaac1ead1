import pytest

from fabbench.errors import UsageError
from fabbench.launch.discover import discover


def test_no_launcher():
    assert discover({"PATH": "/bin"}) is None


@pytest.mark.parametrize("env,expect", [
    ({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4",
      "OMPI_COMM_WORLD_LOCAL_RANK": "1"}, (1, 4, 1, "mpirun")),
    ({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "3"}, (3, 8, 3, "torchrun")),
    ({"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "SLURM_STEP_ID": "0"},
     (5, 8, 1, "srun")),
    ({"JOB_COMPLETION_INDEX": "2", "FABBENCH_WORLD_SIZE": "4"}, (2, 4, 0, "kubernetes")),
    ({"HOROVOD_RANK": "0", "HOROVOD_SIZE": "2", "HOROVOD_LOCAL_RANK": "0"},
     (0, 2, 0, "horovodrun")),
])
def test_launchers(env, expect):
    me = discover(env)
    assert (me.rank, me.size, me.local_rank, me.launcher) == expect


def test_batch_script_shell_is_not_a_rank():
    env = {"SLURM_PROCID": "0", "SLURM_NTASKS": "8", "SLURM_JOB_ID": "7"}
    assert discover(env) is None
    assert discover({**env, "SLURM_STEP_ID": "batch"}) is None


@pytest.mark.parametrize("env", [{"RANK": "x", "WORLD_SIZE": "2"},
                                 {"RANK": "2", "WORLD_SIZE": "2"}])
def test_bad_rank_env(env):
    with pytest.raises(UsageError):
        discover(env)
