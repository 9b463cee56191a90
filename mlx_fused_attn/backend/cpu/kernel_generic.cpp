// The CPU kernels for the baseline instruction set of the target.
#define FA_CPU_ISA generic
#include "mlx_fused_attn/backend/cpu/attention_kernel_impl.h"
#include "mlx_fused_attn/backend/cpu/backward_kernel_impl.h"
#include "mlx_fused_attn/backend/cpu/na_kernel_impl.h"
#include "mlx_fused_attn/backend/cpu/quantized_kernel_impl.h"
