#include "mlx_fused_attn/backend/cuda/aot_kernels.h"

#include <initializer_list>
#include <unordered_map>

#include "mlx_fused_attn/backend/cuda/aot/tables.h"

namespace mlx_fused_attn::cuda {

#define FA_DECLARE_AOT_TABLE(group) extern const AotTable aot_##group;
FA_AOT_TABLES(FA_DECLARE_AOT_TABLE)
#undef FA_DECLARE_AOT_TABLE
#define FA_AOT_TABLE_REF(group) aot_##group,

const void* aot_kernel(const std::string& expression) {
  static const std::unordered_map<std::string, const void*> index = [] {
    std::unordered_map<std::string, const void*> index;
    for (const AotTable& table : {FA_AOT_TABLES(FA_AOT_TABLE_REF)}) {
      for (int i = 0; i < table.size; ++i) {
        index.emplace(table.kernels[i].expression, table.kernels[i].symbol);
      }
    }
    return index;
  }();
  const auto it = index.find(expression);
  return it == index.end() ? nullptr : it->second;
}
#undef FA_AOT_TABLE_REF

} // namespace mlx_fused_attn::cuda
