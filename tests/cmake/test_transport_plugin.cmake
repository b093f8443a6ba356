# test_transport_plugin: the example transport built out of tree (public
# headers only, nothing of rmacoll linked) as MODULE libraries, loaded by
# path from the config: ABI 2 (the current table), ABI 1 (the flat table,
# adapted) and ABI 0 (refused). Their paths reach the test as compile
# definitions.
set(_tp_plugins
  rmacoll_transport_example:2:RMACOLL_TEST_TRANSPORT_PLUGIN
  rmacoll_transport_example_v1:1:RMACOLL_TEST_TRANSPORT_PLUGIN_V1
  rmacoll_transport_example_v0:0:RMACOLL_TEST_TRANSPORT_PLUGIN_V0)
foreach(_p ${_tp_plugins})
  string(REPLACE ":" ";" _p ${_p})
  list(GET _p 0 _lib)
  list(GET _p 1 _abi)
  list(GET _p 2 _def)
  add_library(${_lib} MODULE ${CMAKE_CURRENT_SOURCE_DIR}/plugins/transport_example.c)
  target_include_directories(${_lib} PRIVATE ${PROJECT_SOURCE_DIR}/include)
  target_compile_definitions(${_lib} PRIVATE EXAMPLE_ABI=${_abi})
  target_link_libraries(${_lib} PRIVATE rt)
  target_compile_definitions(${name} PRIVATE ${_def}="$<TARGET_FILE:${_lib}>")
  add_dependencies(${name} ${_lib})
endforeach()
target_compile_definitions(${name} PRIVATE
  RMACOLL_TEST_NOT_A_PLUGIN="$<TARGET_FILE:sched_plugin_example>")
add_dependencies(${name} sched_plugin_example)
add_test(NAME ${name} COMMAND ${name})
set_tests_properties(${name} PROPERTIES TIMEOUT 900 LABELS "integration;multiprocess;plugin")
# rmacoll-perf --inter plugin:PATH (as the config takes it): the example
# plugin carries the traffic between two one-rank nodes, data checked; a
# path that cannot be read is refused before any rank starts.
if(TARGET rmacoll-perf)
  add_test(NAME perf_inter_plugin
    COMMAND rmacoll-perf --inter plugin:$<TARGET_FILE:rmacoll_transport_example>
            -np 2 --ppn 1 -b 1K -e 64K -n 2 -w 1)
  set_tests_properties(perf_inter_plugin PROPERTIES TIMEOUT 120 LABELS "multiprocess;plugin"
    PASS_REGULAR_EXPRESSION "inter_node plugin:[^ ]*librmacoll_transport_example[.]so.*\n +65536 .*# Out of bounds values : 0 OK")
  add_test(NAME perf_inter_plugin_missing
    COMMAND rmacoll-perf --inter plugin:${CMAKE_CURRENT_BINARY_DIR}/no-such-plugin.so -np 2)
  set_tests_properties(perf_inter_plugin_missing PROPERTIES TIMEOUT 30
    PASS_REGULAR_EXPRESSION "--inter plugin:[^ ]*/no-such-plugin.so: cannot read the transport plugin")
endif()
