"""`fabbench render k8s`: exact output of a representative MPIJob and Indexed Job, the Job/MPIJob
choice, one source of truth for the fabric environment (the chart's files/fabrics.yaml equals the
profiles), the image every rank is told of, quoting of container arguments, bad input."""

from __future__ import annotations

import pytest
import yaml

from conftest import REPO, cli, fabbench
from fabbench import __version__
from fabbench.comm.primitives import PRIMITIVES
from fabbench.config import RunConfig
from fabbench.fabrics.profile import BUILTIN_DIR
from fabbench.render import Benchmark, K8sJob, chart, render_k8s
from fabbench.sysinfo.inventory import image_reference

CHART = REPO / "charts/fabbench"
DIGEST = "sha256:" + "0123456789abcdef" * 4
PINNED = f"registry.example/fabbench@{DIGEST}"

ETHERNET_MPI = """\
# Rendered by fabbench: `fabbench render k8s`, ethernet fabric, mpi.
# The MPI operator (kubeflow.org/v2beta1) starts the workers (the image's sshd, as root: the
# operator's ssh keys are at /root/.ssh), writes /etc/mpi/hostfile and, once every worker is
# ready, runs the launcher's mpirun over it; rank 0 (on the first worker) writes the results.
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata:
  name: fabbench
  labels:
    app.kubernetes.io/name: "fabbench"
    app.kubernetes.io/instance: "fabbench"
    app.kubernetes.io/version: "0.1.0"
    app.kubernetes.io/component: "benchmark"
    app.kubernetes.io/managed-by: "fabbench-render"
spec:
  slotsPerWorker: 1
  mpiImplementation: OpenMPI
  sshAuthMountPath: /root/.ssh
  launcherCreationPolicy: WaitForWorkersReady
  runPolicy:
    cleanPodPolicy: Running
    backoffLimit: 0
    # the launcher Job's deadline (mpi-operator v0.8.0 gives it the launcher only, which starts
    # once every worker is ready: workers that cannot be created leave the MPIJob waiting,
    # its events saying why; docs/security.md)
    activeDeadlineSeconds: 3600
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      restartPolicy: Never
      template:
        metadata:
          labels:
            app.kubernetes.io/name: "fabbench"
            app.kubernetes.io/instance: "fabbench"
            app.kubernetes.io/version: "0.1.0"
            app.kubernetes.io/component: "benchmark"
            app.kubernetes.io/managed-by: "fabbench-render"
        spec:
          automountServiceAccountToken: false
          securityContext:  # root: sshd, and the operator's keys at /root/.ssh
            runAsUser: 0
            runAsGroup: 0
            seccompProfile:
              type: RuntimeDefault
          containers:
            - name: launcher
              image: "registry.example/fabbench@sha256:0123456789abcdef0123456789abcdef0123456789ab\
cdef0123456789abcdef"
              imagePullPolicy: IfNotPresent
              command: ["mpirun"]
              args:
                - "--hostfile"
                - "/etc/mpi/hostfile"
                - "-np"
                - "2"
                - "--bind-to"
                - "none"
                - "--mca"
                - "btl"
                - "self,tcp"
                - "--mca"
                - "btl_tcp_if_include"
                - "eth1"
                - "--mca"
                - "pml"
                - "ob1"
                - "-x"
                - "FABBENCH_IMAGE_REF"
                - "-x"
                - "FABBENCH_RESULTS_TO_LOG"
                - "fabbench"
                - "run"
                - "--fabric"
                - "ethernet"
                - "--primitive"
                - "mpi"
                - "--device"
                - "cpu"
                - "--iface"
                - "eth1"
                - "--sizes"
                - "8:1M"
                - "--out"
                - "/results/fabbench-collectives.jsonl"
              env:
                - name: OMPI_ALLOW_RUN_AS_ROOT
                  value: "1"
                - name: OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
                  value: "1"
                - name: FABBENCH_IMAGE_REF
                  value: "registry.example/fabbench@sha256:0123456789abcdef0123456789abcdef01234567\
89abcdef0123456789abcdef"
                - name: FABBENCH_RESULTS_TO_LOG
                  value: "1"
                - name: OMPI_MCA_btl
                  value: "self,tcp"
                - name: OMPI_MCA_btl_tcp_if_include
                  value: "eth1"
                - name: OMPI_MCA_pml
                  value: "ob1"
              securityContext:
                allowPrivilegeEscalation: false
              resources:
                requests:
                  cpu: "100m"
                  memory: "256Mi"
                limits:
                  memory: "2Gi"
    Worker:
      replicas: 2
      restartPolicy: Never
      template:
        metadata:
          labels:
            app.kubernetes.io/name: "fabbench"
            app.kubernetes.io/instance: "fabbench"
            app.kubernetes.io/version: "0.1.0"
            app.kubernetes.io/component: "benchmark"
            app.kubernetes.io/managed-by: "fabbench-render"
            fabbench.dev/role: "ranks"
        spec:
          affinity:
            podAntiAffinity:
              requiredDuringSchedulingIgnoredDuringExecution:
                - topologyKey: kubernetes.io/hostname
                  labelSelector:
                    matchLabels:
                      app.kubernetes.io/name: "fabbench"
                      app.kubernetes.io/instance: "fabbench"
                      fabbench.dev/role: "ranks"
          securityContext:  # root: sshd, and the operator's keys at /root/.ssh
            runAsUser: 0
            runAsGroup: 0
            seccompProfile:
              type: RuntimeDefault
          automountServiceAccountToken: false
          volumes:
            - name: dshm
              emptyDir:
                medium: Memory
                sizeLimit: "1Gi"
            - name: tmp
              emptyDir: {}
            - name: results
              emptyDir: {}
          containers:
            - name: worker
              image: "registry.example/fabbench@sha256:0123456789abcdef0123456789abcdef0123456789ab\
cdef0123456789abcdef"
              imagePullPolicy: IfNotPresent
              # host keys made for this pod, then sshd; its sessions (mpirun's orted and the
              # ranks) get the container's variables, FABBENCH_NODE_NAME among them
              command: ["/usr/local/sbin/fabbench-sshd", "serve"]
              env:
                - name: FABBENCH_NODE_NAME
                  valueFrom:
                    fieldRef:
                      fieldPath: spec.nodeName
              securityContext:
                allowPrivilegeEscalation: false
              resources:
                requests:
                  cpu: "1"
                  memory: "2Gi"
                limits:
                  memory: "16Gi"
              volumeMounts:
                - name: dshm
                  mountPath: /dev/shm
                - name: tmp
                  mountPath: /tmp
                - name: results
                  mountPath: "/results"

"""


