# Checks that the engine revision compiled into lossbound-cli (its --version) is the hash of the
# current sources under core/ and gpu/ (cmake/engine_revision.cmake): the build regenerates it
# whenever the engine changes, so the results cache can never serve envelopes of an older engine.
#   cmake -DROOT=<source dir> -DCLI=<lossbound-cli> -P engine_revision_check.cmake
execute_process(COMMAND ${CMAKE_COMMAND} -DROOT=${ROOT} -P ${ROOT}/cmake/engine_revision.cmake
                OUTPUT_VARIABLE out ERROR_VARIABLE printed RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT printed MATCHES "engine revision ([0-9a-f]+)")
  message(FATAL_ERROR "engine_revision.cmake failed (${rc}): ${out}${printed}")
endif()
set(expected ${CMAKE_MATCH_1})
execute_process(COMMAND ${CLI} --version OUTPUT_VARIABLE version RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT version MATCHES "engine revision: ([0-9a-f]+)")
  message(FATAL_ERROR "expected 'engine revision: <hex>' from ${CLI} --version, found:\n${version}")
endif()
if(NOT CMAKE_MATCH_1 STREQUAL expected)
  message(FATAL_ERROR "lossbound-cli has engine revision ${CMAKE_MATCH_1}, the sources hash to "
                      "${expected}: the build did not regenerate engine_revision.h")
endif()
message(STATUS "engine revision ${expected} matches the sources")
