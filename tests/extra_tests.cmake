# Tests registered from other folders' targets; included by tests/CMakeLists.txt.

# Attention variants: the conformance checker on every shipped option set.
include(${PROJECT_SOURCE_DIR}/plugins/conformance_tests.cmake)

# CUDA backend. Without a GPU: the host-side plan, a clean "no CUDA device"
# rejection, and every kernel run by the emulator against the CPU backend.
# With a GPU (label "cuda", run by scripts/gpu_check.sh): the real kernels;
# these skip (never pass) when there is no device.
if(TARGET test_cuda_plan)
  add_test(NAME cuda.plan COMMAND test_cuda_plan)
  set_tests_properties(cuda.plan PROPERTIES LABELS "c;valgrind")
endif()
if(TARGET test_cuda_load)
  add_test(NAME cuda.load COMMAND test_cuda_load ${EMBER_BUILD_PLUGIN_DIR}/ember_backend_cuda.so any)
  set_tests_properties(cuda.load PROPERTIES LABELS "c;cuda" SKIP_RETURN_CODE 77 ENVIRONMENT "${TEST_ENV}")
endif()
if(TARGET test_cuda_emu)
  add_test(NAME cuda.emu_rules COMMAND test_cuda_emu)
  set_tests_properties(cuda.emu_rules PROPERTIES LABELS "c")
