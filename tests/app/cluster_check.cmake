cmake_minimum_required(VERSION 3.20)
# The cluster modes of lossbound-cli (issue 18, docs/cluster.md) against one process: the CSV of
# `analyze --shard 1/3, 2/3, 3/3` followed by `merge`, and of `mpirun -np 2 ... analyze --mpi`,
# must equal the single run's CSV byte for byte, with the same verdict and first exit; `merge`
# must refuse a corrupt, missing or foreign part with a message naming it.
#   cmake -DMODE=single|shards|shared_cache|mpi|mpi_stop|mpi_failed_rank|merge_errors|gui_report -DCLI=lossbound-cli
#         -DREFERENCE=R.h5 -DCANDIDATE=C.h5 -DSTEPS=0:3 -DWORK=dir [-DMPIRUN=mpirun]
#         [-DGUI=lossbound]
#         [-DOTHER_CANDIDATE=C2.h5] -P cluster_check.cmake
# MODE single writes WORK/single.csv and WORK/single.out, which the other modes compare with (a
# ctest fixture). When mpirun or MPI support is absent the MPI modes print "SKIP: ..." and succeed
# (ctest SKIP_REGULAR_EXPRESSION marks them skipped).

set(common --reference ${REFERENCE} --candidate ${CANDIDATE} --steps ${STEPS} --no-cache)

# Runs lossbound-cli (or mpirun) with the arguments after `expect` (an exit code, or codes
# joined by "|"); checks the exit code and puts stdout and stderr into `<prefix>_out` and
# `<prefix>_err`.
function(run prefix expect)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  TIMEOUT 120)
  string(REPLACE "|" ";" allowed "${expect}")
  if(NOT rc IN_LIST allowed)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "expected exit code ${expect}, found ${rc}\ncommand: ${cmd}\n"
                        "stdout:\n${out}\nstderr:\n${err}")
  endif()
  set(${prefix}_out "${out}" PARENT_SCOPE)
  set(${prefix}_err "${err}" PARENT_SCOPE)
endfunction()

# The summary's verdict and first-exit lines (the table above them may differ in the backend line).
function(verdict_lines text var)
  string(REGEX MATCH "verdict: [^\n]*\nfirst exit: [^\n]*" lines "${text}")
  if(lines STREQUAL "")
    message(FATAL_ERROR "expected a verdict and a first exit line, found:\n${text}")
  endif()
  set(${var} "${lines}" PARENT_SCOPE)
endfunction()

function(expect_same_csv produced what)
  file(READ ${WORK}/single.csv single)
  if(NOT EXISTS ${produced})
    message(FATAL_ERROR "${what}: expected ${produced} to be written, found no file")
  endif()
  file(READ ${produced} other)
  if(NOT single STREQUAL other)
    message(FATAL_ERROR "${what}: the CSV differs from the single run's (${WORK}/single.csv)\n"
                        "single run:\n${single}\n${what}:\n${other}")
  endif()
endfunction()

function(expect_same_verdict text what)
  file(READ ${WORK}/single.out single)
  verdict_lines("${single}" a)
  verdict_lines("${text}" b)
  if(NOT a STREQUAL b)
    message(FATAL_ERROR "${what}: expected the single run's\n${a}\nfound\n${b}")
  endif()
endfunction()

# The first-exit line only (an early stop analyses fewer steps, so the verdict's counts differ).
function(expect_same_verdict_exit text what)
  file(READ ${WORK}/single.out single)
  string(REGEX MATCH "\nfirst exit: [^\n]*" a "${single}")
  string(REGEX MATCH "\nfirst exit: [^\n]*" b "${text}")
  if(a STREQUAL "" OR NOT a STREQUAL b)
    message(FATAL_ERROR "${what}: expected the single run's${a}\nfound${b}")
  endif()
endfunction()

function(expect_match text regex what)
  if(NOT text MATCHES "${regex}")
    message(FATAL_ERROR "${what}: expected a match for '${regex}', found:\n${text}")
  endif()
endfunction()

