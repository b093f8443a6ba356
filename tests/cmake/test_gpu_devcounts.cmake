# tests/cmake/test_gpu_devcounts.cmake - device-count calls
# (rmacoll_alltoallv_device_counts): counts written by a kernel, ordinary
# calls and graph replays, ranks as threads of one process. Needs the CUDA
# runtime and a GPU at run time (exit 77 = skipped without one).
if(RMACOLL_HAVE_CUDA AND TARGET CUDA::cudart)
  target_sources(test_gpu_devcounts PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/gpu_devcounts_kernels.cu
    ${CMAKE_CURRENT_SOURCE_DIR}/gpu_devcounts_check.c)
  target_link_libraries(test_gpu_devcounts PRIVATE CUDA::cudart Threads::Threads)
  add_test(NAME test_gpu_devcounts COMMAND test_gpu_devcounts)
  set_tests_properties(test_gpu_devcounts PROPERTIES TIMEOUT 600 LABELS "gpu"
    SKIP_RETURN_CODE 77)
else()
  set_target_properties(test_gpu_devcounts PROPERTIES EXCLUDE_FROM_ALL ON)
endif()