def test_exact_output_ethernet_mpi_pinned_by_digest():
    """An MPIJob: the image as given on launcher and workers, the launcher's environment (the
    image's reference beside the profile's) and mpirun passing it to every rank (-x)."""
    p = fabbench("render", "k8s", "--nodes", "2", "--fabric", "ethernet", "--primitive", "mpi",
                 "--image", PINNED, "--iface", "eth1", "--sizes", "8:1M", timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout == ETHERNET_MPI


INFINIBAND_NCCL_GPUS = """\
# Rendered by fabbench: `fabbench render k8s`, infiniband fabric, nccl.
# The fabric's devices (/dev/infiniband) come from the device plugin's resource rdma/hca_shared_dev\
ices_a.
# A headless Service names the pods <name>-<index>.<name>; index 0 hosts the rendezvous.
apiVersion: v1
kind: Service
metadata:
  name: fabbench
  labels:
    app.kubernetes.io/name: "fabbench"
    app.kubernetes.io/instance: "fabbench"
    app.kubernetes.io/version: "0.1.0"
    app.kubernetes.io/component: "benchmark"
    app.kubernetes.io/managed-by: "fabbench-render"
spec:
  clusterIP: None
  publishNotReadyAddresses: true
  selector:
    app.kubernetes.io/name: "fabbench"
    app.kubernetes.io/instance: "fabbench"
  ports:
    - name: rendezvous
      port: 29500
---
apiVersion: batch/v1
kind: Job
metadata:
  name: fabbench
  labels:
    app.kubernetes.io/name: "fabbench"
    app.kubernetes.io/instance: "fabbench"
    app.kubernetes.io/version: "0.1.0"
    app.kubernetes.io/component: "benchmark"
    app.kubernetes.io/managed-by: "fabbench-render"
spec:
  completionMode: Indexed
  completions: 2
  parallelism: 2
  backoffLimit: 0
  # pods that cannot be created (Pod Security admission, a quota) or scheduled end the Job here
  activeDeadlineSeconds: 3600
  template:
    metadata:
      labels:
        app.kubernetes.io/name: "fabbench"
        app.kubernetes.io/instance: "fabbench"
        app.kubernetes.io/version: "0.1.0"
        app.kubernetes.io/component: "benchmark"
        app.kubernetes.io/managed-by: "fabbench-render"
        fabbench.dev/role: "ranks"
    spec:
      subdomain: fabbench
      restartPolicy: Never
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - topologyKey: kubernetes.io/hostname
              labelSelector:
                matchLabels:
                  app.kubernetes.io/name: "fabbench"
                  app.kubernetes.io/instance: "fabbench"
                  fabbench.dev/role: "ranks"
      securityContext:
        runAsNonRoot: true
        runAsUser: 1000
        runAsGroup: 1000
        fsGroup: 1000
        seccompProfile:
          type: RuntimeDefault
      automountServiceAccountToken: false
      volumes:
        - name: dshm
          emptyDir:
            medium: Memory
            sizeLimit: "1Gi"
        - name: tmp
          emptyDir: {}
        - name: results
          emptyDir: {}
      containers:
        - name: fabbench
          image: "fabbench:0.1.0-cuda"
          imagePullPolicy: IfNotPresent
          command: ["torchrun"]
          args:
            - "--no-python"
            - "--nnodes=2"
            - "--nproc-per-node=4"
            - "--node-rank=$(FABBENCH_NODE_RANK)"
            - "--master-addr=$(MASTER_ADDR)"
            - "--master-port=$(MASTER_PORT)"
            - "fabbench"
            - "run"
            - "--fabric"
            - "infiniband"
            - "--primitive"
            - "nccl"
            - "--device"
            - "cuda"
            - "--rdma-device"
            - "mlx5_0"
            - "--sizes"
            - "8:1M"
            - "--out"
            - "/results/fabbench-collectives.jsonl"
          env:
            - name: FABBENCH_NODE_RANK
              valueFrom:
                fieldRef:
                  fieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']"
            - name: FABBENCH_NODE_NAME
              valueFrom:
                fieldRef:
                  fieldPath: spec.nodeName
            - name: FABBENCH_WORLD_SIZE
              value: "8"
            - name: MASTER_ADDR
              value: "fabbench-0.fabbench"
            - name: MASTER_PORT
              value: "29500"
            - name: FABBENCH_IMAGE_REF
              value: "fabbench:0.1.0-cuda"
            - name: FABBENCH_RESULTS_TO_LOG
              value: "1"
            - name: NCCL_IB_HCA
              value: "mlx5_0"
            - name: NCCL_NET
              value: "IB"
            - name: HOME
              value: "/tmp"
            - name: TMPDIR
              value: "/tmp"
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities:
              drop: ["ALL"]
              add: ["IPC_LOCK"]
          resources:
            requests:
              cpu: "1"
              memory: "2Gi"
            limits:
              memory: "16Gi"
              nvidia.com/gpu: 4
              rdma/hca_shared_devices_a: 1
          volumeMounts:
            - name: dshm
              mountPath: /dev/shm
            - name: tmp
              mountPath: /tmp
            - name: results
              mountPath: "/results"

"""


def test_exact_output_infiniband_nccl_on_gpus():
    """An Indexed Job and its headless Service: torchrun for the pod's four GPUs, the default
    image in its cuda flavour, told to every rank with the profile's environment."""
    p = fabbench("render", "k8s", "--nodes", "2", "--gpus-per-node", "4", "--fabric",
                 "infiniband", "--primitive", "nccl", "--rdma-resource",
                 "rdma/hca_shared_devices_a", "--rdma-device", "mlx5_0", "--sizes", "8:1M",
                 timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout == INFINIBAND_NCCL_GPUS


@pytest.mark.parametrize("path", sorted(chart.FILES))
def test_chart_data_files_are_generated_from_the_python_sources(path):
    assert (CHART / path).read_text() == chart.generated(path), (
        f"charts/fabbench/{path} is stale: python -m fabbench.render.chart charts/fabbench")


@pytest.mark.parametrize("path", sorted(chart.SPLICED))
def test_chart_values_and_schema_say_of_run_options_what_the_config_declares(path):
    """values.yaml's and values.schema.json's run options (defaults, documentation, types,
    ranges, choices) are generated from fabbench.config: the chart measures what `fabbench run`
    and `fabbench render` measure when a value is not given."""
    text = (CHART / path).read_text()
    assert chart.SPLICED[path](text) == text, (
        f"charts/fabbench/{path} is stale: python -m fabbench.render.chart charts/fabbench")


def test_chart_defaults_are_run_defaults():
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["benchmark"]["budget"] == RunConfig().collectives.budget_s
    assert values["masterPort"] == K8sJob.__dataclass_fields__["master_port"].default


def test_chart_schema_offers_the_profiles_and_primitives_python_knows():
    import json

    props = json.loads((CHART / "values.schema.json").read_text())["properties"]
    assert props["fabric"]["enum"] == sorted(p.stem for p in BUILTIN_DIR.glob("*.toml"))
    assert props["primitive"]["enum"] == ["", *PRIMITIVES]


def job(**kw) -> dict[str, dict]:
    fields = {"fabric": "ethernet", "primitive": "gloo", "device": "cpu", **kw.pop("bench", {})}
    extra = fields.pop("extra_args", ())
    bench = Benchmark(extra_args=extra, config=RunConfig.from_argv(
        [a for key, value in fields.items() for a in ("--" + key.replace("_", "-"), value)]))
    return {d["kind"]: d for d in yaml.safe_load_all(render_k8s(K8sJob(benchmark=bench, **kw)))
            if d}


def test_torch_primitives_get_an_indexed_job_and_headless_service():
    docs = job(nodes=3)
    assert set(docs) == {"Job", "Service"}
    spec = docs["Job"]["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == 3
    assert docs["Service"]["spec"]["clusterIP"] == "None"
    env = {e["name"]: e.get("value") for e in spec["template"]["spec"]["containers"][0]["env"]}
    assert env["MASTER_ADDR"] == "fabbench-0.fabbench" and env["FABBENCH_WORLD_SIZE"] == "3"


def test_gpus_start_ranks_per_pod_with_torchrun():
    docs = job(nodes=2, gpus_per_node=4, bench={"primitive": "nccl", "device": "cuda"})
    container = docs["Job"]["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["torchrun"] and "--nproc-per-node=4" in container["args"]
    assert container["resources"]["limits"] == {"memory": "16Gi", "nvidia.com/gpu": 4}


def test_mpi_gets_an_mpijob_with_the_profile_on_mpirun():
    docs = job(nodes=2, bench={"primitive": "mpi", "iface": "eth1"})
    assert set(docs) == {"MPIJob"}
    launcher = docs["MPIJob"]["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    args = launcher["containers"][0]["args"]
    assert args[:2] == ["--hostfile", "/etc/mpi/hostfile"]
    at = args.index("btl_tcp_if_include")
    assert args[at - 1:at + 2] == ["--mca", "btl_tcp_if_include", "eth1"]


def test_dollar_is_escaped_for_kubernetes():
    docs = job(bench={"extra_args": ("$(HOME)",)})
    args = docs["Job"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "$$(HOME)" in args


def containers(manifests: dict[str, dict]) -> dict[str, dict]:
    """Every container of the manifests' pods, by name (fabbench; launcher and worker)."""
    spec = manifests.get("Job", manifests.get("MPIJob"))["spec"]
    pods = [r["template"]["spec"] for r in spec["mpiReplicaSpecs"].values()] \
        if "mpiReplicaSpecs" in spec else [spec["template"]["spec"]]
    return {c["name"]: c for pod in pods for c in pod["containers"]}


def env_of(container: dict) -> dict[str, str | None]:
    return {e["name"]: e.get("value") for e in container.get("env", [])}


@pytest.mark.parametrize("primitive,starts", [("gloo", "fabbench"), ("mpi", "launcher")])
def test_every_rank_is_told_the_image_it_runs(primitive, starts):
    """--image, as given, is every pod's image and the ranks' FABBENCH_IMAGE_REF: in the Job's
    pods, and in the MPIJob's launcher, whose mpirun passes it to the ranks on the workers (-x).
    A run records the reference and the digest it names (sysinfo.inventory)."""
    p = fabbench("render", "k8s", "--primitive", primitive, "--image", PINNED, timeout=60)
    assert p.returncode == 0, p.stderr
    found = containers({d["kind"]: d for d in yaml.safe_load_all(p.stdout) if d})
    assert {c["image"] for c in found.values()} == {PINNED}
    env = env_of(found[starts])
    assert env["FABBENCH_IMAGE_REF"] == PINNED
    assert image_reference(None, env) == {
        "ref": PINNED, "ref_source": "FABBENCH_IMAGE_REF (set by whoever started the container)",
        "digest": DIGEST}
    if primitive == "mpi":
        args = found["launcher"]["args"]
        assert "FABBENCH_IMAGE_REF" in [args[i + 1] for i, a in enumerate(args) if a == "-x"]


@pytest.mark.parametrize("args,flavour", [
    ([], "cpu"), (["--primitive", "mpi"], "cpu"),
    (["--gpus-per-node", "4"], "cuda"),  # nccl, the default primitive with GPUs
    (["--gpus-per-node", "2", "--primitive", "mpi"], "cuda")])
def test_the_default_image_is_the_flavour_the_job_needs(capsys, args, flavour):
    """Without --image: this version's image in its cuda flavour when the job asks for GPUs,
    else its cpu flavour (the tags .ci/publish.sh pushes), told to the ranks as well."""
    code, out, err = cli(capsys, "render", "k8s", *args)
    assert code == 0, err
    found = containers({d["kind"]: d for d in yaml.safe_load_all(out) if d})
    want = f"fabbench:{__version__}-{flavour}"
    assert {c["image"] for c in found.values()} == {want}
    assert {env_of(c).get("FABBENCH_IMAGE_REF") for c in found.values()} - {None} == {want}


def pods(manifests: dict[str, dict]) -> list[dict]:
    spec = manifests.get("Job", manifests.get("MPIJob"))["spec"]
    return [r["template"]["spec"] for r in spec["mpiReplicaSpecs"].values()] \
        if "mpiReplicaSpecs" in spec else [spec["template"]["spec"]]


@pytest.mark.parametrize("bench", [{}, {"primitive": "mpi"}])
def test_the_pods_that_run_ranks_are_told_their_kubernetes_node(bench):
    """FABBENCH_NODE_NAME from spec.nodeName, in the Job's pods and the MPIJob's workers (whose
    sshd hands it to the ranks' sessions): the records name hosts by it (launch.world)."""
    found = containers(job(bench=bench))
    ranks = found.get("fabbench", found.get("worker"))
    node = [e for e in ranks["env"] if e["name"] == "FABBENCH_NODE_NAME"]
    assert node == [{"name": "FABBENCH_NODE_NAME",
                     "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]


@pytest.mark.parametrize("volume,where,to_log", [
    ({}, {"emptyDir": {}}, "1"),
    ({"results_claim": "pvc1"}, {"persistentVolumeClaim": {"claimName": "pvc1"}}, None),
    ({"results_host_path": "/srv/fabbench"},
     {"hostPath": {"path": "/srv/fabbench", "type": "DirectoryOrCreate"}}, None)])
@pytest.mark.parametrize("bench,starts", [({}, "fabbench"), ({"primitive": "mpi"}, "launcher")])
def test_results_on_an_emptydir_also_go_to_rank_0s_log(volume, where, to_log, bench, starts):
    """FABBENCH_RESULTS_TO_LOG=1 only where the file is gone with the pod; an MPIJob's
    launcher passes it to the ranks (-x)."""
    manifests = job(bench=bench, **volume)
    volumes = [v for p in pods(manifests) for v in p.get("volumes", []) if v["name"] == "results"]
    assert volumes and all({k: v for k, v in vol.items() if k != "name"} == where
                           for vol in volumes)
    launcher = containers(manifests)[starts]
    assert env_of(launcher).get("FABBENCH_RESULTS_TO_LOG") == to_log
    if starts == "launcher":
        args = launcher["args"]
        exported = [args[i + 1] for i, a in enumerate(args) if a == "-x"]
        assert ("FABBENCH_RESULTS_TO_LOG" in exported) == (to_log is not None)


def test_the_mpijob_runs_the_images_sshd_as_root_for_the_operators_keys():
    """The workers start containers/sshd.sh's fabbench-sshd (host keys made in the pod), both
    pods run as root (the operator mounts its keys at sshAuthMountPath, /root/.ssh), and the
    launcher waits for every worker to be ready."""
    spec = job(bench={"primitive": "mpi"})["MPIJob"]["spec"]
    assert spec["sshAuthMountPath"] == "/root/.ssh"
    assert spec["launcherCreationPolicy"] == "WaitForWorkersReady"
    for role in ("Launcher", "Worker"):
        pod = spec["mpiReplicaSpecs"][role]["template"]["spec"]
        assert pod["securityContext"] == {"runAsUser": 0, "runAsGroup": 0,
                                          "seccompProfile": {"type": "RuntimeDefault"}}
    worker = spec["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert worker["command"] == ["/usr/local/sbin/fabbench-sshd", "serve"]
    script = (REPO / "containers" / "sshd.sh").read_text()
    assert "install -m 0755 \"${BASH_SOURCE[0]}\" /usr/local/sbin/fabbench-sshd" in script


def test_an_image_the_user_names_is_never_changed():
    for gpus, bench in ((4, {"primitive": "nccl", "device": "cuda"}), (0, {})):
        found = containers(job(gpus_per_node=gpus, image="site/fabbench:latest", bench=bench))
        assert [c["image"] for c in found.values()] == ["site/fabbench:latest"]
        assert env_of(found["fabbench"])["FABBENCH_IMAGE_REF"] == "site/fabbench:latest"


def test_the_chart_app_version_is_the_package_version():
    """Both default images are named from it: fabbench:<version>-<flavour>."""
    assert yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"] == __version__


@pytest.mark.parametrize("args,message", [
    (["--image", "a b"], "image reference"),
    (["--name", "UPPER"], "DNS-1123"),
    (["--name", "x" * 53], "DNS-1123"),
    (["--rdma-resource", "rdma/a b"], "resource name"),
    (["--node-selector", "novalue"], "KEY=VALUE"),
    (["--results-path", "relative"], "absolute"),
    (["--results-host-path", "var/x"], "--results-host-path must be a normalised absolute path"),
    (["--results-claim", "pvc", "--results-host-path", "/srv/x"], "give one"),
    (["--primitive", "horovod", "--extra-arg", "x", "--master-port", "80"], "--master-port"),
    # on a login node without GPUs: the advice is what to pass, not "a GPU" this host lacks
    (["--primitive", "nccl"], "pass --gpus-per-node N"),
])
def test_bad_input_is_one_line_exit_2(capsys, args, message):
    # in this process (a second each as a subprocess); the real process refuses in
    # test_the_check_before_the_job_refuses_an_mpijob_and_a_bad_floors_file
    code, out, err = cli(capsys, "render", "k8s", *args)
    assert code == 2 and out == ""
    assert message in err and err.count("\n") == 1, err


PREFLIGHT_FLOORS = ('format = "fabbench-floors/1"\nname = "before the job"\n[[rule]]\n'
                    'id = "allreduce-bw"\nsource = "site policy"\nworkload = "collectives"\n'
                    'op = "allreduce"\nsize = "16M"\nmetric = "busbw"\nat_least = 0.05\n'
                    'unit = "GB/s"\n')


def test_a_check_before_the_job_is_an_init_container_judging_a_short_allreduce():
    docs = job(nodes=3, preflight=PREFLIGHT_FLOORS, bench={"workload": "train", "steps": "7",
                                                          "iface": "eth1"})
    assert set(docs) == {"ConfigMap", "Job", "Service"}
    assert docs["ConfigMap"]["data"] == {"preflight.toml": PREFLIGHT_FLOORS}
    pod = docs["Job"]["spec"]["template"]["spec"]
    (check,) = pod["initContainers"]
    (main,) = pod["containers"]
    assert check["command"][:2] == ["/bin/sh", "-c"] and "$$@" in check["command"][2]
    assert check["env"] == main["env"] and check["image"] == main["image"]
    # the job's fabric, primitive and interface; a short allreduce, not the job's workload
    assert check["args"] == ["fabbench", "run", "--fabric", "ethernet", "--primitive", "gloo",
                             "--device", "cpu", "--timeout", "60", "--iface", "eth1", "--ops",
                             "allreduce", "--sizes", "16M", "--budget", "0.5", "--out",
                             "/results/fabbench-preflight.jsonl", "--floors",
                             "/etc/fabbench/preflight.toml"]
    assert {"name": "preflight", "mountPath": "/etc/fabbench", "readOnly": True} in \
        check["volumeMounts"]
    assert {"name": "preflight", "configMap": {"name": "fabbench-preflight"}} in pod["volumes"]
    assert "--steps" in main["args"] and "--floors" not in main["args"]
    assert "initContainers" not in job(nodes=3)["Job"]["spec"]["template"]["spec"]


def test_the_check_before_the_job_refuses_an_mpijob_and_a_bad_floors_file(tmp_path):
    floors = tmp_path / "site.toml"
    floors.write_text(PREFLIGHT_FLOORS)
    p = fabbench("render", "k8s", "--primitive", "mpi", "--preflight", str(floors), timeout=60)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == ("fabbench: error: --preflight runs in the Indexed Job's pods: mpi runs "
                        "as an MPIJob; use --primitive gloo (or nccl with --gpus-per-node)\n")
    floors.write_text(PREFLIGHT_FLOORS.replace("at_least = 0.05", "at_least = -1"))
    p = fabbench("render", "k8s", "--primitive", "gloo", "--preflight", str(floors), timeout=60)
    assert p.returncode == 2 and p.stdout == "" and p.stderr.count("\n") == 1, p.stderr


def test_the_check_before_the_job_runs_the_charts_defaults():
    from fabbench.render.context import PREFLIGHT

    chart_values = yaml.safe_load((CHART / "values.yaml").read_text())["preflight"]
    assert chart_values["enabled"] is False
    assert {k: chart_values[k] for k in ("sizes", "budget", "timeout")} == {
        k: PREFLIGHT[k] for k in ("sizes", "budget", "timeout")}


def test_an_image_no_registry_could_serve_is_refused_in_one_line(tmp_path):
    """The digest a user mistyped: one line, exit 2, nothing written (issue 45)."""
    p = fabbench("render", "k8s", "--nodes", "2", "--fabric", "ethernet", "--primitive", "mpi",
                 "--image", "x@sha256:zzz", timeout=60, cwd=tmp_path)
    assert p.returncode == 2 and p.stdout == "", p
    assert p.stderr.count("\n") == 1 and "--image must be an image reference" in p.stderr
    assert list(tmp_path.iterdir()) == []


def test_image_references_are_taken_as_registries_parse_them():
    from fabbench.errors import UsageError
    from fabbench.render.names import image_reference

    for ref in ("fabbench", "localhost/fabbench:cpu", "ghcr.io/acme/fabbench:0.1.0-cpu",
                "198.18.0.254:5000/fabbench@sha256:" + "0123456789abcdef" * 4,
                "Registry.Example.org:443/a/b_c/d-e:v1.2", "x@sha512:" + "a" * 128):
        assert image_reference(ref, "--image") == ref
    for ref in ("x@sha256:zzz", "repo@sha256:" + "a" * 63, "repo@sha256:" + "A" * 64,
                "Repo/fabbench", "fabbench:", "a b", "-x", ""):
        with pytest.raises(UsageError, match="--image must be an image reference"):
            image_reference(ref, "--image")
