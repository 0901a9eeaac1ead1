"""Is the MPI CUDA-aware: the answers of ompi_info and of the running library, read."""

import ctypes

import pytest

from fabbench.comm.cuda_aware import CudaAwareness, ask_library, from_ompi_info

# `ompi_info --parsable --param mpi all --level 9` (Open MPI 4.1.4, Debian bookworm), and the
# same line of a build --with-cuda
DEBIAN = """\
mca:mpi:base:param:mpi_cuda_support:value:false
mca:mpi:base:param:mpi_built_with_cuda_support:value:false
mca:mpi:base:param:mpi_built_with_cuda_support:source:default
"""
WITH_CUDA = DEBIAN.replace("mpi_built_with_cuda_support:value:false",
                           "mpi_built_with_cuda_support:value:true")


def test_ompi_info_answers():
    no = from_ompi_info(DEBIAN)
    assert no == CudaAwareness(aware=False,
                               evidence="ompi_info: mpi_built_with_cuda_support:value:false")
    assert from_ompi_info(WITH_CUDA).aware is True
    assert from_ompi_info("mca:mpi:base:param:mpi_cuda_support:value:true\n") is None
    assert from_ompi_info("") is None


def test_refusal_is_about_cuda_awareness_and_names_the_evidence():
    text = from_ompi_info(DEBIAN).refusal()
    assert "not CUDA-aware" in text and "mpi_built_with_cuda_support:value:false" in text
    assert "\n" not in text and "GPU and torch sees none" not in text


class _Lib:
    """A library with the given functions (ctypes function objects stand in for symbols)."""

    def __init__(self, **functions):
        self.__dict__.update(functions)


def _c(fn, *argtypes):
    proto = ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)
    return proto(fn)


@pytest.mark.parametrize("value,aware", [(0, False), (1, True)])
def test_open_mpi_query(value, aware):
    answer = ask_library(_Lib(MPIX_Query_cuda_support=_c(lambda: value)))
    assert answer.aware is aware and answer.evidence == \
        f"MPIX_Query_cuda_support() returned {value}"


def test_mpich_query_and_none():
    def query(gpu_type, flag):
        flag[0] = 1 if gpu_type == 0 else 0
        return 0
    answer = ask_library(_Lib(MPIX_GPU_query_support=_c(query, ctypes.c_int,
                                                        ctypes.POINTER(ctypes.c_int))))
    assert answer.aware is True and "MPIX_GPU_SUPPORT_CUDA" in answer.evidence
    assert ask_library(_Lib()) is None
