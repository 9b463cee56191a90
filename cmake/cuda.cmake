# The CUDA backend of mlx_fused_attn, included by the top-level
# CMakeLists.txt when MLX was built with its CUDA backend (FA_GPU_BACKEND =
# cuda, found through the CUDA::cudart target that MLX's config brings in).
#
# - Host code: mlx_fused_attn/backend/cuda/*.cpp (launches through MLX's
#   command encoder; NVRTC and the driver are reached at run time).
# - AOT: nvcc builds the kernels for MLX_FUSED_ATTN_CUDA_ARCHITECTURES, one
#   object per head dim pair (the FA_ATTENTION_HEAD_DIMS list in
#   attention_config.h) so that they compile in parallel.
# - JIT: metal/flatten_source.py flattens the kernel sources into one text
#   embedded in the library; NVRTC compiles it when MLX_FUSED_ATTN_JIT=1 or
#   when the AOT kernels are off.

option(MLX_FUSED_ATTN_CUDA_AOT
       "Build the CUDA kernels ahead of time with nvcc (else only the JIT)" ON)
# 90a, not 90: Hopper's image may then use the warpgroup products (wgmma),
# which the plain sm_90 target lacks; it runs on sm_90 GPUs alone.
set(MLX_FUSED_ATTN_CUDA_ARCHITECTURES "80;90a"
    CACHE STRING "GPU architectures of the AOT kernels (sm_80 and later)")

