# Shared CMake helpers: warnings for our own targets, and one way to add a Qt Test to ctest.

# Turns on strict warnings for a target of ours (third-party headers stay SYSTEM), as errors when
# LOSSBOUND_WERROR is ON (the project's scripts and CI); a consumer's plain build (OFF) is not
# stopped by a new compiler's new warning. CUDA sources: nvcc's own diagnostics and the host
# compiler behind it (-Xcompiler).
function(lossbound_warnings target)
  if(LOSSBOUND_WERROR)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Werror -Wno-error=deprecated-declarations>
      $<$<COMPILE_LANGUAGE:CUDA>:--Werror=all-warnings -Xcompiler=-Wall,-Wextra,-Werror>)
    # GCC 12 at -O3 reports -Wrestrict inside libstdc++'s operator+(const char*, std::string&&)
    # wherever it inlines it (GCC bug 105651, fixed in GCC 13): a false positive in the standard
    # library, so it stays a warning there instead of stopping a Release build.
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
      target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-error=restrict>)
    endif()
  else()
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic>
      $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
  endif()
endfunction()

# Qt Test exits 0 when a function QSKIPs, so ctest would count a skipped test as passed. Its last
# line, "Totals: P passed, F failed, S skipped, ...", says what happened: with no failure and at
# least one skip the test is reported as skipped ("did not run fully"; the output names what and
# why). ctest lets a skip expression override a failure, hence "0 failed" in it; a crash prints no
# totals and stays a failure.
set(LOSSBOUND_QTEST_SKIPPED "Totals: [0-9]+ passed, 0 failed, [1-9][0-9]* skipped")

# One precompiled header for the tests: <QtTest> and the standard headers they use took ~7 s of
# every test file's 12-17 s. A .gch serves only compilations with the same flags and the same
# definitions of every macro it mentions, so the tests that reuse it are the ones whose libraries
# add no Qt module (QtTest's headers test QT_GUI_LIB and QT_WIDGETS_LIB); Qt's per-directory
# QT_TESTCASE_BUILDDIR/SOURCEDIR (QFINDTESTDATA's, unused here) are undefined for all of them.
# -Winvalid-pch makes a .gch that GCC refuses a warning, and so an error in our builds.
set(LOSSBOUND_TEST_PCH_OPTIONS -Winvalid-pch -UQT_TESTCASE_BUILDDIR -UQT_TESTCASE_SOURCEDIR)
function(lossbound_test_pch exe libs)
  foreach(lib IN LISTS libs)
    if(lib MATCHES "widgets|app|Qt6::")
      return()
    endif()
  endforeach()
  if(NOT TARGET lossbound_test_pch)
    file(WRITE ${PROJECT_BINARY_DIR}/lossbound_test_pch.cpp "// The precompiled header's anchor.\n")
    add_library(lossbound_test_pch OBJECT ${PROJECT_BINARY_DIR}/lossbound_test_pch.cpp)
    target_link_libraries(lossbound_test_pch PRIVATE Qt6::Test lossbound_core)
    target_compile_definitions(lossbound_test_pch PRIVATE
      LOSSBOUND_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
      LOSSBOUND_BINARY_DIR="${PROJECT_BINARY_DIR}")
    target_compile_options(lossbound_test_pch PRIVATE ${LOSSBOUND_TEST_PCH_OPTIONS})
    lossbound_warnings(lossbound_test_pch)
    if(LOSSBOUND_SANITIZE AND NOT LOSSBOUND_SANITIZE STREQUAL "thread")
      target_compile_options(lossbound_test_pch PRIVATE -fno-sanitize=undefined)
    endif()
    target_precompile_headers(lossbound_test_pch PRIVATE
      <QtTest> <algorithm> <cmath> <cstdint> <cstring> <functional> <limits> <map> <memory>
      <random> <stdexcept> <string> <vector>)
  endif()
  target_compile_options(${exe} PRIVATE ${LOSSBOUND_TEST_PCH_OPTIONS})
  target_precompile_headers(${exe} REUSE_FROM lossbound_test_pch)
  # AUTOMOC's file for a test whose moc output the test includes is one line: loading the 220 MB
  # header would cost it a second.
  set_source_files_properties(${CMAKE_CURRENT_BINARY_DIR}/${exe}_autogen/mocs_compilation.cpp
                              PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
endfunction()

# lossbound_add_test(NAME core/interval SOURCES a.cpp b.cpp LIBS lib... [LABELS l...]
#                    [TIMEOUT s] [COMPILE_OPTIONS ...] [NO_SANITIZE])
# Adds a Qt Test executable, registers it with ctest and runs it offscreen. A test labelled core
# is also labelled sanitize (the ASan+UBSan stage, lb_sanitize_stage in scripts/common.sh, runs
# those and builds them through the target sanitize-tests), unless NO_SANITIZE says it is too
# slow under the sanitizers. A test labelled tsan is built by the target tsan-tests and run by the
# ThreadSanitizer stage (lb_tsan_stage): the tests that run work on several threads.
function(lossbound_add_test)
  cmake_parse_arguments(T "NO_SANITIZE" "NAME;TIMEOUT;COST" "SOURCES;LIBS;LABELS;COMPILE_OPTIONS"
                        ${ARGN})
  string(REPLACE "/" "_" exe "test_${T_NAME}")
  if("core" IN_LIST T_LABELS AND NOT T_NO_SANITIZE)
    list(APPEND T_LABELS sanitize)
    set_property(GLOBAL APPEND PROPERTY LOSSBOUND_SANITIZE_TARGETS ${exe})
  endif()
  if("tsan" IN_LIST T_LABELS)
    set_property(GLOBAL APPEND PROPERTY LOSSBOUND_TSAN_TARGETS ${exe})
  endif()
  add_executable(${exe} ${T_SOURCES})
  target_link_libraries(${exe} PRIVATE Qt6::Test ${T_LIBS})
  target_include_directories(${exe} PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_definitions(${exe} PRIVATE
    LOSSBOUND_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    LOSSBOUND_BINARY_DIR="${PROJECT_BINARY_DIR}")
  if(T_COMPILE_OPTIONS)
    target_compile_options(${exe} PRIVATE ${T_COMPILE_OPTIONS})
  endif()
  lossbound_warnings(${exe})
  # In the ASan+UBSan tree (scripts/common.sh) a test's own file has ASan only: UBSan's checks took
  # 40% of its compile time (a fifth of CI), and the core code under test is in the libraries,
  # which keep both (a kernel body a test calls directly is checked there through the op rules).
  if(LOSSBOUND_SANITIZE AND NOT LOSSBOUND_SANITIZE STREQUAL "thread")
    target_compile_options(${exe} PRIVATE -fno-sanitize=undefined)
  endif()
  lossbound_test_pch(${exe} "${T_LIBS}")
  add_test(NAME ${T_NAME} COMMAND ${exe})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES
    ENVIRONMENT "QT_QPA_PLATFORM=offscreen;LOSSBOUND_SOURCE_DIR=${PROJECT_SOURCE_DIR};QTEST_FUNCTION_TIMEOUT=${T_TIMEOUT}000"
    TIMEOUT ${T_TIMEOUT}
    LABELS "${T_LABELS}"
    SKIP_REGULAR_EXPRESSION "${LOSSBOUND_QTEST_SKIPPED}")
  if(T_COST)
    set_tests_properties(${T_NAME} PROPERTIES COST ${T_COST})
  endif()
endfunction()