# mpirun refuses root unless told; a CI container runs as root.
set(ENV{OMPI_ALLOW_RUN_AS_ROOT} 1)
set(ENV{OMPI_ALLOW_RUN_AS_ROOT_CONFIRM} 1)
# One thread per rank: two ranks of two threads on a 2-core runner would only contend.
set(ENV{LOSSBOUND_THREADS} 1)

if(MODE STREQUAL "single")
  file(REMOVE_RECURSE ${WORK})
endif()
file(MAKE_DIRECTORY ${WORK})

if(MODE STREQUAL "single")
  # Exit 0 or 3 depending on the sample; EXPECT_EXIT says which.
  run(single ${EXPECT_EXIT} ${CLI} analyze ${common} --csv ${WORK}/single.csv)
  file(WRITE ${WORK}/single.out "${single_out}")
  verdict_lines("${single_out}" lines)
  message(STATUS "single run:\n${lines}")

elseif(MODE STREQUAL "shards")
  set(parts)
  foreach(i 1 2 3)
    file(REMOVE ${WORK}/part-${i}.json)
    run(part "0|3" ${CLI} analyze ${common} --shard ${i}/3
        --json ${WORK}/part-${i}.json)
    list(APPEND parts ${WORK}/part-${i}.json)
  endforeach()
  file(REMOVE ${WORK}/merged.csv)
  # Any order of the parts gives the same report.
  list(REVERSE parts)
  run(merged ${EXPECT_EXIT} ${CLI} merge ${parts} --csv ${WORK}/merged.csv
      --json ${WORK}/merged.json)
  expect_same_csv(${WORK}/merged.csv "shards 1/3, 2/3, 3/3 merged")
  expect_same_verdict("${merged_out}" "shards 1/3, 2/3, 3/3 merged")
  message(STATUS "merged CSV equals the single run's byte for byte")

elseif(MODE MATCHES "^mpi")
  if(NOT MPIRUN)
    message(STATUS "SKIP: no mpirun, or this build has no MPI support (Debian: apt-get install "
                   "openmpi-bin libopenmpi-dev, which scripts/common.sh lists; then configure again)")
    return()  # ctest marks the test skipped on "SKIP: " (SKIP_REGULAR_EXPRESSION)
  endif()
  set(mpirun ${MPIRUN} --oversubscribe -np 2)
  if(MODE STREQUAL "mpi")
    file(REMOVE ${WORK}/mpi.csv)
    run(mpi ${EXPECT_EXIT} ${mpirun} ${CLI} analyze --mpi ${common} --csv ${WORK}/mpi.csv)
    expect_same_csv(${WORK}/mpi.csv "mpirun -np 2 analyze --mpi")
    expect_same_verdict("${mpi_out}" "mpirun -np 2 analyze --mpi")
    expect_match("${mpi_out}" "backend: [^\n]*MPI: 2 ranks on 1 host" "mpirun -np 2")
    message(STATUS "MPI CSV equals the single run's byte for byte")
  elseif(MODE STREQUAL "mpi_stop")
    # --stop-at-first-exit: the ranks stop once the first exit is settled; the report says so
    # and names the same first exit as the single run.
    run(mpi ${EXPECT_EXIT} ${mpirun} ${CLI} analyze --mpi ${common} --stop-at-first-exit)
    expect_same_verdict_exit("${mpi_out}" "mpirun -np 2 analyze --mpi --stop-at-first-exit")
    expect_match("${mpi_out}" "Stopped at the first exit \\(step [0-9]+\\) once every earlier step was done \\(--stop-at-first-exit\\): [0-9]+ of [0-9]+ selected steps analysed"
                 "--stop-at-first-exit")
  else()
    # Rank 1 fails before its first step: its steps are "not bounded" with the reason (exit 4),
    # rank 0's steps are kept, and the report is still written by rank 0.
    set(ENV{LOSSBOUND_TEST_FAIL_RANK} 1)
    file(REMOVE ${WORK}/failed-rank.csv)
    run(mpi 4 ${mpirun} ${CLI} analyze --mpi ${common} --csv ${WORK}/failed-rank.csv)
    expect_match("${mpi_err}" "rank 1 \\([^)]*\\) failed: simulated failure" "a failing rank")
    expect_match("${mpi_out}" "not bounded at [0-9]+ step\\(s\\) \\(first: [0-9]+\\): Rank 1 \\([^)]*\\) failed before finishing this step: simulated failure"
                 "a failing rank")
    file(READ ${WORK}/failed-rank.csv csv)
    expect_match("${csv}" "\n[0-9]+,[^\n]*not bounded" "the failing rank's steps in the CSV")
  endif()

