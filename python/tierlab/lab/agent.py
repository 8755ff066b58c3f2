"""The lab's guest agent: runs in the guest (the host's Python, chrooted into the host's root
shared read-only over 9p) and executes the host's commands.

It speaks JSON lines over the virtio-serial port ``tierlab.agent``. The host sends
``{"op": "run", "argv": [...], "cwd": ..., "env": {...}, "timeout": s}`` and gets back
``{"op": "out", "fd": 1|2, "data": base64}`` chunks as the command writes them, then
``{"op": "exit", "code": n, "seconds": guest seconds}`` (``code`` is -N when a signal N ended
it; a command still running at its timeout is killed with its process group). ``{"op":
"quit"}`` ends the agent, and the guest then powers off. Standard library only: this runs
under full-system emulation, where every import costs.
"""

from __future__ import annotations

import base64
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

PORT_NAME = "tierlab.agent"


def find_port(name: str = PORT_NAME) -> str:
    for d in sorted(Path("/sys/class/virtio-ports").glob("*")):
        try:
            if (d / "name").read_text().strip() == name:
                return f"/dev/{d.name}"
        except OSError:
            continue
    raise SystemExit(f"tierlab-lab agent: no virtio port named {name}")


class Channel:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_RDWR)
        self.buf = b""

    def send(self, msg: dict[str, object]) -> None:
        data = (json.dumps(msg) + "\n").encode()
        while data:
            n = os.write(self.fd, data)
            data = data[n:]

    def recv(self) -> dict[str, object]:
        while b"\n" not in self.buf:
            chunk = os.read(self.fd, 65536)
            if not chunk:  # the host is not connected (yet, or any more)
                time.sleep(0.05)
                continue
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        msg = json.loads(line)
        assert isinstance(msg, dict)
        return msg


def run(ch: Channel, req: dict[str, object]) -> None:
    argv = req["argv"]
    assert isinstance(argv, list)
    env = req.get("env")
    timeout = req.get("timeout")
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(
            [str(a) for a in argv],
            cwd=str(req.get("cwd") or "/"),
            env={str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else None,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as e:
        msg = f"tierlab lab: cannot run {argv[0]!r} in the guest: {e.strerror}\n"
        ch.send({"op": "out", "fd": 2, "data": base64.b64encode(msg.encode()).decode()})
        ch.send({"op": "exit", "code": 127, "seconds": 0.0})
        return
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    sel.register(proc.stdout, selectors.EVENT_READ, 1)
    sel.register(proc.stderr, selectors.EVENT_READ, 2)
    deadline = None if timeout is None else t0 + float(str(timeout))
    timed_out = False
    while sel.get_map():
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        events = sel.select(wait)
        if not events and deadline is not None and time.monotonic() >= deadline:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            deadline = None
            continue
        for key, _ in events:
            data = os.read(key.fd, 65536)
            if not data:
                sel.unregister(key.fileobj)
                continue
            ch.send({"op": "out", "fd": key.data, "data": base64.b64encode(data).decode()})
    code = proc.wait()
    ch.send(
        {
            "op": "exit",
            "code": code,
            "seconds": time.monotonic() - t0,
            "timed_out": timed_out,
        }
    )


def main() -> int:
    ch = Channel(find_port())
    ch.send({"op": "ready", "release": os.uname().release, "python": sys.version.split()[0]})
    while True:
        req = ch.recv()
        if req.get("op") == "run":
            run(ch, req)
        elif req.get("op") == "quit":
            ch.send({"op": "bye"})
            return 0


if __name__ == "__main__":
    sys.exit(main())
