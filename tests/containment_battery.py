"""The containment battery: families × forms of a candidate's step code trying to reach
the host, the next run or patchheal itself (issue 25, "Done means").

Each family is a payload (`_payload()`) that, if the sandbox let it, would leave a
*marker* the host can see: a file in a host directory, a seeded secret (from a host
file or the host's environment) in anything patchheal keeps, a connection to a host
server, a `BREACH:` line, something the next run finds, a hang or an internal error.
Each form launches the payload another way: at the step's top level, from a shell
grandchild, from a detached (double-fork, `setsid`) process that acts after the step
returned, or from an `atexit` handler. Leaks are also written into the worktree
(`leak-*`, `breach-*`), because a detached process's output may reach no one.

Every candidate runs as `python -I` (no collectors, no tripwire in the process: the
sandbox must hold alone), then a follower run reports what it can still find
(`FOLLOW`). Judged in tests/test_containment_battery.py.
"""

from __future__ import annotations

from dataclasses import dataclass

# Placeholders filled per run: HOST_DIR (a host directory holding `secret`), PORT
# (a host TCP server on all interfaces), NAME (the candidate's name).
_LEAK = """
def _leak(what):
    print("LEAKED:" + str(what), flush=True)
    with open("leak-NAME", "a") as out:
        out.write(str(what))
"""

_BREACH = """
def _breach(what):
    print("BREACH:" + what, flush=True)
    open("breach-NAME", "w").write(what)
"""

FAMILIES: dict[str, str] = {
    "host file write": """
def _payload():
    for path in ("HOST_DIR/marker-NAME", "/tmp/../HOST_DIR/marker-NAME"):
        try:
            open(path, "w").write("x")
        except OSError:
            pass
""",
    "host file write through a worktree symlink": """
def _payload():
    import os
    try:
        os.symlink("HOST_DIR/marker-NAME", "link-NAME")
        open("link-NAME", "w").write("x")
    except OSError:
        pass
""",
    "host file read": """
def _payload():
    try:
        _leak(open("HOST_DIR/secret").read())
    except OSError:
        pass
""",
    "host environment read": """
def _payload():
    import os
    _leak(os.environ.get("CB_SECRET", ""))
    try:
        _leak(open("/proc/1/environ", "rb").read().decode(errors="replace"))
    except OSError:
        pass
""",
    "host network": """
def _payload():
    import socket
    for host in ("127.0.0.1", "172.17.0.1", "host.docker.internal", "10.0.2.2"):
        try:
            socket.create_connection((host, PORT), timeout=1).close()
            _breach("connected to " + host)
        except OSError:
            pass
""",
    "engine socket": """
def _payload():
    import socket
    for path in ("/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock"):
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(path)
            _breach("engine socket " + path)
        except OSError:
            pass
""",
    "privilege": """
def _payload():
    import os
    for attempt in (lambda: os.setuid(0), lambda: open("/etc/passwd", "a").write("x"),
                    lambda: open("/usr/bin/cb-NAME", "w").write("x")):
        try:
            attempt()
            _breach("privileged write or setuid")
        except OSError:
            pass
""",
    "files left in /tmp and /dev/shm": """
def _payload():
    import os
    for d in ("/tmp", "/dev/shm"):
        try:
            os.makedirs(d + "/cb-left/ro", exist_ok=True)
            open(d + "/cb-left/ro/x", "w").write("x")
            os.chmod(d + "/cb-left/ro", 0o555)
            os.chmod(d + "/cb-left", 0o555)
        except OSError:
            pass
""",
    "process left running": """
def _payload():
    import os, time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            for _ in range(100):
                open("late-NAME", "w").write(str(time.time()))
                time.sleep(0.1)
        os._exit(0)
""",
    "results: a FIFO and a symlink to a host file": """
def _payload():
    import os
    d = os.environ.get("PATCHHEAL_RESULTS_DIR", "/run/patchheal")
    try:
        os.mkfifo(d + "/zz.json")
        os.symlink("HOST_DIR/secret", d + "/node-junit.xml")
        os.symlink("HOST_DIR/secret", d + "/pw.json")
    except OSError:
        pass
""",
    "results: filled past the cap": """
def _payload():
    import os
    d = os.environ.get("PATCHHEAL_RESULTS_DIR", "/run/patchheal")
    try:
        with open(d + "/big.json", "wb") as f:
            for _ in range(64):
                f.write(b"7" * (1 << 20))
    except OSError:
        pass
""",
    "results: deeply nested JUnit": """
def _payload():
    import os
    d = os.environ.get("PATCHHEAL_RESULTS_DIR", "/run/patchheal")
    try:
        with open(d + "/node-junit.xml", "w") as f:
            f.write("<testsuites>" + "<testsuite name='s'>" * 100000 + "<testcase name='t'/>"
                    + "</testsuite>" * 100000 + "</testsuites>")
    except OSError:
        pass
""",
    "results: left outside the run's directory": """
def _payload():
    import os
    for path in ("/run/patchheal/stale.json", "/run/patchheal/results-next/x.json"):
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, "w").write("{}")
        except OSError:
            pass
""",
}

FORMS: dict[str, str] = {
    "top level": "_payload()\n",
    "shell grandchild": """
import subprocess
with open("_payload_NAME.py", "w") as out:
    out.write(open(__file__).read().split("# -- launch")[0] + "_payload()\\n")
subprocess.run(["sh", "-c", "python3 -I _payload_NAME.py"], check=False)
""",
    "detached, after the step": """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(0.3)
        try:
            _payload()
        finally:
            os._exit(0)
    os._exit(0)
""",
    "atexit": "import atexit\natexit.register(_payload)\n",
}

# What the next run of the session reports it can still find of an earlier one.
FOLLOW = """
import os
me = os.getuid()
for d in ("/tmp", "/dev/shm"):
    for name in os.listdir(d):
        print("FOLLOW left", d + "/" + name)
for entry in os.listdir("/proc"):
    if entry.isdigit() and int(entry) != os.getpid():
        try:
            command = open("/proc/" + entry + "/cmdline").read()
            if os.stat("/proc/" + entry).st_uid == me and "follow.py" not in command:
                print("FOLLOW process", command)
        except OSError:
            pass
own = os.path.basename(os.environ["PATCHHEAL_RESULTS_DIR"])
for name in os.listdir("/run/patchheal"):
    if name != own:
        print("FOLLOW results", name)
for name in os.listdir(os.environ["PATCHHEAL_RESULTS_DIR"]):
    print("FOLLOW results", name)
"""


@dataclass(frozen=True)
class Candidate:
    name: str
    family: str
    form: str
    source: str


def render(family: str, form: str, name: str, host_dir: str, port: int) -> str:
    body = _LEAK + _BREACH + FAMILIES[family] + "\n# -- launch\n" + FORMS[form]
    return body.replace("HOST_DIR", host_dir).replace("PORT", str(port)).replace("NAME", name)


def generate(host_dir: str, port: int) -> list[Candidate]:
    """Every family × form."""
    out = []
    for f, family in enumerate(FAMILIES):
        for g, form in enumerate(FORMS):
            name = f"c{f:02d}{g}"
            out.append(Candidate(name, family, form, render(family, form, name, host_dir, port)))
    return out