endif()
if(TARGET ember_backend_cuda_emu)
  add_test(NAME cuda.emu_vs_cpu COMMAND gpu_vs_cpu
    --cuda $<TARGET_FILE:ember_backend_cuda_emu> --cpu $<TARGET_FILE:ember_backend_cpu>)
  set_tests_properties(cuda.emu_vs_cpu PROPERTIES LABELS "c" TIMEOUT 900)
  add_test(NAME cuda.emu_no_device COMMAND test_cuda_load $<TARGET_FILE:ember_backend_cuda_emu> reject)
  set_tests_properties(cuda.emu_no_device PROPERTIES LABELS "c" ENVIRONMENT "${TEST_ENV};EMC_EMU_DEVICES=0")
  # declared variants on the emulated device: the fused kernel takes them all
  # (a silent fallback to the composition fails), equal to the CPU
  add_test(NAME cuda.emu_declared_fused
    COMMAND ${EMBER_BIN} ${CMAKE_CURRENT_SOURCE_DIR}/cuda/emu_declared_fused.lua
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(cuda.emu_declared_fused PROPERTIES LABELS "lua" TIMEOUT 600
    ENVIRONMENT "OMP_NUM_THREADS=2;EMBER_PLUGIN_PATH_ONLY=1;EMBER_PLUGIN_PATH=$<TARGET_FILE_DIR:ember_backend_cuda_emu>:${EMBER_BUILD_PLUGIN_DIR}")
  # variants written in Lua (plugins/flex) on the emulated device: their traced
  # programs run in the fused kernel, equal to the CPU; bad input is an error
  add_test(NAME cuda.emu_lua_variants
    COMMAND ${EMBER_BIN} ${CMAKE_CURRENT_SOURCE_DIR}/cuda/emu_lua_variants.lua
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(cuda.emu_lua_variants PROPERTIES LABELS "lua" TIMEOUT 600
    ENVIRONMENT "OMP_NUM_THREADS=2;EMBER_PLUGIN_PATH_ONLY=1;EMBER_PLUGIN_PATH=$<TARGET_FILE_DIR:ember_backend_cuda_emu>:${EMBER_BUILD_PLUGIN_DIR}")
  # autocast on the emulated device: bfloat16 gemm and fused attention, float32 gradients
  add_test(NAME cuda.emu_autocast
    COMMAND ${EMBER_BIN} ${CMAKE_CURRENT_SOURCE_DIR}/cuda/emu_autocast.lua
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(cuda.emu_autocast PROPERTIES LABELS "lua" TIMEOUT 600 SKIP_RETURN_CODE 77
    ENVIRONMENT "OMP_NUM_THREADS=2;EMBER_PLUGIN_PATH_ONLY=1;EMBER_PLUGIN_PATH=$<TARGET_FILE_DIR:ember_backend_cuda_emu>:${EMBER_BUILD_PLUGIN_DIR}")
  # the variants benchmark of scripts/gpu_check.sh at tiny sizes: it runs, and
  # every variant stays on the fused route (exit 1 otherwise)
  add_test(NAME cuda.emu_bench_variants
    COMMAND ${EMBER_BIN} ${PROJECT_SOURCE_DIR}/scripts/bench/attention_variants_cuda.lua
            --lengths 64,130 --heads 2 --head-dim 16 --reps 1
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(cuda.emu_bench_variants PROPERTIES LABELS "lua" TIMEOUT 300
    ENVIRONMENT "OMP_NUM_THREADS=2;EMBER_PLUGIN_PATH_ONLY=1;EMBER_PLUGIN_PATH=$<TARGET_FILE_DIR:ember_backend_cuda_emu>:${EMBER_BUILD_PLUGIN_DIR}")
endif()
if(TARGET gpu_vs_cpu AND TARGET ember_backend_cuda)
  add_test(NAME cuda.gpu_vs_cpu COMMAND gpu_vs_cpu
    --cuda $<TARGET_FILE:ember_backend_cuda> --cpu $<TARGET_FILE:ember_backend_cpu>)
  set_tests_properties(cuda.gpu_vs_cpu PROPERTIES LABELS "cuda" SKIP_RETURN_CODE 77)
endif()

# The GPU test subset through the Lua API: op parity and gradients against the
# committed PyTorch fixtures, the attention variants against the CPU, and a
# short training run whose loss curve tracks the CPU run. They skip (exit 77)
# without a CUDA device; scripts/gpu_check.sh runs them with `ctest -L cuda`.
foreach(spec ops_parity_spec gradcheck_spec attention_spec mha_parity_spec)
  add_test(NAME cuda.${spec}
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cuda/run_on_gpu.sh ${EMBER_BIN}
            ${CMAKE_CURRENT_SOURCE_DIR}/lua/${spec}.lua busted
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(cuda.${spec} PROPERTIES LABELS "cuda" SKIP_RETURN_CODE 77 ENVIRONMENT "${TEST_ENV}")
endforeach()
add_test(NAME cuda.train_tracks_cpu
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cuda/run_on_gpu.sh ${EMBER_BIN}
          ${CMAKE_CURRENT_SOURCE_DIR}/cuda/train_tracks_cpu.lua
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(cuda.train_tracks_cpu PROPERTIES LABELS "cuda" SKIP_RETURN_CODE 77 ENVIRONMENT "${TEST_ENV}")

# ember.distributed over MPI (tests/distributed/): every program on 2 ranks
# and on 3 (uneven shards), oversubscribed on CI's 2 cores; they skip (77)
# without mpirun or without the MPI module. PROCESSORS keeps ctest -j2 from
# running two jobs of ranks at once.
foreach(np 2 3)
  foreach(prog collectives ddp sampler_and_mismatch)
    add_test(NAME mpi.${prog}.np${np}
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/distributed/run_mpi.sh ${EMBER_BIN} ${np}
              ${CMAKE_CURRENT_SOURCE_DIR}/distributed/${prog}.lua
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(mpi.${prog}.np${np} PROPERTIES LABELS "mpi" SKIP_RETURN_CODE 77
      PROCESSORS 2 TIMEOUT 600 ENVIRONMENT "${TEST_ENV}")
  endforeach()
  add_test(NAME mpi.fault.np${np}
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/distributed/test_fault.sh ${EMBER_BIN} ${np}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(mpi.fault.np${np} PROPERTIES LABELS "mpi" SKIP_RETURN_CODE 77
    PROCESSORS 2 TIMEOUT 600 ENVIRONMENT "${TEST_ENV}")
endforeach()
# The collectives over TCP loopback too: all_reduce takes doubling there up
# to 1 MiB at 2 ranks, and sends messages of 32-128 KiB in 32 KiB pieces.
add_test(NAME mpi.collectives.tcp.np2
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/distributed/run_mpi.sh ${EMBER_BIN} 2
          ${CMAKE_CURRENT_SOURCE_DIR}/distributed/collectives.lua
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(mpi.collectives.tcp.np2 PROPERTIES LABELS "mpi" SKIP_RETURN_CODE 77
  PROCESSORS 2 TIMEOUT 600 ENVIRONMENT "${TEST_ENV};EMBER_MPIRUN_ARGS=--mca btl self,tcp")
# Each all_reduce algorithm forced at every size (EMBER_DIST_ALLREDUCE), at
# 3 ranks (one folds in), 4 (two steps each way) and 6 (two fold in), halving
# over TCP at 3; and at 4 ranks as chosen by size (auto: above 32 KiB,
# halving with two steps each way, which 2 ranks never take).
foreach(case "auto;4;" "doubling;4;" "doubling;6;" "ring;3;" "ring;4;" "halving;3;--mca btl self,tcp" "halving;4;" "halving;6;" "mpi;3;")
  list(GET case 0 algo)
  list(GET case 1 np)
  list(GET case 2 btl)
  add_test(NAME mpi.collectives.${algo}.np${np}
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/distributed/run_mpi.sh ${EMBER_BIN} ${np}
            ${CMAKE_CURRENT_SOURCE_DIR}/distributed/collectives.lua
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(mpi.collectives.${algo}.np${np} PROPERTIES LABELS "mpi" SKIP_RETURN_CODE 77
    PROCESSORS 2 TIMEOUT 600 ENVIRONMENT "${TEST_ENV};EMBER_DIST_ALLREDUCE=${algo};EMBER_MPIRUN_ARGS=${btl}")
endforeach()
# The docs' distributed usage examples run on 2 ranks inside this spec
# (tests/lua/doc_examples_spec.lua starts mpirun through run_mpi.sh).
set_tests_properties(lua.doc_examples_spec PROPERTIES PROCESSORS 2)
# Every training script's --smoke run under mpirun -np 2.
add_test(NAME mpi.scripts.np2
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/distributed/test_scripts.sh ${EMBER_BIN}
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(mpi.scripts.np2 PROPERTIES LABELS "mpi" SKIP_RETURN_CODE 77
  PROCESSORS 2 TIMEOUT 1500 ENVIRONMENT "${TEST_ENV}")
# CUDA tensors through host staging, and with MPI told it is CUDA-aware
# (device memory goes to MPI as it is), on the emulated CUDA backend (no GPU needed).
if(TARGET ember_backend_cuda_emu)
  foreach(route "cuda_staging;0" "cuda_aware;1")
    list(GET route 0 name)
    list(GET route 1 aware)
    add_test(NAME mpi.${name}.np2
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/distributed/run_mpi.sh ${EMBER_BIN} 2
              ${CMAKE_CURRENT_SOURCE_DIR}/distributed/cuda_staging.lua
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(mpi.${name}.np2 PROPERTIES LABELS "mpi" SKIP_RETURN_CODE 77 PROCESSORS 2
      ENVIRONMENT "EMBER_PLUGIN_PATH=${EMBER_BUILD_PLUGIN_DIR}:$<TARGET_FILE_DIR:ember_backend_cuda_emu>;EMBER_PLUGIN_PATH_ONLY=1;EMBER_SOURCE_DIR=${PROJECT_SOURCE_DIR};EMBER_BUILD_DIR=${CMAKE_BINARY_DIR};OMP_NUM_THREADS=1;EMBER_DIST_CUDA_AWARE=${aware}")
  endforeach()
endif()
# bfloat16 on CPUs without AMX or AVX512-BF16: the same checks with oneDNN
# capped to plain AVX-512 (its bf16 kernels emulate the conversions) and to
# AVX2 (no oneDNN bf16 kernel: the CPU backend widens to float32 itself).
# The fused attention kernel's bfloat16 products follow the cap too (below
# AVX512_CORE_BF16 they take the plain path, cpu_bgemm.c).
# A spec run again as lua.<spec>_<suffix> with one more environment setting.
function(ember_spec_again spec suffix setting)
  add_test(NAME lua.${spec}_${suffix}
    COMMAND ${EMBER_BIN} ${BUSTED} -o plainTerminal ${CMAKE_CURRENT_SOURCE_DIR}/lua/${spec}.lua
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(lua.${spec}_${suffix} PROPERTIES LABELS "lua" ENVIRONMENT "${TEST_ENV};${setting}")
endfunction()
foreach(isa AVX512_CORE AVX2)
  foreach(spec bf16_spec attention_bf16_spec)
    ember_spec_again(${spec} ${isa} ONEDNN_MAX_CPU_ISA=${isa})
  endforeach()
endforeach()
# The AMX driver of the bfloat16 tile products on its C model of the tile
# instructions (cpu_bgemm_amx.c): no machine here has AMX.
ember_spec_again(attention_bf16_spec amx_emulated EMBER_CPU_BF16_DOT=amx_emulated)
# The declared variants (the core lowers them to traced programs) and the
# Lua variants with their programs interpreted, as where no compiler is
# found at run time (attention_jit_spec checks the two paths agree; the
# fixtures spec holds the interpreter to PyTorch too).
foreach(spec attention_fused_spec attention_variant_spec attention_variant_fixtures_spec)
  ember_spec_again(${spec} interpreted EMBER_JIT=0)
endforeach()
# The fused attention kernel's float32 tile products on each path of
# cpu_tile_gemm.c besides the one this CPU picks (test_cpu_tile_gemm checks
# the products themselves; these check the kernel around them).
foreach(path avx2 plain)
  foreach(spec attention_spec attention_fused_spec)
    ember_spec_again(${spec} tiles_${path} EMBER_CPU_TILE_GEMM=${path})
  endforeach()
endforeach()
# The bfloat16 conversions' explicit AVX-512 paths (cpu_bf16_avx512.h:
# contiguous f32 -> bf16 casts, rope, bfloat16 column sums) kept to the
# integer rounding and to the scalar loops, where this CPU would take
# AVX512_BF16's instruction: the same bits on each.
foreach(level avx512 plain)
  ember_spec_again(rope_spec bf16_${level} EMBER_CPU_BF16=${level})
  foreach(t test_backend_cpu_elementwise test_backend_cpu_rows)
    add_test(NAME c.${t}_bf16_${level} COMMAND ${t} $<TARGET_FILE:ember_backend_cpu> ${EMBER_BUILD_PLUGIN_DIR})
    set_tests_properties(c.${t}_bf16_${level} PROPERTIES LABELS "c" ENVIRONMENT "${TEST_ENV};EMBER_CPU_BF16=${level}")
  endforeach()
endforeach()
