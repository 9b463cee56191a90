// The CPU kernel for the baseline instruction set of the target.
#define FA_CPU_ISA generic
#include "mlx_fused_attn/backend/cpu/kernel_impl.h"
