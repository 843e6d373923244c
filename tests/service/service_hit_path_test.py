"""Where the service serves a hit (issue 27, hand-offs).

A request that arrives while the service has nothing else to do is served on
the I/O thread: no request thread is woken, and hello-ok and the reply leave in
one write. A hit whose delivery could be long or block (more than 1 MiB, an
output that is not a regular file) still goes to a request thread, and is
served there byte for byte.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from harness import ServiceCase, main  # noqa: E402

# A declared job: out.bin gets $1 bytes derived from in.txt.
TOOL = r"""#!/bin/sh
/usr/bin/python3 -c '
import sys
seed = open("in.txt").read().encode()
n = int(sys.argv[1])
open("out.bin", "wb").write((seed * (n // max(1, len(seed)) + 1))[:n])
' "$1"
echo "made $1 bytes"
"""


class ServiceHitPathTest(ServiceCase):
    def setUp(self):
        super().setUp()
        self.write("work/tool.sh", TOOL, 0o755)
        self.write("work/in.txt", "seed-1;")

    def request(self, size, settle=False):
        if settle:
            # The last `ccpool status` connection's end must not share the
            # I/O thread's wait with this request (it would not be quiet).
            time.sleep(0.3)
        return self.run_exec(["/bin/sh", "tool.sh", str(size)], inputs=["in.txt"],
                             outputs=["out.bin"])

    def miss_then_hit(self, size):
        """The miss, then the same request again; the status after each."""
        self.assertEqual(self.request(size), (0, f"made {size} bytes\n".encode(), b""))
        made = self.read_bytes("work/out.bin")
        self.assertEqual(len(made), size)
        first = self.status()
        self.assertEqual((first["misses"], first["hits"]), (1, 0))
        os.remove(os.path.join(self.work, "out.bin"))
        return made, first

    def read_bytes(self, rel):
        with open(self.path(rel), "rb") as f:
            return f.read()

    def test_quiet_hit_is_served_on_the_io_thread_in_one_write(self):
        self.start_service(jobs=2)
        made, first = self.miss_then_hit(4096)
        self.assertEqual(self.request(4096, settle=True), (0, b"made 4096 bytes\n", b""))
        self.assertEqual(self.read_bytes("work/out.bin"), made)
        s = self.status()
        self.assertEqual((s["misses"], s["hits"], s["hits_on_io_thread"]), (1, 1, 1))
        # Writes since the first status was counted: that status' reply, the
        # hit's hello-ok and reply in one write, and the hello-ok of the
        # second `ccpool status` (which greets before it asks).
        self.assertEqual(s["connection_writes"] - first["connection_writes"], 1 + 1 + 1)

    def test_switched_off_every_hit_goes_to_a_request_thread(self):
        self.start_service(jobs=2, extra_env={"CCPOOL_IO_THREAD_HITS": "0"})
        made, first = self.miss_then_hit(4096)
        self.assertEqual(self.request(4096, settle=True), (0, b"made 4096 bytes\n", b""))
        self.assertEqual(self.read_bytes("work/out.bin"), made)
        s = self.status()
        self.assertEqual((s["hits"], s["hits_on_io_thread"]), (1, 0))
        # As above, but the hit's hello-ok is written at once and its reply
        # later by the request thread: two writes.
        self.assertEqual(s["connection_writes"] - first["connection_writes"], 1 + 2 + 1)

    def test_large_delivery_goes_to_a_request_thread(self):
        self.start_service(jobs=2)
        size = 3 * 1024 * 1024  # past the I/O thread's 1 MiB
        made, _ = self.miss_then_hit(size)
        self.assertEqual(self.request(size, settle=True), (0, f"made {size} bytes\n".encode(), b""))
        self.assertEqual(self.read_bytes("work/out.bin"), made)
        s = self.status()
        self.assertEqual((s["misses"], s["hits"], s["hits_on_io_thread"]), (1, 1, 0))
        # The control, in the same service: a small one is served there.
        self.assertEqual(self.request(4096), (0, b"made 4096 bytes\n", b""))
        self.assertEqual(self.request(4096, settle=True), (0, b"made 4096 bytes\n", b""))
        s = self.status()
        self.assertEqual((s["misses"], s["hits"], s["hits_on_io_thread"]), (2, 2, 1))

    def test_fifo_output_goes_to_a_request_thread(self):
        self.start_service(jobs=2)
        made, _ = self.miss_then_hit(4096)
        # The output is now a FIFO with a reader: the hit writes into it in
        # place, which can block, so not on the I/O thread. The reader is
        # open before the request; 4096 bytes wait in the pipe until read.
        fifo = os.path.join(self.work, "out.bin")
        os.mkfifo(fifo)
        rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        try:
            self.assertEqual(self.request(4096, settle=True), (0, b"made 4096 bytes\n", b""))
            got = os.read(rfd, 1 << 20)
        finally:
            os.close(rfd)
        self.assertEqual(got, made)
        s = self.status()
        self.assertEqual((s["hits"], s["hits_on_io_thread"]), (1, 0))
        # The control: a regular file there again, served on the I/O thread.
        os.remove(fifo)
        self.assertEqual(self.request(4096, settle=True), (0, b"made 4096 bytes\n", b""))
        self.assertEqual(self.read_bytes("work/out.bin"), made)
        s = self.status()
        self.assertEqual((s["hits"], s["hits_on_io_thread"]), (2, 1))


if __name__ == "__main__":
    main()
