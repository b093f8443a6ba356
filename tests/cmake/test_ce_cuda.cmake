# tests/cmake/test_ce_cuda.cmake - CUDA stream ops of the ce and nvlink_kernel
# transports; 2 forked ranks on device rank % ndev. Needs a GPU: the test
# exits 77 (skipped) without one. Label gpu (run with ctest -L gpu).
if(RMACOLL_ENABLE_CE AND RMACOLL_HAVE_CUDA)
  target_link_libraries(test_ce_cuda PRIVATE CUDA::cudart)
  add_test(NAME test_ce_cuda COMMAND test_ce_cuda)
  set_tests_properties(test_ce_cuda PROPERTIES TIMEOUT 900 LABELS "gpu;ce;multiprocess"
    SKIP_RETURN_CODE 77)
else()
  set_target_properties(test_ce_cuda PROPERTIES EXCLUDE_FROM_ALL ON)
endif()
