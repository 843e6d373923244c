"""Shape of the Kubernetes manifests in contrib/kubernetes (issue 15): they
parse as YAML and carry every field docs/deploy.md relies on. No cluster is
needed. Exit 125 when python3-yaml is absent."""
import os
import sys
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
K8S = os.path.join(ROOT, "contrib", "kubernetes")
SKIP = None
try:
    import yaml
except ImportError:
    SKIP = "python3-yaml is not installed (Debian package python3-yaml; run scripts/setup-deps.sh)"


def load(name):
    with open(os.path.join(K8S, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def one(docs, kind):
    found = [d for d in docs if d.get("kind") == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def by_name(items, name):
    found = [i for i in items if i.get("name") == name]
    assert len(found) == 1, f"expected one entry named {name}"
    return found[0]


class ManifestTest(unittest.TestCase):
    def setUp(self):
        if SKIP:
            self.skipTest(SKIP)

    def assert_flag(self, args, flag):
        self.assertTrue(any(a == flag or a.startswith(flag + "=") for a in args), f"{flag} missing from {args}")
        return next(a.split("=", 1)[1] for a in args if a.startswith(flag + "="))

    def test_daemonset(self):
        docs = load("ccpool-daemonset.yaml")
        for d in docs:
            self.assertIn("apiVersion", d)
            self.assertIn("name", d["metadata"])
        ds = one(docs, "DaemonSet")
        self.assertEqual(ds["apiVersion"], "apps/v1")
        spec = ds["spec"]
        self.assertEqual(spec["selector"]["matchLabels"], spec["template"]["metadata"]["labels"])
        pod = spec["template"]["spec"]
        annotations = spec["template"]["metadata"]["annotations"]
        self.assertEqual(annotations["prometheus.io/scrape"], "true")
        self.assertEqual(annotations["prometheus.io/path"], "/metrics")
        uid = pod["securityContext"]["runAsUser"]
        self.assertIsInstance(uid, int)
        self.assertTrue(pod["securityContext"]["runAsNonRoot"])

        volumes = {v["name"]: v for v in pod["volumes"]}
        for v in volumes.values():
            self.assertTrue(v["hostPath"]["path"].startswith("/"))
        container = by_name(pod["containers"], "ccpool")
        args = container["args"]
        self.assertEqual(args[0], "serve")
        self.assertIn("--foreground", args)
        socket = self.assert_flag(args, "--socket")
        store = self.assert_flag(args, "--dir")
        metrics_port = int(self.assert_flag(args, "--metrics-port"))
        self.assertEqual(self.assert_flag(args, "--idle-timeout"), "0", "a DaemonSet service must not idle-exit")
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        socket_dir = os.path.dirname(socket)
        self.assertIn(socket_dir, mounts, "the socket directory must be a mounted volume")
        self.assertIn(store, mounts, "the store must be a mounted volume")
        self.assertIn("hostPath", volumes[mounts[socket_dir]])
        self.assertIn("hostPath", volumes[mounts[store]])

        for kind in ("requests", "limits"):
            self.assertIn("cpu", container["resources"][kind])
            self.assertIn("memory", container["resources"][kind])
        jobs = int(self.assert_flag(args, "--jobs"))
        self.assertLessEqual(jobs, int(container["resources"]["limits"]["cpu"]))
        probe = container["readinessProbe"]["exec"]["command"]
        self.assertEqual(probe[:2], ["ccpool", "status"])
        self.assertEqual(probe[probe.index("--socket") + 1], socket)

        # The init container hands both host directories to the service's uid, 0700.
        init = pod["initContainers"][0]
        script = " ".join(init["command"])
        self.assertIn(f"chown {uid}:{pod['securityContext']['runAsGroup']}", script)
        self.assertIn("chmod 0700", script)
        init_mounts = {m["mountPath"] for m in init["volumeMounts"]}
        self.assertTrue({socket_dir, store} <= init_mounts)

        # The scrape port reaches the loopback-only endpoint through the proxy.
        scrape_port = int(annotations["prometheus.io/port"])
        proxy = by_name(pod["containers"], "metrics-proxy")
        self.assertIn(scrape_port, [p["containerPort"] for p in proxy["ports"]])
        self.assertIn(f"TCP:127.0.0.1:{metrics_port}", proxy["args"])
        self.assertIn(f"TCP-LISTEN:{scrape_port},fork,reuseaddr", proxy["args"])

    def test_example_job_shares_socket_uid_and_paths(self):
        ds_pod = one(load("ccpool-daemonset.yaml"), "DaemonSet")["spec"]["template"]["spec"]
        ds_volumes = {v["name"]: v["hostPath"]["path"] for v in ds_pod["volumes"]}
        ds_container = by_name(ds_pod["containers"], "ccpool")
        ds_mounts = {m["name"]: m["mountPath"] for m in ds_container["volumeMounts"]}
        socket = self.assert_flag(ds_container["args"], "--socket")

        job = one(load("example-job.yaml"), "Job")
        self.assertEqual(job["apiVersion"], "batch/v1")
        pod = job["spec"]["template"]["spec"]
        self.assertIn(pod["restartPolicy"], ("Never", "OnFailure"))
        # The uid rule.
        self.assertEqual(pod["securityContext"]["runAsUser"], ds_pod["securityContext"]["runAsUser"])
        container = pod["containers"][0]
        self.assertEqual(container["image"], ds_container["image"], "the path rule: the same image")
        script = " ".join(container["command"] + container["args"])
        self.assertIn(f'eval "$(ccpool env --socket {socket})"', script)
        env = {e["name"]: e["value"] for e in container["env"]}
        self.assertEqual(env["CCPOOL_NO_AUTOSTART"], "1")
        volumes = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        # Every host directory the job shares with the service is mounted at the same path in both.
        shared = 0
        for name, host in volumes.items():
            ds_name = next(n for n, p in ds_volumes.items() if p == host)
            self.assertEqual(mounts[name], ds_mounts[ds_name], f"{host} mounted at different paths")
            shared += 1
        self.assertEqual(shared, 2)
        self.assertIn(os.path.dirname(socket), mounts.values())
        for var in ("TMPDIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
            self.assertTrue(any(env[var].startswith(m + "/") for m in mounts.values()), var)


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    if not result.wasSuccessful():
        sys.exit(1)
    sys.exit(125 if result.skipped else 0)