elseif(MODE STREQUAL "merge_errors")
  # Needs the parts of MODE shards (a ctest dependency).
  foreach(i 1 2 3)
    if(NOT EXISTS ${WORK}/part-${i}.json)
      message(FATAL_ERROR "expected ${WORK}/part-${i}.json from the shards test, found none")
    endif()
  endforeach()
  set(p1 ${WORK}/part-1.json)
  set(p2 ${WORK}/part-2.json)
  set(p3 ${WORK}/part-3.json)
  # Missing: a part not given, and a file that does not exist.
  run(e 2 ${CLI} merge ${p1} ${p3})
  expect_match("${e_err}" "lossbound-cli merge: missing shard 2/3 \\(steps [0-9.]+\\): expected one part per shard, found 2 of 3"
               "a missing shard")
  run(e 2 ${CLI} merge ${p1} ${p2} ${WORK}/no-such-part.json)
  expect_match("${e_err}" "no-such-part.json: no such file" "a missing file")
  # Corrupt: a truncated part, and a part whose stored first exit contradicts its steps.
  file(READ ${p2} text)
  string(LENGTH "${text}" length)
  math(EXPR half "${length} / 2")
  string(SUBSTRING "${text}" 0 ${half} truncated)
  file(WRITE ${WORK}/truncated.json "${truncated}")
  run(e 2 ${CLI} merge ${p1} ${WORK}/truncated.json ${p3})
  expect_match("${e_err}" "truncated.json: not a Lossbound analysis report: expected JSON, found a parse error \\([^)]+\\) at byte [0-9]+"
               "a truncated part")
  string(REGEX REPLACE "\"engine_revision\": \"[^\"]*\"" "\"engine_revision\": 17" wrong "${text}")
  file(WRITE ${WORK}/bad-field.json "${wrong}")
  run(e 2 ${CLI} merge ${p1} ${WORK}/bad-field.json ${p3})
  expect_match("${e_err}" "bad-field.json: analysis JSON: field 'engine_revision': expected a string, found 17"
               "a part with a bad field")
  # The same shard twice.
  run(e 2 ${CLI} merge ${p1} ${p2} ${p2})
  expect_match("${e_err}" "part-2.json and [^\n]*part-2.json are both shard 2/3" "a shard twice")
  # Foreign: a part of another pair, a part with other settings.
  run(e "0|3" ${CLI} analyze --reference ${REFERENCE} --candidate ${OTHER_CANDIDATE}
      --steps ${STEPS} --no-cache --shard 2/3 --json ${WORK}/foreign-pair.json)
  run(e 2 ${CLI} merge ${p1} ${WORK}/foreign-pair.json ${p3})
  expect_match("${e_err}" "foreign-pair.json: another run pair: the candidate run is '[^']+', but it is '[^']+' in [^\n]*part-1.json"
               "a part of another pair")
  string(REPLACE "\"method\": \"first-order\"" "\"method\": \"interval\"" other "${text}")
  if(other STREQUAL text)
    message(FATAL_ERROR "expected the parts to use the first-order method, found:\n${text}")
  endif()
  file(WRITE ${WORK}/other-settings.json "${other}")
  run(e 2 ${CLI} merge ${p1} ${WORK}/other-settings.json ${p3})
  expect_match("${e_err}" "other-settings.json: other settings: method: first-order in [^\n]*part-1.json, interval in [^\n]*other-settings.json"
               "a part with other settings")
  # A whole report is not a part.
  run(e ${EXPECT_EXIT} ${CLI} merge ${p1} ${p2} ${p3} --json ${WORK}/whole.json)
  run(e 2 ${CLI} merge ${WORK}/whole.json)
  expect_match("${e_err}" "whole.json: not a part of a sharded analysis" "a whole report")
  message(STATUS "merge refuses corrupt, missing and foreign parts")

