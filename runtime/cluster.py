"""A local Spark standalone cluster (and Spark Connect server) for trying scopeflow beyond `local[*]`.

`scopeflow cluster up|down|status` call `start`, `stop` and `status`. Everything
runs from the pip `pyspark` distribution (`bin/spark-class`, `bin/spark-submit`):
one master, N workers and optionally a Spark Connect server, all bound to
127.0.0.1 on free ports (never the defaults 7077/8080/15002, which may be taken
on a shared machine). Logs, work dirs and pid files live under one folder
(default `.scopeflow/cluster/`); `down` stops exactly the recorded PIDs (and the
executor JVMs they started), never processes found by name.

The same functions start the session-scoped cluster of the `cluster` tests.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from typing import Optional

from scopeflow.runtime.errors import RuntimeFailure

DEFAULT_DIR = os.path.join(".scopeflow", "cluster")
STATE_FILE = "cluster.json"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
LOOPBACK = "127.0.0.1"


# ---- the pyspark distribution --------------------------------------------------------------


def spark_home() -> str:
    """SPARK_HOME of the pip pyspark package (it ships bin/, sbin/ and jars/)."""
    import pyspark

    return os.path.dirname(os.path.abspath(pyspark.__file__))


def connect_jar() -> Optional[str]:
    """The Spark Connect server jar of the distribution, if it ships one."""
    jars = os.path.join(spark_home(), "jars")
    for name in sorted(os.listdir(jars)) if os.path.isdir(jars) else []:
        if name.startswith("spark-connect_") and name.endswith(".jar"):
            return os.path.join(jars, name)
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def _loopback_env(extra: Optional[dict] = None) -> dict:
    env = dict(os.environ)
    env.update({
        "SPARK_HOME": spark_home(),
        "SPARK_LOCAL_IP": LOOPBACK,  # RPC endpoints and web UIs bind here, not 0.0.0.0
        "SPARK_LOCAL_HOSTNAME": LOOPBACK,
        "SPARK_MASTER_HOST": LOOPBACK,
        "SPARK_PUBLIC_DNS": LOOPBACK,
        # the master's REST submission server would listen on the fixed port 6066: not needed here
        "SPARK_MASTER_OPTS": (os.environ.get("SPARK_MASTER_OPTS", "") + " -Dspark.master.rest.enabled=false").strip(),
    })
    env.pop("PYSPARK_GATEWAY_PORT", None)
    env.pop("PYSPARK_GATEWAY_SECRET", None)
    env.update(extra or {})
    return env


def _spawn(cmd: list, log: str, env: dict, cwd: str) -> subprocess.Popen:
    """Start a daemon process in its own session (it outlives the command that started it)."""
    with open(log, "ab") as fh:
        return subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                cwd=cwd, start_new_session=True)


# ---- processes by PID -----------------------------------------------------------------------


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def alive(pid: Optional[int], marker: str = "") -> bool:
    """Is `pid` running (not a zombie) and, if given, is `marker` in its command line (no reused PID)?"""
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
        if state in (b"Z", b"X"):
            return False
    except OSError:
        return False
    return marker in _cmdline(pid) if marker else True


def children(pid: int) -> list[int]:
    """Direct children of `pid` (from /proc)."""
    out = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/children") as fh:
                    out += [int(c) for c in fh.read().split()]
            except OSError:
                pass
    except OSError:
        pass
    return out


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        for c in children(todo.pop()):
            out.append(c)
            todo.append(c)
    return out


def executor_pids(worker_pid: int) -> list[int]:
    """The executor JVMs (CoarseGrainedExecutorBackend) a worker runs now."""
    return [p for p in descendants(worker_pid) if "CoarseGrainedExecutorBackend" in _cmdline(p)]


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except (ChildProcessError, OSError):
        pass


def terminate(pids: list[int], marker: str = "", timeout: float = 15.0) -> None:
    """SIGTERM the given PIDs (only those still running `marker`), then SIGKILL what is left."""
    targets = [p for p in pids if alive(p, marker)]
    for p in targets:
        try:
            os.kill(p, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in targets:
            _reap(p)
        targets = [p for p in targets if alive(p)]
        if not targets:
            return
        time.sleep(0.2)
    for p in targets:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _reap(p)


# ---- the cluster state ----------------------------------------------------------------------


def _state_path(folder: str) -> str:
    return os.path.join(folder, STATE_FILE)


def load_state(folder: str = DEFAULT_DIR) -> Optional[dict]:
    try:
        with open(_state_path(folder), encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        return None


def _save_state(folder: str, state: dict) -> None:
    tmp = _state_path(folder) + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(state, fh, indent=2)
    os.replace(tmp, _state_path(folder))
    for name, pid in _pids(state):
        with open(os.path.join(folder, f"{name}.pid"), "w") as fh:
            fh.write(f"{pid}\n")


def _pids(state: dict) -> list[tuple[str, int]]:
    out = []
    if state.get("connect"):
        out.append(("connect", state["connect"]["pid"]))
    out += [(f"worker-{w['index']}", w["pid"]) for w in state.get("workers", [])]
    if state.get("master"):
        out.append(("master", state["master"]["pid"]))
    return out


def master_json(state: dict, timeout: float = 3.0) -> Optional[dict]:
    """The master web UI's JSON status (workers, applications), or None if it does not answer."""
    url = f"http://{LOOPBACK}:{state['master']['webui_port']}/json"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - loopback only
            return json.load(resp)
    except (OSError, ValueError):  # not listening (yet), refused, timed out, or not JSON
        return None


