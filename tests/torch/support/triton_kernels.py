"""Compiles a few small Triton kernels for an explicit GPU target, with no
GPU and no driver: ttir -> ttgir -> llir -> ptx run in-process, and only the
cubin step execs ptxas (TRITON_PTXAS_PATH picks which one). Prints one JSON
object: kernel name -> sha256 of its cubin, and writes the cubins to
--out-dir/<name>.cubin."""
import argparse
import hashlib
import json
import os

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + row * stride + offs, mask=offs < n_cols, other=-float("inf"))
    num = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * stride + offs, num / tl.sum(num, axis=0), mask=offs < n_cols)


@triton.jit
def rowsum_kernel(out_ptr, in_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + row * stride + offs, mask=offs < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(x * x, axis=0))


KERNELS = [
    ("add", add_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32",
                         "BLOCK": "constexpr"}, {"BLOCK": 1024}),
    ("softmax", softmax_kernel, {"out_ptr": "*fp32", "in_ptr": "*fp32", "stride": "i32",
                                 "n_cols": "i32", "BLOCK": "constexpr"}, {"BLOCK": 256}),
    ("rowsum", rowsum_kernel, {"out_ptr": "*fp32", "in_ptr": "*fp32", "stride": "i32",
                               "n_cols": "i32", "BLOCK": "constexpr"}, {"BLOCK": 128}),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--arch", type=int, default=90)
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    target = GPUTarget("cuda", args.arch, 32)
    result = {}
    for name, fn, signature, constexprs in KERNELS:
        kernel = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs),
                                target=target)
        cubin = kernel.asm["cubin"]
        with open(os.path.join(args.out_dir, name + ".cubin"), "wb") as f:
            f.write(cubin)
        result[name] = hashlib.sha256(cubin).hexdigest()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
