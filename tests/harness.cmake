# Harness tests (label cpu), included from tests/CMakeLists.txt: the report's ratios and Markdown
# on fixture results, every plot read back with libpng, the regression check, and
# bench/run_all.sh --quick end to end. See docs/harness.md.
set(_hr_fixtures ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/harness)
set(_hr_reported ${CMAKE_SOURCE_DIR}/results/reported.json)

add_executable(test_harness_report test_harness_report.c)
target_link_libraries(test_harness_report PRIVATE abharness)
add_test(NAME test_harness_report COMMAND test_harness_report ${_hr_fixtures} ${_hr_reported})

find_package(PNG)
if(PNG_FOUND)
  add_executable(test_harness_plots test_harness_plots.c)
  target_link_libraries(test_harness_plots PRIVATE abharness PNG::PNG)
  add_test(NAME test_harness_plots COMMAND test_harness_plots ${_hr_fixtures} ${_hr_reported}
           ${CMAKE_SOURCE_DIR}/plots)
  set_tests_properties(test_harness_plots PROPERTIES SKIP_RETURN_CODE 77)
else()
  message(STATUS "ampbench: libpng not found (Debian: libpng-dev), test_harness_plots left out")
endif()

add_executable(test_harness_regress test_harness_regress.c)
target_link_libraries(test_harness_regress PRIVATE abharness)
add_test(NAME test_harness_regress COMMAND test_harness_regress $<TARGET_FILE:ampbench-regress> ${_hr_fixtures}
         ${CMAKE_SOURCE_DIR}/results/regress.conf)

add_test(NAME test_harness_run_all COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_harness_run_all.sh ${CMAKE_SOURCE_DIR}
         ${CMAKE_BINARY_DIR} ${AB_DATA_ROOT})
set_tests_properties(test_harness_run_all PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 240)
if(AB_SANITIZE)
  # The data-parallel run goes through mpirun: OpenMPI's plugin allocations look like leaks to
  # LeakSanitizer (see ab_mpi_test). The report and regress tests keep leak checking on.
  set_tests_properties(test_harness_run_all PROPERTIES ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1")
endif()

set(_hr_tests test_harness_report test_harness_regress test_harness_run_all)
if(PNG_FOUND)
  list(APPEND _hr_tests test_harness_plots)
endif()
set_tests_properties(${_hr_tests} PROPERTIES LABELS cpu)