def alive_workers(state: dict) -> int:
    info = master_json(state) or {}
    return sum(1 for w in info.get("workers", []) if w.get("state") == "ALIVE")


def _wait(what: str, ok, timeout: float, procs: list, logs: list) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ok():
            return
        for p, log in zip(procs, logs):
            if p is not None and p.poll() is not None:
                raise RuntimeFailure(f"{what}: a process exited with code {p.returncode}",
                                     hint=f"see its log: {log}\n{_tail(log)}")
        time.sleep(0.5)
    raise RuntimeFailure(f"{what}: not ready after {timeout:.0f} s", hint="see the logs: " + ", ".join(logs))


def _tail(path: str, n: int = 15) -> str:
    try:
        with open(path, errors="replace") as fh:
            return "".join(fh.readlines()[-n:])
    except OSError:
        return ""


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((LOOPBACK, port)) == 0


# ---- up / down / status ---------------------------------------------------------------------


def start(folder: str = DEFAULT_DIR, workers: int = 2, cores: int = 1, memory: str = "2g",
          timeout: float = 180.0, connect: bool = False, connect_conf: Optional[dict] = None,
          env: Optional[dict] = None) -> dict:
    """Start a master and `workers` workers (and a Connect server if `connect`); return the state.

    Blocks until every worker has registered with the master (and the Connect
    server listens). On any failure the processes started so far are stopped.
    """
    folder = os.path.abspath(folder)
    os.makedirs(folder, exist_ok=True)
    old = load_state(folder)
    if old and any(alive(pid) for _, pid in _pids(old)):
        raise RuntimeFailure(f"a cluster is already running from {folder} ({old['master_url']})",
                             hint=f"stop it first: scopeflow cluster down --dir {folder}")
    for name in os.listdir(folder):  # stale pid files of a previous cluster
        if name.endswith(".pid"):
            os.remove(os.path.join(folder, name))
    base_env = _loopback_env(env)
    bin_dir = os.path.join(spark_home(), "bin")
    state: dict = {"folder": folder, "started": time.time(), "workers": []}
    port, webui = free_port(), free_port()
    state["master_url"] = f"spark://{LOOPBACK}:{port}"
    log = os.path.join(folder, "master.log")
    procs, logs = [], [log]
    try:
        p = _spawn([os.path.join(bin_dir, "spark-class"), MASTER_CLASS, "--host", LOOPBACK, "--port", str(port),
                    "--webui-port", str(webui)], log, base_env, folder)
        procs.append(p)
        state["master"] = {"pid": p.pid, "port": port, "webui_port": webui, "log": log}
        _save_state(folder, state)
        _wait("the Spark master", lambda: (master_json(state) or {}).get("status") == "ALIVE", timeout, procs, logs)
        for i in range(1, workers + 1):
            wdir = os.path.join(folder, f"worker-{i}")
            os.makedirs(wdir, exist_ok=True)
            wlog = os.path.join(folder, f"worker-{i}.log")
            wport, wui = free_port(), free_port()
            wp = _spawn([os.path.join(bin_dir, "spark-class"), WORKER_CLASS, state["master_url"],
                         "--cores", str(cores), "--memory", memory, "--work-dir", wdir, "--host", LOOPBACK,
                         "--port", str(wport), "--webui-port", str(wui)], wlog, base_env, folder)
            procs.append(wp)
            logs.append(wlog)
            state["workers"].append({"index": i, "pid": wp.pid, "port": wport, "webui_port": wui,
                                     "work_dir": wdir, "log": wlog})
            _save_state(folder, state)
        _wait(f"{workers} Spark worker(s) registering", lambda: alive_workers(state) >= workers, timeout, procs, logs)
        if connect:  # half the cores, so `run --master` jobs still get executors next to it
            total = workers * cores
            conf = {"spark.cores.max": str(max(1, total // 2)), "spark.executor.cores": "1", **(connect_conf or {})}
            state["connect"] = start_connect(folder, state["master_url"], conf=conf, env=env, timeout=timeout)
            _save_state(folder, state)
    except BaseException:
        stop(folder)
        raise
    return state


def start_connect(folder: str, master: str = "local[2]", port: Optional[int] = None, conf: Optional[dict] = None,
                  env: Optional[dict] = None, timeout: float = 180.0) -> dict:
    """Start a Spark Connect server (the distribution's SparkConnectServer) on 127.0.0.1; wait until it listens."""
    if connect_jar() is None:
        raise RuntimeFailure("this pyspark distribution ships no Spark Connect server jar (jars/spark-connect_*.jar)",
                             hint="install a full Spark distribution, or run without --remote")
    port = port or free_port()
    log = os.path.join(folder, "connect.log")
    settings = {
        "spark.connect.grpc.binding.address": LOOPBACK,
        "spark.connect.grpc.binding.port": str(port),
        "spark.driver.host": LOOPBACK,
        "spark.driver.bindAddress": LOOPBACK,
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.cleaner.referenceTracking.cleanCheckpoints": "true",
        "spark.checkpoint.dir": os.path.join(folder, "connect-checkpoints"),
    }
    settings.update(conf or {})
    cmd = [os.path.join(spark_home(), "bin", "spark-submit"), "--master", master, "--name", "scopeflow-connect",
           "--class", CONNECT_CLASS]
    for k, v in settings.items():
        cmd += ["--conf", f"{k}={v}"]
    cmd.append("spark-internal")
    p = _spawn(cmd, log, _loopback_env(env), folder)
    info = {"pid": p.pid, "port": port, "url": f"sc://{LOOPBACK}:{port}", "log": log}
    with open(os.path.join(folder, "connect.pid"), "w") as fh:
        fh.write(f"{p.pid}\n")
    try:
        _wait("the Spark Connect server", lambda: _port_open(port), timeout, [p], [log])
    except BaseException:
        terminate([p.pid] + descendants(p.pid))
        raise
    return info


def stop(folder: str = DEFAULT_DIR) -> list[int]:
    """Stop the recorded Connect server, workers (with their executors) and master; return the PIDs stopped."""
    folder = os.path.abspath(folder)
    state = load_state(folder) or {}
    stopped = []
    for name, pid in _pids(state):
        marker = {"connect": CONNECT_CLASS, "master": MASTER_CLASS}.get(name, WORKER_CLASS)
        if not alive(pid, marker):
            continue
        family = [pid] + descendants(pid)  # a worker's executors; the Connect server's Python workers
        terminate(family)
        stopped += family
    for name in os.listdir(folder) if os.path.isdir(folder) else []:
        if name.endswith(".pid"):
            os.remove(os.path.join(folder, name))
    if state:
        state["stopped"] = time.time()
        tmp = _state_path(folder) + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(state, fh, indent=2)
        os.replace(tmp, _state_path(folder))
    return stopped


def status(folder: str = DEFAULT_DIR) -> dict:
    """Liveness of every recorded process and what the master reports."""
    folder = os.path.abspath(folder)
    state = load_state(folder)
    if not state:
        return {"folder": folder, "running": False}
    master_alive = alive(state["master"]["pid"], MASTER_CLASS)
    out = {"folder": folder, "running": master_alive, "master_url": state["master_url"],
           "master": {"pid": state["master"]["pid"], "alive": master_alive,
                      "webui": f"http://{LOOPBACK}:{state['master']['webui_port']}"},
           "workers": [{"index": w["index"], "pid": w["pid"], "alive": alive(w["pid"], WORKER_CLASS),
                        "executors": executor_pids(w["pid"])} for w in state["workers"]]}
    if state.get("connect"):
        c = state["connect"]
        out["connect"] = {"url": c["url"], "pid": c["pid"], "alive": alive(c["pid"], CONNECT_CLASS)}
    info = master_json(state) if master_alive else None
    out["registered_workers"] = sum(1 for w in (info or {}).get("workers", []) if w.get("state") == "ALIVE")
    out["applications"] = [a.get("name") for a in (info or {}).get("activeapps", [])]
    return out


# ---- the command line -----------------------------------------------------------------------


def cli(args) -> int:
    """`scopeflow cluster up|down|status`."""
    folder = args.dir
    try:
        if args.action == "up":
            state = start(folder, workers=args.workers, cores=args.cores, memory=args.memory,
                          timeout=args.timeout, connect=args.connect)
            print(f"master   {state['master_url']}  (pid {state['master']['pid']}, "
                  f"web UI http://{LOOPBACK}:{state['master']['webui_port']})")
            for w in state["workers"]:
                print(f"worker-{w['index']} pid {w['pid']}  work dir {w['work_dir']}")
            if state.get("connect"):
                print(f"connect  {state['connect']['url']}  (pid {state['connect']['pid']})")
            print(f"logs     {state['folder']}")
            print(f"\nrun:  scopeflow run F.flow --master {state['master_url']}")
            if state.get("connect"):
                print(f"      scopeflow run F.flow --remote {state['connect']['url']}")
            print(f"stop: scopeflow cluster down --dir {folder}")
            return 0
        if args.action == "down":
            pids = stop(folder)
            print(f"stopped {len(pids)} process(es)" + (f": {' '.join(map(str, pids))}" if pids else ""))
            return 0
        info = status(folder)
        if getattr(args, "json", False):
            print(json.dumps(info, indent=2))
            return 0 if info["running"] else 1
        if not info["running"]:
            print(f"no cluster running from {info['folder']}")
            return 1
        m = info["master"]
        print(f"master   {info['master_url']}  pid {m['pid']} {'alive' if m['alive'] else 'DEAD'}  ({m['webui']})")
        for w in info["workers"]:
            ex = f", executors {' '.join(map(str, w['executors']))}" if w["executors"] else ""
            print(f"worker-{w['index']} pid {w['pid']} {'alive' if w['alive'] else 'DEAD'}{ex}")
        if "connect" in info:
            c = info["connect"]
            print(f"connect  {c['url']}  pid {c['pid']} {'alive' if c['alive'] else 'DEAD'}")
        print(f"registered workers: {info['registered_workers']}; running applications: "
              f"{', '.join(info['applications']) or 'none'}")
        return 0
    except RuntimeFailure as exc:
        print(exc.render(), file=sys.stderr)
        return 4
