# The test suite (included from CMakeLists.txt when MANTISSA_BUILD_TESTS is on): the GoogleTest
# program and its discovered cases, the reruns of it on the portable SIMD paths, the examples'
# runs, the install checks, the layering and docs checks, the Open MPI program, and the
# command's tests, registered from the table tests/apps/cases.txt (cmake/cli_cases.cmake).
#
# CTest labels, one kind per test (`ctest -L unit` is the fast set; docs/design.md, "Tests"):
# unit, slow (end-to-end training runs, the portable reruns, the examples' runs, the install
# checks), cuda (tests/cuda/, which skip without a GPU), cli (the command's tests) and mpi (Open
# MPI jobs, which also carry mpi_job; scripts/sanitize.sh runs those without leak detection).
enable_testing()
find_package(GTest REQUIRED)
include(GoogleTest)
file(GLOB_RECURSE MANTISSA_TEST_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/*.cpp)
# tests/mpi/ is a separate program run under mpirun (below); tests/fuzz/ holds the libFuzzer
# targets (cmake/fuzz.cmake).
list(FILTER MANTISSA_TEST_SOURCES EXCLUDE REGEX "/tests/(mpi|fuzz)/")
add_executable(mantissa_tests ${MANTISSA_TEST_SOURCES})
mantissa_sanitize_test_target(mantissa_tests)
target_include_directories(mantissa_tests PRIVATE ${PROJECT_SOURCE_DIR}/tests ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(mantissa_tests PRIVATE mantissa mantissa_app GTest::gtest GTest::gtest_main)
mantissa_precompile(mantissa_tests <gtest/gtest.h>)
target_compile_options(mantissa_tests PRIVATE ${MANTISSA_LIGHT_OPT})
# GCC 12's wrong -Wstringop-overflow on libstdc++'s std::string concatenation, as in the
# library (CMakeLists.txt): the test files where a build showed it.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  set_source_files_properties(${PROJECT_SOURCE_DIR}/tests/core/test_untrusted_text.cpp
                              ${PROJECT_SOURCE_DIR}/tests/data/test_text_corpus.cpp
                              ${PROJECT_SOURCE_DIR}/tests/models/test_hf_fuzz.cpp
                              ${PROJECT_SOURCE_DIR}/tests/recipes/test_finetune_run_refusals.cpp
                              ${PROJECT_SOURCE_DIR}/tests/optim/test_adam_complex.cpp
                              PROPERTIES COMPILE_OPTIONS -Wno-stringop-overflow)
endif()
# Reference files written by other libraries (scripts/make_quant_fixtures.py made them).
target_compile_definitions(mantissa_tests PRIVATE
                           MANTISSA_FIXTURES_DIR="${PROJECT_SOURCE_DIR}/tests/fixtures")
# The GoogleTest cases take their label from their suite: slow or cuda by name, unit otherwise.
set(MANTISSA_SLOW_SUITES MlpTraining CnnTraining Adam8bitTraining Fp8Convergence PrecisionRuns
    TrainResume Precisions/TrainResume TrainGpt ApexO2Training)
set(MANTISSA_CUDA_SUITES Cuda* CublasLoading CudnnLoading ConvFullFp32 GraphedStep
    GraphedStepRefusals)
list(TRANSFORM MANTISSA_SLOW_SUITES APPEND ".*")
list(TRANSFORM MANTISSA_CUDA_SUITES APPEND ".*")
list(JOIN MANTISSA_SLOW_SUITES ":" MANTISSA_SLOW_FILTER)
list(JOIN MANTISSA_CUDA_SUITES ":" MANTISSA_CUDA_FILTER)
gtest_discover_tests(mantissa_tests DISCOVERY_TIMEOUT 60
                     TEST_FILTER "-${MANTISSA_SLOW_FILTER}:${MANTISSA_CUDA_FILTER}"
                     PROPERTIES TIMEOUT 600 LABELS unit)
gtest_discover_tests(mantissa_tests DISCOVERY_TIMEOUT 60 TEST_FILTER "${MANTISSA_SLOW_FILTER}"
                     PROPERTIES TIMEOUT 600 LABELS slow)
gtest_discover_tests(mantissa_tests DISCOVERY_TIMEOUT 60 TEST_FILTER "${MANTISSA_CUDA_FILTER}"
                     PROPERTIES TIMEOUT 600 LABELS cuda)

# The portable paths a CPU without AVX-512 takes (CI may run on one): mantissa's SIMD levels
# off, and oneDNN capped at AVX2, where it has no bf16 kernels and bf16 products and
# convolutions are widened to fp32.
add_test(NAME portable.avx2_only_cpu COMMAND mantissa_tests
         --gtest_filter=Matmul.*:Linear.*:Conv2d*:Autocast*:PrecisionRuns.*:CnnTraining.*:Optim*:ThreadDeterminism.*:Adam8bit.*)
set_tests_properties(portable.avx2_only_cpu PROPERTIES
                     ENVIRONMENT "ONEDNN_MAX_CPU_ISA=AVX2;MANTISSA_DISABLE_SIMD=all" TIMEOUT 600)
# The AVX2 level's own kernels (native and low-bit GEMM, tile GEMM, layer-norm rows, the 8-bit
# Adam codec and the layers over them) on a CPU with AVX-512, where the default dispatch never
# reaches them: AVX-512 off in mantissa's levels; and the ops and precisions over them (matmul,
# Linear, each precision's training runs: bf16 activations read in place by the GEMM). Each
# capped run below reports skipped where the CPU lacks what it caps (tests/portable/
# run_if_cpu_has.sh): there it would repeat the default dispatch, which the unit tests ran.
add_test(NAME portable.avx2_level_on_avx512_cpu COMMAND
         ${PROJECT_SOURCE_DIR}/tests/portable/run_if_cpu_has.sh $<TARGET_FILE:mantissa_cli>
         "avx512f: yes;avx512bw: yes;avx512vl: yes" $<TARGET_FILE:mantissa_tests>
         --gtest_filter=GemmNativeAvx2.*:GemmNarrowAvx2.*:GemmLowbit*:TileGemm.*:LayerNormRows.*:Adam8bit*:Fp8*:Linear4bit.*:FourBit.*:Int8*:Linear8bitLt.*:LoRALinear.*:VecMath*:KernelPaths.*:Matmul.*:Linear.*:PrecisionRuns.*)
set_tests_properties(portable.avx2_level_on_avx512_cpu PROPERTIES
                     SKIP_RETURN_CODE 77
                     ENVIRONMENT "MANTISSA_DISABLE_SIMD=avx512f" TIMEOUT 600)
# The allocator's huge pages switched off by the environment: large blocks are not advised.
add_test(NAME allocator.huge_pages_off COMMAND mantissa_tests
         --gtest_filter=AllocatorCache.LargeBlocksLieOnHugePagesAdvisedToTheKernel)
set_tests_properties(allocator.huge_pages_off PROPERTIES ENVIRONMENT "MANTISSA_HUGE_PAGES=0"
                     LABELS unit)
# The AVX-512 level without VBMI (Skylake-X, Cascade Lake): the 8-bit optimizers' word-plane
# decode, on a CPU with VBMI where the default dispatch takes the byte planes.
add_test(NAME portable.avx512_without_vbmi COMMAND
         ${PROJECT_SOURCE_DIR}/tests/portable/run_if_cpu_has.sh $<TARGET_FILE:mantissa_cli>
         "avx512f: yes;avx512bw: yes;avx512vl: yes;avx512_vbmi: yes" $<TARGET_FILE:mantissa_tests>
         --gtest_filter=Adam8bit*:KernelPaths.*)
set_tests_properties(portable.avx512_without_vbmi PROPERTIES
                     SKIP_RETURN_CODE 77
                     ENVIRONMENT "MANTISSA_DISABLE_SIMD=avx512_vbmi" TIMEOUT 600)
# AVX-512 without its BF16 dot products (Skylake-X to Ice Lake), on a CPU with them: bf16 and
# f16 products take the AVX2 path's driver (widened while packed) on its 6x32 AVX-512 tile,
# beside the AVX-512 f32 kernels.
add_test(NAME portable.avx512_without_bf16 COMMAND
         ${PROJECT_SOURCE_DIR}/tests/portable/run_if_cpu_has.sh $<TARGET_FILE:mantissa_cli>
         "avx512_bf16: yes" $<TARGET_FILE:mantissa_tests>
         --gtest_filter=GemmNativeAvx2.RoundTo*:GemmNativeAvx2.*Bf16*:GemmNativeAvx2.*F16*:GemmNarrowAvx2.*Bf16*:GemmNarrowAvx2.*F16*:Matmul.*:Linear.*:Conv2d*:Autocast*:PrecisionRuns.*:KernelPaths.*)
set_tests_properties(portable.avx512_without_bf16 PROPERTIES
                     SKIP_RETURN_CODE 77
                     ENVIRONMENT "MANTISSA_DISABLE_SIMD=avx512_bf16" TIMEOUT 600)
# An Intel CPU without AMX sets its AVX-512 BF16 aside (core/cpu_features.h), so by default
# the run above never reaches the bf16 dot-product kernels there: they are forced on here.
add_test(NAME portable.avx512_bf16_forced_on_intel COMMAND
         ${PROJECT_SOURCE_DIR}/tests/portable/run_if_cpu_has.sh $<TARGET_FILE:mantissa_cli>
         "avx512_bf16: yes, not used.*" $<TARGET_FILE:mantissa_tests>
         --gtest_filter=*Bf16*:*BF16*:GemmNative.*:Matmul.*:Linear.*:Conv2d*:Autocast*:PrecisionRuns.*:KernelPaths.*:TiledB*:Convert*:FourBit*:Linear4bit.*:Fp8*:CpuFeaturesTest.*)
set_tests_properties(portable.avx512_bf16_forced_on_intel PROPERTIES
                     SKIP_RETURN_CODE 77
                     ENVIRONMENT "MANTISSA_USE_AVX512_BF16=1" TIMEOUT 600)

# Includes point down the layer order (docs/design.md); the self-test proves the check can fail.
add_test(NAME layering.includes_point_down COMMAND ${PROJECT_SOURCE_DIR}/scripts/check_layers.sh)
add_test(NAME layering.checker_self_test
         COMMAND ${PROJECT_SOURCE_DIR}/scripts/check_layers.sh --self-test)
# Every relative link in README.md and docs/*.md resolves (file and heading), no doc cites the
# machine-local shared/ folder, and command examples run build/mantissa, the path the README's
# commands build; the self-test proves the check can fail.
add_test(NAME docs.links_and_commands COMMAND ${PROJECT_SOURCE_DIR}/tests/docs/check_links.sh)
add_test(NAME docs.checker_self_test
         COMMAND ${PROJECT_SOURCE_DIR}/tests/docs/check_links.sh --self-test)
# The examples' training runs reach their documented accuracy.
if(MANTISSA_BUILD_EXAMPLES)
  add_test(NAME example.mixed_precision_fp16 COMMAND example_mixed_precision fp16)
  set_tests_properties(example.mixed_precision_fp16 PROPERTIES
                       PASS_REGULAR_EXPRESSION "epoch 2: test accuracy 0\\.8[4-9]")
  add_test(NAME example.custom_train_module COMMAND example_custom_train_module 60)
  set_tests_properties(example.custom_train_module PROPERTIES
                       PASS_REGULAR_EXPRESSION "after 60 steps: val_loss [0-9.]+ val_acc 0\\.[6-9]")
  set_tests_properties(example.mixed_precision_fp16 example.custom_train_module PROPERTIES LABELS slow)
endif()

# The installed package, used by a separate project (examples/consumer), which includes the
# models as <mantissa/models/mlp.h>: the package's only include directory is include/ (it
# also exported include/mantissa/models and include/mantissa/recipes, which put bare names such
# as "mlp.h" on a consumer's include path, colliding with the project's own files).
add_test(NAME install.consumer COMMAND sh -c
         "rm -rf install_prefix consumer_build && ${CMAKE_COMMAND} --install ${PROJECT_BINARY_DIR} --prefix install_prefix >/dev/null && test -f install_prefix/include/mantissa/models/gpt.h && test -f install_prefix/include/mantissa/recipes/image_run.h && ! test -e install_prefix/include/mlp.h && grep INTERFACE_INCLUDE_DIRECTORIES install_prefix/lib/cmake/mantissa/mantissaTargets.cmake | grep -q '/include\"$' && ! grep INTERFACE_INCLUDE_DIRECTORIES install_prefix/lib/cmake/mantissa/mantissaTargets.cmake | grep -q 'include/mantissa' && ${CMAKE_COMMAND} -S ${PROJECT_SOURCE_DIR}/examples/consumer -B consumer_build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/install_prefix >/dev/null && ${CMAKE_COMMAND} --build consumer_build >/dev/null && consumer_build/consumer")
set_tests_properties(install.consumer PROPERTIES PASS_REGULAR_EXPRESSION
                     "consumer: loss .*, GPT [0-9]+ parameters" TIMEOUT 600)
# The install also gives the command, as DIR/bin/mantissa (it installed only the library and
# headers, so the documented `mpirun ... /opt/mantissa/bin/mantissa train` had nothing to run).
add_test(NAME install.cli_command COMMAND sh -c
         "rm -rf install_cli_prefix && ${CMAKE_COMMAND} --install ${PROJECT_BINARY_DIR} --prefix install_cli_prefix >/dev/null && install_cli_prefix/bin/mantissa --version")
set_tests_properties(install.cli_command PROPERTIES PASS_REGULAR_EXPRESSION "^mantissa [0-9]+\\.[0-9]+\\.[0-9]+")
# The public headers (the umbrella, the models' and the recipes') compile without warnings
# under -Wall -Wextra when included as plain (non-system) headers, as add_subdirectory users
# include them (81 unused-parameter warnings in the default virtual hooks before), with
# include/ as the only include directory.
add_test(NAME install.headers_warning_free COMMAND sh -c
         "cd ${PROJECT_SOURCE_DIR}/include && ls mantissa/models/*.h mantissa/recipes/*.h | sed 's/.*/#include <&>/' > ${PROJECT_BINARY_DIR}/headers_warning_free.cpp && cd ${PROJECT_BINARY_DIR} && echo '#include <mantissa/mantissa.h>' >> headers_warning_free.cpp && echo 'int main() { return 0; }' >> headers_warning_free.cpp && ${CMAKE_CXX_COMPILER} -std=c++20 -fsyntax-only -fopenmp -Wall -Wextra -Werror -I${PROJECT_SOURCE_DIR}/include headers_warning_free.cpp")

set_tests_properties(portable.avx2_only_cpu portable.avx2_level_on_avx512_cpu
                     portable.avx512_without_vbmi portable.avx512_without_bf16
                     portable.avx512_bf16_forced_on_intel install.consumer install.cli_command
                     install.headers_warning_free PROPERTIES LABELS slow)
set_tests_properties(layering.includes_point_down layering.checker_self_test
                     docs.links_and_commands docs.checker_self_test PROPERTIES LABELS unit)

# Data-parallel training under mpirun, 2 ranks (docs/distributed.md). Oversubscribed: CI
# machines may have fewer cores than ranks; Open MPI refuses root without the two variables.
if(MPI_CXX_FOUND AND MPIEXEC_EXECUTABLE)
  file(GLOB MANTISSA_MPI_TEST_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/mpi/*.cpp)
  add_executable(mantissa_mpi_tests ${MANTISSA_MPI_TEST_SOURCES})
  mantissa_sanitize_test_target(mantissa_mpi_tests)
  target_include_directories(mantissa_mpi_tests PRIVATE ${PROJECT_SOURCE_DIR}/tests ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(mantissa_mpi_tests PRIVATE mantissa GTest::gtest GTest::gtest_main)
  set(MANTISSA_MPIRUN ${MPIEXEC_EXECUTABLE} --oversubscribe --bind-to none ${MPIEXEC_NUMPROC_FLAG} 2)
  set(MANTISSA_MPI_ENV OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1)
  add_test(NAME mpi.ddp_equivalence COMMAND ${MANTISSA_MPIRUN} $<TARGET_FILE:mantissa_mpi_tests>)
  set_tests_properties(mpi.ddp_equivalence PROPERTIES ENVIRONMENT "${MANTISSA_MPI_ENV}" TIMEOUT 120)
  add_test(NAME mpi.rank_failure_aborts_job COMMAND ${MANTISSA_MPIRUN} $<TARGET_FILE:mantissa_mpi_tests>
           --gtest_filter=DdpFailure.RankThatThrowsAbortsTheJob)
  set_tests_properties(mpi.rank_failure_aborts_job PROPERTIES
                       ENVIRONMENT "${MANTISSA_MPI_ENV};MANTISSA_MPI_FAILURE_TEST=1" TIMEOUT 60
                       PASS_REGULAR_EXPRESSION "rank 1 of 2 failed: .*boom on rank 1")
  add_test(NAME mpi.mismatched_shapes_refused COMMAND ${MANTISSA_MPIRUN} $<TARGET_FILE:mantissa_mpi_tests>
           --gtest_filter=DdpFailure.MismatchedShapesAreRefusedAtSetup)
  set_tests_properties(mpi.mismatched_shapes_refused PROPERTIES
                       ENVIRONMENT "${MANTISSA_MPI_ENV};MANTISSA_MPI_FAILURE_TEST=1" TIMEOUT 60
                       PASS_REGULAR_EXPRESSION "rank [01] of 2 failed: .*differ in name, dtype or shape")
  # The ZeRO strategies and the gradient reduction dtype at 4 ranks (mpi.ddp_equivalence runs
  # them at 2).
  add_test(NAME mpi.zero_equivalence_4
           COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe --bind-to none ${MPIEXEC_NUMPROC_FLAG} 4
                   $<TARGET_FILE:mantissa_mpi_tests> --gtest_filter=ZeroEquivalence.*:GradReduceDtype.*)
  set_tests_properties(mpi.zero_equivalence_4 PROPERTIES ENVIRONMENT "${MANTISSA_MPI_ENV}" TIMEOUT 120)
  # Open MPI 4.1's launchers of one user share a session directory, and one job's clean-up can
  # remove it while another job creates its own inside ("orte_init failed ... A call to mkdir
  # was unable to create the desired directory", seen once under ctest -j2): the Open MPI jobs
  # (label mpi_job, here and in cases.txt) take this lock and run one at a time.
  set(MANTISSA_OPEN_MPI_LOCK open_mpi_session_dir)
  set_tests_properties(mpi.ddp_equivalence mpi.rank_failure_aborts_job mpi.mismatched_shapes_refused
                       mpi.zero_equivalence_4 PROPERTIES LABELS "mpi_job;mpi"
                       RESOURCE_LOCK ${MANTISSA_OPEN_MPI_LOCK})
endif()

# The command's tests: exit codes and messages as a user meets them.
include(${PROJECT_SOURCE_DIR}/cmake/cli_cases.cmake)
mantissa_add_cli_cases(${PROJECT_SOURCE_DIR}/tests/apps/cases.txt)
