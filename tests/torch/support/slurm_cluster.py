"""A private one-node Slurm cluster for a test: slurmctld and slurmd from
Debian's packages (22.05), started on free loopback ports with a config,
state and logs under the test's directory, `auth/none` (no munge daemon),
stopped with the test. srun then launches tasks the way it does on a real
node: through slurmd and slurmstepd, with SLURM_* set per task."""
import os
import shutil
import socket
import subprocess
import time


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SlurmCluster:
    TOOLS = ("slurmctld", "slurmd", "srun", "sinfo", "scontrol")

    @classmethod
    def missing(cls):
        """Why a cluster cannot start here, or None."""
        absent = [t for t in cls.TOOLS if shutil.which(t, path="/usr/sbin:/usr/bin:/sbin:/bin") is None]
        if absent:
            return f"{', '.join(absent)} not installed (Debian: slurmctld slurmd slurm-client)"
        if os.geteuid() != 0:
            return "slurmd must run as root to start job steps"
        return None

    def __init__(self, root, cpus=None):
        self.root = root
        self.conf = os.path.join(root, "slurm.conf")
        self.env = {"SLURM_CONF": self.conf}
        self.host = socket.gethostname()
        for d in ("state", "spool", "log"):
            os.makedirs(os.path.join(root, d), exist_ok=True)
        cpus = cpus or os.cpu_count()
        lines = [
            "ClusterName=ccpooltest",
            f"SlurmctldHost={self.host}(127.0.0.1)",
            f"SlurmctldPort={_free_port()}",
            f"SlurmdPort={_free_port()}",
            "AuthType=auth/none", "CredType=cred/none",
            "SlurmUser=root", "SlurmdUser=root",
            f"StateSaveLocation={root}/state", f"SlurmdSpoolDir={root}/spool",
            f"SlurmctldPidFile={root}/slurmctld.pid", f"SlurmdPidFile={root}/slurmd.pid",
            f"SlurmctldLogFile={root}/log/slurmctld.log", f"SlurmdLogFile={root}/log/slurmd.log",
            "ProctrackType=proctrack/pgid", "TaskPlugin=task/none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU",
            "ReturnToService=2", "MpiDefault=none", "JobCompType=jobcomp/none",
            "AccountingStorageType=accounting_storage/none",
            f"NodeName={self.host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=1000 State=UNKNOWN",
            "PartitionName=ccpool Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES",
        ]
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n")

    def _env(self):
        return {**os.environ, **self.env}

    def start(self, timeout=30):
        for daemon in ("slurmctld", "slurmd"):
            r = subprocess.run([daemon, "-f", self.conf], env=self._env(), capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"{daemon} failed to start: {r.stderr.strip()}\n{self.logs()}")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = subprocess.run(["sinfo", "-h", "-o", "%T"], env=self._env(), capture_output=True, text=True)
            if r.returncode == 0 and r.stdout.strip() in ("idle", "mixed", "allocated"):
                return
            time.sleep(0.2)
        raise RuntimeError(f"the Slurm node did not come up in {timeout} s\n{self.logs()}")

    def logs(self):
        out = []
        for name in ("slurmctld.log", "slurmd.log"):
            try:
                with open(os.path.join(self.root, "log", name)) as f:
                    out.append(f"--- {name}\n" + f.read()[-3000:])
            except OSError:
                pass
        return "\n".join(out)

    def stop(self):
        subprocess.run(["scontrol", "shutdown"], env=self._env(), capture_output=True)
        for name in ("slurmd.pid", "slurmctld.pid"):
            try:
                with open(os.path.join(self.root, name)) as f:
                    pid = int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
            for _ in range(50):
                try:
                    os.kill(pid, 0)
                except OSError:
                    break
                time.sleep(0.1)
            else:
                try:
                    os.kill(pid, 9)
                except OSError:
                    pass
