// The CPU kernels for x86-64 with AVX2, FMA and F16C (compiled with those
// flags by CMake, run only where the processor has them).
#define FA_CPU_ISA avx2
#include "mlx_fused_attn/backend/cpu/attention_kernel_impl.h"
#include "mlx_fused_attn/backend/cpu/backward_kernel_impl.h"
#include "mlx_fused_attn/backend/cpu/na_kernel_impl.h"
#include "mlx_fused_attn/backend/cpu/quantized_kernel_impl.h"