elseif(MODE STREQUAL "shared_cache")
  # Three shards at once share one results cache (a job array on a shared file system): each
  # stores its steps under the writers' lock, so none is lost and a later run of all the steps
  # reads every one from the cache, with the same CSV.
  set(cache ${WORK}/shared-cache)
  file(REMOVE_RECURSE ${cache})
  set(ENV{LOSSBOUND_CACHE_DIR} ${cache})
  set(cached --reference ${REFERENCE} --candidate ${CANDIDATE} --steps ${STEPS})
  # One execute_process with three COMMANDs runs them concurrently (as a pipeline; each writes
  # its summary to a file, so no one writes into a closed pipe).
  string(REPLACE ";" " " words "${CLI} analyze ${cached}")
  set(shard_cmds)
  foreach(i 1 2 3)
    list(APPEND shard_cmds COMMAND sh -c
         "${words} --shard ${i}/3 --json ${WORK}/cached-${i}.json > ${WORK}/cached-${i}.out")
  endforeach()
  execute_process(${shard_cmds} RESULTS_VARIABLE codes ERROR_VARIABLE err TIMEOUT 120)
  foreach(code IN LISTS codes)
    if(NOT code MATCHES "^[03]$")
      message(FATAL_ERROR "expected every shard to exit 0 or 3, found ${codes}\n${err}")
    endif()
  endforeach()
  if(err MATCHES "Results not cached")
    message(FATAL_ERROR "expected every shard to store its steps, found:\n${err}")
  endif()
  file(REMOVE ${WORK}/cached.csv)
  run(c ${EXPECT_EXIT} ${CLI} analyze ${cached} --csv ${WORK}/cached.csv)
  expect_match("${c_out}" "\\(4 of 4 steps from the cache\\)" "a run after three shards")
  expect_same_csv(${WORK}/cached.csv "a run from the cache the shards filled")
  message(STATUS "three concurrent shards filled one cache; nothing lost")

elseif(MODE STREQUAL "gui_report")
  # The GUI opens the merged report of MODE shards: with the run files it names (the samples),
  # and alone when they are gone (the loss plot shows the analysed steps; the window says why);
  # a corrupt report is refused with the reader's message.
  if(NOT EXISTS ${WORK}/merged.json OR NOT EXISTS ${WORK}/truncated.json)
    message(FATAL_ERROR "expected merged.json and truncated.json in ${WORK} from the shards and "
                        "merge_errors tests, found none")
  endif()
  set(ENV{QT_QPA_PLATFORM} offscreen)
  file(REMOVE ${WORK}/gui-report.png ${WORK}/gui-report-alone.png)
  run(g 0 ${GUI} --screenshot ${WORK}/gui-report.png ${WORK}/merged.json)
  if(NOT EXISTS ${WORK}/gui-report.png)
    message(FATAL_ERROR "expected the screenshot ${WORK}/gui-report.png, found none")
  endif()
  if(g_err MATCHES "analysed steps only")
    message(FATAL_ERROR "expected the report to open with its run files, found:\n${g_err}")
  endif()
  file(READ ${WORK}/merged.json text)
  string(REPLACE "/reference.h5\"" "/gone-reference.h5\"" gone "${text}")
  file(WRITE ${WORK}/merged-alone.json "${gone}")
  run(g 0 ${GUI} --screenshot ${WORK}/gui-report-alone.png ${WORK}/merged-alone.json)
  expect_match("${g_err}" "Report merged-alone.json: the loss plot shows the 4 analysed steps only, because the run files it names were not found"
               "a report without its run files")
  run(g 2 ${GUI} --screenshot ${WORK}/gui-bad.png ${WORK}/truncated.json)
  expect_match("${g_err}" "truncated.json: not a Lossbound analysis report: expected JSON"
               "a corrupt report in the GUI")
  message(STATUS "the GUI opens a merged report")

else()
  message(FATAL_ERROR "expected MODE single, shards, shared_cache, mpi, mpi_stop, mpi_failed_rank, "
                      "merge_errors or "
                      "gui_report, found '${MODE}'")
endif()
