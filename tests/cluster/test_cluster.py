"""scopeflow on a real Spark standalone cluster (master + 2 workers on 127.0.0.1), under spark-submit and
over Spark Connect: the same sink contents as local runs and as the independent references."""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import psutil
import pytest

import fast_jvm
import reference
from cluster.conftest import EXAMPLES, run_scopeflow
from conftest import read_output
from scopeflow.runtime import cluster as sfcluster
from scopeflow.api import run_file

pytestmark = pytest.mark.cluster
DATA = os.path.join(EXAMPLES, "data")
LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}


def cc_reference(edges_file: str) -> dict:
    return reference.connected_components(reference.read_csv_rows(edges_file, (int, int)))


def components(folder: str, name: str = "out/components") -> dict:
    rows = read_output(os.path.join(folder, name), (int, int))
    assert len(rows) == len(set(rows)), "duplicate rows"
    return dict(rows)


def write_path(folder: str, n: int) -> str:
    """A path 1 - 2 - ... - n in shuffled order: min-label propagation needs ~n rounds."""
    edges = [(i, i + 1) for i in range(1, n)]
    random.Random(20240601).shuffle(edges)
    path = os.path.join(folder, "data", f"path{n}.csv")
    with open(path, "w") as fh:
        fh.write("src,dst\n" + "".join(f"{a},{b}\n" for a, b in edges))
    return f"data/path{n}.csv"


QUICK_EXECUTORS = fast_jvm.executor_conf()  # the drivers' quick JIT options for executors too (speed only)


def on_cluster(spark_cluster, executor_python) -> list[str]:
    """`scopeflow run` options for the cluster, with executors running the Python that lacks scopeflow."""
    return ["--master", spark_cluster["master_url"], "--conf", f"spark.pyspark.python={executor_python}",
            *QUICK_EXECUTORS]