set(FA_CUDA_DIR ${PROJECT_SOURCE_DIR}/mlx_fused_attn/backend/cuda)
file(GLOB FA_KERNEL_HEADERS CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/mlx_fused_attn/params.h
     ${PROJECT_SOURCE_DIR}/mlx_fused_attn/na_*.h
     ${PROJECT_SOURCE_DIR}/mlx_fused_attn/tile/*.h
     ${PROJECT_SOURCE_DIR}/mlx_fused_attn/kernels/*.h
     ${FA_CUDA_DIR}/*.cuh
     ${FA_CUDA_DIR}/block_sizes.h)
set(FA_CUDA_KERNEL_SOURCES
    ${FA_CUDA_DIR}/attention_kernel.cuh
    ${FA_CUDA_DIR}/na_kernel.cuh
    ${FA_CUDA_DIR}/short_attention_kernel.cuh
    ${FA_CUDA_DIR}/strided_copy_kernel.cuh
    ${FA_CUDA_DIR}/poison_kernel.cuh)

# JIT source, embedded.
set(FA_CUDA_JIT_SOURCE ${CMAKE_CURRENT_BINARY_DIR}/generated/cuda_jit_source.cpp)
add_custom_command(
  OUTPUT ${FA_CUDA_JIT_SOURCE}
  COMMAND "${Python_EXECUTABLE}" ${PROJECT_SOURCE_DIR}/metal/flatten_source.py
          -I ${PROJECT_SOURCE_DIR} --cpp ${FA_CUDA_JIT_SOURCE}
          --namespace mlx_fused_attn::cuda
          --header mlx_fused_attn/backend/cuda/jit_source.h
          attention=${FA_CUDA_DIR}/attention_kernel.cuh
          neighborhood=${FA_CUDA_DIR}/na_kernel.cuh
          short_attention=${FA_CUDA_DIR}/short_attention_kernel.cuh
          strided_copy=${FA_CUDA_DIR}/strided_copy_kernel.cuh,${FA_CUDA_DIR}/poison_kernel.cuh
  DEPENDS ${PROJECT_SOURCE_DIR}/metal/flatten_source.py ${FA_KERNEL_HEADERS}
          ${FA_CUDA_KERNEL_SOURCES}
  COMMENT "Embedding the CUDA kernel sources for NVRTC"
  VERBATIM)

# NVRTC's header, for the types of the entry points loaded at run time: in
# the toolkit, or in pip's nvidia-cuda-nvrtc beside MLX.
execute_process(
  COMMAND "${Python_EXECUTABLE}" -c
          "import nvidia, os; print(';'.join(os.path.join(p, s, 'include') for p in nvidia.__path__ for s in ('cu13', 'cuda_nvrtc')))"
  OUTPUT_VARIABLE FA_PIP_CUDA_INCLUDES
  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
find_path(FA_NVRTC_INCLUDE_DIR nvrtc.h
          HINTS ${CUDAToolkit_INCLUDE_DIRS} ${FA_PIP_CUDA_INCLUDES} REQUIRED)

target_sources(
  mlx_fused_attn
  PRIVATE ${FA_CUDA_DIR}/attention_cuda.cpp ${FA_CUDA_DIR}/device_buffer.cpp
          ${FA_CUDA_DIR}/device_limits.cpp
          ${FA_CUDA_DIR}/kernels.cpp ${FA_CUDA_DIR}/na_cuda.cpp
          ${PROJECT_SOURCE_DIR}/mlx_fused_attn/backend/attention_covers.cpp
          ${PROJECT_SOURCE_DIR}/mlx_fused_attn/backend/na_launch.cpp
          ${PROJECT_SOURCE_DIR}/mlx_fused_attn/backend/no_gpu_backward.cpp
          ${FA_CUDA_DIR}/nvrtc_compiler.cpp ${FA_CUDA_DIR}/short_attention_cuda.cpp
          ${FA_CUDA_JIT_SOURCE})
target_include_directories(mlx_fused_attn PRIVATE ${CUDAToolkit_INCLUDE_DIRS}
                                                  ${FA_NVRTC_INCLUDE_DIR})
# MLX's CUDA headers include <fmt/format.h>, which its wheel lacks.
find_path(FA_FMT_INCLUDE_DIR fmt/format.h)
if(NOT FA_FMT_INCLUDE_DIR)
  set(FA_FMT_INCLUDE_DIR ${FA_CUDA_DIR}/fmt_compat)
endif()
target_include_directories(mlx_fused_attn PRIVATE ${FA_FMT_INCLUDE_DIR})
list(GET CUDAToolkit_INCLUDE_DIRS 0 FA_CUDA_TOOLKIT_INCLUDE_DIR)
target_compile_definitions(
  mlx_fused_attn
  PRIVATE FA_CUDA_TOOLKIT_INCLUDE_DIR="${FA_CUDA_TOOLKIT_INCLUDE_DIR}")
# The static CUDA runtime, kept private: the AOT kernels register with it,
# and MLX's own (also static and hidden) must not be confused with it.
target_link_libraries(mlx_fused_attn PRIVATE CUDA::cudart_static)
target_link_options(mlx_fused_attn PRIVATE "LINKER:--exclude-libs,ALL")

if(MLX_FUSED_ATTN_CUDA_AOT)
  enable_language(CUDA)
  # The (q and k, v) head dim pairs: the macro, its continued lines joined.
  file(READ ${PROJECT_SOURCE_DIR}/mlx_fused_attn/kernels/attention_config.h
       FA_ATTENTION_CONFIG)
  string(REPLACE "\\\n" " " FA_ATTENTION_CONFIG "${FA_ATTENTION_CONFIG}")
  string(REGEX MATCH "#define FA_ATTENTION_HEAD_DIMS\\(X\\)[^\n]*"
               FA_HEAD_DIMS_TEXT "${FA_ATTENTION_CONFIG}")
  string(REGEX MATCHALL "X\\([0-9]+, *[0-9]+\\)" FA_HEAD_DIM_ITEMS
               "${FA_HEAD_DIMS_TEXT}")
  add_library(fa_aot_kernels OBJECT ${FA_CUDA_DIR}/aot_kernels.cu)
  set(FA_CUDA_OBJECT_LIBS fa_aot_kernels)
  foreach(item ${FA_HEAD_DIM_ITEMS})
    string(REGEX REPLACE "X\\(([0-9]+), *([0-9]+)\\)" "\\1" head_dim "${item}")
    string(REGEX REPLACE "X\\(([0-9]+), *([0-9]+)\\)" "\\2" head_dim_v "${item}")
    set(lib fa_attention_d${head_dim}_dv${head_dim_v})
    add_library(${lib} OBJECT ${FA_CUDA_DIR}/attention_aot.cu)
    target_compile_definitions(
      ${lib} PRIVATE FA_AOT_HEAD_DIM=${head_dim} FA_AOT_HEAD_DIM_V=${head_dim_v})
    list(APPEND FA_CUDA_OBJECT_LIBS ${lib})
  endforeach()
  # The short-sequence kernels (short_attention_config.h), one object per
  # head dim likewise.
  file(STRINGS ${PROJECT_SOURCE_DIR}/mlx_fused_attn/kernels/short_attention_config.h
       FA_SHORT_HEAD_DIMS_LINE REGEX "^#define FA_SHORT_ATTENTION_HEAD_DIMS")
  string(REGEX MATCHALL "X\\([0-9]+\\)" FA_SHORT_HEAD_DIM_ITEMS
               "${FA_SHORT_HEAD_DIMS_LINE}")
  foreach(item ${FA_SHORT_HEAD_DIM_ITEMS})
    string(REGEX REPLACE "X\\(([0-9]+)\\)" "\\1" head_dim "${item}")
    add_library(fa_short_attention_d${head_dim} OBJECT
                ${FA_CUDA_DIR}/short_attention_aot.cu)
    target_compile_definitions(fa_short_attention_d${head_dim}
                               PRIVATE FA_SHORT_AOT_HEAD_DIM=${head_dim})
    list(APPEND FA_CUDA_OBJECT_LIBS fa_short_attention_d${head_dim})
  endforeach()
  # The neighborhood kernels (na_config.h), one object per number of
  # spatial axes.
  file(STRINGS ${PROJECT_SOURCE_DIR}/mlx_fused_attn/kernels/na_config.h
       FA_NA_AXES_LINE REGEX "^#define FA_NA_AXES")
  string(REGEX MATCHALL "X\\([0-9]+\\)" FA_NA_AXES_ITEMS "${FA_NA_AXES_LINE}")
  foreach(item ${FA_NA_AXES_ITEMS})
    string(REGEX REPLACE "X\\(([0-9]+)\\)" "\\1" n_axes "${item}")
    add_library(fa_na_${n_axes}d OBJECT ${FA_CUDA_DIR}/na_aot.cu)
    target_compile_definitions(fa_na_${n_axes}d PRIVATE FA_NA_AOT_AXES=${n_axes})
    list(APPEND FA_CUDA_OBJECT_LIBS fa_na_${n_axes}d)
  endforeach()
  foreach(lib ${FA_CUDA_OBJECT_LIBS})
    target_include_directories(${lib} PRIVATE ${PROJECT_SOURCE_DIR})
    set_target_properties(
      ${lib} PROPERTIES CUDA_ARCHITECTURES "${MLX_FUSED_ATTN_CUDA_ARCHITECTURES}"
                        CUDA_STANDARD 17 POSITION_INDEPENDENT_CODE ON)
    # -lineinfo: source lines for compute-sanitizer and profilers, no cost.
    target_compile_options(${lib} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo>)
    target_sources(mlx_fused_attn PRIVATE $<TARGET_OBJECTS:${lib}>)
  endforeach()
  target_compile_definitions(mlx_fused_attn PRIVATE MLX_FUSED_ATTN_HAS_CUDA_AOT)
  if("90a" IN_LIST MLX_FUSED_ATTN_CUDA_ARCHITECTURES)
    target_compile_definitions(mlx_fused_attn PRIVATE MLX_FUSED_ATTN_AOT_SM90A)
  endif()
endif()
message(STATUS "mlx_fused_attn: CUDA AOT kernels = ${MLX_FUSED_ATTN_CUDA_AOT} "
               "(${MLX_FUSED_ATTN_CUDA_ARCHITECTURES})")
