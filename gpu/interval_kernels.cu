// Elementwise interval kernels. The bodies are the shared LB_HD rules of core/interval, so the
// device runs exactly the code that the host tests check (with the rounding table mapped to the
// CUDA directed-rounding intrinsics).
#include <cuda_runtime.h>

#include "core/interval/elementary.h"
#include "core/interval/interval.h"
#include "core/interval/precision.h"

namespace lossbound::gpu {

/// Binary interval operations available as kernels.
enum class BinaryOp { Add, Sub, Mul, Div };

__global__ void binaryIntervalKernel(BinaryOp op, const Interval* x, const Interval* y,
                                     Interval* out, long n) {
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  switch (op) {
    case BinaryOp::Add: out[i] = add(x[i], y[i]); break;
    case BinaryOp::Sub: out[i] = sub(x[i], y[i]); break;
    case BinaryOp::Mul: out[i] = mul(x[i], y[i]); break;
    case BinaryOp::Div: out[i] = div(x[i], y[i]); break;
  }
}

__global__ void unaryIntervalKernel(Elementary f, const Interval* x, Interval* out, long n) {
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  switch (f) {
    case Elementary::Exp: out[i] = exp(x[i]); break;
    case Elementary::Expm1: out[i] = expm1(x[i]); break;
    case Elementary::Log: out[i] = log(x[i]); break;
    case Elementary::Log1p: out[i] = log1p(x[i]); break;
    case Elementary::Tanh: out[i] = tanh(x[i]); break;
    case Elementary::Erf: out[i] = erf(x[i]); break;
  }
}

__global__ void roundOutwardKernel(Format f, const Interval* x, Interval* out, long n) {
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = roundOutward(x[i], f);
}

}  // namespace lossbound::gpu
