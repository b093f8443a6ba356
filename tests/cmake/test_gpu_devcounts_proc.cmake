# tests/cmake/test_gpu_devcounts_proc.cmake - device-count calls
# (rmacoll_alltoallv_device_counts) with ranks as forked processes: the
# steps, capture and replays of test_gpu_devcounts (gpu_devcounts_check.c,
# the kernels of gpu_devcounts_kernels.cu), one node and 2 virtual nodes.
# Needs the CUDA runtime and a GPU at run time (exit 77 = skipped without
# one).
if(RMACOLL_HAVE_CUDA AND TARGET CUDA::cudart)
  target_sources(test_gpu_devcounts_proc PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/gpu_devcounts_kernels.cu
    ${CMAKE_CURRENT_SOURCE_DIR}/gpu_devcounts_check.c)
  target_link_libraries(test_gpu_devcounts_proc PRIVATE CUDA::cudart Threads::Threads)
  add_test(NAME test_gpu_devcounts_proc COMMAND test_gpu_devcounts_proc)
  set_tests_properties(test_gpu_devcounts_proc PROPERTIES TIMEOUT 900 LABELS "gpu;multiprocess"
    SKIP_RETURN_CODE 77)
else()
  set_target_properties(test_gpu_devcounts_proc PROPERTIES EXCLUDE_FROM_ALL ON)
endif()
