# The CUDA backend of mlx_fused_attn, included by the top-level
# CMakeLists.txt when MLX was built with its CUDA backend (FA_GPU_BACKEND =
# cuda, found through the CUDA::cudart target that MLX's config brings in).
#
# - Host code: mlx_fused_attn/backend/cuda/*.cpp and each kernel family's
#   mlx_fused_attn/families/*/cuda/*.cpp (launches through MLX's
#   command encoder; NVRTC and the driver are reached at run time).
# - AOT: nvcc builds the kernels for MLX_FUSED_ATTN_CUDA_ARCHITECTURES, one
#   object per table of mlx_fused_attn/families/*/aot/ (written from the
#   tile choosers by tools/gen_instances.py) so that they compile in
#   parallel.
# - JIT: cmake/flatten_source.py flattens the kernel sources into one text
#   embedded in the library; NVRTC compiles it when MLX_FUSED_ATTN_JIT=1 or
#   when the AOT kernels are off.

option(MLX_FUSED_ATTN_CUDA_AOT
       "Build the CUDA kernels ahead of time with nvcc (else only the JIT)" ON)
# 90a, not 90: Hopper's image may then use the warpgroup products (wgmma),
# which the plain sm_90 target lacks; it runs on sm_90 GPUs alone.
set(MLX_FUSED_ATTN_CUDA_ARCHITECTURES "80;90a"
    CACHE STRING "GPU architectures of the AOT kernels (sm_80 and later)")

set(FA_CUDA_DIR ${PROJECT_SOURCE_DIR}/mlx_fused_attn/backend/cuda)
set(FA_FAMILIES_DIR ${PROJECT_SOURCE_DIR}/mlx_fused_attn/families)
file(GLOB FA_KERNEL_HEADERS CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/mlx_fused_attn/params.h
     ${PROJECT_SOURCE_DIR}/mlx_fused_attn/na_*.h
     ${PROJECT_SOURCE_DIR}/mlx_fused_attn/tile/*.h
     ${PROJECT_SOURCE_DIR}/mlx_fused_attn/kernels/*.h
     ${PROJECT_SOURCE_DIR}/mlx_fused_attn/kernels/cuda/*
     ${FA_FAMILIES_DIR}/*/*.h)
# A family's CUDA entry points are its folder's *_kernel.cuh: one NVRTC text
# a folder, keyed by the folder's name (families/registry.h).
file(GLOB FA_CUDA_KERNEL_SOURCES CONFIGURE_DEPENDS
     ${FA_FAMILIES_DIR}/*/*_kernel.cuh)
set(FA_CUDA_JIT_FAMILIES)
file(GLOB FA_FAMILY_DIRS LIST_DIRECTORIES true ${FA_FAMILIES_DIR}/*)
foreach(dir IN LISTS FA_FAMILY_DIRS)
  file(GLOB entry_points ${dir}/*_kernel.cuh)
  if(entry_points)
    get_filename_component(family ${dir} NAME)
    list(JOIN entry_points "," joined)
    list(APPEND FA_CUDA_JIT_FAMILIES "${family}=${joined}")
  endif()
endforeach()

# JIT source, embedded.
set(FA_CUDA_JIT_SOURCE ${CMAKE_CURRENT_BINARY_DIR}/generated/cuda_jit_source.cpp)
add_custom_command(
  OUTPUT ${FA_CUDA_JIT_SOURCE}
  COMMAND "${Python_EXECUTABLE}" ${PROJECT_SOURCE_DIR}/cmake/flatten_source.py
          -I ${PROJECT_SOURCE_DIR} --cpp ${FA_CUDA_JIT_SOURCE}
          --namespace mlx_fused_attn::cuda
          --header mlx_fused_attn/backend/cuda/jit_source.h
          ${FA_CUDA_JIT_FAMILIES}
  DEPENDS ${PROJECT_SOURCE_DIR}/cmake/flatten_source.py ${FA_KERNEL_HEADERS}
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

# The backend's own host code and each family's (families/*/cuda/).
file(GLOB FA_CUDA_FAMILY_HOST CONFIGURE_DEPENDS ${FA_FAMILIES_DIR}/*/cuda/*.cpp)
target_sources(
  mlx_fused_attn
  PRIVATE ${FA_CUDA_DIR}/attention_cuda.cpp ${FA_CUDA_DIR}/attention_launch.cpp
          ${FA_CUDA_DIR}/device_buffer.cpp
          ${FA_CUDA_DIR}/device_limits.cpp
          ${FA_CUDA_DIR}/kernels.cpp ${FA_CUDA_DIR}/launch_common.cpp
          ${FA_CUDA_DIR}/nvrtc_compiler.cpp
          ${FA_CUDA_DIR}/split_partials.cpp
          ${FA_CUDA_DIR}/tensor_map.cpp
          ${FA_CUDA_FAMILY_HOST}
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
  file(GLOB FA_AOT_TABLES CONFIGURE_DEPENDS ${FA_FAMILIES_DIR}/*/aot/*.cu)
  foreach(table ${FA_AOT_TABLES})
    get_filename_component(group ${table} NAME_WE)
    set(lib fa_aot_${group})
    add_library(${lib} OBJECT ${table})
    target_include_directories(${lib} PRIVATE ${PROJECT_SOURCE_DIR})
    set_target_properties(
      ${lib} PROPERTIES CUDA_ARCHITECTURES "${MLX_FUSED_ATTN_CUDA_ARCHITECTURES}"
                        CUDA_STANDARD 17 POSITION_INDEPENDENT_CODE ON)
    # -lineinfo: source lines for compute-sanitizer and profilers, no cost.
    target_compile_options(${lib} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo>)
    target_sources(mlx_fused_attn PRIVATE $<TARGET_OBJECTS:${lib}>)
  endforeach()
  target_sources(mlx_fused_attn PRIVATE ${FA_CUDA_DIR}/aot_kernels.cpp)
  target_compile_definitions(mlx_fused_attn PRIVATE MLX_FUSED_ATTN_HAS_CUDA_AOT)
  if("90a" IN_LIST MLX_FUSED_ATTN_CUDA_ARCHITECTURES)
    target_compile_definitions(mlx_fused_attn PRIVATE MLX_FUSED_ATTN_AOT_SM90A)
  endif()
endif()
message(STATUS "mlx_fused_attn: CUDA AOT kernels = ${MLX_FUSED_ATTN_CUDA_AOT} "
               "(${MLX_FUSED_ATTN_CUDA_ARCHITECTURES})")