def test_cluster_is_up_on_loopback_only(spark_cluster):
    proc = subprocess.run([sys.executable, "-m", "scopeflow.cli", "cluster", "status", "--dir", spark_cluster["folder"],
                           "--json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["master_url"] == spark_cluster["master_url"] and info["master"]["alive"]
    assert [w["alive"] for w in info["workers"]] == [True, True]
    assert info["registered_workers"] == 2
    pids = [spark_cluster["master"]["pid"]] + [w["pid"] for w in spark_cluster["workers"]]
    listening = [(c.laddr.ip, c.laddr.port, c.pid) for c in psutil.net_connections("inet")
                 if c.status == psutil.CONN_LISTEN and c.pid in pids]
    assert len(listening) >= 3 * 2, listening  # RPC + web UI of the master and of each worker
    assert {ip for ip, _, _ in listening} <= LOOPBACK, listening
    assert 6066 not in {port for _, port, _ in listening}, "the master's REST server should be off"


@pytest.mark.smoke
def test_connected_components_on_cluster_equals_local(spark, spark_cluster, executor_python, flow_dir):
    folder = flow_dir("connected_components.flow")
    run_file(os.path.join(folder, "connected_components.flow"), spark=spark)  # local[*], in this process
    local = components(folder)
    os.rename(os.path.join(folder, "out"), os.path.join(folder, "out-local"))
    # (the second run: every round stores its feedback, computed from the round's new state)
    for defer in ("true", "false"):
        shutil.rmtree(os.path.join(folder, "out"), ignore_errors=True)
        run_scopeflow("run", "connected_components.flow", "--quiet", *on_cluster(spark_cluster, executor_python),
                      "--conf", f"spark.scopeflow.deferFeedback={defer}", "--report", "run.json", cwd=folder)
        got = components(folder)
        assert got == local == cc_reference(os.path.join(DATA, "graph.csv"))
        with open(os.path.join(folder, "run.json")) as fh:
            report = json.load(fh)
        assert report["status"] == "ok"
        assert any(r["counts"] for r in report["rounds"]), "per-operator counts are read on a cluster too"
        # made with scopeflow's JVM functions, their jar sent to the executors (runtime/jvmfunctions.py)
        assert [lp["checkpoints"] for lp in report["loops"]] == ["replicated, jvm functions"], report["loops"]
        # a round's body reads its reduce's new state (to compute the feedback it stores): stored by a job before
        # the rest, never computed twice on two executors (counters that count twice make a round count its
        # records again, in a job more); a round that leaves its feedback to the next round stores the state alone
        again = [r["jobs"] for r in report["rounds"] if "jobs" in r]
        assert not again, again
        rounds = report["rounds"][1:]
        assert [r["spark_jobs"] for r in rounds] == [1 if r.get("deferred") else 2 for r in rounds], rounds
        assert all(r.get("deferred") for r in rounds) == (defer == "true")
        # the report says so: every round ran as many jobs as its waves (round 0 stores its entry first: up to 3)
        assert all(r["spark_jobs"] == r["waves"] for r in report["rounds"]), report["rounds"]
        assert 2 <= report["rounds"][0]["waves"] <= 3, report["rounds"][0]


def test_nested_kcore_on_cluster_equals_local(spark, spark_cluster, executor_python, flow_dir):
    folder = flow_dir("kcore.flow")
    run_file(os.path.join(folder, "kcore.flow"), spark=spark)
    local = dict(read_output(os.path.join(folder, "out/cores"), (int, int)))
    os.rename(os.path.join(folder, "out"), os.path.join(folder, "out-local"))
    run_scopeflow("run", "kcore.flow", "--quiet", *on_cluster(spark_cluster, executor_python), cwd=folder)
    got = read_output(os.path.join(folder, "out/cores"), (int, int))
    assert len(got) == len(set(got))
    edges = reference.read_csv_rows(os.path.join(DATA, "kcore.csv"), (int, int))
    assert dict(got) == local == reference.core_numbers(edges)


def test_python_functions_run_on_workers_without_scopeflow(spark_cluster, executor_python, flow_dir):
    """Executors run a Python that has pyarrow but not scopeflow: the runtime ships itself (a zip added
    with addPyFile) and the user's functions travel by value."""
    folder = flow_dir("where_cc.flow", "where_udfs.py")
    run_scopeflow("run", "where_cc.flow", "--quiet", *on_cluster(spark_cluster, executor_python), cwd=folder)
    rows = read_output(os.path.join(folder, "out/where"), (int, int, str, int, str))
    want = {v: label + 1000 for v, label in cc_reference(os.path.join(DATA, "graph.csv")).items()}
    assert {r[0]: r[1] for r in rows} == want
    assert {r[2] for r in rows} == {executor_python}, "the table function ran in the executors' Python"
    origins = {r[4] for r in rows}
    assert all(".zip/scopeflow/__init__.py" in o and "scopeflow-" in o for o in origins), origins


@pytest.mark.smoke
def test_generated_script_runs_under_spark_submit(spark_cluster, executor_python, flow_dir):
    """`spark-submit --master spark://...` of the compiled script, unchanged. spark-submit's own --conf
    settings reach the runtime: here reliable round checkpoints in a file:// directory, and the sink is a
    file:// URI (on a multi-host cluster both would be on a shared filesystem)."""
    folder = flow_dir("connected_components.flow")
    with open(os.path.join(folder, "connected_components.flow")) as fh:
        text = fh.read()
    with open(os.path.join(folder, "uri.flow"), "w") as fh:
        fh.write(text.replace('csv("out/components"', f'csv("file://{folder}/uri-out/components"'))
    run_scopeflow("compile", "uri.flow", "-o", "job.py", cwd=folder)
    submit = os.path.join(sfcluster.spark_home(), "bin", "spark-submit")
    env = {**os.environ, "PYSPARK_DRIVER_PYTHON": sys.executable, "PYSPARK_PYTHON": executor_python,
           "SPARK_HOME": sfcluster.spark_home()}
    before = _apps(spark_cluster)  # earlier tests ran the same pipeline on this cluster
    proc = subprocess.run([submit, "--master", spark_cluster["master_url"], "--conf", "spark.ui.enabled=false", *QUICK_EXECUTORS,
                           "--conf", "spark.scopeflow.checkpoint=reliable",
                           "--conf", f"spark.scopeflow.checkpointDir=file://{folder}/rdd-ck",
                           "job.py", "--quiet", "--report", "run.json"], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert components(folder, "uri-out/components") == cc_reference(os.path.join(DATA, "graph.csv"))
    assert not [n for n in os.listdir(os.path.join(folder, "uri-out")) if "__staging" in n or "__previous" in n]
    with open(os.path.join(folder, "run.json")) as fh:
        assert json.load(fh)["status"] == "ok"
    assert os.path.isdir(os.path.join(folder, "rdd-ck")), "reliable checkpoints went to the given directory"
    new = {name for app, name in _apps(spark_cluster).items() if app not in before}
    assert new == {"scopeflow:connected_components"}, \
        "the job ran on the cluster (spark-submit's --master won over the local default)"


def _apps(spark_cluster) -> dict:
    """Id -> name of the applications the master has run. On a busy machine its web UI can take more
    than `master_json`'s default 3 s to answer: give it 60."""
    info = sfcluster.master_json(spark_cluster, timeout=60.0)
    assert info is not None, "the master's web UI did not answer"
    return {a["id"]: a.get("name") for a in info.get("completedapps", []) + info.get("activeapps", [])}


def test_executor_killed_mid_loop_the_run_completes(spark_cluster, executor_python, flow_dir):
    """SIGKILL one worker's executor JVM in the middle of a ~60-round loop. Round checkpoints are stored
    on two executors (replicated local checkpoints), so Spark recomputes what was lost and the run
    completes with the right components (plain localCheckpoint fails here: checkpoint block not found)."""
    folder = flow_dir("connected_components.flow")
    edges = write_path(folder, 60)
    cmd = [sys.executable, "-m", "scopeflow.cli", "run", "connected_components.flow", "--param",
           f"edges_path={edges}", "--report", "run.json", *on_cluster(spark_cluster, executor_python)]
    proc = subprocess.Popen(cmd, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killed, lines = [], []
    worker = spark_cluster["workers"][0]["pid"]
    for line in proc.stdout:
        lines.append(line)
        if not killed and " round " in line:
            rnd = int(line.split(" round ")[1].split()[0])
            if rnd >= 10:
                killed = sfcluster.executor_pids(worker)
                for pid in killed:
                    os.kill(pid, signal.SIGKILL)
    proc.wait(timeout=900)
    assert killed, "no executor was found to kill"
    assert proc.returncode == 0, "".join(lines[-40:])
    got = components(folder)
    assert got == cc_reference(os.path.join(folder, edges)) and len(got) == 60
    with open(os.path.join(folder, "run.json")) as fh:
        assert len(json.load(fh)["rounds"]) >= 59


def test_driver_killed_mid_loop_resumes_from_snapshot_on_cluster(spark_cluster, executor_python, flow_dir):
    """SIGKILL the driver (scopeflow and its JVM) mid-loop, then `--resume` on the cluster: same output."""
    folder = flow_dir("connected_components.flow")
    edges = write_path(folder, 36)
    args = ["run", "connected_components.flow", "--quiet", "--param", f"edges_path={edges}", "--checkpoint",
            f"file://{folder}/ck", "--snapshot-every", "8", *on_cluster(spark_cluster, executor_python)]
    proc = subprocess.Popen([sys.executable, "-m", "scopeflow.cli", *args], cwd=folder, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None and not _snapshots(folder, at_least=1):
        time.sleep(0.5)
    assert proc.poll() is None, f"the run ended before it could be killed: {proc.stderr.read()[-2000:]}"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not os.path.exists(os.path.join(folder, "out", "components")), "the sink was written before the kill"
    resumed = run_scopeflow(*args, "--resume", "--report", "run.json", cwd=folder)
    got = components(folder)
    assert got == cc_reference(os.path.join(folder, edges)) and len(got) == 36
    with open(os.path.join(folder, "run.json")) as fh:
        report = json.load(fh)
    assert len(report["rounds"]) < 35, f"the resumed run started from round 0\n{resumed.stderr[-2000:]}"


def _snapshots(folder: str, at_least: int) -> bool:
    found = 0
    for root, _, files in os.walk(os.path.join(folder, "ck")):
        found += "manifest.json" in files
    return found >= at_least


# ---- Spark Connect ---------------------------------------------------------------------------


@pytest.mark.smoke
def test_connected_components_over_spark_connect(connect_server, flow_dir):
    folder = flow_dir("connected_components.flow")
    proc = run_scopeflow("run", "connected_components.flow", "--quiet", "--remote", connect_server["url"],
                         "--report", "run.json", cwd=folder)
    assert components(folder) == cc_reference(os.path.join(DATA, "graph.csv"))
    assert "per-operator record counts are not available over Spark Connect" in proc.stderr
    with open(os.path.join(folder, "run.json")) as fh:
        report = json.load(fh)
    assert report["status"] == "ok" and len(report["rounds"]) > 8  # past a Parquet statistics reset


def test_python_functions_over_spark_connect_without_scopeflow_on_the_server(connect_server, executor_python,
                                                                              flow_dir):
    folder = flow_dir("where_cc.flow", "where_udfs.py")
    run_scopeflow("run", "where_cc.flow", "--quiet", "--remote", connect_server["url"], cwd=folder)
    rows = read_output(os.path.join(folder, "out/where"), (int, int, str, int, str))
    want = {v: label + 1000 for v, label in cc_reference(os.path.join(DATA, "graph.csv")).items()}
    assert {r[0]: r[1] for r in rows} == want
    assert {r[2] for r in rows} == {executor_python}
    assert all(".zip/scopeflow/__init__.py" in r[4] for r in rows), {r[4] for r in rows}


def test_unsupported_over_connect_fails_clearly(connect_server, flow_dir):
    folder = flow_dir("connected_components.flow")
    with open(os.path.join(folder, "connected_components.flow")) as fh:
        text = fh.read()
    with open(os.path.join(folder, "hdfs.flow"), "w") as fh:
        fh.write(text.replace('csv("out/components"', 'csv("hdfs://127.0.0.1:1/out/components"'))
    proc = subprocess.run([sys.executable, "-m", "scopeflow.cli", "run", "hdfs.flow", "--quiet", "--remote",
                           connect_server["url"]], cwd=folder, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 4
    assert "not supported over Spark Connect" in proc.stderr, proc.stderr[-3000:]
    assert "hdfs://" in proc.stderr
    os.makedirs(os.path.join(folder, "incoming"))
    with open(os.path.join(folder, "stream.flow"), "w") as fh:
        fh.write(text.replace("read csv(edges_path, header = true)", 'stream files("incoming", format = "csv")'))
    proc = subprocess.run([sys.executable, "-m", "scopeflow.cli", "run", "stream.flow", "--quiet", "--trigger",
                           "available-now", "--remote", connect_server["url"]], cwd=folder, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 4 and "streaming pipeline" in proc.stderr and "not supported over Spark Connect" in \
        proc.stderr, proc.stderr[-3000:]


def test_streaming_pipeline_on_cluster_equals_networkx_after_each_wave(spark_cluster, executor_python, flow_dir):
    """A streaming pipeline on the standalone cluster: edge files in two waves, `--trigger available-now`
    after each; the sink equals networkx over the files so far (epochs on the driver, reads on the workers)."""
    folder = flow_dir("connected_components.flow")
    with open(os.path.join(folder, "connected_components.flow")) as fh:
        text = fh.read()
    with open(os.path.join(folder, "stream.flow"), "w") as fh:
        fh.write(text.replace("read csv(edges_path, header = true)",
                              'stream files("incoming", format = "csv", header = true, max_files_per_epoch = 1)'))
    os.makedirs(os.path.join(folder, "incoming"))
    edges = reference.read_csv_rows(os.path.join(DATA, "graph.csv"), (int, int))
    half = len(edges) // 2
    for wave, part in enumerate((edges[:half], edges[half:])):
        staged = os.path.join(folder, f".wave{wave}.csv")
        with open(staged, "w") as fh:
            fh.write("src,dst\n" + "".join(f"{a},{b}\n" for a, b in part))
        os.replace(staged, os.path.join(folder, "incoming", f"wave{wave}.csv"))
        run_scopeflow("run", "stream.flow", "--quiet", "--trigger", "available-now", "--report", "run.json",
                      *on_cluster(spark_cluster, executor_python), cwd=folder)
        assert components(folder) == reference.connected_components(edges[:half] if wave == 0 else edges)
        with open(os.path.join(folder, "run.json")) as fh:
            report = json.load(fh)
        assert report["status"] == "ok" and [e["epoch"] for e in report["epochs"]] == [wave]


def test_cluster_cli_up_status_down(tmp_path):
    """`scopeflow cluster up|status|down` with one worker: free ports, pid files, stopped by PID."""
    folder = str(tmp_path / "c")
    cli = [sys.executable, "-m", "scopeflow.cli", "cluster"]
    up = subprocess.run([*cli, "up", "--dir", folder, "--workers", "1", "--memory", "1g"], capture_output=True,
                        text=True, timeout=300)
    try:
        assert up.returncode == 0, up.stderr
        assert "spark://127.0.0.1:" in up.stdout
        assert sorted(n for n in os.listdir(folder) if n.endswith(".pid")) == ["master.pid", "worker-1.pid"]
        status = subprocess.run([*cli, "status", "--dir", folder], capture_output=True, text=True, timeout=60)
        assert status.returncode == 0 and "registered workers: 1" in status.stdout, status.stdout
        again = subprocess.run([*cli, "up", "--dir", folder], capture_output=True, text=True, timeout=60)
        assert again.returncode == 4 and "already running" in again.stderr
    finally:
        pids = [int(open(os.path.join(folder, n)).read()) for n in os.listdir(folder) if n.endswith(".pid")] \
            if os.path.isdir(folder) else []
        down = subprocess.run([*cli, "down", "--dir", folder], capture_output=True, text=True, timeout=120)
    assert down.returncode == 0 and "stopped" in down.stdout
    assert pids and not any(sfcluster.alive(p) for p in pids)
    status = subprocess.run([*cli, "status", "--dir", folder], capture_output=True, text=True, timeout=60)
    assert status.returncode == 1 and "no cluster running" in status.stdout
