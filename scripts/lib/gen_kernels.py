#!/usr/bin/env python3
"""Writes N Inductor-like C++ kernels: heavy standard headers, OpenMP loops,
one exported entry point each. Every kernel differs (a constant and a loop
body), so each is one unique compile of a few hundred milliseconds."""
import os
import sys

TEMPLATE = r'''
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <numeric>
#include <string>
#include <vector>
#include <omp.h>

namespace {{
template <typename T>
T reduce_{idx}(const std::vector<T>& v) {{
  return std::accumulate(v.begin(), v.end(), T(0)) * T({scale});
}}
}}

extern "C" void kernel(const float* in_ptr0, float* out_ptr0, int64_t n) {{
  #pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) {{
    float x = in_ptr0[i];
    out_ptr0[i] = std::tanh(x * {scale}f) + std::exp(-x * x) * {idx}.0f;
  }}
  std::vector<float> tmp(out_ptr0, out_ptr0 + std::min<int64_t>(n, 16));
  std::sort(tmp.begin(), tmp.end(), std::greater<float>());
  std::map<std::string, float> stats{{{{"k{idx}", reduce_{idx}(tmp)}}}};
  if (n > 0) out_ptr0[0] += stats.begin()->second * 0.0f;
}}

extern "C" int kernel_id() {{ return {idx}; }}
'''

def main():
    out_dir, count = sys.argv[1], int(sys.argv[2])
    os.makedirs(out_dir, exist_ok=True)
    for i in range(count):
        path = os.path.join(out_dir, f"k{i:03d}.cpp")
        with open(path, "w") as f:
            f.write(TEMPLATE.format(idx=i, scale=1.0 + i / 7.0))

if __name__ == "__main__":
    main()
