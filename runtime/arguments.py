"""The arguments of `scopeflow run` and of a generated script (one list for both), and reading them:
params, Spark settings, snapshot options. Light: the CLI imports it before deciding whether to start Spark."""
from __future__ import annotations

import argparse
import difflib
import os
from typing import Optional

from attrs import define

from scopeflow.runtime.errors import RuntimeFailure
from scopeflow.stdlib.settings import PREFIX, setting_problem


def add_run_arguments(p: argparse.ArgumentParser, writes: bool = True) -> None:
    """The options of `scopeflow run` and of a generated script: one list for both. Without `writes`
    (`scopeflow show`, which writes nothing): no report and no snapshot options."""
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="set a `param` of the pipeline (repeat for several)")
    p.add_argument("--master", help="Spark master URL (default local[*])")
    p.add_argument("--remote", help="Spark Connect URL, sc://HOST:PORT")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="a Spark setting, e.g. spark.sql.shuffle.partitions=8 (repeat for several)")
    p.add_argument("--base-dir", metavar="DIR",
                   help="folder the pipeline's relative paths resolve against (default: the .flow file's)")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.add_argument("--trace", action="store_true", help="print every termination attempt")
    p.add_argument("--verbose", action="store_true", help="show Spark's own log output")
    if not writes:
        return
    p.add_argument("--report", metavar="RUN.json", help="write per-round, per-operator statistics as JSON")
    p.add_argument("--checkpoint", metavar="DIR",
                   help="snapshot directory; a streaming pipeline's offsets and state (default .scopeflow/<pipeline>/)")
    p.add_argument("--snapshot-every", type=int, metavar="N", help="rounds between snapshots (default 10)")
    p.add_argument("--snapshot-mode", choices=("persist", "recompute"), default=None,
                   help="persist loop state (default) or only positions (recompute on recovery)")
    p.add_argument("--async-snapshots", action="store_true", help="write snapshots while the next round runs")
    p.add_argument("--keep-snapshots", type=int, default=3, metavar="K", help="snapshots to keep (default 3)")
    p.add_argument("--resume", action="store_true", help="continue from the latest complete snapshot")
    p.add_argument("--no-snapshots", action="store_true", help="take no snapshots")
    p.add_argument("--trigger", metavar="WHEN",
                   help="streaming pipelines: available-now (process what is there, then stop), once, or "
                        "processing-time=DURATION (default processing-time=10s: run until stopped)")
    p.add_argument("--full-refresh", action="store_true",
                   help="streaming pipelines: drop the checkpoint's state and offsets, recompute from all input")


class UsageError(Exception):
    pass


def _convert(name: str, kind: str, raw: str):
    try:
        if kind in ("long", "int"):
            return int(raw)
        if kind == "double":
            return float(raw)
        if kind == "boolean":
            if raw.lower() not in ("true", "false"):
                raise ValueError(raw)
            return raw.lower() == "true"
        return raw
    except ValueError:
        raise UsageError(f"--param {name}={raw}: `{name}` is a {kind}") from None


def parse_params(declared: dict, overrides: list[str]) -> dict:
    values = {name: default for name, (_, default) in declared.items()}
    for item in overrides:
        if "=" not in item:
            raise UsageError(f"--param {item}: expected NAME=VALUE")
        name, raw = item.split("=", 1)
        if name not in declared:
            close = difflib.get_close_matches(name, declared, n=1)
            hint = f"; did you mean `{close[0]}`?" if close else (f"; params: {', '.join(declared)}" if declared
                                                                   else "; the pipeline declares no params")
            raise UsageError(f"--param {name}: no such param{hint}")
        values[name] = _convert(name, declared[name][0], raw)
    return values


def parse_conf(items: list[str]) -> dict:
    out = {}
    for item in items:
        if "=" not in item:
            raise UsageError(f"--conf {item}: expected KEY=VALUE")
        k, v = item.split("=", 1)
        problem = setting_problem(k, v)
        if problem:
            raise UsageError(f"--conf {item}: {problem}")
        out[k] = v
    return out


def check_setting(key: str, value: Optional[str]) -> None:
    """Fail on a bad value of a setting met at run time (set in the session some other way: `--conf` refuses the
    same values before Spark starts, the compiler a `config` line of the .flow file)."""
    problem = setting_problem(key, value) if value is not None else None
    if problem:
        raise RuntimeFailure(f"{key}={value}: {problem}", code="E0120",
                             hint=f"set it with --conf {key}=..., which checks it before Spark starts")


def read_setting(spark, key: str, default, kind=str):
    """The session's value of scopeflow setting `key` as a `kind`, or `default` when it is unset; checked (`--conf`
    and the compiler check a value before Spark starts, this one set on the session some other way)."""
    text = spark.conf.get(key, None)
    check_setting(key, text)
    return default if text is None else kind(text)


def check_session_settings(spark) -> None:
    """Fail on a bad `spark.scopeflow.*` entry of the session's Spark configuration (spark-submit's --conf,
    spark-defaults.conf, a builder's config): a key scopeflow does not know, or a bad value. Over Spark Connect
    the server's configuration is not the client's to list; the settings scopeflow reads are checked as read."""
    if not hasattr(spark, "_jsc"):
        return
    for entry in spark.sparkContext._jsc.sc().conf().getAllWithPrefix(PREFIX):  # (a few JVM calls, two an entry)
        check_setting(PREFIX + entry._1(), entry._2())


@define
class SnapshotOptions:
    checkpoint: Optional[str] = None
    every: Optional[int] = None
    mode: Optional[str] = None  # persist | recompute
    async_writes: bool = False
    keep: int = 3
    resume: bool = False
    disabled: bool = False

    def root(self, pipeline: str) -> str:
        """The checkpoint folder: --checkpoint, or .scopeflow/<pipeline> (relative to the working folder)."""
        return self.checkpoint or os.path.join(".scopeflow", pipeline)

    def wanted(self, module) -> bool:
        """A batch run takes snapshots: asked for by an option (a checkpoint folder, `--resume` included) or by a
        loop of the pipeline."""
        return self.of_loops(module) or (not self.disabled and bool(self.checkpoint or self.resume))

    def of_loops(self, module) -> bool:
        """The loops take snapshots: asked for by a snapshot option or by a loop of the pipeline (not by a
        checkpoint folder alone, which a streaming pipeline always has)."""
        if self.disabled:
            return False
        return bool(self.every or self.mode or self.async_writes or self.declared(module))

    @staticmethod
    def declared(module) -> bool:
        """A loop of the pipeline asks for snapshots itself (`snapshot every N`, `snapshot recompute`)."""
        from scopeflow.runtime.spec import LoopSpec

        return any(v.snapshot_every or v.snapshot_recompute for v in vars(module).values() if isinstance(v, LoopSpec))
