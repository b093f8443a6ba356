# test_plan: the planner unit tests, plus smoke tests of the rmacoll-plan
# tool (tools/plan.c) on shared cases: a plan checked by the reference
# executor, valid JSON, and the mismatch case failing with the rank named.
add_test(NAME ${name} COMMAND ${name})
set_tests_properties(${name} PROPERTIES TIMEOUT 120)
if(TARGET rmacoll-plan)
  add_test(NAME plan_tool_check
    COMMAND rmacoll-plan --case ${RMACOLL_CASES_DIR}/uneven_nodes_3_2.txt
            --scheduler node_shift --relay-buffer 4K --slots 4 --check)
  set_tests_properties(plan_tool_check PROPERTIES TIMEOUT 60
    PASS_REGULAR_EXPRESSION "check: ok \\(data, 2 calls")
  add_test(NAME plan_tool_json
    COMMAND rmacoll-plan --topology 2,3 --dist sparse:0.5 --count 7 --seed 5
            --json --rank 1)
  set_tests_properties(plan_tool_json PROPERTIES TIMEOUT 60
    PASS_REGULAR_EXPRESSION "^\\{\"case\":.*\"plans\":\\[\\{\"rank\":1,.*\"totals\":\\{\"rounds\":")
  add_test(NAME plan_tool_mismatch
    COMMAND rmacoll-plan --case ${RMACOLL_CASES_DIR}/mismatch_2x2.txt)
  set_tests_properties(plan_tool_mismatch PROPERTIES TIMEOUT 60
    PASS_REGULAR_EXPRESSION "fails on every rank with RMACOLL_ERR_MISMATCH.*rank 0 found a count mismatch")
  add_test(NAME plan_tool_mismatch_status
    COMMAND rmacoll-plan --case ${RMACOLL_CASES_DIR}/mismatch_2x2.txt)
  set_tests_properties(plan_tool_mismatch_status PROPERTIES TIMEOUT 60 WILL_FAIL TRUE)
endif()
if(TARGET rmacoll-plan)
  # --rank plans one rank only: a 4096-rank topology answers at once.
  add_test(NAME plan_tool_rank_only
    COMMAND rmacoll-plan --topology 512x8 --count 16 --rank 4095 --json)
  set_tests_properties(plan_tool_rank_only PROPERTIES TIMEOUT 60
    PASS_REGULAR_EXPRESSION "^\\{\"case\":\"topology 512x8.*\"nranks\":4096,\"nnodes\":512,.*\"plans\":\\[\\{\"rank\":4095,")
  # planner micro-benchmark: 64 ranks, node_shift, uniform counts
  add_test(NAME plan_tool_bench
    COMMAND rmacoll-plan --topology 8x8 --scheduler node_shift --bench 3)
  set_tests_properties(plan_tool_bench PROPERTIES TIMEOUT 60
    PASS_REGULAR_EXPRESSION "bench: rank 0 of 64 ranks on 8 nodes, scheduler node_shift: 190 tasks, 30 batches; [0-9.]+ us per build")
endif()
if(TARGET rmacoll-plan)
  # --sim over the documented model, every built-in scheduler, JSON
  add_test(NAME plan_tool_sim_all
    COMMAND rmacoll-plan --topology 4x4 --dist zipf:1.2 --count 4K --sim
            --scheduler all --model ${PROJECT_SOURCE_DIR}/docs/sim/fabric-h200-cx7.yaml --json)
  set_tests_properties(plan_tool_sim_all PROPERTIES TIMEOUT 60
    PASS_REGULAR_EXPRESSION "\"model\":\\{\"name\":\"H200 \\+ ConnectX-7, rail-only\",\"nic_GBps\":48.5,.*\"scheduler\":\"largest_first\",\"status\":\"RMACOLL_SUCCESS\",\"makespan_us\":[0-9.]+,.*\"scheduler\":\"xor\"")
  # a bad model file is refused naming the key
  add_test(NAME plan_tool_sim_bad_model
    COMMAND rmacoll-plan --topology 2x2 --model ${PROJECT_SOURCE_DIR}/tests/cases/README.md)
  set_tests_properties(plan_tool_sim_bad_model PROPERTIES TIMEOUT 60
    PASS_REGULAR_EXPRESSION "rmacoll-plan: --model: ")
endif()
