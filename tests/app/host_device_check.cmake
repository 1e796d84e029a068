cmake_minimum_required(VERSION 3.20)
# `lossbound-cli analyze --backend host-device` (the interval method's device-resident replay on
# the host's counting device, docs/gpu.md) against `--backend cpu`: the same CSV byte for byte.
#   cmake -DCLI=lossbound-cli -DREFERENCE=R.h5 -DCANDIDATE=C.h5 -DSTEPS=0,1 -DWORK=dir
#         [-DSTART_NODE=node -DEXPECT_RC=3] -P host_device_check.cmake
file(MAKE_DIRECTORY ${WORK})
set(extra "")
if(DEFINED START_NODE)
  set(extra --start-node ${START_NODE})
endif()
if(NOT DEFINED EXPECT_RC)
  set(EXPECT_RC 0)
endif()
foreach(backend cpu host-device)
  execute_process(COMMAND ${CLI} analyze --reference ${REFERENCE} --candidate ${CANDIDATE}
                          --steps ${STEPS} --no-cache --method interval --backend ${backend}
                          --csv ${WORK}/${backend}.csv ${extra}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
  if(NOT rc EQUAL EXPECT_RC)
    message(FATAL_ERROR "--backend ${backend}: exit ${rc}\nstdout:\n${out}\nstderr:\n${err}")
  endif()
  # A start node leaves out the rounding before it: the summary must not promise rigour.
  if(DEFINED START_NODE AND NOT out MATCHES "rounding before it is ignored, so the envelope is not rigorous")
    message(FATAL_ERROR "--backend ${backend} --start-node: the summary does not say the envelope is not rigorous:\n${out}")
  endif()
  if(backend STREQUAL "host-device" AND NOT out MATCHES "device-resident on host device")
    message(FATAL_ERROR "--backend host-device: the summary does not name the host device:\n${out}")
  endif()
endforeach()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${WORK}/cpu.csv ${WORK}/host-device.csv
                RESULT_VARIABLE same)
if(NOT same EQUAL 0)
  message(FATAL_ERROR "the CSV of --backend host-device differs from --backend cpu's")
endif()
