# CTest smoke of one fuzz target (cmake -P): FUZZER runs the seeds in SEEDS, then 2,000 inputs
# mutated from them with a fixed seed, into a corpus under WORK emptied first.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/corpus ${WORK}/artifacts)
set(_dict)
if(EXISTS ${DICT})
  set(_dict -dict=${DICT})
endif()
execute_process(COMMAND ${FUZZER} -runs=2000 -seed=1 -rss_limit_mb=512 -malloc_limit_mb=512 -timeout=10
                        -print_final_stats=1 -artifact_prefix=${WORK}/artifacts/ ${_dict} ${WORK}/corpus ${SEEDS}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  file(GLOB _found ${WORK}/artifacts/*)
  message(FATAL_ERROR "${FUZZER} exited with ${rc}; inputs that failed: ${_found}")
endif()
