# test_sched: the scheduler plugins it loads are MODULE libraries built
# from tests/plugins/sched_plugin_example.c; one good plugin and one per
# defect (SCHED_PLUGIN_DEFECT, see the source). Their paths reach the test
# as compile definitions.
set(_sched_plugins
  sched_plugin_example:0:RMACOLL_TEST_SCHED_PLUGIN
  sched_plugin_bad_abi:1:RMACOLL_TEST_SCHED_PLUGIN_BAD_ABI
  sched_plugin_bad_range:2:RMACOLL_TEST_SCHED_PLUGIN_BAD_RANGE
  sched_plugin_no_symbol:3:RMACOLL_TEST_SCHED_PLUGIN_NO_SYMBOL)
foreach(_p ${_sched_plugins})
  string(REPLACE ":" ";" _p ${_p})
  list(GET _p 0 _lib)
  list(GET _p 1 _defect)
  list(GET _p 2 _def)
  add_library(${_lib} MODULE ${CMAKE_CURRENT_SOURCE_DIR}/plugins/sched_plugin_example.c)
  # A plugin sees only the public headers and links nothing of rmacoll.
  target_include_directories(${_lib} PRIVATE ${PROJECT_SOURCE_DIR}/include)
  target_compile_definitions(${_lib} PRIVATE SCHED_PLUGIN_DEFECT=${_defect})
  target_compile_definitions(${name} PRIVATE ${_def}="$<TARGET_FILE:${_lib}>")
  add_dependencies(${name} ${_lib})
endforeach()
add_test(NAME ${name} COMMAND ${name})
set_tests_properties(${name} PROPERTIES TIMEOUT 120 LABELS "unit;sched")
