"""A single-node SLURM cluster on this machine for the tests: a munge key and ``munged``, a
minimal ``slurm.conf``, ``slurmctld`` and ``slurmd``, all in one temporary directory, on
free ports and a socket of their own (nothing of the machine's own SLURM or munge is used
or touched). The daemons run in the foreground as children of the test process, so that
stopping them is ending the processes this module started."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

#: The programs the cluster needs and the Debian package of each.
PROGRAMS = {
    "munged": "munge",
    "slurmctld": "slurmctld",
    "slurmd": "slurmd",
    "sbatch": "slurm-client",
    "squeue": "slurm-client",
    "scancel": "slurm-client",
    "scontrol": "slurm-client",
    "sinfo": "slurm-client",
}

#: Seconds the daemons have to come up (slurmd registers with slurmctld in about one).
START_TIMEOUT = 60.0


class ClusterUnavailable(RuntimeError):
    """Why the cluster cannot run here (the message says precisely)."""


def _which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """Start with :meth:`start`, stop with :meth:`stop`; :attr:`env` is the environment the
    SLURM commands need (``SLURM_CONF``)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.env = dict(os.environ)
        self.paths: dict[str, str] = {}

    def check(self) -> None:
        """Raise :class:`ClusterUnavailable` naming what is missing."""
        missing = [f"{p} (Debian package {pkg})" for p, pkg in PROGRAMS.items() if not _which(p)]
        if missing:
            raise ClusterUnavailable(
                "SLURM or munge is not installed: missing "
                + ", ".join(missing)
                + " (make install installs them as root on Debian)"
            )
        if os.geteuid() != 0:
            raise ClusterUnavailable(
                f"slurmd must run as root to start jobs (it switches to each job's user); this "
                f"test runs as uid {os.geteuid()}"
            )
        for p in PROGRAMS:
            self.paths[p] = str(_which(p))

    def _spawn(self, name: str, args: list[str], log: Path) -> None:
        out = open(log, "ab")  # noqa: SIM115 (the daemon keeps it)
        proc = subprocess.Popen(
            [self.paths[name], *args], stdout=out, stderr=subprocess.STDOUT, env=self.env
        )
        out.close()
        self.procs.append((name, proc))

    def _log_tail(self, path: Path, lines: int = 15) -> str:
        try:
            return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def _wait(self, what: str, ready: callable, logs: list[Path]) -> None:  # type: ignore[valid-type]
        """Poll ``ready()`` until it holds (daemons come up asynchronously: there is nothing to
        wait on but their answers), failing with the daemons' logs after START_TIMEOUT."""
        deadline = time.monotonic() + START_TIMEOUT
        pause = threading.Event()
        while not ready():
            for name, proc in self.procs:
                if proc.poll() is not None:
                    raise ClusterUnavailable(
                        f"{name} exited with status {proc.returncode} while waiting for {what}:\n"
                        + "\n".join(self._log_tail(x) for x in logs)
                    )
            if time.monotonic() > deadline:
                raise ClusterUnavailable(
                    f"{what}: not ready after {START_TIMEOUT:g} s:\n"
                    + "\n".join(self._log_tail(x) for x in logs)
                )
            pause.wait(0.2)

    def _ok(self, *cmd: str) -> str | None:
        p = subprocess.run(
            [self.paths[cmd[0]], *cmd[1:]], capture_output=True, text=True, env=self.env
        )
        return p.stdout if p.returncode == 0 else None

    def start(self) -> None:
        self.check()
        r = self.root
        for d in ("munge", "state", "spool", "log"):
            (r / d).mkdir(parents=True, exist_ok=True)
        (r / "munge").chmod(0o755)
        key = r / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        sock = r / "munge" / "munge.socket"
        self._spawn(
            "munged",
            [
                "--foreground",
                "--force",
                f"--key-file={key}",
                f"--socket={sock}",
                f"--pid-file={r / 'munge' / 'munged.pid'}",
                f"--seed-file={r / 'munge' / 'munged.seed'}",
                f"--log-file={r / 'log' / 'munged.log'}",
            ],
            r / "log" / "munged.out",
        )
        self._wait("munged", sock.exists, [r / "log" / "munged.log"])
        user = "root"
        conf = r / "slurm.conf"
        conf.write_text(
            "\n".join(
                [
                    "ClusterName=tierlabtest",
                    "SlurmctldHost=localhost(127.0.0.1)",
                    f"SlurmUser={user}",
                    f"SlurmdUser={user}",
                    f"SlurmctldPort={_free_port()}",
                    f"SlurmdPort={_free_port()}",
                    "AuthType=auth/munge",
                    "CredType=cred/munge",
                    f"AuthInfo=socket={sock}",
                    f"StateSaveLocation={r / 'state'}",
                    f"SlurmdSpoolDir={r / 'spool'}",
                    f"SlurmctldPidFile={r / 'slurmctld.pid'}",
                    f"SlurmdPidFile={r / 'slurmd.pid'}",
                    f"SlurmctldLogFile={r / 'log' / 'slurmctld.log'}",
                    f"SlurmdLogFile={r / 'log' / 'slurmd.log'}",
                    "ProctrackType=proctrack/linuxproc",
                    "TaskPlugin=task/none",
                    "SelectType=select/cons_tres",
                    "SelectTypeParameters=CR_Core_Memory",
                    "SchedulerType=sched/builtin",
                    "MpiDefault=none",
                    "ReturnToService=2",
                    "JobCompType=jobcomp/none",
                    "AccountingStorageType=accounting_storage/none",
                    "JobAcctGatherType=jobacct_gather/none",
                    "MinJobAge=600",
                    "KillWait=2",
                    "InactiveLimit=0",
                    "NodeName=localhost NodeAddr=127.0.0.1 CPUs=2 RealMemory=4096 State=UNKNOWN",
                    "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
                    "",
                ]
            )
        )
        self.env["SLURM_CONF"] = str(conf)
        logs = [r / "log" / "slurmctld.log", r / "log" / "slurmd.log"]
        self._spawn("slurmctld", ["-D", "-i"], r / "log" / "slurmctld.out")
        self._wait("slurmctld", lambda: (self._ok("scontrol", "ping") or "").find("UP") >= 0, logs)
        self._spawn("slurmd", ["-D", "-N", "localhost"], r / "log" / "slurmd.out")
        self._wait(
            "slurmd to register as an idle node",
            lambda: (self._ok("sinfo", "-h", "-o", "%t") or "").strip() == "idle",
            logs,
        )

    def stop(self) -> None:
        """Cancel every job of the cluster, then end the daemons (slurmd first)."""
        if "scancel" in self.paths and "SLURM_CONF" in self.env:
            subprocess.run(
                [self.paths["scancel"], "--user=root"], capture_output=True, env=self.env
            )
        for _name, proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.procs.clear()
