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
    assert (me.rank, me.size, me.local_rank, me.origin) == expect


def test_batch_script_shell_is_not_a_rank():
    env = {"SLURM_PROCID": "0", "SLURM_NTASKS": "8", "SLURM_JOB_ID": "7"}
    assert discover(env) is None
    assert discover({**env, "SLURM_STEP_ID": "batch"}) is None


@pytest.mark.parametrize("env", [{"RANK": "x", "WORLD_SIZE": "2"},
                                 {"RANK": "2", "WORLD_SIZE": "2"}])
def test_bad_rank_env(env):
    with pytest.raises(UsageError):
        discover(env)


@pytest.mark.parametrize("env,expect", [
    ({"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1"}, (1, 2, 1, "hydra/PMI")),
    ({"MV2_COMM_WORLD_RANK": "3", "MV2_COMM_WORLD_SIZE": "4",
      "MV2_COMM_WORLD_LOCAL_RANK": "0"}, (3, 4, 0, "mvapich")),
    ({"PMIX_RANK": "1", "FABBENCH_WORLD_SIZE": "2"}, (1, 2, 0, "pmix")),
    # mpirun inside an srun step, torchrun inside one: the inner launcher is this world
    ({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "PMIX_RANK": "1",
      "SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_STEP_ID": "0"}, (1, 2, 0, "mpirun")),
    ({"RANK": "1", "WORLD_SIZE": "2", "SLURM_PROCID": "0", "SLURM_NTASKS": "1",
      "SLURM_STEP_ID": "3"}, (1, 2, 0, "torchrun")),
    # srun --mpi=pmix sets both; Slurm's numbers win over the size-less PMIx rank
    ({"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_STEP_ID": "0", "PMIX_RANK": "1"},
     (1, 2, 0, "srun")),
])
def test_every_launcher_family(env, expect):
    me = discover(env)
    assert (me.rank, me.size, me.local_rank, me.origin) == expect


@pytest.mark.parametrize("env,var", [
    ({"PMI_RANK": "0"}, "PMI_RANK"),
    ({"PMIX_RANK": "1"}, "PMIX_RANK"),
    ({"JOB_COMPLETION_INDEX": "3"}, "JOB_COMPLETION_INDEX"),
    ({"OMPI_COMM_WORLD_RANK": "0"}, "OMPI_COMM_WORLD_RANK"),
    ({"HOROVOD_RANK": "0"}, "HOROVOD_RANK"),
])
def test_a_rank_that_cannot_be_placed_refuses_to_launch(env, var):
    """Inside a job but without a world size: never 'outside a job, launch my own ranks'."""
    with pytest.raises(UsageError, match=f"{var}=.*cannot place this rank") as err:
        discover(env)
    assert "\n" not in str(err.value)


def test_a_lone_rank_variable_of_a_common_name_is_no_launcher():
    assert discover({"RANK": "3", "LOCAL_RANK": "0"}) is None


def test_announced_names_the_variables():
    me = discover({"PMI_RANK": "1", "PMI_SIZE": "2"})
    assert me.announced == "PMI_RANK=1, PMI_SIZE=2 (hydra/PMI)"
