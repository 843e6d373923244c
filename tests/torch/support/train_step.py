"""A training step under torch.compile for tests/torch/graph_flight_test.py:
a Linear + GELU compiled with gradients on, one forward and one backward
(AOTAutograd compiles the backward graph lazily, at the first backward()),
checked against eager. Writes --out-dir/rank<R>.json: whether output and
gradients match eager, Inductor's counters, and the leases ccpool's hooks
still hold in this thread (python/ccpool/_graph_cache.py).

Environment (each simulates an Inductor that behaves so, underneath ccpool's
hooks):
  CCPOOL_TEST_NO_SAVE=1     Inductor stores no FX graph (as when pickling
                            one fails: fxgraph_cache_pickle_error).
  CCPOOL_TEST_FX_BYPASS=1   Inductor's FX cache bypasses every graph after
                            AOTAutograd's lookup (FxGraphCache._check_can_cache
                            raises when FxGraphCache.prepare_key calls it).
  CCPOOL_TEST_COMPILE_GATE=DIR, CCPOOL_TEST_COMPILE_FAIL=1  as in model.py
                            (its install_test_gates).
  CCPOOL_TEST_HOLD=DIR      after the step, create DIR/done.<pid> and wait for
                            DIR/exit (the test reads the service's leases
                            while this process lives).
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from model import install_test_gates

RANK = int(os.environ.get("RANK", "0"))


def wait_for(path):
    while not os.path.exists(path):
        time.sleep(0.05)


def install_test_behaviour():
    from torch._inductor import codecache
    if os.environ.get("CCPOOL_TEST_NO_SAVE") == "1":
        codecache.FxGraphCache._save_graph = staticmethod(lambda *args, **kwargs: None)
    if os.environ.get("CCPOOL_TEST_FX_BYPASS") == "1":
        real_check = codecache.FxGraphCache._check_can_cache

        def check(*args, **kwargs):
            # AOTAutograd checks the Dynamo graph with the same function before its
            # lookup; only the FX cache's own check (of the graphs AOTAutograd made)
            # bypasses, as when those hold something the Dynamo graph did not.
            if sys._getframe(1).f_code.co_name == "prepare_key":
                raise codecache.BypassFxGraphCache("simulated by the test")
            return real_check(*args, **kwargs)
        codecache.FxGraphCache._check_can_cache = staticmethod(check)
    install_test_gates()


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return F.gelu(self.fc(x)) * 1.25


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", required=True)
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    install_test_behaviour()

    torch.manual_seed(0)
    model = Block(16)
    x = torch.randn(8, 16)
    eager_out = model(x)
    eager_out.sum().backward()
    eager_grad = model.fc.weight.grad.clone()
    model.zero_grad()

    out = torch.compile(model)(x)
    out.sum().backward()
    ok = {"forward": bool(torch.allclose(out, eager_out, rtol=1e-4, atol=1e-5)),
          "backward": bool(torch.allclose(model.fc.weight.grad, eager_grad, rtol=1e-4, atol=1e-5))}

    held = None
    try:
        from ccpool import _graph_cache
        held = _graph_cache.held_count()
    except ImportError:
        pass
    import torch._dynamo.utils as du
    counters = {k: dict(v) for k, v in du.counters.items() if k in ("inductor", "aot_autograd")}
    result = {"rank": RANK, "pid": os.getpid(), "ok": ok, "held_leases": held, "counters": counters}
    with open(os.path.join(args.out_dir, f"rank{RANK}.json"), "w") as f:
        json.dump(result, f)
    print(json.dumps(result), flush=True)

    hold = os.environ.get("CCPOOL_TEST_HOLD")
    if hold:
        open(os.path.join(hold, f"done.{os.getpid()}"), "w").close()
        wait_for(os.path.join(hold, "exit"))
    return 0 if all(ok.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
